// bench/video: what Stowage adds to ffmpeg. A 1080p clip (10 s of testsrc2 with a tone, made
// here by ffmpeg) is uploaded to an in-process server on 127.0.0.1 with its job runner started,
// as `stowage serve` runs it; then, each RUNS times, alternating:
//   - transcode: Stowage's time from the first request of `w_1280/clip.mp4` (202 triggered)
//     until the rendition answers 200 (polled every POLL_MS), against the same ffmpeg command
//     (transcode.ts transcodeArgs, same input, same settings) run directly;
//   - stream: the same for an HLS package `st_360_720/clip.mp4/ar-master.m3u8` (stream.ts
//     streamArgs) against its ffmpeg command;
//   - first poster: a cold `thumb_ar/clip.mp4` (the frame extracted and stored while the request
//     waits), then a warm one.
// The rendition is deleted between runs so each run makes it again. Prints figures and ratios;
// asserts nothing (target: Stowage within 10% of ffmpeg alone). Bounded: two cores at the
// default speed take about a minute per run.
//
//   npm run bench:video                 RUNS=3 SECONDS=10 SPEED=fast by default
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Stowage } from '../sdk/src/index.ts';
import { locateVideoEngine, videoDefaults } from '../src/media/video/engine.ts';
import { streamArgs } from '../src/media/video/stream.ts';
import { parseVideoTokens } from '../src/media/video/tokens.ts';
import { planTrim, type TranscodeSpeed, transcodeArgs, transcodeDefaults } from '../src/media/video/transcode.ts';
import { makeHarness } from '../test/helpers/harness.ts';
import { fmt } from './lib.ts';

const RUNS = Number(process.env.RUNS ?? 3);
const SECONDS = Number(process.env.SECONDS ?? 10);
const SPEED = (process.env.SPEED ?? 'fast') as TranscodeSpeed;
const POLL_MS = 50;

const run = (file: string, args: string[]) =>
  new Promise<void>((resolve, reject) => {
    const child = spawn(file, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (c: Buffer) => {
      err += c.toString();
    });
    child.once('error', reject);
    child.once('close', (code) => (code === 0 ? resolve() : reject(new Error(`${file} exited ${code}: ${err}`))));
  });

const now = () => Number(process.hrtime.bigint()) / 1e6;
/** The least disturbed run: the machine may be shared, and other load only ever adds time. */
const best = (xs: number[]) => Math.min(...xs);

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'stowage-bench-video-'));
  const clip = join(dir, 'clip.mp4');
  console.log(`making a ${SECONDS} s 1920x1080 clip…`);
  await run('ffmpeg', [
    ...['-v', 'error', '-y', '-f', 'lavfi', '-i', `testsrc2=s=1920x1080:r=30:d=${SECONDS}`],
    ...['-f', 'lavfi', '-i', `sine=f=440:d=${SECONDS}`, '-c:v', 'libx264', '-preset', 'veryfast', '-crf', '20'],
    ...['-pix_fmt', 'yuv420p', '-c:a', 'aac', '-shortest', clip],
  ]);
  const settings = { ...transcodeDefaults(), speed: SPEED };
  const h = await makeHarness('sqlite', {
    config: { transcode: settings, storage: { driver: 'local', fsync: false } },
  });
  try {
    await h.services.jobs.start();
    const base = await h.app.listen({ host: '127.0.0.1', port: 0 });
    const sdk = new Stowage({ baseUrl: base, apiKey: h.ws.private_key });
    await sdk.upload(new Blob([readFileSync(clip)]), 'clip.mp4');
    const url = (p: string) => `${base}/${h.ws.workspace_id}/${p}`;
    const storage = h.services.storage;
    /** Deletes the stored renditions whose key includes `part`, so the next ask makes them again. */
    const forget = async (part: string) => {
      const keys: string[] = [];
      for await (const o of storage.list(`${h.ws.workspace_id}/`)) if (o.key.includes(part)) keys.push(o.key);
      // The ledger's rows stay: making a rendition again updates its row.
      await Promise.all(keys.map((k) => storage.delete(k)));
    };
    const untilServed = async (path: string) => {
      const t = now();
      for (;;) {
        const res = await fetch(url(path));
        await res.arrayBuffer();
        if (res.status === 200) return now() - t;
        if (res.status !== 202) throw new Error(`${path}: ${res.status}`);
        await new Promise((r) => setTimeout(r, POLL_MS));
      }
    };
    const timed = async (fn: () => Promise<unknown>) => {
      const t = now();
      await fn();
      return now() - t;
    };

    const engine = locateVideoEngine({ ...videoDefaults(), searchPath: process.env.PATH });
    const ffmpeg = engine.require('ffmpeg');
    const spec = parseVideoTokens('w_1280');
    const trim = planTrim(spec, 'mp4', SECONDS, settings);
    const out = join(dir, 'direct');
    await mkdir(out, { recursive: true });
    const directTranscode = () =>
      run(ffmpeg, transcodeArgs(engine, { path: clip }, 'mov', spec, 'mp4', trim, settings, join(out, 'w.mp4')));
    const directStream = async () => {
      const d = mkdtempSync(join(out, 's-'));
      await run(
        ffmpeg,
        streamArgs(
          engine,
          { path: clip },
          'mov',
          [360, 720],
          true,
          planTrim({}, 'mp4', SECONDS, settings),
          settings,
          d,
        ),
      );
    };

    const fig = {
      transcode: [] as number[],
      transcodeDirect: [] as number[],
      stream: [] as number[],
      streamDirect: [] as number[],
    };
    const posters = { cold: [] as number[], warm: [] as number[] };
    for (let i = 0; i < RUNS; i++) {
      console.log(`run ${i + 1}/${RUNS}…`);
      fig.transcodeDirect.push(await timed(directTranscode));
      await forget('video.w_1280');
      fig.transcode.push(await untilServed('w_1280/clip.mp4'));
      fig.streamDirect.push(await timed(directStream));
      await forget('/stream.h_360_720/');
      fig.stream.push(await untilServed('st_360_720/clip.mp4/ar-master.m3u8'));
      await forget('thumb_ar');
      posters.cold.push(await untilServed('thumb_ar/clip.mp4'));
      posters.warm.push(await untilServed('thumb_ar/clip.mp4'));
    }

    const row = (what: string, stowage: number[], direct: number[]) =>
      console.log(
        `| ${what} | ${fmt(best(stowage) / 1000, 2)} s | ${fmt(best(direct) / 1000, 2)} s | ${fmt(best(stowage) / best(direct), 3)} | ${stowage.map((x) => fmt(x / 1000, 2)).join(', ')} / ${direct.map((x) => fmt(x / 1000, 2)).join(', ')} |`,
      );
    console.log(
      `\n1080p ${SECONDS} s clip, STOWAGE_TRANSCODE_SPEED=${SPEED}, ${RUNS} runs (best of each; every run listed)\n`,
    );
    console.log('| what | Stowage (ask → 200) | ffmpeg alone | ratio | runs (Stowage / ffmpeg) |');
    console.log('|---|---|---|---|---|');
    row('transcode w_1280 (MP4, H.264 + AAC)', fig.transcode, fig.transcodeDirect);
    row('HLS/DASH package st_360_720', fig.stream, fig.streamDirect);
    console.log(
      `\nfirst poster (thumb_ar, cold, made in the request): ${fmt(best(posters.cold))} ms; warm (stored): ${fmt(best(posters.warm))} ms`,
    );
  } finally {
    await h.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
