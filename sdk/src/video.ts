// Video delivery helpers: the tokens of a video rendition from named options, and waiting for a
// rendition that the service makes in the background (202 "triggered", then "processing", then
// the media; docs/video.md).
import { StowageAbortError, StowageError } from './errors.ts';

export interface VideoOptions {
  /** Width and height in px, 1 to 4320 (rounded up to even by the service). */
  width?: number;
  height?: number;
  /** Aspect ratio as "16:9". */
  aspectRatio?: string;
  /** How width x height is met: cover and cut (default), fit inside and pad, or cut out unscaled. */
  mode?: 'cover' | 'pad' | 'extract';
  /** The padding of `mode: 'pad'`: a colour name or hex (no #), or 'blurred' (optionally with a strength 1-100). */
  background?: string | { blurred: number | true };
  /** Seconds: start, and either end or duration. */
  start?: number;
  end?: number;
  duration?: number;
  format?: 'mp4' | 'webm' | 'gif';
  /** 1 to 100. */
  quality?: number;
  /** Clockwise. */
  rotate?: 90 | 180 | 270;
  flip?: 'h' | 'v' | 'hv';
  /** Leave the audio out. */
  mute?: boolean;
}

const seconds = (name: string, v: number) => {
  if (!Number.isFinite(v) || v < 0) throw new TypeError(`${name} must be a number of seconds, 0 or more`);
  return String(Math.round(v * 1000) / 1000);
};

const side = (name: string, v: number) => {
  if (!Number.isInteger(v) || v < 1 || v > 4320) throw new TypeError(`${name} must be a whole number from 1 to 4320`);
  return String(v);
};

/** The comma-separated tokens for `deliveryUrl(workspaceId, path, tokens)`, e.g. `w_640,so_5,eo_15,f_webm`. */
export function videoTokens(o: VideoOptions): string {
  const t: string[] = [];
  if (o.width !== undefined) t.push(`w_${side('width', o.width)}`);
  if (o.height !== undefined) t.push(`h_${side('height', o.height)}`);
  if (o.aspectRatio !== undefined) {
    if (!/^\d{1,4}:\d{1,4}$/.test(o.aspectRatio)) throw new TypeError('aspectRatio must look like 16:9');
    t.push(`ar_${o.aspectRatio}`);
  }
  if (o.mode === 'pad') t.push('cm_pad_resize');
  else if (o.mode === 'extract') t.push('cm_extract');
  if (o.background !== undefined) {
    if (typeof o.background === 'string') {
      if (!/^[A-Za-z0-9]{1,32}$/.test(o.background)) throw new TypeError('background must be a colour name or hex');
      t.push(`bg_${o.background}`);
    } else t.push(o.background.blurred === true ? 'bg_blurred' : `bg_blurred_${o.background.blurred}`);
  }
  if (o.start !== undefined) t.push(`so_${seconds('start', o.start)}`);
  if (o.end !== undefined && o.duration !== undefined) throw new TypeError('give end or duration, not both');
  if (o.end !== undefined) t.push(`eo_${seconds('end', o.end)}`);
  if (o.duration !== undefined) t.push(`d_${seconds('duration', o.duration)}`);
  if (o.quality !== undefined) {
    if (!Number.isInteger(o.quality) || o.quality < 1 || o.quality > 100)
      throw new TypeError('quality must be a whole number from 1 to 100');
    t.push(`q_${o.quality}`);
  }
  if (o.rotate !== undefined) t.push(`r_${o.rotate}`);
  if (o.flip !== undefined) t.push(`flip_${o.flip}`);
  if (o.mute) t.push('ac_none');
  if (o.format !== undefined) t.push(`f_${o.format}`);
  return t.join(',');
}

/** The tokens of a poster: a WebP frame at `at` seconds (default the service's choice), optionally sized. */
export function posterTokens(o: { at?: number; width?: number; height?: number } = {}): string {
  const t = ['thumb_ar'];
  if (o.at !== undefined) t.push(`so_${seconds('at', o.at)}`);
  if (o.width !== undefined) t.push(`w_${side('width', o.width)}`);
  if (o.height !== undefined) t.push(`h_${side('height', o.height)}`);
  return t.join(',');
}

export interface WaitOptions {
  signal?: AbortSignal;
  /** Give up after this long (default 10 minutes): a StowageError with status 408. */
  timeoutMs?: number;
  /** Each answer while the service works: "triggered", then "processing" with progress 0-1 when known. */
  onStatus?: (s: { status: string; progress?: number }) => void;
  fetch?: typeof fetch;
}

/**
 * Waits until the rendition at `url` (a delivery URL, signed or not) exists, asking again as
 * often as the service's Retry-After says (2 s); resolves with the URL then. A refusal (400, 403,
 * 404) or a failed transcode (422 TRANSCODE_FAILED) is thrown as a StowageError.
 */
export async function waitForRendition(url: string, opts: WaitOptions = {}): Promise<string> {
  const fetchImpl = opts.fetch ?? globalThis.fetch.bind(globalThis);
  const deadline = Date.now() + (opts.timeoutMs ?? 600_000);
  for (;;) {
    if (opts.signal?.aborted) throw new StowageAbortError();
    let res: Response;
    try {
      // One byte of the media when it is there (206), so polling never downloads the video.
      res = await fetchImpl(url, { headers: { range: 'bytes=0-0' }, signal: opts.signal });
    } catch (err) {
      if (opts.signal?.aborted || (err as Error).name === 'AbortError') throw new StowageAbortError();
      throw err;
    }
    if (res.status === 200 || res.status === 206) {
      await res.body?.cancel().catch(() => {});
      return url;
    }
    const body = (await res.json().catch(() => ({}))) as {
      status?: string;
      progress?: number;
      error?: string;
      message?: string;
      code?: string;
      errorCode?: string;
    };
    if (res.status !== 202 || typeof body.status !== 'string')
      throw new StowageError(
        res.status,
        body.error ?? `HTTP ${res.status}`,
        body.code ?? body.errorCode,
        body.message ?? '',
      );
    opts.onStatus?.({ status: body.status, ...(typeof body.progress === 'number' ? { progress: body.progress } : {}) });
    const wait = Math.max(250, Number(res.headers.get('retry-after') ?? 2) * 1000);
    if (Date.now() + wait > deadline)
      throw new StowageError(
        408,
        'Timed out',
        undefined,
        `the rendition was not ready within ${opts.timeoutMs ?? 600_000} ms`,
      );
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(resolve, wait);
      opts.signal?.addEventListener(
        'abort',
        () => {
          clearTimeout(timer);
          reject(new StowageAbortError());
        },
        { once: true },
      );
    });
  }
}
