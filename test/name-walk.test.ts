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

  before(async () => {
    db = openDatabase({ dataDir: dir });
    await migrateToLatest(db.kysely);
    logged = new Kysely<Database>({
      dialect: new SqliteDialect({ database: new SQLite(join(dir, 'stowage.db')) }),
      log: (e) => {
        captured.push(e.query.sql);
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
