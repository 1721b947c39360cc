// Adaptive streaming (docs/video.md#adaptive-streaming): the URL shapes of the hosted docs
// (`/{ws}/st_240_360_480_720/{path}/video.mp4/ar-master.m3u8`, `/{ws}/{path}/video.mp4/dash/manifest.mpd`),
// the ladder a stream is made of, and the one ffmpeg run that makes a whole package: every
// height from one decode, H.264 + AAC in fragmented MP4 segments, described both by an HLS
// master playlist and by a DASH manifest (ffmpeg's dash muxer writes both over the same
// segments), into a temporary folder. The same hostile-input rules as every run
// (inputGuardArgs), a wall-clock limit, a size limit on the folder and the duration cap.
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { appError, errors } from '../../errors.ts';
import type { VideoEngine } from './engine.ts';
import { inputArg, inputGuardArgs, type MediaInput } from './probe.ts';
import { progressReader, runBounded } from './spawn.ts';
import { VIDEO_MAX_SIDE } from './tokens.ts';
import type { TranscodeSettings, TrimPlan } from './transcode.ts';

/** The ladder without `st_` (a DASH manifest URL in the hosted docs names none). */
export const DEFAULT_LADDER = [240, 360, 480, 720];
/** Heights a ladder may hold: more is 400 (each is an encode of the whole video). */
export const MAX_RUNGS = 6;
/** The smallest height a rung may ask for. */
export const MIN_RUNG = 16;
/** Seconds per segment (a keyframe starts each). */
export const SEGMENT_SECONDS = 4;

/** The HLS master playlist's name, as the hosted docs spell it; written last, so it marks a whole package. */
export const HLS_MASTER = 'ar-master.m3u8';
export const DASH_MANIFEST = 'manifest.mpd';

/**
 * The files a package holds, as ffmpeg's dash muxer names them: the master, the manifest, one
 * media playlist per stream, and per stream an initialisation segment and numbered segments.
 * Nothing else is ever looked up under a package.
 */
const PACKAGE_FILE =
  /^(?:ar-master\.m3u8|manifest\.mpd|media_\d{1,2}\.m3u8|init-stream\d{1,2}\.m4s|chunk-stream\d{1,2}-\d{5,6}\.m4s)$/;

export type StreamFileKind = 'hls' | 'dash' | 'segment';

export const STREAM_MIME: Record<StreamFileKind, string> = {
  hls: 'application/vnd.apple.mpegurl',
  dash: 'application/dash+xml',
  segment: 'video/mp4',
};

export function streamFileKind(name: string): StreamFileKind {
  return name.endsWith('.m3u8') ? 'hls' : name.endsWith('.mpd') ? 'dash' : 'segment';
}

/**
 * The file of a package a path's last segments name (`ar-master.m3u8`, `media_0.m3u8`, or under
 * `dash/`, which is where the manifest's relative URLs point), and how many segments that is;
 * undefined when the path does not end like a stream. The manifest is only under `dash/` and the
 * master only outside it, as the docs spell them; the segments answer under both.
 */
export function streamSuffix(segments: readonly string[]): { file: string; count: number } | undefined {
  const last = segments[segments.length - 1];
  if (last === undefined || !PACKAGE_FILE.test(last)) return undefined;
  const dash = segments.length >= 3 && segments[segments.length - 2] === 'dash';
  if (last === DASH_MANIFEST && !dash) return undefined;
  if (last === HLS_MASTER && dash) return undefined;
  const count = dash ? 2 : 1;
  // At least the file's own name must be left.
  return segments.length > count ? { file: last, count } : undefined;
}

const bad = (why: string) => errors.validation(`streaming: ${why}`);

/**
 * The ladder of `st_{h}_{h}…` (heights in pixels, rounded up to even, duplicates dropped, sorted);
 * the default ladder for no tokens. A stream takes no other token: 400.
 */
export function parseLadder(tokens: string | undefined): number[] {
  if (tokens === undefined) return [...DEFAULT_LADDER];
  const m = /^st((?:_\d{1,5})+)$/.exec(tokens);
  if (!m)
    throw bad(
      `"${tokens.slice(0, 60)}" is not a ladder: a stream URL takes one st_ token of heights (st_240_360_480_720)`,
    );
  const asked = m[1].slice(1).split('_').map(Number);
  if (asked.length > MAX_RUNGS) throw bad(`at most ${MAX_RUNGS} heights (st_ has ${asked.length})`);
  for (const h of asked)
    if (h < MIN_RUNG || h > VIDEO_MAX_SIDE)
      throw bad(`st_ heights are from ${MIN_RUNG} to ${VIDEO_MAX_SIDE} pixels (${h})`);
  return [...new Set(asked.map((h) => h + (h % 2)))].sort((a, b) => a - b);
}

/**
 * The ladder made for a video `sourceHeight` tall (displayed; null when unknown): no rung taller
 * than the video (a stream never upscales), and the video's own height, made even, when every
 * asked rung is taller.
 */
export function capLadder(ladder: number[], sourceHeight: number | null): number[] {
  if (!sourceHeight || sourceHeight < 2) return ladder;
  const kept = ladder.filter((h) => h <= sourceHeight);
  return kept.length > 0 ? kept : [sourceHeight - (sourceHeight % 2)];
}

/** The package's name beside the blob (its storage folder and ETag part): one per distinct ladder. */
export const streamPackageName = (ladder: number[]) => `stream.h_${ladder.join('_')}`;

/** A rung's video bitrate (kbit/s): about 0.1 bit per pixel at 30 fps for a 16:9 picture, at least 200. */
export function rungKbps(height: number): number {
  return Math.max(200, Math.round((height * height * (16 / 9) * 30 * 0.1) / 1000));
}

/** The whole ffmpeg command after the binary, writing the package into `outDir`. */
export function streamArgs(
  engine: VideoEngine,
  input: MediaInput,
  demuxer: string,
  ladder: number[],
  audio: boolean,
  trim: TrimPlan,
  settings: TranscodeSettings,
  outDir: string,
): string[] {
  const args = ['-nostdin', '-v', 'error', '-hide_banner', '-nostats', '-progress', 'pipe:1'];
  args.push(...inputGuardArgs(engine, input, demuxer));
  args.push('-i', inputArg(input));
  // One decode, split per rung; each scaled to its height with an even width that keeps the shape.
  const outs = ladder.map((_, i) => `[s${i}]`).join('');
  const scales = ladder.map((h, i) => `[s${i}]scale=w=-2:h=${h},format=yuv420p[v${i}]`).join(';');
  args.push('-filter_complex', `[0:v:0]split=${ladder.length}${outs};${scales}`);
  for (let i = 0; i < ladder.length; i++) args.push('-map', `[v${i}]`);
  if (audio) args.push('-map', '0:a:0');
  args.push('-sn', '-dn', '-map_metadata', '-1', '-map_chapters', '-1');
  args.push('-t', (trim.seconds ?? trim.limit).toFixed(3));
  args.push('-c:v', 'libx264', '-preset', X264_PRESET[settings.speed], '-profile:v', 'high');
  ladder.forEach((h, i) => {
    const kbps = rungKbps(h);
    args.push(`-b:v:${i}`, `${kbps}k`, `-maxrate:v:${i}`, `${Math.round(kbps * 1.5)}k`);
    args.push(`-bufsize:v:${i}`, `${kbps * 2}k`);
  });
  // A keyframe at every segment boundary whatever the frame rate, so every rung switches there.
  args.push('-force_key_frames', `expr:gte(t,n_forced*${SEGMENT_SECONDS})`, '-sc_threshold', '0');
  if (audio) args.push('-c:a', 'aac', '-b:a', '128k', '-ac', '2');
  args.push(
    '-f',
    'dash',
    '-seg_duration',
    String(SEGMENT_SECONDS),
    '-use_template',
    '1',
    '-use_timeline',
    '1',
    '-hls_playlist',
    '1',
    '-hls_master_name',
    HLS_MASTER,
    '-adaptation_sets',
    audio ? 'id=0,streams=v id=1,streams=a' : 'id=0,streams=v',
    '-y',
    `file:${join(outDir, DASH_MANIFEST)}`,
  );
  return args;
}

const X264_PRESET: Record<TranscodeSettings['speed'], string> = {
  fastest: 'ultrafast',
  fast: 'veryfast',
  balanced: 'medium',
};

export interface StreamRun {
  input: MediaInput;
  demuxer: string;
  ladder: number[];
  audio: boolean;
  trim: TrimPlan;
  outDir: string;
  onProgress?: (seconds: number) => void;
}

/**
 * Runs ffmpeg into `outDir` (empty); resolves with the package's files and their sizes.
 * VIDEO_REFUSED when the video cannot be made into a stream (unreadable, past the time limit,
 * the package larger than STOWAGE_TRANSCODE_MAX_BYTES, no master written).
 */
export async function makeStream(
  engine: VideoEngine,
  settings: TranscodeSettings,
  run: StreamRun,
): Promise<Array<{ name: string; size: number }>> {
  const ffmpeg = engine.require('ffmpeg');
  const args = streamArgs(engine, run.input, run.demuxer, run.ladder, run.audio, run.trim, settings, run.outDir);
  let tooBig = false;
  let checking = false;
  const controller = new AbortController();
  // The dash muxer writes many files, so -fs (one output's size) cannot bound it: the folder is
  // measured as ffmpeg reports progress, and ffmpeg is stopped once it passes the limit.
  const measure = async () => {
    if (checking || tooBig) return;
    checking = true;
    try {
      if ((await folderBytes(run.outDir)) >= settings.maxOutputBytes) {
        tooBig = true;
        controller.abort();
      }
    } finally {
      checking = false;
    }
  };
  const result = await runBounded(ffmpeg, args, {
    timeoutMs: settings.timeoutMs,
    maxStdout: 0,
    signal: controller.signal,
    stdin: 'stream' in run.input ? run.input.stream : undefined,
    onStdout: progressReader((seconds) => {
      run.onProgress?.(seconds);
      void measure();
    }),
  });
  if (tooBig)
    throw appError('VIDEO_REFUSED', `the stream passed ${settings.maxOutputBytes} bytes (STOWAGE_TRANSCODE_MAX_BYTES)`);
  if (result.timedOut) throw appError('VIDEO_REFUSED', `the stream took longer than ${settings.timeoutMs} ms`);
  if (result.code !== 0) throw appError('VIDEO_REFUSED', `not a readable ${run.demuxer} video, or it has no picture`);
  const files: Array<{ name: string; size: number }> = [];
  for (const name of await readdir(run.outDir)) {
    // Anything else ffmpeg left (a temporary of its own) is not part of the package.
    if (!PACKAGE_FILE.test(name)) continue;
    files.push({ name, size: (await stat(join(run.outDir, name))).size });
  }
  if (!files.some((f) => f.name === HLS_MASTER) || !files.some((f) => f.name === DASH_MANIFEST))
    throw appError('VIDEO_REFUSED', 'the stream produced no playlist (no frames in the video?)');
  if (files.reduce((n, f) => n + f.size, 0) >= settings.maxOutputBytes)
    throw appError('VIDEO_REFUSED', `the stream passed ${settings.maxOutputBytes} bytes (STOWAGE_TRANSCODE_MAX_BYTES)`);
  return files;
}

async function folderBytes(dir: string): Promise<number> {
  let total = 0;
  for (const name of await readdir(dir).catch(() => [] as string[]))
    total += await stat(join(dir, name)).then(
      (s) => s.size,
      () => 0,
    );
  return total;
}

/**
 * A playlist or manifest with `query` added to every address it holds (HLS: URI lines and
 * `URI="…"` attributes; DASH: the `initialization` and `media` templates), so the files a player
 * fetches from it carry it too: `v=` (content-addressed, so cached as immutable) when stored, and
 * a private file's `expires`/`signature` when answered.
 */
export function withQuery(text: string, kind: 'hls' | 'dash', query: string): string {
  const add = (uri: string) => `${uri}${uri.includes('?') ? '&' : '?'}${query}`;
  if (kind === 'dash')
    return text.replace(
      /\b(initialization|media)="([^"]*)"/g,
      (_, attr: string, uri: string) => `${attr}="${add(uri.replaceAll('&amp;', '&')).replaceAll('&', '&amp;')}"`,
    );
  return text
    .split('\n')
    .map((line) => {
      if (line === '' || line.startsWith('#'))
        return line.replace(/URI="([^"]*)"/g, (_, uri: string) => `URI="${add(uri)}"`);
      return add(line.trim());
    })
    .join('\n');
}
