// The SDK against a real server: every call, both documented answer shapes, retries that
// honour Retry-After, multipart with parallelism, progress, cancellation and resume.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Stowage, StowageAbortError, StowageError, signDeliveryUrl, uploadWithToken } from '../sdk/src/index.ts';
import { fileFromPath } from '../sdk/src/node.ts';
import sharp from 'sharp';
import { type Harness, makeHarness } from './helpers/harness.ts';
import { localServer } from './helpers/servers.ts';
import { externalService } from './helpers/services.ts';
import { freshS3Storage } from './helpers/storage.ts';

const s3Gate = externalService('STOWAGE_TEST_S3_ENDPOINT', 'an S3-compatible server');

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
    const r = await pub.upload(new Blob([data]), 'a.bin', {
      folder: 'sdk',
      tags: ['x', 'y'],
      metadata: { k: 1 },
      customId: 'c1',
    });
    assert.equal(r.hash, sha(data));
    assert.equal(r.path, '/sdk/a.bin');
    assert.deepEqual(r.tags, ['x', 'y']);
    const origin = await localServer((_req, res) => res.writeHead(200).end(data));
    try {
      // Only the private key is told about duplicates (a public key never learns what the workspace holds).
      const remote = await priv.uploadFromUrl(`${origin.url}/remote.bin`);
      assert.equal(remote.name, 'remote.bin');
      assert.equal(remote.is_duplicate, true);
    } finally {
      await origin.close();
    }
    const progress: number[] = [];
    const small = await pub.uploadFile(new Blob([randomBytes(1000)]), 'small.bin', {
      onProgress: (p) => progress.push(p.loaded),
    });
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
      const r = await pub.uploadFile(blob, name, {
        multipartThreshold: MiB,
        parallel: 3,
        onProgress: (p) => seen.push(p.loaded),
        onSession: (s) => (session = s.session_id),
      });
      assert.equal(r.upload_source, 'multipart');
      assert.equal(r.hash, sha(data));
      assert.ok(session);
      assert.equal(seen.at(-1), data.length);
      assert.deepEqual(
        seen,
        [...seen].sort((a, b) => a - b),
        'progress only grows',
      );
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
    assert.deepEqual(
      status.uploaded_parts.map((p) => p.part_number),
      [1, 2],
    );
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
      if (calls <= 2)
        return new Response(
          JSON.stringify({ success: false, error: 'Too many requests', message: 'slow down', retryAfterSeconds: 1 }),
          { status: 429, headers: { 'retry-after': '1' } },
        );
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
    await assert.rejects(
      new Stowage({ baseUrl: base, apiKey: 'x', fetch: down, retries: 2, retryDelayMs: 5 }).listFiles(),
      /fetch failed/,
    );
    assert.equal(refused, 3, 'one try and two retries');
  });

  test('accepts both documented shapes: {success,data} records and a 200 short multipart start', async () => {
    const reshape: typeof fetch = async (input, init) => {
      const url = String(input);
      const res = await fetch(input, init);
      if (url.endsWith('/api/v1/uploads')) {
        const r = (await res.json()) as any;
        return new Response(
          JSON.stringify({
            success: true,
            data: { file_no: r.file_no, name: r.name, url: r.url, path: r.path, format: r.format, file_size: r.size },
          }),
          { status: 200 },
        );
      }
      if (url.endsWith('/api/v1/multipart/start')) {
        const s = (await res.json()) as any;
        return new Response(JSON.stringify({ session_id: s.session_id, part_size: s.part_size, parts: s.parts }), {
          status: 200,
        });
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

  test("listFiles asks with aliases=none and gives the full answer; an older server's full answer as it is", async () => {
    await priv.upload(new Blob([randomBytes(40)]), 'aliases-a.bin', { folder: 'aliases' });
    await priv.upload(new Blob([randomBytes(41)]), 'aliases-b.bin', { folder: 'aliases' });
    const urls: string[] = [];
    const bodies: string[] = [];
    const watch =
      (older: boolean): typeof fetch =>
      async (input, init) => {
        const url = new URL(String(input));
        if (older) url.searchParams.delete('aliases');
        urls.push(String(input));
        const res = await fetch(url, init);
        const text = await res.text();
        bodies.push(text);
        return new Response(text, { status: res.status, headers: res.headers });
      };
    const query = { limit: 1, path: 'aliases' };
    const full = await (
      await fetch(`${base}/api/v1/files?limit=1&path=aliases`, {
        headers: { authorization: `Bearer ${h.ws.private_key}` },
      })
    ).json();
    for (const older of [false, true]) {
      const client = new Stowage({ baseUrl: base, apiKey: h.ws.private_key, fetch: watch(older) });
      const page = await client.listFiles(query);
      assert.equal(new URL(urls.at(-1)!).searchParams.get('aliases'), 'none');
      assert.equal(Object.keys(JSON.parse(bodies.at(-1)!)).length, older ? 14 : 2, 'what the server sent');
      assert.deepEqual(page, full, older ? 'an older server' : 'aliases=none');
      assert.equal(page.meta.hasNext, true);
      assert.equal(page.total_pages, 2);
    }
  });

  test('files, folders and sources, with errors as StowageError', async () => {
    const folder = await priv.createFolder('sdk-folder');
    const f = await priv.upload(new Blob([randomBytes(100)]), 'move-me.bin');
    const moved = await priv.updateFile(f.file_no, { folder_no: folder.folder_no, add_tags: ['t'] });
    assert.equal(moved.path, '/sdk-folder/move-me.bin');
    assert.equal((await priv.renameFile(f.file_no, 'moved.bin')).name, 'moved.bin');
    assert.equal((await priv.getFile(f.file_no)).name, 'moved.bin');
    const listed = await priv.listFiles({ folder_no: folder.folder_no });
    assert.deepEqual(
      listed.files.map((x) => x.file_no),
      [f.file_no],
    );
    // eachFile walks every page by cursor: the same files, in order, as one big page.
    for (let i = 0; i < 4; i++) await priv.upload(new Blob([randomBytes(50 + i)]), `each-${i}.bin`, { folder: 'each' });
    const all = (await priv.listFiles({ limit: 100, path: 'each' })).files.map((x) => x.file_no);
    const walked: string[] = [];
    for await (const x of priv.eachFile({ limit: 3, path: 'each' })) walked.push(x.file_no);
    assert.equal(all.length, 4);
    assert.deepEqual(walked, all);
    assert.equal(
      (await priv.listFolders()).folders.some((x) => x.folder_no === folder.folder_no),
      true,
    );
    assert.equal((await priv.renameFolder(folder.folder_no, 'renamed')).path, 'renamed');
    const signed = await priv.signedUrl(f.file_no, { expires_in: 60 });
    assert.match(signed.url, /signature=/);
    const notEmpty = await priv.deleteFolder(folder.folder_no).catch((e) => e);
    assert.ok(notEmpty instanceof StowageError);
    assert.equal(notEmpty.status, 409);
    assert.equal(notEmpty.errorCode, 'FOLDER_NOT_EMPTY');
    await priv.deleteFolder(folder.folder_no, { recursive: true });
    const gone = await priv.getFile(f.file_no).catch((e) => e);
    assert.ok(gone instanceof StowageError);
    assert.equal(gone.status, 404);
    assert.equal(gone.errorCode, 'FILE_NOT_FOUND');

    const src = await priv.createSource({
      name: 'sdk-src',
      type: 'image_source',
      configuration: { base_url: 'https://example.com/img' },
    });
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

describe('SDK: upload tokens and workspace settings', () => {
  let h: Harness;
  let base: string;
  let priv: Stowage;
  /** A StowageError with this status and errorCode. */
  const refusal = (status: number, errorCode: string) => (e: unknown) => {
    assert.ok(e instanceof StowageError, `a StowageError, got ${e}`);
    assert.equal(e.status, status, e.message);
    assert.equal(e.errorCode, errorCode);
    return true;
  };
  before(async () => {
    h = await makeHarness('sqlite');
    base = await h.app.listen({ host: '127.0.0.1', port: 0 });
    priv = new Stowage({ baseUrl: base, apiKey: h.ws.private_key });
  });
  after(() => h?.close());

  /** The token's upload_url on this test server (the harness's public URL is a fixed port). */
  const here = (uploadUrl: string) => base + new URL(uploadUrl).pathname;

  test('generateToken, then uploadWithToken: byte-exact, any Unicode name, and single use', async () => {
    const before = Math.floor(Date.now() / 1000);
    const t = await priv.generateToken({
      fileName: 'default.txt',
      folder: 'tok',
      tags: ['a'],
      maxFileSize: 1000,
      ttlSeconds: 120,
      metadata: { k: 1 },
      customId: 'tok-1',
    });
    assert.equal(t.upload_url, `${h.config.publicUrl}/api/v1/uploads/${t.token}`);
    assert.equal(t.workspace_id, h.ws.workspace_id);
    assert.ok(
      t.expire_at >= before + 119 && t.expire_at <= before + 122,
      `expire_at ${t.expire_at} is about 120 s away`,
    );
    assert.equal(t.policy.file_name, 'default.txt');
    assert.equal(t.policy.folder, 'tok');
    assert.deepEqual(t.policy.tags, ['a']);
    assert.equal(t.policy.max_file_size, 1000);
    assert.deepEqual(t.policy.allow_override, { folder: false, tags: false, transform: false });

    const data = Buffer.from(`hello ☕ ${randomBytes(16).toString('hex')}\n`);
    const progress: number[] = [];
    const name = 'café ☕.txt';
    const r = await uploadWithToken(here(t.upload_url), new Blob([data], { type: 'text/plain' }), {
      fileName: name,
      onProgress: (p) => progress.push(p.loaded),
    });
    assert.equal(r.name, name);
    assert.equal(r.path, `/tok/${name}`);
    assert.equal(r.hash, sha(data));
    assert.equal(r.size, data.length);
    assert.deepEqual(r.tags, ['a']);
    assert.deepEqual(r.metadata, { k: 1 });
    assert.equal(r.custom_id, 'tok-1');
    assert.deepEqual(progress, [0, data.length]);
    const back = await fetch(priv.deliveryUrl(h.ws.workspace_id, r.path));
    assert.equal(back.status, 200);
    assert.deepEqual(Buffer.from(await back.arrayBuffer()), data, 'the stored bytes are the bytes sent');
    assert.equal((await priv.getFile(r.file_no)).name, name);

    await assert.rejects(uploadWithToken(here(t.upload_url), new Blob([data])), refusal(401, 'TOKEN_USED'));

    // The client's method takes the bare token; without fileName the token's file_name is used.
    const t2 = await priv.generateToken({ fileName: 'from-token.bin' });
    const r2 = await priv.uploadWithToken(t2.token, new Blob([randomBytes(10)]));
    assert.equal(r2.path, '/from-token.bin');
    await assert.rejects(priv.uploadWithToken(t2.token, new Blob([randomBytes(10)])), refusal(401, 'TOKEN_USED'));
  });

  test('refusals: overrides the token does not allow, too large, unknown token', async () => {
    const file = () => new Blob([Buffer.from('0123456789ab')], { type: 'text/plain' });
    const noFolder = await priv.generateToken({ fileName: 'o.txt', folder: 'fixed', allowOverride: { tags: true } });
    assert.deepEqual(noFolder.policy.allow_override, { folder: false, tags: true, transform: false });
    await assert.rejects(
      priv.uploadWithToken(noFolder.token, file(), { folder: 'elsewhere' }),
      refusal(403, 'OVERRIDE_NOT_ALLOWED'),
    );
    const noTransform = await priv.generateToken({ fileName: 'o.txt', allowOverride: { folder: true, tags: true } });
    await assert.rejects(
      priv.uploadWithToken(noTransform.token, file(), { transform: 'w_10' }),
      refusal(403, 'OVERRIDE_NOT_ALLOWED'),
    );
    const tagsOk = await priv.generateToken({
      fileName: 'o.txt',
      folder: 'fixed',
      tags: ['policy'],
      allowOverride: { tags: true },
    });
    const r = await priv.uploadWithToken(tagsOk.token, file(), { tags: ['x', 'y'] });
    assert.deepEqual(r.tags, ['x', 'y']);
    assert.equal(r.path, '/fixed/o.txt');

    const small = await priv.generateToken({ fileName: 'big.bin', maxFileSize: 10 });
    await assert.rejects(
      priv.uploadWithToken(small.token, new Blob([randomBytes(11)])),
      refusal(413, 'FILE_TOO_LARGE'),
    );
    await assert.rejects(uploadWithToken('not-a-token', file(), { baseUrl: base }), refusal(401, 'TOKEN_INVALID'));
    await assert.rejects(uploadWithToken('not-a-token', file()), TypeError, 'a bare token needs baseUrl');
  });

  test('a token upload is sent again only after 429/503 with Retry-After, never after an answer or a network error', async () => {
    const t = await priv.generateToken({ fileName: 'retry.bin' });
    const url = here(t.upload_url);
    const file = new Blob([randomBytes(100)]);
    let calls = 0;
    const answer =
      (status: number, headers: Record<string, string> = {}) =>
      async () => {
        calls++;
        return new Response(JSON.stringify({ success: false, error: 'x', errorCode: 'X', message: 'x' }), {
          status,
          headers,
        });
      };
    await assert.rejects(uploadWithToken(url, file, { fetch: answer(500) }), refusal(500, 'X'));
    assert.equal(calls, 1, '500: not retried');
    calls = 0;
    await assert.rejects(uploadWithToken(url, file, { fetch: answer(503) }), refusal(503, 'X'));
    assert.equal(calls, 1, '503 without Retry-After: not retried');
    calls = 0;
    const down: typeof fetch = async () => {
      calls++;
      throw new TypeError('fetch failed');
    };
    await assert.rejects(uploadWithToken(url, file, { fetch: down }), /fetch failed/);
    assert.equal(calls, 1, 'network error: not retried');
    calls = 0;
    const busyOnce: typeof fetch = async (input, init) => {
      calls++;
      if (calls === 1)
        return new Response('{"success":false,"error":"Too many requests","errorCode":"RATE_LIMITED"}', {
          status: 429,
          headers: { 'retry-after': '0' },
        });
      return fetch(input, init);
    };
    const r = await uploadWithToken(url, file, { fetch: busyOnce });
    assert.equal(calls, 2, '429 with Retry-After: sent again');
    assert.equal(r.name, 'retry.bin');
  });

  test('getWorkspace and updateWorkspace round-trip; allowed origins apply to token uploads from a page', async () => {
    const w = await priv.getWorkspace();
    assert.equal(w.workspace_id, h.ws.workspace_id);
    assert.deepEqual([w.allowed_origins, w.webhook_origins], [[], []]);
    assert.equal(typeof w.used_bytes, 'number');
    const set = await priv.updateWorkspace({
      allowedOrigins: ['https://shop.example.com', 'https://*.example.com'],
      webhookOrigins: ['https://hooks.example.com'],
    });
    assert.deepEqual(set.allowed_origins, ['https://shop.example.com', 'https://*.example.com']);
    assert.deepEqual(set.webhook_origins, ['https://hooks.example.com']);
    assert.deepEqual(await priv.getWorkspace(), set);
    const partial = await priv.updateWorkspace({ webhookOrigins: [] });
    assert.deepEqual(partial.webhook_origins, []);
    assert.deepEqual(partial.allowed_origins, set.allowed_origins, 'a list left out is kept');
    await assert.rejects(
      priv.updateWorkspace({ allowedOrigins: ['not an origin'] }),
      (e: unknown) => e instanceof StowageError && e.status === 400,
    );
    await assert.rejects(
      new Stowage({ baseUrl: base, apiKey: h.ws.public_key }).getWorkspace(),
      (e: unknown) => e instanceof StowageError && e.status === 403,
    );

    const fromPage =
      (origin: string): typeof fetch =>
      (input, init) =>
        fetch(input, { ...init, headers: { ...(init?.headers as Record<string, string>), origin } });
    const refused = await priv.generateToken({ fileName: 'page.txt' });
    await assert.rejects(
      uploadWithToken(here(refused.upload_url), new Blob(['x']), { fetch: fromPage('https://evil.test') }),
      refusal(403, 'ORIGIN_NOT_ALLOWED'),
    );
    const allowed = await priv.generateToken({ fileName: 'page.txt' });
    const r = await uploadWithToken(here(allowed.upload_url), new Blob(['x']), {
      fetch: fromPage('https://a.example.com'),
    });
    assert.equal(r.name, 'page.txt');
    assert.deepEqual((await priv.updateWorkspace({ allowedOrigins: [] })).allowed_origins, []);
  });

  test('signed transformations: the key, the setting, and URLs signed offline that the service accepts', async () => {
    const png = await sharp({ create: { width: 4, height: 4, channels: 3, background: '#123456' } })
      .png()
      .toBuffer();
    const r = await priv.upload(new Blob([png], { type: 'image/png' }), 'dot.png', { folder: 'signed' });
    await assert.rejects(
      new Stowage({ baseUrl: base, apiKey: h.ws.public_key }).getDeliveryKey(),
      (e: unknown) => e instanceof StowageError && e.status === 403,
    );
    const deliveryKey = await priv.getDeliveryKey();
    assert.match(deliveryKey, /^stw_dk_/);
    assert.equal((await priv.updateWorkspace({ signedTransformations: true })).signed_transformations, true);
    try {
      const plain = priv.deliveryUrl(h.ws.workspace_id, r.path, 'w_1');
      assert.equal((await fetch(plain)).status, 403, 'unsigned is refused');
      assert.throws(() => priv.signUrl(plain), TypeError, 'no deliveryKey option: a clear error, not an unsigned URL');
      const signer = new Stowage({ baseUrl: base, apiKey: h.ws.private_key, deliveryKey });
      const signed = await signer.signedDeliveryUrl(h.ws.workspace_id, r.path, 'w_1', { expiresIn: 60 });
      assert.match(signed, /[?&]texp=\d+&tsig=/);
      const res = await fetch(signed);
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), 'image/png');
      // signDeliveryUrl on its own, as a backend without a client would use it.
      assert.equal(await signDeliveryUrl(plain, deliveryKey), await signer.signUrl(plain));
      // A record read now carries a signed thumbnail (the upload's answer, made before, did not).
      const fresh = await priv.getFile(r.file_no);
      const t = new URL(fresh.thumbnail!);
      assert.equal((await fetch(`${base}${t.pathname}${t.search}`)).status, 200);
    } finally {
      await priv.updateWorkspace({ signedTransformations: false });
    }
  });

  test('presets: set, get, list, use in a URL, delete; refusals as StowageError', async () => {
    const png = await sharp({ create: { width: 40, height: 20, channels: 3, background: '#654321' } })
      .png()
      .toBuffer();
    const r = await priv.upload(new Blob([png], { type: 'image/png' }), 'p.png', { folder: 'presets' });
    const made = await priv.setPreset('small', ' w_10 ,f_webp');
    assert.equal(made.transformation, 'w_10,f_webp');
    assert.equal((await priv.setPreset('small', 'w_12')).created_at, made.created_at, 'replaced, not remade');
    assert.equal((await priv.getPreset('small')).transformation, 'w_12');
    const list = await priv.listPresets();
    assert.deepEqual(
      list.presets.map((p) => p.name),
      ['small'],
    );
    assert.equal(list.max_presets, 100);
    const res = await fetch(priv.deliveryUrl(h.ws.workspace_id, r.path, 't_small'));
    assert.equal(res.status, 200);
    assert.equal((await sharp(Buffer.from(await res.arrayBuffer())).metadata()).width, 12);
    await assert.rejects(priv.setPreset('broken', 'w_x'), refusal(400, 'VALIDATION_FAILED'));
    await assert.rejects(
      new Stowage({ baseUrl: base, apiKey: h.ws.public_key }).setPreset('evil', 'w_1'),
      refusal(403, 'PRIVATE_KEY_REQUIRED'),
    );
    await priv.deletePreset('small');
    await assert.rejects(priv.getPreset('small'), refusal(404, 'PRESET_NOT_FOUND'));
    await assert.rejects(priv.deletePreset('small'), refusal(404, 'PRESET_NOT_FOUND'));
  });
});

// Progress in bytes, not parts: the SDK counts what has gone out of each part in flight (a
// counted stream in Node; XHR upload events in browsers), on local part URLs and on presigned S3
// ones (Swift checks Content-Length like S3, so the counted body must still declare it).
for (const storage of ['local', 's3'] as const) {
  describe(`SDK multipart progress in bytes (${storage})`, { skip: storage === 's3' ? s3Gate.skip : false }, () => {
    let h: Harness;
    let client: Stowage;
    before(async () => {
      h = await makeHarness('sqlite', storage === 's3' ? { config: { storage: await freshS3Storage() } } : {});
      const base = await h.app.listen({ host: '127.0.0.1', port: 0 });
      (h.services.multipart as any).settings.publicUrl = base;
      client = new Stowage({ baseUrl: base, apiKey: h.ws.public_key });
    });
    after(() => h?.close());

    test('progress moves inside each part, only grows with one part at a time, and ends at the size', async () => {
      const data = randomBytes(2 * 8 * MiB + 4321);
      const seen: number[] = [];
      const r = await client.uploadMultipart(new Blob([data]), 'progress.bin', {
        parallel: 1,
        onProgress: (p) => seen.push(p.loaded),
      });
      assert.equal(r.hash, sha(data));
      assert.equal(seen.at(-1), data.length);
      const insideFirst = seen.filter((v) => v > 0 && v < 8 * MiB);
      assert.ok(insideFirst.length >= 8, `progress inside the first part: ${insideFirst.length} steps`);
      assert.ok(
        seen.some((v) => v > 8 * MiB && v < 16 * MiB),
        'and inside the second',
      );
      assert.deepEqual(
        seen,
        [...seen].sort((a, b) => a - b),
        'one part at a time: progress only grows',
      );
    });
  });
}
