// bench/small-files: many small uploads at once. BENCH_FILES uploads of BENCH_KB KB each
// (default 10,000 of 100 KB) over BENCH_CLIENTS keep-alive connections (default 32), sent by
// autocannon in a process of its own (bench/small-files-client.ts), to Stowage's direct upload
// and to a bare Fastify + @fastify/multipart route that writes the file and inserts one row
// (bench/servers/multipart-row.mjs), on SQLite and on PostgreSQL. Prints uploads/s, p50/p99
// latency, the CPU seconds of server and client, and Stowage's ratio to the bare route
// (target, issue 25: >= 0.5x). Asserts nothing.
//
//   npm run bench:small-files
//   BENCH_FILES=500 BENCH_CLIENTS=8 npm run bench:small-files      a quick pass
//   BENCH_FSYNC=0 npm run bench:small-files      both without flushing the file (STOWAGE_FSYNC=false)
//   BENCH_DB=sqlite npm run bench:small-files    one database only (sqlite or postgres)
//
// Durability is the same on both sides: by default each flushes the file (fdatasync) before the
// row and the answer, as Stowage ships; SQLite runs in WAL mode with synchronous=NORMAL on both.
// PostgreSQL: a fresh database per server under STOWAGE_BENCH_DATABASE_URL (or
// STOWAGE_TEST_DATABASE_URL, or the local default); skipped when unreachable.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { openDatabase } from '../src/db/database.ts';
import { migrateToLatest } from '../src/db/migrations.ts';
import { freshPostgres } from '../test/helpers/harness.ts';
import {
  cpuByProcess,
  cpuSeconds,
  cpuSince,
  fmt,
  median,
  type Proc,
  ROOT,
  START_NODE_FLAGS,
  startProcess,
  startStowage,
} from './lib.ts';

const FILES = Number(process.env.BENCH_FILES ?? 10_000);
const CLIENTS = Number(process.env.BENCH_CLIENTS ?? 32);
const SIZE = Number(process.env.BENCH_KB ?? 100) * 1000;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 1);
const FSYNC = process.env.BENCH_FSYNC !== '0';
/** Uploads sent before the measured run, so that neither server is measured while it warms up. */
const WARMUP = Math.min(500, Math.ceil(FILES / 10));
const TMP = process.env.BENCH_TMP ?? tmpdir();
const PG_ADMIN =
  process.env.STOWAGE_BENCH_DATABASE_URL ??
  process.env.STOWAGE_TEST_DATABASE_URL ??
  'postgres://postgres@127.0.0.1:5432/postgres';
const TARGET = 0.5;
const ONLY = process.env.BENCH_DB;

interface Run {
  completed: number;
  seconds: number;
  perSecond: number;
  p50: number;
  p99: number;
  errors: number;
  non2xx: number;
  bodies: number;
  clientCpu: number;
  /** CPU seconds the server process used during the run. */
  serverCpu: number;
  /** CPU seconds PostgreSQL's processes used during the run (about none on SQLite). */
  dbCpu: number;
}

/** One load of `amount` uploads from a fresh client process; the server's CPU is read around it. */
function load(server: Proc, url: string, headers: Record<string, string>, amount: number): Promise<Run> {
  const pid = server.child.pid!;
  const before = cpuSeconds(pid);
  const dbBefore = cpuByProcess('postgres');
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        'bench/small-files-client.ts',
        JSON.stringify({ url, headers, amount, connections: CLIENTS, size: SIZE }),
      ],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.once('error', reject);
    child.once('exit', (code) => {
      if (code !== 0) return reject(new Error(`client exited ${code}: ${out}`));
      const line = out.trim().split('\n').pop()!;
      resolve({ ...JSON.parse(line), serverCpu: cpuSeconds(pid) - before, dbCpu: cpuSince(dbBefore, 'postgres') });
    });
  });
}

interface Contender {
  label: string;
  start(): Promise<{ proc: Proc; url: string; headers: Record<string, string> }>;
}

/** Both servers on one database: a warm-up each, then ROUNDS interleaved measured runs; the median run. */
async function compare(database: string, contenders: Contender[]): Promise<[string, Run][]> {
  const started = [];
  for (const c of contenders) started.push(await c.start());
  const runs: Run[][] = contenders.map(() => []);
  try {
    for (const s of started) await load(s.proc, s.url, s.headers, WARMUP);
    for (let round = 0; round < ROUNDS; round++)
      for (let k = 0; k < started.length; k++) {
        const i = (k + round) % started.length;
        runs[i].push(await load(started[i].proc, started[i].url, started[i].headers, FILES));
      }
  } finally {
    for (const s of started) await s.proc.stop();
  }
  return contenders.map((c, i) => {
    const mid = median(runs[i].map((r) => r.perSecond));
    return [`${c.label}, ${database}`, runs[i].find((r) => r.perSecond === mid) ?? runs[i][0]];
  });
}

/** A baseline server script on `db` ('sqlite' or a PostgreSQL URL) with its files in `dir`, removed when it stops. */
async function startBaseline(script: string, db: string, dir: string, headers: Record<string, string>) {
  // Node run as Stowage is (npm start's flags), so the baselines have the same heap.
  const proc = await startProcess(
    [...START_NODE_FLAGS, script],
    { BENCH_DIR: dir, BENCH_DB: db, BENCH_FSYNC: FSYNC ? '1' : '0' },
    /listening (\d+)/,
  );
  return {
    proc: {
      ...proc,
      stop: async () => {
        await proc.stop();
        rmSync(dir, { recursive: true, force: true });
      },
    },
    url: `http://127.0.0.1:${proc.match[1]}/upload`,
    headers,
  };
}

/** The bare route on `db` ('sqlite' or a PostgreSQL URL), its files in a fresh directory. */
function bareRoute(db: string): Contender {
  return {
    label: 'bare Fastify + @fastify/multipart + 1 row',
    start: () => startBaseline('bench/servers/multipart-row.mjs', db, mkdtempSync(join(TMP, 'bench-small-bare-')), {}),
  };
}

/**
 * The work Stowage does per upload without Stowage's code (bench/servers/same-work.mjs): its
 * schema, migrated here with its own migrations into a fresh database, its statements sent as
 * plain SQL, the file hashed, flushed and renamed as its local storage does.
 */
function sameWork(pgUrl?: string): Contender {
  return {
    label: "bare route doing Stowage's work (same SQL, schema, flushes)",
    async start() {
      const dir = mkdtempSync(join(TMP, 'bench-small-same-'));
      const db = openDatabase({ dataDir: dir, databaseUrl: pgUrl, sqliteReaders: 0 });
      const key = `pk_${randomBytes(32).toString('base64url')}`;
      try {
        await migrateToLatest(db.kysely);
        const now = new Date().toISOString();
        const ws = randomBytes(6).toString('hex');
        await db.kysely
          .insertInto('workspaces')
          .values({
            id: ws,
            name: 'bench',
            webhook_secret: 'unused',
            quota_bytes: null,
            max_file_size: null,
            used_bytes: 0,
            reserved_bytes: 0,
            allowed_origins: null,
            webhook_origins: null,
            created_at: now,
            updated_at: now,
          })
          .execute();
        await db.kysely
          .insertInto('api_keys')
          .values({
            id: randomUUID(),
            workspace_id: ws,
            type: 'public',
            key_hash: createHash('sha256').update(key).digest('hex'),
            key_hint: 'pk_…',
            created_at: now,
            revoked_at: null,
          })
          .execute();
      } finally {
        await db.close();
      }
      return startBaseline('bench/servers/same-work.mjs', pgUrl ?? 'sqlite', dir, { 'x-api-key': key });
    },
  };
}

/** Stowage's direct upload, rate limits and the concurrent-upload cap off (the load is the point). */
function stowage(databaseUrl?: string): Contender {
  return {
    label: `stowage direct upload${FSYNC ? '' : ', STOWAGE_FSYNC=false'}`,
    async start() {
      const s = await startStowage(
        {
          LOG_LEVEL: 'error',
          STOWAGE_RATE_LIMIT_UPLOAD: 'off',
          STOWAGE_RATE_LIMIT_API: 'off',
          STOWAGE_MAX_CONCURRENT_UPLOADS: '0',
          STOWAGE_FSYNC: FSYNC ? 'true' : 'false',
          ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
        },
        TMP,
      );
      return { proc: s, url: `${s.url}/api/v1/uploads`, headers: { 'x-api-key': s.key } };
    },
  };
}

async function main() {
  console.log(
    `bench/small-files — ${FILES} uploads of ${SIZE / 1000} KB, ${CLIENTS} connections (autocannon in its own process), ` +
      `${WARMUP} warm-up uploads, median of ${ROUNDS} round(s); file ${FSYNC ? 'fdatasynced' : 'not flushed'} on both sides; data in ${TMP}; node ${process.version}\n`,
  );
  const results: [string, Run][][] = [];
  if (ONLY !== 'postgres') results.push(await compare('SQLite', [bareRoute('sqlite'), sameWork(), stowage()]));
  const bareDb =
    ONLY === 'sqlite' ? undefined : await freshPostgres(PG_ADMIN, 'stowage_bench_bare').catch(() => undefined);
  if (bareDb) {
    const sameDb = await freshPostgres(PG_ADMIN, 'stowage_bench_same');
    const stowageDb = await freshPostgres(PG_ADMIN, 'stowage_bench_small');
    try {
      results.push(await compare('PostgreSQL', [bareRoute(bareDb.url), sameWork(sameDb.url), stowage(stowageDb.url)]));
    } finally {
      await bareDb.drop();
      await sameDb.drop();
      await stowageDb.drop();
    }
  } else if (ONLY !== 'sqlite') console.log('(PostgreSQL not reachable: skipped)\n');

  console.log(
    `${'run'.padEnd(66)} ${'uploads/s'.padStart(9)} ${'p50 ms'.padStart(7)} ${'p99 ms'.padStart(7)} ${'failed'.padStart(6)} ${'server CPU s'.padStart(12)} ${'client CPU s'.padStart(12)} ${'PG CPU s'.padStart(8)}  x bare`,
  );
  for (const [[bareLabel, bare], [sameLabel, same], [label, ours]] of results) {
    for (const [l, r] of [
      [bareLabel, bare],
      [sameLabel, same],
      [label, ours],
    ] as const) {
      const x = r.perSecond / bare.perSecond;
      let note = r === bare ? '' : `  ${fmt(x, 2)}`;
      if (r === ours)
        note += `  (target >= ${TARGET}x: ${x >= TARGET ? 'met' : 'MISSED'}); ${fmt(r.perSecond / same.perSecond, 2)}x the same work`;
      console.log(
        `${l.padEnd(66)} ${fmt(r.perSecond, 0).padStart(9)} ${fmt(r.p50).padStart(7)} ${fmt(r.p99).padStart(7)} ${String(r.errors + r.non2xx).padStart(6)} ${fmt(r.serverCpu, 1).padStart(12)} ${fmt(r.clientCpu, 1).padStart(12)} ${(l.endsWith('PostgreSQL') ? fmt(r.dbCpu, 1) : '-').padStart(8)}${note}`,
      );
    }
  }
  console.log('failed: connection errors, timeouts and non-2xx answers (a sound run has none).');
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
