// SQLite: a workspace-wide name search by date walks the name index in `seq` order
// (FileRepository.walkNames), trusting that order only as far as it checks it. Whatever order
// the files were created in, every page must be the one the date index gives; where the files
// came in date order, the walk must be what answered.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import SQLite from 'better-sqlite3';
import { Kysely, SqliteDialect, sql } from 'kysely';
import { newShortId, newUuid } from '../src/crypto/ids.ts';
import { type Db, openDatabase } from '../src/db/database.ts';
import { type FileFilter, FileRepository, type PageKey } from '../src/db/files.ts';
import { CREATED_LAG_UNBOUNDED } from '../src/db/derived.ts';
import { migrateTo, migrateToLatest } from '../src/db/migrations.ts';
import type { Database, FileRow } from '../src/db/schema.ts';
import { WorkspaceRepository } from '../src/db/workspaces.ts';

/** An ISO instant `n` seconds after a fixed start. */
const at = (n: number) => new Date(Date.UTC(2025, 0, 1) + n * 1000).toISOString();

interface Made {
  id: string;
  name: string;
  created_at: string;
}

describe('SQLite: a name search walks the name index in creation order', () => {
  const dir = mkdtempSync(join(tmpdir(), 'stowage-walk-'));
  let db: Db;
  let logged: Kysely<Database>;
  const captured: string[] = [];
  const lastParameters = new Map<string, readonly unknown[]>();

  before(async () => {
    db = openDatabase({ dataDir: dir });
    await migrateToLatest(db.kysely);
    logged = new Kysely<Database>({
      dialect: new SqliteDialect({ database: new SQLite(join(dir, 'stowage.db')) }),
      log: (e) => {
        captured.push(e.query.sql);
        lastParameters.set(e.query.sql, e.query.parameters);
      },
    });
  });
  after(async () => {
    await logged?.destroy();
    await db?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function workspace(on: Kysely<Database> = db.kysely): Promise<{ id: string; blob: string }> {
    const id = newShortId();
    await new WorkspaceRepository(on).insert({
      id,
      name: 'W',
      webhook_secret: `sealed-${id}`,
      quota_bytes: null,
      max_file_size: null,
      used_bytes: 0,
      reserved_bytes: 0,
      allowed_origins: null,
      webhook_origins: null,
      created_at: at(0),
      updated_at: at(0),
    });
    const blob = newUuid();
    await on
      .insertInto('blobs')
      .values({ id: blob, workspace_id: id, sha256: 'a'.repeat(64), size: 1, storage_key: blob, created_at: at(0) })
      .execute();
    return { id, blob };
  }

  /** Inserts the files in the order given (each gets the next `seq`). */
  async function insert(
    ws: { id: string; blob: string },
    files: { name: string; created_at: string }[],
    on: Kysely<Database> = db.kysely,
  ) {
    const repo = new FileRepository(on);
    const made: Made[] = [];
    for (const f of files) {
      const row: FileRow = {
        id: newUuid(),
        file_no: newShortId(),
        workspace_id: ws.id,
        folder_id: null,
        name: f.name,
        blob_id: ws.blob,
        size: 1,
        mime_type: 'image/png',
        extension: 'png',
        format: 'png',
        width: 1,
        height: 1,
        duration: null,
        media: null,
        tags: '[]',
        metadata: '{}',
        custom_id: null,
        is_private: 0,
        is_duplicate: 0,
        upload_source: 'direct',
        created_at: f.created_at,
        updated_at: f.created_at,
      };
      assert.equal(await repo.insertIfNameFree(row), true);
      made.push({ id: row.id, name: f.name, created_at: f.created_at });
    }
    return made;
  }

  /** The workspace's created_lag_ms (SQLite's migration 0014). */
  const lagOf = async (ws: string, on: Kysely<Database> = db.kysely) =>
    Number(
      (await sql<{ lag: number }>`select created_lag_ms as lag from workspaces where id = ${ws}`.execute(on)).rows[0]
        .lag,
    );

  /** The matches of `text` in the order of the date index (created_at, then id), newest first. */
  const expected = (made: Made[], text: string, atMost?: string) =>
    made
      .filter((m) => m.name.toLowerCase().includes(text) && (atMost === undefined || m.created_at <= atMost))
      .sort((a, b) => b.created_at.localeCompare(a.created_at) || (b.id < a.id ? -1 : b.id > a.id ? 1 : 0))
      .map((m) => m.name);

  /** Whether the page's statements include the other plans' (a keys walk joined to its rows as "k"). */
  const fellBack = (statements: string[]) => statements.some((s) => /\) as "k" inner join/.test(s));

  /** Every page of a search, by cursor and by offset, both ways; how many pages the walk answered. */
  async function pages(ws: string, f: FileFilter, want: string[], limit: number) {
    const repo = new FileRepository(logged);
    let walked = 0;
    let all = 0;
    for (const direction of ['desc', 'asc'] as const) {
      const order = direction === 'desc' ? want : [...want].reverse();
      const got: string[] = [];
      let key: PageKey | undefined;
      do {
        captured.length = 0;
        const page = await repo.page(ws, f, { sort: 'created_at', direction, limit, after: key });
        all++;
        if (!fellBack(captured)) walked++;
        got.push(...page.rows.map((r) => r.name));
        key = page.next ?? undefined;
      } while (key);
      assert.deepEqual(got, order, `${JSON.stringify(f)} ${direction} by cursor`);
      for (const offset of [0, limit, 2 * limit, order.length]) {
        captured.length = 0;
        const page = await repo.page(ws, f, { sort: 'created_at', direction, limit, offset });
        all++;
        if (!fellBack(captured)) walked++;
        assert.deepEqual(
          page.rows.map((r) => r.name),
          order.slice(offset, offset + limit),
          `${JSON.stringify(f)} ${direction} at offset ${offset}`,
        );
        assert.equal(page.next !== null, offset + limit < order.length, `more after offset ${offset}`);
      }
    }
    return { walked, all };
  }

  test('files created in date order: the walk answers, as the date index would', async () => {
    const ws = await workspace();
    const other = await workspace();
    const files: { name: string; created_at: string }[] = [];
    for (let i = 0; i < 150; i++) files.push({ name: `${i % 3 === 0 ? 'Forest' : 'sun'}-${i}.png`, created_at: at(i) });
    // The other workspace's matches sit between this one's in the index: the walk skips them.
    const otherFiles = files.map((f) => ({ name: `forest-other-${f.name}`, created_at: f.created_at }));
    const made: Made[] = [];
    for (let i = 0; i < files.length; i += 10) {
      made.push(...(await insert(ws, files.slice(i, i + 10))));
      await insert(other, otherFiles.slice(i, i + 5));
    }
    const forest = expected(made, 'forest');
    assert.equal(forest.length, 50);
    const { walked, all } = await pages(ws.id, { nameContains: ['forest'] }, forest, 7);
    assert.equal(walked, all, `the walk answered ${walked} of ${all} pages`);
    // A snapshot: the files created after it are left out, and the walk still answers the first page.
    captured.length = 0;
    const snap = await new FileRepository(logged).page(
      ws.id,
      { nameContains: ['forest'], createdAtMost: at(100) },
      { sort: 'created_at', direction: 'desc', limit: 7 },
    );
    assert.deepEqual(
      snap.rows.map((r) => r.name),
      expected(made, 'forest', at(100)).slice(0, 7),
    );
    assert.equal(fellBack(captured), false);
    // The page's rows are found by seq (a rowid lookup each), their workspace checked on each row:
    // were it read from its index, a page would read every file of the workspace.
    const rowsSql = captured.find((q) => q.includes('"missed"') && !q.includes(' match '));
    assert.ok(rowsSql, captured.join('\n'));
    const raw = new SQLite(join(dir, 'stowage.db'), { readonly: true });
    try {
      const detail = (
        raw.prepare(`explain query plan ${rowsSql}`).all(...(lastParameters.get(rowsSql) ?? [])) as { detail: string }[]
      ).map((r) => r.detail);
      assert.ok(
        detail.some((d) => /^SEARCH files USING INTEGER PRIMARY KEY \(rowid=\?\)/.test(d)),
        detail.join(' | '),
      );
    } finally {
      raw.close();
    }
    // Few matches: the walk holds them all, in any order.
    const rare = await pages(ws.id, { nameContains: ['t-14'] }, expected(made, 't-14'), 7);
    assert.ok(rare.walked > 0);
  });

  test('dates a few seconds behind insertion order: the lag is kept, and the walk checks windows that wide', async () => {
    const ws = await workspace();
    // Every fifth file is dated 5 s earlier than its place: it sorts before the two inserted just
    // before it, so pages of 6 often end between them and the walk's order differs from the list's.
    const files = [];
    for (let i = 0; i < 200; i++)
      files.push({ name: `${i % 2 === 0 ? 'forest' : 'sun'}-${i}.png`, created_at: at(2 * i - (i % 5 === 4 ? 5 : 0)) });
    const made = await insert(ws, files);
    assert.equal(await lagOf(ws.id), 3_001, 'behind the file two before it by 3 s, and a margin of 1 ms');
    const forest = expected(made, 'forest');
    assert.notDeepEqual(
      forest,
      made
        .filter((m) => m.name.startsWith('forest'))
        .map((m) => m.name)
        .reverse(),
      'the list order is not the insertion order',
    );
    const { walked, all } = await pages(ws.id, { nameContains: ['forest'] }, forest, 6);
    assert.equal(walked, all, `the walk answered ${walked} of ${all} pages`);

    // Ten files a second, and one inserted last but dated 3.4 s before the newest: far behind
    // in seq order, so the walk meets it only where the date index would, and the window around
    // the cursor has to find it when a page's walk starts after it.
    const dense = await workspace();
    const late = [];
    for (let i = 0; i < 300; i++) late.push({ name: `forest-${i}.png`, created_at: at(i / 10) });
    late.push({ name: 'forest-late.png', created_at: at(26.5) });
    const placed = await insert(dense, late);
    assert.equal(await lagOf(dense.id), 3_401);
    const byDate = expected(placed, 'forest');
    const lateAt = byDate.indexOf('forest-late.png');
    assert.ok(lateAt > 20 && lateAt < 40, `${lateAt}`);
    const seen = await pages(dense.id, { nameContains: ['forest'] }, byDate, 7);
    assert.ok(seen.walked < seen.all, 'the window around a cursor found the late file at least once');
    assert.ok(seen.walked >= seen.all - 6, `the walk answered ${seen.walked} of ${seen.all} pages`);
  });

  test('the lag: kept on insert, unbounded when a date changes in place, computed by migration 0014', async () => {
    const ws = await workspace();
    await insert(ws, [
      { name: 'a.png', created_at: at(10) },
      { name: 'b.png', created_at: at(20) },
      { name: 'c.png', created_at: at(20) },
    ]);
    assert.equal(await lagOf(ws.id), 0, 'in order (a tie is not behind)');
    await insert(ws, [{ name: 'd.png', created_at: at(12.5) }]);
    assert.equal(await lagOf(ws.id), 7_501);
    await insert(ws, [{ name: 'e.png', created_at: at(19) }]);
    assert.equal(await lagOf(ws.id), 7_501, 'the largest lag stays');
    const other = await workspace();
    await insert(other, [{ name: 'a.png', created_at: at(0) }]);
    assert.equal(await lagOf(other.id), 0, 'per workspace');
    await sql`update files set created_at = ${at(50)} where workspace_id = ${ws.id} and name = 'a.png'`.execute(
      db.kysely,
    );
    assert.equal(await lagOf(ws.id), CREATED_LAG_UNBOUNDED);

    // A database as release 0013 left it, with files out of order: the migration computes it.
    const old = mkdtempSync(join(tmpdir(), 'stowage-lag-'));
    const before = openDatabase({ dataDir: old });
    try {
      await migrateTo(before.kysely, '0013_undo_function');
      const a = await workspace(before.kysely);
      const b = await workspace(before.kysely);
      await insert(
        a,
        [0, 30, 29.25, 40, 10].map((n, i) => ({ name: `f${i}`, created_at: at(n) })),
        before.kysely,
      );
      await insert(
        b,
        [0, 1, 2].map((n, i) => ({ name: `f${i}`, created_at: at(n) })),
        before.kysely,
      );
      await migrateToLatest(before.kysely);
      assert.deepEqual([await lagOf(a.id, before.kysely), await lagOf(b.id, before.kysely)], [30_001, 0]);
      // Its triggers keep it from then on.
      await insert(b, [{ name: 'late', created_at: at(1.5) }], before.kysely);
      assert.equal(await lagOf(b.id, before.kysely), 501);
    } finally {
      await before.close();
      rmSync(old, { recursive: true, force: true });
    }
  });

  /** The page the walk gives and the one the date index gives (the walk turned off). */
  async function both(ws: string, f: FileFilter, p: Parameters<FileRepository['page']>[2]) {
    const show = (r: Awaited<ReturnType<FileRepository['page']>>) => ({
      names: r.rows.map((x) => x.name),
      start: r.start,
      next: r.next,
    });
    captured.length = 0;
    const walk = show(await new FileRepository(logged).page(ws, f, p));
    const walked = !fellBack(captured);
    const byDate = show(await new FileRepository(db.kysely, undefined, undefined, 0).page(ws, f, p));
    return { walk, byDate, walked };
  }

  test("a seq freed and taken between the walk and its rows (by another workspace or its own), or a file renamed: the page is still the date index's", async () => {
    for (const by of ['another workspace', 'the same workspace', 'a rename'] as const) {
      const ws = await workspace();
      const other = await workspace();
      await insert(other, [{ name: 'forest-secret.png', created_at: at(1) }]);
      const made = await insert(
        ws,
        Array.from({ length: 30 }, (_, i) => ({ name: `forest-${i}.png`, created_at: at(i) })),
      );
      const newest = made.at(-1) as Made;
      const taker = by === 'another workspace' ? other.id : ws.id;
      // A third connection, written to synchronously right after the walk's statement ran: the
      // newest file (the table's highest seq) is deleted, and the next file inserted takes its
      // seq, as SQLite gives a new row the highest rowid plus one.
      const raw = new SQLite(join(dir, 'stowage.db'));
      let racing: Kysely<Database> | undefined;
      try {
        const columns = (raw.pragma('table_info(files)') as { name: string }[])
          .map((c) => c.name)
          .filter((c) => c !== 'seq');
        const copy = columns.map((c) => (c === 'id' || c === 'file_no' || c === 'name' ? '?' : c)).join(', ');
        const { seq } = raw.prepare('select seq from files where id = ?').get(newest.id) as { seq: number };
        let raced = 0;
        captured.length = 0;
        racing = new Kysely<Database>({
          dialect: new SqliteDialect({ database: new SQLite(join(dir, 'stowage.db')) }),
          log: (e) => {
            captured.push(e.query.sql);
            if (raced > 0 || !/ match /.test(e.query.sql)) return;
            raced++;
            if (by === 'a rename') {
              raw.prepare("update files set name = 'desert.png' where id = ?").run(newest.id);
              return;
            }
            raw.prepare('delete from files where id = ?').run(newest.id);
            raw
              .prepare(
                `insert into files (${columns.join(', ')}) select ${copy} from files where workspace_id = ? and name = ?`,
              )
              .run(
                newUuid(),
                newShortId(),
                'forest-taken.png',
                taker,
                taker === ws.id ? 'forest-0.png' : 'forest-secret.png',
              );
          },
        });
        const page = await new FileRepository(racing).page(
          ws.id,
          { nameContains: ['forest'] },
          { sort: 'created_at', direction: 'desc', limit: 5 },
        );
        assert.equal(raced, 1);
        const taken = raw.prepare('select workspace_id, name from files where seq = ?').get(seq) as {
          workspace_id: string;
          name: string;
        };
        assert.deepEqual(
          taken,
          by === 'a rename'
            ? { workspace_id: ws.id, name: 'desert.png' }
            : { workspace_id: taker, name: 'forest-taken.png' },
          `${by} holds the seq`,
        );
        assert.deepEqual(
          page.rows.map((r) => r.name),
          ['forest-28.png', 'forest-27.png', 'forest-26.png', 'forest-25.png', 'forest-24.png'],
          by,
        );
        assert.ok(page.rows.every((r) => r.workspace_id === ws.id));
        assert.equal(
          fellBack(captured),
          true,
          `${by}: a row gone or changed since the walk, so the date index answered`,
        );
      } finally {
        await racing?.destroy();
        raw.close();
      }
    }
  });

  test("a cursor whose date is written in another form: the date index's page, never a window of the wrong width", async () => {
    const ws = await workspace();
    // Ten files a second, every fortieth dated 3 s before its place (2.9 s behind the file before it): a page after a cursor must
    // find such late files in the window around the cursor's date.
    const files = [];
    for (let i = 0; i < 600; i++)
      files.push({ name: `forest-${i}.png`, created_at: at((i % 40 === 39 ? i - 30 : i) / 10) });
    const made = await insert(ws, files);
    assert.equal(await lagOf(ws.id), 2_901);
    // Each cursor names a real file, its date written as a client could write it: the same text
    // with an offset (a minute away as a time, next to the file as text), without milliseconds,
    // with a space, in lower case; and a few that are no date at all.
    const forms = (v: string) => [
      v,
      v.replace('Z', '+00:01'),
      v.replace('Z', '-00:01'),
      v.replace('Z', '+00:00'),
      v.replace('.000Z', 'Z'),
      v.replace('T', ' '),
      v.toLowerCase(),
      v.slice(0, 10),
      'not a date',
      // Written as Stowage writes dates, but no time at all (a month 13, an hour 24 or 25).
      v.replace(/-\d\dT/, '-13T'),
      v.replace(/T\d\d/, 'T24'),
      v.replace(/T\d\d/, 'T25'),
      '+010000-01-01T00:00:00.000Z',
    ];
    let compared = 0;
    let count = 0;
    for (const r of made.filter((_, i) => i % 23 === 5)) {
      count++;
      for (const v of forms(r.created_at))
        for (const direction of ['desc', 'asc'] as const) {
          const p = { sort: 'created_at' as const, direction, limit: 6, after: { v, id: r.id } };
          const { walk, byDate } = await both(ws.id, { nameContains: ['forest'] }, p);
          assert.deepEqual(walk, byDate, `${direction} after ${v} ${r.id}`);
          compared++;
        }
    }
    assert.equal(compared, count * 13 * 2);
  });

  test('a file dated in another form: the lag is unbounded (kept by the triggers, computed by migration 0015)', async () => {
    for (const odd of [
      '2025-01-01T00:10:00Z',
      '2025-01-01 00:10:00.000',
      '2025-01-01T00:10:00.000+00:00',
      'soon',
      // Written back unchanged by SQLite's strftime, yet not toISOString's: an hour 24, a negative year.
      '2025-01-01T24:10:00.000Z',
      '-2025-01-01T00:10:00.000Z',
    ]) {
      const ws = await workspace();
      await insert(ws, [
        { name: 'a.png', created_at: at(10) },
        { name: 'b.png', created_at: at(20) },
      ]);
      assert.equal(await lagOf(ws.id), 0);
      // Nearly all later than every file, as text and as a time: only its form makes it unbounded.
      await insert(ws, [{ name: 'c.png', created_at: odd }]);
      assert.equal(await lagOf(ws.id), CREATED_LAG_UNBOUNDED, odd);
      await insert(ws, [{ name: 'd.png', created_at: at(700) }]);
      assert.equal(await lagOf(ws.id), CREATED_LAG_UNBOUNDED, 'it stays');
      // Pages are still the date index's, the walk reading the whole span or giving way.
      for (const direction of ['desc', 'asc'] as const)
        for (const offset of [0, 1, 2, 3, 4]) {
          const { walk, byDate } = await both(
            ws.id,
            { nameContains: ['.png'] },
            {
              sort: 'created_at',
              direction,
              limit: 1,
              offset,
            },
          );
          assert.deepEqual(walk, byDate, `${odd} ${direction} at ${offset}`);
        }
    }

    // A database as migration 0014 left it, one file dated without milliseconds but in order as
    // text: 0014's trigger saw no lag (which the insert trigger's absence stands in for here, the
    // migration now making today's); migration 0015 recomputes it, and its triggers take over.
    const old = mkdtempSync(join(tmpdir(), 'stowage-lag-'));
    const before = openDatabase({ dataDir: old });
    try {
      await migrateTo(before.kysely, '0014_created_lag');
      await sql`drop trigger files_created_lag`.execute(before.kysely);
      const a = await workspace(before.kysely);
      const b = await workspace(before.kysely);
      await insert(
        a,
        [at(0), at(5), '2025-01-01T00:00:09Z', at(12)].map((created_at, i) => ({ name: `f${i}`, created_at })),
        before.kysely,
      );
      await insert(
        b,
        [0, 1, 2].map((n, i) => ({ name: `f${i}`, created_at: at(n) })),
        before.kysely,
      );
      assert.equal(await lagOf(a.id, before.kysely), 0, "0014's trigger compared the text only");
      await migrateToLatest(before.kysely);
      assert.deepEqual(
        [await lagOf(a.id, before.kysely), await lagOf(b.id, before.kysely)],
        [CREATED_LAG_UNBOUNDED, 0],
      );
      await insert(b, [{ name: 'late', created_at: '2025-01-01T00:00:03+00:00' }], before.kysely);
      assert.equal(await lagOf(b.id, before.kysely), CREATED_LAG_UNBOUNDED);
    } finally {
      await before.close();
      rmSync(old, { recursive: true, force: true });
    }
  });

  test('dates in the last seconds of year 9999: windows past it are not read as dates', async () => {
    const ws = await workspace();
    const end = Date.UTC(9999, 11, 31, 23, 59, 59, 999);
    // The newest file is inserted first; the others, inserted after it, are dated up to 9.5 s
    // before it (under NAME_WALK_LAG_MAX): a page's window toward the newest reaches past 9999.
    const files = [{ name: 'forest-newest.png', created_at: new Date(end - 499).toISOString() }];
    for (let i = 0; i < 40; i++)
      files.push({ name: `forest-${i}.png`, created_at: new Date(end - 9_999 + i * 10).toISOString() });
    const made = await insert(ws, files);
    assert.equal(await lagOf(ws.id), 9_501);
    const want = expected(made, 'forest');
    const { all } = await pages(ws.id, { nameContains: ['forest'] }, want, 5);
    assert.ok(all > 0);
  });

  test('an offset as deep as the matches: the same empty page and start as the date index gives', async () => {
    const ws = await workspace();
    await insert(
      ws,
      Array.from({ length: 12 }, (_, i) => ({ name: `${i % 2 ? 'forest' : 'sun'}-${i}.png`, created_at: at(i) })),
    );
    for (const direction of ['desc', 'asc'] as const)
      for (const offset of [5, 6, 7, 20]) {
        const { walk, byDate, walked } = await both(
          ws.id,
          { nameContains: ['forest'] },
          {
            sort: 'created_at',
            direction,
            limit: 4,
            offset,
          },
        );
        assert.deepEqual(walk, byDate, `${direction} at ${offset}`);
        assert.equal(walked, true);
      }
  });

  test('files whose dates disagree with their order: every page still as the date index gives it', async () => {
    const ws = await workspace();
    // The newest file by date comes first in seq (the walk reaches it last); an old one comes last
    // (the walk meets it first); ten share one instant, their ids in no particular order.
    const files = [{ name: 'forest-newest.png', created_at: at(10_000) }];
    for (let i = 0; i < 120; i++)
      files.push({ name: `${i % 2 === 0 ? 'forest' : 'sun'}-${i}.png`, created_at: at(i >= 40 && i < 60 ? 40 : i) });
    files.push({ name: 'forest-oldest.png', created_at: at(-5) });
    const made = await insert(ws, files);
    const forest = expected(made, 'forest');
    assert.equal(forest[0], 'forest-newest.png');
    assert.equal(forest.at(-1), 'forest-oldest.png');
    const { walked, all } = await pages(ws.id, { nameContains: ['forest'] }, forest, 6);
    assert.ok(walked < all, 'the check sent some pages to the date index');
    // Without the out-of-order files, the same pages: the first page desc checks and gives way.
    captured.length = 0;
    const first = await new FileRepository(logged).page(
      ws.id,
      { nameContains: ['forest'] },
      { sort: 'created_at', direction: 'desc', limit: 6 },
    );
    assert.equal(first.rows[0].name, 'forest-newest.png');
    assert.equal(fellBack(captured), true, 'the newest file was behind the walk: the date index answered');
  });
});
