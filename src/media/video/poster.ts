// A poster: one frame of a video at a time offset, as WebP. ffmpeg decodes the frame (under the
// same input rules as the probe) and scales it, sharp encodes it.
import sharp from 'sharp';
import { appError } from '../../errors.ts';
import type { VideoEngine } from './engine.ts';
import { inputArg, inputGuardArgs, type MediaInput } from './probe.ts';
import { runBounded } from './spawn.ts';

export interface PosterOptions {
  /** Where in the video, in seconds (0 = the first frame). */
  atSeconds: number;
  /** Width of the poster in pixels (the height follows the aspect ratio); default: the video's, up to maxSide. */
  width?: number;
  /** Height in pixels; with `width`, the poster fits inside width x height (aspect kept, even sizes). */
  height?: number;
  timeoutMs: number;
  /** The one demuxer allowed (containers.ts). */
  demuxer: string;
  /** Longest side of a poster without `width` (default 4096). */
  maxSide?: number;
  /** WebP quality (default 80). */
  quality?: number;
}

export function posterArgs(engine: VideoEngine, input: MediaInput, opts: PosterOptions): string[] {
  const side = opts.maxSide ?? 4096;
  // Even sizes, aspect kept; never larger than asked, so the PNG in between stays bounded.
  const { width, height } = opts;
  const scale =
    width && height
      ? `scale=w=${width}:h=${height}:force_original_aspect_ratio=decrease:force_divisible_by=2`
      : width
        ? `scale=w=${width}:h=-2`
        : height
          ? `scale=w=-2:h=${height}`
          : `scale=w='min(iw,${side})':h='min(ih,${side})':force_original_aspect_ratio=decrease`;
  return [
    '-nostdin',
    '-v',
    'error',
    '-hide_banner',
    ...inputGuardArgs(engine, input, opts.demuxer),
    '-threads',
    '1',
    '-ss',
    opts.atSeconds.toFixed(3),
    '-i',
    inputArg(input),
    '-map',
    '0:v:0',
    '-an',
    '-sn',
    '-dn',
    '-frames:v',
    '1',
    '-vf',
    scale,
    '-f',
    'image2pipe',
    '-c:v',
    'png',
    'pipe:1',
  ];
}

/**
 * WebP bytes of the frame at `atSeconds` (rotation applied, as players show it). 400
 * VIDEO_REFUSED when there is no frame there or the input is refused; 501 without ffmpeg.
 */
export async function extractPoster(engine: VideoEngine, input: MediaInput, opts: PosterOptions): Promise<Buffer> {
  if (!Number.isFinite(opts.atSeconds) || opts.atSeconds < 0 || opts.atSeconds > engine.settings.maxDurationSeconds)
    throw appError('VIDEO_REFUSED', 'the poster time is out of range');
  if (opts.width !== undefined && (!Number.isInteger(opts.width) || opts.width < 2 || opts.width > 8192))
    throw appError('VIDEO_REFUSED', 'the poster width is out of range');
  if (opts.height !== undefined && (!Number.isInteger(opts.height) || opts.height < 2 || opts.height > 8192))
    throw appError('VIDEO_REFUSED', 'the poster height is out of range');
  const ffmpeg = engine.require('ffmpeg');
  const side = Math.max(opts.width ?? 0, opts.height ?? 0, opts.maxSide ?? 4096);
  const run = await runBounded(ffmpeg, posterArgs(engine, input, opts), {
    timeoutMs: opts.timeoutMs,
    // A PNG can exceed raw RGBA a little; more than that is not a frame of the promised size.
    maxStdout: side * side * 4 + 1024 * 1024,
    stdin: 'stream' in input ? input.stream : undefined,
  });
  if (run.timedOut) throw appError('VIDEO_REFUSED', `the poster took longer than ${opts.timeoutMs} ms`);
  if (run.overflow) throw appError('VIDEO_REFUSED', 'the poster frame is too large');
  if (run.code !== 0) throw appError('VIDEO_REFUSED', `not a readable ${opts.demuxer} video`);
  if (run.stdout.length === 0) throw appError('VIDEO_REFUSED', `no video frame at ${opts.atSeconds} s`);
  try {
    return await sharp(run.stdout, { limitInputPixels: side * side })
      .webp({ quality: opts.quality ?? 80 })
      .toBuffer();
  } catch {
    throw appError('VIDEO_REFUSED', 'the poster frame could not be encoded');
  }
}
