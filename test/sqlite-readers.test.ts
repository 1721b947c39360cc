// SQLite reader threads (src/db/sqlite-readers.ts): plain reads leave the event loop free, see
// every committed write, keep their rows and errors as the main connection gives them; queries in
// a transaction stay on the transaction's connection; a dying thread costs only its query a retry.
import assert from 'node:assert/strict';
import { closeSync, mkdtempSync, openSync, readFileSync, readSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import SQLite from 'better-sqlite3';
import { type Generated, type Kysely, sql } from 'kysely';
import { type Db, inTransaction, openDatabase } from '../src/db/database.ts';
import { asPointRead } from '../src/db/sqlite-readers.ts';

interface TestDb {
  t: { id: Generated<number>; v: string | null; big: number | null; r: number | null; b: Buffer | null };
}

const dirs: string[] = [];
const opened: Db[] = [];
after(async () => {
  for (const db of opened) await db.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A database in a fresh directory (or `dataDir`'s), with table t. */
async function open(
  readers: number,
  dataDir?: string,
  walRestartPages?: number,
): Promise<{ db: Db; k: Kysely<TestDb>; dataDir: string }> {
  const dir = dataDir ?? mkdtempSync(join(tmpdir(), 'stowage-readers-'));
  if (!dataDir) dirs.push(dir);
  const db = openDatabase({ dataDir: dir, sqliteReaders: readers, sqliteWalRestartPages: walRestartPages });
  opened.push(db);
  const k = db.kysely as unknown as Kysely<TestDb>;
  await sql`create table if not exists t (id integer primary key, v text, big integer, r real, b blob)`.execute(k);
  await db.readers?.ready();
  return { db, k, dataDir: dir };
}

/** A SELECT (a SelectQueryNode, so a reader's) that keeps SQLite busy counting to `n`. */
const slowCount = (k: Kysely<TestDb>, n: number) =>
  k
    .withRecursive('c(n)', (qb) =>
      qb
        .selectNoFrom(sql<number>`1`.as('n'))
        .unionAll((q) => q.selectFrom('c').select(sql<number>`n + 1`.as('n')).where('n', '<', n)),
    )
    .selectFrom('c')
    .select((eb) => eb.fn.countAll<number>().as('total'))
    .executeTakeFirstOrThrow();

/** Runs `fn` and reports how long it took and the longest the event loop stood still meanwhile, in ms. */
async function loopDelayDuring(fn: () => Promise<unknown>): Promise<{ ms: number; maxDelayMs: number }> {
  // A 5 ms timer: any gap between two of its ticks beyond 5 ms is time the loop could not turn.
  let last = performance.now();
  let maxDelayMs = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    maxDelayMs = Math.max(maxDelayMs, now - last - 5);
    last = now;
  }, 5);
  const t0 = performance.now();
  await fn();
  const ms = performance.now() - t0;
  // A stalled loop shows only when the timer fires again.
  await sleep(10);
  clearInterval(timer);
  return { ms, maxDelayMs };
}

const COUNT_TO = 3_000_000;

describe('SQLite reader threads', () => {
  test('a long read runs on a reader: the event loop keeps turning; without readers it stalls', async (t) => {
    const on = await open(2);
    const served = on.db.readers!.stats().served;
    const threaded = await loopDelayDuring(async () => {
      assert.equal((await slowCount(on.k, COUNT_TO)).total, COUNT_TO);
    });
    assert.equal(on.db.readers!.stats().served, served + 1, 'the query went to a reader');

    const off = await open(0);
    assert.equal(off.db.readers, undefined);
    const inline = await loopDelayDuring(async () => {
      assert.equal((await slowCount(off.k, COUNT_TO)).total, COUNT_TO);
    });
    const fmt = (x: { ms: number; maxDelayMs: number }) => `${x.maxDelayMs.toFixed(0)} ms of ${x.ms.toFixed(0)} ms`;
    t.diagnostic(`loop stalled: readers ${fmt(threaded)}, no readers ${fmt(inline)}`);
    // Relative to each query's own duration, so a slow or busy machine does not change the verdict.
    assert.ok(
      threaded.maxDelayMs < threaded.ms / 2,
      `with readers the loop stalled ${threaded.maxDelayMs.toFixed(0)} ms of a ${threaded.ms.toFixed(0)} ms query`,
    );
    assert.ok(
      inline.maxDelayMs > inline.ms * 0.8,
      `without readers the loop stalled only ${inline.maxDelayMs.toFixed(0)} ms of a ${inline.ms.toFixed(0)} ms query`,
    );
  });

  test('read your writes: every insert is seen by the next read on a reader', async () => {
    const { db, k } = await open(2);
    const served = db.readers!.stats().served;
    for (let i = 0; i < 300; i++) {
      const { insertId } = await k
        .insertInto('t')
        .values({ v: `row ${i}` })
        .executeTakeFirstOrThrow();
      const row = await k.selectFrom('t').select('v').where('id', '=', Number(insertId)).executeTakeFirst();
      assert.equal(row?.v, `row ${i}`);
      const { n } = await k
        .selectFrom('t')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .executeTakeFirstOrThrow();
      assert.equal(n, i + 1);
    }
    assert.equal(db.readers!.stats().served, served + 600, 'all reads went to readers');
  });

  test('a point read (the API-key check) stays on the main connection; other reads go to threads', async () => {
    const { db, k } = await open(2);
    await k.insertInto('t').values({ v: 'key' }).execute();
    const point = asPointRead(k.selectFrom('t').select('v').where('id', '=', 1).compile());
    const served = db.readers!.stats().served;
    for (let i = 0; i < 20; i++) {
      // As WorkspaceRepository does: the compiled query again with its parameters.
      const { rows } = await k.executeQuery({ ...point, parameters: [1] });
      assert.deepEqual(rows, [{ v: 'key' }]);
    }
    assert.equal(db.readers!.stats().served, served, 'no point read went to a thread');
    const { rows } = await k.executeQuery(k.selectFrom('t').select('v').where('id', '=', 1).compile());
    assert.deepEqual(rows, [{ v: 'key' }]);
    assert.equal(db.readers!.stats().served, served + 1, 'the same read, unmarked, did');
  });

  test('in a transaction reads see its own writes; outside, readers see only what is committed', async () => {
    const { db, k } = await open(2);
    const kysely = db.kysely;
    const count = async (q: Kysely<TestDb>) =>
      (
        await q
          .selectFrom('t')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .executeTakeFirstOrThrow()
      ).n;
    const before = await count(k);
    const served = db.readers!.stats().served;
    await inTransaction(kysely, async (trxDb) => {
      const trx = trxDb as unknown as Kysely<TestDb>;
      await trx.insertInto('t').values({ v: 'uncommitted' }).execute();
      assert.equal(await count(trx), before + 1, 'the transaction sees its own insert');
      assert.equal(db.readers!.stats().served, served, 'reads of a transaction stay on its connection');
      // Before readers this would have waited for the transaction (and deadlocked here).
      assert.equal(await count(k), before, 'a reader does not see the uncommitted insert');
    });
    assert.equal(await count(k), before + 1, 'committed: readers see it');
  });

  test('reader threads read the database file through a memory map; the main connection does not', async (t) => {
    if (process.platform !== 'linux') return t.skip('reads /proc/self/maps');
    const mapped = (dir: string) =>
      readFileSync('/proc/self/maps', 'utf8')
        .split('\n')
        .some((line) => line.endsWith(join(dir, 'stowage.db')));
    // Threads share the process's address space: a map made by a reader shows in its maps.
    const off = await open(0);
    await off.k.insertInto('t').values({ v: 'x' }).execute();
    await sql`pragma wal_checkpoint(TRUNCATE)`.execute(off.k);
    assert.equal((await off.k.selectFrom('t').selectAll().execute()).length, 1);
    assert.equal(mapped(off.dataDir), false, 'without readers, nothing maps the file');
    const on = await open(2);
    await on.k.insertInto('t').values({ v: 'x' }).execute();
    // Into the database file: a fresh database is all in its WAL, and an empty file maps nothing.
    await sql`pragma wal_checkpoint(TRUNCATE)`.execute(on.k);
    const served = on.db.readers!.stats().served;
    assert.equal((await on.k.selectFrom('t').selectAll().execute()).length, 1);
    assert.equal(on.db.readers!.stats().served, served + 1, 'read on a thread');
    assert.equal(mapped(on.dataDir), true, 'a reader maps the file (READER_MMAP_BYTES)');
  });

  test('rows are the same as on the main connection: numbers, big integers, reals, nulls, blobs', async () => {
    const { db, k, dataDir } = await open(2);
    await k
      .insertInto('t')
      .values([
        { v: 'a', big: 2 ** 53 + 2, r: 1.5, b: Buffer.from([0, 1, 2, 255]) },
        { v: null, big: -7, r: null, b: null },
      ])
      .execute();
    const query = () => k.selectFrom('t').selectAll().orderBy('id').execute();
    const served = db.readers!.stats().served;
    const threaded = await query();
    assert.equal(db.readers!.stats().served, served + 1);
    const inline = await (await open(0, dataDir)).k.selectFrom('t').selectAll().orderBy('id').execute();
    assert.deepEqual(threaded, inline);
    assert.equal(Object.getPrototypeOf(threaded[0]), Object.prototype);
    assert.ok(Buffer.isBuffer(threaded[0].b), 'a blob is a Buffer');
    assert.equal(typeof threaded[0].big, 'number');
    // A Buffer parameter arrives as one too.
    const byBlob = await k
      .selectFrom('t')
      .select('v')
      .where('b', '=', Buffer.from([0, 1, 2, 255]))
      .execute();
    assert.deepEqual(byBlob, [{ v: 'a' }]);
  });

  test('a column named twice, as a join can give it: the later value wins, as on the main connection', async () => {
    const { db, k, dataDir } = await open(2);
    await k
      .insertInto('t')
      .values([{ v: 'first' }, { v: 'second' }])
      .execute();
    // Both rows' columns under the same names: the second table's `id` and `v` come last.
    const query = (q: Kysely<TestDb>) =>
      q
        .selectFrom('t as a')
        .innerJoin('t as b', (j) => j.on(sql<boolean>`${sql.ref('b.id')} = ${sql.ref('a.id')} + 1`))
        .select(['a.id', 'a.v', 'b.id', 'b.v'])
        .orderBy('a.id')
        .execute();
    const served = db.readers!.stats().served;
    const threaded = await query(k);
    assert.equal(db.readers!.stats().served, served + 1, 'read on a thread');
    const inline = await query((await open(0, dataDir)).k);
    assert.ok(threaded.length > 0);
    assert.deepEqual(threaded, inline);
    assert.deepEqual(Object.keys(threaded[0]), ['id', 'v']);
    assert.equal(threaded[threaded.length - 1].v, 'second', 'the later column (b.v) is the value kept');
  });

  test('column names that are code or a prototype are plain keys, and the prototype stays', async () => {
    const { db, k, dataDir } = await open(2);
    await k.insertInto('t').values({ v: 'x' }).execute();
    const names = [
      '__proto__',
      'constructor',
      'a"b',
      "c'd",
      '`${process.exit(1)}`',
      '}; process.exit(1); ({',
      'x\ny',
      '',
    ];
    const query = (q: Kysely<TestDb>) =>
      q
        .selectFrom('t')
        .select(names.map((n, i) => sql<number>`${i}`.as(n)))
        .execute();
    const served = db.readers!.stats().served;
    const threaded = (await query(k)) as Record<string, unknown>[];
    assert.equal(db.readers!.stats().served, served + 1, 'read on a thread');
    const inline = (await query((await open(0, dataDir)).k)) as Record<string, unknown>[];
    assert.equal(Object.getPrototypeOf(threaded[0]), Object.prototype, 'the prototype is untouched');
    assert.deepEqual(Object.keys(threaded[0]), names);
    for (const [i, n] of names.entries()) assert.equal(Object.getOwnPropertyDescriptor(threaded[0], n)?.value, i, n);
    // better-sqlite3 on the main connection sets `__proto__` as an assignment (a number is then
    // ignored): the thread keeps it as a column, and every other key is the same.
    assert.deepEqual(Object.keys(inline[0]), names.slice(1), 'the main connection: the other keys');
    assert.equal(Object.getPrototypeOf(inline[0]), Object.prototype);
  });

  test("a reader's error is a real SqliteError with the same code as on the main connection", async () => {
    const on = await open(2);
    const off = await open(0, on.dataDir);
    const missing = (q: Kysely<TestDb>) =>
      (q as unknown as Kysely<{ nope: { id: number } }>).selectFrom('nope').selectAll().execute();
    const served = on.db.readers!.stats().served;
    const threaded = await missing(on.k).then(
      () => assert.fail('no error'),
      (e: unknown) => e,
    );
    assert.equal(on.db.readers!.stats().served, served + 1);
    const inline = await missing(off.k).then(
      () => assert.fail('no error'),
      (e: unknown) => e,
    );
    assert.ok(threaded instanceof SQLite.SqliteError);
    assert.ok(threaded instanceof Error);
    assert.equal(threaded.code, 'SQLITE_ERROR');
    assert.equal(threaded.code, (inline as { code?: string }).code);
    assert.equal(threaded.message, (inline as Error).message);
  });

  test('a reader killed under a query: the query is retried once, others go on, the pool recovers', async () => {
    const { db, k } = await open(2);
    const readers = db.readers!;
    const [first, second] = readers.threads();
    // Idle threads take work in order, so the first one runs the slow count.
    const slow = slowCount(k, COUNT_TO);
    await sleep(50);
    assert.equal(readers.stats().busy, 1);
    await first.terminate();
    // The second thread gets the retry; queries queued meanwhile wait their turn and succeed.
    const quick = await k
      .selectFrom('t')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    assert.equal(typeof quick.n, 'number');
    assert.equal((await slow).total, COUNT_TO, 'retried on another thread');
    await readers.ready();
    const now = readers.threads();
    assert.equal(now.length, 2);
    assert.ok(!now.includes(first), 'the dead thread was replaced');
    assert.ok(now.includes(second));

    // A query whose thread dies twice fails, with a code; the pool still recovers.
    const doomed = slowCount(k, COUNT_TO).then(
      () => assert.fail('no error'),
      (e: unknown) => e,
    );
    await sleep(50);
    const [busy, other] = readers.threads();
    await busy.terminate();
    await sleep(50);
    assert.equal(readers.stats().busy, 1, 'retried on the other thread');
    await other.terminate();
    const err = (await doomed) as Error & { code?: string };
    assert.equal(err.code, 'SQLITE_READER_EXITED');
    // Meanwhile reads fall back to the main connection rather than wait or fail.
    assert.equal((await k.selectFrom('t').selectAll().execute()).length, 0);
    await readers.ready();
    const served = readers.stats().served;
    assert.equal((await slowCount(k, 1000)).total, 1000);
    assert.equal(readers.stats().served, served + 1, 'readers serve again');
  });

  test('in-memory databases have no readers and work as before', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'stowage-readers-'));
    dirs.push(dir);
    const db = openDatabase({ dataDir: dir, sqlitePath: ':memory:', sqliteReaders: 2 });
    opened.push(db);
    assert.equal(db.readers, undefined);
    assert.equal(db.checkpointer, undefined);
    const k = db.kysely as unknown as Kysely<TestDb>;
    await sql`create table t (id integer primary key, v text, big integer, r real, b blob)`.execute(k);
    await k.insertInto('t').values({ v: 'x' }).execute();
    assert.deepEqual(await k.selectFrom('t').select('v').execute(), [{ v: 'x' }]);
  });

  test('WAL checkpoints run on their own thread, not in a commit on the main connection', async () => {
    const { db, k } = await open(2);
    const cp = db.checkpointer!;
    assert.ok(cp, 'readers come with a checkpointer');
    // The main connection's automatic checkpoint is only a safety net now.
    const auto = await sql<{ wal_autocheckpoint: number }>`pragma wal_autocheckpoint`.execute(k);
    assert.equal(auto.rows[0].wal_autocheckpoint, 100_000);
    // ~3,000 pages written: past SQLite's default of 1,000, the main connection would have checkpointed.
    const blob = Buffer.alloc(3000, 7);
    for (let i = 0; i < 1000; i++) await k.insertInto('t').values({ b: blob }).execute();
    for (let i = 0; i < 200 && !(cp.stats.checkpointed > 1000 && cp.stats.checkpointed === cp.stats.log); i++)
      await sleep(25);
    assert.ok(cp.stats.checkpointed > 1000, `the thread checkpointed ${cp.stats.checkpointed} frames`);
    assert.equal(cp.stats.checkpointed, cp.stats.log, 'the whole WAL reached the database file');
    // A checkpointer that dies is started again; writes meanwhile are fine.
    const first = cp.thread()!;
    await first.terminate();
    for (let i = 0; i < 400; i++) await k.insertInto('t').values({ b: blob }).execute();
    for (let i = 0; i < 200 && !(cp.stats.starts === 2 && cp.stats.checkpointed === cp.stats.log); i++) await sleep(25);
    assert.equal(cp.stats.starts, 2);
    assert.notEqual(cp.thread(), first);
    assert.equal(cp.stats.checkpointed, cp.stats.log);
    assert.equal(
      (
        await k
          .selectFrom('t')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
      1400,
    );
  });

  test('under steady writes the WAL starts over instead of growing to the safety net', async () => {
    // Past 300 pages the writer is held back once and the next write starts the WAL over. Without
    // that, PASSIVE checkpoints copy the frames back but the WAL file only grows.
    const { db, k, dataDir } = await open(2, undefined, 300);
    const cp = db.checkpointer!;
    await cp.ready();
    const wal = join(dataDir, 'stowage.db-wal');
    const blob = Buffer.alloc(3000, 7);
    let largest = 0;
    let rows = 0;
    // The WAL header's checkpoint sequence number (bytes 12 to 15) goes up each time it starts over.
    const sequence = () => {
      const fd = openSync(wal, 'r');
      try {
        const header = Buffer.alloc(16);
        return readSync(fd, header, 0, 16, 0) === 16 ? header.readUInt32BE(12) : -1;
      } finally {
        closeSync(fd);
      }
    };
    const sequences = new Set<number>();
    // Writes that never pause for long, as uploads arrive: 80 rounds of 100 inserts, 40 ms apart.
    const reads: Promise<unknown>[] = [];
    for (let round = 0; round < 80; round++) {
      for (let i = 0; i < 100; i++) await k.insertInto('t').values({ b: blob }).execute();
      rows += 100;
      reads.push(
        k
          .selectFrom('t')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .executeTakeFirstOrThrow(),
      );
      largest = Math.max(largest, statSync(wal).size);
      sequences.add(sequence());
      await sleep(40);
    }
    // 8,000 commits of a ~3 KB row: about 100 MB of WAL without a restart. A restarted WAL keeps
    // its file and writes it again from the start: its size stays where it was at the first
    // restart (half a second of writes after the thread is ready: a few MB on a quiet machine;
    // 65 MB was seen on one loaded to four times its usual test times, so the size bound is loose).
    // The 40 ms pauses also let SQLite start the WAL over by itself now and then (a write that
    // finds every frame copied back), so a new checkpoint sequence alone does not prove the hold:
    // the checkpointer's count of answered restart holds does (0 with the threshold out of reach).
    assert.ok(sequences.size >= 2, `the WAL never started over (checkpoint sequence ${[...sequences].join(', ')})`);
    assert.ok(largest < 80 * 1024 * 1024, `the WAL reached ${largest} bytes`);
    assert.ok(cp.stats.restartHolds >= 1, `the writer was held back for a restart ${cp.stats.restartHolds} times`);
    // Reads meanwhile answered, and nothing written was lost.
    for (const n of await Promise.all(reads)) assert.ok((n as { n: number }).n > 0);
    const { n } = await k
      .selectFrom('t')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    assert.equal(n, rows);
  });

  test("the name index's segments are merged on the checkpointer thread, not in commits on the main one", async () => {
    // FTS5 merges its segments inside the commit that writes them (automerge), on the main
    // thread: 150 ms and more at a time on a million names. With the thread, that is off and the
    // thread merges a bounded step at a time while the writer is held back.
    const { db, k, dataDir } = await open(2);
    await sql`create virtual table files_name_fts using fts5(name, tokenize = 'trigram')`.execute(k);
    const automerge = async (kk: Kysely<TestDb>) =>
      (await sql<{ v: number }>`select v from files_name_fts_config where k = 'automerge'`.execute(kk)).rows[0]?.v;
    const cp = db.checkpointer!;
    // One segment per commit: 2,000 commits, as 2,000 uploads would make.
    for (let round = 0; round < 20; round++) {
      for (let i = 1; i <= 100; i++)
        await sql`insert into files_name_fts (rowid, name) values (${round * 100 + i}, ${`photo-${round}-${i}-summer.jpg`})`.execute(
          k,
        );
      await sleep(30);
    }
    for (let i = 0; i < 200 && !(cp.stats.merges > 0 && (await automerge(k)) === 0); i++) await sleep(25);
    assert.equal(await automerge(k), 0, 'commits no longer merge');
    assert.ok(cp.stats.merges > 0, `the thread merged ${cp.stats.merges} times`);
    assert.equal(cp.stats.mergeError, '');
    // The index is whole and answers as before.
    await sql`insert into files_name_fts(files_name_fts) values('integrity-check')`.execute(k);
    const hits = await sql<{
      rowid: number;
    }>`select rowid from files_name_fts where name like '%-7-summer%' order by rowid`.execute(k);
    assert.deepEqual(
      hits.rows.map((r) => r.rowid),
      Array.from({ length: 20 }, (_, round) => round * 100 + 7),
    );
    // Opened again without the thread, FTS5 merges in commits again: nothing else would.
    await db.close();
    opened.splice(opened.indexOf(db), 1);
    const { k: k2 } = await open(0, dataDir);
    assert.equal(await automerge(k2), 4);
  });

  test('close() ends the reader threads', async () => {
    const { db } = await open(2);
    const threads = db.readers!.threads();
    const exits = threads.map((w) => new Promise((resolve) => w.once('exit', resolve)));
    const checkpointer = db.checkpointer!.thread()!;
    exits.push(new Promise((resolve) => checkpointer.once('exit', resolve)));
    await db.close();
    await Promise.all(exits);
    assert.equal(db.readers!.threads().length, 0);
    assert.equal(db.checkpointer!.thread(), undefined);
    opened.splice(opened.indexOf(db), 1);
  });
});
