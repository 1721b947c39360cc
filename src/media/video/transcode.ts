// A video rendition: ffmpeg turns a stored video into what the tokens (tokens.ts) ask for, into a
// temporary file, under the same hostile-input rules as the probe and the poster
// (inputGuardArgs), a wall-clock limit, an output size limit and a duration cap. The caller
// stores the file once ffmpeg has finished, so a partial output is never visible.
import { stat } from 'node:fs/promises';
import { appError } from '../../errors.ts';
import type { VideoEngine } from './engine.ts';
import { inputArg, inputGuardArgs, type MediaInput } from './probe.ts';
import { progressReader, runBounded } from './spawn.ts';
import type { VideoFormat, VideoSpec } from './tokens.ts';

/** How hard the encoders work: `fastest` for tests and previews, `balanced` for smaller files. */
export type TranscodeSpeed = 'fastest' | 'fast' | 'balanced';

export interface TranscodeSettings {
  /** One transcode's wall-clock limit (STOWAGE_TRANSCODE_TIMEOUT_MS). */
  timeoutMs: number;
  /** Longest output, in seconds (STOWAGE_TRANSCODE_MAX_SECONDS): longer asks are refused, 400. */
  maxOutputSeconds: number;
  /** Largest output file (STOWAGE_TRANSCODE_MAX_BYTES): ffmpeg stops there and the transcode fails. */
  maxOutputBytes: number;
  /** Transcodes at once on a node (STOWAGE_TRANSCODE_CONCURRENCY). */
  concurrency: number;
  /**
   * Transcode jobs waiting or running across the deployment (STOWAGE_TRANSCODE_QUEUE): past it a
   * new rendition is refused 503 TRANSCODE_BUSY, so anonymous URLs cannot queue unbounded work.
   */
  maxQueued: number;
  /** STOWAGE_TRANSCODE_SPEED. */
  speed: TranscodeSpeed;
  /** A GIF is at most this long (STOWAGE_GIF_MAX_SECONDS); without a trim, the first that many seconds. */
  gifMaxSeconds: number;
  /** A GIF side is at most this (STOWAGE_GIF_MAX_SIDE); without w_/h_ it is fitted inside it. */
  gifMaxSide: number;
  /** GIF frames per second (STOWAGE_GIF_FPS); frames in all: at most gifFps x gifMaxSeconds. */
  gifFps: number;
}

export function transcodeDefaults(): TranscodeSettings {
  return {
    timeoutMs: 10 * 60_000,
    maxOutputSeconds: 10 * 60,
    maxOutputBytes: 1024 ** 3,
    concurrency: 1,
    maxQueued: 32,
    speed: 'fast',
    gifMaxSeconds: 10,
    gifMaxSide: 640,
    gifFps: 10,
  };
}

/** Where the output starts and how long it is, checked against the caps. */
export interface TrimPlan {
  start: number;
  /** Seconds of output; undefined only when the source's duration is unknown (ffmpeg then stops at the cap). */
  seconds?: number;
  /** The cap passed to ffmpeg as `-t` when `seconds` is unknown. */
  limit: number;
}

const refuse = (message: string) => appError('VALIDATION_FAILED', `video transform: ${message}`);

/**
 * The trim `spec` asks for, against the video's `duration` (from the probe at upload; null when
 * unknown) and the caps. 400 for a start past the end, or an output longer than allowed.
 */
export function planTrim(
  spec: VideoSpec,
  format: VideoFormat,
  duration: number | null,
  settings: TranscodeSettings,
): TrimPlan {
  const start = spec.start ?? 0;
  if (duration !== null && start >= duration) throw refuse(`so_${start} is past the end of the video (${duration} s)`);
  const asked = spec.duration;
  const remaining = duration !== null ? duration - start : undefined;
  const gif = format === 'gif';
  const cap = gif ? settings.gifMaxSeconds : settings.maxOutputSeconds;
  if (asked !== undefined && asked > cap)
    throw refuse(`${gif ? 'a GIF' : 'an output'} is at most ${cap} s long; this asks for ${round(asked)} s`);
  if (gif) {
    if (spec.width !== undefined && spec.width > settings.gifMaxSide)
      throw refuse(`w_${spec.width} is past the GIF limit of ${settings.gifMaxSide} pixels`);
    if (spec.height !== undefined && spec.height > settings.gifMaxSide)
      throw refuse(`h_${spec.height} is past the GIF limit of ${settings.gifMaxSide} pixels`);
  }
  let seconds = asked !== undefined && remaining !== undefined ? Math.min(asked, remaining) : (asked ?? remaining);
  // A GIF without a trim is the first seconds of the video (essentials/video/gif); a video is
  // never cut silently: past the cap it must be trimmed.
  if (gif && seconds !== undefined) seconds = Math.min(seconds, cap);
  if (seconds !== undefined && seconds > cap)
    throw refuse(
      `the video is ${round(seconds)} s from so_${start}; outputs are at most ${cap} s: trim it with eo_ or d_`,
    );
  return { start, seconds: seconds === undefined ? undefined : round(seconds), limit: cap };
}

const round = (n: number) => Math.round(n * 1000) / 1000;

/** x264's CRF for q_ (100 → 18, visually lossless; 1 → 46); 23 (its default) without q_. */
const x264Crf = (q?: number) => (q === undefined ? 23 : Math.round(18 + ((100 - q) * 28) / 99));
/** libvpx-vp9's CRF for q_ (100 → 15; 1 → 55); 32 without q_. */
const vp9Crf = (q?: number) => (q === undefined ? 32 : Math.round(15 + ((100 - q) * 40) / 99));

const X264_PRESET: Record<TranscodeSpeed, string> = { fastest: 'ultrafast', fast: 'veryfast', balanced: 'medium' };
const VP9_SPEED: Record<TranscodeSpeed, string[]> = {
  fastest: ['-deadline', 'realtime', '-cpu-used', '8'],
  fast: ['-deadline', 'good', '-cpu-used', '5'],
  balanced: ['-deadline', 'good', '-cpu-used', '2'],
};

/**
 * The picture's filter graph, from `[0:v:0]` to `[v]`: the size and crop mode, then flip, then
 * rotation (as the image grammar: sizes apply to the video as shown before r_), then the pixel
 * format or, for a GIF, the frame rate and palette.
 */
export function videoFilters(spec: VideoSpec, format: VideoFormat, settings: TranscodeSettings): string {
  const chain: string[] = [];
  const { width: w, height: h } = spec;
  const gif = format === 'gif';
  if (gif) chain.push(`fps=${settings.gifFps}`);
  let blurred: string | undefined;
  if (w !== undefined && h !== undefined) {
    if (spec.mode === 'pad_resize') {
      const fit = `scale=w=${w}:h=${h}:force_original_aspect_ratio=decrease:force_divisible_by=2`;
      if (spec.background?.kind === 'blurred') {
        // The video itself, covering the box and blurred, under the fitted video.
        blurred =
          `split=2[bgsrc][fgsrc];` +
          `[bgsrc]scale=w=${w}:h=${h}:force_original_aspect_ratio=increase,crop=${w}:${h},gblur=sigma=${spec.background.sigma}[bg];` +
          `[fgsrc]${fit}[fg];[bg][fg]overlay=x=(W-w)/2:y=(H-h)/2`;
      } else {
        const hex = spec.background?.kind === 'colour' ? spec.background.hex : '000000';
        chain.push(fit, `pad=w=${w}:h=${h}:x=(ow-iw)/2:y=(oh-ih)/2:color=0x${hex}`);
      }
    } else if (spec.mode === 'extract') chain.push(`crop=w='min(iw,${w})':h='min(ih,${h})'`);
    else chain.push(`scale=w=${w}:h=${h}:force_original_aspect_ratio=increase`, `crop=${w}:${h}`);
  } else if (w !== undefined) chain.push(spec.mode === 'extract' ? `crop=w='min(iw,${w})':h=ih` : `scale=w=${w}:h=-2`);
  else if (h !== undefined) chain.push(spec.mode === 'extract' ? `crop=w=iw:h='min(ih,${h})'` : `scale=w=-2:h=${h}`);
  else if (spec.aspect) {
    // ar_ alone: the largest centred part of the video of that shape.
    const [a, b] = spec.aspect;
    chain.push(`crop=w='min(iw,ih*${a}/${b})':h='min(ih,iw*${b}/${a})'`);
  } else if (gif) {
    const side = settings.gifMaxSide;
    chain.push(`scale=w='min(iw,${side})':h='min(ih,${side})':force_original_aspect_ratio=decrease`);
  }
  if (spec.flipH) chain.push('hflip');
  if (spec.flipV) chain.push('vflip');
  if (spec.rotate === 90) chain.push('transpose=clock');
  else if (spec.rotate === 180) chain.push('hflip', 'vflip');
  else if (spec.rotate === 270) chain.push('transpose=cclock');
  // Codecs want even sizes: a crop of an odd-sized source, or ar_ alone, may give odd ones.
  chain.push("scale=w='trunc(iw/2)*2':h='trunc(ih/2)*2'");
  if (gif) {
    const colours = spec.quality === undefined ? 256 : Math.max(8, Math.round((256 * spec.quality) / 100));
    chain.push(
      `split[p0][p1];[p0]palettegen=max_colors=${colours}:stats_mode=diff[pal];[p1][pal]paletteuse=dither=bayer:bayer_scale=3`,
    );
  } else chain.push('format=yuv420p');
  const tail = chain.join(',');
  return blurred ? `[0:v:0]${blurred},${tail}[v]` : `[0:v:0]${tail}[v]`;
}

/** The whole ffmpeg command after the binary: input rules, trim, filters, encoder, caps, output. */
export function transcodeArgs(
  engine: VideoEngine,
  input: MediaInput,
  demuxer: string,
  spec: VideoSpec,
  format: VideoFormat,
  trim: TrimPlan,
  settings: TranscodeSettings,
  outPath: string,
): string[] {
  const args = ['-nostdin', '-v', 'error', '-hide_banner', '-nostats', '-progress', 'pipe:1'];
  args.push(...inputGuardArgs(engine, input, demuxer));
  // Before -i: the input is read from there (fast), and the output's clock starts at 0.
  if (trim.start > 0) args.push('-ss', trim.start.toFixed(3));
  args.push('-i', inputArg(input));
  args.push('-filter_complex', videoFilters(spec, format, settings), '-map', '[v]');
  const audio = format !== 'gif' && !spec.removeAudio;
  // The first audio stream when there is one ("?": a silent video is fine).
  if (audio) args.push('-map', '0:a:0?');
  else args.push('-an');
  args.push('-sn', '-dn', '-map_metadata', '-1', '-map_chapters', '-1');
  args.push('-t', (trim.seconds ?? trim.limit).toFixed(3));
  if (format === 'mp4') {
    args.push('-c:v', 'libx264', '-preset', X264_PRESET[settings.speed], '-crf', String(x264Crf(spec.quality)));
    if (audio) args.push('-c:a', 'aac', '-b:a', '128k', '-ac', '2');
    // The index first, so a browser plays it while it downloads.
    args.push('-movflags', '+faststart', '-f', 'mp4');
  } else if (format === 'webm') {
    args.push('-c:v', 'libvpx-vp9', '-crf', String(vp9Crf(spec.quality)), '-b:v', '0', '-row-mt', '1');
    args.push(...VP9_SPEED[settings.speed]);
    if (audio) args.push('-c:a', 'libopus', '-b:a', '96k', '-ac', '2');
    args.push('-f', 'webm');
  } else {
    const frames = settings.gifFps * settings.gifMaxSeconds;
    args.push('-frames:v', String(frames), '-loop', '0', '-f', 'gif');
  }
  args.push('-fs', String(settings.maxOutputBytes), '-y', `file:${outPath}`);
  return args;
}

export interface TranscodeRun {
  input: MediaInput;
  demuxer: string;
  spec: VideoSpec;
  format: VideoFormat;
  trim: TrimPlan;
  outPath: string;
  /** Seconds of output written so far (ffmpeg's `out_time_us`), as it goes. */
  onProgress?: (seconds: number) => void;
}

/**
 * Runs ffmpeg to `outPath`; resolves with the output's size. VIDEO_REFUSED when the video cannot
 * be made (not readable, past the time or size limit, nothing produced); 501 without ffmpeg.
 */
export async function transcode(engine: VideoEngine, settings: TranscodeSettings, run: TranscodeRun): Promise<number> {
  const ffmpeg = engine.require('ffmpeg');
  const args = transcodeArgs(engine, run.input, run.demuxer, run.spec, run.format, run.trim, settings, run.outPath);
  const result = await runBounded(ffmpeg, args, {
    timeoutMs: settings.timeoutMs,
    maxStdout: 0,
    stdin: 'stream' in run.input ? run.input.stream : undefined,
    onStdout: progressReader((seconds) => run.onProgress?.(seconds)),
  });
  if (result.timedOut) throw appError('VIDEO_REFUSED', `the transcode took longer than ${settings.timeoutMs} ms`);
  if (result.code !== 0) throw appError('VIDEO_REFUSED', `not a readable ${run.demuxer} video, or it has no picture`);
  const size = await stat(run.outPath).then(
    (s) => s.size,
    () => 0,
  );
  if (size === 0) throw appError('VIDEO_REFUSED', 'the transcode produced nothing (no frames in the asked time)');
  // -fs stops writing at the limit and ffmpeg still exits 0: an output that reached it is cut short.
  if (size >= settings.maxOutputBytes)
    throw appError('VIDEO_REFUSED', `the output passed ${settings.maxOutputBytes} bytes (STOWAGE_TRANSCODE_MAX_BYTES)`);
  return size;
}
