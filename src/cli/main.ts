// `stowage`: the admin CLI. It acts on the configured database directly (same environment as
// the service), so it needs no running server and no API key.
import { randomBytes } from 'node:crypto';
import { Command, InvalidArgumentError } from 'commander';
import { ConfigError, loadConfig } from '../config.ts';
import { AppError } from '../errors.ts';
import { createServices, type Services } from '../services/container.ts';
import { createStorage } from '../storage/open.ts';
import { type CorsCheck, isValidOrigin, stowageCorsRule } from '../storage/s3-cors.ts';
import { StowageError, StowageNetworkError } from '../../sdk/src/errors.ts';
import { packageVersion } from './version.ts';
import { ExitError, exitCodeFor, registerClientCommands } from './client.ts';

interface Io {
  out: (text: string) => void;
  err: (text: string) => void;
}

const UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  tb: 1e12,
  kib: 1024,
  mib: 1024 ** 2,
  gib: 1024 ** 3,
  tib: 1024 ** 4,
};

/** "10GB", "500MiB", "1048576", or "unlimited" / "default" (no limit of the workspace's own). */
export function parseSize(value: string): number | 'unlimited' {
  if (/^(unlimited|none|default)$/i.test(value)) return 'unlimited';
  const m = /^(\d+(?:\.\d+)?)\s*([a-z]*)$/i.exec(value.trim());
  const unit = m ? UNITS[m[2].toLowerCase()] : undefined;
  if (!m || unit === undefined) throw new InvalidArgumentError('use bytes or a size like 500MB, 10GiB, or "unlimited"');
  const bytes = Math.round(Number(m[1]) * unit);
  if (!Number.isSafeInteger(bytes) || bytes < 1) throw new InvalidArgumentError('must be at least 1 byte');
  return bytes;
}

/** "https://a.example,https://b.example" or "*". */
const parseOrigins = (value: string): string[] => {
  const origins = value
    .split(',')
    .map((o) => o.trim().replace(/\/+$/, ''))
    .filter(Boolean);
  const bad = origins.find((o) => !isValidOrigin(o));
  if (origins.length === 0 || bad !== undefined)
    throw new InvalidArgumentError(
      `origins are scheme://host[:port] or "*", comma-separated${bad ? ` (got "${bad}")` : ''}`,
    );
  return origins;
};

const keyType = (value: string) => {
  if (value !== 'public' && value !== 'private') throw new InvalidArgumentError('must be "public" or "private"');
  return value as 'public' | 'private';
};

/** Runs the CLI with `argv` (without node and script); returns the exit code. */
export async function runCli(
  argv: string[],
  env: Record<string, string | undefined> = process.env,
  io: Io = defaultIo,
): Promise<number> {
  let services: Services | undefined;
  const withServices = async <T>(fn: (s: Services) => Promise<T>): Promise<T> => {
    if (!services) services = await createServices(loadConfig(env));
    return fn(services);
  };
  const print = (json: boolean, value: unknown, human: () => string) =>
    io.out(json ? `${JSON.stringify(value)}\n` : `${human()}\n`);

  const program = new Command()
    .name('stowage')
    .version(packageVersion(), '-V, --version', 'print the version')
    .description(
      "Stowage. Admin commands (workspace, key, master-key, storage) act on the database and storage configured by the service's variables; " +
        'client commands (upload, files, folders, sources, token, settings) talk to the service at STOWAGE_URL with STOWAGE_API_KEY.',
    )
    .exitOverride()
    .configureOutput({ writeOut: io.out, writeErr: io.err });

  const workspace = program.command('workspace').description('Manage workspaces');
  workspace
    .command('create')
    .description('Create a workspace with a public key, a private key and a webhook secret')
    .requiredOption('--name <name>', 'workspace name')
    .option('--json', 'print exactly one JSON object')
    .action(async (opts: { name: string; json?: boolean }) => {
      const created = await withServices((s) => s.workspaces.create(opts.name));
      print(Boolean(opts.json), created, () =>
        [
          `Workspace created. Keep these keys; they will not be shown again.`,
          `  workspace_id:   ${created.workspace_id}`,
          `  public_key:     ${created.public_key}`,
          `  private_key:    ${created.private_key}`,
          `  webhook_secret: ${created.webhook_secret}`,
        ].join('\n'),
      );
    });
  workspace
    .command('list')
    .description('List workspaces')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const list = await withServices((s) => s.workspaces.list());
      print(Boolean(opts.json), list, () =>
        list.length ? list.map((w) => `${w.id}  ${w.created_at}  ${w.name}`).join('\n') : 'No workspaces.',
      );
    });

  workspace
    .command('set-quota')
    .description('Set the storage quota (402 above it) and, optionally, the maximum file size (413 above it)')
    .argument('<workspace_id>', 'workspace id')
    .argument('<quota>', 'e.g. 50GB, 2TiB, or "unlimited"', parseSize)
    .option('--max-file-size <size>', 'e.g. 2GB, or "default" for the server setting', parseSize)
    .option('--json', 'print JSON')
    .action(
      async (
        workspaceId: string,
        quota: number | 'unlimited',
        opts: { maxFileSize?: number | 'unlimited'; json?: boolean },
      ) => {
        // Commander would turn a null from a parser into "": limits travel as 'unlimited' until here.
        const orNull = (v: number | 'unlimited') => (v === 'unlimited' ? null : v);
        const limits = await withServices((s) =>
          s.workspaces.setLimits(workspaceId, {
            quotaBytes: orNull(quota),
            maxFileSize: opts.maxFileSize === undefined ? undefined : orNull(opts.maxFileSize),
          }),
        );
        print(
          Boolean(opts.json),
          limits,
          () =>
            `Workspace ${limits.workspace_id}: quota ${limits.quota_bytes ?? 'unlimited'} bytes (${limits.used_bytes} used), max file size ${limits.max_file_size ?? 'server default'}.`,
        );
      },
    );

  registerClientCommands(program, { out: io.out, err: io.err, env, tty: Boolean(process.stderr.isTTY) }, print);

  const key = program.command('key').description('Manage API keys');
  key
    .command('create')
    .description('Create an API key; it is printed once')
    .requiredOption('--workspace <id>', 'workspace id')
    .requiredOption('--type <type>', 'public or private', keyType)
    .option('--json', 'print JSON')
    .action(async (opts: { workspace: string; type: 'public' | 'private'; json?: boolean }) => {
      const created = await withServices((s) => s.workspaces.createKey(opts.workspace, opts.type));
      print(
        Boolean(opts.json),
        created,
        () => `Created ${created.type} key ${created.id}. Keep it; it will not be shown again:\n  ${created.key}`,
      );
    });
  key
    .command('list')
    .description('List the keys of a workspace (hints only; keys are stored as hashes)')
    .requiredOption('--workspace <id>', 'workspace id')
    .option('--json', 'print JSON')
    .action(async (opts: { workspace: string; json?: boolean }) => {
      const keys = await withServices((s) => s.workspaces.listKeys(opts.workspace));
      print(
        Boolean(opts.json),
        keys,
        () =>
          keys
            .map(
              (k) =>
                `${k.id}  ${k.type.padEnd(7)}  ${k.hint}  created ${k.created_at}${k.revoked_at ? `  REVOKED ${k.revoked_at}` : ''}`,
            )
            .join('\n') || 'No keys.',
      );
    });
  key
    .command('revoke')
    .description('Revoke a key; requests with it get 401 at once')
    .argument('<key_id>', 'id of the key (see key list)')
    .option('--json', 'print JSON')
    .action(async (keyId: string, opts: { json?: boolean }) => {
      const revoked = await withServices((s) => s.workspaces.revokeKey(keyId));
      print(Boolean(opts.json), revoked, () => `Revoked ${revoked.type} key ${revoked.id} (${revoked.hint}).`);
    });

  key
    .command('rotate')
    .description('Issue a new key of the same type and retire this one (after --grace seconds, default at once)')
    .argument('<key_id>', 'id of the key (see key list)')
    .option(
      '--grace <seconds>',
      'how long the old key keeps working',
      (v) => {
        if (!/^\d{1,8}$/.test(v)) throw new InvalidArgumentError('must be whole seconds');
        return Number(v);
      },
      0,
    )
    .option('--json', 'print JSON')
    .action(async (keyId: string, opts: { grace: number; json?: boolean }) => {
      const r = await withServices((s) => s.workspaces.rotateKey(keyId, opts.grace));
      print(
        Boolean(opts.json),
        r,
        () =>
          `New ${r.new.type} key ${r.new.id}. Keep it; it will not be shown again:\n  ${r.new.key}\nThe old key ${r.old.hint} stops working at ${r.old.revoked_at}.`,
      );
    });

  const master = program.command('master-key').description('Rotate the key that encrypts stored secrets');
  master
    .command('generate')
    .description('Print a new random master key (base64), to set as STOWAGE_MASTER_KEY')
    .action(() => {
      io.out(`${randomBytes(32).toString('base64')}\n`);
    });
  master
    .command('rotate')
    .description(
      'Re-encrypt every stored secret under STOWAGE_MASTER_KEY. First give every node the new key as STOWAGE_MASTER_KEY and the old one in STOWAGE_MASTER_KEY_PREVIOUS; after this, drop the old one.',
    )
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const result = await withServices(async (s) => ({
        sources: await s.sources.resealAll(),
        webhook_secrets: await s.workspaces.resealAll(),
        delivery_keys: await s.workspaces.resealDeliveryKeys(),
      }));
      print(
        Boolean(opts.json),
        result,
        () =>
          `Re-encrypted ${result.sources} source secret(s), ${result.webhook_secrets} webhook secret(s) and ${result.delivery_keys} delivery key(s) under the current master key. STOWAGE_MASTER_KEY_PREVIOUS can now be removed.`,
      );
    });

  const storage = program.command('storage').description('Check the file storage (STOWAGE_STORAGE, S3_*)');
  storage
    .command('cors')
    .description(
      "Check that the S3 bucket's CORS lets browsers on other origins upload multipart parts (PUT to presigned URLs, ETag exposed); " +
        "with --apply, add the rule (the bucket's other rules are kept). Exit 0 when browsers can upload, 1 otherwise, 78 without S3 storage.",
    )
    .option('--apply', 'add the rule to the bucket')
    .option(
      '--origins <list>',
      'comma-separated page origins, e.g. https://a.example,https://b.example (default: any origin)',
      parseOrigins,
    )
    .option('--json', 'print JSON')
    .action(async (opts: { apply?: boolean; origins?: string[]; json?: boolean }) => {
      // The service's own driver (endpoint, path style, credentials), not prepared: no database needed.
      const bucketStorage = createStorage(loadConfig(env));
      const bucketCors = bucketStorage.bucketCors;
      if (!bucketCors)
        throw new ExitError(
          `STOWAGE_STORAGE is not "s3": ${bucketStorage.description} and part uploads go through the service, so there is no bucket CORS to set`,
          78,
        );
      const bucket = bucketCors.bucket;
      const cors = { origins: opts.origins, timeoutMs: 15_000 };
      const rule = stowageCorsRule(opts.origins);
      const explain = (c: CorsCheck): string[] => {
        if (c.status === 'missing') {
          return [
            'Browsers on other origins cannot upload multipart parts until the bucket has this rule (S3 uses the first matching rule, so it goes first):',
            JSON.stringify(rule, null, 2),
            `Apply it with: stowage storage cors --apply${opts.origins ? ` --origins ${opts.origins.join(',')}` : ' [--origins https://a.example,https://b.example]'}`,
          ];
        }
        if (c.status === 'unsupported') {
          return [
            "Browser multipart uploads from other origins need the storage server's own CORS setting",
            '(OpenStack Swift: cors_preflight_allow_origin in [filter:s3api] and cors_allow_origin in [app:proxy-server]; see docs/deploy.md).',
          ];
        }
        return [];
      };
      const json = (c: CorsCheck) => ({
        status: c.status,
        bucket: c.bucket,
        origins: c.origins ?? null,
        detail: c.detail,
        code: c.code,
        http_status: c.httpStatus,
        rules: c.rules,
        rule,
      });
      let result: CorsCheck;
      try {
        if (opts.apply) {
          const r = await bucketCors.apply(cors);
          result = r.after;
          print(Boolean(opts.json), { ...json(r.after), applied: r.applied, before: r.before.status }, () =>
            [
              r.applied ? `Applied the CORS rule to bucket "${bucket}".` : `Nothing applied to bucket "${bucket}".`,
              `S3 bucket CORS: ${r.after.status}: ${r.after.detail}`,
              ...(r.applied ? [] : explain(r.after)),
            ].join('\n'),
          );
        } else {
          result = await bucketCors.check(cors);
          print(Boolean(opts.json), json(result), () =>
            [`S3 bucket CORS: ${result.status}: ${result.detail}`, ...explain(result)].join('\n'),
          );
        }
      } finally {
        await bucketStorage.close?.();
      }
      if (result.status !== 'ok') throw new ExitError('', 1);
    });

  program
    .command('worker')
    .description(
      'Run background jobs (webhooks, sweeps, transcodes) and serve no API, with the same variables as the server; ' +
        'needs PostgreSQL (DATABASE_URL). Stops cleanly on SIGTERM.',
    )
    .action(async () => {
      // The server's entry point runs the worker when its first argument is `worker`, as it is here.
      await import('../main.ts');
    });

  try {
    await program.parseAsync(argv, { from: 'user' });
    return 0;
  } catch (err) {
    const e = err as { code?: string; exitCode?: number; message?: string };
    if (e.code === 'commander.helpDisplayed' || e.code === 'commander.version' || e.code === 'commander.help') return 0;
    if (e.code?.startsWith('commander.')) return 2;
    if (err instanceof ConfigError) {
      io.err(`stowage: ${err.message}\n`);
      return 78;
    }
    if (err instanceof AppError) {
      io.err(`stowage: ${err.message}\n`);
      return err.status === 404 ? 3 : 1;
    }
    if (err instanceof ExitError) {
      if (err.message) io.err(`stowage: ${err.message}\n`);
      return err.exitCode;
    }
    if (err instanceof StowageNetworkError) {
      io.err(`stowage: ${err.message}\n`);
      return 69;
    }
    if (err instanceof StowageError) {
      io.err(`stowage: ${err.message} (HTTP ${err.status}${err.errorCode ? ` ${err.errorCode}` : ''})\n`);
      return exitCodeFor(err);
    }
    io.err(`stowage: ${e.message ?? String(err)}\n`);
    return 1;
  } finally {
    await services?.close();
  }
}

const defaultIo: Io = {
  out: (t) => process.stdout.write(t),
  err: (t) => process.stderr.write(t),
};

const isMain = process.argv[1] && /(cli[\\/]main\.ts|bin[\\/]stowage(\.js)?)$/.test(process.argv[1]);
if (isMain) {
  void runCli(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
  });
}
