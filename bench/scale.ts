// bench/scale (issue 18): Stowage on a library of millions of file records. Seeds the
// database when it is not seeded at that size yet (scripts/seed.ts does the same alone),
// starts the server as `npm start` does on it, and measures p50/p99 of each operation of the
// issue's table with 1 and with 32 concurrent clients, wrk being the client; then the same
// upload on an empty database, for the 1.5x target. Around every run the server's own max
// event-loop delay is read from its /metrics (the 20 ms target). Prints one table, last, ready
// to paste into the README; --verbose adds the query plans of the repositories' statements
// and the `meta` of each list's answer. Asserts nothing.
//
//   npm run bench:scale -- [--db sqlite|postgres] [--files 1M] [--workspaces W] [--clients 1,32]
//                          [--seconds 10] [--max-seconds 60] [--cursor-seconds 60] [--data-dir DIR]
//                          [--url postgres://…/db] [--only first-page,cursor-page,rename,…]
//                          [--verbose] [--no-empty] [--cleanup]
//
// Defaults: SQLite 1M files in one workspace, PostgreSQL 10M over 1,000 workspaces (the big
// one holding half); data in data/scale-<db>, PostgreSQL database stowage_scale. A seed of the
// right size is reused, so a second run only measures. --cleanup deletes the seeded database
// and its data directory at the end. --cursor-seconds caps the untimed walk by cursor to the
// deep page (the row then names the page reached). wrk must be installed (Debian: wrk).
import { existsSync, rmSync } from 'node:fs';
import { loadavg } from 'node:os';
import { resolve } from 'node:path';
import { Args } from './scale/args.ts';
import { walkCursor } from './scale/cursor.ts';
import { resetLoopWindow, scrapeLoopMax } from './scale/loop.ts';
import { explain } from './scale/explain.ts';
import { type Measured, deleteUploads, measure, restoreNames, settle } from './scale/measure.ts';
import { cursorLabel, type Operation, operations } from './scale/operations.ts';
import { table } from './scale/report.ts';
import { Stowage } from './scale/server.ts';
import { type SeedInfo, infoPath, readInfo } from './scale/seed/info.ts';
import { type Log, stopwatchLog } from './scale/seed/log.ts';
import { dropPostgres, seed } from './scale/seed/seed.ts';

const DEFAULT_PG = 'postgres://postgres@127.0.0.1:5432/stowage_scale';

interface Settings {
  /** Operation ids to run (all when empty). */
  only: string[];
  clients: number[];
  seconds: number;
  maxSeconds: number;
  cursorSeconds: number;
  run: string;
  log: Log;
}

/**
 * The cursor row's request, once walked to its page (labelled with the page reached), or why
 * the row is skipped.
 */
async function byCursor(op: Operation, base: string, info: SeedInfo, s: Settings): Promise<Operation | string> {
  const want = op.walkTo ?? 1;
  const first = op.wrk.lines[0];
  const walk = await walkCursor(base, info.privateKey, first, want, s.cursorSeconds, s.log);
  if ('skip' in walk) return `${op.label}: skipped, ${walk.skip}`;
  s.log(`walked to page ${walk.page.toLocaleString('en')} by cursor in ${walk.seconds.toFixed(1)} s`);
  const capped = walk.timedOut ? ` (the walk stopped at ${s.cursorSeconds} s)` : '';
  return {
    ...op,
    label: cursorLabel(walk.page) + capped,
    wrk: { kind: 'get', lines: [`${first}&cursor=${encodeURIComponent(walk.cursor)}`] },
  };
}

/** Measures every operation on the seeded database; renamed folders and uploads are undone. */
async function measureAll(
  info: SeedInfo,
  s: Settings,
): Promise<{ rows: Measured[]; notes: string[]; idleLoop?: number }> {
  const server = new Stowage(info);
  await server.start();
  s.log(`stowage started (pid ${server.pid}) on ${server.base}`);
  const rows: Measured[] = [];
  const notes: string[] = [];
  const o = { ...s, server, key: info.privateKey, probe: `/api/v1/files/${info.fileNos[0]}` };
  let idleLoop: number | undefined;
  try {
    for (let op of operations(info, s.run).filter((x) => s.only.length === 0 || s.only.includes(x.id))) {
      if (op.walkTo !== undefined) {
        const walked = await byCursor(op, server.base, info, s);
        if (typeof walked === 'string') {
          s.log(walked);
          notes.push(walked);
          continue;
        }
        op = walked;
      }
      try {
        rows.push(await measure(op, o));
      } finally {
        if (op.id === 'rename') {
          await settle(o);
          await restoreNames(server.base, info);
        }
      }
    }
    // What the loop max reads with no request at all, once the server is warm: ~10 ms on a
    // quiet machine, more when other processes take the CPUs (the server then waits to be
    // scheduled, and that counts as delay too).
    await settle(o);
    await resetLoopWindow(server.base);
    await new Promise((r) => setTimeout(r, 3000));
    idleLoop = await scrapeLoopMax(server.base);
    s.log(`idle server: loop max ${idleLoop?.toFixed(1) ?? '?'} ms over 3 s`);
    const removed = await deleteUploads(server.base, info, `bench-uploads-${s.run}`);
    s.log(`deleted the bench's ${removed} uploads`);
  } finally {
    await server.stop();
  }
  return { rows, notes, idleLoop };
}

/** The same upload on a database holding one empty workspace (made, measured, dropped). */
async function emptyUpload(info: SeedInfo, s: Settings): Promise<Measured | undefined> {
  const dataDir = `${info.dataDir}-empty`;
  let databaseUrl: string | undefined;
  if (info.databaseUrl) {
    const u = new URL(info.databaseUrl);
    u.pathname = `${u.pathname}_empty`;
    databaseUrl = u.toString();
  }
  const quiet = () => {};
  const empty = await seed({
    dialect: info.dialect,
    files: 0,
    workspaces: 1,
    url: databaseUrl,
    dataDir,
    bigShare: 1,
    folders: 0,
    seed: 1,
    reset: true,
    check: false,
    log: quiet,
  });
  const server = new Stowage(empty);
  await server.start();
  try {
    const op = operations(empty, s.run).find((o) => o.id === 'upload')!;
    return await measure(op, { ...s, server, key: empty.privateKey, probe: '/api/v1/files?limit=1' });
  } finally {
    await server.stop();
    rmSync(dataDir, { recursive: true, force: true });
    if (databaseUrl) await dropPostgres(databaseUrl);
  }
}

async function main(): Promise<void> {
  const args = new Args(process.argv.slice(2), ['verbose', 'no-empty', 'cleanup']);
  const dialect = args.string('db', 'sqlite');
  if (dialect !== 'sqlite' && dialect !== 'postgres') throw new Error('--db must be sqlite or postgres');
  const dataDir = resolve(args.string('data-dir', `data/scale-${dialect}`));
  const url = dialect === 'postgres' ? args.string('url', DEFAULT_PG) : undefined;
  const log = stopwatchLog();
  const wanted = args.string('files') === undefined ? undefined : Math.floor(args.number('files', 0));
  let info = existsSync(infoPath(dataDir)) ? readInfo(dataDir) : undefined;
  const stale =
    !info ||
    info.dialect !== dialect ||
    (wanted !== undefined && info.files !== wanted) ||
    (args.string('url') !== undefined && info.databaseUrl !== url);
  if (stale) {
    const files = wanted ?? (dialect === 'postgres' ? 10_000_000 : 1_000_000);
    log(`seeding ${files.toLocaleString('en')} files (${dialect})`);
    info = await seed({
      dialect,
      files,
      workspaces: Math.max(1, Math.floor(args.number('workspaces', dialect === 'postgres' ? 1000 : 1))),
      url,
      dataDir,
      bigShare: args.number('big-share', 0.5),
      folders: 1010,
      seed: 1,
      reset: true,
      check: false,
      log,
    });
    log(`seeded in ${info.seconds} s`);
  } else log(`using the seed in ${dataDir} (${info!.files.toLocaleString('en')} files, ${info!.seededAt})`);

  const settings: Settings = {
    only: (args.string('only') ?? '').split(',').filter(Boolean),
    clients: args.list('clients', [1, 32]).sort((a, b) => a - b),
    seconds: args.number('seconds', 10),
    maxSeconds: args.number('max-seconds', 60),
    cursorSeconds: args.number('cursor-seconds', 60),
    run: Date.now().toString(36),
    log,
  };
  const loadBefore = loadavg()[1].toFixed(1);
  const { rows, notes, idleLoop } = await measureAll(info!, settings);
  const skipEmpty = args.flag('no-empty') || (settings.only.length > 0 && !settings.only.includes('upload'));
  const empty = skipEmpty ? undefined : await emptyUpload(info!, settings);
  if (args.flag('verbose')) {
    process.stdout.write(answersMeta(rows));
    log('explaining the repositories’ statements');
    await explain(info!, (text) => process.stdout.write(text));
  }
  // The machine may be shared: its load says how much of it the figures had.
  const load = `(5 min) ${loadBefore} before, ${loadavg()[1].toFixed(1)} after`;
  const context = { clients: settings.clients, seconds: settings.seconds, load, notes, empty, idleLoop };
  process.stdout.write(`\n${table(info!, rows, context)}\n`);
  if (args.flag('cleanup')) {
    if (info!.databaseUrl) await dropPostgres(info!.databaseUrl);
    rmSync(info!.dataDir, { recursive: true, force: true });
    log('seeded database and data directory deleted');
  }
}

/** --verbose: what each list answered in `meta` (totals exact or estimated, the next cursor). */
function answersMeta(rows: Measured[]): string {
  const lines = rows.flatMap((m) => {
    if (!m.meta) return [];
    const { totalEstimated, nextCursor, ...rest } = m.meta;
    const cursor = typeof nextCursor === 'string' ? `"${nextCursor.slice(0, 24)}…"` : JSON.stringify(nextCursor);
    return [
      `  ${m.op.label}: ${JSON.stringify(rest)}, totalEstimated ${totalEstimated === undefined ? 'absent' : JSON.stringify(totalEstimated)}, nextCursor ${cursor ?? 'absent'}`,
    ];
  });
  return lines.length ? `\n── meta of each list's first answer ──\n${lines.join('\n')}\n` : '';
}

main().catch((err) => {
  process.stderr.write(`bench:scale: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
