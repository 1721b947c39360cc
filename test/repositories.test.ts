// The repositories of src/db, one contract for both dialects: the same assertions on what each
// method returns and changes run against SQLite and against PostgreSQL.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { newShortId, newUuid } from '../src/crypto/ids.ts';
import { type Db, inTransaction, isUniqueViolation, openDatabase } from '../src/db/database.ts';
import { FileRepository } from '../src/db/files.ts';
import { FolderRepository } from '../src/db/folders.ts';
import { PresetRepository } from '../src/db/presets.ts';
import { UploadSessionRepository } from '../src/db/upload-sessions.ts';
import { WebhookDeliveries } from '../src/db/webhooks.ts';
import { migrateToLatest } from '../src/db/migrations.ts';
import type { FileRow, FolderRow, SourceRow } from '../src/db/schema.ts';
import { SourceRepository } from '../src/db/sources.ts';
import { WorkspaceRepository } from '../src/db/workspaces.ts';
import { DIALECTS, freshPostgres } from './helpers/harness.ts';

/** An ISO instant `n` seconds after a fixed start: rows get known, ordered timestamps. */
const at = (n: number) => new Date(Date.UTC(2024, 0, 1) + n * 1000).toISOString();

for (const dialect of DIALECTS) {
  describe(`repositories on ${dialect.name}`, { skip: dialect.skip }, () => {
    let db: Db;
    let drop: (() => Promise<void>) | undefined;
    const dataDir = mkdtempSync(join(tmpdir(), 'stowage-repos-'));

    before(async () => {
      let databaseUrl: string | undefined;
      if (dialect.name === 'postgres') ({ url: databaseUrl, drop } = await freshPostgres());
      db = openDatabase({ databaseUrl, dataDir });
      await migrateToLatest(db.kysely);
    });
    after(async () => {
      await db?.close();
      await drop?.();
      rmSync(dataDir, { recursive: true, force: true });
    });

    /** A new workspace (each test its own, so they cannot see each other's rows). */
    async function workspace(name = 'W', created = at(0)): Promise<string> {
      const id = newShortId();
      await new WorkspaceRepository(db.kysely).insert({
        id,
        name,
        webhook_secret: `sealed-${id}`,
        quota_bytes: null,
        max_file_size: null,
        used_bytes: 0,
        reserved_bytes: 0,
        allowed_origins: null,
        webhook_origins: null,
        created_at: created,
        updated_at: created,
      });
      return id;
    }

    async function blob(workspaceId: string, size: number): Promise<string> {
      const id = newUuid();
      const sha256 = newUuid().replaceAll('-', '').padEnd(64, '0');
      await db.kysely
        .insertInto('blobs')
        .values({ id, workspace_id: workspaceId, sha256, size, storage_key: `${workspaceId}/${id}`, created_at: at(0) })
        .execute();
      return id;
    }

    function fileRow(workspaceId: string, blobId: string, f: Partial<FileRow> & { name: string }): FileRow {
      return {
        id: newUuid(),
        file_no: newShortId(),
        workspace_id: workspaceId,
        folder_id: null,
        blob_id: blobId,
        size: 10,
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
        created_at: at(0),
        updated_at: at(0),
        ...f,
      };
    }

    const withPath = (row: { folder_path: string } | undefined) => row?.folder_path;

    function folderRow(workspaceId: string, path: string, parent: FolderRow | null, created = at(0)): FolderRow {
      return {
        id: newUuid(),
        folder_no: newShortId(),
        workspace_id: workspaceId,
        parent_id: parent?.id ?? null,
        name: path.slice(path.lastIndexOf('/') + 1),
        path,
        file_count: 0,
        file_bytes: 0,
        created_at: created,
        updated_at: created,
      };
    }

    describe('WorkspaceRepository', () => {
      test('workspaces: by id, listed oldest first (then by id), counted, updated', async () => {
        const repo = new WorkspaceRepository(db.kysely);
        const before = await repo.count();
        const late = await workspace('Late', at(50));
        const early = await workspace('Early', at(-50));
        assert.equal(await repo.count(), before + 2);
        const listed = (await repo.list()).map((w) => w.id);
        assert.ok(listed.indexOf(early) < listed.indexOf(late), 'older first');
        assert.deepEqual(Object.keys((await repo.list())[0]).sort(), ['created_at', 'id', 'name']);
        await repo.update(late, {
          quota_bytes: 5_000_000_000,
          allowed_origins: '["https://a.example"]',
          updated_at: at(60),
        });
        const row = await repo.byId(late);
        assert.equal(row?.quota_bytes, 5_000_000_000, 'bigint comes back as a number');
        assert.equal(row?.allowed_origins, '["https://a.example"]');
        assert.equal(row?.name, 'Late');
        assert.equal(await repo.byId('nope'), undefined);
      });

      test('the first start is marked once: a second mark is a unique violation', async () => {
        const repo = new WorkspaceRepository(db.kysely);
        await repo.markBootstrapped(at(1));
        await assert.rejects(repo.markBootstrapped(at(2)), (err) => isUniqueViolation(err));
      });

      test('a sealed secret is replaced only while it is still the one read', async () => {
        const repo = new WorkspaceRepository(db.kysely);
        const id = await workspace();
        assert.ok((await repo.sealedSecrets()).some((r) => r.id === id && r.webhook_secret === `sealed-${id}`));
        assert.equal(await repo.replaceSecret(id, `sealed-${id}`, 'v2'), true);
        assert.equal(await repo.replaceSecret(id, `sealed-${id}`, 'v3'), false, 'stale: not applied');
        assert.equal((await repo.byId(id))?.webhook_secret, 'v2');
      });

      test('keys: listed oldest first without their hash; revoked once; in force by hash and by id', async () => {
        const repo = new WorkspaceRepository(db.kysely);
        const ws = await workspace();
        const key = (type: 'public' | 'private', hash: string, created: string) => ({
          id: newUuid(),
          workspace_id: ws,
          type,
          key_hash: hash.padEnd(64, '0'),
          key_hint: `hint-${hash}`,
          created_at: created,
          revoked_at: null,
        });
        const suffix = newShortId().toLowerCase();
        const pub1 = key('public', `p1${suffix}`, at(1));
        const pub2 = key('public', `p2${suffix}`, at(2));
        const priv = key('private', `s1${suffix}`, at(3));
        for (const k of [priv, pub2, pub1]) await repo.insertKey(k);
        await assert.rejects(repo.insertKey({ ...pub1, id: newUuid() }), (err) => isUniqueViolation(err));

        const listed = await repo.keysOf(ws);
        assert.deepEqual(
          listed.map((k) => k.id),
          [pub1.id, pub2.id, priv.id],
        );
        assert.ok(listed.every((k) => !('key_hash' in k)));
        assert.equal(await repo.publicKeyHint(ws), pub2.key_hint, 'the newest public key');

        const now = at(10);
        const found = await repo.keyInForceByHash(priv.key_hash, now);
        assert.deepEqual(found, {
          id: priv.id,
          workspace_id: ws,
          type: 'private',
          allowed_origins: null,
          webhook_origins: null,
          quota_bytes: null,
          max_file_size: null,
          used_bytes: 0,
          reserved_bytes: 0,
        });
        // The compiled lookup is reused: other parameters give other rows.
        assert.equal((await repo.keyInForceByHash(pub1.key_hash, now))?.id, pub1.id);
        assert.equal(await repo.keyInForceByHash('f'.repeat(64), now), undefined);
        assert.equal((await repo.keyInForceById(pub2.id, now))?.type, 'public');

        assert.equal(await repo.revokeKey(pub2.id, at(20)), true);
        assert.equal(await repo.revokeKey(pub2.id, at(30)), false, 'already revoked: unchanged');
        assert.equal((await repo.keyById(pub2.id))?.revoked_at, at(20));
        assert.equal(await repo.publicKeyHint(ws), pub1.key_hint, 'revoked keys give no hint');
        assert.ok(await repo.keyInForceByHash(pub2.key_hash, at(19)), 'in force before its revocation');
        assert.equal(await repo.keyInForceByHash(pub2.key_hash, at(20)), undefined, 'not from then on');

        // A scheduled revocation (rotation): in force until then, whatever was set before.
        await repo.setKeyRevokedAt(priv.id, at(40));
        await repo.setKeyRevokedAt(priv.id, at(100));
        assert.ok(await repo.keyInForceById(priv.id, at(99)));
        assert.equal(await repo.keyInForceById(priv.id, at(100)), undefined);
        assert.equal(await repo.keyById(newUuid()), undefined);
      });
    });

    describe('SourceRepository', () => {
      const source = (ws: string, name: string, created: string, extra: Partial<SourceRow> = {}): SourceRow => ({
        id: newUuid(),
        workspace_id: ws,
        name,
        type: 'aws_s3',
        configuration: '{}',
        secrets: null,
        is_active: 1,
        created_at: created,
        updated_at: created,
        ...extra,
      });

      test('names are unique per workspace: insert and update say so instead of throwing', async () => {
        const repo = new SourceRepository(db.kysely);
        const ws = await workspace();
        const other = await workspace();
        const a = source(ws, 'a', at(1));
        const b = source(ws, 'b', at(2));
        assert.equal(await repo.insert(a), true);
        assert.equal(await repo.insert(b), true);
        assert.equal(await repo.insert(source(ws, 'a', at(3))), false);
        assert.equal(await repo.insert(source(other, 'a', at(3))), true, 'another workspace may use it');
        assert.equal(await repo.update(ws, b.id, { name: 'a' }), false);
        assert.equal(await repo.update(ws, b.id, { name: 'c', is_active: 0, updated_at: at(9) }), true);
        const row = await repo.byId(ws, b.id);
        assert.equal(row?.name, 'c');
        assert.equal(row?.is_active, 0);
        assert.equal(await repo.byId(other, b.id), undefined, 'not across workspaces');
        assert.equal((await repo.byName(ws, 'a'))?.id, a.id);
        assert.equal(await repo.byName(ws, 'b'), undefined);
      });

      test('lists newest first in pages, filtered by type and by name (case-insensitive, % and _ literal)', async () => {
        const repo = new SourceRepository(db.kysely);
        const ws = await workspace();
        const names = ['Shop_1', 'shop-2', 'shopx3', 'blog', 'SHOP%'];
        for (const [i, name] of names.entries())
          await repo.insert(source(ws, name, at(i), { type: i === 3 ? 'image_source' : 'aws_s3' }));
        const all = await repo.list(ws, { page: 1, limit: 2 });
        assert.equal(all.total, 5);
        assert.deepEqual(
          all.rows.map((r) => r.name),
          ['SHOP%', 'blog'],
        );
        const page3 = await repo.list(ws, { page: 3, limit: 2 });
        assert.deepEqual(
          page3.rows.map((r) => r.name),
          ['Shop_1'],
        );
        assert.equal((await repo.list(ws, { page: 1, limit: 10, type: 'image_source' })).total, 1);
        const shops = await repo.list(ws, { page: 1, limit: 10, nameContains: 'shop' });
        assert.equal(shops.total, 4);
        const underscore = await repo.list(ws, { page: 1, limit: 10, nameContains: 'p_' });
        assert.deepEqual(
          underscore.rows.map((r) => r.name),
          ['Shop_1'],
        );
        const percent = await repo.list(ws, { page: 1, limit: 10, nameContains: '%' });
        assert.deepEqual(
          percent.rows.map((r) => r.name),
          ['SHOP%'],
        );
      });

      test('delete says whether there was a source; sealed secrets are replaced only while unchanged', async () => {
        const repo = new SourceRepository(db.kysely);
        const ws = await workspace();
        const open = source(ws, 'open', at(1));
        const sealed = source(ws, 'sealed', at(2), { secrets: 'v1' });
        await repo.insert(open);
        await repo.insert(sealed);
        const ids = (await repo.sealedSecrets()).map((r) => r.id);
        assert.ok(ids.includes(sealed.id) && !ids.includes(open.id), 'only rows with secrets');
        assert.equal(await repo.replaceSecrets(sealed.id, 'v1', 'v2'), true);
        assert.equal(await repo.replaceSecrets(sealed.id, 'v1', 'v3'), false);
        assert.equal((await repo.byId(ws, sealed.id))?.secrets, 'v2');
        assert.equal(await repo.delete(ws, open.id), true);
        assert.equal(await repo.delete(ws, open.id), false);
        assert.equal(await repo.byId(ws, open.id), undefined);
      });
    });

    describe('PresetRepository', () => {
      test('one name per workspace; list by name, texts, update, count, delete; other workspaces unseen', async () => {
        const repo = new PresetRepository(db.kysely);
        const ws = await workspace();
        const other = await workspace();
        const row = (workspace_id: string, name: string, transformation: string) => ({
          workspace_id,
          name,
          transformation,
          created_at: at(1),
          updated_at: at(1),
        });
        assert.equal(await repo.insert(row(ws, 'thumb', 'w_200,h_200')), true);
        assert.equal(await repo.insert(row(ws, 'thumb', 'w_1')), false, 'the name is taken');
        assert.equal(await repo.insert(row(ws, 'a-first', 'q_80')), true);
        assert.equal(await repo.insert(row(other, 'thumb', 'w_999')), true, 'the same name in another workspace');
        assert.deepEqual(
          (await repo.list(ws)).map((r) => [r.name, r.transformation]),
          [
            ['a-first', 'q_80'],
            ['thumb', 'w_200,h_200'],
          ],
        );
        assert.deepEqual([...(await repo.texts(other))], [['thumb', 'w_999']]);
        assert.equal(await repo.count(ws), 2);
        assert.equal(await repo.update(ws, 'thumb', 'w_300', at(2)), true);
        assert.equal(await repo.update(ws, 'missing', 'w_300', at(2)), false);
        const updated = await repo.byName(ws, 'thumb');
        assert.deepEqual([updated?.transformation, updated?.created_at, updated?.updated_at], ['w_300', at(1), at(2)]);
        assert.equal((await repo.byName(other, 'thumb'))?.transformation, 'w_999');
        assert.equal(await new WorkspaceRepository(db.kysely).lockWorkspace(ws), true);
        assert.equal(await new WorkspaceRepository(db.kysely).lockWorkspace('nope'), false);
        assert.equal(await repo.delete(ws, 'thumb'), true);
        assert.equal(await repo.delete(ws, 'thumb'), false);
        assert.equal(await repo.byName(ws, 'thumb'), undefined);
        assert.equal(await repo.count(other), 1);
      });

      test('a workspace lock makes two counted inserts take turns', async () => {
        const ws = await workspace();
        const insertIfUnder = (name: string) =>
          inTransaction(db.kysely, async (trx) => {
            const repo = new PresetRepository(trx);
            await new WorkspaceRepository(trx).lockWorkspace(ws);
            if ((await repo.count(ws)) >= 1) return false;
            return repo.insert({ workspace_id: ws, name, transformation: 'w_1', created_at: at(0), updated_at: at(0) });
          });
        const results = await Promise.all([insertIfUnder('a'), insertIfUnder('b'), insertIfUnder('c')]);
        assert.deepEqual(results.filter(Boolean).length, 1);
        assert.equal(await new PresetRepository(db.kysely).count(ws), 1);
      });

      test('presets go with their workspace', async () => {
        const ws = await workspace();
        const repo = new PresetRepository(db.kysely);
        await repo.insert({ workspace_id: ws, name: 'x', transformation: 'w_1', created_at: at(0), updated_at: at(0) });
        await db.kysely.deleteFrom('workspaces').where('id', '=', ws).execute();
        assert.equal(await repo.count(ws), 0);
      });
    });

    describe('FileRepository', () => {
      test('a name is inserted once per folder; lookups by name, number and delivery path', async () => {
        const repo = new FileRepository(db.kysely);
        const ws = await workspace();
        const folder = folderRow(ws, 'docs', null);
        await new FolderRepository(db.kysely).insert(folder);
        const blobId = await blob(ws, 6_000_000_000);
        const root = fileRow(ws, blobId, { name: 'a.png', size: 6_000_000_000 });
        const inFolder = fileRow(ws, blobId, { name: 'a.png', folder_id: folder.id });
        assert.equal(await repo.insertIfNameFree(root), true);
        assert.equal(await repo.insertIfNameFree(inFolder), true, 'the same name in another folder');
        assert.equal(await repo.insertIfNameFree(fileRow(ws, blobId, { name: 'a.png' })), false);

        assert.equal((await repo.byName(ws, null, 'a.png'))?.id, root.id);
        assert.equal((await repo.byName(ws, folder.id, 'a.png'))?.id, inFolder.id);
        assert.equal(withPath(await repo.byFileNo(ws, inFolder.file_no)), 'docs');
        assert.equal(await repo.byName(ws, folder.id, 'b.png'), undefined);

        const withRefs = await repo.byFileNo(ws, inFolder.file_no);
        assert.equal(withRefs?.folder_no, folder.folder_no);
        const rootRefs = await repo.byFileNo(ws, root.file_no);
        assert.equal(rootRefs?.folder_no, null);
        assert.equal(rootRefs?.size, 6_000_000_000);
        assert.match(rootRefs?.sha256 ?? '', /^[0-9a-f]{64}$/);
        assert.equal(await repo.byFileNo(await workspace(), root.file_no), undefined, 'not across workspaces');

        const d = await repo.deliverable(ws, 'docs', 'a.png');
        assert.deepEqual(d && { ...d, sha256: undefined }, {
          mime_type: 'image/png',
          updated_at: at(0),
          is_private: 0,
          // What video renditions need: the displayed height (a ladder is capped by it) and the probe.
          duration: null,
          height: 1,
          media: null,
          sha256: undefined,
          size: 6_000_000_000,
          storage_key: `${ws}/${blobId}`,
        });
        assert.equal(await repo.deliverable(ws, '', 'docs'), undefined);
      });

      test('update says when the name is taken; delete removes the row', async () => {
        const repo = new FileRepository(db.kysely);
        const ws = await workspace();
        const blobId = await blob(ws, 10);
        const a = fileRow(ws, blobId, { name: 'a.png' });
        const b = fileRow(ws, blobId, { name: 'b.png' });
        await repo.insertIfNameFree(a);
        await repo.insertIfNameFree(b);
        assert.equal(await repo.update(b.id, { name: 'a.png' }), false);
        assert.equal(await repo.update(b.id, { name: 'c.png', tags: '["x"]', updated_at: at(5) }), true);
        const row = await repo.byName(ws, '', 'c.png');
        assert.equal(row?.tags, '["x"]');
        assert.equal(row?.updated_at, at(5));
        await repo.delete(a.id);
        assert.equal(await repo.byName(ws, '', 'a.png'), undefined);
      });

      test('pages: sorted with ties by id, paged with the total, filtered by folder, path, name, date and tags', async () => {
        const repo = new FileRepository(db.kysely);
        const folders = new FolderRepository(db.kysely);
        const ws = await workspace();
        const a = folderRow(ws, 'a', null);
        const ab = folderRow(ws, 'a/b', a);
        const abc = folderRow(ws, 'a/bc', a);
        for (const f of [a, ab, abc]) await folders.insert(f);
        const blobId = await blob(ws, 1);
        const rows = [
          fileRow(ws, blobId, { name: 'zeta.png', size: 30, created_at: at(1), tags: '["red","blue"]' }),
          fileRow(ws, blobId, { name: 'alpha.png', size: 10, created_at: at(2), folder_id: a.id }),
          fileRow(ws, blobId, { name: 'beta.png', size: 20, created_at: at(3), folder_id: ab.id }),
          fileRow(ws, blobId, { name: '50%.png', size: 20, created_at: at(3), folder_id: abc.id }),
          fileRow(ws, blobId, { name: 'gamma.png', size: 5, created_at: at(4), tags: '["redder"]' }),
        ];
        for (const r of rows) await repo.insertIfNameFree(r);
        const names = async (
          f: Parameters<FileRepository['page']>[1],
          p: Partial<Parameters<FileRepository['page']>[2]>,
        ) =>
          (await repo.page(ws, f, { sort: 'created_at', direction: 'desc', limit: 10, ...p })).rows.map((r) => r.name);

        const first = await repo.page(ws, {}, { sort: 'created_at', direction: 'desc', limit: 2 });
        assert.deepEqual(await repo.countUpTo(ws, {}, 100), { count: 5, exact: true });
        assert.deepEqual(await repo.countUpTo(ws, {}, 4), { count: 4, exact: false }, 'counting stops past the cap');
        assert.equal(first.rows[0].name, 'gamma.png');
        const tied = [rows[2], rows[3]].sort((x, y) => (x.id < y.id ? 1 : -1)).map((r) => r.name);
        assert.deepEqual(first.rows[1].name, tied[0], 'equal created_at: by id, in the same direction');
        assert.deepEqual(await names({}, { offset: 2, limit: 2 }), [tied[1], 'alpha.png']);
        assert.deepEqual(await names({}, { offset: 4, limit: 2 }), ['zeta.png']);
        assert.deepEqual(await names({}, { offset: 6, limit: 2 }), []);
        // By key: the next page starts after the last row, whatever came before it.
        assert.deepEqual(first.next, { v: rows[2].created_at, id: first.rows[1].id });
        const second = await repo.page(ws, {}, { sort: 'created_at', direction: 'desc', limit: 2, after: first.next! });
        assert.deepEqual(
          second.rows.map((r) => r.name),
          [tied[1], 'alpha.png'],
        );
        const third = await repo.page(ws, {}, { sort: 'created_at', direction: 'desc', limit: 2, after: second.next! });
        assert.deepEqual(
          [third.rows.map((r) => r.name), third.next],
          [['zeta.png'], null],
          'the last page has no next',
        );
        assert.equal(first.rows[0].folder_path, '');
        const bySize = await repo.page(ws, {}, { sort: 'size', direction: 'asc', limit: 2 });
        assert.deepEqual(
          (await repo.page(ws, {}, { sort: 'size', direction: 'asc', limit: 10, after: bySize.next! })).rows.map(
            (r) => r.name,
          ),
          ['beta.png', '50%.png', 'zeta.png'].sort((x, y) =>
            x === 'zeta.png'
              ? 1
              : y === 'zeta.png'
                ? -1
                : rows.find((r) => r.name === x)!.id < rows.find((r) => r.name === y)!.id
                  ? -1
                  : 1,
          ),
          'numeric keys, ties by id',
        );
        assert.deepEqual(await names({}, { sort: 'size', direction: 'asc', limit: 2 }), ['gamma.png', 'alpha.png']);
        assert.deepEqual(await names({}, { sort: 'name', direction: 'asc' }), [
          '50%.png',
          'alpha.png',
          'beta.png',
          'gamma.png',
          'zeta.png',
        ]);

        assert.deepEqual(await names({ folderId: a.id }, {}), ['alpha.png']);
        assert.deepEqual((await names({ under: 'a/b' }, {})).sort(), ['beta.png']);
        assert.deepEqual((await names({ under: 'a' }, {})).sort(), ['50%.png', 'alpha.png', 'beta.png']);
        assert.deepEqual(await names({ nameContains: ['ALPHA'] }, {}), ['alpha.png'], 'case-insensitive');
        assert.deepEqual(await names({ nameContains: ['%'] }, {}), ['50%.png'], '% is literal');
        assert.deepEqual(await names({ nameContains: ['a', 'et'] }, {}), ['beta.png', 'zeta.png'], 'all must match');
        assert.deepEqual(await names({ createdAtMost: at(2) }, {}), ['alpha.png', 'zeta.png']);
        assert.deepEqual(await names({ tags: ['red'] }, {}), ['zeta.png'], 'a whole tag, not a prefix');
        assert.deepEqual(await names({ tags: ['red', 'blue'] }, {}), ['zeta.png']);
        assert.deepEqual(await names({ tags: ['red', 'green'] }, {}), []);
        assert.deepEqual(await names({ tags: ['red', 'blue'] }, { sort: 'name', direction: 'asc' }), ['zeta.png']);
        assert.deepEqual(await names({ folderId: ab.id }, {}), ['beta.png']);
        assert.equal((await names({}, {})).length, 5);
        assert.deepEqual(await repo.countUpTo(ws, { under: 'a' }, 100), { count: 3, exact: true });
      });
    });

    describe('FolderRepository', () => {
      test('paths are unique per workspace; lookups by number, path and id', async () => {
        const repo = new FolderRepository(db.kysely);
        const ws = await workspace();
        const a = folderRow(ws, 'a', null);
        assert.equal(await repo.insert(a), true);
        assert.equal(await repo.insert(folderRow(ws, 'a', null)), false);
        await repo.insertIfPathFree(folderRow(ws, 'a', null));
        await repo.insertIfPathFree(folderRow(ws, 'a/b', a));
        await repo.insertIfPathFree(folderRow(ws, 'a/b', a));
        assert.equal((await repo.byPath(ws, 'a'))?.id, a.id, 'insertIfPathFree kept the first');
        const b = await repo.byPath(ws, 'a/b');
        assert.equal(b?.parent_id, a.id);
        assert.equal((await repo.byNo(ws, a.folder_no))?.path, 'a');
        assert.equal(await repo.byNo(await workspace(), a.folder_no), undefined);
        assert.equal(await repo.folderNoOf(a.id), a.folder_no);
        assert.equal(await repo.folderNoOf(newUuid()), undefined);
      });

      test('pages of children, sorted and searched; totals count files below', async () => {
        const repo = new FolderRepository(db.kysely);
        const files = new FileRepository(db.kysely);
        const ws = await workspace();
        const top = ['beta', 'alpha', 'gamma_1', 'gammax1'].map((name, i) => folderRow(ws, name, null, at(i)));
        for (const f of top) await repo.insert(f);
        const child = folderRow(ws, 'beta/kid', top[0]);
        const lookalike = folderRow(ws, 'betamax', null, at(9));
        await repo.insert(child);
        await repo.insert(lookalike);
        const page = (
          f: Parameters<FolderRepository['page']>[1],
          p: Partial<Parameters<FolderRepository['page']>[2]>,
        ) => repo.page(ws, f, { sort: 'name', direction: 'asc', page: 1, limit: 10, ...p });

        const all = await page({ parentId: null }, { limit: 2 });
        assert.equal(all.total, 5);
        assert.deepEqual(
          all.rows.map((r) => r.name),
          ['alpha', 'beta'],
        );
        assert.deepEqual(
          (await page({ parentId: null }, { sort: 'created_at', direction: 'desc', page: 2, limit: 2 })).rows.map(
            (r) => r.name,
          ),
          ['gamma_1', 'alpha'],
        );
        assert.deepEqual(
          (await page({ parentId: top[0].id }, {})).rows.map((r) => r.path),
          ['beta/kid'],
        );
        assert.deepEqual(
          (await page({ parentId: null, nameContains: 'A_' }, {})).rows.map((r) => r.name),
          ['gamma_1'],
        );

        const blobId = await blob(ws, 1);
        await files.insertIfNameFree(fileRow(ws, blobId, { name: '1', size: 5_000_000_000, folder_id: top[0].id }));
        await files.insertIfNameFree(fileRow(ws, blobId, { name: '2', size: 7, folder_id: child.id }));
        await files.insertIfNameFree(fileRow(ws, blobId, { name: '3', size: 100, folder_id: lookalike.id }));
        assert.deepEqual(await repo.contentTotals(top[0].id), { items: 2, size: 5_000_000_007 });
        assert.deepEqual(await repo.contentTotals(top[1].id), { items: 0, size: 0 });
        assert.equal(await repo.hasContents(top[0]), true);
        assert.equal(await repo.hasContents(child), true, 'a file');
        assert.equal(await repo.hasContents(top[1]), false);
      });

      test('movePath renames the folder and moves the paths below it, and only those', async () => {
        const repo = new FolderRepository(db.kysely);
        const files = new FileRepository(db.kysely);
        const ws = await workspace();
        const a = folderRow(ws, 'a', null);
        const ab = folderRow(ws, 'a/b', a);
        const abc = folderRow(ws, 'a/b/c', ab);
        const sibling = folderRow(ws, 'a/bb', a);
        const taken = folderRow(ws, 'a/x', a);
        for (const f of [a, ab, abc, sibling, taken]) await repo.insert(f);
        const blobId = await blob(ws, 1);
        for (const folder of [ab, abc, sibling, a])
          await files.insertIfNameFree(
            fileRow(ws, blobId, { name: `in-${folder.path.replaceAll('/', '-')}`, folder_id: folder.id }),
          );

        const moved = await inTransaction(db.kysely, (trx) =>
          new FolderRepository(trx).movePath(ab.id, {
            name: 'renamed',
            oldPath: 'a/b',
            newPath: 'a/renamed',
            at: at(7),
          }),
        );
        assert.equal(moved, true);
        const renamed = await repo.byNo(ws, ab.folder_no);
        assert.deepEqual([renamed?.name, renamed?.path, renamed?.updated_at], ['renamed', 'a/renamed', at(7)]);
        assert.equal((await repo.byNo(ws, abc.folder_no))?.path, 'a/renamed/c');
        assert.equal((await repo.byNo(ws, sibling.folder_no))?.path, 'a/bb', 'a sibling with the same prefix stays');
        assert.ok(await files.byName(ws, ab.id, 'in-a-b'));
        assert.ok(await files.deliverable(ws, 'a/renamed', 'in-a-b'), 'delivered at the new path');
        assert.ok(await files.deliverable(ws, 'a/renamed/c', 'in-a-b-c'));
        assert.equal(await files.deliverable(ws, 'a/b', 'in-a-b'), undefined, 'and no longer at the old one');
        assert.ok(await files.deliverable(ws, 'a/bb', 'in-a-bb'));
        assert.ok(await files.deliverable(ws, 'a', 'in-a'));

        // Onto a path that is taken: false, and the caller's rollback leaves everything as it was.
        const refused = await inTransaction(db.kysely, async (trx) => {
          const ok = await new FolderRepository(trx).movePath(ab.id, {
            name: 'x',
            oldPath: 'a/renamed',
            newPath: 'a/x',
            at: at(8),
          });
          if (!ok) throw new Error('rolled back');
          return ok;
        }).catch((err: Error) => err.message);
        assert.equal(refused, 'rolled back');
        assert.equal((await repo.byNo(ws, ab.folder_no))?.path, 'a/renamed');
        assert.equal((await repo.byNo(ws, abc.folder_no))?.path, 'a/renamed/c');
      });

      test('deleteFilesUnder and deleteTree take the folder, everything below, and nothing beside it', async () => {
        const repo = new FolderRepository(db.kysely);
        const files = new FileRepository(db.kysely);
        const ws = await workspace();
        const a = folderRow(ws, 'a', null);
        const ab = folderRow(ws, 'a/b', a);
        const lookalike = folderRow(ws, 'ab', null);
        for (const f of [a, ab, lookalike]) await repo.insert(f);
        const [b1, b2, b3] = [await blob(ws, 1), await blob(ws, 2), await blob(ws, 3)];
        await files.insertIfNameFree(fileRow(ws, b1, { name: '1', folder_id: a.id }));
        await files.insertIfNameFree(fileRow(ws, b1, { name: '2', folder_id: ab.id }));
        await files.insertIfNameFree(fileRow(ws, b2, { name: '3', folder_id: ab.id }));
        await files.insertIfNameFree(fileRow(ws, b3, { name: '4', folder_id: lookalike.id }));

        const released = await inTransaction(db.kysely, async (trx) => {
          const tx = new FolderRepository(trx);
          const blobIds = await tx.deleteFilesUnder(a);
          await tx.deleteTree(a);
          return blobIds;
        });
        assert.deepEqual(released.sort(), [b1, b2].sort(), 'each blob once');
        assert.equal(await repo.byPath(ws, 'a'), undefined);
        assert.equal(await repo.byPath(ws, 'a/b'), undefined);
        assert.ok(await repo.byPath(ws, 'ab'));
        assert.ok(await files.byName(ws, lookalike.id, '4'));
        assert.equal((await files.page(ws, {}, { sort: 'name', direction: 'asc', limit: 10 })).rows.length, 1);
      });
    });

    describe('work in flight (upload sessions, webhook deliveries)', () => {
      test('open multipart sessions and queued webhook deliveries', async () => {
        const sessions = new UploadSessionRepository(db.kysely);
        const deliveries = new WebhookDeliveries(db);
        const ws = await workspace();
        const sessionsBefore = await sessions.activeSessionCount();
        const deliveriesBefore = await deliveries.counts();
        const session = (status: 'active' | 'completed') => ({
          id: newShortId() + newShortId(),
          uuid: newUuid(),
          workspace_id: ws,
          status,
          file_name: 'f',
          folder: '',
          tags: '[]',
          metadata: '{}',
          custom_id: null,
          format: 'bin',
          size: 1,
          part_size: 1,
          part_count: 1,
          storage_key: newUuid(),
          upload_id: 'u',
          expire_at: 0,
          file_id: null,
          webhook_url: null,
          may_replace: 1,
          created_at: at(0),
          updated_at: at(0),
        });
        const open = session('active');
        const done = session('completed');
        await db.kysely.insertInto('multipart_sessions').values([open, done]).execute();
        assert.equal(await sessions.activeSessionWorkspace(open.id), ws);
        assert.equal(await sessions.activeSessionWorkspace(done.id), undefined, 'not open for parts');
        assert.equal(await sessions.activeSessionWorkspace('x'.repeat(24)), undefined);
        assert.equal(await sessions.activeSessionCount(), sessionsBefore + 1);

        const delivery = (status: 'pending' | 'delivered' | 'failed') => ({
          id: newUuid(),
          workspace_id: ws,
          url: 'https://hooks.example/',
          payload: '{}',
          status,
          attempts: 0,
          next_attempt_at: at(0),
          locked_until: null,
          last_status: null,
          last_error: null,
          created_at: at(0),
          updated_at: at(0),
        });
        const statuses = ['pending', 'pending', 'failed', 'delivered'] as const;
        await db.kysely.insertInto('webhook_deliveries').values(statuses.map(delivery)).execute();
        assert.deepEqual(await deliveries.counts(), {
          pending: deliveriesBefore.pending + 2,
          failed: deliveriesBefore.failed + 1,
        });
      });
    });
  });
}
