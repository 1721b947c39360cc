// ffprobe on an untrusted upload: one demuxer (the detected container's), local file or pipe
// protocols only, bounded streams, pixels, time and output. What comes back is read as untrusted
// too: every number is checked before it reaches a record.
import type { Readable } from 'node:stream';
import { appError } from '../../errors.ts';
import type { VideoEngine } from './engine.ts';
import { runBounded } from './spawn.ts';

/** Where the bytes are: a local file (seekable: ffprobe reads only what it needs) or a stream piped to stdin. */
export type MediaInput = { path: string } | { stream: Readable; size?: number };

/** The record's `media` object: what the file is beyond its displayed size and duration. */
export interface MediaDetails {
  /** ffprobe's demuxer name (mov,mp4,m4a,3gp,3g2,mj2; matroska,webm; mp3; ogg…). */
  container: string;
  /** Seconds, as `duration`. */
  duration: number | null;
  /** Overall bits per second. */
  bit_rate: number | null;
  video_codec: string | null;
  video_profile: string | null;
  pixel_format: string | null;
  /** Frames per second (average), rounded to 3 decimals. */
  frame_rate: number | null;
  /** The stored frame size, before rotation. */
  coded_width: number | null;
  coded_height: number | null;
  /** Degrees counterclockwise the frames are turned for display (the display matrix's angle, 0/90/180/270). */
  rotation: number;
  video_bit_rate: number | null;
  audio_codec: string | null;
  audio_channels: number | null;
  audio_channel_layout: string | null;
  audio_sample_rate: number | null;
  audio_bit_rate: number | null;
  /** Streams in the container, of every kind. */
  streams: number;
}

export interface ProbeResult {
  /** Displayed size (rotation applied); null for audio. */
  width: number | null;
  height: number | null;
  /** Seconds. */
  duration: number | null;
  media: MediaDetails;
}

export interface ProbeOptions {
  /** The one demuxer allowed (containers.ts). */
  demuxer: string;
  timeoutMs: number;
}

/** ffprobe's JSON is small for any sane file; a hostile one with many streams is cut here. */
const MAX_PROBE_OUTPUT = 1024 * 1024;

/**
 * The hostile-input rules every ffprobe and ffmpeg run gets, before its input: written once here,
 * so the probe and the poster (poster.ts) cannot drift apart.
 */
export function inputGuardArgs(engine: VideoEngine, input: MediaInput, demuxer: string): string[] {
  const { maxStreams, maxPixels } = engine.settings;
  return [
    // Only the input itself: no http, tcp, hls, concat, data: or subfile, whatever the bytes name.
    '-protocol_whitelist',
    'path' in input ? 'file' : 'pipe',
    // The detected container's demuxer and no other, so no probing into playlist formats.
    '-f',
    demuxer,
    '-format_whitelist',
    demuxer,
    '-max_streams',
    String(maxStreams),
    // Decoders opened to find stream parameters refuse frames past this.
    '-max_pixels',
    String(maxPixels),
  ];
}

/** The input itself: "file:" so a name never reads as another protocol ("http:…", "concat:…"). */
export function inputArg(input: MediaInput): string {
  return 'path' in input ? `file:${input.path}` : 'pipe:0';
}

/** The arguments: exported so the hostile-input rules can be read (and tested) in one place. */
export function probeArgs(engine: VideoEngine, input: MediaInput, demuxer: string): string[] {
  return [
    '-v',
    'error',
    '-hide_banner',
    ...inputGuardArgs(engine, input, demuxer),
    '-print_format',
    'json=compact=1',
    '-show_format',
    '-show_streams',
    inputArg(input),
  ];
}

/** Probes `input`; 400 VIDEO_REFUSED when it is not media of the allowed kind or past a limit, 501 without ffprobe. */
export async function probeMedia(engine: VideoEngine, input: MediaInput, opts: ProbeOptions): Promise<ProbeResult> {
  const ffprobe = engine.require('ffprobe');
  const run = await runBounded(ffprobe, probeArgs(engine, input, opts.demuxer), {
    timeoutMs: opts.timeoutMs,
    maxStdout: MAX_PROBE_OUTPUT,
    stdin: 'stream' in input ? input.stream : undefined,
  });
  if (run.timedOut) throw appError('VIDEO_REFUSED', `probing took longer than ${opts.timeoutMs} ms`);
  if (run.overflow) throw appError('VIDEO_REFUSED', 'the probe said too much');
  if (run.code !== 0) throw appError('VIDEO_REFUSED', `not a readable ${opts.demuxer} file`);
  let json: unknown;
  try {
    json = JSON.parse(run.stdout.toString('utf8'));
  } catch {
    throw appError('VIDEO_REFUSED', 'the probe answer was not JSON');
  }
  return readProbe(json, engine.settings, 'stream' in input ? input.size : undefined);
}

type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string | null => (typeof v === 'string' && v.length > 0 && v.length <= 128 ? v : null);
/** ffprobe gives most numbers as strings ("1.000000", "154746", "N/A"). */
function num(v: unknown): number | null {
  const n = typeof v === 'number' ? v : typeof v === 'string' && /^-?\d+(\.\d+)?$/.test(v) ? Number(v) : Number.NaN;
  return Number.isFinite(n) ? n : null;
}
const posInt = (v: unknown): number | null => {
  const n = num(v);
  return n !== null && n > 0 && Number.isSafeInteger(n) ? n : null;
};
/** "30000/1001" → 29.97. */
function rate(v: unknown): number | null {
  const m = typeof v === 'string' ? /^(\d+)\/(\d+)$/.exec(v) : null;
  if (!m || Number(m[2]) === 0) return null;
  const r = Number(m[1]) / Number(m[2]);
  return r > 0 && r < 10_000 ? Math.round(r * 1000) / 1000 : null;
}

function rotationOf(stream: Json): number {
  let deg: number | null = null;
  const side = Array.isArray(stream.side_data_list) ? stream.side_data_list : [];
  for (const sd of side) if (isObj(sd) && sd.side_data_type === 'Display Matrix') deg = num(sd.rotation);
  // Older ffprobe builds report the QuickTime tag instead.
  if (deg === null && isObj(stream.tags)) deg = num(stream.tags.rotate);
  if (deg === null) return 0;
  const quarter = Math.round(deg / 90) * 90;
  return ((quarter % 360) + 360) % 360;
}

/** ffprobe's JSON to the record's fields, with the limits applied. Exported for tests. */
export function readProbe(
  json: unknown,
  limits: { maxPixels: number; maxStreams: number; maxDurationSeconds: number },
  /** The byte size of a piped input: ffprobe cannot know it, and without an index (MP3) it gives no duration. */
  pipedSize?: number,
): ProbeResult {
  if (!isObj(json) || !isObj(json.format) || !Array.isArray(json.streams))
    throw appError('VIDEO_REFUSED', 'the probe found no streams');
  const streams = json.streams.filter(isObj);
  if (streams.length === 0) throw appError('VIDEO_REFUSED', 'the probe found no streams');
  if (streams.length > limits.maxStreams) throw appError('VIDEO_REFUSED', `more than ${limits.maxStreams} streams`);
  // Cover art in an audio file is a video stream too; it is not the media's picture.
  const video = streams.find(
    (s) => s.codec_type === 'video' && !(isObj(s.disposition) && s.disposition.attached_pic === 1),
  );
  const audio = streams.find((s) => s.codec_type === 'audio');
  if (!video && !audio) throw appError('VIDEO_REFUSED', 'no video or audio stream');
  const format = json.format;
  let durationRaw = num(format.duration) ?? num(video?.duration) ?? num(audio?.duration);
  if (durationRaw === null && pipedSize) {
    // What ffprobe itself does for a file of known size: bytes over the streams' bit rates.
    const bits = (posInt(video?.bit_rate) ?? 0) + (posInt(audio?.bit_rate) ?? 0);
    if (bits > 0) durationRaw = (pipedSize * 8) / bits;
  }
  const duration = durationRaw !== null && durationRaw >= 0 ? Math.round(durationRaw * 1000) / 1000 : null;
  if (duration !== null && duration > limits.maxDurationSeconds)
    throw appError('VIDEO_REFUSED', `longer than ${limits.maxDurationSeconds} s`);
  const codedWidth = video ? posInt(video.width) : null;
  const codedHeight = video ? posInt(video.height) : null;
  // A picture stream whose size is unknown was refused by its decoder (max_pixels) or is broken.
  if (video && (codedWidth === null || codedHeight === null))
    throw appError('VIDEO_REFUSED', 'the video stream has no valid frame size');
  if (codedWidth !== null && codedHeight !== null && codedWidth * codedHeight > limits.maxPixels)
    throw appError(
      'VIDEO_REFUSED',
      `a frame of ${codedWidth}x${codedHeight} is past the ${limits.maxPixels} pixel limit`,
    );
  const rotation = video ? rotationOf(video) : 0;
  const swap = rotation === 90 || rotation === 270;
  return {
    width: swap ? codedHeight : codedWidth,
    height: swap ? codedWidth : codedHeight,
    duration,
    media: {
      container: str(format.format_name) ?? 'unknown',
      duration,
      bit_rate: posInt(format.bit_rate),
      video_codec: str(video?.codec_name),
      video_profile: str(video?.profile),
      pixel_format: str(video?.pix_fmt),
      frame_rate: rate(video?.avg_frame_rate) ?? rate(video?.r_frame_rate),
      coded_width: codedWidth,
      coded_height: codedHeight,
      rotation,
      video_bit_rate: video ? posInt(video.bit_rate) : null,
      audio_codec: str(audio?.codec_name),
      audio_channels: audio ? posInt(audio.channels) : null,
      audio_channel_layout: str(audio?.channel_layout),
      audio_sample_rate: audio ? posInt(audio.sample_rate) : null,
      audio_bit_rate: audio ? posInt(audio.bit_rate) : null,
      streams: streams.length,
    },
  };
}

/**
 * The duration of a piped input that ffprobe could not tell (an Ogg or VBR MP3 has it only at
 * its end, which a pipe cannot seek to): ffmpeg reads the packets through, copying them to
 * nothing (no decoding), and the last timestamp it reached is the answer. Same input rules as
 * the probe. Null when it cannot say.
 */
export async function measureDuration(
  engine: VideoEngine,
  stream: Readable,
  opts: ProbeOptions,
): Promise<number | null> {
  const ffmpeg = engine.require('ffmpeg');
  const run = await runBounded(
    ffmpeg,
    [
      '-nostdin',
      '-v',
      'error',
      '-hide_banner',
      '-protocol_whitelist',
      'pipe',
      '-f',
      opts.demuxer,
      '-format_whitelist',
      opts.demuxer,
      '-max_streams',
      String(engine.settings.maxStreams),
      '-i',
      'pipe:0',
      '-map',
      '0',
      '-c',
      'copy',
      '-f',
      'null',
      '-nostats',
      '-progress',
      'pipe:1',
      '-',
    ],
    { timeoutMs: opts.timeoutMs, maxStdout: 4 * 1024 * 1024, stdin: stream },
  );
  if (run.timedOut || run.overflow || run.code !== 0) return null;
  const times = [...run.stdout.toString('utf8').matchAll(/^out_time_us=(\d+)$/gm)];
  const last = times.length > 0 ? Number(times[times.length - 1][1]) / 1e6 : null;
  if (last === null || !Number.isFinite(last) || last <= 0 || last > engine.settings.maxDurationSeconds) return null;
  return Math.round(last * 1000) / 1000;
}
