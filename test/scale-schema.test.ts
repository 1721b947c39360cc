// Issue 18's schema (migration 0007): run on a database as release 0006 left it, full of files,
// it must keep every file where it was (paths, names, tags, sizes), build the counters, tag rows
// and name index right, and keep them right under every write the API makes, also in parallel.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import SQLite from 'better-sqlite3';
import { CompiledQuery, Kysely, PostgresDialect, SqliteDialect, sql } from 'kysely';
import pg from 'pg';
import { newShortId, newUuid } from '../src/crypto/ids.ts';
import { type Db, openDatabase } from '../src/db/database.ts';
import { createTagCounts, derivedDrift } from '../src/db/derived.ts';
import { type FileFilter, FileRepository, NAME_SCAN_MAX, type PageKey } from '../src/db/files.ts';
import { FolderRepository } from '../src/db/folders.ts';
import { migrateTo, migrateToLatest } from '../src/db/migrations.ts';
import type { Database } from '../src/db/schema.ts';
import { PageBoundaries, SHALLOW_ROWS } from '../src/services/page-boundaries.ts';
import { SEARCH_COUNT_CAP } from '../src/services/files.ts';
import { DIALECTS, freshPostgres, type Harness, makeHarness } from './helpers/harness.ts';
import { call } from './helpers/http.ts';

const TAGS = ['red', 'blue', 'green', 'big', 'small', 'ünïcode', 'with space'];
const FOLDERS = ['', 'a', 'a/b', 'a/b/c', 'photos', 'photos/2024'];

interface Old {
  name: string;
  folder: string;
  tags: string[];
  size: number;
  created_at: string;
}

for (const dialect of DIALECTS) {
  describe(`migration 0007 on a populated ${dialect.name} database`, { skip: dialect.skip }, () => {
    let db: Db;
    let dir: string;
    let drop: (() => Promise<void>) | undefined;
    let pgUrl: string | undefined;
    const ws = newShortId();
    const other = newShortId();
    const old: Old[] = [];
    const folderIds = new Map<string, string>();

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'stowage-mig-'));
      const pg = dialect.name === 'postgres' ? await freshPostgres() : undefined;
      drop = pg?.drop;
      pgUrl = pg?.url;
      db = openDatabase({ databaseUrl: pg?.url, dataDir: dir });
      await migrateTo(db.kysely, '0006_quota_reservations');
      // As release 0006 wrote them: every file carries its folder's path.
      const at = (i: number) => new Date(Date.UTC(2025, 0, 1) + i * 1000).toISOString();
      for (const id of [ws, other])
        await sql`insert into workspaces (id, name, webhook_secret, quota_bytes, max_file_size, created_at, updated_at, used_bytes, reserved_bytes)
                  values (${id}, 'w', 'x', null, null, ${at(0)}, ${at(0)}, 0, 0)`.execute(db.kysely);
      for (const path of FOLDERS.filter(Boolean)) {
        const id = newUuid();
        const parent = path.includes('/') ? folderIds.get(path.slice(0, path.lastIndexOf('/'))) : null;
        folderIds.set(path, id);
        await sql`insert into folders (id, folder_no, workspace_id, parent_id, name, path, created_at, updated_at)
                  values (${id}, ${newShortId()}, ${ws}, ${parent ?? null}, ${path.slice(path.lastIndexOf('/') + 1)}, ${path}, ${at(0)}, ${at(0)})`.execute(
          db.kysely,
        );
      }
      const blob = newUuid();
      await sql`insert into blobs (id, workspace_id, sha256, size, storage_key, created_at)
                values (${blob}, ${ws}, ${'0'.repeat(64)}, 1, 'k', ${at(0)})`.execute(db.kysely);
      const otherBlob = newUuid();
      await sql`insert into blobs (id, workspace_id, sha256, size, storage_key, created_at)
                values (${otherBlob}, ${other}, ${'1'.repeat(64)}, 1, 'k2', ${at(0)})`.execute(db.kysely);
      for (let i = 0; i < 600; i++) {
        const folder = FOLDERS[i % FOLDERS.length];
        const tags = TAGS.filter((_, k) => (i >> k) % 2 === 1).slice(0, 3);
        const f: Old = {
          name: `file-${i}-${['sun', 'Forest', 'río'][i % 3]}.png`,
          folder,
          tags,
          size: 1 + i,
          created_at: at(i % 97),
        };
        old.push(f);
        await sql`insert into files (id, file_no, workspace_id, folder_id, folder_path, name, blob_id, size, mime_type,
                    extension, format, width, height, tags, metadata, custom_id, is_private, is_duplicate, upload_source, created_at, updated_at)
                  values (${newUuid()}, ${newShortId()}, ${ws}, ${folderIds.get(folder) ?? null}, ${folder}, ${f.name}, ${blob}, ${f.size},
                    'image/png', 'png', 'png', 1, 1, ${JSON.stringify(tags)}, '{}', null, 0, 0, 'direct', ${f.created_at}, ${f.created_at})`.execute(
          db.kysely,
        );
      }
      await sql`insert into files (id, file_no, workspace_id, folder_id, folder_path, name, blob_id, size, mime_type,
                  extension, format, width, height, tags, metadata, custom_id, is_private, is_duplicate, upload_source, created_at, updated_at)
                values (${newUuid()}, ${newShortId()}, ${other}, null, '', 'file-0-sun.png', ${otherBlob}, 5,
                  'image/png', 'png', 'png', 1, 1, '["red"]', '{}', null, 0, 0, 'direct', ${at(1)}, ${at(1)})`.execute(
        db.kysely,
      );
      await migrateToLatest(db.kysely);
    });
    after(async () => {
      await db?.close();
      await drop?.();
      rmSync(dir, { recursive: true, force: true });
    });

    /** A second Kysely on the same database that records every statement it sends, with its parameters. */
    const loggingKysely = () => {
      const captured: { sql: string; parameters: readonly unknown[] }[] = [];
      const logged = new Kysely<Database>({
        dialect: pgUrl
          ? new PostgresDialect({ pool: new pg.Pool({ connectionString: pgUrl, max: 2 }) })
          : new SqliteDialect({ database: new SQLite(join(dir, 'stowage.db')) }),
        log: (e) => {
          captured.push(e.query);
        },
      });
      return { captured, logged };
    };

    test('every file is where it was, and nothing derived is off', async () => {
      const files = new FileRepository(db.kysely);
      for (const f of old) {
        const found = await files.deliverable(ws, f.folder, f.name);
        assert.ok(found, `${f.folder}/${f.name}`);
        assert.equal(Number(found.size), 1, 'the blob it had');
      }
      const all = await files.page(ws, {}, { sort: 'name', direction: 'asc', limit: 1000 });
      assert.equal(all.rows.length, old.length, 'the other workspace stays apart');
      for (const row of all.rows) {
        const f = old.find((o) => o.name === row.name && o.folder === row.folder_path);
        assert.ok(f, `${row.folder_path}/${row.name}`);
        assert.deepEqual([JSON.parse(row.tags), Number(row.size), row.created_at], [f.tags, f.size, f.created_at]);
      }
      assert.deepEqual(
        Object.entries(await derivedDrift(db.kysely)).filter(([, n]) => n !== 0),
        [],
      );
      const columns = await sql<{ name: string }>`${sql.raw(
        dialect.name === 'sqlite'
          ? `select name from pragma_table_info('files')`
          : `select column_name as name from information_schema.columns where table_name = 'files'`,
      )}`.execute(db.kysely);
      assert.equal(
        columns.rows.some((c) => c.name === 'folder_path'),
        false,
        'the path lives in folders only',
      );
    });

    test('the counters, tag rows and name index answer as the rows do', async () => {
      const files = new FileRepository(db.kysely);
      const folders = new FolderRepository(db.kysely);
      const wsRow = await db.kysely.selectFrom('workspaces').selectAll().where('id', '=', ws).executeTakeFirstOrThrow();
      assert.deepEqual(
        [Number(wsRow.file_count), Number(wsRow.file_bytes)],
        [old.length, old.reduce((n, f) => n + f.size, 0)],
      );
      const totals = await folders.totalsOf([folderIds.get('a')!, folderIds.get('photos')!]);
      const below = (p: string) => old.filter((f) => f.folder === p || f.folder.startsWith(`${p}/`));
      assert.deepEqual(totals.get(folderIds.get('a')!), {
        items: below('a').length,
        size: below('a').reduce((n, f) => n + f.size, 0),
      });
      assert.equal(totals.get(folderIds.get('photos')!)?.items, below('photos').length);

      const names = async (f: Parameters<FileRepository['page']>[1], sort: 'created_at' | 'name' = 'created_at') =>
        (await files.page(ws, f, { sort, direction: 'asc', limit: 1000 })).rows
          .map((r) => `${r.folder_path}/${r.name}`)
          .sort();
      const expect = (pred: (f: Old) => boolean) =>
        old
          .filter(pred)
          .map((f) => `${f.folder}/${f.name}`)
          .sort();
      for (const tag of ['red', 'ünïcode', 'with space']) {
        assert.deepEqual(
          await names({ tags: [tag] }),
          expect((f) => f.tags.includes(tag)),
          tag,
        );
        assert.deepEqual(
          await names({ tags: [tag] }, 'name'),
          expect((f) => f.tags.includes(tag)),
          `${tag} by name`,
        );
      }
      assert.deepEqual(
        await names({ tags: ['red', 'blue'] }),
        expect((f) => f.tags.includes('red') && f.tags.includes('blue')),
      );
      for (const text of ['forest', 'FOREST', 'río', 'le-1', '1-s', 'fi'])
        assert.deepEqual(
          await names({ nameContains: [text] }),
          expect((f) => f.name.toLowerCase().includes(text.toLowerCase())),
          `search ${text}`,
        );
      assert.deepEqual(
        await names({ under: 'a/b' }),
        expect((f) => f.folder === 'a/b' || f.folder.startsWith('a/b/')),
      );
      assert.deepEqual(await files.countUpTo(ws, { tags: ['red'] }, 10_000), {
        count: old.filter((f) => f.tags.includes('red')).length,
        exact: true,
      });
    });

    test('a name search with tags: exactly the matching files, newest first, whichever side drives', async () => {
      // On SQLite a rare fragment's matches drive (the default cap), a common one's the tag's rows
      // (a cap of 0 makes every fragment common). On PostgreSQL the first checks the names of the
      // workspace's or folder's rows (600 files, under NAME_SCAN_MAX), the second asks the trigram index.
      const repos = {
        'name first': new FileRepository(db.kysely),
        // (and the walk in seq order off, so that a name alone takes the date index)
        'tag first': new FileRepository(db.kysely, 0, -1, 0),
      };
      const everyFile = (await repos['name first'].page(ws, {}, { sort: 'name', direction: 'asc', limit: 1000 })).rows;
      const idOf = new Map(everyFile.map((r) => [`${r.folder_path}/${r.name}`, r.id]));
      const cases: { f: Parameters<FileRepository['page']>[1]; want: (o: Old) => boolean }[] = [];
      const has = (o: Old, text: string) => o.name.toLowerCase().includes(text.toLowerCase());
      for (const [text, tags] of [
        ['forest', ['red']],
        ['FOREST', ['with space']],
        ['río', ['ünïcode', 'red']],
        ['le-1', ['blue', 'green']],
        ['fi', ['big']],
        ['zzz', ['red']],
      ] as const)
        cases.push({
          f: { nameContains: [text], tags: [...tags] },
          want: (o) => has(o, text) && tags.every((t) => o.tags.includes(t)),
        });
      for (const text of ['forest', 'RÍO', 'e_1', 'e-1', 'le-12', 'le-59', 'zzz'])
        cases.push({ f: { nameContains: [text] }, want: (o) => has(o, text) });
      cases.push({
        f: { nameContains: ['río'], folderId: folderIds.get('a') },
        want: (o) => has(o, 'río') && o.folder === 'a',
      });
      cases.push({
        f: { nameContains: ['sun', 'file-1'], tags: ['red'] },
        want: (o) => has(o, 'sun') && has(o, 'file-1') && o.tags.includes('red'),
      });
      cases.push({
        f: { nameContains: ['forest'], tags: ['blue'], folderId: folderIds.get('a/b') },
        want: (o) => has(o, 'forest') && o.tags.includes('blue') && o.folder === 'a/b',
      });
      cases.push({
        f: { nameContains: ['sun'], tags: ['green'], under: 'photos' },
        want: (o) => has(o, 'sun') && o.tags.includes('green') && o.folder.startsWith('photos'),
      });
      let nonEmpty = 0;
      for (const [how, files] of Object.entries(repos))
        for (const { f, want } of cases) {
          const label = `${how}: ${JSON.stringify(f)}`;
          const expected = old
            .filter(want)
            .map((o) => ({
              path: `${o.folder}/${o.name}`,
              created_at: o.created_at,
              id: idOf.get(`${o.folder}/${o.name}`)!,
            }))
            .sort((a, b) => b.created_at.localeCompare(a.created_at) || (b.id < a.id ? -1 : b.id > a.id ? 1 : 0))
            .map((e) => e.path);
          if (expected.length > 0) nonEmpty++;
          // Pages of 7 by key, as the API's cursor walks them.
          const got: string[] = [];
          let after: PageKey | undefined;
          do {
            const page = await files.page(ws, f, { sort: 'created_at', direction: 'desc', limit: 7, after });
            got.push(...page.rows.map((r) => `${r.folder_path}/${r.name}`));
            after = page.next ?? undefined;
          } while (after);
          assert.deepEqual(got, expected, label);
          // Oldest first, by key.
          const up: string[] = [];
          let from: PageKey | undefined;
          do {
            const page = await files.page(ws, f, { sort: 'created_at', direction: 'asc', limit: 5, after: from });
            up.push(...page.rows.map((r) => `${r.folder_path}/${r.name}`));
            from = page.next ?? undefined;
          } while (from);
          assert.deepEqual(up, [...expected].reverse(), `${label} oldest first`);
          const second = await files.page(ws, f, { sort: 'created_at', direction: 'desc', limit: 7, offset: 7 });
          assert.deepEqual(
            second.rows.map((r) => `${r.folder_path}/${r.name}`),
            expected.slice(7, 14),
            `${label} by offset`,
          );
          const byName = await files.page(ws, f, { sort: 'name', direction: 'asc', limit: 1000 });
          assert.deepEqual(
            byName.rows.map((r) => r.name),
            old
              .filter(want)
              .map((o) => o.name)
              .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)),
            `${label} by name`,
          );
          assert.deepEqual(await files.countUpTo(ws, f, 1000), { count: expected.length, exact: true }, label);
          if (expected.length > 3)
            assert.deepEqual(await files.countUpTo(ws, f, 3), { count: 3, exact: false }, `${label} capped`);
        }
      assert.ok(nonEmpty >= 20, `most cases match some files (${nonEmpty})`);
    });

    /**
     * The steps that find the files, from a SQLite plan: a page's keys are walked in a co-routine
     * (k) that its rows are then joined to by id (from `SCAN k` on), and a count wraps its walk in
     * another (m); the wrappers and the row lookups are left out.
     */
    const walk = (plan: string[]) => {
      const rowsFrom = plan.indexOf('SCAN k');
      return (rowsFrom >= 0 ? plan.slice(0, rowsFrom) : plan).filter((d) => !/^CO-ROUTINE [km]$|^SCAN m$/.test(d));
    };

    test('SQLite: a name search with a tag reads the name index once, never once per tagged file', async (t) => {
      if (dialect.name !== 'sqlite') return t.skip('SQLite only');
      // The statements the repository sends, captured from a second connection that logs them.
      const { captured, logged } = loggingKysely();
      try {
        const f = { nameContains: ['forest'], tags: ['red'] };
        const first = { sort: 'created_at', direction: 'desc', limit: 10 } as const;
        const plans: Record<string, string[]> = {};
        for (const [how, files] of [
          ['name first', new FileRepository(logged)],
          ['tag first', new FileRepository(logged, 0)],
        ] as const)
          for (const [what, call] of [
            ['page', () => files.page(ws, f, first)],
            ['page in a folder', () => files.page(ws, { ...f, folderId: folderIds.get('a') }, first)],
            ['count', () => files.countUpTo(ws, f, 200)],
          ] as const) {
            captured.length = 0;
            await call();
            const listing = captured.find((c) => /file_tags/.test(c.sql) && !/ in \(\?/.test(c.sql));
            assert.ok(listing, `${how} ${what}: ${captured.map((c) => c.sql).join('\n')}`);
            const { rows } = await logged.executeQuery<{ detail: string }>(
              CompiledQuery.raw(`explain query plan ${listing.sql}`, [...listing.parameters]),
            );
            plans[`${how} ${what}`] = walk(rows.map((r) => r.detail));
          }
        for (const [label, plan] of Object.entries(plans)) {
          const text = plan.join(' | ');
          // The match list as an index term: every listed match sought again for each tagged row.
          assert.doesNotMatch(text, /SEARCH files USING [^|]*rowid=\?[^|]* AND|AND rowid=\?/, `${label}: ${text}`);
          // The name index: read once, either driving or as one list built before the walk.
          const fts = plan.filter((d) => d.includes('files_name_fts') || /^SCAN x VIRTUAL TABLE/.test(d));
          assert.equal(fts.length, 1, `${label}: ${text}`);
          if (label.startsWith('name first')) {
            assert.match(plan[0], /^SCAN x VIRTUAL TABLE/, `${label}: ${text}`);
            assert.ok(
              plan.some((d) => /file_tags_key \(workspace_id=\? AND tag=\? AND created_at=\? AND file_id=\?\)/.test(d)),
              `${label}: each match's tag by its key: ${text}`,
            );
          } else {
            // A folder's own files drive in a folder; elsewhere the tag's rows, newest first.
            const driver = label.includes('folder')
              ? /files_folder_created_idx/
              : /^SEARCH t USING COVERING INDEX file_tags_key/;
            assert.match(plan[0], driver, `${label}: ${text}`);
            assert.ok(
              plan.some((d) => d === 'LIST SUBQUERY 1' || /LIST SUBQUERY/.test(d)),
              `${label}: ${text}`,
            );
          }
        }
      } finally {
        await logged.destroy();
      }
    });

    test('SQLite: a name search with few matches is driven by the name index, with many by the date index', async (t) => {
      if (dialect.name !== 'sqlite') return t.skip('SQLite only');
      const { captured, logged } = loggingKysely();
      try {
        // 'forest' names 200 of the 600 files: a cap of 200 finds them few, a cap of 199 many.
        for (const [cap, driver] of [
          [200, /^SCAN x VIRTUAL TABLE/],
          [199, /^SEARCH files USING (COVERING )?INDEX files_workspace_created_idx/],
        ] as const) {
          captured.length = 0;
          // (With the walk in seq order off: name-walk.test.ts tries it.)
          const page = await new FileRepository(logged, cap, NAME_SCAN_MAX, 0).page(
            ws,
            { nameContains: ['forest'] },
            { sort: 'created_at', direction: 'desc', limit: 5 },
          );
          assert.equal(page.rows.length, 5);
          const listing = captured.find((c) => /files_name_fts/.test(c.sql) && /order by/.test(c.sql));
          assert.ok(listing, captured.map((c) => c.sql).join('\n'));
          const { rows } = await logged.executeQuery<{ detail: string }>(
            CompiledQuery.raw(`explain query plan ${listing.sql}`, [...listing.parameters]),
          );
          const plan = walk(rows.map((r) => r.detail));
          assert.match(plan[0], driver, `cap ${cap}: ${plan.join(' | ')}`);
        }
      } finally {
        await logged.destroy();
      }
    });

    test("PostgreSQL: a name search in a small workspace or folder checks its own rows, not every workspace's name index", async (t) => {
      if (dialect.name !== 'postgres' || !pgUrl) return t.skip('PostgreSQL only');
      const { captured, logged } = loggingKysely();
      // The trigram index's plans, where the planner may choose it (no sequential scans).
      const plan = (q: { sql: string; parameters: readonly unknown[] }) =>
        logged.transaction().execute(async (trx) => {
          await sql`set local enable_seqscan = off`.execute(trx);
          const { rows } = await trx.executeQuery<{ 'QUERY PLAN': string }>(
            CompiledQuery.raw(`explain ${q.sql}`, [...q.parameters]),
          );
          return rows.map((r) => r['QUERY PLAN']).join('\n');
        });
      const folderA = folderIds.get('a') as string;
      const inA = old.filter((o) => o.folder === 'a').length;
      try {
        // Limits around the workspace's 600 files and folder a's: which scope is small decides.
        for (const [limit, workspaceScans, folderScans] of [
          [old.length, true, true],
          [inA, false, true],
          [inA - 1, false, false],
        ] as const) {
          const files = new FileRepository(logged, 5_000, limit);
          const scopes: [string, FileFilter, boolean][] = [
            ['workspace', { nameContains: ['forest'] }, workspaceScans],
            ['folder', { nameContains: ['forest'], folderId: folderA }, folderScans],
          ];
          for (const [scope, f, scans] of scopes)
            for (const [what, run] of [
              ['page', () => files.page(ws, f, { sort: 'created_at', direction: 'desc', limit: 5 })],
              ['count', () => files.countUpTo(ws, f, 200)],
            ] as const) {
              captured.length = 0;
              await run();
              const label = `limit ${limit}, ${scope} ${what}`;
              const listing = captured.find((c) => / like /.test(c.sql));
              assert.ok(listing, `${label}: ${captured.map((c) => c.sql).join('\n')}`);
              if (scans) {
                assert.match(listing.sql, /lower\("files"\."name" \|\| ''\) like/, label);
                assert.doesNotMatch(await plan(listing), /files_name_trgm_idx/, label);
              } else {
                assert.match(listing.sql, /lower\("files"\."name"\) like/, label);
              }
            }
        }
      } finally {
        await logged.destroy();
      }
    });

    test('PostgreSQL: the name index has a fine histogram and statistics from the migration', async (t) => {
      if (dialect.name !== 'postgres') return t.skip('PostgreSQL only');
      const target = await sql<{ n: number }>`select attstattarget as n from pg_attribute
        where attrelid = 'files_name_trgm_idx'::regclass and attnum = 1`.execute(db.kysely);
      assert.equal(Number(target.rows[0].n), 1000);
      const stats = await sql<{ n: number }>`select count(*) as n from pg_stats
        where tablename = 'files_name_trgm_idx'`.execute(db.kysely);
      assert.equal(Number(stats.rows[0].n), 1, 'the migration analyzed files, the expression included');
    });

    test('a name stays unique per folder, the root included', async () => {
      const files = new FileRepository(db.kysely);
      const blob = (
        await db.kysely.selectFrom('blobs').select('id').where('workspace_id', '=', ws).executeTakeFirstOrThrow()
      ).id;
      const row = (name: string, folder: string) => ({
        id: newUuid(),
        file_no: newShortId(),
        workspace_id: ws,
        folder_id: folderIds.get(folder) ?? null,
        name,
        blob_id: blob,
        size: 1,
        mime_type: 'image/png',
        extension: 'png',
        format: 'png',
        width: null,
        height: null,
        tags: '[]',
        metadata: '{}',
        custom_id: null,
        is_private: 0,
        is_duplicate: 0,
        upload_source: 'direct' as const,
        created_at: new Date().toISOString(),
        updated_at: new Date().toISOString(),
      });
      assert.equal(await files.insertIfNameFree(row(old[0].name, old[0].folder)), false, 'root');
      assert.equal(await files.insertIfNameFree(row(old[1].name, old[1].folder)), false, 'a folder');
      assert.equal(await files.insertIfNameFree(row(old[0].name, 'photos/2024')), true);
    });
  });

  describe(`derived data under the API's writes on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    const api = (method: string, url: string, body?: unknown) =>
      call(h.app, method, url, { body, headers: { 'x-api-key': h.ws.private_key } });
    const upload = async (name: string, folder: string[], tags: string[], bytes = 100) => {
      const staged = await h.services.uploads.stage(h.ws.workspace_id, Readable.from([randomBytes(bytes)]));
      return h.services.uploads.finish(
        staged,
        { name, folder, tags, metadata: {}, custom_id: null, randomPrefix: false, transform: null, webhookUrl: null },
        'direct',
      );
    };
    const drift = async () => Object.entries(await derivedDrift(h.services.db.kysely)).filter(([, n]) => n !== 0);

    before(async () => {
      h = await makeHarness(dialect.name);
    });
    after(() => h?.close());

    test('parallel uploads, replacements, moves, tag edits, renames and deletes leave no drift', async () => {
      const folders = [[], ['x'], ['x', 'y'], ['z']];
      await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          upload(`f${i % 25}.bin`, folders[i % folders.length], [TAGS[i % TAGS.length], 'all'], 50 + i),
        ),
      );
      assert.deepEqual(await drift(), [], 'after uploads (some replacing others of the same name)');
      const listed = (await api('GET', '/api/v1/files?limit=100')).body;
      assert.equal(listed.meta.total, listed.files.length);
      assert.equal(listed.meta.totalEstimated, false);
      const z = (await api('GET', '/api/v1/folders')).body.folders.find((f: { name: string }) => f.name === 'z');
      const x = (await api('GET', '/api/v1/folders')).body.folders.find((f: { name: string }) => f.name === 'x');
      const files = listed.files as { file_no: string; tags: string[] }[];
      await Promise.all(
        files.flatMap((f, i) => [
          api('PATCH', `/api/v1/files/${f.file_no}`, {
            folder_no: i % 3 === 0 ? z.folder_no : i % 3 === 1 ? null : x.folder_no,
            add_tags: ['moved'],
            remove_tags: ['all'],
          }),
          i % 4 === 0 ? api('PATCH', `/api/v1/files/${f.file_no}/rename`, { name: `renamed-${i}` }) : Promise.resolve(),
          i % 5 === 0 ? api('DELETE', `/api/v1/files/${f.file_no}`) : Promise.resolve(),
        ]),
      );
      assert.deepEqual(await drift(), [], 'after moves, tag edits, renames and deletes');
      assert.equal((await api('POST', `/api/v1/folders/rename/${x.folder_no}`, { name: 'x2' })).status, 200);
      const tagged = (await api('GET', '/api/v1/files?limit=100&tags=moved')).body;
      assert.equal(tagged.meta.total, tagged.files.length);
      // A move onto a name the folder holds is refused (409) with the rest of its PATCH: those keep 'all'.
      const kept = (await api('GET', '/api/v1/files?limit=100&tags=all')).body;
      assert.equal(kept.meta.total, kept.files.length);
      assert.ok(kept.files.every((f: { tags: string[] }) => f.tags.includes('all') && !f.tags.includes('moved')));
      const x2 = (await api('GET', '/api/v1/folders')).body.folders.find((f: { name: string }) => f.name === 'x2');
      const below = (await api('GET', '/api/v1/files?limit=100&path=x2')).body.files as {
        path: string;
        size: number;
      }[];
      assert.ok(
        below.every((f) => f.path.startsWith('/x2/')),
        'paths follow the rename',
      );
      assert.deepEqual(
        [x2.total_items, x2.total_size],
        [below.length, below.reduce((n, f) => n + f.size, 0)],
        'folder totals are the files below',
      );
      assert.equal((await api('DELETE', `/api/v1/folders/${x2.folder_no}?recursive=true`)).status, 200);
      assert.deepEqual(await drift(), [], 'after a folder rename and a recursive delete');
      const left = (await api('GET', '/api/v1/files?limit=100')).body;
      assert.equal(left.meta.total, left.files.length);
    });

    test('a file moved between folders while uploads replace it: neither side fails (no deadlock)', async () => {
      // An upload replacing a file holds the workspace's row (the bytes' usage), then the file's;
      // a move held the file's row, then (the files trigger) the workspace's. On PostgreSQL, run
      // at once, they deadlocked: an upload failed, or the PATCH answered 500, a few times in 360.
      // Every write of files now takes the workspace's row first (holdWorkspace).
      const folders = await Promise.all(
        ['mv-a', 'mv-b'].map(async (name) => (await api('POST', '/api/v1/folders', { name })).body),
      );
      const [a, b] = folders.map((f) => f.folder_no ?? f.data?.folder_no);
      const failures: string[] = [];
      for (let round = 0; round < 30; round++) {
        const first = await upload(`moving-${round}.bin`, ['mv-a'], [], 100);
        const fileNo = first.file_no;
        await Promise.all(
          Array.from({ length: 6 }, (_, k) => [
            upload(`moving-${round}.bin`, [k % 2 ? 'mv-a' : 'mv-b'], [], 100 + k).catch((e: Error) => {
              failures.push(`upload: ${e.message}`);
            }),
            api('PATCH', `/api/v1/files/${fileNo}`, { folder_no: k % 2 ? b : a }).then((r) => {
              // 409 when the other folder holds that name already: the move is refused, nothing fails.
              if (r.status !== 200 && r.status !== 409) failures.push(`PATCH ${r.status} ${JSON.stringify(r.body)}`);
            }),
          ]).flat(),
        );
      }
      assert.deepEqual(failures, []);
      assert.deepEqual(await drift(), [], 'after the moves and replacements');
    });

    test('folders created below a folder while it is renamed and deleted take its path as it is then', async () => {
      const made = await api('POST', '/api/v1/folders', { name: 'race-parent' });
      assert.equal(made.status, 201, JSON.stringify(made.body));
      const parentNo = made.body.folder_no ?? made.body.data?.folder_no;
      const answers = await Promise.all(
        Array.from({ length: 24 }, (_, i) =>
          i % 4 === 3
            ? api('POST', `/api/v1/folders/rename/${parentNo}`, { name: `race-parent-${i}` })
            : api('POST', '/api/v1/folders', { name: `child-${i}`, parent_folder_no: parentNo }),
        ),
      );
      for (const r of answers) assert.ok([200, 201].includes(r.status), JSON.stringify(r.body));
      // Every folder's path is its parent's path and its name.
      const paths = async () => {
        const rows = await h.services.db.kysely
          .selectFrom('folders')
          .select(['id', 'parent_id', 'name', 'path'])
          .where('workspace_id', '=', h.ws.workspace_id)
          .execute();
        const byId = new Map(rows.map((r) => [r.id, r]));
        return rows
          .filter((r) => r.path !== (r.parent_id ? `${byId.get(r.parent_id)?.path}/${r.name}` : r.name))
          .map((r) => r.path);
      };
      assert.deepEqual(await paths(), [], "no folder at its parent's old path");
      // Creates racing a recursive delete: each either lands before it (and goes with it) or is 404.
      const removing = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          i === 4
            ? api('DELETE', `/api/v1/folders/${parentNo}?recursive=true`)
            : api('POST', '/api/v1/folders', { name: `late-${i}`, parent_folder_no: parentNo }),
        ),
      );
      for (const r of removing) assert.ok([200, 201, 404].includes(r.status), JSON.stringify(r.body));
      const left = await h.services.db.kysely
        .selectFrom('folders')
        .select('path')
        .where('workspace_id', '=', h.ws.workspace_id)
        .where('path', 'like', 'race-parent%')
        .execute();
      assert.deepEqual(left, [], 'nothing left below the deleted folder');
      assert.deepEqual(await paths(), []);
      assert.deepEqual(await drift(), []);
    });

    test("parallel PATCHes of one file each keep the others' changes (no lost update)", async () => {
      const made = await upload('patched.bin', [], ['base'], 64);
      const fileNo = made.file_no;
      const n = 16;
      const answers = await Promise.all(
        Array.from({ length: n }, (_, i) =>
          api('PATCH', `/api/v1/files/${fileNo}`, { add_tags: [`p-${i}`], metadata: { [`k${i}`]: i } }),
        ),
      );
      for (const r of answers) assert.equal(r.status, 200, JSON.stringify(r.body));
      const got = (await api('GET', `/api/v1/files/${fileNo}`)).body.data;
      assert.deepEqual(
        [...got.tags].sort(),
        ['base', ...Array.from({ length: n }, (_, i) => `p-${i}`)].sort(),
        'every PATCH kept its tag',
      );
      assert.deepEqual(
        Object.keys(got.metadata).sort(),
        Array.from({ length: n }, (_, i) => `k${i}`).sort(),
        'every PATCH kept its metadata key',
      );
      // Half take a tag away while the other half add theirs: each removal and addition holds.
      const mixed = await Promise.all(
        Array.from({ length: n }, (_, i) =>
          api('PATCH', `/api/v1/files/${fileNo}`, i % 2 ? { remove_tags: [`p-${i}`] } : { add_tags: [`q-${i}`] }),
        ),
      );
      for (const r of mixed) assert.equal(r.status, 200, JSON.stringify(r.body));
      const after = (await api('GET', `/api/v1/files/${fileNo}`)).body.data;
      const want = ['base'];
      for (let i = 0; i < n; i++) want.push(...(i % 2 ? [] : [`p-${i}`, `q-${i}`]));
      assert.deepEqual([...after.tags].sort(), want.sort());
      assert.deepEqual(await drift(), [], 'tag counts follow');
    });

    test("parallel tag edits taking the same tags in opposite orders: none fails, and each tag's total is its files", async () => {
      const tags = ['t-one', 't-two', 't-three', 't-four'];
      const before = new Date(Date.now() - 1).toISOString();
      await Promise.all(Array.from({ length: 24 }, (_, i) => upload(`tagged-${i}.bin`, ['tagged'], tags, 10 + i)));
      const listed = (await api('GET', '/api/v1/files?limit=100&search=tagged-')).body.files as { file_no: string }[];
      assert.equal(listed.length, 24);
      for (let round = 0; round < 3; round++) {
        // Every file drops its four tags at once, then takes them back, half of them in the
        // opposite order: on PostgreSQL each edit changes four tags' count rows.
        const dropped = await Promise.all(
          listed.map((f) => api('PATCH', `/api/v1/files/${f.file_no}`, { remove_tags: tags })),
        );
        const taken = await Promise.all(
          listed.map((f, i) =>
            api('PATCH', `/api/v1/files/${f.file_no}`, { add_tags: i % 2 ? [...tags].reverse() : tags }),
          ),
        );
        for (const r of [...dropped, ...taken]) assert.equal(r.status, 200, JSON.stringify(r.body));
      }
      assert.deepEqual(await drift(), [], 'after the tag edits');
      for (const tag of tags) {
        const meta = (await api('GET', `/api/v1/files?limit=1&tags=${tag}`)).body.meta;
        assert.deepEqual([meta.total, meta.totalEstimated], [24, false], tag);
        // As of a snapshot taken before them, none of them: the kept count less the newer rows.
        const asOf = (await api('GET', `/api/v1/files?limit=1&tags=${tag}&snapshot=${before}`)).body.meta;
        assert.deepEqual([asOf.total, asOf.totalEstimated], [0, false], `${tag} as of ${before}`);
      }
    });
  });
}

describe('page boundaries', () => {
  test('the nearest fresh boundary at or before the offset; shallow ones are never kept', () => {
    const b = new PageBoundaries(50, 2, 3);
    b.remember('l', 100, { v: 'x', id: 'shallow' });
    assert.equal(b.nearest('l', SHALLOW_ROWS + 5), undefined);
    b.remember('l', SHALLOW_ROWS, { v: 'a', id: '1' });
    b.remember('l', SHALLOW_ROWS + 100, { v: 'b', id: '2' });
    assert.deepEqual(b.nearest('l', SHALLOW_ROWS + 150), { offset: SHALLOW_ROWS + 100, key: { v: 'b', id: '2' } });
    assert.deepEqual(b.nearest('l', SHALLOW_ROWS + 99)?.key.id, '1');
    assert.equal(b.nearest('other', SHALLOW_ROWS + 150), undefined, 'per list');
    for (const k of [1, 2, 3]) b.remember('l', SHALLOW_ROWS + 200 * k, { v: 'c', id: `c${k}` });
    assert.equal(b.nearest('l', SHALLOW_ROWS + 99), undefined, 'the oldest boundary of a full list went');
    b.remember('m', SHALLOW_ROWS, { v: 'm', id: 'm' });
    b.remember('n', SHALLOW_ROWS, { v: 'n', id: 'n' });
    assert.equal(b.nearest('l', SHALLOW_ROWS + 700), undefined, 'the least recently used list went');
  });

  test('expire', async () => {
    const b = new PageBoundaries(20);
    b.remember('l', SHALLOW_ROWS, { v: 'a', id: '1' });
    assert.ok(b.nearest('l', SHALLOW_ROWS));
    await new Promise((r) => setTimeout(r, 40));
    assert.equal(b.nearest('l', SHALLOW_ROWS), undefined);
  });
});

describe('deep pages through the API (SQLite, 10,250 files)', () => {
  let h: Harness;
  const api = (url: string) => call(h.app, 'GET', url, { headers: { 'x-api-key': h.ws.private_key } });
  const total = SHALLOW_ROWS + 250;
  /** How far a lone tag's matches were counted before its count was kept (migration 0016). */
  const TAG_COUNT_CAP = 10_000;

  before(async () => {
    h = await makeHarness('sqlite');
    const ws = h.ws.workspace_id;
    const blob = newUuid();
    const db = h.services.db.kysely;
    await db
      .insertInto('blobs')
      .values({
        id: blob,
        workspace_id: ws,
        sha256: 'a'.repeat(64),
        size: 1,
        storage_key: 'k',
        created_at: '2025-01-01T00:00:00.000Z',
      })
      .execute();
    await db.transaction().execute(async (trx) => {
      for (let i = 0; i < total; i += 500)
        await trx
          .insertInto('files')
          .values(
            Array.from({ length: Math.min(500, total - i) }, (_, k) => {
              // Many rows share a created_at, so ties are broken by id across page boundaries.
              const at = new Date(Date.UTC(2025, 0, 1) + Math.floor((i + k) / 3) * 1000).toISOString();
              return {
                id: newUuid(),
                file_no: newShortId(),
                workspace_id: ws,
                folder_id: null,
                name: `f-${i + k}.bin`,
                blob_id: blob,
                size: 1,
                mime_type: 'application/octet-stream',
                extension: 'bin',
                format: null,
                width: null,
                height: null,
                // More files carry it than a tag's count went to before tags' counts were kept.
                tags: i + k < TAG_COUNT_CAP + 100 ? '["common"]' : '["rare"]',
                metadata: '{}',
                custom_id: null,
                is_private: 0,
                is_duplicate: 0,
                upload_source: 'direct' as const,
                created_at: at,
                updated_at: at,
              };
            }),
          )
          .execute();
    });
  });
  after(() => h?.close());

  test('a walk by page number past the remembered depth sees every file once, as the offsets do', async () => {
    const files = new FileRepository(h.services.db.kysely);
    const seen = new Set<string>();
    let page = 1;
    for (; ; page++) {
      const r = await api(`/api/v1/files?limit=100&page=${page}`);
      assert.equal(r.status, 200);
      for (const f of r.body.files) seen.add(f.file_no);
      if (!r.body.meta.hasNext) break;
    }
    assert.equal(page, Math.ceil(total / 100));
    assert.equal(seen.size, total, 'no file twice, none skipped');
    // The pages found from remembered boundaries are the pages the offsets give.
    for (const p of [101, 102, 103]) {
      const byService = (await api(`/api/v1/files?limit=100&page=${p}`)).body.files.map((f: { id: string }) => f.id);
      const byOffset = (
        await files.page(
          h.ws.workspace_id,
          {},
          { sort: 'created_at', direction: 'desc', limit: 100, offset: (p - 1) * 100 },
        )
      ).rows.map((f) => f.id);
      assert.deepEqual(byService, byOffset, `page ${p}`);
    }
    const total_ = (await api('/api/v1/files?limit=100&page=2')).body.meta;
    assert.deepEqual([total_.total, total_.totalEstimated], [total, false]);
  });

  test("SQLite: a tag's total is its kept count, exact however many files carry it", async () => {
    const common = (await api('/api/v1/files?limit=100&tags=common')).body;
    assert.deepEqual([common.meta.total, common.meta.totalEstimated], [TAG_COUNT_CAP + 100, false]);
    assert.equal(common.files.length, 100);
    const rare = (await api('/api/v1/files?limit=100&tags=rare')).body;
    assert.deepEqual([rare.meta.total, rare.meta.totalEstimated], [total - TAG_COUNT_CAP - 100, false]);
    // A later page carries its listing's snapshot: the total is still exact, the kept count less
    // the tag's files created after it (files f-0 to f-5402 are dated at most 30 minutes in).
    const asOf = (await api('/api/v1/files?limit=100&page=3&tags=common&snapshot=2025-01-01T00:30:00.000Z')).body;
    assert.deepEqual([asOf.meta.total, asOf.meta.totalEstimated], [5_403, false]);
    const none = (await api('/api/v1/files?limit=100&tags=nobody')).body;
    assert.deepEqual([none.meta.total, none.meta.totalEstimated, none.files.length], [0, false, 0]);
    // The count follows deletes and tag changes made in SQL, as the triggers see them all.
    const db = h.services.db.kysely;
    await sql`delete from files where name in ('f-0.bin', 'f-1.bin', 'f-2.bin')`.execute(db);
    await sql`update files set tags = '["rare","common"]' where name = 'f-10249.bin'`.execute(db);
    const after = (await api('/api/v1/files?limit=100&tags=common')).body.meta;
    assert.equal(after.total, TAG_COUNT_CAP + 100 - 3 + 1);
    const counted = await sql<{
      n: number;
    }>`select count(*) as n from files, json_each(files.tags) where value = 'common'`.execute(db);
    assert.equal(Number(counted.rows[0].n), after.total);
    // Migration 0016's step run again, as after a crash halfway: it makes the same counts.
    await sql`update tag_counts set n = 1`.execute(db);
    await createTagCounts(db);
    assert.equal((await api('/api/v1/files?limit=100&tags=common')).body.meta.total, after.total);
    assert.deepEqual(
      Object.entries(await derivedDrift(db)).filter(([, n]) => n !== 0),
      [],
    );
  });

  test('a name search counts up to its cap, then says its total is a lower bound', async () => {
    // "f-1" is in 1,361 names (f-1, f-10.., f-100.., f-1000.., f-10000..f-10249); "f-102" in 61.
    const many = (await api('/api/v1/files?limit=100&search=f-1')).body;
    assert.equal(many.meta.totalEstimated, true);
    assert.equal(many.meta.total, SEARCH_COUNT_CAP + 1, 'on SQLite the count so far, a lower bound');
    assert.equal(many.files.length, 100);
    assert.equal(many.meta.hasNext, true);
    const few = (await api('/api/v1/files?limit=100&search=f-102')).body;
    assert.deepEqual([few.meta.total, few.meta.totalEstimated, few.files.length], [61, false, 61]);
  });
});

for (const dialect of DIALECTS) {
  describe(`a name search's first page counts its matches on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    const api = (url: string) => call(h.app, 'GET', url, { headers: { 'x-api-key': h.ws.private_key } });
    // 'pair' is in 300 names, 'third' in 200, 'tenth' in 60, 'seventh' in 86 (dated out of name order).
    const N = 600;
    const words = (i: number) =>
      [i % 2 === 0 && 'pair', i % 3 === 0 && 'third', i % 10 === 0 && 'tenth', i % 7 === 0 && 'seventh']
        .filter(Boolean)
        .join('-');

    before(async () => {
      h = await makeHarness(dialect.name);
      const ws = h.ws.workspace_id;
      const blob = newUuid();
      const db = h.services.db.kysely;
      await db
        .insertInto('blobs')
        .values({
          id: blob,
          workspace_id: ws,
          sha256: 'b'.repeat(64),
          size: 1,
          storage_key: 'k',
          created_at: '2025-01-01T00:00:00.000Z',
        })
        .execute();
      await db
        .insertInto('files')
        .values(
          Array.from({ length: N }, (_, i) => {
            // Pairs of files share a date, so ties are broken by id.
            const at = new Date(Date.UTC(2025, 0, 1) + Math.floor(((i * 37) % N) / 2) * 1000).toISOString();
            return {
              id: newUuid(),
              file_no: newShortId(),
              workspace_id: ws,
              folder_id: null,
              name: `n${i}-${words(i)}.bin`,
              blob_id: blob,
              size: i + 1,
              mime_type: 'application/octet-stream',
              extension: 'bin',
              format: null,
              width: null,
              height: null,
              tags: '[]',
              metadata: '{}',
              custom_id: null,
              is_private: 0,
              is_duplicate: 0,
              upload_source: 'direct' as const,
              created_at: at,
              updated_at: at,
            };
          }),
        )
        .execute();
    });
    after(() => h?.close());

    test('the total is exact up to the cap, an estimate past it, and the pages are those the cursor walks', async () => {
      const files = new FileRepository(h.services.db.kysely);
      const cases: [string, number][] = [
        ['nobody', 0],
        ['tenth', 60],
        ['seventh', 86],
        ['third', 200],
        ['pair', 300],
      ];
      for (const sort of ['', '&sort=name_asc', '&sort=size_desc']) {
        for (const [word, matches] of cases) {
          const first = (await api(`/api/v1/files?limit=50&search=${word}${sort}`)).body;
          const exact = matches <= SEARCH_COUNT_CAP;
          assert.equal(first.meta.totalEstimated, !exact, `${word}${sort}`);
          if (exact) assert.equal(first.meta.total, matches, `${word}${sort}`);
          else assert.ok(first.meta.total > SEARCH_COUNT_CAP, `${word}${sort}: ${first.meta.total}`);
          // Every match once, in order, by cursor; each later page gives the same total.
          const seen: string[] = first.files.map((f: { name: string }) => f.name);
          let cursor = first.meta.nextCursor;
          while (cursor) {
            const next = (await api(`/api/v1/files?limit=50&search=${word}${sort}&cursor=${cursor}`)).body;
            if (exact) assert.equal(next.meta.total, matches);
            seen.push(...next.files.map((f: { name: string }) => f.name));
            cursor = next.meta.nextCursor;
          }
          assert.equal(seen.length, matches, `${word}${sort}`);
          assert.equal(new Set(seen).size, matches);
          assert.ok(seen.every((n) => n.includes(word)));
          // The same rows as the page read without counting, and the same count as countUpTo.
          const p = {
            sort: sort === '&sort=name_asc' ? ('name' as const) : sort ? ('size' as const) : ('created_at' as const),
            direction: sort === '&sort=name_asc' ? ('asc' as const) : ('desc' as const),
            limit: 50,
          };
          const plain = await files.page(h.ws.workspace_id, { nameContains: [word] }, p);
          const counting = await files.page(
            h.ws.workspace_id,
            { nameContains: [word] },
            { ...p, countTo: SEARCH_COUNT_CAP },
          );
          assert.deepEqual(
            counting.rows.map((r) => r.id),
            plain.rows.map((r) => r.id),
          );
          assert.deepEqual(counting.next, plain.next);
          assert.deepEqual(
            first.files.map((f: { name: string }) => f.name),
            plain.rows.map((r) => r.name),
          );
          const counted = await files.countUpTo(h.ws.workspace_id, { nameContains: [word] }, SEARCH_COUNT_CAP);
          if (dialect.name === 'postgres') assert.deepEqual(counting.matched, counted, `${word}${sort}`);
          else assert.equal(counting.matched, undefined, 'SQLite counts apart');
        }
      }
    });
  });
}
