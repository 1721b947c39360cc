// The SDK against a real server: every call, both documented answer shapes, retries that
// honour Retry-After, multipart with parallelism, progress, cancellation and resume.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Stowage, StowageAbortError, StowageError } from '../sdk/src/index.ts';
import { fileFromPath } from '../sdk/src/node.ts';
import { type Harness, makeHarness } from './helpers/harness.ts';
import { localServer } from './helpers/servers.ts';

const MiB = 1024 * 1024;
const sha = (b: Buffer | Uint8Array) => createHash('sha256').update(b).digest('hex');

describe('SDK', () => {
  let h: Harness;
  let base: string;
  let pub: Stowage;
  let priv: Stowage;
  before(async () => {
    h = await makeHarness('sqlite', { config: { outboundAllow: ['127.0.0.1'] } });
    base = await h.app.listen({ host: '127.0.0.1', port: 0 });
    (h.services.multipart as any).settings.publicUrl = base;
    pub = new Stowage({ baseUrl: base, apiKey: h.ws.public_key });
    priv = new Stowage({ baseUrl: base, apiKey: h.ws.private_key });
  });
  after(() => h?.close());

  test('direct, remote and automatic uploads return full records', async () => {
    const data = randomBytes(50_000);
    const r = await pub.upload(new Blob([data]), 'a.bin', { folder: 'sdk', tags: ['x', 'y'], metadata: { k: 1 }, customId: 'c1' });
    assert.equal(r.hash, sha(data));
    assert.equal(r.path, '/sdk/a.bin');
    assert.deepEqual(r.tags, ['x', 'y']);
    const origin = await localServer((_req, res) => res.writeHead(200).end(data));
    try {
      const remote = await pub.uploadFromUrl(`${origin.url}/remote.bin`);
      assert.equal(remote.name, 'remote.bin');
      assert.equal(remote.is_duplicate, true);
    } finally {
      await origin.close();
    }
    const progress: number[] = [];
    const small = await pub.uploadFile(new Blob([randomBytes(1000)]), 'small.bin', { onProgress: (p) => progress.push(p.loaded) });
    assert.equal(small.upload_source, 'direct');
    assert.deepEqual(progress, [1000]);
  });

  test('multipart: parallel parts, progress up to the total, byte-exact; a file on disk via fileFromPath', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sdk-'));
    try {
      const data = randomBytes(3 * 8 * MiB + 123);
      writeFileSync(join(dir, 'big.bin'), data);
      const { blob, name } = await fileFromPath(join(dir, 'big.bin'));
      const seen: number[] = [];
      let session: string | undefined;
      const r = await pub.uploadFile(blob, name, { multipartThreshold: MiB, parallel: 3, onProgress: (p) => seen.push(p.loaded), onSession: (s) => (session = s.session_id) });
      assert.equal(r.upload_source, 'multipart');
      assert.equal(r.hash, sha(data));
      assert.ok(session);
      assert.equal(seen.at(-1), data.length);
      assert.deepEqual(seen, [...seen].sort((a, b) => a - b), 'progress only grows');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('cancel with an AbortSignal, then resume: only the missing parts are sent', async () => {
    const data = randomBytes(4 * 8 * MiB);
    const puts: string[] = [];
    const counting: typeof fetch = (input, init) => {
      if (init?.method === 'PUT') puts.push(String(input));
      return fetch(input, init);
    };
    const client = new Stowage({ baseUrl: base, apiKey: h.ws.public_key, fetch: counting });
    const controller = new AbortController();
    let saved: any;
    await assert.rejects(
      client.uploadMultipart(new Blob([data]), 'resumable.bin', {
        parallel: 1,
        signal: controller.signal,
        onSession: (s) => (saved = JSON.parse(JSON.stringify(s))),
        onProgress: (p) => {
          if (p.loaded >= 2 * 8 * MiB) controller.abort();
        },
      }),
      StowageAbortError,
    );
    assert.equal(puts.length, 2);
    const status = await client.multipartStatus(saved.session_id);
    assert.deepEqual(status.uploaded_parts.map((p) => p.part_number), [1, 2]);
    puts.length = 0;
    const r = await client.uploadMultipart(new Blob([data]), 'resumable.bin', { resume: saved });
    assert.equal(r.hash, sha(data));
    assert.equal(puts.length, 2, 'parts 3 and 4 only');
    const again = await client.uploadMultipart(new Blob([data]), 'resumable.bin', { resume: saved });
    assert.equal(again.id, r.id, 'resuming a completed session returns its record');
  });

  test('retries passing failures and waits as long as Retry-After says', async () => {
    let calls = 0;
    const flaky: typeof fetch = async (input, init) => {
      calls++;
      if (calls <= 2) return new Response(JSON.stringify({ success: false, error: 'Too many requests', message: 'slow down', retryAfterSeconds: 1 }), { status: 429, headers: { 'retry-after': '1' } });
      return fetch(input, init);
    };
    const client = new Stowage({ baseUrl: base, apiKey: h.ws.private_key, fetch: flaky, retryDelayMs: 10 });
    const started = Date.now();
    const list = await client.listFiles({ limit: 1 });
    assert.equal(calls, 3);
    assert.ok(Date.now() - started >= 1900, 'waited for Retry-After twice');
    assert.equal(list.meta.limit, 1);
    let refused = 0;
    const down: typeof fetch = async () => {
      refused++;
      throw new TypeError('fetch failed');
    };
    await assert.rejects(new Stowage({ baseUrl: base, apiKey: 'x', fetch: down, retries: 2, retryDelayMs: 5 }).listFiles(), /fetch failed/);
    assert.equal(refused, 3, 'one try and two retries');
  });

  test('accepts both documented shapes: {success,data} records and a 200 short multipart start', async () => {
    const reshape: typeof fetch = async (input, init) => {
      const url = String(input);
      const res = await fetch(input, init);
      if (url.endsWith('/api/v1/uploads')) {
        const r = (await res.json()) as any;
        return new Response(JSON.stringify({ success: true, data: { file_no: r.file_no, name: r.name, url: r.url, path: r.path, format: r.format, file_size: r.size } }), { status: 200 });
      }
      if (url.endsWith('/api/v1/multipart/start')) {
        const s = (await res.json()) as any;
        return new Response(JSON.stringify({ session_id: s.session_id, part_size: s.part_size, parts: s.parts }), { status: 200 });
      }
      return res;
    };
    const client = new Stowage({ baseUrl: base, apiKey: h.ws.public_key, fetch: reshape });
    const short = (await client.upload(new Blob([randomBytes(10)]), 'short.bin')) as any;
    assert.equal(short.name, 'short.bin');
    assert.equal(typeof short.file_size, 'number');
    const data = randomBytes(9 * MiB);
    const r = await client.uploadMultipart(new Blob([data]), 'short-start.bin');
    assert.equal(r.hash, sha(data));
  });

  test('files, folders and sources, with errors as StowageError', async () => {
    const folder = await priv.createFolder('sdk-folder');
    const f = await priv.upload(new Blob([randomBytes(100)]), 'move-me.bin');
    const moved = await priv.updateFile(f.file_no, { folder_no: folder.folder_no, add_tags: ['t'] });
    assert.equal(moved.path, '/sdk-folder/move-me.bin');
    assert.equal((await priv.renameFile(f.file_no, 'moved.bin')).name, 'moved.bin');
    assert.equal((await priv.getFile(f.file_no)).name, 'moved.bin');
    const listed = await priv.listFiles({ folder_no: folder.folder_no });
    assert.deepEqual(listed.files.map((x) => x.file_no), [f.file_no]);
    assert.equal((await priv.listFolders()).folders.some((x) => x.folder_no === folder.folder_no), true);
    assert.equal((await priv.renameFolder(folder.folder_no, 'renamed')).path, 'renamed');
    const signed = await priv.signedUrl(f.file_no, { expires_in: 60 });
    assert.match(signed.url, /signature=/);
    await priv.deleteFolder(folder.folder_no);
    const gone = await priv.getFile(f.file_no).catch((e) => e);
    assert.ok(gone instanceof StowageError);
    assert.equal(gone.status, 404);
    assert.equal(gone.errorCode, 'FILE_NOT_FOUND');

    const src = await priv.createSource({ name: 'sdk-src', type: 'image_source', configuration: { base_url: 'https://example.com/img' } });
    assert.equal((await priv.getSource(src.id)).name, 'sdk-src');
    assert.equal((await priv.updateSource(src.id, { is_active: false })).is_active, false);
    assert.equal((await priv.listSources({ search: 'sdk' })).sources.length, 1);
    await priv.deleteSource(src.id);
    const forbidden = await pub.listSources().catch((e) => e);
    assert.equal(forbidden.status, 403);
    const unauth = await new Stowage({ baseUrl: base, apiKey: 'stw_sk_nope' }).listSources().catch((e) => e);
    assert.equal(unauth.status, 401);
    assert.equal(unauth.error, 'Invalid API key.');
    assert.equal(priv.deliveryUrl('WS', '/a b/c.jpg', 'w_100'), `${base}/WS/w_100/a%20b/c.jpg`);
  });
});
