// Video and audio at upload (issue 21 items 1, 4, 6): the engine, ffprobe's fields for clips made
// here by ffmpeg (no binary fixtures), posters, the hostile-media corpus, and uploads (direct and
// multipart) on every storage x database combination, with and without ffmpeg.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import sharp from 'sharp';
import { Stowage, uploadWithToken } from '../sdk/src/index.ts';
import { ConfigError, loadConfig } from '../src/config.ts';
import { AppError } from '../src/errors.ts';
import { locateVideoEngine, type VideoEngine, videoDefaults } from '../src/media/video/engine.ts';
import { extractPoster } from '../src/media/video/poster.ts';
import { type MediaInput, measureDuration, probeArgs, probeMedia } from '../src/media/video/probe.ts';
import { runBounded } from '../src/media/video/spawn.ts';
import { ProbeSlots } from '../src/uploads/media-probe.ts';
import { type Harness, makeHarness } from './helpers/harness.ts';
import { localServer } from './helpers/servers.ts';
import { freshS3Storage, UPLOAD_MATRIX } from './helpers/storage.ts';
import { clipFolder, ffmpegSkip } from './helpers/video.ts';

const skip = ffmpegSkip;
const { at, ffmpeg } = clipFolder('stowage-video-');
let corpusMade = false;

/** The corpus: small clips and crafted hostile inputs, all made here (once per run). */
function makeCorpus(): void {
  if (corpusMade) return;
  corpusMade = true;
  const video = ['-f', 'lavfi', '-i', 'testsrc=s=320x240:d=1:r=25'];
  const tone = ['-f', 'lavfi', '-i', 'sine=f=440:d=1'];
  ffmpeg(
    ...video,
    ...tone,
    '-c:v',
    'libx264',
    '-pix_fmt',
    'yuv420p',
    '-c:a',
    'aac',
    '-ac',
    '2',
    '-shortest',
    at('h264.mp4'),
  );
  // The QuickTime rotation tag a phone writes for portrait video.
  ffmpeg('-i', at('h264.mp4'), '-c', 'copy', '-metadata:s:v:0', 'rotate=90', at('rotated.mp4'));
  ffmpeg(
    ...video,
    ...tone,
    '-c:v',
    'libvpx-vp9',
    '-deadline',
    'realtime',
    '-cpu-used',
    '8',
    '-c:a',
    'libopus',
    '-shortest',
    at('clip.webm'),
  );
  ffmpeg(...tone, '-c:a', 'libmp3lame', at('tone.mp3'));
  ffmpeg(...tone, '-c:a', 'libopus', at('tone.opus'));
  // Moov at the end (ffmpeg's default), cut in half: the index is gone.
  const whole = readFileSync(at('h264.mp4'));
  writeFileSync(at('truncated.mp4'), whole.subarray(0, Math.floor(whole.length / 2)));
  // Raw 256x256 frames in Matroska, the header's sizes then rewritten: 0x0100 → 0x3000 (12288)
  // and → 0x4000 (16384). The stored frame is tiny; the claim is a ~150-270 megapixel picture.
  ffmpeg(
    '-f',
    'lavfi',
    '-i',
    'color=c=gray:s=256x256:d=0.04:r=25',
    '-c:v',
    'rawvideo',
    '-pix_fmt',
    'gray',
    at('raw.mkv'),
  );
  const raw = readFileSync(at('raw.mkv'));
  for (const [name, hi] of [
    ['huge.mkv', 0x30],
    ['huger.mkv', 0x40],
  ] as const) {
    const patched = Buffer.from(raw);
    for (const id of [0xb0, 0xba]) {
      const i = patched.indexOf(Buffer.from([id, 0x82, 0x01, 0x00]));
      assert.ok(i > 0, 'the pixel size element is where expected');
      patched[i + 2] = hi;
    }
    writeFileSync(at(name), patched);
  }
}

const engineWith = (
  over: Partial<ReturnType<typeof videoDefaults>> = {},
  log?: { warn: (o: object, m: string) => void },
) => locateVideoEngine({ ...videoDefaults(), searchPath: process.env.PATH, ...over }, { log });

async function refused(p: Promise<unknown>, match: RegExp): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof AppError, String(err));
    assert.equal(err.errorCode, 'VIDEO_REFUSED');
    assert.match(err.message, match);
    return true;
  });
}

/** No process whose command line holds `marker` is left. */
function noProcessWith(marker: string): boolean {
  return spawnSync('pgrep', ['-f', marker]).status === 1;
}

describe('video engine', { skip }, () => {
  let engine: VideoEngine;
  before(() => {
    makeCorpus();
    engine = engineWith();
  });

  test('found on PATH; an explicit path that is missing turns video off with one log line and 501 where needed', () => {
    assert.equal(engine.available, true);
    assert.match(engine.ffprobe ?? '', /\/ffprobe$/);
    const lines: string[] = [];
    const off = engineWith({ ffprobePath: at('no-such-ffprobe') }, { warn: (_o, m) => lines.push(m) });
    assert.equal(off.available, false);
    assert.equal(off.ffprobe, null, 'no fallback to PATH behind an explicit path');
    assert.ok(off.ffmpeg, 'ffmpeg itself was found');
    assert.equal(lines.length, 1);
    assert.match(lines[0], /video features are off: .*no-such-ffprobe/);
    assert.throws(
      () => off.require('ffprobe'),
      (e: unknown) => e instanceof AppError && e.status === 501 && e.errorCode === 'VIDEO_ENGINE_MISSING',
    );
    // A file that is there but not executable is not an engine either.
    writeFileSync(at('not-exec'), '#!/bin/sh\n');
    assert.equal(engineWith({ ffmpegPath: at('not-exec') }, { warn() {} }).ffmpeg, null);
  });

  test('settings: binaries as absolute paths, the probe budget and the caps, checked at start', () => {
    const data = mkdtempSync(join(tmpdir(), 'stowage-cfg-'));
    try {
      const c = loadConfig({
        STOWAGE_DATA_DIR: data,
        PATH: '/opt/x/bin:/usr/bin',
        STOWAGE_FFMPEG_PATH: '/opt/ff/ffmpeg',
        STOWAGE_PROBE_TIMEOUT_MS: '2500',
        STOWAGE_VIDEO_MAX_STREAMS: '8',
      }).video;
      assert.deepEqual(
        [c.ffmpegPath, c.ffprobePath, c.searchPath, c.probeTimeoutMs, c.maxStreams, c.maxPixels],
        ['/opt/ff/ffmpeg', undefined, '/opt/x/bin:/usr/bin', 2500, 8, 8192 * 8192],
      );
      assert.throws(
        () =>
          loadConfig({ STOWAGE_DATA_DIR: data, STOWAGE_FFPROBE_PATH: 'bin/ffprobe', STOWAGE_PROBE_TIMEOUT_MS: '5' }),
        (e: unknown) =>
          e instanceof ConfigError &&
          /STOWAGE_FFPROBE_PATH must be an absolute path/.test(e.message) &&
          /STOWAGE_PROBE_TIMEOUT_MS must be a whole number from 100/.test(e.message),
      );
    } finally {
      rmSync(data, { recursive: true, force: true });
    }
  });

  test('H.264 + AAC in MP4: size, duration, codecs, rate, channels', async () => {
    const p = await probeMedia(engine, { path: at('h264.mp4') }, { demuxer: 'mov', timeoutMs: 10_000 });
    assert.equal(p.width, 320);
    assert.equal(p.height, 240);
    assert.ok(p.duration !== null && Math.abs(p.duration - 1) < 0.1, String(p.duration));
    assert.equal(p.media.video_codec, 'h264');
    assert.equal(p.media.audio_codec, 'aac');
    assert.equal(p.media.audio_channels, 2);
    assert.equal(p.media.audio_sample_rate, 44100);
    assert.equal(p.media.frame_rate, 25);
    assert.equal(p.media.rotation, 0);
    assert.equal(p.media.pixel_format, 'yuv420p');
    assert.equal(p.media.streams, 2);
    assert.match(p.media.container, /mp4/);
    assert.ok(p.media.bit_rate && p.media.bit_rate > 0);
  });

  test('rotation metadata: the displayed size is swapped, the coded size kept', async () => {
    const p = await probeMedia(engine, { path: at('rotated.mp4') }, { demuxer: 'mov', timeoutMs: 10_000 });
    assert.deepEqual([p.width, p.height], [240, 320]);
    assert.deepEqual([p.media.coded_width, p.media.coded_height], [320, 240]);
    assert.equal(p.media.rotation, 90);
  });

  test('WebM (VP9 + Opus), MP3 and Ogg Opus, also read from a pipe', async () => {
    const webm = await probeMedia(engine, { path: at('clip.webm') }, { demuxer: 'matroska', timeoutMs: 10_000 });
    assert.deepEqual(
      [webm.width, webm.height, webm.media.video_codec, webm.media.audio_codec],
      [320, 240, 'vp9', 'opus'],
    );
    assert.match(webm.media.container, /webm/);
    for (const [name, demuxer, codec] of [
      ['tone.mp3', 'mp3', 'mp3'],
      ['tone.opus', 'ogg', 'opus'],
    ]) {
      const a = await probeMedia(engine, { path: at(name) }, { demuxer, timeoutMs: 10_000 });
      assert.deepEqual([a.width, a.height, a.media.video_codec, a.media.audio_codec], [null, null, null, codec], name);
      assert.ok(a.duration !== null && Math.abs(a.duration - 1) < 0.1, `${name}: ${a.duration}`);
      assert.equal(a.media.audio_channels, 1);
    }
    // The index of this MP4 is at its end: a pipe is read through to it.
    const piped = await probeMedia(
      engine,
      { stream: Readable.from([readFileSync(at('h264.mp4'))]) },
      { demuxer: 'mov', timeoutMs: 10_000 },
    );
    assert.deepEqual([piped.width, piped.height, piped.media.video_codec], [320, 240, 'h264']);
    // An MP3 has no index: from a pipe its duration comes from its size and bit rate.
    const mp3 = readFileSync(at('tone.mp3'));
    const bare = await probeMedia(engine, { stream: Readable.from([mp3]) }, { demuxer: 'mp3', timeoutMs: 10_000 });
    assert.equal(bare.duration, null);
    const sized = await probeMedia(
      engine,
      { stream: Readable.from([mp3]), size: mp3.length },
      { demuxer: 'mp3', timeoutMs: 10_000 },
    );
    assert.ok(sized.duration !== null && Math.abs(sized.duration - 1) < 0.1, String(sized.duration));
    // Ogg keeps its length at its end: on a pipe the packets are read through for it.
    const opus = readFileSync(at('tone.opus'));
    const ogg = await probeMedia(engine, { stream: Readable.from([opus]) }, { demuxer: 'ogg', timeoutMs: 10_000 });
    assert.equal(ogg.duration, null);
    const measured = await measureDuration(engine, Readable.from([opus]), { demuxer: 'ogg', timeoutMs: 10_000 });
    assert.ok(measured !== null && Math.abs(measured - 1) < 0.1, String(measured));
  });

  test('posters: WebP of the displayed frame, at a width, at a time; none past the end', async () => {
    const poster = await extractPoster(
      engine,
      { path: at('h264.mp4') },
      { atSeconds: 0.5, timeoutMs: 10_000, demuxer: 'mov' },
    );
    const meta = await sharp(poster).metadata();
    assert.deepEqual([meta.format, meta.width, meta.height], ['webp', 320, 240]);
    const small = await extractPoster(
      engine,
      { path: at('rotated.mp4') },
      { atSeconds: 0, width: 120, timeoutMs: 10_000, demuxer: 'mov' },
    );
    const sm = await sharp(small).metadata();
    assert.deepEqual([sm.format, sm.width, sm.height], ['webp', 120, 160], 'portrait, as displayed');
    // Two different moments of testsrc differ (its counter moves).
    const later = await extractPoster(
      engine,
      { path: at('h264.mp4') },
      { atSeconds: 0.9, timeoutMs: 10_000, demuxer: 'mov' },
    );
    const [a, b] = await Promise.all([poster, later].map((x) => sharp(x).raw().toBuffer()));
    assert.notDeepEqual(a, b);
    await refused(
      extractPoster(engine, { path: at('h264.mp4') }, { atSeconds: 30, timeoutMs: 10_000, demuxer: 'mov' }),
      /no video frame/,
    );
    await refused(
      extractPoster(engine, { path: at('tone.mp3') }, { atSeconds: 0, timeoutMs: 10_000, demuxer: 'mp3' }),
      /readable/,
    );
    await refused(
      extractPoster(engine, { path: at('h264.mp4') }, { atSeconds: -1, timeoutMs: 10_000, demuxer: 'mov' }),
      /out of range/,
    );
  });

  test('probe slots: a wait ends at its deadline; a freed slot goes to the next waiter', async () => {
    const slots = new ProbeSlots(1);
    const first = await slots.acquire(Date.now() + 1000);
    assert.ok(first);
    const t0 = Date.now();
    assert.equal(await slots.acquire(Date.now() + 150), null, 'no slot within the deadline');
    assert.ok(Date.now() - t0 >= 140);
    const next = slots.acquire(Date.now() + 5000);
    setTimeout(first, 50);
    const second = await next;
    assert.ok(second, 'the released slot was handed on');
    first(); // Releasing twice frees nothing more.
    assert.equal(await slots.acquire(Date.now() + 50), null);
    second();
    assert.ok(await slots.acquire(Date.now()));
  });

  test('every run is told: no shell, local protocols only, one demuxer, stream and pixel caps', () => {
    const args = probeArgs(engine, { path: '/x/concat:y|http://z' }, 'mov');
    const value = (flag: string) => args[args.indexOf(flag) + 1];
    assert.equal(value('-protocol_whitelist'), 'file');
    assert.equal(value('-f'), 'mov');
    assert.equal(value('-format_whitelist'), 'mov');
    assert.equal(value('-max_streams'), '32');
    assert.equal(value('-max_pixels'), String(8192 * 8192));
    assert.equal(args.at(-1), 'file:/x/concat:y|http://z', 'a name never reads as a protocol');
    assert.equal(probeArgs(engine, { stream: Readable.from([]) }, 'mp3').at(-1), 'pipe:0');
  });
});

describe('hostile media', { skip }, () => {
  let engine: VideoEngine;
  let listener: Server;
  let port = 0;
  let connections = 0;
  /** A FIFO named inside the playlists: if ffmpeg opened it, our writer's open would complete. */
  let bait = '';
  let baitOpened = false;
  let baitWriter: Promise<void> = Promise.resolve();
  const hostileDir = mkdtempSync(join(tmpdir(), 'stowage-hostile-'));
  const h = (name: string) => join(hostileDir, name);

  before(async () => {
    engine = engineWith();
    listener = createServer((_req, res) => res.end('#EXTM3U\n'));
    listener.on('connection', () => connections++);
    await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
    port = (listener.address() as { port: number }).port;
    bait = h('bait.ts');
    execFileSync('mkfifo', [bait]);
    baitWriter = open(bait, 'w').then(async (fh) => {
      baitOpened = true;
      await fh.close();
    });
    const playlist = [
      '#EXTM3U',
      '#EXT-X-VERSION:3',
      '#EXT-X-TARGETDURATION:1',
      '#EXTINF:1.0,',
      `http://127.0.0.1:${port}/segment.ts`,
      '#EXTINF:1.0,',
      '/etc/passwd',
      '#EXTINF:1.0,',
      bait,
      '#EXT-X-ENDLIST',
      '',
    ].join('\n');
    writeFileSync(h('playlist.mp4'), playlist);
    writeFileSync(h('playlist.m3u8'), playlist);
    writeFileSync(
      h('list.mp4'),
      `ffconcat version 1.0\nfile /etc/passwd\nfile ${bait}\nfile http://127.0.0.1:${port}/x.mp4\n`,
    );
  });
  after(async () => {
    listener.close();
    // Release the pending open of the bait (a reader lets the writer's open complete).
    const fh = await open(bait, 'r');
    await baitWriter;
    await fh.close();
    rmSync(hostileDir, { recursive: true, force: true });
  });

  test('the crafted playlist is dangerous: an unrestricted ffprobe does fetch from the listener', async () => {
    // The control: without the rules, ffprobe takes the bytes for HLS and connects, so the
    // assertions below could fail.
    const control = h('control.m3u8');
    writeFileSync(
      control,
      `#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXTINF:1.0,\nhttp://127.0.0.1:${port}/c.ts\n#EXT-X-ENDLIST\n`,
    );
    const before = connections;
    await runBounded('ffprobe', ['-v', 'error', '-protocol_whitelist', 'file,http,tcp', control], {
      timeoutMs: 10_000,
      maxStdout: 65536,
    });
    assert.ok(connections > before, 'the unrestricted probe connected');
  });

  test('an HLS playlist named .mp4 (a URL, /etc/passwd, a FIFO): refused, no connection, no file opened', async () => {
    const before = connections;
    const piped = (): MediaInput => ({ stream: Readable.from([readFileSync(h('playlist.mp4'))]) });
    for (const [input, demuxer] of [
      [() => ({ path: h('playlist.mp4') }), 'mov'],
      [() => ({ path: h('playlist.m3u8') }), 'mov'],
      [piped, 'mov'],
      [() => ({ path: h('playlist.mp4') }), 'matroska'],
      [piped, 'mp3'],
    ] as [() => MediaInput, string][]) {
      await refused(probeMedia(engine, input(), { demuxer, timeoutMs: 5000 }), /not a readable/);
      await refused(extractPoster(engine, input(), { atSeconds: 0, timeoutMs: 5000, demuxer }), /not a readable/);
    }
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(connections, before, 'no connection reached the listener');
    assert.equal(baitOpened, false, 'the FIFO named in the playlist was never opened');
  });

  test('an ffconcat list: refused, nothing it names is opened', async () => {
    const before = connections;
    await refused(probeMedia(engine, { path: h('list.mp4') }, { demuxer: 'mov', timeoutMs: 5000 }), /not a readable/);
    await refused(
      extractPoster(engine, { path: h('list.mp4') }, { atSeconds: 0, timeoutMs: 5000, demuxer: 'mov' }),
      /not a readable/,
    );
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(connections, before);
    assert.equal(baitOpened, false);
  });

  test('a truncated MP4 and huge-dimension streams are refused, quickly', async () => {
    const t0 = Date.now();
    await refused(
      probeMedia(engine, { path: at('truncated.mp4') }, { demuxer: 'mov', timeoutMs: 5000 }),
      /not a readable/,
    );
    for (const name of ['huge.mkv', 'huger.mkv']) {
      await refused(
        probeMedia(engine, { path: at(name) }, { demuxer: 'matroska', timeoutMs: 5000 }),
        /frame size|pixel limit|not a readable/,
      );
      await refused(
        extractPoster(engine, { path: at(name) }, { atSeconds: 0, timeoutMs: 5000, demuxer: 'matroska' }),
        /readable|no video frame/,
      );
    }
    // With a raised limit the claimed size is what is refused, by our own check.
    const lax = engineWith({ maxPixels: 1_000_000_000 });
    const p = await probeMedia(lax, { path: at('huge.mkv') }, { demuxer: 'matroska', timeoutMs: 5000 });
    assert.deepEqual([p.width, p.height], [12288, 12288], 'the crafted claim is read as such');
    await refused(
      probeMedia(
        engineWith({ maxPixels: 100_000_000 }),
        { path: at('huge.mkv') },
        { demuxer: 'matroska', timeoutMs: 5000 },
      ),
      /frame size|pixel limit/,
    );
    assert.ok(Date.now() - t0 < 10_000);
  });

  test('endless inputs: a FIFO nobody writes and a pipe that trickles forever end at the time limit, process and all', async () => {
    const fifo = h('endless-fifo.mp4');
    execFileSync('mkfifo', [fifo]);
    let t0 = Date.now();
    await refused(probeMedia(engine, { path: fifo }, { demuxer: 'mov', timeoutMs: 700 }), /longer than 700 ms/);
    assert.ok(Date.now() - t0 < 3000, `ended after ${Date.now() - t0} ms`);
    assert.ok(noProcessWith(fifo), 'no ffprobe left on the FIFO');
    await refused(
      extractPoster(engine, { path: fifo }, { atSeconds: 0, timeoutMs: 700, demuxer: 'mov' }),
      /longer than 700 ms/,
    );
    assert.ok(noProcessWith(fifo), 'no ffmpeg left on the FIFO');

    let pulled = 0;
    const trickle = new Readable({
      read() {
        pulled++;
        setTimeout(() => this.push(Buffer.alloc(16, 0x47)), 20);
      },
    });
    t0 = Date.now();
    await refused(probeMedia(engine, { stream: trickle }, { demuxer: 'mpegts', timeoutMs: 700 }), /longer than 700 ms/);
    assert.ok(Date.now() - t0 < 3000);
    assert.ok(pulled > 0);
    assert.equal(trickle.destroyed, true, 'the input stream is let go');
  });

  test('a child that forks and ignores its stdin is killed with its whole process group at the limit', async () => {
    const marker = `${27 + Math.random()}`.slice(0, 8);
    const t0 = Date.now();
    const run = await runBounded('/bin/sh', ['-c', `sleep ${marker} & sleep ${marker}; echo done`], {
      timeoutMs: 300,
      maxStdout: 1024,
    });
    assert.equal(run.timedOut, true);
    assert.ok(Date.now() - t0 < 2000);
    await new Promise((r) => setTimeout(r, 100));
    assert.ok(noProcessWith(`sleep ${marker}`), 'the background child went with the group');
  });
});

/** A stand-in ffprobe that never answers (its child too): the upload must not wait for it. */
function hangingProbe(path: string, marker: string): string {
  writeFileSync(path, `#!/bin/sh\nsleep ${marker} &\nsleep ${marker}\n`);
  chmodSync(path, 0o755);
  return path;
}

for (const combo of UPLOAD_MATRIX) {
  describe(`video uploads on ${combo.name}`, { skip: skip || combo.skip }, () => {
    let hx: Harness;
    let base: string;
    let client: Stowage;
    const clip = (name: string, type = 'application/octet-stream') => new Blob([readFileSync(at(name))], { type });

    before(async () => {
      makeCorpus();
      const storage = combo.storage === 's3' ? await freshS3Storage() : { driver: 'local' as const, fsync: true };
      hx = await makeHarness(combo.dialect, { config: { storage, outboundAllow: ['127.0.0.1'] } });
      base = await hx.app.listen({ host: '127.0.0.1', port: 0 });
      (hx.services.multipart as any).settings.publicUrl = base;
      client = new Stowage({ baseUrl: base, apiKey: hx.ws.private_key });
    });
    after(() => hx?.close());

    test('direct: MP4, WebM, MP3 and Opus records carry size, duration and media; GET and list give the same', async () => {
      const mp4 = await client.upload(clip('h264.mp4'), 'h264.mp4');
      assert.deepEqual([mp4.mime_type, mp4.width, mp4.height], ['video/mp4', 320, 240]);
      assert.ok(mp4.duration !== null && Math.abs(mp4.duration - 1) < 0.1);
      assert.equal(mp4.media?.video_codec, 'h264');
      assert.equal(mp4.media?.audio_codec, 'aac');
      assert.equal(mp4.media?.audio_channels, 2);
      assert.equal(mp4.media?.frame_rate, 25);
      const webm = await client.upload(clip('clip.webm'), 'clip.webm');
      assert.deepEqual(
        [webm.width, webm.height, webm.media?.video_codec, webm.media?.audio_codec],
        [320, 240, 'vp9', 'opus'],
      );
      for (const [name, codec] of [
        ['tone.mp3', 'mp3'],
        ['tone.opus', 'opus'],
      ]) {
        const a = await client.upload(clip(name), name);
        assert.match(a.mime_type, /^audio\//, name);
        assert.deepEqual(
          [a.width, a.height, a.media?.video_codec, a.media?.audio_codec],
          [null, null, null, codec],
          name,
        );
        assert.ok(a.duration !== null && Math.abs(a.duration - 1) < 0.1, `${name}: ${a.duration}`);
      }
      const got = await client.getFile(mp4.file_no);
      assert.equal(got.duration, mp4.duration);
      assert.deepEqual(got.media, mp4.media);
      const page = await client.listFiles({ limit: 100 });
      const listed = page.items.find((f) => f.file_no === webm.file_no);
      assert.deepEqual(listed?.media, webm.media);
      assert.equal(listed?.duration, webm.duration);
      // An image is not probed: its media fields stay null.
      const png = await sharp({ create: { width: 4, height: 3, channels: 3, background: '#123' } })
        .png()
        .toBuffer();
      const img = await client.upload(new Blob([png]), 'x.png');
      assert.deepEqual([img.width, img.height, img.duration, img.media], [4, 3, null, null]);
    });

    test('multipart: the rotated clip is probed at complete, displayed size swapped', async () => {
      const r = await client.uploadMultipart(clip('rotated.mp4', 'video/mp4'), 'rotated.mp4');
      assert.equal(r.upload_source, 'multipart');
      assert.deepEqual([r.width, r.height, r.media?.rotation], [240, 320, 90]);
      assert.deepEqual([r.media?.coded_width, r.media?.coded_height], [320, 240]);
      // Replacing it with other content replaces the media fields too.
      const again = await client.upload(clip('clip.webm'), 'rotated.mp4');
      assert.equal(again.file_no, r.file_no);
      assert.equal(again.media?.video_codec, 'vp9');
      assert.equal(again.media?.rotation, 0);
    });

    test('remote and token uploads are probed too', async () => {
      const origin = await localServer((_req, res) => {
        res.setHeader('content-type', 'video/webm');
        res.end(readFileSync(at('clip.webm')));
      });
      try {
        const remote = await client.uploadFromUrl(`${origin.url}/clip.webm`, { fileName: 'remote.webm' });
        assert.equal(remote.upload_source, 'remote');
        assert.deepEqual([remote.width, remote.height, remote.media?.video_codec], [320, 240, 'vp9']);
      } finally {
        await origin.close();
      }
      const t = await client.generateToken({ fileName: 'token.mp3', ttlSeconds: 60 });
      const r = await uploadWithToken(base + new URL(t.upload_url).pathname, clip('tone.mp3'));
      assert.equal(r.media?.audio_codec, 'mp3');
      assert.ok(r.duration !== null && Math.abs(r.duration - 1) < 0.1);
    });

    test('hostile files upload as plain files: a playlist named .mp4, an ffconcat list, a truncated MP4, a huge frame', async () => {
      const playlist = `#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXTINF:1,\n/etc/passwd\n#EXT-X-ENDLIST\n`;
      for (const [name, body] of [
        ['evil.mp4', Buffer.from(playlist)],
        ['list.mp4', Buffer.from('ffconcat version 1.0\nfile /etc/passwd\n')],
        ['truncated.mp4', readFileSync(at('truncated.mp4'))],
        ['huge.mkv', readFileSync(at('huge.mkv'))],
        ['huger.mkv', readFileSync(at('huger.mkv'))],
      ] as const) {
        const r = await client.upload(new Blob([body]), name);
        assert.equal(r.size, body.length, name);
        assert.deepEqual([r.width, r.height, r.duration, r.media], [null, null, null, null], name);
      }
    });
  });
}

describe('uploads without a working ffprobe', { skip }, () => {
  test('a missing ffprobe: one log line at start, the upload works, no media fields', async () => {
    const lines: string[] = [];
    const logger = {
      warn: (_o: object, m: string) => lines.push(`warn ${m}`),
      info() {},
      debug() {},
      error() {},
    };
    const hx = await makeHarness('sqlite', {
      config: { video: { ...videoDefaults(), searchPath: process.env.PATH, ffprobePath: at('missing/ffprobe') } },
      services: { logger: logger as any },
    });
    try {
      makeCorpus();
      const client = new Stowage({
        baseUrl: await hx.app.listen({ host: '127.0.0.1', port: 0 }),
        apiKey: hx.ws.private_key,
      });
      const r = await client.upload(new Blob([readFileSync(at('h264.mp4'))]), 'a.mp4');
      assert.equal(r.mime_type, 'video/mp4');
      assert.deepEqual([r.width, r.height, r.duration, r.media], [null, null, null, null]);
      await client.upload(new Blob([readFileSync(at('tone.mp3'))]), 'b.mp3');
      const off = lines.filter((l) => l.includes('video features are off'));
      assert.equal(off.length, 1, lines.join('\n'));
      assert.match(off[0], /missing\/ffprobe/);
      assert.equal(hx.services.video.available, false);
    } finally {
      await hx.close();
    }
  });

  test('an ffprobe that hangs does not hold the upload past the probe budget', async () => {
    const marker = `${28 + Math.random()}`.slice(0, 8);
    const fake = hangingProbe(join(mkdtempSync(join(tmpdir(), 'stowage-fake-')), 'ffprobe'), marker);
    const hx = await makeHarness('sqlite', {
      config: { video: { ...videoDefaults(), searchPath: process.env.PATH, ffprobePath: fake, probeTimeoutMs: 500 } },
    });
    try {
      makeCorpus();
      const client = new Stowage({
        baseUrl: await hx.app.listen({ host: '127.0.0.1', port: 0 }),
        apiKey: hx.ws.private_key,
      });
      const t0 = Date.now();
      const r = await client.upload(new Blob([readFileSync(at('h264.mp4'))]), 'slow.mp4');
      const took = Date.now() - t0;
      assert.ok(took < 2500, `answered after ${took} ms`);
      assert.deepEqual([r.duration, r.media], [null, null]);
      await new Promise((res) => setTimeout(res, 100));
      assert.ok(noProcessWith(`sleep ${marker}`), 'the hanging probe and its child are gone');
    } finally {
      await hx.close();
    }
  });
});
