// Video posters through delivery (issue 21, `thumb_ar`; docs/api/delivery.md#video-posters): real
// ffmpeg on clips made here, served through the route as any rendition is (render queue, single
// flight, time budget, rendition cache ledger, signatures), and the record's `thumbnail`.
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { after, before, describe, test } from 'node:test';
import sharp from 'sharp';
import { Stowage } from '../sdk/src/index.ts';
import { renderDefaults } from '../src/config.ts';
import { ERROR_CATALOGUE } from '../src/contract/error-catalogue.ts';
import { signTransformUrl } from '../src/crypto/transform-url.ts';
import { videoDefaults } from '../src/media/video/engine.ts';
import { parsePosterTokens, posterName } from '../src/media/video/poster-tokens.ts';
import { DIALECTS, type Harness, makeHarness } from './helpers/harness.ts';
import { call, type Fetched, readFetched } from './helpers/http.ts';
import { freshS3Storage, UPLOAD_MATRIX } from './helpers/storage.ts';
import { clipFolder, ffmpegSkip, once } from './helpers/video.ts';

const skip = ffmpegSkip;
const { at, ffmpeg } = clipFolder('stowage-poster-');

/** Two seconds, red for the first and blue for the second, 320x240; its rotated twin; a tone. */
const makeCorpus = once(() => {
  ffmpeg(
    '-f',
    'lavfi',
    '-i',
    "color=c=red:s=320x240:d=2:r=25,drawbox=x=0:y=0:w=iw:h=ih:color=blue:t=fill:enable='gte(t,1)'",
    '-c:v',
    'libx264',
    '-pix_fmt',
    'yuv420p',
    at('clip.mp4'),
  );
  ffmpeg('-i', at('clip.mp4'), '-c', 'copy', '-metadata:s:v:0', 'rotate=90', at('rotated.mp4'));
  // Other bytes, the same pictures: a blob of its own (identical bytes would share clip.mp4's).
  ffmpeg('-i', at('clip.mp4'), '-c', 'copy', '-metadata', 'title=own', at('own.mp4'));
  ffmpeg('-f', 'lavfi', '-i', 'sine=f=440:d=1', '-c:a', 'libmp3lame', at('tone.mp3'));
});

/** The pixel at the centre of an image. */
async function centre(bytes: Buffer): Promise<[number, number, number]> {
  const { data, info } = await sharp(bytes).raw().toBuffer({ resolveWithObject: true });
  const i = (Math.floor(info.height / 2) * info.width + Math.floor(info.width / 2)) * info.channels;
  return [data[i], data[i + 1], data[i + 2]];
}

type Got = Fetched<{ errorCode?: string; message?: string; error?: string; success?: boolean }>;

function client(base: string) {
  return async (path: string, init: RequestInit = {}): Promise<Got> => {
    // Record URLs name the configured public URL: sent to the test server, path and query as they are.
    const u = path.startsWith('http') ? new URL(path) : undefined;
    return readFetched(await fetch(u ? `${base}${u.pathname}${u.search}` : `${base}${path}`, init));
  };
}

describe('poster tokens', () => {
  test('parsed, canonical, refused', () => {
    assert.deepEqual(parsePosterTokens('thumb_ar'), { atSeconds: 0 });
    assert.deepEqual(parsePosterTokens('so_1.5,thumb_ar,w_101,h_80,q_60'), {
      atSeconds: 1.5,
      width: 102,
      height: 80,
      quality: 60,
    });
    // st_ is the hosted start time: the same poster as so_, one cache entry.
    assert.equal(posterName(parsePosterTokens('thumb_ar,st_2')), posterName(parsePosterTokens('so_2.000,thumb_ar')));
    assert.equal(posterName(parsePosterTokens('thumb_ar,so_0')), 'thumb_ar');
    for (const bad of [
      'thumb_ar,so_abc',
      'thumb_ar,so_-1',
      'thumb_ar,w_0',
      'thumb_ar,w_5000',
      'thumb_ar,q_0',
      'thumb_ar,c_fill',
      'thumb_ar,f_gif',
      'thumb_ar,w_1.5',
    ])
      assert.throws(
        () => parsePosterTokens(bad),
        (e: { errorCode?: string }) => e.errorCode === 'TRANSFORM_NOT_APPLICABLE',
        bad,
      );
  });
});

for (const dialect of DIALECTS) {
  describe(`posters through delivery on ${dialect.name}`, { skip: skip || dialect.skip }, () => {
    let h: Harness;
    let base: string;
    let sdk: Stowage;
    let get: ReturnType<typeof client>;
    const ws = () => h.ws.workspace_id;
    const posters = () => h.services.delivery.stats.postersMade;
    const upload = (name: string, as = name) => sdk.upload(new Blob([readFileSync(at(name))]), as);

    before(async () => {
      makeCorpus();
      h = await makeHarness(dialect.name);
      base = await h.app.listen({ host: '127.0.0.1', port: 0 });
      (h.services.multipart as unknown as { settings: { publicUrl: string } }).settings.publicUrl = base;
      sdk = new Stowage({ baseUrl: base, apiKey: h.ws.private_key });
      get = client(base);
      await upload('clip.mp4');
      await upload('rotated.mp4');
    });
    after(() => h?.close());

    test('an MP4 poster: WebP, the video size, aspect kept when sized; the rotated clip as displayed', async () => {
      const r = await get(`/${ws()}/thumb_ar/clip.mp4`);
      assert.equal(r.status, 200, r.body.toString().slice(0, 300));
      assert.equal(r.headers.get('content-type'), 'image/webp');
      assert.match(r.headers.get('cache-control') ?? '', /public, max-age=86400/);
      const meta = await sharp(r.body).metadata();
      assert.deepEqual([meta.format, meta.width, meta.height], ['webp', 320, 240]);
      const sized = async (tokens: string) => {
        const res = await get(`/${ws()}/${tokens}/clip.mp4`);
        assert.equal(res.status, 200, `${tokens}: ${res.body.toString().slice(0, 300)}`);
        const m = await sharp(res.body).metadata();
        return [m.width ?? 0, m.height ?? 0];
      };
      // Height follows the width (even), width follows the height, and both are a box to fit in.
      const [w1, h1] = await sized('thumb_ar,w_160');
      assert.equal(w1, 160);
      assert.equal(h1, 120);
      const [w2, h2] = await sized('thumb_ar,h_60');
      assert.deepEqual([w2, h2], [80, 60]);
      const [w3, h3] = await sized('thumb_ar,w_100,h_100');
      assert.equal(w3, 100);
      assert.ok(h3 === 74 || h3 === 76, `fitted height ${h3}`);
      // An odd size is rounded to even, as the hosted docs say.
      const [w4] = await sized('thumb_ar,w_101');
      assert.equal(w4, 102);
      const rot = await get(`/${ws()}/thumb_ar/rotated.mp4`);
      assert.equal(rot.status, 200);
      const rm = await sharp(rot.body).metadata();
      assert.deepEqual([rm.width, rm.height], [240, 320], 'as players show it');
    });

    test('a time offset picks the frame: red at the start, blue after one second (so_ and st_ alike)', async () => {
      const first = await get(`/${ws()}/thumb_ar/clip.mp4`);
      const [r0, , b0] = await centre(first.body);
      assert.ok(r0 > 180 && b0 < 80, `first frame ${r0},${b0}`);
      const later = await get(`/${ws()}/thumb_ar,so_1.5/clip.mp4`);
      assert.equal(later.status, 200);
      const [r1, , b1] = await centre(later.body);
      assert.ok(b1 > 180 && r1 < 80, `frame at 1.5 s ${r1},${b1}`);
      const made = posters();
      const st = await get(`/${ws()}/st_1.5,thumb_ar/clip.mp4`);
      assert.equal(st.status, 200);
      assert.deepEqual(st.body, later.body);
      assert.equal(st.headers.get('etag'), later.headers.get('etag'));
      assert.equal(posters(), made, 'the same poster, one cache entry');
      // Past the end there is no frame: a clean 400.
      const past = await get(`/${ws()}/thumb_ar,so_60/clip.mp4`);
      assert.equal(past.status, 400);
      assert.equal(past.json?.errorCode, 'VIDEO_REFUSED');
    });

    test('served twice = one extraction; concurrent first requests = one extraction; counted and removed with the file', async () => {
      const v = await upload('own.mp4', 'cached.mp4');
      const made = posters();
      const a = await get(`/${ws()}/thumb_ar,w_64/cached.mp4`);
      const b = await get(`/${ws()}/thumb_ar,w_64/cached.mp4`);
      assert.equal(a.status, 200);
      assert.deepEqual(a.body, b.body);
      assert.equal(posters(), made + 1);
      const burst = await Promise.all(Array.from({ length: 6 }, () => get(`/${ws()}/thumb_ar,w_48/cached.mp4`)));
      assert.deepEqual(
        burst.map((r) => r.status),
        Array(6).fill(200),
      );
      for (const r of burst) assert.deepEqual(r.body, burst[0].body);
      assert.equal(posters(), made + 2, 'single flight');
      const rows = await h.services.db.kysely.selectFrom('renditions').selectAll().execute();
      const mine = rows.filter((r) => String(r.key).includes('.renditions/thumb_ar.w_'));
      assert.ok(mine.length >= 2, 'posters are in the rendition ledger');
      const keys = mine
        .map((r) => String(r.key))
        .filter((k) => k.endsWith('thumb_ar.w_64.webp') || k.endsWith('thumb_ar.w_48.webp'));
      const live: string[] = [];
      for (const k of keys) if (await h.services.storage.stat(k)) live.push(k);
      assert.equal(live.length, 2, keys.join(', '));
      assert.ok(mine.every((r) => Number(r.bytes) > 0));
      const del = await call(h.app, 'DELETE', `/api/v1/files/${v.file_no}`, { headers: h.auth });
      assert.equal(del.status, 200, del.raw);
      for (const k of live) assert.equal(await h.services.storage.stat(k), null, `${k} went with the file`);
      const left = await h.services.db.kysely.selectFrom('renditions').select('key').execute();
      assert.ok(!left.some((r) => live.includes(String(r.key))), 'and out of the ledger');
    });

    test('other tokens beside thumb_ar stay 400; thumb_ar on an image or an audio file is 400', async () => {
      for (const path of ['thumb_ar,c_fill/clip.mp4', 'thumb_ar,so_x/clip.mp4', 'thumb_ar,f_gif/clip.mp4']) {
        const r = await get(`/${ws()}/${path}`);
        assert.equal(r.status, 400, path);
        assert.equal(r.json?.errorCode, 'TRANSFORM_NOT_APPLICABLE', path);
      }
      // Without thumb_ar the video grammar applies (test/video-transform.test.ts): queued, 202.
      const transcode = await get(`/${ws()}/w_100/clip.mp4`);
      assert.equal(transcode.status, 202);
      const png = await sharp({ create: { width: 8, height: 8, channels: 3, background: '#fff' } })
        .png()
        .toBuffer();
      const img = await sdk.upload(new Blob([png]), 'still.png');
      assert.match(img.thumbnail ?? '', /\/w_200,h_200,c_fit\//);
      const audio = await upload('tone.mp3');
      assert.equal(audio.thumbnail, null);
      for (const name of ['still.png', 'tone.mp3']) {
        const r = await get(`/${ws()}/thumb_ar/${name}`);
        assert.equal(r.json?.errorCode, 'TRANSFORM_NOT_APPLICABLE', name);
      }
      // The original is still served as it was.
      const orig = await get(`/${ws()}/clip.mp4`);
      assert.equal(orig.status, 200);
      assert.equal(orig.headers.get('content-type'), 'video/mp4');
    });

    test('the record thumbnail: a poster URL for direct and multipart uploads, and it works', async () => {
      const direct = await upload('clip.mp4', 'direct.mp4');
      const multi = await sdk.uploadMultipart(
        new Blob([readFileSync(at('rotated.mp4'))], { type: 'video/mp4' }),
        'multi.mp4',
      );
      assert.equal(multi.upload_source, 'multipart');
      for (const [rec, size] of [
        [direct, [200, 150]],
        [multi, [150, 200]],
      ] as const) {
        assert.equal(rec.thumbnail, `${h.config.publicUrl}/${ws()}/thumb_ar,w_200,h_200/${rec.name}`);
        const r = await get(rec.thumbnail!);
        assert.equal(r.status, 200, r.body.toString().slice(0, 200));
        const m = await sharp(r.body).metadata();
        assert.deepEqual([m.format, m.width, m.height], ['webp', ...size]);
        const again = await sdk.getFile(rec.file_no);
        assert.equal(again.thumbnail, rec.thumbnail);
      }
    });

    test("a private video: its record's signed thumbnail works, the unsigned poster URL is refused and makes nothing", async () => {
      const v = await upload('clip.mp4', 'secret.mp4');
      const made = await call(h.app, 'PATCH', `/api/v1/files/${v.file_no}`, {
        body: { is_private: true },
        headers: h.auth,
      });
      assert.equal(made.status, 200, made.raw);
      const before = posters();
      const unsigned = await get(`/${ws()}/thumb_ar,w_200,h_200/secret.mp4`);
      assert.equal(unsigned.json?.errorCode, 'SIGNED_URL_REQUIRED');
      assert.equal(posters(), before, 'nothing rendered for a refused request');
      const thumb = made.body.data.thumbnail as string;
      assert.match(thumb, /thumb_ar,w_200,h_200\/secret\.mp4\?.*signature=/);
      const r = await get(thumb);
      assert.equal(r.status, 200, r.body.toString().slice(0, 200));
      assert.equal(r.headers.get('content-type'), 'image/webp');
      assert.match(r.headers.get('cache-control') ?? '', /^private/);
      // A signature is for its own URL: another poster of the file is refused with it.
      const u = new URL(thumb);
      const other = await get(`${u.pathname.replace('thumb_ar,w_200,h_200', 'thumb_ar,w_300')}${u.search}`);
      assert.equal(other.json?.errorCode, 'INVALID_SIGNATURE');
    });

    test('a signed-transformations workspace: unsigned posters refused, the record thumbnail and tsig URLs work', async () => {
      const on = await call(h.app, 'PATCH', '/api/v1/workspace', {
        body: { signed_transformations: true },
        headers: h.auth,
      });
      assert.equal(on.status, 200, on.raw);
      try {
        const key = (await call(h.app, 'GET', '/api/v1/workspace/delivery-key', { headers: h.auth })).body.data
          .delivery_key as string;
        const before = posters();
        const unsigned = await get(`/${ws()}/thumb_ar,w_90/clip.mp4`);
        assert.equal(unsigned.json?.errorCode, 'TRANSFORMATION_SIGNATURE_REQUIRED');
        assert.equal(posters(), before);
        const signed = await get(signTransformUrl(key, `${base}/${ws()}/thumb_ar,w_90/clip.mp4`));
        assert.equal(signed.status, 200);
        assert.equal((await sharp(signed.body).metadata()).width, 90);
        const rec = await sdk.getFile((await upload('clip.mp4', 'gated.mp4')).file_no);
        assert.match(rec.thumbnail ?? '', /[?&]tsig=/);
        assert.equal((await get(rec.thumbnail!)).status, 200);
      } finally {
        await call(h.app, 'PATCH', '/api/v1/workspace', { body: { signed_transformations: false }, headers: h.auth });
      }
    });
  });
}

const s3Skip = UPLOAD_MATRIX.find((c) => c.storage === 's3')?.skip ?? 'no S3 combination';
describe('posters of videos in object storage', { skip: skip || s3Skip }, () => {
  test('an MP4 with its index at the end (copied first) and a WebM (streamed to ffmpeg)', async () => {
    makeCorpus();
    ffmpeg(
      '-f',
      'lavfi',
      '-i',
      'color=c=green:s=160x120:d=1:r=25',
      '-c:v',
      'libvpx-vp9',
      '-deadline',
      'realtime',
      '-cpu-used',
      '8',
      at('clip.webm'),
    );
    const h = await makeHarness('sqlite', { config: { storage: await freshS3Storage() } });
    try {
      assert.equal(h.services.storage.localPath, undefined, 'not a local disk');
      const base = await h.app.listen({ host: '127.0.0.1', port: 0 });
      const sdk = new Stowage({ baseUrl: base, apiKey: h.ws.private_key });
      const get = client(base);
      for (const [name, size] of [
        ['clip.mp4', [320, 240]],
        ['clip.webm', [160, 120]],
      ] as const) {
        const rec = await sdk.upload(new Blob([readFileSync(at(name))]), name);
        const r = await get(rec.thumbnail!.replace('thumb_ar,w_200,h_200', 'thumb_ar'));
        assert.equal(r.status, 200, `${name}: ${r.body.toString().slice(0, 300)}`);
        const m = await sharp(r.body).metadata();
        assert.deepEqual([m.format, m.width, m.height], ['webp', ...size], name);
      }
      assert.equal(h.services.delivery.stats.postersMade, 2);
    } finally {
      await h.close();
    }
  });
});

describe('poster bounds: time budget and a full queue', { skip }, () => {
  test('503 RENDER_TIMEOUT past the budget, 503 RENDER_BUSY when the queue is full, both with retry-after', async () => {
    makeCorpus();
    const h = await makeHarness('sqlite', {
      config: { render: { ...renderDefaults(), timeoutMs: 1, concurrency: 1, queue: 0 } },
    });
    try {
      const base = await h.app.listen({ host: '127.0.0.1', port: 0 });
      const sdk = new Stowage({ baseUrl: base, apiKey: h.ws.private_key });
      await sdk.upload(new Blob([readFileSync(at('clip.mp4'))]), 'clip.mp4');
      const get = client(base);
      const slow = await get(`/${h.ws.workspace_id}/thumb_ar/clip.mp4`);
      assert.equal(slow.status, 503);
      assert.equal(slow.json?.errorCode, 'RENDER_TIMEOUT');
      assert.ok(Number(slow.headers.get('retry-after')) >= 1);
      // The abandoned ffmpeg still holds the one slot for a moment; distinct posters at once: the queue (no waiting room) refuses.
      const burst = await Promise.all(
        [10, 20, 30, 40].map((w) => get(`/${h.ws.workspace_id}/thumb_ar,w_${w}/clip.mp4`)),
      );
      const busy = burst.filter((r) => r.json?.errorCode === 'RENDER_BUSY');
      assert.ok(busy.length >= 1, burst.map((r) => r.json?.errorCode).join());
      assert.ok(Number(busy[0].headers.get('retry-after')) >= 1);
      assert.ok(burst.every((r) => r.status === 503));
    } finally {
      await h.close();
    }
  });
});

describe('posters without ffmpeg', { skip }, () => {
  test('501 VIDEO_ENGINE_MISSING with the catalogue body', async () => {
    makeCorpus();
    const h = await makeHarness('sqlite', {
      config: {
        video: {
          ...videoDefaults(),
          searchPath: process.env.PATH,
          ffmpegPath: at('missing/ffmpeg'),
          ffprobePath: at('missing/ffprobe'),
        },
      },
    });
    try {
      const base = await h.app.listen({ host: '127.0.0.1', port: 0 });
      const sdk = new Stowage({ baseUrl: base, apiKey: h.ws.private_key });
      const rec = await sdk.upload(new Blob([readFileSync(at('clip.mp4'))]), 'clip.mp4');
      // Not probed, so no frame is known to be there: no thumbnail promised.
      assert.equal(rec.thumbnail, null);
      const r = await client(base)(`/${h.ws.workspace_id}/thumb_ar/clip.mp4`);
      assert.equal(r.status, 501);
      const entry = ERROR_CATALOGUE.VIDEO_ENGINE_MISSING;
      assert.equal(r.json?.errorCode, 'VIDEO_ENGINE_MISSING');
      assert.equal(r.json?.message, entry.message);
      assert.equal(r.json?.error, entry.error);
      assert.equal(r.json?.success, false);
      assert.equal(r.headers.get('x-should-retry'), 'false');
      assert.equal(h.services.delivery.stats.postersMade, 0);
      // A transcode too: no job is queued for a node that could not run it.
      const t = await client(base)(`/${h.ws.workspace_id}/w_100/clip.mp4`);
      assert.equal(t.status, 501);
      assert.equal(t.json?.errorCode, 'VIDEO_ENGINE_MISSING');
    } finally {
      await h.close();
    }
  });
});

describe('hostile files asked for a poster', { skip }, () => {
  let listener: Server;
  let connections = 0;
  let port = 0;
  before(async () => {
    listener = createServer((_req, res) => res.end('#EXTM3U\n'));
    listener.on('connection', () => connections++);
    await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
    port = (listener.address() as { port: number }).port;
  });
  after(() => listener.close());

  test('an HLS playlist named .mp4 (and one behind an MP4 header): a clean 400, no connection', async () => {
    const h = await makeHarness('sqlite');
    try {
      const base = await h.app.listen({ host: '127.0.0.1', port: 0 });
      const sdk = new Stowage({ baseUrl: base, apiKey: h.ws.private_key });
      const playlist = [
        '#EXTM3U',
        '#EXT-X-TARGETDURATION:1',
        '#EXTINF:1.0,',
        `http://127.0.0.1:${port}/segment.ts`,
        '#EXTINF:1.0,',
        '/etc/passwd',
        '#EXT-X-ENDLIST',
        '',
      ].join('\n');
      // An ftyp box first: the bytes are detected as MP4, so delivery does hand them to ffmpeg.
      const ftyp = Buffer.from('00000018667479706973366d0000020069736f6d6d703431', 'hex');
      writeFileSync(at('evil.mp4'), playlist);
      writeFileSync(at('boxed.mp4'), Buffer.concat([ftyp, Buffer.from(playlist)]));
      const plain = await sdk.upload(new Blob([readFileSync(at('evil.mp4'))]), 'evil.mp4');
      const boxed = await sdk.upload(new Blob([readFileSync(at('boxed.mp4'))]), 'boxed.mp4');
      assert.equal(boxed.mime_type, 'video/mp4');
      assert.equal(plain.thumbnail, null);
      assert.equal(boxed.thumbnail, null, 'no frame found at upload, no thumbnail promised');
      const before = connections;
      const get = client(base);
      for (const name of ['evil.mp4', 'boxed.mp4']) {
        for (const tokens of ['thumb_ar', 'thumb_ar,so_1', 'thumb_ar,w_64']) {
          const r = await get(`/${h.ws.workspace_id}/${tokens}/${name}`);
          assert.equal(r.status, 400, `${tokens}/${name}: ${r.body.toString().slice(0, 200)}`);
          assert.ok(['TRANSFORM_NOT_APPLICABLE', 'VIDEO_REFUSED'].includes(r.json?.errorCode ?? ''), r.json?.errorCode);
        }
      }
      const refused = await get(`/${h.ws.workspace_id}/thumb_ar/boxed.mp4`);
      assert.equal(refused.json?.errorCode, 'VIDEO_REFUSED', 'boxed reached ffmpeg, which refused it');
      await new Promise((r) => setTimeout(r, 200));
      assert.equal(connections, before, 'no connection reached the listener');
      assert.equal(h.services.delivery.stats.postersMade, 0);
    } finally {
      await h.close();
    }
  });
});
