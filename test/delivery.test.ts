// Delivery (docs/api/delivery.md): originals with Range, ETag and Last-Modified;
// renditions made once by sharp and then served from the cache; f_auto; strict tokens.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import sharp from 'sharp';
import { type Harness, makeHarness } from './helpers/harness.ts';
import { call } from './helpers/http.ts';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('delivery', () => {
  let h: Harness;
  let base: string;
  let photo: Buffer;
  const data = randomBytes(100_000);
  const add = async (name: string, body: Buffer, folder: string[] = []) => {
    const staged = await h.services.uploads.stage(h.ws.workspace_id, Readable.from([body]));
    return h.services.uploads.finish(
      staged,
      { name, folder, tags: [], metadata: {}, custom_id: null, randomPrefix: false, transform: null, webhookUrl: null },
      'direct',
    );
  };
  const get = async (path: string, headers: Record<string, string> = {}) => {
    const res = await fetch(`${base}${path}`, { headers });
    return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) };
  };
  const at = (p: string) => `/${h.ws.workspace_id}/${p}`;

  before(async () => {
    h = await makeHarness('sqlite', { config: { maxImagePixels: 20_000_000 } });
    base = await h.app.listen({ host: '127.0.0.1', port: 0 });
    photo = await sharp({ create: { width: 1200, height: 800, channels: 3, background: '#3060a0' } })
      .jpeg()
      .toBuffer();
    await add('data.bin', data, ['raw files']);
    await add('photo.jpg', photo, ['gallery']);
    await add('café.jpg', photo, ['gallery']);
    await add('notes.txt', Buffer.from('plain text'));
    await add('odd.jpg', photo, ['w_200']);
  });
  after(() => h?.close());

  test('an original: exact bytes, type, ETag, Last-Modified, and headers that keep it inert', async () => {
    const res = await get(at('raw%20files/data.bin'));
    assert.equal(res.status, 200);
    assert.equal(sha(res.body), sha(data));
    assert.equal(res.headers.get('etag'), `"${sha(data)}"`);
    assert.ok(res.headers.get('last-modified'));
    assert.equal(res.headers.get('accept-ranges'), 'bytes');
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
    assert.match(res.headers.get('content-security-policy') ?? '', /sandbox/);
    assert.equal(res.headers.get('content-length'), String(data.length));
    const img = await get(at('gallery/caf%C3%A9.jpg'));
    assert.equal(img.headers.get('content-type'), 'image/jpeg');
    assert.equal(sha(img.body), sha(photo));
  });

  test('Range: a slice, a suffix, an open end; 416 past the end', async () => {
    const path = at('raw%20files/data.bin');
    const slice = await get(path, { range: 'bytes=10-19' });
    assert.equal(slice.status, 206);
    assert.equal(slice.headers.get('content-range'), `bytes 10-19/${data.length}`);
    assert.deepEqual(slice.body, data.subarray(10, 20));
    assert.deepEqual((await get(path, { range: 'bytes=-5' })).body, data.subarray(data.length - 5));
    assert.deepEqual((await get(path, { range: 'bytes=99990-' })).body, data.subarray(99_990));
    const past = await get(path, { range: `bytes=${data.length}-` });
    assert.equal(past.status, 416);
    assert.equal(past.headers.get('content-range'), `bytes */${data.length}`);
    assert.equal((await get(path, { range: 'lines=1-2' })).status, 200, 'an unknown unit is ignored');
  });

  test('conditional requests: If-None-Match and If-Modified-Since answer 304', async () => {
    const path = at('raw%20files/data.bin');
    const first = await get(path);
    const etag = first.headers.get('etag')!;
    const cached = await get(path, { 'if-none-match': etag });
    assert.equal(cached.status, 304);
    assert.equal(cached.body.length, 0);
    assert.equal((await get(path, { 'if-none-match': '"other"' })).status, 200);
    assert.equal((await get(path, { 'if-modified-since': first.headers.get('last-modified')! })).status, 304);
    assert.equal((await get(path, { 'if-modified-since': 'Mon, 01 Jan 2001 00:00:00 GMT' })).status, 200);
  });

  test('a rendition is made once, then served from the cache', async () => {
    const before = { ...h.services.delivery.stats };
    const first = await get(at('w_300,f_png/gallery/photo.jpg'));
    assert.equal(first.status, 200);
    assert.equal(first.headers.get('content-type'), 'image/png');
    const meta = await sharp(first.body).metadata();
    assert.deepEqual([meta.format, meta.width, meta.height], ['png', 300, 200]);
    assert.match(first.headers.get('cache-control') ?? '', /max-age=86400/);
    const second = await get(at('w_300,f_png/gallery/photo.jpg'));
    assert.deepEqual(second.body, first.body);
    assert.equal(h.services.delivery.stats.renditionsMade, before.renditionsMade + 1, 'no image work the second time');
    // The second answer came from memory (the hot cache), not even from the stored copy.
    assert.equal(h.services.delivery.stats.renditionCacheHits, before.renditionCacheHits);
    const crop = await sharp((await get(at('w_100,h_100,c_fill,e_grayscale/gallery/photo.jpg'))).body).metadata();
    assert.deepEqual([crop.width, crop.height], [100, 100]);
  });

  test('every token has its effect', async () => {
    // Top half red, bottom half blue: positions, flips and padding show in the colours.
    const twoTone = await sharp({ create: { width: 200, height: 200, channels: 3, background: '#ff0000' } })
      .composite([
        { input: { create: { width: 200, height: 100, channels: 3, background: '#0000ff' } }, top: 100, left: 0 },
      ])
      .png()
      .toBuffer();
    const noisy = await sharp({
      create: {
        width: 400,
        height: 300,
        channels: 3,
        background: '#808080',
        noise: { type: 'gaussian', mean: 128, sigma: 50 },
      },
    })
      .png()
      .toBuffer();
    await add('two-tone.png', twoTone, ['tokens']);
    await add('noisy.png', noisy, ['tokens']);
    const render = async (tokens: string, file = 'two-tone.png') => {
      const res = await get(at(`${tokens}/tokens/${file}`));
      assert.equal(res.status, 200, `${tokens}: ${res.body.toString().slice(0, 200)}`);
      const img = sharp(res.body);
      return {
        meta: await img.metadata(),
        stats: await img.stats(),
        bytes: res.body.length,
        type: res.headers.get('content-type'),
      };
    };
    const dims = async (t: string, file?: string) => {
      const { meta } = await render(t, file);
      return [meta.width, meta.height];
    };
    const rgb = (stats: { channels: { mean: number }[] }) => stats.channels.slice(0, 3).map((c) => Math.round(c.mean));
    assert.deepEqual(await dims('w_320,ar_16:9,c_fill,el_1'), [320, 180], 'el_1 enlarges');
    assert.deepEqual(await dims('w_320,ar_16:9,c_fill'), [200, 113], 'no enlargement: the box shrinks, keeping 16:9');
    assert.deepEqual(await dims('h_90,ar_2:1'), [180, 90]);
    assert.deepEqual(await dims('w_100,h_50,c_fit', 'noisy.png'), [67, 50]);
    assert.deepEqual(await dims('w_100,h_50,c_pad', 'noisy.png'), [100, 50]);
    assert.deepEqual(await dims('w_1000,h_1000,c_crop', 'noisy.png'), [400, 300], 'c_crop never enlarges');
    assert.deepEqual(await dims('r_90', 'noisy.png'), [300, 400]);
    const top = rgb((await render('w_100,h_50,c_fill,p_t')).stats);
    const bottom = rgb((await render('w_100,h_50,c_fill,p_b')).stats);
    assert.ok(top[0] > 200 && top[2] < 50, `p_t keeps the red top (${top})`);
    assert.ok(bottom[2] > 200 && bottom[0] < 50, `p_b keeps the blue bottom (${bottom})`);
    // The docs' order: the crop is placed first (p_t keeps the red top), then mirrored.
    const flipped = rgb((await render('w_100,h_50,c_fill,p_t,flip_v')).stats);
    assert.ok(flipped[0] > 200 && flipped[2] < 50, `flip_v after the crop (${flipped})`);
    const mirrored = (await get(at('w_100,h_100,flip_v,f_png/tokens/two-tone.png'))).body;
    const top50 = await sharp(mirrored).extract({ left: 0, top: 0, width: 100, height: 50 }).png().toBuffer();
    const topHalf = rgb(await sharp(top50).stats());
    assert.ok(topHalf[2] > 200 && topHalf[0] < 50, `flip_v puts blue on top (${topHalf})`);
    const padded = await render('w_200,h_400,c_pad,bg_00ff00,f_png');
    assert.ok(rgb(padded.stats)[1] > 60, 'bg_ colours the padding');
    const grey = rgb((await render('e_grayscale,f_png')).stats);
    assert.ok(grey[0] === grey[1] && grey[1] === grey[2], `e_grayscale (${grey})`);
    const sd = async (t: string) => (await render(t, 'noisy.png')).stats.channels[0].stdev;
    const plain = await sd('f_png');
    assert.ok((await sd('e_blur:60,f_png')) < plain * 0.7, 'e_blur smooths');
    assert.ok((await sd('e_sharpen:300,f_png')) > plain, 'e_sharpen adds contrast');
    const low = await render('q_10,f_jpg', 'noisy.png');
    const high = await render('q_95,f_jpg', 'noisy.png');
    assert.ok(low.bytes < high.bytes * 0.6, `q_ sets quality (${low.bytes} vs ${high.bytes})`);
    assert.equal((await render('q_auto,f_webp')).type, 'image/webp');
    assert.equal((await render('w_50,f_gif')).type, 'image/gif');
    assert.equal((await render('w_50,f_avif')).type, 'image/avif');
  });

  test('f_auto picks by Accept and says Vary: Accept', async () => {
    const path = at('w_120,f_auto/gallery/photo.jpg');
    for (const [accept, type] of [
      ['image/avif,image/webp,*/*', 'image/avif'],
      ['image/webp,*/*', 'image/webp'],
      ['*/*', 'image/jpeg'],
    ]) {
      const res = await get(path, { accept });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), type, accept);
      assert.equal(res.headers.get('vary'), 'Accept');
      assert.equal((await sharp(res.body).metadata()).width, 120);
    }
  });

  test('strict tokens: unknown or malformed is 400; tokens on a non-image is 400', async () => {
    for (const tokens of ['w_abc', 'w_100,zz_1', 'f_bmp', 'q_0', 'c_stretch', 'fo_car', 'l_text:Arial_20:hi']) {
      const res = await get(at(`${tokens}/gallery/photo.jpg`));
      assert.equal(res.status, 400, tokens);
      assert.equal(JSON.parse(res.body.toString()).success, false);
    }
    assert.equal((await get(at('w_100/notes.txt'))).status, 400);
    // A token given twice is canonicalised, not refused: the later one wins.
    const twice = await get(at('w_100,w_200/gallery/photo.jpg'));
    assert.equal(twice.status, 200);
    assert.equal((await sharp(twice.body).metadata()).width, 200);
  });

  test('a folder that looks like tokens is still a folder', async () => {
    const res = await get(at('w_200/odd.jpg'));
    assert.equal(res.status, 200);
    assert.equal(sha(res.body), sha(photo));
  });

  test('not found: unknown file, unknown workspace, dot segments; the file record points at working URLs', async () => {
    assert.equal((await get(at('gallery/nope.jpg'))).status, 404);
    assert.equal((await get('/ZZZZZZZZZZZZ/gallery/photo.jpg')).status, 404);
    assert.equal((await get(at('gallery/%2E%2E/data.bin'))).status, 404);
    const record = await add('linked.jpg', photo, ['links']);
    assert.equal((await get(new URL(record.url).pathname)).status, 200);
    const thumb = await get(new URL(record.thumbnail!).pathname);
    assert.equal(thumb.status, 200);
    assert.ok(((await sharp(thumb.body).metadata()).width ?? 999) <= 200);
  });

  test('decoding is bounded: an image over the pixel limit is refused, not decoded', async () => {
    const huge = await sharp({ create: { width: 6000, height: 4000, channels: 3, background: '#000' } })
      .png({ compressionLevel: 9 })
      .toBuffer();
    await add('huge.png', huge);
    const res = await get(at('w_100/huge.png'));
    assert.equal(res.status, 400);
    assert.equal(JSON.parse(res.body.toString()).errorCode, 'IMAGE_TOO_LARGE');
  });

  test('a private file: only through signed, expiring URLs, each good for its own path', async () => {
    const record = await add('secret.jpg', photo);
    const updated = await h.services.files.update(h.ws.workspace_id, record.file_no, { is_private: true });
    const code = async (path: string) => JSON.parse((await get(path)).body.toString()).errorCode;
    assert.equal((await get(at('secret.jpg'))).status, 403);
    assert.equal(await code(at('secret.jpg')), 'SIGNED_URL_REQUIRED');
    const signed = new URL(updated.url);
    assert.ok(
      signed.searchParams.get('signature') && signed.searchParams.get('expires'),
      'the record carries a signed URL',
    );
    const ok = await get(signed.pathname + signed.search);
    assert.equal(ok.status, 200);
    assert.equal(sha(ok.body), sha(photo));
    assert.match(ok.headers.get('cache-control') ?? '', /^private/);
    const thumb = new URL(updated.thumbnail!);
    assert.equal((await get(thumb.pathname + thumb.search)).status, 200, 'the thumbnail is signed too');
    const tampered = new URLSearchParams(signed.search);
    tampered.set('expires', String(Number(tampered.get('expires')) + 1000));
    assert.equal(await code(`${signed.pathname}?${tampered}`), 'INVALID_SIGNATURE');
    assert.equal(
      await code(`/${h.ws.workspace_id}/w_50/secret.jpg${signed.search}`),
      'INVALID_SIGNATURE',
      'not valid for a rendition',
    );
    const past = new URL(
      h.services.deliverySigner.sign(`${base}${at('secret.jpg')}`, Math.floor(Date.now() / 1000) - 5),
    );
    assert.equal(await code(past.pathname + past.search), 'URL_EXPIRED');
    // Refused renditions are not made either: a stranger cannot spend the server's CPU on a
    // private file (48 distinct sizes at once, none with a valid signature).
    const made = h.services.delivery.stats.renditionsMade;
    const refused = await Promise.all(
      Array.from({ length: 48 }, (_, i) =>
        code(`/${h.ws.workspace_id}/w_${100 + i}/secret.jpg${i % 2 ? signed.search : ''}`),
      ),
    );
    assert.deepEqual(new Set(refused), new Set(['SIGNED_URL_REQUIRED', 'INVALID_SIGNATURE']));
    assert.equal(h.services.delivery.stats.renditionsMade, made, 'nothing rendered for a refused URL');
    const minted = await call(h.app, 'POST', `/api/v1/files/${record.file_no}/signed-url`, {
      body: { expires_in: 60, transform: 'w_50' },
      headers: h.auth,
    });
    assert.equal(minted.status, 200, JSON.stringify(minted.body));
    const mintedUrl = new URL(minted.body.data.url);
    const small = await get(mintedUrl.pathname + mintedUrl.search);
    assert.equal(small.status, 200);
    assert.equal((await sharp(small.body).metadata()).width, 50);
    assert.ok(Math.abs(minted.body.data.expires_at - (Date.now() / 1000 + 60)) < 5);
  });

  test('deleting a file deletes its cached renditions', async () => {
    const record = await add(
      'temp.jpg',
      randomBytes(10).length
        ? await sharp({ create: { width: 50, height: 50, channels: 3, background: '#f00' } })
            .jpeg()
            .toBuffer()
        : photo,
    );
    assert.equal((await get(at('w_20/temp.jpg'))).status, 200);
    const blob = await h.services.db.kysely
      .selectFrom('blobs')
      .select('storage_key')
      .where('sha256', '=', record.hash)
      .executeTakeFirstOrThrow();
    const renditions = async () => {
      const keys: string[] = [];
      for await (const o of h.services.storage.list(`${blob.storage_key}.renditions/`)) keys.push(o.key);
      return keys;
    };
    assert.equal((await renditions()).length, 1);
    await h.services.files.delete(h.ws.workspace_id, record.file_no);
    assert.deepEqual(await renditions(), []);
  });
});
