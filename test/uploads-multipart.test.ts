// Multipart uploads (docs/api/uploads.md#multipart-upload) on local disk and S3:
// byte-exact results, every documented refusal, resume after a restart, and the sweeper.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { xxh3 } from '@node-rs/xxhash';
import { buildApp } from '../src/app.ts';
import { PartUrlSigner } from '../src/crypto/part-url.ts';
import { createServices } from '../src/services/container.ts';
import { partSizeFor } from '../src/uploads/multipart/part-layout.ts';
import { recordAssembled } from '../src/uploads/multipart/record.ts';
import type { MultipartStorage, StorageDriver } from '../src/storage/driver.ts';
import { type Harness, makeHarness } from './helpers/harness.ts';
import { freshS3Storage, UPLOAD_MATRIX } from './helpers/storage.ts';

const MiB = 1024 * 1024;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const SESSION_FIELDS = [
  'expire_at',
  'min_part_size',
  'part_size',
  'parts',
  'policy',
  'public_key',
  'session_id',
  'uuid',
  'workspace_id',
];

test('part size: 8 MiB, growing in whole MiB so that no file needs over 10,000 parts', () => {
  assert.equal(partSizeFor(1), 8 * MiB);
  assert.equal(partSizeFor(80_000 * MiB), 8 * MiB);
  assert.equal(partSizeFor(80_001 * MiB), 9 * MiB);
  for (const size of [1e9, 1e11, 5 * 1024 ** 4, 9007199254740991]) {
    const p = partSizeFor(size);
    assert.equal(p % MiB, 0);
    assert.ok(Math.ceil(size / p) <= 10_000, `${size}`);
  }
});

for (const combo of UPLOAD_MATRIX) {
  describe(`multipart upload on ${combo.name}`, { skip: combo.skip }, () => {
    let h: Harness;
    let base: string;
    const post = async (path: string, body: unknown, key = h.ws.public_key) => {
      const res = await fetch(`${base}${path}`, {
        method: 'POST',
        body: JSON.stringify(body),
        headers: { 'content-type': 'application/json', 'x-api-key': key },
      });
      return { status: res.status, body: (await res.json()) as any };
    };
    const start = (body: Record<string, unknown>, key?: string) =>
      post('/api/v1/multipart/start', { format: 'application/octet-stream', ...body }, key);
    const put = async (
      url: string,
      body: Buffer,
      headers: Record<string, string> = { 'content-type': 'application/octet-stream' },
    ) => {
      const res = await fetch(url, { method: 'PUT', body: new Blob([new Uint8Array(body)]), headers });
      return { status: res.status, etag: res.headers.get('etag'), text: await res.text() };
    };
    const slice = (data: Buffer, partSize: number, n: number) => data.subarray((n - 1) * partSize, n * partSize);
    const get = async (path: string, key = h.ws.public_key, method = 'GET') => {
      const res = await fetch(`${base}${path}`, { method, headers: { 'x-api-key': key } });
      return { status: res.status, body: (await res.json()) as any };
    };

    before(async () => {
      const storage = combo.storage === 's3' ? await freshS3Storage() : { driver: 'local' as const, fsync: true };
      h = await makeHarness(combo.dialect, { config: { storage } });
      base = await h.app.listen({ host: '127.0.0.1', port: 0 });
      // Part URLs for local storage point at the service's public URL.
      (h.services.multipart as any).settings.publicUrl = base;
    });
    after(() => h?.close());

    test('start answers 201 with exactly the session of 2.1; policy echoes; ttl is clamped', async () => {
      const res = await start({
        file_name: 'clip.mp4',
        size: 20 * MiB + 5,
        format: 'video/mp4',
        ttl_seconds: 9007199254740991,
      });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      const s = res.body;
      assert.deepEqual(Object.keys(s).sort(), SESSION_FIELDS);
      assert.equal(s.part_size, 8 * MiB);
      assert.equal(s.min_part_size, 5 * MiB);
      assert.equal(s.parts.length, 3);
      assert.ok(s.parts.every((u: string) => /^https?:\/\//.test(u)));
      assert.deepEqual(s.policy, { folder: '', tags: [], size: 20 * MiB + 5, format: 'video/mp4' });
      assert.equal(s.workspace_id, h.ws.workspace_id);
      assert.equal(s.public_key, h.ws.public_key);
      assert.match(s.uuid, /^[0-9a-f-]{36}$/);
      const week = Math.floor(Date.now() / 1000) + 7 * 24 * 3600;
      assert.ok(s.expire_at <= week + 2 && s.expire_at >= week - 5, 'clamped to the maximum, and says so');
      const small = await start(
        { file_name: 'tiny.txt', size: 10, folder: 'a/b', tags: 'x,y', ttl_seconds: 60 },
        h.ws.private_key,
      );
      assert.equal(small.body.parts.length, 1);
      assert.deepEqual(small.body.policy, {
        folder: 'a/b',
        tags: ['x', 'y'],
        size: 10,
        format: 'application/octet-stream',
      });
      assert.ok(!small.body.public_key.includes(h.ws.private_key.slice(7, 20)), 'a private key is never echoed');
      assert.match(small.body.public_key, /^stw_pk_…/);
    });

    test('parts in order: complete returns the record, byte-exact; completing again returns the same record', async () => {
      const data = randomBytes(17 * MiB + 333);
      const s = (
        await start({
          file_name: 'in-order.bin',
          size: data.length,
          folder: 'mp',
          tags: ['t1'],
          metadata: { k: 'v' },
          custom_id: 'c-1',
        })
      ).body;
      for (let n = 1; n <= s.parts.length; n++) {
        const r = await put(s.parts[n - 1], slice(data, s.part_size, n));
        assert.equal(r.status, 200, r.text);
        // A content hash of the part: local storage, XXH3-64; S3, its MD5.
        const part = slice(data, s.part_size, n);
        const expected =
          combo.storage === 'local'
            ? xxh3.xxh64(part).toString(16).padStart(16, '0')
            : createHash('md5').update(part).digest('hex');
        assert.equal(r.etag, `"${expected}"`, `part ${n}`);
      }
      const done = await post('/api/v1/multipart/complete', { session_id: s.session_id, uuid: s.uuid });
      assert.equal(done.status, 200, JSON.stringify(done.body));
      const r = done.body;
      assert.equal(r.hash, sha(data));
      assert.equal(r.size, data.length);
      assert.equal(r.upload_source, 'multipart');
      assert.equal(r.path, '/mp/in-order.bin');
      assert.deepEqual(r.tags, ['t1']);
      assert.deepEqual(r.metadata, { k: 'v' });
      assert.equal(r.custom_id, 'c-1');
      const blob = await h.services.db.kysely
        .selectFrom('blobs')
        .selectAll()
        .where('sha256', '=', r.hash)
        .executeTakeFirstOrThrow();
      const stored = createHash('sha256');
      for await (const c of await h.services.storage.get(blob.storage_key)) stored.update(c as Buffer);
      assert.equal(stored.digest('hex'), sha(data));
      const again = await post('/api/v1/multipart/complete', { session_id: s.session_id });
      assert.deepEqual(again.body, r);
      const status = await get(`/api/v1/multipart/${s.session_id}`);
      assert.equal(status.body.data.status, 'completed');
    });

    test('parts out of order, one re-uploaded: the file is still exact', async () => {
      const data = randomBytes(2 * 8 * MiB + 1000);
      const s = (await start({ file_name: 'shuffled.bin', size: data.length, random_prefix: true })).body;
      await put(s.parts[2], slice(data, s.part_size, 3));
      await put(s.parts[0], randomBytes(s.part_size));
      await put(s.parts[1], slice(data, s.part_size, 2));
      await put(s.parts[0], slice(data, s.part_size, 1));
      const done = await post('/api/v1/multipart/complete', { session_id: s.session_id });
      assert.equal(done.status, 200, JSON.stringify(done.body));
      assert.equal(done.body.hash, sha(data));
      assert.match(done.body.name, /^[0-9A-Za-z]{8}_shuffled\.bin$/);
    });

    test('complete before all parts: 409 naming the missing parts; then it completes', async () => {
      const data = randomBytes(3 * 8 * MiB + 10);
      const s = (await start({ file_name: 'partial.bin', size: data.length })).body;
      await put(s.parts[0], slice(data, s.part_size, 1));
      await put(s.parts[2], slice(data, s.part_size, 3));
      const early = await post('/api/v1/multipart/complete', { session_id: s.session_id });
      assert.equal(early.status, 409);
      assert.equal(early.body.errorCode, 'UPLOAD_INCOMPLETE');
      assert.match(early.body.message, /Missing parts: 2, 4$/);
      const status = await get(`/api/v1/multipart/${s.session_id}`);
      assert.equal(status.status, 200);
      assert.deepEqual(
        status.body.data.uploaded_parts.map((p: any) => p.part_number),
        [1, 3],
      );
      assert.equal(status.body.data.status, 'active');
      await put(s.parts[1], slice(data, s.part_size, 2));
      await put(s.parts[3], slice(data, s.part_size, 4));
      const wrongEtag = await post('/api/v1/multipart/complete', {
        session_id: s.session_id,
        parts: [{ part_number: 1, etag: '"0000"' }],
      });
      assert.equal(wrongEtag.status, 409);
      const done = await post('/api/v1/multipart/complete', { session_id: s.session_id });
      assert.equal(done.body.hash, sha(data));
    });

    test('a completer that died after storage assembled the file: the sweeper finishes it into the record', async () => {
      const data = randomBytes(8 * MiB + 321);
      const s = (await start({ file_name: 'orphan-complete.bin', size: data.length })).body;
      for (const n of [1, 2]) assert.equal((await put(s.parts[n - 1], slice(data, s.part_size, n))).status, 200);
      // What a crash leaves: the session claimed, the object assembled, no record written.
      const row = await h.services.db.kysely
        .selectFrom('multipart_sessions')
        .selectAll()
        .where('id', '=', s.session_id)
        .executeTakeFirstOrThrow();
      const storage = h.services.storage as StorageDriver & MultipartStorage;
      await storage.completeMultipart(
        row.storage_key,
        row.upload_id,
        await storage.listParts(row.storage_key, row.upload_id),
      );
      await h.services.db.kysely
        .updateTable('multipart_sessions')
        .set({ status: 'completing', updated_at: new Date(Date.now() - 10 * 60_000).toISOString() })
        .where('id', '=', s.session_id)
        .execute();
      const swept = await h.services.multipart.sweep();
      assert.ok(swept.finished >= 1, JSON.stringify(swept));
      const after = await h.services.db.kysely
        .selectFrom('multipart_sessions')
        .selectAll()
        .where('id', '=', s.session_id)
        .executeTakeFirstOrThrow();
      assert.equal(after.status, 'completed');
      const done = await post('/api/v1/multipart/complete', { session_id: s.session_id });
      assert.equal(done.status, 200);
      assert.equal(done.body.hash, sha(data));
      assert.equal(
        (
          await h.services.db.kysely
            .selectFrom('storage_intents')
            .selectAll()
            .where('storage_key', '=', row.storage_key)
            .execute()
        ).length,
        0,
        'its intent is gone',
      );
    });

    test('two completers writing the record at once: one record, and the bytes stay', async () => {
      const data = randomBytes(6 * MiB + 11);
      const s = (await start({ file_name: 'raced.bin', size: data.length })).body;
      assert.equal((await put(s.parts[0], data)).status, 200);
      const row = await h.services.db.kysely
        .selectFrom('multipart_sessions')
        .selectAll()
        .where('id', '=', s.session_id)
        .executeTakeFirstOrThrow();
      const storage = h.services.storage as StorageDriver & MultipartStorage;
      await storage.completeMultipart(
        row.storage_key,
        row.upload_id,
        await storage.listParts(row.storage_key, row.upload_id),
      );
      await h.services.db.kysely
        .updateTable('multipart_sessions')
        .set({ status: 'completing' })
        .where('id', '=', s.session_id)
        .execute();
      const record = (session: any) => recordAssembled((h.services.multipart as any).ctx, session);
      const [a, b] = await Promise.all([
        record({ ...row, status: 'completing' }),
        record({ ...row, status: 'completing' }),
      ]);
      assert.equal(a.file_no, b.file_no);
      assert.equal(a.hash, sha(data));
      assert.equal(
        (await h.services.db.kysely.selectFrom('files').selectAll().where('name', '=', 'raced.bin').execute()).length,
        1,
      );
      assert.ok(await storage.stat(row.storage_key), "the loser did not delete the winner's bytes");
    });

    test('expired: complete is 410, and the sweeper frees the parts', async () => {
      const s = (await start({ file_name: 'late.bin', size: 6 * MiB })).body;
      await put(s.parts[0], randomBytes(6 * MiB));
      await h.services.db.kysely
        .updateTable('multipart_sessions')
        .set({ expire_at: Math.floor(Date.now() / 1000) - 10 })
        .where('id', '=', s.session_id)
        .execute();
      const res = await post('/api/v1/multipart/complete', { session_id: s.session_id });
      assert.equal(res.status, 410);
      assert.equal(res.body.errorCode, 'SESSION_EXPIRED');
      assert.equal((await get(`/api/v1/multipart/${s.session_id}`)).body.data.status, 'expired');
      const hashes = (h.services.multipart as any).hashes;
      const before = hashes.size;
      const swept = await h.services.multipart.sweep();
      assert.ok(swept.expired >= 1);
      if (combo.storage === 'local')
        assert.ok(hashes.size < before, 'the running hash of the expired session is dropped');
      const row = await h.services.db.kysely
        .selectFrom('multipart_sessions')
        .selectAll()
        .where('id', '=', s.session_id)
        .executeTakeFirstOrThrow();
      assert.equal(row.status, 'expired');
      await assert.rejects(
        (h.services.storage as StorageDriver & MultipartStorage).listParts(row.storage_key, row.upload_id),
        'parts are gone',
      );
      assert.equal(
        await h.services.db.kysely
          .selectFrom('storage_intents')
          .select('storage_key')
          .where('storage_key', '=', row.storage_key)
          .executeTakeFirst(),
        undefined,
      );
    });

    test('abort frees the parts; afterwards parts, complete and abort answer 404', async () => {
      const s = (await start({ file_name: 'gone.bin', size: 6 * MiB })).body;
      await put(s.parts[0], randomBytes(6 * MiB));
      const res = await get(`/api/v1/multipart/${s.session_id}`, h.ws.public_key, 'DELETE');
      assert.deepEqual(res.body, { success: true });
      const row = await h.services.db.kysely
        .selectFrom('multipart_sessions')
        .selectAll()
        .where('id', '=', s.session_id)
        .executeTakeFirstOrThrow();
      assert.equal(row.status, 'aborted');
      await assert.rejects(
        (h.services.storage as StorageDriver & MultipartStorage).listParts(row.storage_key, row.upload_id),
      );
      assert.equal((await post('/api/v1/multipart/complete', { session_id: s.session_id })).status, 404);
      if (combo.storage === 'local') assert.equal((await put(s.parts[0], randomBytes(6 * MiB))).status, 404);
    });

    test('another workspace cannot see, complete or abort a session', async () => {
      const other = await h.services.workspaces.create('Other');
      const s = (await start({ file_name: 'mine.bin', size: 10 })).body;
      await put(s.parts[0], randomBytes(10));
      assert.equal(
        (await post('/api/v1/multipart/complete', { session_id: s.session_id }, other.private_key)).status,
        404,
      );
      assert.equal((await get(`/api/v1/multipart/${s.session_id}`, other.public_key)).status, 404);
      assert.equal((await get(`/api/v1/multipart/${s.session_id}`, other.public_key, 'DELETE')).status, 404);
      assert.equal((await post('/api/v1/multipart/complete', { session_id: s.session_id })).status, 200);
    });

    test('start refusals: 400 for bad input, 413 above the maximum size, 402 over quota, 401 without a key', async () => {
      const bad: Record<string, unknown>[] = [
        { file_name: 'x', size: 0 },
        { file_name: 'x', size: 9007199254740992 },
        { file_name: 'x', size: 1.5 },
        { file_name: 'x', size: '10' },
        { file_name: '', size: 10 },
        { file_name: '../x', size: 10 },
        { file_name: 'x', size: 10, metadata: 'not an object' },
        { file_name: 'x', size: 10, metadata: [1] },
        { file_name: 'x', size: 10, ttl_seconds: 0 },
        { file_name: 'x', size: 10, folder: 'a/../b' },
        { file_name: 'x', size: 10, format: '' },
      ];
      const sessions = async () =>
        (await h.services.db.kysely.selectFrom('multipart_sessions').select('id').execute()).length;
      const before = await sessions();
      for (const body of bad) {
        const res = await start(body);
        assert.equal(res.status, 400, JSON.stringify(body));
        assert.equal(res.body.success, false);
        assert.equal(typeof res.body.error, 'string');
      }
      assert.equal(
        (await post('/api/v1/multipart/start', { file_name: 'x', size: 10 })).status,
        400,
        'format is required',
      );
      const db = h.services.db.kysely;
      await db.updateTable('workspaces').set({ max_file_size: 1000 }).where('id', '=', h.ws.workspace_id).execute();
      const big = await start({ file_name: 'big.bin', size: 1001 });
      assert.equal(big.status, 413);
      await db
        .updateTable('workspaces')
        .set({ max_file_size: null, quota_bytes: 1 })
        .where('id', '=', h.ws.workspace_id)
        .execute();
      const over = await start({ file_name: 'over.bin', size: 10 * MiB });
      assert.equal(over.status, 402);
      assert.equal(over.body.errorCode, 'STORAGE_LIMIT_EXCEEDED');
      await db.updateTable('workspaces').set({ quota_bytes: null }).where('id', '=', h.ws.workspace_id).execute();
      const res = await fetch(`${base}/api/v1/multipart/start`, {
        method: 'POST',
        body: '{}',
        headers: { 'content-type': 'application/json' },
      });
      assert.equal(res.status, 401);
      assert.equal(await sessions(), before, 'no refused start left a session');
    });

    if (combo.storage === 'local') {
      test('part URLs: tampered 403, expired 403, wrong type 400, wrong length 400, other session 404', async () => {
        const s = (await start({ file_name: 'guarded.bin', size: 6 * MiB })).body;
        const url = new URL(s.parts[0]);
        const part = randomBytes(6 * MiB);
        const tampered = new URL(url);
        tampered.searchParams.set('length', String(5 * MiB));
        assert.equal((await put(tampered.toString(), part.subarray(0, 5 * MiB))).status, 403);
        const sig = new URL(url);
        sig.searchParams.set(
          'signature',
          sig.searchParams.get('signature')!.replace(/^./, (c) => (c === 'A' ? 'B' : 'A')),
        );
        assert.equal((await put(sig.toString(), part)).status, 403);
        const otherPart = new URL(url.toString().replace('/parts/1?', '/parts/2?'));
        assert.equal((await put(otherPart.toString(), part)).status, 403);
        const signer = new PartUrlSigner(h.config.masterKey);
        const expired = signer.url(base, s.session_id, 1, 6 * MiB, Math.floor(Date.now() / 1000) - 1);
        const e = await put(expired, part);
        assert.equal(e.status, 403);
        assert.match(e.text, /URL_EXPIRED/);
        const ghost = signer.url(base, 'A'.repeat(24), 1, 6 * MiB, Math.floor(Date.now() / 1000) + 60);
        assert.equal((await put(ghost, part)).status, 404);
        assert.equal((await put(s.parts[0], part, { 'content-type': 'text/plain' })).status, 400);
        assert.equal((await put(s.parts[0], part, {})).status, 400);
        assert.equal((await put(s.parts[0], part.subarray(0, 100))).status, 400);
        assert.equal((await put(s.parts[0], Buffer.concat([part, Buffer.alloc(10)]))).status, 400);
        assert.deepEqual(
          (await get(`/api/v1/multipart/${s.session_id}`)).body.data.uploaded_parts,
          [],
          'nothing was recorded',
        );
        assert.equal((await put(s.parts[0], part)).status, 200);
      });

      test('complete reads no file back when parts came in order, or 4 at a time; it does after a re-upload', async () => {
        const storage = h.services.storage;
        const original = storage.get.bind(storage);
        let fullReads = 0;
        storage.get = async (key, range) => {
          if (!range) fullReads++;
          return original(key, range);
        };
        try {
          const upload = async (order: 'sequential' | 'parallel' | 'reupload') => {
            const data = randomBytes(6 * 8 * MiB + 99);
            const s = (await start({ file_name: `${order}.bin`, size: data.length })).body;
            const numbers = s.parts.map((_: string, i: number) => i + 1);
            if (order === 'parallel') {
              const queue = [...numbers];
              await Promise.all(
                [1, 2, 3, 4].map(async () => {
                  for (let n = queue.shift(); n !== undefined; n = queue.shift())
                    assert.equal((await put(s.parts[n - 1], slice(data, s.part_size, n))).status, 200);
                }),
              );
            } else {
              for (const n of numbers) await put(s.parts[n - 1], slice(data, s.part_size, n));
              if (order === 'reupload') await put(s.parts[1], slice(data, s.part_size, 2));
            }
            fullReads = 0;
            const done = await post('/api/v1/multipart/complete', { session_id: s.session_id });
            assert.equal(done.body.hash, sha(data), order);
            return fullReads;
          };
          assert.equal(await upload('sequential'), 0, 'in order: no re-read');
          assert.equal(await upload('parallel'), 0, '4 in flight: no re-read at complete');
          assert.equal(
            await upload('reupload'),
            1,
            'a re-uploaded part: the file is read once, and the hash is still right',
          );
        } finally {
          storage.get = original;
        }
      });

      test('a session survives a restart: parts before and after, then complete', async () => {
        const data = randomBytes(2 * 8 * MiB + 77);
        const s = (await start({ file_name: 'restart.bin', size: data.length })).body;
        await put(s.parts[0], slice(data, s.part_size, 1));
        // A second process over the same database and storage: nothing is held in memory.
        const services2 = await createServices(h.config);
        const app2 = await buildApp(services2, { logger: false });
        const base2 = await app2.listen({ host: '127.0.0.1', port: 0 });
        try {
          const rewritten = s.parts.map((u: string) => u.replace(/^https?:\/\/[^/]+/, base2));
          await put(rewritten[1], slice(data, s.part_size, 2));
          await put(rewritten[2], slice(data, s.part_size, 3));
          const res = await fetch(`${base2}/api/v1/multipart/complete`, {
            method: 'POST',
            body: JSON.stringify({ session_id: s.session_id }),
            headers: { 'content-type': 'application/json', 'x-api-key': h.ws.public_key },
          });
          const record = (await res.json()) as any;
          assert.equal(res.status, 200);
          assert.equal(record.hash, sha(data));
        } finally {
          await app2.close();
          await services2.close();
        }
      });
    } else {
      test('presigned S3 part URLs are bound to their length', async () => {
        const s = (await start({ file_name: 's3-bound.bin', size: 6 * MiB })).body;
        const short = await put(s.parts[0], randomBytes(5 * MiB));
        assert.ok(short.status >= 400, `storage refused a part of another length (${short.status})`);
        assert.equal((await put(s.parts[0], randomBytes(6 * MiB))).status, 200);
      });
    }

    test('storage and database agree after everything', async () => {
      await h.services.multipart.sweep(0);
      const db = h.services.db.kysely;
      const blobs = await db.selectFrom('blobs').selectAll().execute();
      const keys: string[] = [];
      for await (const o of h.services.storage.list('')) keys.push(o.key);
      assert.deepEqual(keys.sort(), blobs.map((b) => b.storage_key).sort());
      const active = await db
        .selectFrom('multipart_sessions')
        .select('storage_key')
        .where('status', '=', 'active')
        .execute();
      const intents = await db.selectFrom('storage_intents').select('storage_key').execute();
      assert.deepEqual(
        intents.map((i) => i.storage_key).sort(),
        active.map((a) => a.storage_key).sort(),
        'only live sessions hold intents',
      );
    });
  });
}
