// bench/scale (issue 18): Stowage on a library of millions of file records. Seeds the
// database when it is not seeded at that size yet (scripts/seed.ts does the same alone),
// starts the server as `npm start` does on it, and measures p50/p99 of each operation of the
// issue's table with 1 and with 32 concurrent clients, wrk being the client; then the same
// upload on an empty database, for the 1.5x target. Around every run the server's own max
// event-loop delay is read from its /metrics (the 20 ms target). Each read is then run again,
// the same way, on a bare baseline (bare-server.mjs: node:http, no auth, no Stowage code) that
// sends the SQL Stowage sent for each request (capture.ts) through the same driver and answers
// the rows as JSON: how far Stowage is from the least this machine can do with the same
// queries (--no-baseline skips it). Prints the tables, last, ready to paste into the README;
// --verbose adds the query plans of the repositories' statements and the `meta` of each list's
// answer. Asserts nothing.
//
//   npm run bench:scale -- [--db sqlite|postgres] [--files 1M] [--workspaces W] [--clients 1,32]
//                          [--seconds 10] [--max-seconds 60] [--cursor-seconds 60] [--data-dir DIR]
//                          [--url postgres://…/db] [--only first-page,cursor-page,rename,…]
//                          [--verbose] [--no-empty] [--no-baseline] [--cpu-prof DIR] [--cleanup]
//                          [--lists full|own]
//
// Defaults: SQLite 1M files in one workspace, PostgreSQL 10M over 1,000 workspaces (the big
// one holding half); data in data/scale-<db>, PostgreSQL database stowage_scale. A seed of the
// right size is reused, so a second run only measures. --cleanup deletes the seeded database
// and its data directory at the end. --cursor-seconds caps the untimed walk by cursor to the
// deep page (the row then names the page reached). --lists own asks the file lists as Stowage's
// SDK does (aliases=none: the records once) rather than in the default answer (files, items and
// data); the output says which. wrk must be installed (Debian: wrk).
import { existsSync, rmSync } from 'node:fs';
import { loadavg } from 'node:os';
import { resolve } from 'node:path';
import { Args } from './scale/args.ts';
import { Bare } from './scale/bare.ts';
import { Capturer } from './scale/capture.ts';
import { walkCursor } from './scale/cursor.ts';
import { resetLoopWindow, scrapeLoopMax } from './scale/loop.ts';
import { explain } from './scale/explain.ts';
import { type Measured, deleteUploads, measure, restoreNames, settle } from './scale/measure.ts';
import { cursorLabel, type ListForm, listFormText, type Operation, operations } from './scale/operations.ts';
import { type BareRow, table } from './scale/report.ts';
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
  /** Measure the bare baseline beside each read. */
  baseline: boolean;
  /** Options for the server's node (--cpu-prof DIR: a CPU profile of the whole run, written at its end). */
  nodeArgs: string[];
  /** How the file lists are asked (operations.ts). */
  lists: ListForm;
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

/** Why a row has no bare baseline, when it cannot have one. */
function noBaseline(op: Operation): string | undefined {
  if (op.beside) return 'not reproduced: it measures /healthz beside the lists, not a query';
  if (op.wrk.kind === 'rename') return 'not reproduced: a write (a transaction updating folders), not a read';
  if (op.wrk.kind === 'upload') return 'not reproduced: a write (the file to storage, then its rows)';
  return undefined;
}

interface Baseline {
  capturer: Capturer;
  server: Bare;
}

/**
 * The row's read again on the bare server: Stowage's SQL for each of its requests captured,
 * handed to the bare server, and measured as Stowage was.
 */
async function measureBare(op: Operation, b: Baseline, o: Parameters<typeof measure>[1]): Promise<BareRow> {
  const skip = noBaseline(op);
  if (skip) return { skip };
  const captured = await b.capturer.capture(op.wrk.lines);
  if ('refused' in captured) return { skip: `not reproduced: ${captured.refused}` };
  await b.server.load(captured.scripts);
  const measured = await measure({ ...op, id: `${op.id} (bare)` }, { ...o, server: b.server });
  const scripts = Object.values(captured.scripts);
  const counts = scripts.map((x) => x.statements.length);
  const first = await fetch(b.server.base + op.wrk.lines[0]).then((r) => r.arrayBuffer());
  return {
    measured,
    statements: { min: Math.min(...counts), max: Math.max(...counts) },
    records: scripts[0].records,
    stowageBytes: captured.scripts[op.wrk.lines[0]].bytes,
    bareBytes: first.byteLength,
  };
}

/** Measures every operation on the seeded database; renamed folders and uploads are undone. */
async function measureAll(
  info: SeedInfo,
  s: Settings,
): Promise<{ rows: Measured[]; bare: Map<string, BareRow>; notes: string[]; idleLoop?: number; bareDriver?: string }> {
  const server = new Stowage(info, {}, s.nodeArgs);
  await server.start();
  s.log(`stowage started (pid ${server.pid}) on ${server.base}`);
  const rows: Measured[] = [];
  const bare = new Map<string, BareRow>();
  const notes: string[] = [];
  const probe = `/api/v1/files/${info.fileNos[0]}`;
  const o = { ...s, server, key: info.privateKey, probe };
  let idleLoop: number | undefined;
  let baseline: Baseline | undefined;
  try {
    if (s.baseline) {
      const capturer = new Capturer(info);
      await capturer.open();
      const bareServer = new Bare(info);
      baseline = { capturer, server: bareServer };
      await bareServer.start();
      const p = await capturer.capture([probe]);
      if ('refused' in p) throw new Error(`the bare baseline's probe: ${p.refused}`);
      await bareServer.load(p.scripts);
      s.log(`bare baseline started (pid ${bareServer.pid}) on ${bareServer.base}: ${bareServer.describe()}`);
    }
    for (let op of operations(info, s.run, s.lists).filter((x) => s.only.length === 0 || s.only.includes(x.id))) {
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
      if (baseline) {
        const b = await measureBare(op, baseline, o);
        if (b.skip) s.log(`${op.id}: bare baseline ${b.skip}`);
        bare.set(op.id, b);
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
    await baseline?.server.stop();
    await baseline?.capturer.close();
    await server.stop();
  }
  return { rows, bare, notes, idleLoop, bareDriver: baseline?.server.describe() };
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
  const args = new Args(process.argv.slice(2), ['verbose', 'no-empty', 'no-baseline', 'cleanup']);
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
    baseline: !args.flag('no-baseline'),
    nodeArgs: args.string('cpu-prof') ? ['--cpu-prof', `--cpu-prof-dir=${resolve(args.string('cpu-prof')!)}`] : [],
    lists: listsOption(args.string('lists', 'full')),
    run: Date.now().toString(36),
    log,
  };
  const loadBefore = loadavg()[1].toFixed(1);
  const { rows, bare, notes, idleLoop, bareDriver } = await measureAll(info!, settings);
  const skipEmpty = args.flag('no-empty') || (settings.only.length > 0 && !settings.only.includes('upload'));
  const empty = skipEmpty ? undefined : await emptyUpload(info!, settings);
  if (args.flag('verbose')) {
    process.stdout.write(answersMeta(rows));
    log('explaining the repositories’ statements');
    await explain(info!, (text) => process.stdout.write(text));
  }
  // The machine may be shared: its load says how much of it the figures had.
  const load = `(5 min) ${loadBefore} before, ${loadavg()[1].toFixed(1)} after`;
  const context = {
    clients: settings.clients,
    seconds: settings.seconds,
    load,
    notes: [listFormText(settings.lists), ...notes],
    empty,
    idleLoop,
    bare: settings.baseline ? bare : undefined,
    bareDriver,
  };
  process.stdout.write(`\n${table(info!, rows, context)}\n`);
  if (args.flag('cleanup')) {
    if (info!.databaseUrl) await dropPostgres(info!.databaseUrl);
    rmSync(info!.dataDir, { recursive: true, force: true });
    log('seeded database and data directory deleted');
  }
}

function listsOption(value: string): ListForm {
  if (value !== 'full' && value !== 'own') throw new Error('--lists must be full or own');
  return value;
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
