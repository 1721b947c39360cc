// Adaptive streaming through delivery (issue 21 item 3; docs/video.md#adaptive-streaming): the
// ladder grammar and the URL shapes, then on a real server the async flow (one `video.stream`
// job for every ask of one package), the HLS master and the DASH manifest read by ffprobe over
// HTTP, segments with Range and immutable caching, a private video's package opened by one
// signature, bad ladders 400, a broken video 422, and hls.js playing the stream in Chromium.
// Real ffmpeg on a 2 s clip, ladders of two small heights; jobs run by the test (`runDue`).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import { Stowage } from '../sdk/src/index.ts';
import { signTransformUrl } from '../src/crypto/transform-url.ts';
import { locateVideoEngine, videoDefaults } from '../src/media/video/engine.ts';
import {
  capLadder,
  DEFAULT_LADDER,
  parseLadder,
  streamArgs,
  streamPackageName,
  streamSuffix,
  withQuery,
} from '../src/media/video/stream.ts';
import { planTrim, transcodeDefaults } from '../src/media/video/transcode.ts';
import { chromiumSkip, launchChromium } from './helpers/browser.ts';
import { DIALECTS, type Harness, makeHarness } from './helpers/harness.ts';
import { clipFolder, ffmpegSkip } from './helpers/video.ts';

const { at, ffmpeg } = clipFolder('stowage-vstream-');

const validation = (what: RegExp) => (e: { errorCode?: string; message?: string }) =>
  e.errorCode === 'VALIDATION_FAILED' && what.test(e.message ?? '');

describe('stream URLs and ladders', () => {
  test('ladders: even heights, sorted, duplicates dropped; the default without st_', () => {
    assert.deepEqual(parseLadder('st_720_241_240_360'), [240, 242, 360, 720]);
    assert.deepEqual(parseLadder('st_480'), [480]);
    assert.deepEqual(parseLadder(undefined), DEFAULT_LADDER);
    assert.equal(streamPackageName([240, 360]), 'stream.h_240_360');
  });

  test('bad ladders: out of range, too many, other tokens', () => {
    assert.throws(() => parseLadder('st_8_240'), validation(/from 16 to 4320/));
    assert.throws(() => parseLadder('st_240_5000'), validation(/from 16 to 4320/));
    assert.throws(() => parseLadder('st_100_200_300_400_500_600_700'), validation(/at most 6 heights/));
    assert.throws(() => parseLadder('st_240,w_100'), validation(/not a ladder/));
    assert.throws(() => parseLadder('w_100'), validation(/not a ladder/));
    assert.throws(() => parseLadder('st_'), validation(/not a ladder/));
  });

  test('capped at the video: no upscaling, the video height when every rung is taller', () => {
    assert.deepEqual(capLadder([240, 360, 480, 720], 480), [240, 360, 480]);
    assert.deepEqual(capLadder([720, 1080], 241), [240]);
    assert.deepEqual(capLadder([720], null), [720]);
  });

  test('suffixes: the master, the DASH manifest under dash/, the files they name; nothing else', () => {
    assert.deepEqual(streamSuffix(['v.mp4', 'ar-master.m3u8']), { file: 'ar-master.m3u8', count: 1 });
    assert.deepEqual(streamSuffix(['a', 'v.mp4', 'dash', 'manifest.mpd']), { file: 'manifest.mpd', count: 2 });
    assert.deepEqual(streamSuffix(['v.mp4', 'dash', 'chunk-stream1-00002.m4s']), {
      file: 'chunk-stream1-00002.m4s',
      count: 2,
    });
    assert.deepEqual(streamSuffix(['v.mp4', 'media_0.m3u8']), { file: 'media_0.m3u8', count: 1 });
    for (const bad of [
      ['v.mp4', 'manifest.mpd'],
      ['v.mp4', 'dash', 'ar-master.m3u8'],
      ['ar-master.m3u8'],
      ['v.mp4', '..%2Fx.m4s'],
      ['v.mp4', 'other.m3u8'],
      ['v.mp4', 'chunk-stream0-1.m4s'],
    ])
      assert.equal(streamSuffix(bad), undefined, bad.join('/'));
  });

  test('addresses in playlists and manifests get a query, existing ones kept', () => {
    const hls = '#EXTM3U\n#EXT-X-MAP:URI="init-stream0.m4s"\n#EXTINF:2.0,\nchunk-stream0-00001.m4s\n#EXT-X-ENDLIST\n';
    assert.equal(
      withQuery(withQuery(hls, 'hls', 'v=ab'), 'hls', 'expires=1&signature=x'),
      '#EXTM3U\n#EXT-X-MAP:URI="init-stream0.m4s?v=ab&expires=1&signature=x"\n#EXTINF:2.0,\n' +
        'chunk-stream0-00001.m4s?v=ab&expires=1&signature=x\n#EXT-X-ENDLIST\n',
    );
    const mpd = '<SegmentTemplate initialization="init-stream$RepresentationID$.m4s" media="chunk.m4s" x="y"/>';
    assert.equal(
      withQuery(withQuery(mpd, 'dash', 'v=ab'), 'dash', 'e=1'),
      '<SegmentTemplate initialization="init-stream$RepresentationID$.m4s?v=ab&amp;e=1" media="chunk.m4s?v=ab&amp;e=1" x="y"/>',
    );
  });

  test('the stream run follows the hostile-input rules: one demuxer, file protocol only, the duration cap', () => {
    const engine = locateVideoEngine({ ...videoDefaults(), searchPath: process.env.PATH });
    const s = transcodeDefaults();
    const args = streamArgs(
      engine,
      { path: '/data/blob' },
      'mov',
      [120, 240],
      true,
      planTrim({}, 'mp4', 3, s),
      s,
      '/t',
    );
    const after = (flag: string) => args[args.indexOf(flag) + 1];
    assert.equal(after('-protocol_whitelist'), 'file');
    assert.equal(after('-format_whitelist'), 'mov');
    assert.equal(after('-i'), 'file:/data/blob');
    assert.equal(after('-t'), '3.000');
    assert.equal(args.at(-1), 'file:/t/manifest.mpd');
    assert.throws(() => planTrim({}, 'mp4', s.maxOutputSeconds + 1, s), validation(/at most/));
  });
});

interface Probe {
  streams: Array<{ codec_type: string; codec_name: string; width?: number; height?: number }>;
  format: { format_name: string; duration?: string };
}

/** ffprobe on a URL of the test server (the protocols a player uses); asynchronous, as the server is this process. */
async function probeUrl(url: string): Promise<Probe> {
  const args = ['-v', 'error', '-protocol_whitelist', 'http,tcp,https,tls,file,crypto', '-print_format', 'json'];
  const { stdout } = await promisify(execFile)('ffprobe', [...args, '-show_streams', '-show_format', url], {
    timeout: 60_000,
  });
  return JSON.parse(stdout) as Probe;
}

const heights = (p: Probe) =>
  [...new Set(p.streams.filter((s) => s.codec_type === 'video').map((s) => `${s.width}x${s.height}`))].sort();

let clipsMade = false;
/** 2 s of 320x240 at 25 fps with a tone; the same at 160x120 without sound; a cut-off file. */
function makeClips(): void {
  if (clipsMade) return;
  clipsMade = true;
  ffmpeg(
    ...['-f', 'lavfi', '-i', 'testsrc2=s=320x240:r=25:d=2', '-f', 'lavfi', '-i', 'sine=f=440:d=2'],
    ...['-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p', '-c:a', 'aac', '-shortest', at('clip.mp4')],
  );
  ffmpeg(
    ...['-f', 'lavfi', '-i', 'testsrc2=s=160x120:r=25:d=2'],
    ...['-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p', at('silent.mp4')],
  );
  writeFileSync(at('broken.mp4'), readFileSync(at('clip.mp4')).subarray(0, 4096));
}

describe('adaptive streaming through delivery', { skip: ffmpegSkip }, () => {
  let h: Harness;
  let base: string;
  let sdk: Stowage;
  const ws = () => h.ws.workspace_id;
  const runJobs = () => h.services.jobs.runDue('video.stream');
  const get = async (path: string, headers: Record<string, string> = {}) => {
    const res = await fetch(`${base}/${ws()}/${path}`, { headers });
    const body = Buffer.from(await res.arrayBuffer());
    let json: { status?: string; errorCode?: string; message?: string } | undefined;
    try {
      json = JSON.parse(body.toString());
    } catch {}
    return { status: res.status, headers: res.headers, body, text: body.toString(), json };
  };

  before(async () => {
    makeClips();
    h = await makeHarness('sqlite', { config: { transcode: { ...transcodeDefaults(), speed: 'fastest' } } });
    base = await h.app.listen({ host: '127.0.0.1', port: 0 });
    sdk = new Stowage({ baseUrl: base, apiKey: h.ws.private_key });
    await sdk.upload(new Blob([readFileSync(at('clip.mp4'))]), 'clip.mp4', { folder: 'docs' });
    await sdk.upload(new Blob([readFileSync(at('silent.mp4'))]), 'silent.mp4');
    await sdk.upload(new Blob([readFileSync(at('broken.mp4'))]), 'broken.mp4');
  });
  after(async () => {
    await h?.close();
  });

  test('identical asks of one package, HLS and DASH, make one job; then every file is served', async () => {
    const first = await get('st_120_240/docs/clip.mp4/ar-master.m3u8');
    assert.equal(first.status, 202, first.text.slice(0, 300));
    assert.deepEqual(first.json, { status: 'triggered' });
    assert.equal(first.headers.get('cache-control'), 'no-store');
    const burst = await Promise.all([
      get('st_120_240/docs/clip.mp4/ar-master.m3u8'),
      get('st_240_120/docs/clip.mp4/ar-master.m3u8'),
      get('st_120_240/docs/clip.mp4/dash/manifest.mpd'),
      get('st_120_240/docs/clip.mp4/media_0.m3u8'),
    ]);
    for (const r of burst) {
      assert.equal(r.status, 202);
      assert.equal(r.json?.status, 'processing');
    }
    assert.equal(await runJobs(), 1, 'one job for the whole ladder and every ask');
    assert.equal(await runJobs(), 0);
    assert.equal(h.services.videoRenditions.stats.streams, 1);

    const master = await get('st_120_240/docs/clip.mp4/ar-master.m3u8');
    assert.equal(master.status, 200, master.text.slice(0, 300));
    assert.equal(master.headers.get('content-type'), 'application/vnd.apple.mpegurl');
    assert.equal(master.headers.get('cache-control'), 'public, max-age=60, stale-while-revalidate=60');
    const variants = master.text.split('\n').filter((l) => l.startsWith('#EXT-X-STREAM-INF'));
    assert.equal(variants.length, 2, master.text);
    assert.match(variants.join('\n'), /RESOLUTION=160x120/);
    assert.match(variants.join('\n'), /RESOLUTION=320x240/);
    assert.match(master.text, /CODECS="avc1\.[0-9a-f]+,mp4a\.40\.2"/);

    // What a player does: the master, then a media playlist, then its segments.
    const sha = (await sdk.listFiles()).data.find((f) => f.name === 'clip.mp4')!.hash;
    const mediaUri = master.text.split('\n').find((l) => l.startsWith('media_'))!;
    assert.ok(mediaUri.endsWith(`?v=${sha.slice(0, 16)}`), mediaUri);
    const media = await get(`st_120_240/docs/clip.mp4/${mediaUri}`);
    assert.equal(media.status, 200);
    assert.equal(media.headers.get('cache-control'), 'public, max-age=31536000, immutable', 'content-addressed');
    assert.match(media.text, /#EXT-X-ENDLIST/);
    const segment = media.text.split('\n').find((l) => l.startsWith('chunk-'))!;
    const whole = await get(`st_120_240/docs/clip.mp4/${segment}`);
    assert.equal(whole.status, 200);
    assert.equal(whole.headers.get('content-type'), 'video/mp4');
    assert.equal(whole.headers.get('cache-control'), 'public, max-age=31536000, immutable');
    const part = await get(`st_120_240/docs/clip.mp4/${segment}`, { range: 'bytes=0-99' });
    assert.equal(part.status, 206);
    assert.equal(part.body.length, 100);
    assert.deepEqual(part.body, whole.body.subarray(0, 100));

    const hls = await probeUrl(`${base}/${ws()}/st_120_240/docs/clip.mp4/ar-master.m3u8`);
    assert.deepEqual(heights(hls), ['160x120', '320x240']);
    assert.ok(hls.streams.some((s) => s.codec_type === 'audio' && s.codec_name === 'aac'));
    assert.ok(Math.abs(Number(hls.format.duration) - 2) < 0.3, `duration ${hls.format.duration}`);

    const mpd = await get('st_120_240/docs/clip.mp4/dash/manifest.mpd');
    assert.equal(mpd.status, 200);
    assert.equal(mpd.headers.get('content-type'), 'application/dash+xml');
    const dash = await probeUrl(`${base}/${ws()}/st_120_240/docs/clip.mp4/dash/manifest.mpd`);
    assert.deepEqual(heights(dash), ['160x120', '320x240']);
    assert.ok(Math.abs(Number(dash.format.duration) - 2) < 0.3, `duration ${dash.format.duration}`);
  });

  test('a ladder past the video is capped: the same package, no new job', async () => {
    const capped = await get('st_120_240_480_1080/docs/clip.mp4/ar-master.m3u8');
    assert.equal(capped.status, 200, capped.text.slice(0, 200));
    assert.equal(await runJobs(), 0);
    const keys: string[] = [];
    for await (const o of h.services.storage.list(`${ws()}/`))
      if (o.key.includes('/stream.') && o.key.endsWith('ar-master.m3u8')) keys.push(o.key);
    assert.equal(keys.length, 1, keys.join());
    // Counted in the rendition cache like any rendition.
    const total = await h.services.renditions!.totalBytes();
    assert.ok(total > 10_000, `ledger bytes ${total}`);
  });

  test('a segment evicted from the rendition cache: the package is made again, a name never listed is just 404', async () => {
    const listed = async () => {
      const keys: string[] = [];
      for await (const o of h.services.storage.list(`${ws()}/`))
        if (o.key.includes('/stream.h_120_240/')) keys.push(o.key);
      return keys;
    };
    assert.equal((await get('st_120_240/docs/clip.mp4/chunk-stream0-99999.m4s')).status, 404);
    assert.equal(
      (await get('st_120_240/docs/clip.mp4/ar-master.m3u8')).status,
      200,
      'an unlisted name remakes nothing',
    );
    const segment = (await listed()).find((k) => k.endsWith('chunk-stream1-00001.m4s'))!;
    await h.services.storage.delete(segment);
    // What this node's memory still holds of it goes too (as after the lookup cache's short TTL).
    h.services.deliveryCache.invalidate(ws());
    assert.equal((await get('st_120_240/docs/clip.mp4/chunk-stream1-00001.m4s')).status, 404);
    const again = await get('st_120_240/docs/clip.mp4/ar-master.m3u8');
    assert.equal(again.status, 202, 'the master went with the hole');
    assert.equal(await runJobs(), 1);
    assert.equal((await get('st_120_240/docs/clip.mp4/chunk-stream1-00001.m4s')).status, 200);
  });

  test('bad ladders are 400 and queue nothing; a path that merely ends like a stream is still a path', async () => {
    for (const ladder of ['st_8_240', 'st_240_9000', 'st_100_200_300_400_500_600_700', 'st_240,w_100']) {
      const r = await get(`${ladder}/docs/clip.mp4/ar-master.m3u8`);
      assert.equal(r.status, 400, `${ladder}: ${r.text.slice(0, 200)}`);
      assert.equal(r.json?.errorCode, 'VALIDATION_FAILED');
    }
    assert.equal(await runJobs(), 0);
    assert.equal((await get('st_120/docs/clip.mp4/other.m3u8')).status, 404);
    assert.equal((await get('st_120/docs/nothing.mp4/ar-master.m3u8')).status, 404);
  });

  test('a silent video streams without audio; the default ladder without st_', async () => {
    assert.equal((await get('silent.mp4/dash/manifest.mpd')).status, 202);
    assert.equal(await runJobs(), 1);
    const master = await get('silent.mp4/ar-master.m3u8');
    assert.equal(master.status, 200, master.text.slice(0, 300));
    // 160x120 is below every default rung: its own height.
    const p = await probeUrl(`${base}/${ws()}/silent.mp4/ar-master.m3u8`);
    assert.deepEqual(heights(p), ['160x120']);
    assert.ok(!p.streams.some((s) => s.codec_type === 'audio'));
  });

  test('a broken video: 422 TRANSCODE_FAILED, not processing forever', async () => {
    assert.equal((await get('st_120/broken.mp4/ar-master.m3u8')).status, 202);
    await runJobs();
    const failed = await get('st_120/broken.mp4/ar-master.m3u8');
    assert.equal(failed.status, 422, failed.text.slice(0, 200));
    assert.equal(failed.json?.errorCode, 'TRANSCODE_FAILED');
  });

  test('a private video: the signed master opens its package and nothing else', async () => {
    const rec = await sdk.upload(new Blob([readFileSync(at('clip.mp4')), Buffer.from('p')]), 'secret.mp4');
    await h.services.files.update(ws(), rec.file_no, { is_private: true });
    const path = 'st_120_240/secret.mp4/ar-master.m3u8';
    const unsigned = await get(path);
    assert.equal(unsigned.json?.errorCode, 'SIGNED_URL_REQUIRED');
    assert.equal(await runJobs(), 0, 'nothing made for an unsigned ask');
    const expires = Math.floor(Date.now() / 1000) + 600;
    const signedMaster = h.services.deliverySigner.sign(`${base}/${ws()}/${path}`, expires);
    assert.equal((await fetch(signedMaster)).status, 202);
    assert.equal(await runJobs(), 1);
    const res = await fetch(signedMaster);
    const text = await res.text();
    assert.equal(res.status, 200, text.slice(0, 200));
    assert.equal(res.headers.get('cache-control'), 'private, max-age=300');
    const uri = text.split('\n').find((l) => l.startsWith('media_'))!;
    assert.match(uri, /[?&]expires=\d+&signature=/);
    // ffprobe follows the master to media playlists and segments, each carrying the package signature.
    assert.deepEqual(heights(await probeUrl(signedMaster)), ['160x120', '320x240']);
    const scoped = new URL(uri, signedMaster).searchParams;
    const q = `expires=${scoped.get('expires')}&signature=${scoped.get('signature')}`;
    // The package signature opens neither the video itself nor another rendition or package.
    for (const other of ['secret.mp4', 'w_64/secret.mp4', 'st_120/secret.mp4/ar-master.m3u8']) {
      const r = await get(`${other}?${q}`);
      assert.equal(r.json?.errorCode, 'INVALID_SIGNATURE', other);
    }
    const segment = await get(`st_120_240/secret.mp4/init-stream0.m4s`);
    assert.equal(segment.json?.errorCode, 'SIGNED_URL_REQUIRED', 'a segment is private too');

    // Deleted with the video: every file of its package, and their rows in the rendition ledger.
    const packageKeys = async () => {
      const keys: string[] = [];
      for await (const o of h.services.storage.list(`${ws()}/`)) if (o.key.includes('/stream.')) keys.push(o.key);
      return keys;
    };
    const before = (await packageKeys()).length;
    const bytesBefore = await h.services.renditions!.totalBytes();
    await sdk.deleteFile(rec.file_no);
    const left = (await packageKeys()).length;
    assert.ok(left < before && left > 0, `${before} → ${left}: only the deleted video's package went`);
    assert.ok((await h.services.renditions!.totalBytes()) < bytesBefore, 'its bytes left the ledger');
  });

  test('a workspace that requires signed transformations: a tsig on the master opens its package; unsigned, nothing', async () => {
    await h.services.workspaces.updateSettings(ws(), { signed_transformations: true });
    try {
      const key = await h.services.workspaces.deliveryKey(ws());
      for (const path of ['st_120_240/docs/clip.mp4/ar-master.m3u8', 'docs/clip.mp4/ar-master.m3u8']) {
        const r = await get(path);
        assert.equal(r.json?.errorCode, 'TRANSFORMATION_SIGNATURE_REQUIRED', `${path}: ${r.text.slice(0, 120)}`);
      }
      assert.equal(await runJobs(), 0);
      const signed = signTransformUrl(key, `${base}/${ws()}/st_120_240/docs/clip.mp4/ar-master.m3u8`);
      // Another node's cached policy may lag for a few seconds; this one was told.
      const res = await fetch(signed);
      const text = await res.text();
      assert.equal(res.status, 200, text.slice(0, 200));
      assert.match(text.split('\n').find((l) => l.startsWith('media_'))!, /&expires=\d+&signature=/);
      assert.deepEqual(heights(await probeUrl(signed)), ['160x120', '320x240']);
    } finally {
      await h.services.workspaces.updateSettings(ws(), { signed_transformations: false });
    }
  });

  test('hls.js plays the stream in Chromium: time advances, the picture is a variant', {
    skip: chromiumSkip(),
  }, async () => {
    // The page and hls.js come from a second loopback server (another origin, as a site would be).
    const hlsJs = readFileSync(join(process.cwd(), 'node_modules/hls.js/dist/hls.min.js'));
    const master = `${base}/${ws()}/st_120_240/docs/clip.mp4/ar-master.m3u8`;
    const page = `<!doctype html><video id="v" muted playsinline></video><script src="/hls.js"></script>
<script>
  const video = document.getElementById('v');
  window.failure = null;
  const hls = new Hls({ maxBufferLength: 4 });
  hls.on(Hls.Events.ERROR, (_, d) => { if (d.fatal) window.failure = d.type + ':' + d.details + ':' + (d.reason || (d.error && d.error.message) || '') + ':' + (d.url || ''); });
  hls.loadSource(${JSON.stringify(master)});
  hls.attachMedia(video);
  hls.on(Hls.Events.MANIFEST_PARSED, () => video.play().catch((e) => { window.failure = String(e); }));
</script>`;
    const site: Server = createServer((req, res) => {
      if (req.url === '/hls.js') res.writeHead(200, { 'content-type': 'text/javascript' }).end(hlsJs);
      else res.writeHead(200, { 'content-type': 'text/html' }).end(page);
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    const browser = await launchChromium();
    try {
      const tab = await browser.newPage();
      await tab.goto(`http://127.0.0.1:${(site.address() as AddressInfo).port}/`);
      await tab.waitForFunction(
        () => {
          const v = document.querySelector('video')!;
          return (window as unknown as { failure: string | null }).failure !== null || v.currentTime > 0.5;
        },
        undefined,
        { timeout: 20_000 },
      );
      const state = await tab.evaluate(() => {
        const v = document.querySelector('video')!;
        return {
          failure: (window as unknown as { failure: string | null }).failure,
          time: v.currentTime,
          width: v.videoWidth,
          height: v.videoHeight,
        };
      });
      assert.equal(state.failure, null);
      assert.ok(state.time > 0.5, `currentTime ${state.time}`);
      assert.ok(
        ['160x120', '320x240'].includes(`${state.width}x${state.height}`),
        `videoWidth ${state.width}x${state.height}`,
      );
    } finally {
      await browser.close();
      await new Promise((resolve) => site.close(resolve));
    }
  });
});

const postgres = DIALECTS.find((d) => d.name === 'postgres')!;
describe('adaptive streaming on PostgreSQL (graphile-worker runs the job)', {
  skip: ffmpegSkip || postgres.skip,
}, () => {
  let h: Harness;
  let base: string;
  before(async () => {
    makeClips();
    h = await makeHarness('postgres');
    base = await h.app.listen({ host: '127.0.0.1', port: 0 });
    const sdk = new Stowage({ baseUrl: base, apiKey: h.ws.private_key });
    await sdk.upload(new Blob([readFileSync(at('clip.mp4'))]), 'clip.mp4');
  });
  after(async () => {
    await h?.close();
  });

  test('identical asks queue one job; the package is then served and read by ffprobe', async () => {
    const url = `${base}/${h.ws.workspace_id}/st_120/clip.mp4/ar-master.m3u8`;
    const asks = await Promise.all([fetch(url), fetch(url), fetch(url.replace('ar-master.m3u8', 'dash/manifest.mpd'))]);
    for (const r of asks) {
      assert.equal(r.status, 202);
      await r.arrayBuffer();
    }
    assert.equal(await h.services.jobs.runDue('video.stream'), 1);
    const done = await fetch(url);
    assert.equal(done.status, 200, (await done.clone().text()).slice(0, 200));
    assert.deepEqual(heights(await probeUrl(url)), ['160x120']);
  });
});
