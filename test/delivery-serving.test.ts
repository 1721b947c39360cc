// Delivery served like static files (issue 19, item 7): files held in memory (the hot cache and
// the fast path in front of Fastify), If-Range, 304s, Range on held files, `?v=` immutable
// URLs, and, from a user's and an attacker's side, that nothing a change made stale is ever
// served by this node once the API has answered the change: replace, delete, rename, move,
// folder rename, made private.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import sharp from 'sharp';
import { buildApp } from '../src/app.ts';
import { createServices } from '../src/services/container.ts';
import { type Harness, makeHarness } from './helpers/harness.ts';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('delivery served like static files', () => {
  let h: Harness;
  let base: string;
  let red: Buffer;
  let blue: Buffer;
  const data = Buffer.from(Array.from({ length: 5000 }, (_, i) => i % 251));

  const upload = async (name: string, body: Buffer, folder?: string) => {
    const form = new FormData();
    form.set('file_name', name);
    if (folder) form.set('folder', folder);
    form.set('file', new Blob([new Uint8Array(body)]), name);
    const res = await fetch(`${base}/api/v1/uploads`, { method: 'POST', headers: h.auth, body: form });
    assert.ok(res.status === 200 || res.status === 201, `upload ${name}: ${res.status}`);
    return (await res.json()) as { file_no: string; hash: string; folder_no?: string | null };
  };
  const api = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { ...h.auth, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    assert.ok(res.status < 300, `${method} ${path}: ${res.status} ${await res.clone().text()}`);
    return (await res.json()) as Record<string, unknown>;
  };
  const get = async (path: string, headers: Record<string, string> = {}) => {
    const res = await fetch(`${base}${path}`, { headers });
    return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) };
  };
  const at = (p: string) => `/${h.ws.workspace_id}/${p}`;
  const png = (colour: string) =>
    sharp({ create: { width: 400, height: 300, channels: 3, background: colour } })
      .png()
      .toBuffer();
  const pixel = async (img: Buffer) => {
    const { data: px } = await sharp(img).raw().toBuffer({ resolveWithObject: true });
    return [px[0], px[1], px[2]];
  };
  /** Twice, so that the second answer is the one from memory. */
  const twice = async (path: string, headers: Record<string, string> = {}) => {
    await get(path, headers);
    return get(path, headers);
  };

  before(async () => {
    h = await makeHarness('sqlite');
    base = await h.app.listen({ host: '127.0.0.1', port: 0 });
    red = await png('#ff0000');
    blue = await png('#0000ff');
    await upload('data.bin', data, 'raw');
  });
  after(() => h?.close());

  test('a held rendition is answered from memory with the right bytes, and Range slices it', async () => {
    await upload('held.png', red);
    const first = await get(at('w_100,f_png/held.png'));
    assert.equal(first.status, 200);
    const fast = h.services.deliveryCache.stats.fastHits;
    const second = await get(at('w_100,f_png/held.png'));
    assert.equal(h.services.deliveryCache.stats.fastHits, fast + 1, 'the second answer came from memory');
    assert.deepEqual(second.body, first.body);
    assert.equal((await sharp(second.body).metadata()).width, 100);
    const n = first.body.length;
    const part = await get(at('w_100,f_png/held.png'), { range: 'bytes=10-19' });
    assert.equal(part.status, 206);
    assert.equal(part.headers.get('content-range'), `bytes 10-19/${n}`);
    assert.deepEqual(part.body, first.body.subarray(10, 20));
    const tail = await get(at('w_100,f_png/held.png'), { range: 'bytes=-7' });
    assert.deepEqual(tail.body, first.body.subarray(n - 7));
    const past = await get(at('w_100,f_png/held.png'), { range: `bytes=${n}-` });
    assert.equal(past.status, 416);
    assert.equal(past.headers.get('content-range'), `bytes */${n}`);
  });

  test('a file too large to hold is streamed without a lookup: whole, ranged, If-Range, and 404 once deleted', async () => {
    const big = Buffer.alloc(1_500_000);
    for (let i = 0; i < big.length; i += 4) big.writeUInt32LE(i, i);
    const file = await upload('big.bin', big);
    const first = await get(at('big.bin'));
    assert.equal(sha(first.body), sha(big));
    const fast = h.services.deliveryCache.stats.fastHits;
    const second = await get(at('big.bin'));
    assert.equal(h.services.deliveryCache.stats.fastHits, fast + 1, 'answered before Fastify');
    assert.equal(sha(second.body), sha(big));
    assert.equal(second.headers.get('content-length'), String(big.length));
    const part = await get(at('big.bin'), { range: 'bytes=1000000-1000099', 'if-range': first.headers.get('etag')! });
    assert.equal(part.status, 206);
    assert.deepEqual(part.body, big.subarray(1_000_000, 1_000_100));
    const whole = await get(at('big.bin'), { range: 'bytes=0-9', 'if-range': '"stale"' });
    assert.equal(whole.status, 200);
    assert.equal(whole.body.length, big.length);
    const head = await fetch(`${base}${at('big.bin')}`, { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal(head.headers.get('content-length'), String(big.length));
    await api('DELETE', `/api/v1/files/${file.file_no}`);
    assert.equal((await get(at('big.bin'))).status, 404);
  });

  test('the answer from memory carries the same headers as the first one', async () => {
    await upload('same.png', red);
    const first = await get(at('w_120,f_webp/same.png'));
    const fast = h.services.deliveryCache.stats.fastHits;
    const second = await get(at('w_120,f_webp/same.png'));
    assert.equal(h.services.deliveryCache.stats.fastHits, fast + 1);
    const shape = (hs: Headers) =>
      [...hs.entries()].filter(([k]) => k !== 'date' && k !== 'x-request-id' && k !== 'keep-alive');
    assert.deepEqual(shape(second.headers), shape(first.headers));
    assert.ok(second.headers.get('x-request-id'));
    assert.equal(second.headers.get('access-control-allow-origin'), '*');
  });

  test('304 on If-None-Match and on If-Modified-Since, for an original and a held rendition', async () => {
    for (const path of [at('raw/data.bin'), at('w_50,f_png/held.png')]) {
      const first = await twice(path);
      const etag = first.headers.get('etag')!;
      const viaTag = await get(path, { 'if-none-match': etag });
      assert.equal(viaTag.status, 304, path);
      assert.equal(viaTag.body.length, 0);
      assert.equal(viaTag.headers.get('etag'), etag);
      assert.equal((await get(path, { 'if-none-match': `W/${etag}` })).status, 304, 'weak comparison');
      assert.equal((await get(path, { 'if-none-match': '"other"' })).status, 200);
      assert.equal((await get(path, { 'if-modified-since': first.headers.get('last-modified')! })).status, 304);
      assert.equal((await get(path, { 'if-modified-since': 'Mon, 01 Jan 2001 00:00:00 GMT' })).status, 200);
    }
  });

  test('If-Range: a matching strong ETag or exact date gets the range, anything else the whole file', async () => {
    for (const path of [at('raw/data.bin'), at('w_60,f_png/held.png')]) {
      const whole = await twice(path);
      const etag = whole.headers.get('etag')!;
      const match = await get(path, { range: 'bytes=0-9', 'if-range': etag });
      assert.equal(match.status, 206, path);
      assert.deepEqual(match.body, whole.body.subarray(0, 10));
      for (const stale of ['"0123456789abcdef"', `W/${etag}`, 'Mon, 01 Jan 2001 00:00:00 GMT']) {
        const full = await get(path, { range: 'bytes=0-9', 'if-range': stale });
        assert.equal(full.status, 200, `${path} If-Range ${stale}`);
        assert.deepEqual(full.body, whole.body);
      }
      // A date counts only once Last-Modified is a strong validator (a second old, RFC 9110 8.8.2.2).
      const modified = Date.parse(whole.headers.get('last-modified')!);
      const wait = modified + 2000 - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      const byDate = await get(path, { range: 'bytes=0-9', 'if-range': whole.headers.get('last-modified')! });
      assert.equal(byDate.status, 206);
      assert.deepEqual(byDate.body, whole.body.subarray(0, 10));
    }
  });

  test('a replaced file: its original and its renditions show the new bytes at once', async () => {
    await upload('swap.png', red);
    assert.deepEqual(await pixel((await twice(at('swap.png'))).body), [255, 0, 0]);
    assert.deepEqual(await pixel((await twice(at('w_80,f_png/swap.png'))).body), [255, 0, 0]);
    await upload('swap.png', blue);
    const original = await get(at('swap.png'));
    assert.equal(sha(original.body), sha(blue));
    assert.deepEqual(await pixel((await get(at('w_80,f_png/swap.png'))).body), [0, 0, 255]);
  });

  test('deleted, renamed, moved, folder renamed: the old address answers 404 at once', async () => {
    const gone = await upload('gone.png', red);
    await twice(at('gone.png'));
    await twice(at('w_70,f_png/gone.png'));
    await api('DELETE', `/api/v1/files/${gone.file_no}`);
    assert.equal((await get(at('gone.png'))).status, 404);
    assert.equal((await get(at('w_70,f_png/gone.png'))).status, 404);

    const renamed = await upload('before.png', red);
    await twice(at('before.png'));
    await twice(at('w_70,f_png/before.png'));
    await api('PATCH', `/api/v1/files/${renamed.file_no}/rename`, { name: 'after' });
    assert.equal((await get(at('before.png'))).status, 404);
    assert.equal((await get(at('w_70,f_png/before.png'))).status, 404);
    assert.equal((await get(at('after.png'))).status, 200);

    const moved = await upload('moving.png', red, 'here');
    const there = (await api('POST', '/api/v1/folders', { name: 'there' })) as { folder_no: string };
    await twice(at('here/moving.png'));
    await api('PATCH', `/api/v1/files/${moved.file_no}`, { folder_no: there.folder_no });
    assert.equal((await get(at('here/moving.png'))).status, 404);
    assert.equal((await get(at('there/moving.png'))).status, 200);

    const inFolder = await upload('inside.png', red, 'album');
    await twice(at('album/inside.png'));
    await twice(at('w_70,f_png/album/inside.png'));
    await api('POST', `/api/v1/folders/rename/${inFolder.folder_no}`, { name: 'album2' });
    assert.equal((await get(at('album/inside.png'))).status, 404);
    assert.equal((await get(at('w_70,f_png/album/inside.png'))).status, 404);
    assert.equal((await get(at('album2/inside.png'))).status, 200);
  });

  test('a file made private stops being served without a signature at once; held, it still needs one', async () => {
    const file = await upload('secret.png', red);
    await twice(at('secret.png'));
    await twice(at('w_90,f_png/secret.png'));
    await api('PATCH', `/api/v1/files/${file.file_no}`, { is_private: true });
    for (const path of [at('secret.png'), at('w_90,f_png/secret.png')]) {
      const res = await get(path);
      assert.equal(res.status, 403, path);
      assert.equal(((await JSON.parse(res.body.toString())) as { errorCode: string }).errorCode, 'SIGNED_URL_REQUIRED');
    }
    const signed = (await api('POST', `/api/v1/files/${file.file_no}/signed-url`, { transform: 'w_90,f_png' })) as {
      data: { url: string };
    };
    const url = new URL(signed.data.url);
    const held = await twice(`${url.pathname}${url.search}`);
    assert.equal(held.status, 200);
    assert.match(held.headers.get('cache-control') ?? '', /^private/);
    // Held in memory now: still nothing without the signature, nor with a wrong one, nor with
    // the signature of another URL.
    assert.equal((await get(url.pathname)).status, 403);
    const forged = `${url.pathname}?expires=${url.searchParams.get('expires')}&signature=${'A'.repeat(43)}`;
    assert.equal((await get(forged)).status, 403);
    assert.equal((await get(`${at('secret.png')}${url.search}`)).status, 403);
    assert.equal((await get(url.pathname, { range: 'bytes=0-9' })).status, 403);
  });

  test('?v= with the start of the file hash makes the URL immutable; anything else does not', async () => {
    const file = await upload('versioned.png', red);
    const pinned = await twice(`${at('versioned.png')}?v=${file.hash.slice(0, 12)}`);
    assert.equal(pinned.headers.get('cache-control'), 'public, max-age=31536000, immutable');
    assert.equal(sha(pinned.body), sha(red));
    const rendition = await twice(`${at('w_40,f_png/versioned.png')}?v=${file.hash.slice(0, 12)}`);
    assert.equal(rendition.headers.get('cache-control'), 'public, max-age=31536000, immutable');
    for (const v of ['0000000000', file.hash.slice(0, 6), `${file.hash.slice(0, 12)}&v=1`])
      assert.doesNotMatch((await twice(`${at('versioned.png')}?v=${v}`)).headers.get('cache-control')!, /immutable/);
    // Replaced: the old version's URL is no longer pinned to what it now answers.
    await upload('versioned.png', blue);
    assert.doesNotMatch(
      (await get(`${at('versioned.png')}?v=${file.hash.slice(0, 12)}`)).headers.get('cache-control')!,
      /immutable/,
    );
  });

  test('another node, which gets no event, stops serving a deleted file once its lookup TTL has passed', async () => {
    // A second process on the same database and storage, remembering lookups for 300 ms.
    const services = await createServices({ ...h.config, deliveryLookupTtlMs: 300 });
    const other = await buildApp(services, { logger: false });
    try {
      const otherBase = await other.listen({ host: '127.0.0.1', port: 0 });
      const file = await upload('elsewhere.png', red);
      const large = await upload('elsewhere.bin', Buffer.alloc(1_200_000, 7));
      const there = async (p: string) => (await fetch(`${otherBase}${at(p)}`)).status;
      for (const p of ['elsewhere.png', 'w_30,f_png/elsewhere.png', 'elsewhere.bin'])
        for (let i = 0; i < 2; i++) assert.equal(await there(p), 200);
      await api('DELETE', `/api/v1/files/${file.file_no}`);
      await api('DELETE', `/api/v1/files/${large.file_no}`);
      // Its bytes are gone at once: the other node, still remembering the lookup, must not fail.
      assert.equal(await there('elsewhere.bin'), 404);
      assert.equal((await get(at('elsewhere.png'))).status, 404, 'this node: at once');
      // The other node: within its TTL (polled, for at most 20 times the TTL, so a slow machine
      // does not fail this; a node that never forgot would).
      const deadline = Date.now() + 6000;
      let statuses: number[] = [];
      do {
        statuses = [await there('elsewhere.png'), await there('w_30,f_png/elsewhere.png')];
        if (statuses.every((s) => s === 404)) break;
        await new Promise((r) => setTimeout(r, 50));
      } while (Date.now() < deadline);
      assert.deepEqual(statuses, [404, 404]);
    } finally {
      await other.close();
      await services.close();
    }
  });
});
