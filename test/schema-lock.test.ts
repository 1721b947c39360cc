// Two nodes starting together on one empty PostgreSQL database: each migrates Stowage's schema
// (Kysely) and graphile-worker's. Kysely's migrator lists every table and column first, and
// PostgreSQL failed that read while the other node altered graphile-worker's tables (CI saw
// 'column "job_count" of relation "job_queues" does not exist'). Both migrations now wait for
// one advisory lock: held here by a third connection, neither may start until it is released.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { type Db, openDatabase } from '../src/db/database.ts';
import { migrateToLatest } from '../src/db/migrations.ts';
import { SCHEMA_LOCK } from '../src/db/schema-lock.ts';
import { type JobQueue, openJobQueue } from '../src/jobs/index.ts';
import { DIALECTS, freshPostgres } from './helpers/harness.ts';

const postgres = DIALECTS.find((d) => d.name === 'postgres')!;
const quiet = { info() {}, warn() {}, error() {}, debug() {} };

/** Whether `p` settles within `ms`. */
const settlesWithin = (p: Promise<unknown>, ms: number) =>
  Promise.race([p.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))]);

describe('schema changes wait for one another (PostgreSQL)', { skip: postgres.skip }, () => {
  let fresh: { url: string; drop(): Promise<void> };
  let db: Db;
  let holder: pg.Client;
  before(async () => {
    fresh = await freshPostgres();
    db = openDatabase({ databaseUrl: fresh.url, dataDir: '/nonexistent' });
    holder = new pg.Client({ connectionString: fresh.url });
    await holder.connect();
  });
  after(async () => {
    await holder?.end().catch(() => {});
    await db?.close();
    await fresh?.drop();
  });

  const tableExists = async (name: string) =>
    (await sql<{ t: string | null }>`select to_regclass(${name}) as t`.execute(db.kysely)).rows[0].t !== null;

  test("Stowage's migrations and the job queue's wait while another process holds the lock", async () => {
    await holder.query('select pg_advisory_lock(hashtext($1))', [SCHEMA_LOCK]);
    const migrating = migrateToLatest(db.kysely);
    migrating.catch(() => {});
    assert.equal(await settlesWithin(migrating, 1000), false, 'the migration waits for the lock');
    assert.equal(await tableExists('public.files'), false, 'and has changed nothing');
    await holder.query('select pg_advisory_unlock(hashtext($1))', [SCHEMA_LOCK]);
    await migrating;
    assert.equal(await tableExists('public.files'), true);

    await holder.query('select pg_advisory_lock(hashtext($1))', [SCHEMA_LOCK]);
    const opening = openJobQueue(db, {
      databaseUrl: fresh.url,
      pollMs: 1000,
      concurrency: 1,
      log: quiet as never,
    });
    let queue: JobQueue | undefined;
    opening.then((q) => (queue = q)).catch(() => {});
    try {
      assert.equal(await settlesWithin(opening, 1000), false, "the job queue's migration waits too");
      assert.equal(await tableExists('graphile_worker._private_jobs'), false);
      await holder.query('select pg_advisory_unlock(hashtext($1))', [SCHEMA_LOCK]);
      queue = await opening;
      assert.equal(await tableExists('graphile_worker._private_jobs'), true);
    } finally {
      await holder.query('select pg_advisory_unlock_all()');
      await queue?.close();
    }
  });
});
