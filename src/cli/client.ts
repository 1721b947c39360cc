// Client commands of `stowage`, over the SDK: they talk to a running service, configured by
// STOWAGE_URL and STOWAGE_API_KEY (the admin commands talk to the database instead).
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import cliProgress from 'cli-progress';
import { type Command, InvalidArgumentError } from 'commander';
import { Stowage, StowageAbortError, StowageError, signDeliveryUrl } from '../../sdk/src/index.ts';
import { fileFromPath } from '../../sdk/src/node.ts';
import type { MultipartSession, WorkspaceSettings } from '../../sdk/src/types.ts';

export interface ClientIo {
  out: (text: string) => void;
  err: (text: string) => void;
  env: Record<string, string | undefined>;
  /** Whether stderr is a terminal (progress bars are drawn only then). */
  tty: boolean;
}

/** A failure with the exit code a shell user can act on. */
export class ExitError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}

/** 3 not found, 4 key refused, 5 conflict, 1 anything else. */
export function exitCodeFor(err: unknown): number {
  if (err instanceof StowageError) {
    if (err.status === 404) return 3;
    if (err.status === 401 || err.status === 403) return 4;
    if (err.status === 409) return 5;
  }
  return 1;
}

function client(io: ClientIo): Stowage {
  const baseUrl = io.env.STOWAGE_URL;
  const apiKey = io.env.STOWAGE_API_KEY;
  if (!baseUrl || !apiKey)
    throw new ExitError('set STOWAGE_URL (e.g. http://127.0.0.1:3000) and STOWAGE_API_KEY to use client commands', 78);
  return new Stowage({ baseUrl, apiKey });
}

/** Where interrupted multipart uploads are remembered, to be resumed by running the command again. */
function statePath(io: ClientIo): string {
  return (
    io.env.STOWAGE_STATE_FILE ??
    join(io.env.XDG_STATE_HOME ?? join(homedir(), '.local', 'state'), 'stowage', 'uploads.json')
  );
}

/**
 * An interrupted upload, by the file's absolute path: its session, and what the file and the
 * options were when it began. A run that finds another file (size, modification time) or other
 * options refuses to resume it rather than finish a file from two different sources.
 */
interface SavedUpload {
  session: MultipartSession;
  size: number;
  mtimeMs: number;
  name: string;
  options: { folder?: string; tags?: string; metadata?: string; randomPrefix?: boolean };
}

type UploadState = Record<string, SavedUpload>;

/** What differs between a saved upload and this run, in words; [] when it may resume. */
function changesSince(saved: SavedUpload, now: Omit<SavedUpload, 'session'>): string[] {
  const changes: string[] = [];
  if (saved.size !== now.size) changes.push(`the file's size (${saved.size} → ${now.size} bytes)`);
  else if (Math.round(saved.mtimeMs) !== Math.round(now.mtimeMs))
    changes.push(
      `the file's modification time (${new Date(saved.mtimeMs).toISOString()} → ${new Date(now.mtimeMs).toISOString()})`,
    );
  if (saved.name !== now.name) changes.push(`the name (${saved.name} → ${now.name})`);
  for (const k of ['folder', 'tags', 'metadata', 'randomPrefix'] as const) {
    if (saved.options[k] !== now.options[k])
      changes.push(
        `--${k === 'randomPrefix' ? 'random-prefix' : k} (${saved.options[k] ?? 'none'} → ${now.options[k] ?? 'none'})`,
      );
  }
  return changes;
}

/** Entries of the old format (keyed path:size:mtime, holding the bare session) are dropped. */
function isSaved(value: unknown): value is SavedUpload {
  return Boolean(value && typeof value === 'object' && 'session' in value && 'options' in value);
}

function readState(path: string): UploadState {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as UploadState;
  } catch {
    return {};
  }
}

function writeState(path: string, state: UploadState): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  writeFileSync(path, JSON.stringify(state), { mode: 0o600 });
}

const human = (bytes: number) => {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let n = bytes;
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${n.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
};

/** A command-line JSON object, or exit 2 naming the option. */
function jsonObject(text: string, option: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new ExitError(`${option} must be a JSON object`, 2);
  }
  if (!value || typeof value !== 'object' || Array.isArray(value))
    throw new ExitError(`${option} must be a JSON object`, 2);
  return value as Record<string, unknown>;
}

/** "a, b,,c" → ["a","b","c"]; "" → [] (clears a list). */
const list = (value: string) =>
  value
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean);

const positiveInt = (value: string) => {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < 1)
    throw new InvalidArgumentError('must be a whole number of at least 1');
  return n;
};

const OVERRIDABLE = ['folder', 'tags', 'transform'] as const;

const overrides = (value: string) => {
  const names = list(value);
  const bad = names.filter((n) => !(OVERRIDABLE as readonly string[]).includes(n));
  if (bad.length) throw new InvalidArgumentError(`unknown ${bad.join(', ')} (use ${OVERRIDABLE.join(', ')})`);
  return Object.fromEntries(OVERRIDABLE.map((n) => [n, names.includes(n)])) as Record<
    (typeof OVERRIDABLE)[number],
    boolean
  >;
};

function settingsText(w: WorkspaceSettings): string {
  const rows: [string, string][] = [
    ['workspace_id', w.workspace_id],
    ['name', w.name],
    ['allowed_origins', w.allowed_origins.length ? w.allowed_origins.join(', ') : '(any origin)'],
    [
      'webhook_origins',
      w.webhook_origins.length ? w.webhook_origins.join(', ') : '(none: public keys may not set webhook_url)',
    ],
    ['signed_transformations', w.signed_transformations ? 'on (transformation URLs must be signed)' : 'off'],
    ['quota', w.quota_bytes === null ? 'unlimited' : human(w.quota_bytes)],
    ['max_file_size', w.max_file_size === null ? 'service default' : human(w.max_file_size)],
    ['used', human(w.used_bytes)],
  ];
  return rows.map(([k, v]) => `${k.padEnd(22)} ${v}`).join('\n');
}

export function registerClientCommands(
  program: Command,
  io: ClientIo,
  print: (json: boolean, value: unknown, human: () => string) => void,
): void {
  program
    .command('upload')
    .description(
      'Upload files (multipart above --multipart-threshold, resumable: run the same command again after Ctrl-C)',
    )
    .argument('<files...>', 'files to upload')
    .option('--folder <path>', 'destination folder, e.g. photos/2026')
    .option('--tags <list>', 'comma-separated tags')
    .option('--metadata <json>', 'a JSON object stored with each file')
    .option('--random-prefix', 'add a random part to the stored names')
    .option(
      '--multipart-threshold <bytes>',
      'files this large or larger go multipart',
      (v) => Number(v),
      16 * 1024 * 1024,
    )
    .option('--parallel <n>', 'parts in flight per file', (v) => Number(v), 4)
    .option('--restart', 'give up an interrupted upload of these files and start them over')
    .option('--json', 'print one JSON array of file records')
    .action(
      async (
        files: string[],
        opts: {
          folder?: string;
          tags?: string;
          metadata?: string;
          randomPrefix?: boolean;
          multipartThreshold: number;
          parallel: number;
          restart?: boolean;
          json?: boolean;
        },
      ) => {
        const api = client(io);
        const metadata = opts.metadata === undefined ? undefined : jsonObject(opts.metadata, '--metadata');
        for (const f of files) {
          try {
            if (!statSync(f).isFile()) throw new Error();
          } catch {
            throw new ExitError(`${f}: no such file`, 2);
          }
        }
        const stateFile = statePath(io);
        const controller = new AbortController();
        const onSigint = () => controller.abort();
        process.once('SIGINT', onSigint);
        const bars =
          io.tty && !opts.json
            ? new cliProgress.MultiBar(
                {
                  format: '{name} |{bar}| {percentage}% {done}/{size} {speed}/s ETA {eta_formatted}',
                  hideCursor: true,
                  stream: process.stderr,
                },
                cliProgress.Presets.shades_classic,
              )
            : undefined;
        const records: unknown[] = [];
        try {
          for (const path of files) {
            const { blob, name } = await fileFromPath(path);
            const st = statSync(path);
            const key = resolve(path);
            const state = readState(stateFile);
            const now = {
              size: st.size,
              mtimeMs: st.mtimeMs,
              name,
              options: {
                folder: opts.folder,
                tags: opts.tags,
                metadata: opts.metadata,
                randomPrefix: opts.randomPrefix,
              },
            };
            const saved = isSaved(state[key]) ? state[key] : undefined;
            if (saved && opts.restart) {
              await api.abortMultipart(saved.session.session_id).catch(() => {});
              delete state[key];
              writeState(stateFile, state);
            } else if (saved) {
              const changes = changesSince(saved, now);
              if (changes.length > 0)
                throw new ExitError(
                  `${path}: cannot resume the interrupted upload: ${changes.join(', ')} changed since it began. ` +
                    'Run it with the same file and options, or add --restart to start it over.',
                  5,
                );
            }
            const started = Date.now();
            const bar = bars?.create(blob.size, 0, {
              name: name.slice(0, 30).padEnd(30),
              size: human(blob.size),
              done: human(0),
              speed: human(0),
            });
            const record = await api.uploadFile(blob, name, {
              folder: opts.folder,
              tags: opts.tags
                ?.split(',')
                .map((t) => t.trim())
                .filter(Boolean),
              metadata,
              randomPrefix: opts.randomPrefix,
              multipartThreshold: opts.multipartThreshold,
              parallel: opts.parallel,
              signal: controller.signal,
              resume: opts.restart ? undefined : saved?.session,
              onSession: (session) => writeState(stateFile, { ...readState(stateFile), [key]: { ...now, session } }),
              onProgress: (p) => {
                const seconds = Math.max(0.001, (Date.now() - started) / 1000);
                bar?.update(p.loaded, { done: human(p.loaded), speed: human(p.loaded / seconds) });
              },
            });
            const after = readState(stateFile);
            if (after[key]) {
              delete after[key];
              writeState(stateFile, after);
            }
            records.push(record);
            if (!bars && !opts.json) io.out(`${record.name}  ${human(record.size)}  ${record.url}\n`);
          }
        } catch (err) {
          if (err instanceof StowageAbortError)
            throw new ExitError('interrupted; run the same command again to resume', 130);
          throw err;
        } finally {
          bars?.stop();
          process.off('SIGINT', onSigint);
        }
        if (opts.json) io.out(`${JSON.stringify(records)}\n`);
        else if (bars) for (const r of records as { name: string; url: string }[]) io.out(`${r.name}  ${r.url}\n`);
      },
    );

  const files = program.command('files').description('List and manage files (private key)');
  files
    .command('ls')
    .description('List files, newest first')
    .option('--folder <folder_no>', 'only this folder')
    .option('--search <text>', 'name contains')
    .option('--tags <list>', 'all of these tags')
    .option('--page <n>', 'page', (v) => Number(v), 1)
    .option('--limit <n>', 'per page (1-100)', (v) => Number(v), 20)
    .option('--json', 'print JSON')
    .action(
      async (opts: {
        folder?: string;
        search?: string;
        tags?: string;
        page: number;
        limit: number;
        json?: boolean;
      }) => {
        const res = await client(io).listFiles({
          folder_no: opts.folder,
          search: opts.search,
          tags: opts.tags,
          page: opts.page,
          limit: opts.limit,
        });
        print(Boolean(opts.json), res, () =>
          res.files.length
            ? `${res.files
                .map((f) => `${f.file_no}  ${human(f.size).padStart(10)}  ${f.created_at}  ${f.path}`)
                .join('\n')}\n(page ${res.meta.page}, ${res.meta.total} files)`
            : 'No files.',
        );
      },
    );
  files
    .command('get')
    .argument('<file_no>')
    .option('--json', 'print JSON')
    .action(async (fileNo: string, opts: { json?: boolean }) => {
      const f = await client(io).getFile(fileNo);
      print(Boolean(opts.json), f, () =>
        Object.entries(f)
          .map(([k, v]) => `${k.padEnd(14)} ${typeof v === 'object' ? JSON.stringify(v) : v}`)
          .join('\n'),
      );
    });
  files
    .command('rename')
    .argument('<file_no>')
    .argument('<name>')
    .option('--json', 'print JSON')
    .action(async (fileNo: string, name: string, opts: { json?: boolean }) => {
      const f = await client(io).renameFile(fileNo, name);
      print(Boolean(opts.json), f, () => `Renamed to ${f.path}`);
    });
  files
    .command('mv')
    .description('Move a file into a folder ("/" for the root)')
    .argument('<file_no>')
    .argument('<folder_no>')
    .option('--json', 'print JSON')
    .action(async (fileNo: string, folderNo: string, opts: { json?: boolean }) => {
      const f = await client(io).updateFile(fileNo, { folder_no: folderNo === '/' ? null : folderNo });
      print(Boolean(opts.json), f, () => `Moved to ${f.path}`);
    });
  files
    .command('rm')
    .argument('<file_no>')
    .option('--json', 'print JSON')
    .action(async (fileNo: string, opts: { json?: boolean }) => {
      await client(io).deleteFile(fileNo);
      print(Boolean(opts.json), { deleted: fileNo }, () => `Deleted ${fileNo}`);
    });

  const folders = program.command('folders').description('List and manage folders (private key)');
  folders
    .command('ls')
    .option('--parent <folder_no>', 'children of this folder (default: the root)')
    .option('--json', 'print JSON')
    .action(async (opts: { parent?: string; json?: boolean }) => {
      const res = await client(io).listFolders({ parent_folder_no: opts.parent, limit: 100 });
      print(Boolean(opts.json), res, () =>
        res.folders.length
          ? res.folders
              .map(
                (f) =>
                  `${f.folder_no}  ${String(f.total_items).padStart(6)} files  ${human(f.total_size).padStart(10)}  ${f.path}`,
              )
              .join('\n')
          : 'No folders.',
      );
    });
  folders
    .command('create')
    .argument('<name>')
    .option('--parent <folder_no>', 'inside this folder')
    .option('--json', 'print JSON')
    .action(async (name: string, opts: { parent?: string; json?: boolean }) => {
      const f = await client(io).createFolder(name, opts.parent);
      print(Boolean(opts.json), f, () => `Created ${f.path} (${f.folder_no})`);
    });
  folders
    .command('rm')
    .description('Delete a folder: an empty one, or with --recursive everything in it (exit 5 when it is not empty)')
    .argument('<folder_no>')
    .option('-r, --recursive', 'also delete every file and folder inside')
    .option('--json', 'print JSON')
    .action(async (folderNo: string, opts: { json?: boolean; recursive?: boolean }) => {
      await client(io).deleteFolder(folderNo, { recursive: opts.recursive });
      print(Boolean(opts.json), { deleted: folderNo }, () =>
        opts.recursive ? `Deleted folder ${folderNo} and everything in it` : `Deleted folder ${folderNo}`,
      );
    });

  const sources = program.command('sources').description('Manage sources (private key)');
  sources
    .command('ls')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const res = await client(io).listSources({ limit: 100 });
      print(Boolean(opts.json), res, () =>
        res.sources.length
          ? res.sources
              .map((s) => `${s.id}  ${s.type.padEnd(12)}  ${s.is_active ? 'active  ' : 'inactive'}  ${s.name}`)
              .join('\n')
          : 'No sources.',
      );
    });
  sources
    .command('add')
    .argument('<name>')
    .requiredOption('--type <type>', 's3, azure, google_cloud or image_source')
    .requiredOption('--config <json>', 'the configuration as a JSON object')
    .option('--json', 'print JSON')
    .action(async (name: string, opts: { type: string; config: string; json?: boolean }) => {
      let configuration: Record<string, unknown>;
      try {
        configuration = JSON.parse(opts.config);
      } catch {
        throw new ExitError('--config must be a JSON object', 2);
      }
      const s = await client(io).createSource({ name, type: opts.type as never, configuration });
      print(Boolean(opts.json), s, () => `Created source ${s.name} (${s.id})`);
    });
  sources
    .command('test')
    .argument('<id>')
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { json?: boolean }) => {
      const r = await client(io).testSource(id);
      print(Boolean(opts.json), r, () =>
        r.ok ? `ok (${r.latency_ms} ms)` : `failed: ${r.error} (${r.latency_ms} ms)`,
      );
      if (!r.ok) throw new ExitError('', 1);
    });
  sources
    .command('rm')
    .argument('<id>')
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { json?: boolean }) => {
      await client(io).deleteSource(id);
      print(Boolean(opts.json), { deleted: id }, () => `Deleted source ${id}`);
    });

  const preset = program
    .command('preset')
    .description('Transformation presets: delivery URLs name them as t_<name> (private key)');
  preset
    .command('list')
    .alias('ls')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const res = await client(io).listPresets();
      print(Boolean(opts.json), res, () =>
        res.presets.length
          ? res.presets.map((p) => `${`t_${p.name}`.padEnd(24)} ${p.transformation}`).join('\n')
          : `No presets (a workspace may have ${res.max_presets}).`,
      );
    });
  preset
    .command('get')
    .argument('<name>')
    .option('--json', 'print JSON')
    .action(async (name: string, opts: { json?: boolean }) => {
      const p = await client(io).getPreset(name);
      print(Boolean(opts.json), p, () => p.transformation);
    });
  preset
    .command('set')
    .description('Create the preset, or replace its transformation')
    .argument('<name>', 'lower-case letters, digits, "_" and "-"; used as t_<name>')
    .argument('<transformation>', 'comma-separated tokens, e.g. c_fill,w_200,h_200')
    .option('--json', 'print JSON')
    .action(async (name: string, transformation: string, opts: { json?: boolean }) => {
      const p = await client(io).setPreset(name, transformation);
      print(Boolean(opts.json), p, () => `t_${p.name} = ${p.transformation}`);
    });
  preset
    .command('delete')
    .alias('rm')
    .argument('<name>')
    .option('--json', 'print JSON')
    .action(async (name: string, opts: { json?: boolean }) => {
      await client(io).deletePreset(name);
      print(Boolean(opts.json), { deleted: name }, () => `Deleted preset ${name}`);
    });

  const token = program.command('token').description('Upload tokens: one upload without an API key (private key)');
  token
    .command('create')
    .description('Create a single-use upload token; prints its upload_url and expiry')
    .argument('<file_name>', 'the stored name, unless the uploader sends X-File-Name')
    .option('--folder <path>', 'destination folder')
    .option('--tags <list>', 'comma-separated tags')
    .option('--transform <tokens>', 'transformation applied before storing, e.g. w_1200,f_webp')
    .option('--max-size <bytes>', 'largest accepted file in bytes (service default 5 MiB)', positiveInt)
    .option('--ttl <seconds>', 'life of the token (service default 300)', positiveInt)
    .option('--metadata <json>', 'a JSON object stored with the file')
    .option('--custom-id <id>', 'custom_id of the file')
    .option('--random-prefix', 'add a random part to the stored name')
    .option('--allow-override <list>', `what the uploader may change: ${OVERRIDABLE.join(',')}`, overrides)
    .option('--json', 'print the whole answer as JSON')
    .action(
      async (
        fileName: string,
        opts: {
          folder?: string;
          tags?: string;
          transform?: string;
          maxSize?: number;
          ttl?: number;
          metadata?: string;
          customId?: string;
          randomPrefix?: boolean;
          allowOverride?: Record<string, boolean>;
          json?: boolean;
        },
      ) => {
        const metadata = opts.metadata === undefined ? undefined : jsonObject(opts.metadata, '--metadata');
        const t = await client(io).generateToken({
          fileName,
          folder: opts.folder,
          tags: opts.tags === undefined ? undefined : list(opts.tags),
          transform: opts.transform,
          maxFileSize: opts.maxSize,
          ttlSeconds: opts.ttl,
          metadata,
          customId: opts.customId,
          randomPrefix: opts.randomPrefix,
          allowOverride: opts.allowOverride,
        });
        print(
          Boolean(opts.json),
          t,
          () =>
            `${t.upload_url}\nexpires ${new Date(t.expire_at * 1000).toISOString()} (single use, at most ${human(t.policy.max_file_size)})`,
        );
      },
    );

  const settings = program
    .command('settings')
    .description("The workspace's browser settings: allowed origins, webhook origins (private key)");
  settings
    .command('show')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const w = await client(io).getWorkspace();
      print(Boolean(opts.json), w, () => settingsText(w));
    });
  settings
    .command('set')
    .description('Change the lists given ("" empties one)')
    .option(
      '--allowed-origins <list>',
      'comma-separated page origins that may use the public key and upload tokens, e.g. https://shop.example.com,https://*.example.com; "" = any origin',
    )
    .option(
      '--webhook-origins <list>',
      'comma-separated origins a public-key upload may send webhook_url to; "" = none',
    )
    .option(
      '--signed-transformations <on|off>',
      'on: delivery URLs with transformation tokens work only when signed (stowage url sign)',
      onOff,
    )
    .option('--json', 'print JSON')
    .action(
      async (opts: {
        allowedOrigins?: string;
        webhookOrigins?: string;
        signedTransformations?: boolean;
        json?: boolean;
      }) => {
        if (
          opts.allowedOrigins === undefined &&
          opts.webhookOrigins === undefined &&
          opts.signedTransformations === undefined
        )
          throw new ExitError('give --allowed-origins, --webhook-origins and/or --signed-transformations', 2);
        const w = await client(io).updateWorkspace({
          allowedOrigins: opts.allowedOrigins === undefined ? undefined : list(opts.allowedOrigins),
          webhookOrigins: opts.webhookOrigins === undefined ? undefined : list(opts.webhookOrigins),
          signedTransformations: opts.signedTransformations,
        });
        print(Boolean(opts.json), w, () => settingsText(w));
      },
    );

  const url = program.command('url').description('Delivery URLs: sign them for workspaces with signed transformations');
  url
    .command('sign')
    .argument('<url>', 'a delivery URL, e.g. https://media.example.com/<workspace_id>/w_400,f_auto/photos/a.jpg')
    .description(
      'Sign a delivery URL with the delivery key: offline with STOWAGE_DELIVERY_KEY, else the key is fetched with the private key',
    )
    .option('--expires-in <seconds>', 'the URL stops working after this long (default: never)', positiveInt)
    .action(async (target: string, opts: { expiresIn?: number }) => {
      try {
        new URL(target);
      } catch {
        throw new ExitError('the URL must be absolute, e.g. https://media.example.com/<workspace_id>/w_400/a.jpg', 2);
      }
      const key = io.env.STOWAGE_DELIVERY_KEY || (await client(io).getDeliveryKey());
      if (!key.startsWith('stw_dk_')) throw new ExitError('STOWAGE_DELIVERY_KEY is not a delivery key (stw_dk_…)', 2);
      io.out(`${await signDeliveryUrl(target, key, { expiresIn: opts.expiresIn })}\n`);
    });
  url
    .command('key')
    .description('Print the delivery key (private key), to set STOWAGE_DELIVERY_KEY on servers that sign URLs')
    .option('--rotate', 'replace it first: URLs signed with the old key stop working')
    .action(async (opts: { rotate?: boolean }) => {
      const c = client(io);
      io.out(`${opts.rotate ? await c.rotateDeliveryKey() : await c.getDeliveryKey()}\n`);
    });
}

const onOff = (value: string) => {
  if (/^(on|true|yes)$/i.test(value)) return true;
  if (/^(off|false|no)$/i.test(value)) return false;
  throw new InvalidArgumentError('must be on or off');
};
