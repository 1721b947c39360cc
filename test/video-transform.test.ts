// Video renditions through delivery (issue 21 item 2; docs/video.md): the video grammar, each
// token's output checked with ffprobe and decoded pixels, the async answers (triggered, then
// processing, then the media), one job for identical asks, stable failures, bad tokens 400.
// Real ffmpeg on tiny clips made here; jobs are run by the test (`runDue`), so every step is
// deterministic.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { Stowage } from '../sdk/src/index.ts';
import { buildApp } from '../src/app.ts';
import { createServices } from '../src/services/container.ts';
import { parseVideoTokens, videoRenditionName } from '../src/media/video/tokens.ts';
import { locateVideoEngine, videoDefaults } from '../src/media/video/engine.ts';
import { planTrim, transcode, transcodeArgs, transcodeDefaults } from '../src/media/video/transcode.ts';
import { FAILURE_TTL_MS } from '../src/services/video-renditions.ts';
import { DIALECTS, type Harness, makeHarness } from './helpers/harness.ts';
import { type Fetched, readFetched } from './helpers/http.ts';
import { clipFolder, ffmpegSkip, once } from './helpers/video.ts';

const { at, ffmpeg } = clipFolder('stowage-vtransform-');

/** H.264 for the clips: fast to make, and a pixel format every decoder reads. */
const X264 = ['-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p'];

/**
 * clip.mp4: 3 s of 320x240 at 25 fps, red, then green, then blue (one second each), with a
 * stereo tone. halves.mp4: 1 s, left half red and right half blue, silent. broken.mp4: the
 * first bytes of clip.mp4 (an MP4 by its magic, no playable media).
 */
const makeCorpus = once(() => {
  ffmpeg(
    '-f',
    'lavfi',
    '-i',
    "color=c=red:s=320x240:d=3:r=25,drawbox=x=0:y=0:w=iw:h=ih:color=lime:t=fill:enable='between(t,1,2)',drawbox=x=0:y=0:w=iw:h=ih:color=blue:t=fill:enable='gte(t,2)'",
    '-f',
    'lavfi',
    '-i',
    'sine=f=440:d=3,aformat=channel_layouts=stereo',
    ...X264,
    '-c:a',
    'aac',
    '-shortest',
    at('clip.mp4'),
  );
  ffmpeg(
    '-f',
    'lavfi',
    '-i',
    'color=c=red:s=320x240:d=1:r=25,drawbox=x=160:y=0:w=160:h=240:color=blue:t=fill',
    ...X264,
    at('halves.mp4'),
  );
  writeFileSync(at('broken.mp4'), readFileSync(at('clip.mp4')).subarray(0, 4096));
});

interface Probe {
  streams: Array<{ codec_type: string; codec_name: string; width?: number; height?: number; nb_read_frames?: string }>;
  format: { format_name: string; duration?: string };
}

function probe(path: string, countFrames = false): Probe {
  const args = ['-v', 'error', '-print_format', 'json', '-show_streams', '-show_format'];
  if (countFrames) args.push('-count_frames');
  return JSON.parse(execFileSync('ffprobe', [...args, path]).toString()) as Probe;
}

/** The RGB pixel at (x, y) of the frame at `t` seconds. */
function pixel(path: string, t: number, x: number, y: number, width: number): [number, number, number] {
  const raw = execFileSync('ffmpeg', [
    '-v',
    'error',
    '-ss',
    String(t),
    '-i',
    path,
    '-frames:v',
    '1',
    '-f',
    'rawvideo',
    '-pix_fmt',
    'rgb24',
    'pipe:1',
  ]);
  const i = (y * width + x) * 3;
  return [raw[i], raw[i + 1], raw[i + 2]];
}

const video = (p: Probe) => p.streams.find((s) => s.codec_type === 'video');
const audio = (p: Probe) => p.streams.find((s) => s.codec_type === 'audio');
const near = (a: number, b: number, tol: number) => Math.abs(a - b) <= tol;

describe('video tokens', () => {
  test('parsed: even sizes, ar_ completes a side, trims, formats, rotation, flips, audio removal', () => {
    assert.deepEqual(parseVideoTokens('w_101'), { width: 102 });
    assert.deepEqual(parseVideoTokens('w_400,ar_1:1'), { width: 400, height: 400 });
    assert.deepEqual(parseVideoTokens('h_90,ar_16:9'), { width: 160, height: 90 });
    assert.deepEqual(parseVideoTokens('w_400,h_400,cm_pad_resize,bg_white'), {
      width: 400,
      height: 400,
      mode: 'pad_resize',
      background: { kind: 'colour', hex: 'ffffff' },
    });
    assert.deepEqual(parseVideoTokens('cm_pad_resize,bg_blurred,w_8,h_8').background, { kind: 'blurred', sigma: 20 });
    assert.deepEqual(parseVideoTokens('cm_pad_resize,bg_F00').background, { kind: 'colour', hex: 'ff0000' });
    assert.deepEqual(parseVideoTokens('so_5,eo_15'), { start: 5, duration: 10 });
    assert.deepEqual(parseVideoTokens('eo_2.5'), { duration: 2.5 });
    assert.deepEqual(parseVideoTokens('st_1.5,d_2,f_gif'), { start: 1.5, duration: 2, format: 'gif' });
    assert.deepEqual(parseVideoTokens('r_-90,flip_hv,ac_none,q_40,f_webm'), {
      rotate: 270,
      flipH: true,
      flipV: true,
      removeAudio: true,
      quality: 40,
      format: 'webm',
    });
  });

  test('canonical names: one rendition however the URL spells it', () => {
    const name = (t: string) => {
      const s = parseVideoTokens(t);
      return videoRenditionName(s, s.format ?? 'mp4');
    };
    assert.equal(name('st_1,d_1,w_159'), name('w_160,so_1.000,d_1'));
    assert.equal(name('w_400,ar_1:1'), name('h_400,w_400'));
    assert.equal(name('so_5,eo_15'), name('st_5,d_10'));
    assert.notEqual(name('so_1,eo_2'), name('so_1,d_2'));
    assert.notEqual(name('w_100'), name('w_100,f_webm'));
  });

  test('refused with a 400 that names the token', () => {
    for (const [tokens, named] of [
      ['w_0', 'w_0'],
      ['w_4321', 'w_4321'],
      ['h_1.5', 'h_1.5'],
      ['ar_16', 'ar_16'],
      ['cm_fill', 'cm_fill'],
      ['cm_pad_resize,bg_nothex', 'bg_nothex'],
      ['cm_pad_resize,bg_blurred_0', 'bg_blurred_0'],
      ['so_-1', 'so_-1'],
      ['d_0', 'd_0'],
      ['f_avi', 'f_avi'],
      ['q_0', 'q_0'],
      ['r_45', 'r_45'],
      ['flip_x', 'flip_x'],
      ['ac_mono', 'ac_mono'],
      ['e_grayscale', 'e_grayscale'],
      ['so_5,eo_2', 'eo_2'],
      ['bg_white', 'bg_'],
    ])
      assert.throws(
        () => parseVideoTokens(tokens),
        (e: { errorCode?: string; message?: string }) =>
          e.errorCode === 'VALIDATION_FAILED' && (e.message ?? '').includes(named),
        tokens,
      );
  });

  test('trim plans against the video length and the caps', () => {
    const s = { ...transcodeDefaults(), maxOutputSeconds: 60, gifMaxSeconds: 5, gifMaxSide: 320 };
    assert.deepEqual(planTrim(parseVideoTokens('so_2,eo_4'), 'mp4', 10, s), { start: 2, seconds: 2, limit: 60 });
    assert.deepEqual(planTrim(parseVideoTokens('so_8,d_5'), 'mp4', 10, s), { start: 8, seconds: 2, limit: 60 });
    // A GIF without a trim: its first gifMaxSeconds.
    assert.deepEqual(planTrim(parseVideoTokens('f_gif'), 'gif', 30, s), { start: 0, seconds: 5, limit: 5 });
    // Unknown length: ffmpeg stops at the cap.
    assert.deepEqual(planTrim(parseVideoTokens('w_10'), 'mp4', null, s), { start: 0, seconds: undefined, limit: 60 });
    const refused = (tokens: string, format: 'mp4' | 'gif', duration: number | null, what: RegExp) =>
      assert.throws(
        () => planTrim(parseVideoTokens(tokens), format, duration, s),
        (e: { errorCode?: string; message?: string }) =>
          e.errorCode === 'VALIDATION_FAILED' && what.test(e.message ?? ''),
        tokens,
      );
    refused('so_10', 'mp4', 10, /past the end/);
    refused('so_1,eo_62', 'mp4', 100, /at most 60 s/);
    refused('w_10', 'mp4', 61, /at most 60 s/);
    refused('d_61', 'mp4', null, /at most 60 s/);
    refused('f_gif,d_6', 'gif', 30, /GIF is at most 5 s/);
    refused('f_gif,w_322', 'gif', 3, /GIF limit of 320/);
  });
});

test('every transcode runs under the hostile-input rules: one demuxer, file protocol only, caps on size and time', () => {
  const engine = locateVideoEngine({ ...videoDefaults(), searchPath: process.env.PATH });
  const spec = parseVideoTokens('w_100,f_gif,d_1');
  const s = transcodeDefaults();
  const args = transcodeArgs(
    engine,
    { path: '/data/blob' },
    'mov',
    spec,
    'gif',
    planTrim(spec, 'gif', 3, s),
    s,
    '/t/o',
  );
  const after = (flag: string) => args[args.indexOf(flag) + 1];
  assert.equal(after('-protocol_whitelist'), 'file');
  assert.equal(after('-f'), 'mov');
  assert.equal(after('-format_whitelist'), 'mov');
  assert.equal(after('-i'), 'file:/data/blob', 'a name never reads as another protocol');
  assert.equal(after('-fs'), String(s.maxOutputBytes));
  assert.equal(after('-t'), '1.000');
  assert.equal(after('-frames:v'), String(s.gifFps * s.gifMaxSeconds));
  assert.equal(args.at(-1), 'file:/t/o');
  assert.ok(args.includes('-an'), 'a GIF has no audio');
});

test('ffmpeg reports its progress as it goes (what a processing answer shows), up to the output length', {
  skip: ffmpegSkip,
}, async () => {
  makeCorpus();
  const engine = locateVideoEngine({ ...videoDefaults(), searchPath: process.env.PATH });
  const s = { ...transcodeDefaults(), speed: 'fastest' as const };
  const spec = parseVideoTokens('w_64,so_0.5,d_2');
  const seen: number[] = [];
  const size = await transcode(engine, s, {
    input: { path: at('clip.mp4') },
    demuxer: 'mov',
    spec,
    format: 'mp4',
    trim: planTrim(spec, 'mp4', 3, s),
    outPath: at('progress.mp4'),
    onProgress: (t) => seen.push(t),
  });
  assert.ok(size > 0);
  assert.ok(seen.length > 0, 'progress lines were read');
  for (let i = 1; i < seen.length; i++) assert.ok(seen[i] >= seen[i - 1], 'never goes back');
  assert.ok(near(seen[seen.length - 1], 2, 0.2), `last ${seen[seen.length - 1]}`);
});

type Got = Fetched<{ status?: string; progress?: number; errorCode?: string; message?: string }>;

for (const dialect of DIALECTS) {
  describe(`video renditions through delivery on ${dialect.name}`, { skip: ffmpegSkip || dialect.skip }, () => {
    let h: Harness;
    let base: string;
    let sdk: Stowage;
    const ws = () => h.ws.workspace_id;
    const transcodes = () => h.services.videoRenditions.stats.transcodes;
    const runJobs = () => h.services.jobs.runDue('video.transcode');
    const get = async (path: string, headers: Record<string, string> = {}): Promise<Got> =>
      readFetched(await fetch(`${base}/${ws()}/${path}`, { headers }));
    let n = 0;
    /** Asks, runs the job, asks again: the rendition's bytes, written to a file, and its probe. */
    const made = async (tokens: string, file = 'clip.mp4', countFrames = false) => {
      const first = await get(`${tokens}/${file}`);
      assert.equal(first.status, 202, `${tokens}: ${first.body.toString().slice(0, 300)}`);
      assert.equal(await runJobs(), 1, `${tokens}: one job`);
      const done = await get(`${tokens}/${file}`);
      assert.equal(done.status, 200, `${tokens}: ${done.body.toString().slice(0, 300)}`);
      const path = at(`out-${dialect.name}-${++n}`);
      writeFileSync(path, done.body);
      return { got: done, path, probe: probe(path, countFrames) };
    };

    before(async () => {
      makeCorpus();
      h = await makeHarness(dialect.name, {
        config: { transcode: { ...transcodeDefaults(), speed: 'fastest', gifMaxSeconds: 2, gifFps: 10 } },
      });
      base = await h.app.listen({ host: '127.0.0.1', port: 0 });
      sdk = new Stowage({ baseUrl: base, apiKey: h.ws.private_key });
      for (const name of ['clip.mp4', 'halves.mp4', 'broken.mp4'])
        await sdk.upload(new Blob([readFileSync(at(name))]), name);
    });
    after(() => h?.close());

    test('triggered, then processing, then the media: Range, ETag, the rendition ledger, no second transcode', async () => {
      const before = transcodes();
      const first = await get('w_160/clip.mp4');
      assert.equal(first.status, 202);
      assert.deepEqual(first.json, { status: 'triggered' });
      assert.equal(first.headers.get('cache-control'), 'no-store');
      const again = await get('w_160/clip.mp4');
      assert.equal(again.status, 202);
      assert.equal(again.json?.status, 'processing');
      assert.equal(await runJobs(), 1);
      assert.equal(transcodes(), before + 1);
      const done = await get('w_160/clip.mp4');
      assert.equal(done.status, 200, done.body.toString().slice(0, 300));
      assert.equal(done.headers.get('content-type'), 'video/mp4');
      assert.equal(done.headers.get('accept-ranges'), 'bytes');
      const path = at(`flow-${dialect.name}.mp4`);
      writeFileSync(path, done.body);
      const p = probe(path);
      assert.deepEqual([video(p)?.codec_name, video(p)?.width, video(p)?.height], ['h264', 160, 120]);
      assert.equal(audio(p)?.codec_name, 'aac');
      assert.ok(near(Number(p.format.duration), 3, 0.2), `duration ${p.format.duration}`);
      const part = await get('w_160/clip.mp4', { range: 'bytes=0-99' });
      assert.equal(part.status, 206);
      assert.equal(part.body.length, 100);
      assert.deepEqual(part.body, done.body.subarray(0, 100));
      const etag = done.headers.get('etag') ?? '';
      const cached = await get('w_159/clip.mp4', { 'if-none-match': etag });
      assert.equal(cached.status, 304, 'w_159 is w_160: the same rendition');
      assert.equal(transcodes(), before + 1, 'served from storage, not made again');
      const rows = await h.services.db.kysely.selectFrom('renditions').selectAll().execute();
      const row = rows.find((r) => String(r.key).endsWith('video.w_160.f_mp4.mp4'));
      assert.ok(row, 'counted in the rendition cache');
      assert.equal(Number(row.bytes), done.body.length);
    });

    test('identical concurrent first requests make one job and one transcode', async () => {
      const before = transcodes();
      const burst = await Promise.all(Array.from({ length: 6 }, () => get('w_96,ac_none/clip.mp4')));
      assert.deepEqual(
        burst.map((r) => r.status),
        Array(6).fill(202),
      );
      for (const r of burst) assert.ok(r.json?.status === 'triggered' || r.json?.status === 'processing');
      assert.equal(await runJobs(), 1, 'one job for six asks');
      assert.equal(await runJobs(), 0);
      assert.equal(transcodes(), before + 1);
      const done = await get('w_96,ac_none/clip.mp4');
      assert.equal(done.status, 200);
    });

    test('a video that cannot be transcoded: a stable 422, not an endless processing', async () => {
      const first = await get('w_64/broken.mp4');
      assert.equal(first.status, 202);
      await runJobs();
      for (let i = 0; i < 2; i++) {
        const failed = await get('w_64/broken.mp4');
        assert.equal(failed.status, 422, failed.body.toString().slice(0, 300));
        assert.equal(failed.json?.errorCode, 'TRANSCODE_FAILED');
      }
      assert.equal(await runJobs(), 0, 'no job queued again');
      // An hour later the failure is forgotten and the next request tries again.
      const markers: string[] = [];
      for await (const o of h.services.storage.list(`${ws()}/`)) if (o.key.endsWith('.failed')) markers.push(o.key);
      assert.equal(markers.length, 1, markers.join());
      const old = new Date(Date.now() - FAILURE_TTL_MS - 1000).toISOString();
      await h.services.storage.put(
        markers[0],
        Readable.from([Buffer.from(JSON.stringify({ message: 'x', at: old }))]),
        {
          durable: false,
        },
      );
      const retried = await get('w_64/broken.mp4');
      assert.equal(retried.status, 202);
      assert.deepEqual(retried.json, { status: 'triggered' });
      await runJobs();
    });

    test('a video deleted while its job waits: nothing is made or left behind', async () => {
      const renditionKeys = async () => {
        const keys: string[] = [];
        for await (const o of h.services.storage.list(`${ws()}/`)) if (o.key.includes('.renditions/')) keys.push(o.key);
        return keys.sort();
      };
      const existing = await renditionKeys();
      const rec = await sdk.upload(new Blob([readFileSync(at('halves.mp4')), Buffer.from('x')]), 'doomed.mp4');
      const first = await get('w_64/doomed.mp4');
      assert.equal(first.status, 202);
      const before = transcodes();
      await sdk.deleteFile(rec.file_no);
      assert.equal(await runJobs(), 1);
      assert.equal(transcodes(), before, 'no transcode of a deleted video');
      assert.deepEqual(await renditionKeys(), existing, 'no rendition and no failure marker');
    });

    test('a private video: an unsigned transcode URL is refused and queues nothing; a signed one works', async () => {
      const v = await sdk.upload(new Blob([readFileSync(at('halves.mp4')), Buffer.from('private')]), 'secret.mp4');
      await sdk.updateFile(v.file_no, { is_private: true });
      const unsigned = await get('w_64/secret.mp4');
      assert.equal(unsigned.status, 403);
      assert.equal(unsigned.json?.errorCode, 'SIGNED_URL_REQUIRED');
      assert.equal(await runJobs(), 0, 'no job for a refused request');
      const signed = await sdk.signedUrl(v.file_no, { transform: 'w_64' });
      const u = new URL(signed.url);
      const path = `${u.pathname.slice(ws().length + 2)}${u.search}`;
      assert.equal((await get(path)).status, 202);
      assert.equal(await runJobs(), 1);
      const done = await get(path);
      assert.equal(done.status, 200, done.body.toString().slice(0, 200));
      assert.match(done.headers.get('cache-control') ?? '', /^private/);
    });

    test('bad tokens, a trim past the end and video tokens on an image: 400 at once, no job', async () => {
      for (const [tokens, named] of [
        ['w_5000', 'w_5000'],
        ['r_45', 'r_45'],
        ['f_avi', 'f_avi'],
        ['so_2,eo_1', 'eo_1'],
        ['c_fill,w_10', 'c_fill'],
        ['so_10', 'past the end'],
        ['f_gif,d_5', 'at most 2 s'],
      ]) {
        const r = await get(`${tokens}/clip.mp4`);
        assert.equal(r.status, 400, `${tokens}: ${r.body.toString().slice(0, 200)}`);
        assert.equal(r.json?.errorCode, 'VALIDATION_FAILED', tokens);
        assert.ok(r.json?.message?.includes(named), `${tokens}: ${r.json?.message}`);
      }
      const png = await sdk.upload(
        new Blob([
          Buffer.from(
            'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==',
            'base64',
          ),
        ]),
        'dot.png',
      );
      assert.ok(png);
      const onImage = await get('so_1,eo_2/dot.png');
      assert.equal(onImage.status, 400);
      assert.match(onImage.json?.message ?? '', /so_1/);
      assert.equal(await runJobs(), 0);
    });

    test('a preset of video tokens: accepted when written, expanded at delivery', async () => {
      await sdk.setPreset('teaser', 'w_120,so_1,d_1,ac_none');
      const r = await made('t_teaser');
      assert.deepEqual([video(r.probe)?.width, video(r.probe)?.height], [120, 90]);
      assert.equal(audio(r.probe), undefined);
      assert.ok(near(Number(r.probe.format.duration), 1, 0.15));
      await assert.rejects(sdk.setPreset('bad', 'so_1,w_99999'), /w_99999/);
    });

    test('sizes: cover with w_ and h_, ar_, pad with a colour or the blurred video, extract', {
      skip: dialect.name !== 'sqlite' && 'the outputs are the same on every database',
    }, async () => {
      const cover = await made('w_160,h_160/clip.mp4'.split('/')[0]);
      assert.deepEqual([video(cover.probe)?.width, video(cover.probe)?.height], [160, 160]);
      const square = await made('w_200,ar_1:1');
      assert.deepEqual([video(square.probe)?.width, video(square.probe)?.height], [200, 200]);
      const padded = await made('w_200,h_100,cm_pad_resize,bg_white', 'halves.mp4');
      assert.deepEqual([video(padded.probe)?.width, video(padded.probe)?.height], [200, 100]);
      // 320x240 fitted in 200x100 is 134x100 (even), centred: white bars left and right.
      const [r, g, b] = pixel(padded.path, 0.5, 5, 50, 200);
      assert.ok(r > 220 && g > 220 && b > 220, `padding ${r},${g},${b}`);
      const [lr, , lb] = pixel(padded.path, 0.5, 60, 50, 200);
      assert.ok(lr > 180 && lb < 90, `left half stays red ${lr},${lb}`);
      const blurred = await made('w_200,h_100,cm_pad_resize,bg_blurred_10', 'halves.mp4');
      assert.deepEqual([video(blurred.probe)?.width, video(blurred.probe)?.height], [200, 100]);
      const [br, bg, bb] = pixel(blurred.path, 0.5, 5, 50, 200);
      assert.ok(br > 150 && bg < 100 && bb < 120, `blurred red video behind, not a colour ${br},${bg},${bb}`);
      const extract = await made('w_100,h_80,cm_extract', 'halves.mp4');
      assert.deepEqual([video(extract.probe)?.width, video(extract.probe)?.height], [100, 80]);
      // The middle 100 px of the frame, unscaled: the red/blue edge at its centre.
      const [er, , eb] = pixel(extract.path, 0.5, 40, 40, 100);
      const [fr, , fb] = pixel(extract.path, 0.5, 60, 40, 100);
      assert.ok(er > 180 && eb < 90 && fb > 180 && fr < 90, `edge in the middle ${er},${eb} | ${fr},${fb}`);
    });

    test('trim: so_/eo_ and st_/d_ are one rendition; the first frame is the one at the start', {
      skip: dialect.name !== 'sqlite' && 'the outputs are the same on every database',
    }, async () => {
      const trimmed = await made('so_1,eo_2');
      assert.ok(near(Number(trimmed.probe.format.duration), 1, 0.15), `duration ${trimmed.probe.format.duration}`);
      const [r, g, b] = pixel(trimmed.path, 0.1, 160, 120, 320);
      assert.ok(g > 180 && r < 90 && b < 90, `green second ${r},${g},${b}`);
      const before = transcodes();
      const same = await get('st_1,d_1/clip.mp4');
      assert.equal(same.status, 200, 'already made: served at once');
      assert.deepEqual(same.body, trimmed.got.body);
      assert.equal(transcodes(), before);
    });

    test('formats: WebM is VP9 and Opus; f_gif is a GIF of fps x seconds frames; ac_none drops the audio; q_ sizes', {
      skip: dialect.name !== 'sqlite' && 'the outputs are the same on every database',
    }, async () => {
      const webm = await made('w_160,f_webm');
      assert.match(webm.got.headers.get('content-type') ?? '', /^video\/webm/);
      assert.match(webm.probe.format.format_name, /webm/);
      assert.equal(video(webm.probe)?.codec_name, 'vp9');
      assert.equal(audio(webm.probe)?.codec_name, 'opus');
      const gif = await made('w_80,f_gif,st_1,d_1', 'clip.mp4', true);
      assert.equal(gif.got.headers.get('content-type'), 'image/gif');
      assert.equal(video(gif.probe)?.codec_name, 'gif');
      assert.equal(video(gif.probe)?.width, 80);
      assert.equal(Number(video(gif.probe)?.nb_read_frames), 10, '10 fps for 1 s');
      // No trim: the first STOWAGE_GIF_MAX_SECONDS (2 here) of the 3 s clip.
      const capped = await made('w_64,f_gif', 'clip.mp4', true);
      assert.equal(Number(video(capped.probe)?.nb_read_frames), 20);
      assert.equal(audio(gif.probe), undefined);
      const silent = await made('w_160,ac_none');
      assert.equal(audio(silent.probe), undefined, 'no audio stream');
      assert.equal(video(silent.probe)?.codec_name, 'h264');
      const low = await made('w_160,q_5');
      const high = await made('w_160,q_95');
      assert.ok(
        low.got.body.length < high.got.body.length,
        `q_5 ${low.got.body.length} < q_95 ${high.got.body.length}`,
      );
    });

    test('rotate and flip: r_90 turns clockwise after the resize; flip_h mirrors', {
      skip: dialect.name !== 'sqlite' && 'the outputs are the same on every database',
    }, async () => {
      const turned = await made('w_160,r_90', 'halves.mp4');
      assert.deepEqual([video(turned.probe)?.width, video(turned.probe)?.height], [120, 160]);
      // Clockwise: the left (red) half is now on top.
      const [tr, , tb] = pixel(turned.path, 0.5, 60, 30, 120);
      const [br, , bb] = pixel(turned.path, 0.5, 60, 130, 120);
      assert.ok(tr > 180 && tb < 90 && bb > 180 && br < 90, `top ${tr},${tb} bottom ${br},${bb}`);
      const flipped = await made('flip_h', 'halves.mp4');
      const [lr, , lb] = pixel(flipped.path, 0.5, 40, 120, 320);
      assert.ok(lb > 180 && lr < 90, `left is blue ${lr},${lb}`);
    });

    test("two nodes over one database: the second node's ask joins the first one's job, which serves the result", {
      skip: dialect.name !== 'postgres' && 'the SQLite queue is one process',
    }, async () => {
      const services = await createServices({ ...h.config, deliveryLookupTtlMs: 0 });
      const other = await buildApp(services, { logger: false });
      try {
        const ask = async (app: typeof other) => {
          const r = await app.inject({ method: 'GET', url: `/${ws()}/w_80,h_80,cm_pad_resize/halves.mp4` });
          return { status: r.statusCode, json: r.json() as { status?: string } | undefined };
        };
        const first = await ask(h.app);
        assert.deepEqual([first.status, first.json?.status], [202, 'triggered']);
        const second = await ask(other);
        assert.deepEqual([second.status, second.json?.status], [202, 'processing'], 'the job is seen across nodes');
        const before = services.videoRenditions.stats.transcodes;
        assert.equal(await services.jobs.runDue('video.transcode'), 1, 'one job, run by the other node');
        assert.equal(services.videoRenditions.stats.transcodes, before + 1);
        assert.equal(await runJobs(), 0);
        const done = await h.app.inject({ method: 'GET', url: `/${ws()}/w_80,h_80,cm_pad_resize/halves.mp4` });
        assert.equal(done.statusCode, 200);
        assert.equal(done.headers['content-type'], 'video/mp4');
      } finally {
        await other.close();
        await services.close();
      }
    });

    test('with the job queue started (as npm start does), a request is answered with the media without help', async () => {
      await h.services.jobs.start();
      let r = await get('w_48,f_webm/halves.mp4');
      const seen = new Set<string>();
      // Polls as a client would; bounded by tries, not by time.
      for (let i = 0; i < 600 && r.status === 202; i++) {
        seen.add(r.json?.status ?? '');
        await new Promise((res) => setTimeout(res, 50));
        r = await get('w_48,f_webm/halves.mp4');
      }
      assert.ok(seen.has('triggered'));
      assert.equal(r.status, 200, r.body.toString().slice(0, 200));
      assert.match(r.headers.get('content-type') ?? '', /^video\/webm/);
    });
  });
}
