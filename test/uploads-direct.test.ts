// Direct upload (docs/api/uploads.md#direct-upload) end to end over a real socket, on
// local disk and S3, with byte-exact checks and every documented refusal.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import sharp from 'sharp';
import { type Harness, makeHarness } from './helpers/harness.ts';
import { freshS3Storage, UPLOAD_MATRIX } from './helpers/storage.ts';

const sha = (b: Buffer | Uint8Array) => createHash('sha256').update(b).digest('hex');
const RECORD_FIELDS = [
  'created_at',
  'custom_id',
  'duration',
  'extension',
  'file_no',
  'file_size',
  'folder_id',
  'folder_name',
  'folder_no',
  'format',
  'hash',
  'height',
  'id',
  'is_duplicate',
  'is_private',
  'media',
  'meta_data',
  'metadata',
  'mime_type',
  'name',
  'path',
  'size',
  'source',
  'tags',
  'thumbanil',
  'thumbnail',
  'updated_at',
  'upload_source',
  'url',
  'width',
  'workspace_id',
  'workspace_no',
];

async function readAll(stream: AsyncIterable<unknown>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

for (const combo of UPLOAD_MATRIX) {
  describe(`direct upload on ${combo.name}`, { skip: combo.skip }, () => {
    let h: Harness;
    let base: string;
    const upload = async (fields: Record<string, string | Blob>, key = h.ws.public_key) => {
      const form = new FormData();
      for (const [k, v] of Object.entries(fields)) {
        if (v instanceof Blob) form.append(k, v, 'upload.bin');
        else form.append(k, v);
      }
      const res = await fetch(`${base}/api/v1/uploads`, { method: 'POST', body: form, headers: { 'x-api-key': key } });
      return { status: res.status, body: (await res.json()) as any };
    };
    /** Everything stored matches what the database says: no orphans, no dangling rows. */
    const assertConsistent = async () => {
      const db = h.services.db.kysely;
      const blobs = await db.selectFrom('blobs').selectAll().execute();
      const keys: string[] = [];
      for await (const o of h.services.storage.list('')) keys.push(o.key);
      assert.deepEqual(keys.sort(), blobs.map((b) => b.storage_key).sort(), 'storage holds exactly the blobs');
      assert.deepEqual(await db.selectFrom('storage_intents').selectAll().execute(), [], 'no pending intents');
      const files = await db.selectFrom('files').select('blob_id').execute();
      assert.ok(
        files.every((f) => blobs.some((b) => b.id === f.blob_id)),
        'every file has its blob',
      );
      const used = blobs.filter((b) => b.workspace_id === h.ws.workspace_id).reduce((n, b) => n + Number(b.size), 0);
      const ws = await db
        .selectFrom('workspaces')
        .select('used_bytes')
        .where('id', '=', h.ws.workspace_id)
        .executeTakeFirstOrThrow();
      assert.equal(Number(ws.used_bytes), used, 'quota accounting matches the blobs');
    };

    before(async () => {
      const storage = combo.storage === 's3' ? await freshS3Storage() : { driver: 'local' as const, fsync: true };
      h = await makeHarness(combo.dialect, { config: { storage, publicUrl: 'https://media.example.com' } });
      base = await h.app.listen({ host: '127.0.0.1', port: 0 });
    });
    after(() => h?.close());

    test('a binary file: 201, the complete flat record, stored byte-exact', async () => {
      const data = randomBytes(3 * 1024 * 1024 + 17);
      const res = await upload({
        file: new Blob([data]),
        file_name: 'data.bin',
        custom_id: 'order-42',
        tags: 'a, b,,a',
        metadata: '{"owner":"me","n":1}',
      });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      const r = res.body;
      // Both documented shapes at once: the flat record, and success with data (the record again).
      const { success, data: wrapped, ...flat } = r;
      assert.equal(success, true);
      assert.deepEqual(wrapped, flat);
      assert.deepEqual(Object.keys(flat).sort(), RECORD_FIELDS);
      assert.equal(r.hash, sha(data));
      assert.equal(r.size, data.length);
      assert.equal(r.name, 'data.bin');
      assert.equal(r.path, '/data.bin');
      assert.equal(r.url, `https://media.example.com/${h.ws.workspace_id}/data.bin`);
      assert.equal(r.workspace_id, h.ws.workspace_id);
      assert.equal(r.mime_type, 'application/octet-stream');
      assert.equal(r.width, null);
      assert.equal(r.height, null);
      assert.equal(r.thumbnail, null);
      assert.equal(r.extension, 'bin');
      assert.deepEqual(r.tags, ['a', 'b']);
      assert.deepEqual(r.metadata, { owner: 'me', n: 1 });
      assert.equal(r.custom_id, 'order-42');
      assert.equal(r.folder_no, null);
      assert.equal(r.is_duplicate, false);
      assert.equal(r.is_private, false);
      assert.equal(r.upload_source, 'direct');
      assert.match(r.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      assert.match(r.file_no, /^[0-9A-Za-z]{10,16}$/);
      const blob = await h.services.db.kysely
        .selectFrom('blobs')
        .selectAll()
        .where('sha256', '=', r.hash)
        .executeTakeFirstOrThrow();
      assert.equal(
        sha(await readAll(await h.services.storage.get(blob.storage_key))),
        sha(data),
        'stored bytes are the original bytes',
      );
      await assertConsistent();
    });

    test('an image: type from the bytes, dimensions, a thumbnail URL; the name does not fool detection', async () => {
      const png = await sharp({ create: { width: 320, height: 240, channels: 3, background: '#204080' } })
        .png()
        .toBuffer();
      const res = await upload({ file: new Blob([png]), file_name: 'picture.dat', folder: '/gallery/2026/' });
      assert.equal(res.status, 201);
      assert.equal(res.body.mime_type, 'image/png');
      assert.equal(res.body.format, 'png');
      assert.equal(res.body.width, 320);
      assert.equal(res.body.height, 240);
      assert.equal(res.body.path, '/gallery/2026/picture.dat');
      assert.match(res.body.thumbnail, /\/w_200,h_200,c_fit\/gallery\/2026\/picture\.dat$/);
      assert.match(res.body.folder_no, /^[0-9A-Za-z]{12}$/);
      const folders = await h.services.db.kysely
        .selectFrom('folders')
        .select(['path', 'folder_no'])
        .where('workspace_id', '=', h.ws.workspace_id)
        .orderBy('path')
        .execute();
      assert.deepEqual(
        folders.map((f) => f.path),
        ['gallery', 'gallery/2026'],
      );
      assert.equal(folders[1].folder_no, res.body.folder_no);
      const fake = await upload({ file: new Blob([Buffer.from('just some text, not a jpeg')]), file_name: 'fake.jpg' });
      assert.equal(fake.status, 201);
      assert.notEqual(fake.body.mime_type, 'image/jpeg');
      assert.equal(fake.body.width, null);
    });

    test('identical bytes are stored once per workspace: is_duplicate (shown to a private key), one blob, counted once', async () => {
      const data = randomBytes(200_000);
      const first = await upload({ file: new Blob([data]), file_name: 'one.bin' }, h.ws.private_key);
      const second = await upload({ file: new Blob([data]), file_name: 'two.bin' }, h.ws.private_key);
      assert.equal(first.body.is_duplicate, false);
      assert.equal(second.body.is_duplicate, true);
      assert.equal(second.body.hash, first.body.hash);
      assert.notEqual(second.body.id, first.body.id);
      const blobs = await h.services.db.kysely
        .selectFrom('blobs')
        .selectAll()
        .where('sha256', '=', first.body.hash)
        .execute();
      assert.equal(blobs.length, 1);
      await assertConsistent();
    });

    test('with a private key, the same name in the same folder replaces the content and keeps id and file_no; old bytes are freed', async () => {
      const a = await upload(
        { file: new Blob([randomBytes(50_000)]), file_name: 'report.pdf', folder: 'docs' },
        h.ws.private_key,
      );
      const b = await upload(
        { file: new Blob([Buffer.from('%PDF-1.4 new version')]), file_name: 'report.pdf', folder: 'docs' },
        h.ws.private_key,
      );
      assert.equal(b.status, 201);
      assert.equal(b.body.id, a.body.id);
      assert.equal(b.body.file_no, a.body.file_no);
      assert.notEqual(b.body.hash, a.body.hash);
      assert.equal(b.body.mime_type, 'application/pdf');
      assert.equal(
        await h.services.db.kysely
          .selectFrom('blobs')
          .select('id')
          .where('sha256', '=', a.body.hash)
          .executeTakeFirst(),
        undefined,
        'old blob gone',
      );
      await assertConsistent();
    });

    test('random_prefix=true stores under a new name each time, so names do not collide', async () => {
      const x = await upload({ file: new Blob([randomBytes(10)]), file_name: 'avatar.png', random_prefix: 'true' });
      const y = await upload({ file: new Blob([randomBytes(10)]), file_name: 'avatar.png', random_prefix: 'true' });
      assert.match(x.body.name, /^avatar_[0-9A-Za-z]{8}\.png$/);
      assert.notEqual(x.body.name, y.body.name);
      assert.notEqual(x.body.id, y.body.id);
      const z = await upload({ file: new Blob([randomBytes(10)]), file_name: 'plain.txt', random_prefix: 'false' });
      assert.equal(z.body.name, 'plain.txt');
    });

    test('transform is applied before storing: size, dimensions, format and name are the result', async () => {
      const jpg = await sharp({ create: { width: 1600, height: 1200, channels: 3, background: '#c0ffee' } })
        .jpeg()
        .toBuffer();
      const res = await upload({ file: new Blob([jpg]), file_name: 'hero.jpg', transform: 'w_400,f_png' });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      assert.equal(res.body.width, 400);
      assert.equal(res.body.height, 300);
      assert.equal(res.body.mime_type, 'image/png');
      assert.equal(res.body.name, 'hero.png');
      const blob = await h.services.db.kysely
        .selectFrom('blobs')
        .selectAll()
        .where('sha256', '=', res.body.hash)
        .executeTakeFirstOrThrow();
      const stored = await readAll(await h.services.storage.get(blob.storage_key));
      assert.equal(stored.length, res.body.size);
      const meta = await sharp(stored).metadata();
      assert.deepEqual([meta.format, meta.width, meta.height], ['png', 400, 300]);
      await assertConsistent();
    });

    describe('refusals change nothing', () => {
      let before: { files: number; blobs: number };
      const counts = async () => ({
        files: (await h.services.db.kysely.selectFrom('files').select('id').execute()).length,
        blobs: (await h.services.db.kysely.selectFrom('blobs').select('id').execute()).length,
      });
      const refused = async (fields: Record<string, string | Blob>, status: number, code: string, key?: string) => {
        before = await counts();
        const res = await upload(fields, key);
        assert.equal(res.status, status, JSON.stringify(res.body));
        assert.equal(res.body.success, false);
        assert.equal(res.body.errorCode, code);
        assert.equal(typeof res.body.message, 'string');
        assert.deepEqual(await counts(), before);
        await assertConsistent();
      };
      const some = () => new Blob([randomBytes(1000)]);

      test('missing file, missing file_name', async () => {
        await refused({ file_name: 'x.bin' }, 400, 'FILE_REQUIRED');
        await refused({ file: some() }, 400, 'FILE_NAME_REQUIRED');
      });
      test('path traversal and control characters in file_name and folder', async () => {
        for (const file_name of [
          '../etc/passwd',
          'a/b.txt',
          '..',
          'x\u0000y',
          'tab\there',
          'bell\u0007',
          'rtl\u202eexe.txt',
          'a\\b',
          ' lead.txt',
          'x'.repeat(256),
        ]) {
          await refused({ file: some(), file_name }, 400, 'VALIDATION_FAILED');
        }
        for (const folder of ['../up', 'a/../b', 'a//b', 'ctl\u0001', 'a/./b']) {
          await refused({ file: some(), file_name: 'ok.bin', folder }, 400, 'VALIDATION_FAILED');
        }
      });
      test('metadata that is not a JSON object, bad flags, bad tags, bad transform', async () => {
        for (const metadata of ['{bad', '[1,2]', '"text"', '42', 'null']) {
          if (metadata === 'null') continue;
          await refused({ file: some(), file_name: 'm.bin', metadata }, 400, 'VALIDATION_FAILED');
        }
        await refused({ file: some(), file_name: 'f.bin', random_prefix: 'yes' }, 400, 'VALIDATION_FAILED');
        await refused({ file: some(), file_name: 't.bin', transform: 'w_abc' }, 400, 'VALIDATION_FAILED');
        await refused({ file: some(), file_name: 't.bin', transform: 'w_100,c_stretch' }, 400, 'VALIDATION_FAILED');
        await refused({ file: some(), file_name: 't.bin', transform: 'w_100' }, 400, 'TRANSFORM_NOT_APPLICABLE');
        await refused({ file: some(), file_name: 'w.bin', webhook_url: 'ftp://x' }, 400, 'VALIDATION_FAILED');
      });
      test('two files, or the file in another field', async () => {
        const form = new FormData();
        form.append('file', some(), 'a');
        form.append('file', some(), 'b');
        form.append('file_name', 'two.bin');
        before = await counts();
        const res = await fetch(`${base}/api/v1/uploads`, {
          method: 'POST',
          body: form,
          headers: { 'x-api-key': h.ws.public_key },
        });
        assert.equal(res.status, 400);
        assert.deepEqual(await counts(), before);
        await refused({ document: some(), file_name: 'x.bin' }, 400, 'VALIDATION_FAILED');
        await assertConsistent();
      });
      test('a 50 MB form field is 413', async () => {
        await refused(
          { file: some(), file_name: 'x.bin', metadata: 'x'.repeat(50 * 1024 * 1024) },
          413,
          'FIELD_TOO_LARGE',
        );
      });
      test('no key is 401; JSON instead of a form is 400', async () => {
        const res = await fetch(`${base}/api/v1/uploads`, { method: 'POST', body: new FormData() });
        assert.equal(res.status, 401);
        const json = await fetch(`${base}/api/v1/uploads`, {
          method: 'POST',
          body: '{}',
          headers: { 'x-api-key': h.ws.public_key, 'content-type': 'application/json' },
        });
        assert.equal(json.status, 400);
      });
      test('above the maximum file size: 413; above the quota: 402', async () => {
        const db = h.services.db.kysely;
        await db.updateTable('workspaces').set({ max_file_size: 5000 }).where('id', '=', h.ws.workspace_id).execute();
        await refused({ file: new Blob([randomBytes(6000)]), file_name: 'big.bin' }, 413, 'FILE_TOO_LARGE');
        await db.updateTable('workspaces').set({ max_file_size: null }).where('id', '=', h.ws.workspace_id).execute();
        const used = Number(
          (
            await db
              .selectFrom('workspaces')
              .select('used_bytes')
              .where('id', '=', h.ws.workspace_id)
              .executeTakeFirstOrThrow()
          ).used_bytes,
        );
        await db
          .updateTable('workspaces')
          .set({ quota_bytes: used + 3000 })
          .where('id', '=', h.ws.workspace_id)
          .execute();
        await refused({ file: new Blob([randomBytes(4000)]), file_name: 'over.bin' }, 402, 'STORAGE_LIMIT_EXCEEDED');
        const fits = await upload({ file: new Blob([randomBytes(2000)]), file_name: 'fits.bin' });
        assert.equal(fits.status, 201);
        await refused({ file: new Blob([randomBytes(2000)]), file_name: 'full.bin' }, 402, 'STORAGE_LIMIT_EXCEEDED');
        await db.updateTable('workspaces').set({ quota_bytes: null }).where('id', '=', h.ws.workspace_id).execute();
      });
    });
  });
}
