// SQLite group commit (src/db/sqlite-commit-group.ts): steps that arrive together share one
// transaction, each all or nothing on its own; a failed COMMIT fails every step of its group and
// leaves nothing behind; steps that arrive while another transaction holds the connection wait
// for it and then go in together. A real database file, with reader threads as the server runs.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { type Kysely, sql } from 'kysely';
import { type Db, openDatabase, sqliteHandle } from '../src/db/database.ts';
import { commitGroupOf } from '../src/db/sqlite-commit-group.ts';

const dirs: string[] = [];
const opened: Db[] = [];
after(async () => {
  for (const db of opened) await db.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/**
 * A database with a commit group. The group's time budget has a test of its own (the last);
 * elsewhere it is a minute, so that a loaded machine (a first statement compiled slowly) never
 * splits a group the test expects whole.
 */
async function open(budgetMs = 60_000) {
  const dir = mkdtempSync(join(tmpdir(), 'stowage-group-'));
  dirs.push(dir);
  const db = openDatabase({ dataDir: dir, sqliteReaders: 1 });
  opened.push(db);
  const k = db.kysely as unknown as Kysely<{ t: { id: number; v: string } }>;
  await sql`create table t (id integer primary key, v text not null)`.execute(k);
  // A parent whose check waits for COMMIT: the way to make a COMMIT fail on purpose.
  await sql`create table parent (id integer primary key)`.execute(k);
  await sql`create table child (id integer primary key, parent_id integer references parent (id) deferrable initially deferred)`.execute(
    k,
  );
  const handle = sqliteHandle(k);
  assert.ok(handle);
  return { k, group: commitGroupOf(k, handle, budgetMs) };
}

const ids = async (k: Kysely<{ t: { id: number; v: string } }>) =>
  (await k.selectFrom('t').select('id').orderBy('id').execute()).map((r) => r.id);

test('steps started in one turn share one transaction, and each is answered after it', async () => {
  const { k, group } = await open();
  const steps = Array.from({ length: 20 }, (_, i) =>
    group.run((db) => {
      db.prepare('insert into t (id, v) values (?, ?)').run(i + 1, `row ${i}`);
    }),
  );
  await Promise.all(steps);
  assert.equal(group.stats.groups, 1);
  assert.equal(group.stats.steps, 20);
  assert.deepEqual(
    await ids(k),
    Array.from({ length: 20 }, (_, i) => i + 1),
  );
});

test('a step that throws undoes its own changes only, and only its caller sees the error', async () => {
  const { k, group } = await open();
  const insert = (id: number) => (db: import('better-sqlite3').Database) => {
    db.prepare('insert into t (id, v) values (?, ?)').run(id, 'x');
  };
  const results = await Promise.allSettled([
    group.run(insert(1)),
    group.run((db) => {
      // Changes first, then a failure: the savepoint must take the changes back.
      db.prepare('insert into t (id, v) values (?, ?)').run(2, 'x');
      db.prepare('update t set v = ? where id = 1').run('changed by the failing step');
      throw new Error('step 2 gives up');
    }),
    // A constraint error from SQLite itself (id 1 exists by now, in the same transaction).
    group.run(insert(1)),
    group.run(insert(4)),
  ]);
  assert.equal(results[0].status, 'fulfilled');
  assert.equal(results[1].status, 'rejected');
  assert.match(String((results[1] as PromiseRejectedResult).reason), /step 2 gives up/);
  assert.equal(results[2].status, 'rejected');
  assert.equal((results[2] as PromiseRejectedResult).reason.code, 'SQLITE_CONSTRAINT_PRIMARYKEY');
  assert.equal(results[3].status, 'fulfilled');
  assert.equal(group.stats.groups, 1);
  assert.deepEqual(await ids(k), [1, 4]);
  const row = await k.selectFrom('t').select('v').where('id', '=', 1).executeTakeFirstOrThrow();
  assert.equal(row.v, 'x');
});

test('a COMMIT that fails fails every step of its group and keeps none of them', async () => {
  const { k, group } = await open();
  const results = await Promise.allSettled([
    group.run((db) => {
      db.prepare('insert into t (id, v) values (1, ?)').run('innocent');
    }),
    group.run((db) => {
      // Checked at COMMIT only (deferred): the statement itself succeeds.
      db.prepare('insert into child (id, parent_id) values (1, 999)').run();
    }),
  ]);
  assert.deepEqual(
    results.map((r) => r.status),
    ['rejected', 'rejected'],
  );
  assert.match(String((results[0] as PromiseRejectedResult).reason.code), /SQLITE_CONSTRAINT/);
  assert.deepEqual(await ids(k), []);
  // The connection is usable afterwards: the next group commits.
  await group.run((db) => {
    db.prepare('insert into t (id, v) values (2, ?)').run('later');
  });
  assert.deepEqual(await ids(k), [2]);
});

test('steps that arrive while another transaction holds the connection wait for it, then commit together', async () => {
  const { k, group } = await open();
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const other = k.transaction().execute(async (trx) => {
    await sql`insert into t (id, v) values (100, 'other')`.execute(trx);
    await held;
  });
  // Let the other transaction take the connection first.
  await new Promise((r) => setTimeout(r, 20));
  const steps: Promise<void>[] = [];
  for (let i = 1; i <= 5; i++) {
    steps.push(
      group.run((db) => {
        db.prepare('insert into t (id, v) values (?, ?)').run(i, 'waited');
      }),
    );
    // A separate turn of the event loop for each.
    await new Promise((r) => setImmediate(r));
  }
  let settled = false;
  void Promise.all(steps).then(() => (settled = true));
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(settled, false, 'no step is answered while the other transaction holds the connection');
  release();
  await other;
  await Promise.all(steps);
  assert.equal(group.stats.groups, 1);
  assert.deepEqual(await ids(k), [1, 2, 3, 4, 5, 100]);
});

test('steps waiting when the database closes fail instead of waiting forever', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'stowage-group-'));
  dirs.push(dir);
  const db = openDatabase({ dataDir: dir, sqliteReaders: 0 });
  const k = db.kysely as unknown as Kysely<{ t: { id: number; v: string } }>;
  await sql`create table t (id integer primary key, v text not null)`.execute(k);
  const group = commitGroupOf(k, sqliteHandle(k)!);
  const steps = [1, 2].map((id) =>
    group.run((d) => {
      d.prepare('insert into t (id, v) values (?, ?)').run(id, 'never');
    }),
  );
  // Closed before the group's turn comes: its transaction cannot begin.
  await db.close();
  const results = await Promise.allSettled(steps);
  assert.deepEqual(
    results.map((r) => r.status),
    ['rejected', 'rejected'],
  );
  // Nothing is left waiting: a later step fails at once as well.
  await assert.rejects(group.run(() => {}));
});

test('a step that comes while a group commits goes into the next group', async () => {
  const { k, group } = await open();
  let late: Promise<void> | undefined;
  const first = group.run((db) => {
    db.prepare('insert into t (id, v) values (1, ?)').run('first');
    // Asked from inside the running group: it cannot join a transaction already being written.
    late = group.run((d) => {
      d.prepare('insert into t (id, v) values (2, ?)').run('late');
    });
  });
  await first;
  await late;
  assert.equal(group.stats.groups, 2);
  assert.deepEqual(await ids(k), [1, 2]);
});

test('a group that has used its time budget leaves the rest of its steps to the next group', async () => {
  // A budget below zero: every group stops after its first step.
  const { k, group } = await open(-1);
  const results = await Promise.allSettled(
    [1, 2, 3, 4, 5].map((id) =>
      group.run((db) => {
        if (id === 3) throw new Error('step 3 fails alone');
        db.prepare('insert into t (id, v) values (?, ?)').run(id, 'x');
      }),
    ),
  );
  assert.deepEqual(
    results.map((r) => r.status),
    ['fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled'],
  );
  assert.equal(group.stats.groups, 5);
  assert.equal(group.stats.steps, 5);
  assert.deepEqual(await ids(k), [1, 2, 4, 5]);
});
