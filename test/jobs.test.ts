// The job interface on both runners: the in-process one (SQLite deployments) and graphile-worker
// (PostgreSQL): due times, job keys, retries, recurring schedules with one run at a time,
// draining on stop, metrics per job; on PostgreSQL also jobs added in a transaction (there iff
// it commits), surviving a restart, and several nodes taking each job once.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { Registry } from 'prom-client';
import { type Db, inTransaction, openDatabase } from '../src/db/database.ts';
import { migrateToLatest } from '../src/db/migrations.ts';
import { openJobQueue } from '../src/jobs/index.ts';
import { freshPostgres } from './helpers/harness.ts';
import { externalService } from './helpers/services.ts';

const pgGate = externalService('STOWAGE_TEST_DATABASE_URL', 'PostgreSQL');
const silent = { debug() {}, info() {}, warn() {}, error() {} };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(cond: () => boolean | Promise<boolean>, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await sleep(25);
  }
}

async function metric(registry: Registry, name: string, job: string): Promise<number> {
  const m = (await registry.getMetricsAsJSON()).find((x) => x.name === name);
  const v = m?.values.find((x) => x.labels.job === job && !('le' in x.labels));
  return Number(v?.value ?? 0);
}

async function queueOver(db: Db, databaseUrl?: string, pollMs = 50) {
  const registry = new Registry();
  const jobs = await openJobQueue(db, { databaseUrl, pollMs, concurrency: 4, log: silent, registry });
  return { jobs, registry };
}

describe('in-process job runner', () => {
  let dir: string;
  let db: Db;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'stowage-jobs-'));
    db = openDatabase({ dataDir: dir });
    await migrateToLatest(db.kysely);
  });
  after(async () => {
    await db?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('a job runs at its time with its payload, not before; runs and durations are counted per job', async () => {
    const { jobs, registry } = await queueOver(db);
    assert.equal(jobs.kind, 'in-process');
    assert.equal(jobs.durable, false);
    const ran: { id: string; at: number }[] = [];
    jobs.define('webhook.deliver', async (p) => void ran.push({ id: p.id, at: Date.now() }));
    await jobs.start();
    try {
      const t0 = Date.now();
      await jobs.add('webhook.deliver', { id: 'later', attempt: 1 }, { runAt: new Date(t0 + 300) });
      await jobs.add('webhook.deliver', { id: 'now', attempt: 1 });
      await until(() => ran.length === 2);
      assert.deepEqual(
        ran.map((r) => r.id),
        ['now', 'later'],
      );
      assert.ok(ran[1].at - t0 >= 290, `ran after ${ran[1].at - t0} ms`);
      assert.equal(await metric(registry, 'stowage_job_runs_total', 'webhook.deliver'), 2);
      assert.equal(await metric(registry, 'stowage_job_failures_total', 'webhook.deliver'), 0);
      const text = await registry.metrics();
      assert.match(text, /stowage_job_duration_seconds_count\{job="webhook.deliver"\} 2/);
    } finally {
      await jobs.close();
    }
  });

  test('a job added in a transaction waits for its commit and is dropped with a rollback', async () => {
    await sql`create table job_probe (id text)`.execute(db.kysely);
    const { jobs } = await queueOver(db);
    const ran: { id: string; seen: number }[] = [];
    // What the handler reads is on the database: before the commit there is nothing to read.
    jobs.define('webhook.deliver', async (p) => {
      const { rows } = await sql`select id from job_probe where id = ${p.id}`.execute(db.kysely);
      ran.push({ id: p.id, seen: rows.length });
    });
    await jobs.start();
    try {
      await inTransaction(db.kysely, async (trx) => {
        await jobs.add('webhook.deliver', { id: 'rolled-back', attempt: 1 }, { trx, jobKey: 'rb' });
        throw new Error('rollback');
      }).catch(() => {});
      await inTransaction(db.kysely, async (trx) => {
        await sql`insert into job_probe (id) values ('committed')`.execute(trx);
        await jobs.add('webhook.deliver', { id: 'committed', attempt: 1 }, { trx, jobKey: 'c' });
        assert.deepEqual([...(await jobs.missing(['c'], 1000))], ['c'], 'not queued before the commit');
        await sleep(100);
        assert.deepEqual(ran, [], 'nothing ran inside the transaction');
      });
      await until(() => ran.length === 1);
      await sleep(50);
      assert.deepEqual(ran, [{ id: 'committed', seen: 1 }], 'ran once, after the commit, and saw its row');
    } finally {
      await jobs.close();
    }
  });

  test('a job key keeps one waiting job: adding again replaces its payload and time', async () => {
    const { jobs } = await queueOver(db);
    const ran: number[] = [];
    jobs.define('webhook.deliver', async (p) => void ran.push(p.attempt));
    await jobs.add('webhook.deliver', { id: 'k', attempt: 1 }, { jobKey: 'k', runAt: new Date(Date.now() + 60_000) });
    await jobs.add('webhook.deliver', { id: 'k', attempt: 2 }, { jobKey: 'k' });
    await jobs.add('webhook.deliver', { id: 'other', attempt: 9 });
    assert.deepEqual([...(await jobs.missing(['k', 'nope'], 1000))], ['nope']);
    assert.equal(await jobs.runDue('webhook.deliver'), 2, 'the replaced job is due now');
    assert.deepEqual(ran.sort(), [2, 9]);
    assert.equal(await jobs.runDue('webhook.deliver'), 0, 'nothing left');
    assert.deepEqual([...(await jobs.missing(['k'], 1000))], ['k']);
    await jobs.close();
  });

  test('a job that throws is retried after its backoff, up to its attempts; failures are counted', async () => {
    const { jobs, registry } = await queueOver(db);
    const runs: Record<string, number[]> = { flaky: [], broken: [] };
    jobs.define(
      'webhook.deliver',
      async (p) => {
        runs[p.id].push(Date.now());
        if (p.id === 'broken' || runs[p.id].length < 3) throw new Error(`${p.id} failed`);
      },
      { maxAttempts: 4, backoffMs: (n) => n * 100 },
    );
    await jobs.start();
    try {
      await jobs.add('webhook.deliver', { id: 'flaky', attempt: 1 });
      await jobs.add('webhook.deliver', { id: 'broken', attempt: 1 });
      await until(() => runs.flaky.length === 3 && runs.broken.length === 4);
      await sleep(1200);
      assert.equal(runs.flaky.length, 3, 'no run after success');
      assert.equal(runs.broken.length, 4, 'no run after the last attempt');
      const gaps = runs.broken.slice(1).map((t, i) => t - runs.broken[i]);
      for (const [i, g] of gaps.entries()) assert.ok(g >= (i + 1) * 100 - 5, `gap ${i + 1} was ${g} ms`);
      assert.equal(await metric(registry, 'stowage_job_failures_total', 'webhook.deliver'), 2 + 4);
      assert.equal(await metric(registry, 'stowage_job_runs_total', 'webhook.deliver'), 3 + 4);
    } finally {
      await jobs.close();
    }
  });

  test('a recurring job runs again and again, never two runs at once; stop() waits for the run in progress', async () => {
    const { jobs, registry } = await queueOver(db);
    let active = 0;
    let most = 0;
    let runs = 0;
    jobs.every('sweep', 30, async () => {
      active++;
      most = Math.max(most, active);
      runs++;
      try {
        await sleep(80);
        if (runs === 2) throw new Error('one bad run');
      } finally {
        active--;
      }
    });
    await jobs.start();
    await until(() => runs >= 5 && active === 1);
    assert.equal(most, 1, 'one run at a time');
    const runsAtStop = runs;
    await jobs.stop();
    assert.equal(active, 0, 'stop() waited for the run in progress');
    await sleep(200);
    assert.equal(runs, runsAtStop, 'no run after stop');
    assert.equal(await metric(registry, 'stowage_job_failures_total', 'sweep'), 1, 'the bad run counted, not retried');
    await jobs.close();
  });

  test('a recurring job with 0 never runs on this node; jobs of a disabled definition wait for runDue', async () => {
    const { jobs } = await queueOver(db);
    let swept = 0;
    let delivered = 0;
    jobs.every('sweep', 0, async () => void swept++);
    jobs.define('webhook.deliver', async () => void delivered++, { enabled: false });
    await jobs.start();
    await jobs.add('webhook.deliver', { id: 'x', attempt: 1 });
    await sleep(200);
    assert.equal(swept, 0);
    assert.equal(delivered, 0, 'not run by the started runner');
    assert.equal(await jobs.runDue('webhook.deliver'), 1);
    assert.equal(delivered, 1);
    await jobs.close();
  });

  test('a job running longer than the stale time counts as missing', async () => {
    const { jobs } = await queueOver(db);
    let release!: () => void;
    jobs.define('webhook.deliver', () => new Promise<void>((r) => (release = r)));
    await jobs.add('webhook.deliver', { id: 'slow', attempt: 1 }, { jobKey: 'slow' });
    const running = jobs.runDue('webhook.deliver');
    await sleep(100);
    assert.equal((await jobs.missing(['slow'], 10_000)).size, 0, 'running, not stale');
    assert.deepEqual([...(await jobs.missing(['slow'], 50))], ['slow'], 'running for too long');
    release();
    await running;
    await jobs.close();
  });

  test('addUnlessFull: of 12 parallel adds under a cap of 5, five are queued; a running one counts until stale', async () => {
    const { jobs } = await queueOver(db);
    let release!: () => void;
    jobs.define('webhook.deliver', () => new Promise<void>((r) => (release = r)));
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        jobs.addUnlessFull(
          'webhook.deliver',
          { id: `c${i}`, attempt: 1 },
          { jobKey: `c${i}`, maxLive: 5, staleAfterMs: 60_000 },
        ),
      ),
    );
    assert.equal(results.filter(Boolean).length, 5);
    // One runs: still five live, so a sixth is refused; past the stale time the running one no longer counts.
    const running = jobs.runDue('webhook.deliver', 1);
    await sleep(50);
    assert.equal(
      await jobs.addUnlessFull('webhook.deliver', { id: 'x', attempt: 1 }, { maxLive: 5, staleAfterMs: 60_000 }),
      false,
    );
    await sleep(60);
    assert.equal(
      await jobs.addUnlessFull('webhook.deliver', { id: 'y', attempt: 1 }, { maxLive: 5, staleAfterMs: 50 }),
      true,
    );
    release();
    await running;
    await jobs.close();
  });

  test('a job name with its own concurrency: the rest of its jobs wait, other jobs still run', async () => {
    const { jobs } = await queueOver(db);
    let active = 0;
    let most = 0;
    const releases: Array<() => void> = [];
    const done: string[] = [];
    jobs.define(
      'video.transcode',
      async (job) => {
        active++;
        most = Math.max(most, active);
        await new Promise<void>((r) => releases.push(r));
        active--;
        done.push(job.key);
      },
      { concurrency: 1 },
    );
    const delivered: string[] = [];
    jobs.define('webhook.deliver', async (p) => void delivered.push(p.id));
    await jobs.start();
    try {
      const job = (key: string) =>
        ({
          key,
          workspaceId: 'w',
          storageKey: 's',
          sha256: 'h',
          size: 1,
          demuxer: 'mov',
          spec: {},
          format: 'mp4',
          trim: { start: 0, limit: 1 },
        }) as const;
      for (const k of ['a', 'b', 'c']) await jobs.add('video.transcode', job(k), { jobKey: k });
      await until(() => releases.length === 1);
      // The runner has three more slots, but the name has one: a webhook still gets through.
      await jobs.add('webhook.deliver', { id: 'w1', attempt: 1 });
      await until(() => delivered.length === 1);
      assert.equal(releases.length, 1, 'the other transcodes wait');
      for (let i = 0; i < 3; i++) {
        await until(() => releases.length > i);
        releases[i]();
      }
      await until(() => done.length === 3);
      assert.equal(most, 1);
    } finally {
      await jobs.close();
    }
  });
});

describe('graphile-worker job runner (PostgreSQL)', { skip: pgGate.skip }, () => {
  let pgDb: { url: string; drop(): Promise<void> };
  const dbs: Db[] = [];
  const open = async () => {
    const db = openDatabase({ databaseUrl: pgDb.url, dataDir: '/nonexistent' });
    dbs.push(db);
    await migrateToLatest(db.kysely);
    return { db, ...(await queueOver(db, pgDb.url)) };
  };
  before(async () => {
    pgDb = await freshPostgres();
  });
  after(async () => {
    for (const db of dbs) await db.close();
    await pgDb?.drop();
  });

  test('a job added in a transaction exists if and only if the transaction commits', async () => {
    const { db, jobs } = await open();
    assert.equal(jobs.kind, 'graphile-worker');
    assert.equal(jobs.durable, true);
    const ran: string[] = [];
    jobs.define('webhook.deliver', async (p) => void ran.push(p.id));
    await db.kysely
      .transaction()
      .execute(async (trx) => {
        await jobs.add('webhook.deliver', { id: 'rolled-back', attempt: 1 }, { trx, jobKey: 'rb' });
        throw new Error('rollback');
      })
      .catch(() => {});
    await db.kysely.transaction().execute(async (trx) => {
      await jobs.add('webhook.deliver', { id: 'committed', attempt: 1 }, { trx, jobKey: 'c' });
      assert.deepEqual([...(await jobs.missing(['c'], 1000))], ['c'], 'not visible outside before the commit');
    });
    assert.deepEqual([...(await jobs.missing(['rb', 'c'], 1000))], ['rb']);
    assert.equal(await jobs.runDue('webhook.deliver'), 1);
    assert.deepEqual(ran, ['committed']);
    assert.deepEqual([...(await jobs.missing(['c'], 1000))], ['c'], 'a finished job is gone');
    await jobs.close();
  });

  test('addUnlessFull across two nodes at once: the cap holds (advisory lock); other job names do not count', async () => {
    // A database of its own: the jobs it leaves waiting must not meet the other tests'.
    const own = await freshPostgres();
    const node = async () => {
      const db = openDatabase({ databaseUrl: own.url, dataDir: '/nonexistent' });
      dbs.push(db);
      await migrateToLatest(db.kysely);
      return queueOver(db, own.url);
    };
    const a = await node();
    const b = await node();
    await a.jobs.add('sweep', {});
    const results = await Promise.all(
      Array.from({ length: 16 }, (_, i) =>
        (i % 2 ? a : b).jobs.addUnlessFull(
          'webhook.deliver',
          { id: `cap${i}`, attempt: 1 },
          { jobKey: `cap${i}`, maxLive: 6, staleAfterMs: 60_000 },
        ),
      ),
    );
    assert.equal(results.filter(Boolean).length, 6);
    const keys = Array.from({ length: 16 }, (_, i) => `cap${i}`);
    assert.equal(keys.length - (await a.jobs.missing(keys, 60_000)).size, 6, 'six waiting jobs, no more');
    await a.jobs.close();
    await b.jobs.close();
    for (const db of dbs.splice(-2)) await db.close();
    await own.drop();
  });

  test('jobs survive a restart; two started nodes take each job once; a failed run is retried', async () => {
    const first = await open();
    first.jobs.define('webhook.deliver', async () => {});
    for (let i = 0; i < 20; i++) await first.jobs.add('webhook.deliver', { id: `j${i}`, attempt: 1 });
    await first.jobs.add('webhook.deliver', { id: 'flaky', attempt: 1 });
    await first.jobs.close();

    const seen: string[] = [];
    let flakyRuns = 0;
    const nodes = [await open(), await open()];
    for (const n of nodes)
      n.jobs.define('webhook.deliver', async (p) => {
        if (p.id === 'flaky' && ++flakyRuns === 1) throw new Error('first run fails');
        seen.push(p.id);
        await sleep(20);
      });
    await Promise.all(nodes.map((n) => n.jobs.start()));
    try {
      // graphile-worker's own backoff after a first failure is e^1 ≈ 2.7 s.
      await until(() => seen.length === 21, 20_000);
      await sleep(300);
      assert.equal(seen.length, 21);
      assert.equal(new Set(seen).size, 21, 'no job ran twice');
      assert.equal(flakyRuns, 2);
      const failures = await Promise.all(
        nodes.map((n) => metric(n.registry, 'stowage_job_failures_total', 'webhook.deliver')),
      );
      assert.equal(failures[0] + failures[1], 1);
    } finally {
      await Promise.all(nodes.map((n) => n.jobs.close()));
    }
  });

  test('a recurring job shared by two nodes: runs on a schedule, one run at a time across them', async () => {
    const nodes = [await open(), await open()];
    let active = 0;
    let most = 0;
    let runs = 0;
    for (const n of nodes)
      n.jobs.every('sweep', 100, async () => {
        active++;
        most = Math.max(most, active);
        runs++;
        await sleep(150);
        active--;
      });
    await Promise.all(nodes.map((n) => n.jobs.start()));
    try {
      await until(() => runs >= 5, 20_000);
      assert.equal(most, 1, 'never two runs at once');
    } finally {
      await Promise.all(nodes.map((n) => n.jobs.close()));
    }
  });
});
