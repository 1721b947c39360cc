// tus 1.0 at /api/v1/tus (src/http/routes/tus.ts, src/uploads/tus/store.ts): tus-js-client in
// Node uploads byte-exact and resumes after its connection is cut; the record is readable; and
// every limit of the other upload paths holds, tried from an attacker's side.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import * as tus from 'tus-js-client';
import type { StorageConfig } from '../src/config.ts';
import { AzureStorage } from '../src/storage/azure.ts';
import { startFakeGcs } from './helpers/fake-gcs.ts';
import { DIALECTS, type DialectName, type Harness, makeHarness } from './helpers/harness.ts';
import { externalService } from './helpers/services.ts';
import { freshS3Storage, UPLOAD_MATRIX } from './helpers/storage.ts';

const MiB = 1024 * 1024;
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const b64 = (s: string) => Buffer.from(s).toString('base64');

const azure = externalService('STOWAGE_TEST_AZURE_CONNECTION_STRING', 'Azurite (scripts/start-azurite.sh)');

/**
 * Every back end with multipart parts through the service (the capability tus needs): local
 * disk on both databases, S3 through Swift (which checks part sizes as S3 does), Azure through
 * Azurite, and GCS through the in-process fake of its JSON API (a mock; no emulator runs here).
 */
const TUS_MATRIX: {
  name: string;
  dialect: DialectName;
  skip: string | false;
  open(): Promise<{ storage: StorageConfig; close(): Promise<void> }>;
}[] = [
  ...UPLOAD_MATRIX.filter((c) => c.storage === 'local').map((c) => ({
    ...c,
    open: async () => ({ storage: { driver: 'local' as const, fsync: false }, close: async () => {} }),
  })),
  {
    name: 'S3 (Swift) + SQLite',
    dialect: 'sqlite',
    skip: UPLOAD_MATRIX.find((c) => c.storage === 's3')!.skip,
    open: async () => ({ storage: await freshS3Storage(), close: async () => {} }),
  },
  {
    name: 'Azure (Azurite) + SQLite',
    dialect: 'sqlite',
    skip: azure.skip,
    async open() {
      const settings = { connectionString: azure.value!, container: `tus-${randomBytes(4).toString('hex')}` };
      const admin = new AzureStorage(settings);
      await admin.container.create();
      return {
        storage: { driver: 'azure', azure: settings },
        close: async () => void (await admin.container.deleteIfExists()),
      };
    },
  },
  {
    name: 'GCS (in-process fake of its JSON API) + PostgreSQL',
    dialect: 'postgres',
    skip: DIALECTS[1].skip,
    async open() {
      const fake = await startFakeGcs({ buckets: ['media'] });
      return {
        storage: { driver: 'gcs', gcs: { bucket: 'media', apiEndpoint: fake.url, projectId: 'test' } },
        close: () => fake.close(),
      };
    },
  },
];

for (const combo of TUS_MATRIX) {
  describe(`tus on ${combo.name}`, { skip: combo.skip }, () => {
    let h: Harness;
    let base: string;
    let endpoint: string;
    let closeStore = async () => {};

    before(async () => {
      const store = await combo.open();
      closeStore = store.close;
      h = await makeHarness(combo.dialect, { config: { storage: store.storage } });
      base = await h.app.listen({ host: '127.0.0.1', port: 0 });
      // Location is built from the public URL, which the harness learns only now.
      (h.services.config as { publicUrl: string }).publicUrl = base;
      endpoint = `${base}/api/v1/tus`;
    });
    after(async () => {
      await h?.close();
      await closeStore();
    });

    /** Tail and checksum objects the store keeps beside the session of the upload at `url`. */
    const tusLeftovers = async (url: string) => {
      const row = await h.services.db.kysely
        .selectFrom('multipart_sessions')
        .select('storage_key')
        .where('id', '=', url.split('/').pop()!.slice(0, 24))
        .executeTakeFirstOrThrow();
      const keys: string[] = [];
      for await (const o of h.services.storage.list(`${row.storage_key}.tus-`)) keys.push(o.key);
      return keys;
    };

    /** Uploads with tus-js-client; resolves with the upload URL and the last answer's headers. */
    const clientUpload = (
      data: Buffer,
      opts: Partial<tus.UploadOptions> & { key?: string } = {},
    ): Promise<{ url: string; headers: Record<string, string | undefined> }> =>
      new Promise((resolve, reject) => {
        const headers: Record<string, string | undefined> = {};
        const upload = new tus.Upload(data, {
          endpoint,
          headers: { 'x-api-key': opts.key ?? h.ws.public_key },
          metadata: { filename: 'clip.bin', filetype: 'application/octet-stream' },
          retryDelays: [],
          ...opts,
          onAfterResponse: (_req, res) => {
            for (const name of ['x-file-no', 'x-file-id', 'upload-offset', 'upload-expires'])
              headers[name] = res.getHeader(name);
          },
          onError: reject,
          onSuccess: () => resolve({ url: upload.url!, headers }),
        });
        upload.start();
      });

    const tusHeaders = (extra: Record<string, string> = {}, key = h.ws.public_key) => ({
      'tus-resumable': '1.0.0',
      'x-api-key': key,
      ...extra,
    });
    const create = async (length: number, extra: Record<string, string> = {}, key?: string) => {
      const res = await fetch(endpoint, {
        method: 'POST',
        headers: tusHeaders(
          { 'upload-length': String(length), 'upload-metadata': `filename ${b64('raw.bin')}`, ...extra },
          key,
        ),
      });
      return { status: res.status, url: res.headers.get('location'), headers: res.headers, text: await res.text() };
    };
    const patch = async (
      url: string,
      offset: number,
      body: Buffer,
      extra: Record<string, string> = {},
      key?: string,
    ) => {
      const res = await fetch(url, {
        method: 'PATCH',
        headers: tusHeaders(
          { 'upload-offset': String(offset), 'content-type': 'application/offset+octet-stream', ...extra },
          key,
        ),
        body: new Uint8Array(body),
      });
      return {
        status: res.status,
        offset: res.headers.get('upload-offset'),
        headers: res.headers,
        text: await res.text(),
      };
    };
    const head = async (url: string, key?: string) => {
      const res = await fetch(url, { method: 'HEAD', headers: tusHeaders({}, key) });
      return { status: res.status, offset: res.headers.get('upload-offset'), headers: res.headers };
    };
    const reserved = async () =>
      Number(
        (
          await h.services.db.kysely
            .selectFrom('workspaces')
            .select('reserved_bytes')
            .where('id', '=', h.ws.workspace_id)
            .executeTakeFirstOrThrow()
        ).reserved_bytes,
      );
    test('tus-js-client uploads byte-exact in chunks that cut across parts; the record comes back', async () => {
      const data = randomBytes(19 * MiB + 12345);
      const { url, headers } = await clientUpload(data, {
        chunkSize: 5 * MiB,
        metadata: {
          filename: 'clip.bin',
          filetype: 'video/mp4',
          folder: 'tus/in',
          tags: 'a,b',
          metadata: JSON.stringify({ shot: 3 }),
        },
      });
      assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\/api\/v1\/tus\/[0-9A-Za-z]{24}-[A-Za-z0-9_-]{22}$/);
      assert.match(headers['x-file-no'] ?? '', /^[0-9A-Za-z]+$/);
      const got = await fetch(url, { headers: tusHeaders() });
      assert.equal(got.status, 200);
      const record = (await got.json()) as any;
      assert.equal(String(record.file_no), headers['x-file-no']);
      assert.equal(record.id, headers['x-file-id']);
      assert.equal(record.name, 'clip.bin');
      assert.equal(record.size, data.length);
      assert.equal(record.path, '/tus/in/clip.bin');
      assert.equal(record.hash, sha256(data));
      assert.deepEqual(record.tags, ['a', 'b']);
      assert.deepEqual(record.metadata, { shot: 3 });
      const delivered = await fetch(record.url.replace(/^https?:\/\/[^/]+/, base));
      assert.equal(delivered.status, 200);
      assert.equal(sha256(Buffer.from(await delivered.arrayBuffer())), sha256(data));
      const h1 = await head(url);
      assert.equal(h1.status, 200);
      assert.equal(h1.offset, String(data.length));
      assert.equal(h1.headers.get('x-file-no'), headers['x-file-no']);
      // No tail or check object is left beside the blob.
      assert.deepEqual(await tusLeftovers(url), []);
      assert.equal(await reserved(), 0);
    });

    test('resume: a client cut off mid-upload, and a new one with the upload URL, continue from the offset', async () => {
      const data = randomBytes(21 * MiB + 7);
      const url = await new Promise<string>((resolve, reject) => {
        const first: tus.Upload = new tus.Upload(data, {
          endpoint,
          headers: { 'x-api-key': h.ws.public_key },
          metadata: { filename: 'resumed.bin' },
          chunkSize: 3 * MiB,
          retryDelays: [],
          onProgress: (sent) => {
            if (sent > 11 * MiB && first.url) {
              first.abort().then(() => resolve(first.url!), reject);
            }
          },
          onError: reject,
          onSuccess: () => reject(new Error('should have been cut off')),
        });
        first.start();
      });
      const mid = await head(url);
      assert.equal(mid.status, 200);
      const at = Number(mid.offset);
      assert.ok(at > 0 && at < data.length, `offset ${at}`);
      const offsets: number[] = [];
      const { headers } = await clientUpload(data, {
        uploadUrl: url,
        chunkSize: 4 * MiB,
        onBeforeRequest: (req) => {
          if (req.getMethod() === 'PATCH') offsets.push(Number(req.getHeader('Upload-Offset')));
        },
      });
      assert.equal(offsets[0], at, 'the second client starts where the server says');
      const record = (await (await fetch(url, { headers: tusHeaders() })).json()) as any;
      assert.equal(String(record.file_no), headers['x-file-no']);
      const delivered = await fetch(record.url.replace(/^https?:\/\/[^/]+/, base));
      assert.equal(sha256(Buffer.from(await delivered.arrayBuffer())), sha256(data));
    });

    test('a token uploads one file: its policy names it; the token cannot start a second upload', async () => {
      const minted = (await (
        await fetch(`${base}/api/v1/generate-token`, {
          method: 'POST',
          headers: { ...h.auth, 'content-type': 'application/json' },
          body: JSON.stringify({ file_name: 'from-token.bin', folder: 'tok' }),
        })
      ).json()) as any;
      const token = minted.token as string;
      const data = randomBytes(300_000);
      const { headers } = await clientUpload(data, { headers: { authorization: `Bearer ${token}` } });
      assert.match(headers['x-file-no'] ?? '', /^[0-9A-Za-z]+$/);
      const again = await fetch(endpoint, {
        method: 'POST',
        headers: { 'tus-resumable': '1.0.0', 'upload-length': '10', authorization: `Bearer ${token}` },
      });
      assert.equal(again.status, 401);
      assert.equal(((await again.json()) as any).errorCode, 'TOKEN_USED');
    });

    test('a token or a key of another workspace cannot see, write or end an upload', async () => {
      const other = await h.services.workspaces.create('Other');
      const c = await create(1000);
      assert.equal(c.status, 201);
      const url = c.url!;
      assert.equal((await head(url, other.public_key)).status, 404);
      assert.equal((await patch(url, 0, Buffer.alloc(10), {}, other.private_key)).status, 404);
      const del = await fetch(url, { method: 'DELETE', headers: tusHeaders({}, other.private_key) });
      assert.equal(del.status, 404);
      // A token of the same workspace is not the upload's creator either.
      const minted = (await (
        await fetch(`${base}/api/v1/generate-token`, {
          method: 'POST',
          headers: { ...h.auth, 'content-type': 'application/json' },
          body: JSON.stringify({ file_name: 'x.bin' }),
        })
      ).json()) as any;
      assert.equal((await head(url, minted.token)).status, 404);
      // A made-up tag on a real session id is not found either.
      assert.equal((await head(`${url.slice(0, -22)}${'A'.repeat(22)}`, minted.token)).status, 404);
      assert.equal((await head(url, 'stw_pk_nope')).status, 401);
      assert.equal((await head(url)).offset, '0');
    });

    test('creation-with-upload: four at once, each finished in its POST, none cancelling another', async () => {
      const bodies = [1, 2, 3, 4].map((i) => randomBytes(i * 700_000));
      const answers = await Promise.all(
        bodies.map((body) =>
          fetch(endpoint, {
            method: 'POST',
            headers: tusHeaders({
              'upload-length': String(body.length),
              'upload-metadata': `filename ${b64('whole.bin')}`,
              'content-type': 'application/offset+octet-stream',
            }),
            body: new Uint8Array(body),
          }),
        ),
      );
      for (const [i, res] of answers.entries()) {
        assert.equal(res.status, 201);
        assert.equal(res.headers.get('upload-offset'), String(bodies[i].length));
        assert.match(res.headers.get('x-file-no') ?? '', /^[0-9A-Za-z]+$/);
        const record = (await (await fetch(res.headers.get('location')!, { headers: tusHeaders() })).json()) as any;
        assert.equal(record.hash, sha256(bodies[i]));
      }
    });

    test('Upload-Offset that lies is 409; a body longer than declared is 413; nothing is kept of either', async () => {
      const c = await create(100);
      const url = c.url!;
      assert.equal((await patch(url, 5, Buffer.alloc(10))).status, 409);
      const long = await patch(url, 0, randomBytes(150));
      assert.equal(long.status, 413);
      assert.equal((await head(url)).offset, '0');
      const ok = await patch(url, 0, randomBytes(100));
      assert.equal(ok.status, 204);
      assert.match(ok.headers.get('x-file-no') ?? '', /^[0-9A-Za-z]+$/);
    });

    test('checksum: a wrong sha1 is 460 and stores nothing; the right one is taken', async () => {
      const c = await create(1000);
      const url = c.url!;
      const body = randomBytes(400);
      const wrong = createHash('sha1').update('something else').digest('base64');
      const bad = await patch(url, 0, body, { 'upload-checksum': `sha1 ${wrong}` });
      assert.equal(bad.status, 460);
      assert.equal((await head(url)).offset, '0');
      assert.deepEqual(await tusLeftovers(url), []);
      const right = createHash('sha1').update(body).digest('base64');
      const good = await patch(url, 0, body, { 'upload-checksum': `sha1 ${right}` });
      assert.equal(good.status, 204);
      assert.equal(good.offset, '400');
      // Those 400 bytes wait beside the session; a sweep leaves them while it lives, however idle.
      await h.services.multipart.sweep(0);
      assert.equal((await head(url)).offset, '400');
      assert.equal((await patch(url, 400, body, { 'upload-checksum': `crc32 AAAA` })).status, 400);
      const opts = await fetch(endpoint, { method: 'OPTIONS' });
      assert.match(opts.headers.get('tus-extension') ?? '', /checksum/);
      assert.match(opts.headers.get('tus-checksum-algorithm') ?? '', /sha1/);
      assert.equal(opts.headers.get('tus-version'), '1.0.0');
    });

    test('tus-js-client with Upload-Checksum: a wrong one is refused (460, not retried), the right ones upload', async () => {
      const data = randomBytes(10 * MiB + 5);
      const chunkSize = 3 * MiB;
      /** sha256 of the chunk a PATCH carries, from its offset (every chunk is chunkSize but the last). */
      const sign = (wrongFrom: number) => (req: tus.HttpRequest) => {
        if (req.getMethod() !== 'PATCH') return;
        const at = Number(req.getHeader('Upload-Offset'));
        const chunk = data.subarray(at, at + chunkSize);
        const digest = createHash('sha256')
          .update(at >= wrongFrom ? Buffer.from('not the chunk') : chunk)
          .digest('base64');
        req.setHeader('Upload-Checksum', `sha256 ${digest}`);
      };
      let url = '';
      const refused = await new Promise<tus.DetailedError>((resolve, reject) => {
        const upload: tus.Upload = new tus.Upload(data, {
          endpoint,
          headers: { 'x-api-key': h.ws.public_key },
          metadata: { filename: 'checked.bin' },
          chunkSize,
          // Retries allowed: a 460 must still end the upload rather than be sent again.
          retryDelays: [10, 10, 10],
          onBeforeRequest: sign(2 * chunkSize),
          onError: (err) => {
            url = upload.url ?? '';
            resolve(err as tus.DetailedError);
          },
          onSuccess: () => reject(new Error('a wrong checksum was accepted')),
        });
        upload.start();
      });
      assert.equal(refused.originalResponse?.getStatus(), 460);
      // The two chunks with the right sum are kept, nothing of the third.
      assert.equal((await head(url)).offset, String(2 * chunkSize));
      const { headers } = await clientUpload(data, { uploadUrl: url, chunkSize, onBeforeRequest: sign(Infinity) });
      const record = (await (await fetch(url, { headers: tusHeaders() })).json()) as any;
      assert.equal(String(record.file_no), headers['x-file-no']);
      assert.equal(record.hash, sha256(data));
      assert.deepEqual(await tusLeftovers(url), []);
    });

    test('expiry: Upload-Expires is sent; an expired upload is 410', async () => {
      const c = await create(1000);
      assert.equal(c.status, 201);
      const expires = Date.parse(c.headers.get('upload-expires') ?? '');
      assert.ok(expires > Date.now() + 3600_000, c.headers.get('upload-expires') ?? 'none');
      const sessionId = c.url!.split('/').pop()!.slice(0, 24);
      await h.services.db.kysely
        .updateTable('multipart_sessions')
        .set({ expire_at: Math.floor(Date.now() / 1000) - 5 })
        .where('id', '=', sessionId)
        .execute();
      assert.equal((await head(c.url!)).status, 410);
      assert.equal((await patch(c.url!, 0, Buffer.alloc(10))).status, 410);
      // The sweeper frees it as any expired session.
      await h.services.multipart.sweep(0);
      assert.equal(await reserved(), 0);
    });

    test('tus-js-client and an expired upload: 410 without an endpoint; with one, it starts a new upload', async () => {
      const c = await create(3 * MiB);
      const data = randomBytes(3 * MiB);
      assert.equal((await patch(c.url!, 0, data.subarray(0, MiB))).status, 204);
      await h.services.db.kysely
        .updateTable('multipart_sessions')
        .set({ expire_at: Math.floor(Date.now() / 1000) - 5 })
        .where('id', '=', c.url!.split('/').pop()!.slice(0, 24))
        .execute();
      const gone = await new Promise<tus.DetailedError>((resolve, reject) => {
        const upload = new tus.Upload(data, {
          uploadUrl: c.url!,
          headers: { 'x-api-key': h.ws.public_key },
          retryDelays: [10, 10],
          onError: (err) => resolve(err as tus.DetailedError),
          onSuccess: () => reject(new Error('an expired upload was resumed')),
        });
        upload.start();
      });
      assert.equal(gone.originalResponse?.getStatus(), 410);
      const posts: string[] = [];
      const { url } = await clientUpload(data, {
        uploadUrl: c.url!,
        onBeforeRequest: (req) => void posts.push(req.getMethod()),
      });
      assert.notEqual(url, c.url);
      assert.deepEqual(posts.slice(0, 2), ['HEAD', 'POST']);
      const record = (await (await fetch(url, { headers: tusHeaders() })).json()) as any;
      assert.equal(record.hash, sha256(data));
      await h.services.multipart.sweep(0);
      assert.deepEqual(await tusLeftovers(c.url!), [], 'the sweep drops the tail of the expired upload');
      assert.deepEqual(await tusLeftovers(url), []);
    });

    test('concatenation is not offered: tus-js-client with parallel uploads gets a 400 that says what to change', async () => {
      const err = await new Promise<tus.DetailedError>((resolve, reject) => {
        const upload = new tus.Upload(randomBytes(MiB), {
          endpoint,
          headers: { 'x-api-key': h.ws.public_key },
          metadata: { filename: 'parallel.bin' },
          parallelUploads: 2,
          retryDelays: [],
          onError: (e) => resolve(e as tus.DetailedError),
          onSuccess: () => reject(new Error('a concatenated upload was accepted')),
        });
        upload.start();
      });
      assert.equal(err.originalResponse?.getStatus(), 400);
      const body = JSON.parse(err.originalResponse?.getBody() ?? '{}');
      assert.equal(body.errorCode, 'VALIDATION_FAILED');
      assert.match(body.message, /parallelUploads/);
      const opts = await fetch(endpoint, { method: 'OPTIONS' });
      assert.doesNotMatch(opts.headers.get('tus-extension') ?? '', /concatenation/);
    });

    test('termination: DELETE frees the upload and its reservation', async () => {
      await h.services.workspaces.setLimits(h.ws.workspace_id, { quotaBytes: 1024 * MiB });
      after(() => h.services.workspaces.setLimits(h.ws.workspace_id, { quotaBytes: null }));
      const c = await create(10 * MiB);
      const url = c.url!;
      assert.equal((await patch(url, 0, randomBytes(MiB))).status, 204);
      assert.ok((await reserved()) >= 10 * MiB);
      const del = await fetch(url, { method: 'DELETE', headers: tusHeaders() });
      assert.equal(del.status, 204);
      assert.equal((await head(url)).status, 404);
      assert.equal(await reserved(), 0);
      assert.deepEqual(await tusLeftovers(url), []);
    });

    test('limits: over the max file size is 413, over the quota 402, before any byte', async () => {
      await h.services.workspaces.setLimits(h.ws.workspace_id, { maxFileSize: 5000 });
      try {
        const big = await create(5001);
        assert.equal(big.status, 413);
        assert.equal(big.url, null);
      } finally {
        await h.services.workspaces.setLimits(h.ws.workspace_id, { maxFileSize: null });
      }
      await h.services.workspaces.setLimits(h.ws.workspace_id, { quotaBytes: 200 * MiB });
      try {
        const over = await create(300 * MiB);
        assert.equal(over.status, 402);
        assert.equal(await reserved(), 0);
      } finally {
        await h.services.workspaces.setLimits(h.ws.workspace_id, { quotaBytes: null });
      }
      const empty = await create(0);
      assert.equal(empty.status, 400);
      assert.equal(JSON.parse(empty.text).errorCode, 'VALIDATION_FAILED');
      const noKey = await fetch(endpoint, {
        method: 'POST',
        headers: { 'tus-resumable': '1.0.0', 'upload-length': '5' },
      });
      assert.equal(noKey.status, 401);
    });

    test('CORS: a preflight from another origin is allowed; answers expose the tus headers', async () => {
      const pre = await fetch(endpoint, {
        method: 'OPTIONS',
        headers: {
          origin: 'https://app.example.com',
          'access-control-request-method': 'PATCH',
          'access-control-request-headers':
            'tus-resumable,upload-offset,upload-length,upload-metadata,x-api-key,content-type',
        },
      });
      assert.equal(pre.status, 204);
      assert.ok(['*', 'https://app.example.com'].includes(pre.headers.get('access-control-allow-origin') ?? ''));
      assert.match(pre.headers.get('access-control-allow-methods') ?? '', /PATCH/);
      assert.match(pre.headers.get('access-control-allow-headers') ?? '', /upload-offset/i);
      const c = await create(10, { origin: 'https://app.example.com' });
      assert.equal(c.status, 201);
      assert.ok(c.headers.get('access-control-allow-origin'));
      const exposed = (c.headers.get('access-control-expose-headers') ?? '').toLowerCase();
      for (const name of ['location', 'upload-offset', 'upload-length', 'tus-resumable', 'upload-expires', 'x-file-no'])
        assert.ok(exposed.includes(name), `${name} in ${exposed}`);
    });
  });
}
