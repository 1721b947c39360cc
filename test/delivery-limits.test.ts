// Delivery URLs are public: what one can make the server do, anyone can. From the attacker's
// side: renditions too large, enlargements nobody asked for, effects that cost seconds, renders
// that outlive their budget, a burst of distinct renders, and a burst of the same one
// (docs/api/delivery.md#limits).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import sharp, { type Sharp } from 'sharp';
import { renderDefaults } from '../src/config.ts';
import { type Harness, makeHarness, addFile } from './helpers/harness.ts';
import { localServer } from './helpers/servers.ts';
import { externalService } from './helpers/services.ts';
import { freshS3Storage } from './helpers/storage.ts';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

const s3 = externalService('STOWAGE_TEST_S3_ENDPOINT', 'an S3-compatible server (scripts/start-swift.sh)');

type Got = { status: number; headers: Headers; body: Buffer; json: any };

async function fetchAll(base: string, path: string): Promise<Got> {
  const res = await fetch(`${base}${path}`);
  const body = Buffer.from(await res.arrayBuffer());
  let json: any;
  if ((res.headers.get('content-type') ?? '').includes('json')) json = JSON.parse(body.toString());
  return { status: res.status, headers: res.headers, body, json };
}

const add = addFile;

const flat = (width: number, height: number) =>
  sharp({ create: { width, height, channels: 3, background: '#3060a0' } })
    .jpeg()
    .toBuffer();

/** A photo-like source: noise makes every render do real work. */
const noisy = (width: number, height: number) =>
  sharp({
    create: { width, height, channels: 3, background: '#808080', noise: { type: 'gaussian', mean: 128, sigma: 40 } },
  })
    .jpeg()
    .toBuffer();

describe('delivery limits: output size, enlargement, effect strength', () => {
  let h: Harness;
  let base: string;
  let origin: Awaited<ReturnType<typeof localServer>>;
  let photo: Buffer;
  const get = (p: string) => fetchAll(base, `/${h.ws.workspace_id}/${p}`);
  const refused = async (p: string, code: string, message: RegExp) => {
    const res = await get(p);
    assert.equal(res.status, 400, `${p}: ${res.status} ${res.body.toString().slice(0, 200)}`);
    assert.equal(res.json.errorCode, code, p);
    assert.equal(res.json.success, false);
    assert.match(res.json.message, message, p);
  };
  const size = async (p: string) => {
    const res = await get(p);
    assert.equal(res.status, 200, `${p}: ${res.body.toString().slice(0, 200)}`);
    const meta = await sharp(res.body).metadata();
    return [meta.width, meta.height];
  };

  before(async () => {
    photo = await flat(1200, 900);
    origin = await localServer((req, res) => {
      if (req.url === '/img/photo.jpg') res.writeHead(200, { 'content-type': 'image/jpeg' }).end(photo);
      else res.writeHead(404).end();
    });
    h = await makeHarness('sqlite', { config: { outboundAllow: ['127.0.0.1'] } });
    base = await h.app.listen({ host: '127.0.0.1', port: 0 });
    await add(h, 'photo.jpg', photo);
    await add(h, 'wide.jpg', await flat(6000, 4000));
    await add(h, 'big.jpg', await flat(6000, 5000));
    const made = await fetch(`${base}/api/v1/sources`, {
      method: 'POST',
      headers: { ...h.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'web', type: 'image_source', configuration: { base_url: `${origin.url}/img` } }),
    });
    assert.equal(made.status, 201, await made.text());
  });
  after(async () => {
    await h?.close();
    await origin?.close();
  });

  test('huge dimensions are refused with the limit in the message, before any pixel is decoded', async () => {
    const before = h.services.delivery.stats.renditionsMade;
    const limit = /the limit is 25 megapixels and 8192 px per side/;
    await refused('w_10000,h_10000,el_1/photo.jpg', 'RENDITION_TOO_LARGE', /10000x10000 px; /);
    await refused('w_10000,h_10000,el_1/photo.jpg', 'RENDITION_TOO_LARGE', limit);
    await refused('w_9000,el_1/photo.jpg', 'RENDITION_TOO_LARGE', /9000x6750 px/);
    await refused('w_8000,h_8000,c_pad,el_1/photo.jpg', 'RENDITION_TOO_LARGE', /8000x8000/);
    await refused('w_100,ar_1:90,el_1/photo.jpg', 'RENDITION_TOO_LARGE', /100x9000/);
    // What rotation makes counts: 6000x4000 turned by 45 degrees is a 7072 px square.
    await refused('r_45/wide.jpg', 'RENDITION_TOO_LARGE', /7072x7072/);
    // No resize: the rendition is the source's size, here 30 megapixels.
    await refused('f_webp/big.jpg', 'RENDITION_TOO_LARGE', /6000x5000/);
    assert.equal(h.services.delivery.stats.renditionsMade, before, 'nothing was rendered');
    assert.deepEqual(await size('w_1000/big.jpg'), [1000, 833], 'a smaller rendition of the same file is fine');
  });

  test('no enlargement unless el_1: the box shrinks to the source, keeping its shape', async () => {
    assert.deepEqual(await size('w_2400/photo.jpg'), [1200, 900]);
    assert.deepEqual(
      await size('w_10000,h_10000/photo.jpg'),
      [900, 900],
      'c_fill: the largest square the source holds',
    );
    assert.deepEqual(await size('w_1600,h_900,c_fill/photo.jpg'), [1200, 675]);
    assert.deepEqual(await size('w_2400,h_2400,c_fit/photo.jpg'), [1200, 900]);
    assert.deepEqual(await size('w_2400,h_3600,c_pad/photo.jpg'), [1200, 1800], 'c_pad pads the image at its own size');
    assert.deepEqual(await size('w_2400,el_1/photo.jpg'), [2400, 1800]);
    assert.deepEqual(await size('w_600/photo.jpg'), [600, 450], 'shrinking is untouched');
  });

  test('a rotation with a resize (resized first, then turned: the docs order) looks as sharp makes it directly', async () => {
    // Red left half, blue right half, a green band at the top: any turn or shift shows.
    const src = await sharp({ create: { width: 1200, height: 900, channels: 3, background: '#ff0000' } })
      .composite([
        { input: { create: { width: 600, height: 900, channels: 3, background: '#0000ff' } }, left: 600, top: 0 },
        { input: { create: { width: 1200, height: 150, channels: 3, background: '#00ff00' } }, left: 0, top: 0 },
      ])
      .png()
      .toBuffer();
    await add(h, 'turn.png', src);
    const then = async (s: Sharp, turn: (t: Sharp) => Sharp) => turn(sharp(await s.png().toBuffer()));
    const cases: [string, (s: Sharp) => Promise<Sharp>][] = [
      [
        'r_90,w_300,h_200,c_fill,p_t,f_png',
        (s) => then(s.resize({ width: 300, height: 200, position: 'north' }), (t) => t.rotate(90)),
      ],
      [
        'r_30,w_200,bg_ffffff,f_png',
        (s) => then(s.resize({ width: 200 }), (t) => t.rotate(30, { background: '#ffffff' })),
      ],
      ['r_-90,h_120,f_png', (s) => then(s.resize({ height: 120 }), (t) => t.rotate(-90))],
    ];
    for (const [tokens, direct] of cases) {
      const res = await get(`${tokens}/turn.png`);
      assert.equal(res.status, 200, tokens);
      const ours = await sharp(res.body).removeAlpha().raw().toBuffer({ resolveWithObject: true });
      const theirs = await (await direct(sharp(src))).removeAlpha().raw().toBuffer({ resolveWithObject: true });
      assert.deepEqual([ours.info.width, ours.info.height], [theirs.info.width, theirs.info.height], tokens);
      let diff = 0;
      for (let i = 0; i < ours.data.length; i++) diff += Math.abs(ours.data[i] - theirs.data[i]);
      assert.ok(diff / ours.data.length < 4, `${tokens}: mean difference ${(diff / ours.data.length).toFixed(2)}`);
    }
  });

  test('a source from an origin is checked the same way (its size read from its header)', async () => {
    const web = (p: string) => fetchAll(base, `/${h.ws.workspace_id}-web/${p}`);
    const big = await web('w_9000,el_1/photo.jpg');
    assert.equal(big.status, 400);
    assert.equal(big.json.errorCode, 'RENDITION_TOO_LARGE');
    const up = await web('w_2400/photo.jpg');
    assert.equal(up.status, 200);
    assert.equal((await sharp(up.body).metadata()).width, 1200);
  });

  test('blur and sharpen are capped by the rendition size', async () => {
    // A 4000 px e_blur:2000 took 3 s of CPU before.
    await refused(
      'w_4000,el_1,e_blur:200/photo.jpg',
      'EFFECT_TOO_STRONG',
      /e_blur:200 .* 4000x3000 .* at most e_blur:25 /,
    );
    await refused('w_100,e_blur:100/photo.jpg', 'EFFECT_TOO_STRONG', /at most e_blur:25 /);
    await refused('w_4000,el_1,e_sharpen:1000/photo.jpg', 'EFFECT_TOO_STRONG', /at most e_sharpen:500 /);
    assert.deepEqual(await size('w_400,e_blur:50/photo.jpg'), [400, 300], 'strong blur on a small rendition is fine');
    assert.deepEqual(await size('w_400,e_sharpen:1000/photo.jpg'), [400, 300]);
  });

  test('limits hold under parallel requests', async () => {
    const before = h.services.delivery.stats.renditionsMade;
    const paths = Array.from({ length: 24 }, (_, i) =>
      i % 2 ? `f_webp,q_${50 + i}/big.jpg` : `w_100,e_blur:${100 + i}/photo.jpg`,
    );
    const answers = await Promise.all(paths.map((p) => get(p)));
    for (const [i, res] of answers.entries()) {
      assert.equal(res.status, 400, paths[i]);
      assert.equal(res.json.errorCode, i % 2 ? 'RENDITION_TOO_LARGE' : 'EFFECT_TOO_STRONG');
    }
    assert.equal(h.services.delivery.stats.renditionsMade, before);
  });

  test('a full render queue does not hide the limits: over-limit requests get 400, not 503', async () => {
    // One slot, no waiting room: before the limits were checked ahead of the queue, all but one
    // of these answered 503 RENDER_BUSY.
    const tight = await makeHarness('sqlite', {
      config: { render: { ...renderDefaults(), concurrency: 1, queue: 0 } },
    });
    try {
      const url = await tight.app.listen({ host: '127.0.0.1', port: 0 });
      await add(tight, 'big.jpg', await flat(6000, 5000));
      await add(tight, 'photo.jpg', photo);
      const paths = Array.from({ length: 24 }, (_, i) =>
        i % 2 ? `f_webp,q_${50 + i}/big.jpg` : `w_100,e_blur:${100 + i}/photo.jpg`,
      );
      const answers = await Promise.all(paths.map((p) => fetchAll(url, `/${tight.ws.workspace_id}/${p}`)));
      assert.deepEqual(
        answers.map((a) => [a.status, a.json?.errorCode]),
        paths.map((_, i) => [400, i % 2 ? 'RENDITION_TOO_LARGE' : 'EFFECT_TOO_STRONG']),
      );
      assert.equal(tight.services.delivery.stats.renditionsMade, 0);
      assert.equal(tight.services.delivery.queue.active, 0, 'no slot was taken');
    } finally {
      await tight.close();
    }
  });
});

describe('renders from storage that is not local disk (S3)', { skip: s3.skip }, () => {
  let h: Harness;
  let base: string;
  before(async () => {
    h = await makeHarness('sqlite', { config: { storage: await freshS3Storage() } });
    base = await h.app.listen({ host: '127.0.0.1', port: 0 });
    await add(h, 'photo.jpg', await flat(1200, 900));
  });
  after(() => h?.close());

  test('the object is written to a temporary file, checked and rendered from it, and the file removed', async () => {
    const get = (p: string) => fetchAll(base, `/${h.ws.workspace_id}/${p}`);
    const big = await get('w_9000,el_1/photo.jpg');
    assert.equal(big.json.errorCode, 'RENDITION_TOO_LARGE');
    const small = await get('w_2400,f_webp/photo.jpg');
    assert.equal(small.status, 200);
    assert.deepEqual(
      [(await sharp(small.body).metadata()).width, small.headers.get('content-type')],
      [1200, 'image/webp'],
    );
    const spools = join(h.config.dataDir, 'tmp', 'renders');
    assert.deepEqual(readdirSync(spools), [], 'no temporary file left');
  });
});

describe('the same limits on an upload transform', () => {
  let h: Harness;
  let base: string;
  before(async () => {
    h = await makeHarness('sqlite');
    base = await h.app.listen({ host: '127.0.0.1', port: 0 });
  });
  after(() => h?.close());

  test('an upload whose transform is too large is refused and stores nothing; enlargement needs el_1', async () => {
    const photo = await flat(1200, 900);
    const upload = async (transform: string) => {
      const form = new FormData();
      form.append('file', new Blob([new Uint8Array(photo)]));
      form.append('file_name', 'p.jpg');
      form.append('transform', transform);
      form.append('random_prefix', 'true');
      const res = await fetch(`${base}/api/v1/uploads`, { method: 'POST', headers: h.auth, body: form });
      return { status: res.status, body: (await res.json()) as any };
    };
    const big = await upload('w_10000,h_10000,el_1');
    assert.equal(big.status, 400);
    assert.equal(big.body.errorCode, 'RENDITION_TOO_LARGE');
    const blurred = await upload('w_4000,el_1,e_blur:200');
    assert.equal(blurred.body.errorCode, 'EFFECT_TOO_STRONG');
    const files = await h.services.db.kysely.selectFrom('files').select('id').execute();
    assert.equal(files.length, 0, 'nothing stored');
    const kept = await upload('w_2400');
    assert.equal(kept.status, 201, JSON.stringify(kept.body));
    assert.deepEqual([kept.body.width, kept.body.height], [1200, 900]);
    const up = await upload('w_2400,el_1');
    assert.deepEqual([up.body.width, up.body.height], [2400, 1800]);
  });
});

describe('delivery limits: a time budget per render', () => {
  let h: Harness;
  let base: string;
  before(async () => {
    h = await makeHarness('sqlite', { config: { render: { ...renderDefaults(), timeoutMs: 1 } } });
    base = await h.app.listen({ host: '127.0.0.1', port: 0 });
    await add(h, 'photo.jpg', await noisy(2000, 1500));
  });
  after(() => h?.close());

  test('a render over its budget is answered 503 RENDER_TIMEOUT with retry-after', async () => {
    const res = await fetchAll(base, `/${h.ws.workspace_id}/w_1500,e_blur:100/photo.jpg`);
    assert.equal(res.status, 503, res.body.toString().slice(0, 200));
    assert.equal(res.json.errorCode, 'RENDER_TIMEOUT');
    assert.equal(res.json.error, 'Service unavailable');
    assert.match(res.json.message, /longer than 1 ms/);
    assert.equal(res.headers.get('retry-after'), '1');
    const metrics = await h.services.metrics.registry.getSingleMetricAsString('stowage_render_rejects_total');
    assert.match(metrics, /reason="timeout"} 1/);
  });
});

describe('delivery limits: the render queue', () => {
  let h: Harness;
  let base: string;
  before(async () => {
    h = await makeHarness('sqlite', { config: { render: { ...renderDefaults(), concurrency: 1, queue: 1 } } });
    base = await h.app.listen({ host: '127.0.0.1', port: 0 });
    await add(h, 'photo.jpg', await noisy(3000, 2000));
  });
  after(() => h?.close());

  test('one slot and one place in the queue: a burst of distinct renders gets 503 RENDER_BUSY for the rest', async () => {
    const paths = Array.from({ length: 6 }, (_, i) => `/${h.ws.workspace_id}/e_blur:24,q_${60 + i}/photo.jpg`);
    const answers = await Promise.all(paths.map((p) => fetchAll(base, p)));
    const ok = answers.filter((a) => a.status === 200);
    const busy = answers.filter((a) => a.status === 503);
    assert.equal(ok.length + busy.length, 6, answers.map((a) => a.status).join());
    assert.ok(ok.length >= 2, 'the running render and the queued one are made');
    assert.ok(busy.length >= 1, 'the rest are refused at once');
    for (const b of busy) {
      assert.equal(b.json.errorCode, 'RENDER_BUSY');
      assert.match(b.json.message, /retry in 2 s/);
      assert.equal(b.headers.get('retry-after'), '2');
    }
    const metrics = await h.services.metrics.registry.getSingleMetricAsString('stowage_render_rejects_total');
    assert.match(metrics, new RegExp(`reason="queue_full"} ${busy.length}`));
    // The refused ones are made once there is room.
    for (const [i, a] of answers.entries())
      if (a.status === 503) assert.equal((await fetchAll(base, paths[i])).status, 200);
    const histogram = await h.services.metrics.registry.getSingleMetricAsString('stowage_render_duration_seconds');
    assert.match(histogram, /stowage_render_duration_seconds_count\{outcome="ok"} 6/);
    const depth = await h.services.metrics.registry.getSingleMetricAsString('stowage_render_queue_depth');
    assert.match(depth, /stowage_render_queue_depth 0/);
  });

  test('single flight: identical parallel requests make the rendition once, and all get it', async () => {
    const before = h.services.delivery.stats.renditionsMade;
    const path = `/${h.ws.workspace_id}/e_blur:20,q_55/photo.jpg`;
    const answers = await Promise.all(Array.from({ length: 8 }, () => fetchAll(base, path)));
    assert.deepEqual(
      answers.map((a) => a.status),
      Array(8).fill(200),
      'joining a render takes no place in the queue',
    );
    for (const a of answers) assert.deepEqual(a.body, answers[0].body);
    assert.equal(h.services.delivery.stats.renditionsMade, before + 1);
  });
});
