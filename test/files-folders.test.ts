// Files and Folders APIs (docs/api/files-folders.md) on SQLite and PostgreSQL.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { addFile, DIALECTS, type Harness, makeHarness } from './helpers/harness.ts';
import { call } from './helpers/http.ts';

for (const dialect of DIALECTS) {
  describe(`files and folders on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    const api = (method: string, url: string, body?: unknown, key = h.ws.private_key) =>
      call(h.app, method, url, { body, headers: { 'x-api-key': key } });
    const add = (name: string, opts: { folder?: string; tags?: string[]; data?: Buffer; workspace?: string } = {}) =>
      addFile(h, name, opts.data ?? randomBytes(100 + Math.floor(Math.random() * 1000)), {
        folder: opts.folder ? opts.folder.split('/') : [],
        tags: opts.tags,
        workspaceId: opts.workspace,
      });
    const objects = async () => {
      const keys: string[] = [];
      for await (const o of h.services.storage.list('')) keys.push(o.key);
      return keys.sort();
    };

    before(async () => {
      h = await makeHarness(dialect.name);
    });
    after(() => h?.close());

    describe('files', () => {
      before(async () => {
        await add('Alpha.jpg', { tags: ['red', 'big'], data: randomBytes(500) });
        await add('beta_1.png', { tags: ['red'], data: randomBytes(300) });
        await add('gamma%.txt', { tags: ['blue'], folder: 'docs', data: randomBytes(900) });
        await add('delta.txt', { tags: ['red', 'big', 'blue'], folder: 'docs/old', data: randomBytes(100) });
        await add('epsilon.bin', { data: randomBytes(700) });
      });

      test('list with aliases=none: files and meta only, the same as in the full answer', async () => {
        for (const query of ['limit=2', 'limit=2&page=3', 'limit=100&tags=red', 'limit=1&sort=name_asc&search=a']) {
          const full = await api('GET', `/api/v1/files?${query}`);
          const own = await api('GET', `/api/v1/files?${query}&aliases=none`);
          assert.equal(own.status, 200, query);
          assert.deepEqual(Object.keys(own.body), ['files', 'meta'], query);
          assert.ok(own.body.files.length > 0, query);
          assert.deepEqual(own.body.files, full.body.files, query);
          assert.deepEqual(own.body.meta, full.body.meta, query);
          assert.equal(own.headers['content-type'], 'application/json; charset=utf-8');
          assert.equal(own.headers['cache-control'], 'no-store');
          assert.ok(own.headers['x-snapshot'], 'X-Snapshot as on every list');
          assert.ok(own.raw.length < full.raw.length / 2, `${own.raw.length} bytes against ${full.raw.length}`);
        }
        assert.equal((await api('GET', '/api/v1/files?aliases=all')).status, 400, 'none is the only value');
      });

      test('list: newest first, full records, meta with hasNext and hasPrev', async () => {
        const res = await api('GET', '/api/v1/files?limit=2');
        assert.equal(res.status, 200);
        assert.deepEqual(Object.keys(res.body).sort(), [
          'current_page',
          'data',
          'files',
          'has_next',
          'has_next_page',
          'is_page_next',
          'items',
          'limit',
          'meta',
          'next_cursor',
          'page',
          'total_count',
          'total_pages',
          'total_results',
        ]);
        assert.deepEqual(res.body.data, res.body.files);
        assert.deepEqual(
          [res.body.current_page, res.body.total_results, res.body.has_next, res.body.has_next_page],
          [res.body.meta.page, res.body.meta.total, res.body.meta.hasNext, res.body.meta.hasNext],
        );
        // The hosted SDKs' names for the same page.
        assert.deepEqual(res.body.items, res.body.files);
        assert.deepEqual(
          [res.body.page, res.body.limit, res.body.total_count, res.body.is_page_next],
          [res.body.meta.page, res.body.meta.limit, res.body.meta.total, res.body.meta.hasNext],
        );
        assert.equal(res.body.total_pages, Math.ceil(res.body.meta.total / res.body.meta.limit));
        const { nextCursor, ...meta } = res.body.meta;
        assert.deepEqual(meta, { page: 1, limit: 2, total: 5, totalEstimated: false, hasNext: true, hasPrev: false });
        assert.equal(res.body.next_cursor, nextCursor);
        assert.equal(res.body.files[0].name, 'epsilon.bin');
        assert.equal(Object.keys(res.body.files[0]).length, 32, 'the record of 2.4 plus duration and media');
        const last = await api('GET', '/api/v1/files?limit=2&page=3');
        assert.deepEqual(last.body.meta, {
          page: 3,
          limit: 2,
          total: 5,
          totalEstimated: false,
          hasNext: false,
          hasPrev: true,
          nextCursor: null,
        });
        assert.equal(last.body.files.length, 1);

        // By cursor: the same pages as by number, then null after the last.
        const byPage = [];
        for (let page = 1; page <= 3; page++)
          byPage.push(
            ...(await api('GET', `/api/v1/files?limit=2&page=${page}`)).body.files.map((f: any) => f.file_no),
          );
        const byCursor = [];
        let cursor: string | null = null;
        const pages = [];
        do {
          const r = await api('GET', `/api/v1/files?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
          assert.equal(r.status, 200);
          byCursor.push(...r.body.files.map((f: any) => f.file_no));
          pages.push(r.body.meta.page);
          cursor = r.body.meta.nextCursor;
        } while (cursor);
        assert.deepEqual(byCursor, byPage);
        assert.deepEqual(pages, [1, 2, 3], 'a cursor knows its page number');
      });

      test('cursors: every sort walks every file once; a foreign, forged or mismatched cursor is a 400', async () => {
        for (const sort of ['created_at_desc', 'created_at_asc', 'name_asc', 'name_desc', 'size_asc', 'size_desc']) {
          const whole = (await api('GET', `/api/v1/files?limit=100&sort=${sort}`)).body.files.map(
            (f: any) => f.file_no,
          );
          const walked = [];
          let cursor: string | null = null;
          do {
            const r = await api('GET', `/api/v1/files?limit=2&sort=${sort}${cursor ? `&cursor=${cursor}` : ''}`);
            walked.push(...r.body.files.map((f: any) => f.file_no));
            cursor = r.body.meta.nextCursor;
          } while (cursor);
          assert.deepEqual(walked, whole, sort);
        }
        const first = (await api('GET', '/api/v1/files?limit=2&sort=name_asc')).body.meta.nextCursor;
        const other = await api('GET', `/api/v1/files?limit=2&sort=size_asc&cursor=${first}`);
        assert.equal(other.status, 400);
        assert.match(other.body.message, /another sort order/);
        const forged = Buffer.from(JSON.stringify(['name', 'asc', 2, { x: 1 }, 'id'])).toString('base64url');
        for (const bad of ['x', forged, Buffer.from('[1,2,3,4,5]').toString('base64url'), '%E0%A4%A'])
          assert.equal((await api('GET', `/api/v1/files?limit=2&sort=name_asc&cursor=${bad}`)).status, 400, bad);
      });

      test('page reaches a documented depth; deeper pages ask for the cursor', async () => {
        const deep = await api('GET', '/api/v1/files?limit=100&page=10001');
        assert.equal(deep.status, 400);
        assert.match(deep.body.message, /cursor/);
        const empty = await api('GET', '/api/v1/files?limit=100&page=10000');
        assert.equal(empty.status, 200);
        assert.deepEqual([empty.body.files, empty.body.meta.hasNext, empty.body.meta.nextCursor], [[], false, null]);
      });

      test("the hosted SDKs' filters: name= (like search), path= (a folder prefix), folderNo (like folder_no)", async () => {
        const all = (await api('GET', '/api/v1/files?limit=100')).body.files as any[];
        const byName = (await api('GET', '/api/v1/files?limit=100&name=ALPHA')).body.files.map((f: any) => f.name);
        assert.deepEqual(byName, ['Alpha.jpg']);
        const inDocs = all.filter((f) => f.path.startsWith('/docs/'));
        assert.ok(inDocs.length > 0);
        const byPath = (await api('GET', '/api/v1/files?limit=100&path=docs/')).body.files
          .map((f: any) => f.file_no)
          .sort();
        assert.deepEqual(byPath, inDocs.map((f) => f.file_no).sort());
        assert.deepEqual(
          (await api('GET', '/api/v1/files?limit=100&path=/')).body.files.length,
          all.length,
          '"/" is every folder',
        );
        assert.deepEqual(
          (await api('GET', '/api/v1/files?limit=100&path=doc')).body.files,
          [],
          'a prefix is whole folder names',
        );
        const folderNo = inDocs[0].folder_no;
        assert.deepEqual(
          (await api('GET', `/api/v1/files?limit=100&folderNo=${folderNo}`)).body.files
            .map((f: any) => f.file_no)
            .sort(),
          (await api('GET', `/api/v1/files?limit=100&folder_no=${folderNo}`)).body.files
            .map((f: any) => f.file_no)
            .sort(),
        );
      });

      test('every sort, with ties broken by id so pages never repeat or skip', async () => {
        const names = async (q: string) =>
          (await api('GET', `/api/v1/files?limit=100&${q}`)).body.files.map((f: any) => f.name);
        assert.deepEqual(
          await names('sort=name_asc'),
          ['Alpha.jpg', 'beta_1.png', 'delta.txt', 'epsilon.bin', 'gamma%.txt'].sort(),
        );
        assert.deepEqual(await names('sort=name_desc'), (await names('sort=name_asc')).reverse());
        assert.deepEqual(await names('sort=size_asc'), [
          'delta.txt',
          'beta_1.png',
          'Alpha.jpg',
          'epsilon.bin',
          'gamma%.txt',
        ]);
        assert.deepEqual(await names('sort_field=file_size&sort_order=desc'), [
          'gamma%.txt',
          'epsilon.bin',
          'Alpha.jpg',
          'beta_1.png',
          'delta.txt',
        ]);
        assert.deepEqual(await names('sort=created_at_asc'), (await names('sort=created_at_desc')).reverse());
        await h.services.db.kysely.updateTable('files').set({ created_at: '2020-01-01T00:00:00.000Z' }).execute();
        for (const sort of ['created_at_desc', 'created_at_asc']) {
          const seen: string[] = [];
          for (let page = 1; page <= 3; page++)
            seen.push(
              ...(await api('GET', `/api/v1/files?limit=2&page=${page}&sort=${sort}`)).body.files.map((f: any) => f.id),
            );
          assert.equal(new Set(seen).size, 5, sort);
          assert.deepEqual(seen, sort.endsWith('asc') ? [...seen].sort() : [...seen].sort().reverse());
        }
        assert.equal((await api('GET', '/api/v1/files?sort=random')).status, 400);
        assert.equal((await api('GET', '/api/v1/files?limit=0')).status, 400);
        assert.equal((await api('GET', '/api/v1/files?limit=101')).status, 400);
      });

      test('oldest-first pages never repeat or skip a file while others are being added', async () => {
        const ws = await h.services.workspaces.create('Paging');
        const mine = (name: string) => add(name, { workspace: ws.workspace_id });
        for (let i = 0; i < 7; i++) {
          await mine(`start-${i}.bin`);
          await new Promise((r) => setTimeout(r, 2));
        }
        const seen: string[] = [];
        for (let page = 1; page <= 10; page++) {
          const res = await api(
            'GET',
            `/api/v1/files?sort=created_at_asc&limit=3&page=${page}`,
            undefined,
            ws.private_key,
          );
          seen.push(...res.body.files.map((f: any) => f.name));
          if (!res.body.meta.hasNext) break;
          // Uploads keep arriving while the client pages.
          await mine(`added-after-page-${page}.bin`);
        }
        assert.equal(new Set(seen).size, seen.length, 'no repeats');
        const all = (
          await api('GET', '/api/v1/files?sort=created_at_asc&limit=100', undefined, ws.private_key)
        ).body.files.map((f: any) => f.name);
        assert.deepEqual(seen, all, 'no skips: every file, including those added while paging, in order');
      });

      test('newest-first pages stay put while files are added, with the X-Snapshot of the first page', async () => {
        const ws = await h.services.workspaces.create('Snapshot');
        const mine = (name: string) => add(name, { workspace: ws.workspace_id });
        for (let i = 0; i < 7; i++) {
          await mine(`start-${i}.bin`);
          await new Promise((r) => setTimeout(r, 2));
        }
        const first = await call(h.app, 'GET', '/api/v1/files?limit=3', { headers: { 'x-api-key': ws.private_key } });
        const snapshot = first.headers['x-snapshot'] as string;
        assert.match(snapshot, /^\d{4}-\d\d-\d\dT/);
        const seen: string[] = first.body.files.map((f: any) => f.name);
        await new Promise((r) => setTimeout(r, 2));
        for (let page = 2; ; page++) {
          await mine(`added-before-page-${page}.bin`);
          const res = await api(
            'GET',
            `/api/v1/files?limit=3&page=${page}&snapshot=${encodeURIComponent(snapshot)}`,
            undefined,
            ws.private_key,
          );
          seen.push(...res.body.files.map((f: any) => f.name));
          assert.equal(res.body.meta.total, 7, 'the snapshot holds the total');
          if (!res.body.meta.hasNext) break;
        }
        assert.deepEqual(
          seen,
          Array.from({ length: 7 }, (_, i) => `start-${6 - i}.bin`),
          'newest first, each once, none added since',
        );
        assert.equal((await api('GET', '/api/v1/files?snapshot=yesterday', undefined, ws.private_key)).status, 400);
      });

      test('filters: folder_no, search (literal % and _), tags (all must match)', async () => {
        const docs = (await api('GET', '/api/v1/folders')).body.folders.find((f: any) => f.name === 'docs');
        const inDocs = await api('GET', `/api/v1/files?folder_no=${docs.folder_no}`);
        assert.deepEqual(
          inDocs.body.files.map((f: any) => f.name),
          ['gamma%.txt'],
          'direct children only',
        );
        const names = async (q: string) =>
          (await api('GET', `/api/v1/files?limit=100&sort=name_asc&${q}`)).body.files.map((f: any) => f.name);
        assert.deepEqual(await names('search=ALPHA'), ['Alpha.jpg']);
        assert.deepEqual(await names(`search=${encodeURIComponent('%')}`), ['gamma%.txt']);
        assert.deepEqual(await names('search=_'), ['beta_1.png']);
        assert.deepEqual(await names('tags=red'), ['Alpha.jpg', 'beta_1.png', 'delta.txt']);
        assert.deepEqual(await names('tags=red,big'), ['Alpha.jpg', 'delta.txt']);
        assert.deepEqual(await names('tags=red,big,blue'), ['delta.txt']);
        assert.deepEqual(await names('tags=re'), [], 'whole tags only');
        assert.equal((await api('GET', '/api/v1/files?folder_no=ZZZZZZZZZZZZ')).status, 404);
      });

      test('get, and 404 for unknown, malformed and other-workspace files', async () => {
        const any = (await api('GET', '/api/v1/files?limit=1')).body.files[0];
        const res = await api('GET', `/api/v1/files/${any.file_no}`);
        const { dimensions, workspace, folder, uploaded_by, uploaded_at, asset_key, asset_url, ...record } =
          res.body.data;
        assert.deepEqual(record, any, 'the record, as listed');
        // And the details the hosted docs give one file.
        assert.deepEqual(dimensions, { width: any.width, height: any.height });
        assert.deepEqual(workspace, { name: 'Test workspace', workspace_no: h.ws.workspace_id });
        assert.deepEqual(
          folder,
          any.folder_no
            ? { folder_no: any.folder_no, name: any.folder_name, path: any.path.slice(1, any.path.lastIndexOf('/')) }
            : null,
        );
        assert.deepEqual(
          [uploaded_by, uploaded_at, asset_key, asset_url],
          [null, any.created_at, any.file_no, any.url],
        );
        assert.equal(any.file_size, any.size);
        assert.equal(any.workspace_no, any.workspace_id);
        assert.equal(any.source, any.upload_source);
        assert.equal(any.folder_name, any.path.split('/').at(-2) || null);
        const other = await h.services.workspaces.create('Other');
        const theirs = await add('theirs.bin', { workspace: other.workspace_id });
        for (const fileNo of ['ZZZZZZZZZZZZ', 'not-valid!', theirs.file_no]) {
          for (const [method, url, body] of [
            ['GET', `/api/v1/files/${fileNo}`],
            ['PATCH', `/api/v1/files/${fileNo}`, { is_private: true }],
            ['PATCH', `/api/v1/files/${fileNo}/rename`, { name: 'x' }],
            ['DELETE', `/api/v1/files/${fileNo}`],
          ] as const) {
            const r = await api(method, url, body);
            assert.equal(r.status, 404, `${method} ${url}`);
            assert.equal(r.body.errorCode, 'FILE_NOT_FOUND');
          }
        }
        assert.equal(
          (await api('GET', `/api/v1/files/${theirs.file_no}`, undefined, other.private_key)).body.data.name,
          'theirs.bin',
        );
        assert.equal((await api('GET', '/api/v1/files', undefined, h.ws.public_key)).status, 403);
      });

      test('rename: 200, 409 when the folder holds the name, 400 for bad names', async () => {
        const f = await add('rename-me.txt');
        await add('taken.txt');
        const res = await api('PATCH', `/api/v1/files/${f.file_no}/rename`, { name: 'renamed.txt' });
        assert.equal(res.status, 200);
        assert.equal(res.body.data.name, 'renamed.txt');
        assert.equal(res.body.data.path, '/renamed.txt');
        assert.equal(res.body.data.id, f.id);
        const taken = await api('PATCH', `/api/v1/files/${f.file_no}/rename`, { name: 'taken.txt' });
        assert.equal(taken.status, 409);
        assert.equal(taken.body.errorCode, 'FILE_NAME_TAKEN');
        for (const name of ['a/b', 'x\u0000', 'x\u202e'])
          assert.equal((await api('PATCH', `/api/v1/files/${f.file_no}/rename`, { name })).status, 400);
      });

      test('rename keeps the extension: "boot" on shoe.png gives boot.png; a name already ending in it is kept', async () => {
        const shoe = await add('shoe.png');
        const boot = await api('PATCH', `/api/v1/files/${shoe.file_no}/rename`, { name: 'boot' });
        assert.equal(boot.status, 200, JSON.stringify(boot.body));
        assert.equal(boot.body.data.name, 'boot.png');
        assert.equal(
          (await api('PATCH', `/api/v1/files/${shoe.file_no}/rename`, { name: 'sneaker.PNG' })).body.data.name,
          'sneaker.PNG',
        );
        assert.equal(
          (await api('PATCH', `/api/v1/files/${shoe.file_no}/rename`, { name: 'shoe.jpg' })).body.data.name,
          'shoe.jpg.PNG',
          'the extension it has now',
        );
        const plain = await add('README');
        assert.equal(
          (await api('PATCH', `/api/v1/files/${plain.file_no}/rename`, { name: 'NOTES' })).body.data.name,
          'NOTES',
          'no extension to keep',
        );
        const first = await add('first.png');
        await add('second.png');
        const taken = await api('PATCH', `/api/v1/files/${first.file_no}/rename`, { name: 'second' });
        assert.equal(taken.status, 409, 'the name with its extension is taken');
      });

      test('update: tags added and removed, metadata merged, custom_id, move, is_private', async () => {
        const f = await add('update-me.txt', { tags: ['one', 'two'] });
        const folder = (await api('POST', '/api/v1/folders', { name: 'moved-here' })).body.data;
        let r = await api('PATCH', `/api/v1/files/${f.file_no}`, {
          add_tags: ['three', 'one'],
          remove_tags: 'two',
          metadata: { a: 1, b: { c: 2 } },
          custom_id: 'cid',
          is_private: true,
        });
        assert.equal(r.status, 200, JSON.stringify(r.body));
        assert.deepEqual(r.body.data.tags, ['one', 'three']);
        assert.deepEqual(r.body.data.metadata, { a: 1, b: { c: 2 } });
        assert.equal(r.body.data.custom_id, 'cid');
        assert.equal(r.body.data.is_private, true);
        r = await api('PATCH', `/api/v1/files/${f.file_no}`, {
          metadata: { a: null, d: 'x' },
          custom_id: null,
          folder_no: folder.folder_no,
        });
        assert.deepEqual(r.body.data.metadata, { b: { c: 2 }, d: 'x' });
        assert.equal(r.body.data.custom_id, null);
        assert.equal(r.body.data.folder_no, folder.folder_no);
        assert.equal(r.body.data.path, '/moved-here/update-me.txt');
        await add('update-me.txt');
        const clash = await api('PATCH', `/api/v1/files/${f.file_no}`, { folder_no: null });
        assert.equal(clash.status, 409, 'the root already holds that name');
        assert.equal((await api('PATCH', `/api/v1/files/${f.file_no}`, { folder_no: 'ZZZZZZZZZZZZ' })).status, 404);
        assert.equal((await api('PATCH', `/api/v1/files/${f.file_no}`, { metadata: [1] })).status, 400);
        assert.equal((await api('PATCH', `/api/v1/files/${f.file_no}`, { is_private: 'yes' })).status, 400);
      });

      test('delete: the bytes go only when no other file shares them', async () => {
        const data = randomBytes(4321);
        const a = await add('shared-a.bin', { data });
        const b = await add('shared-b.bin', { data });
        assert.equal(b.is_duplicate, true);
        const blob = await h.services.db.kysely
          .selectFrom('blobs')
          .selectAll()
          .where('sha256', '=', a.hash)
          .executeTakeFirstOrThrow();
        const res = await api('DELETE', `/api/v1/files/${a.file_no}`);
        assert.deepEqual(res.body, { success: true, message: 'file deleted successfully' });
        assert.ok((await objects()).includes(blob.storage_key), 'still used by the other file');
        await api('DELETE', `/api/v1/files/${b.file_no}`);
        assert.ok(!(await objects()).includes(blob.storage_key), 'freed with the last file');
        assert.equal((await api('GET', `/api/v1/files/${b.file_no}`)).status, 404);
      });
    });

    describe('folders', () => {
      test('create at the root and inside a parent; 409 for a name the parent holds', async () => {
        const top = await api('POST', '/api/v1/folders', { name: 'projects' });
        assert.equal(top.status, 201);
        assert.deepEqual(Object.keys(top.body.data).sort(), [
          'created_at',
          'folder_no',
          'id',
          'is_active',
          'is_delete',
          'name',
          'parent_folder',
          'parent_folder_no',
          'path',
          'total_items',
          'total_size',
          'updated_at',
          'workspace',
          'workspace_id',
          'workspace_no',
        ]);
        // The hosted SDKs read the folder at the top level.
        const { success, data, ...flat } = top.body;
        assert.equal(success, true);
        assert.deepEqual(flat, data);
        assert.equal(top.body.data.parent_folder_no, null);
        const child = await api('POST', '/api/v1/folders', { name: 'site', parent_folder_no: top.body.data.folder_no });
        assert.equal(child.body.data.path, 'projects/site');
        assert.equal(child.body.data.parent_folder_no, top.body.data.folder_no);
        assert.equal(
          (await api('POST', '/api/v1/folders', { name: 'site', parent_folder_no: top.body.data.folder_no })).status,
          409,
        );
        assert.equal((await api('POST', '/api/v1/folders', { name: 'projects' })).status, 409);
        for (const name of ['a/b', '..', ''])
          assert.equal((await api('POST', '/api/v1/folders', { name })).status, 400);
        assert.equal(
          (await api('POST', '/api/v1/folders', { name: 'x', parent_folder_no: 'ZZZZZZZZZZZZ' })).status,
          404,
        );
      });

      test('list: children of a parent, with totals over everything below', async () => {
        await add('one.bin', { folder: 'media/photos', data: randomBytes(1000) });
        await add('two.bin', { folder: 'media/photos/2026', data: randomBytes(2000) });
        await add('three.bin', { folder: 'media', data: randomBytes(500) });
        const root = await api('GET', '/api/v1/folders?limit=100');
        const media = root.body.folders.find((f: any) => f.name === 'media');
        assert.equal(media.total_items, 3);
        assert.equal(media.total_size, 3500);
        assert.ok(root.body.folders.every((f: any) => f.parent_folder_no === null));
        const kids = await api('GET', `/api/v1/folders?parent_folder_no=${media.folder_no}`);
        assert.deepEqual(
          kids.body.folders.map((f: any) => [f.name, f.total_items, f.total_size]),
          [['photos', 2, 3000]],
        );
        assert.deepEqual(
          kids.body.meta,
          { page: 1, limit: 1000, total: 1, hasMore: false },
          'without limit: every child, up to the cap',
        );
        assert.deepEqual(
          (await api('GET', '/api/v1/folders?search=MED')).body.folders.map((f: any) => f.name),
          ['media'],
        );
      });

      test('rename: paths below follow, for folders and files', async () => {
        const media = (await api('GET', '/api/v1/folders?search=media')).body.folders[0];
        const res = await api('POST', `/api/v1/folders/rename/${media.folder_no}`, { name: 'assets' });
        assert.equal(res.status, 200);
        assert.equal(res.body.data.path, 'assets');
        const photos = (await api('GET', `/api/v1/folders?parent_folder_no=${media.folder_no}`)).body.folders[0];
        assert.equal(photos.path, 'assets/photos');
        const paths = (await api('GET', '/api/v1/files?limit=100&search=.bin')).body.files
          .map((f: any) => f.path)
          .filter((p: string) => p.startsWith('/assets'));
        assert.deepEqual(paths.sort(), ['/assets/photos/2026/two.bin', '/assets/photos/one.bin', '/assets/three.bin']);
        assert.equal(
          (await api('POST', `/api/v1/folders/rename/${media.folder_no}`, { name: 'projects' })).status,
          409,
        );
        const up = await add('late.bin', { folder: 'assets/photos' });
        assert.equal(up.folder_no, photos.folder_no, 'uploads find the renamed folder');
      });

      test('move: under another parent or the root, paths follow; never into itself, never onto a name', async () => {
        // Folder by folder from the root: a list shows one level.
        const byPath = async (path: string) => {
          let parent: any;
          for (const name of path.split('/')) {
            const q = parent ? `?parent_folder_no=${parent.folder_no}` : '';
            parent = (await api('GET', `/api/v1/folders${q}`)).body.folders.find((f: any) => f.name === name);
            if (!parent) return undefined;
          }
          return parent;
        };
        const photos = await byPath('assets/photos');
        const projects = await byPath('projects');
        const moved = await api('POST', `/api/v1/folders/move/${photos.folder_no}`, {
          parent_folder_no: projects.folder_no,
        });
        assert.equal(moved.status, 200);
        assert.equal(moved.body.data.path, 'projects/photos');
        assert.equal(moved.body.data.parent_folder_no, projects.folder_no);
        const paths = async (prefix: string) =>
          (await api('GET', '/api/v1/files?limit=100&search=.bin')).body.files
            .map((f: any) => f.path)
            .filter((p: string) => p.startsWith(prefix))
            .sort();
        assert.deepEqual(await paths('/projects/photos/'), [
          '/projects/photos/2026/two.bin',
          '/projects/photos/late.bin',
          '/projects/photos/one.bin',
        ]);
        // Into itself, or a folder inside it: refused, nothing changes.
        for (const target of [projects.folder_no, photos.folder_no, (await byPath('projects/photos/2026')).folder_no]) {
          const refused = await api('POST', `/api/v1/folders/move/${projects.folder_no}`, { parent_folder_no: target });
          assert.equal(refused.status, 409);
          assert.equal(refused.body.errorCode, 'FOLDER_INTO_ITSELF');
        }
        assert.ok(await byPath('projects/photos/2026'));
        // The new parent already holds that name.
        const clash = (await api('POST', '/api/v1/folders', { name: 'photos' })).body;
        const taken = await api('POST', `/api/v1/folders/move/${photos.folder_no}`, { parent_folder_no: null });
        assert.equal(taken.status, 409);
        assert.equal(taken.body.errorCode, 'FOLDER_EXISTS');
        assert.equal((await api('DELETE', `/api/v1/folders/${clash.folder_no}`)).status, 200);
        // An unknown parent, and a body without the parent.
        assert.equal(
          (await api('POST', `/api/v1/folders/move/${photos.folder_no}`, { parent_folder_no: 'nosuchfolder1' })).status,
          404,
        );
        assert.equal((await api('POST', `/api/v1/folders/move/${photos.folder_no}`, {})).status, 400);
        // To the root, then back where it was: uploads find it there.
        const root = await api('POST', `/api/v1/folders/move/${photos.folder_no}`, { parent_folder_no: null });
        assert.equal(root.body.data.path, 'photos');
        assert.equal(root.body.data.parent_folder_no, null);
        const assets = await byPath('assets');
        const back = await api('POST', `/api/v1/folders/move/${photos.folder_no}`, {
          parent_folder_no: assets.folder_no,
        });
        assert.equal(back.body.data.path, 'assets/photos');
        assert.deepEqual(await paths('/assets/photos/'), [
          '/assets/photos/2026/two.bin',
          '/assets/photos/late.bin',
          '/assets/photos/one.bin',
        ]);
        const up = await add('later.bin', { folder: 'assets/photos/2026' });
        assert.equal(up.folder_no, (await byPath('assets/photos/2026')).folder_no);
        assert.equal((await api('DELETE', `/api/v1/files/${up.file_no}`)).status, 200);
      });

      test('delete: the folder, its subfolders, their files, and bytes no other file uses', async () => {
        const before = await objects();
        const assets = (await api('GET', '/api/v1/folders?search=assets')).body.folders[0];
        const inside = (await api('GET', '/api/v1/files?limit=100')).body.files.filter((f: any) =>
          f.path.startsWith('/assets/'),
        );
        assert.equal(inside.length, 4);
        // Not empty: refused unless asked for, and nothing is lost.
        const refused = await api('DELETE', `/api/v1/folders/${assets.folder_no}`);
        assert.equal(refused.status, 409);
        assert.equal(refused.body.errorCode, 'FOLDER_NOT_EMPTY');
        assert.equal(
          (await api('GET', `/api/v1/folders?parent_folder_no=${assets.folder_no}`)).status,
          200,
          'still there',
        );
        const res = await api('DELETE', `/api/v1/folders/${assets.folder_no}?recursive=true`);
        assert.deepEqual(res.body, { success: true, message: 'folder deleted' });
        for (const f of inside) assert.equal((await api('GET', `/api/v1/files/${f.file_no}`)).status, 404);
        assert.equal((await api('GET', '/api/v1/folders?search=assets')).body.folders.length, 0);
        const remaining = await h.services.db.kysely
          .selectFrom('folders')
          .select('path')
          .where('path', 'like', 'assets%')
          .execute();
        assert.deepEqual(remaining, []);
        assert.equal(before.length - (await objects()).length, 4, 'their bytes are freed');
        assert.equal((await api('DELETE', `/api/v1/folders/${assets.folder_no}`)).status, 404);
      });

      test('storage and database agree at the end', async () => {
        const blobs = await h.services.db.kysely.selectFrom('blobs').select('storage_key').execute();
        assert.deepEqual(await objects(), blobs.map((b) => b.storage_key).sort());
        const used = (
          await h.services.db.kysely
            .selectFrom('blobs')
            .select('size')
            .where('workspace_id', '=', h.ws.workspace_id)
            .execute()
        ).reduce((n, b) => n + Number(b.size), 0);
        const ws = await h.services.db.kysely
          .selectFrom('workspaces')
          .select('used_bytes')
          .where('id', '=', h.ws.workspace_id)
          .executeTakeFirstOrThrow();
        assert.equal(Number(ws.used_bytes), used);
      });
    });
  });
}
