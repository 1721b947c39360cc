// The video transformation grammar of delivery (docs/video.md), as the hosted docs spell it
// (essentials/video/*): size (`w_`, `h_`, `ar_`), crop modes (`cm_pad_resize` with `bg_`,
// `cm_extract`), trim (`so_`/`eo_`, `st_`/`d_`), output (`f_mp4`, `f_webm`, `f_gif`, `q_`),
// `r_` and `flip_`, and audio removal (`ac_none`, ours: the hosted docs name none). Posters
// (`thumb_ar`) have their own grammar (poster-tokens.ts). One parser: a bad value is a 400
// VALIDATION_FAILED naming the token and what is allowed, as in the image grammar, and a later
// token of one name wins over an earlier one.
import { errors } from '../../errors.ts';
import { namedColour } from '../transform/colours.ts';

/** The hosted grammar's limit on a video dimension (issue 21: 1 to 4320, rounded to even). */
export const VIDEO_MAX_SIDE = 4320;

export type VideoFormat = 'mp4' | 'webm' | 'gif';

export type VideoBackground = { kind: 'colour'; hex: string } | { kind: 'blurred'; sigma: number };

export interface VideoSpec {
  /** Even pixel sizes. */
  width?: number;
  height?: number;
  /** `ar_{a}:{b}`, whole numbers. */
  aspect?: [number, number];
  /** `cm_pad_resize` (fit inside w x h and pad) or `cm_extract` (cut w x h out, no scaling); default: cover w x h. */
  mode?: 'pad_resize' | 'extract';
  /** The padding of `cm_pad_resize`: a colour (default black) or the video itself, blurred. */
  background?: VideoBackground;
  /** Seconds: where the output starts (`so_`/`st_`) and how long it is (`d_`, or `eo_` less the start). */
  start?: number;
  duration?: number;
  format?: VideoFormat;
  /** 1-100; undefined = the encoder's default. */
  quality?: number;
  /** Degrees clockwise. */
  rotate?: 90 | 180 | 270;
  flipH?: boolean;
  flipV?: boolean;
  /** `ac_none`: no audio stream in the output. */
  removeAudio?: boolean;
}

/** Default sigma of `bg_blurred` without a number. */
export const DEFAULT_BLUR = 20;

const KNOWN = 'w_ h_ ar_ cm_pad_resize cm_extract bg_ so_ eo_ st_ d_ f_mp4 f_webm f_gif q_ r_ flip_ ac_none';
const SECONDS = /^\d{1,6}(\.\d{1,3})?$/;

const bad = (token: string, why: string) => errors.validation(`video transform: "${token.slice(0, 60)}" ${why}`);

/** Rounded up to even (codecs want even sizes), at least 2. */
const even = (n: number) => Math.max(2, n + (n % 2));

function colour(value: string, token: string): VideoBackground {
  if (value === 'blurred') return { kind: 'blurred', sigma: DEFAULT_BLUR };
  const blur = /^blurred_(\d{1,3})$/.exec(value);
  if (blur) {
    const sigma = Number(blur[1]);
    if (sigma < 1 || sigma > 100) throw bad(token, 'needs a blur from 1 to 100 (bg_blurred_10)');
    return { kind: 'blurred', sigma };
  }
  const hex = /^#?([0-9a-f]{3}|[0-9a-f]{6})$/i.exec(value);
  if (hex) {
    const h = hex[1].toLowerCase();
    return {
      kind: 'colour',
      hex:
        h.length === 3
          ? h
              .split('')
              .map((c) => c + c)
              .join('')
          : h,
    };
  }
  const named = namedColour(value);
  if (named) return { kind: 'colour', hex: named.replace('#', '').toLowerCase() };
  throw bad(token, 'needs a colour (bg_white, bg_FF0000, bg_fff) or bg_blurred, bg_blurred_{1-100}');
}

/**
 * The video `tokens` ask for (already expanded from presets, comma-separated, as in the URL).
 * Throws 400 for an unknown token, a malformed value, or a combination that cannot be made.
 */
export function parseVideoTokens(text: string): VideoSpec {
  const spec: VideoSpec = {};
  // The end offset, until the start is known (the later of eo_ and d_ wins).
  let end: number | undefined;
  if (text.trim() === '') throw errors.validation('video transform is empty');
  for (const token of text.split(',')) {
    if (token === '') throw errors.validation('video transform: an empty token (two commas in a row)');
    const cut = token.indexOf('_');
    const name = cut === -1 ? token : token.slice(0, cut);
    const value = cut === -1 ? '' : token.slice(cut + 1);
    switch (name) {
      case 'w':
      case 'h': {
        const n = Number(value);
        if (!/^\d{1,5}$/.test(value) || n < 1 || n > VIDEO_MAX_SIDE)
          throw bad(token, `needs a whole number of pixels from 1 to ${VIDEO_MAX_SIDE}`);
        if (name === 'w') spec.width = even(n);
        else spec.height = even(n);
        break;
      }
      case 'ar': {
        const r = /^(\d{1,4}):(\d{1,4})$/.exec(decodeURIComponent(value));
        if (!r || Number(r[1]) <= 0 || Number(r[2]) <= 0) throw bad(token, 'needs a ratio like ar_16:9');
        spec.aspect = [Number(r[1]), Number(r[2])];
        break;
      }
      case 'cm':
        if (value === 'pad_resize') spec.mode = 'pad_resize';
        else if (value === 'extract') spec.mode = 'extract';
        else throw bad(token, 'must be cm_pad_resize or cm_extract');
        break;
      case 'bg':
        spec.background = colour(value, token);
        break;
      case 'so':
      case 'st':
      case 'eo':
      case 'd': {
        if (!SECONDS.test(value)) throw bad(token, 'needs seconds (5, 1.5, at most three decimals)');
        const n = Number(value);
        if (name === 'eo') {
          end = n;
          spec.duration = undefined;
        } else if (name === 'd') {
          if (n <= 0) throw bad(token, 'needs a duration above 0');
          spec.duration = n;
          end = undefined;
        } else spec.start = n;
        break;
      }
      case 'f':
        if (value === 'mp4' || value === 'webm' || value === 'gif') spec.format = value;
        else throw bad(token, 'must be f_mp4, f_webm or f_gif for a video');
        break;
      case 'q': {
        const n = Number(value);
        if (!/^\d{1,3}$/.test(value) || n < 1 || n > 100) throw bad(token, 'needs a quality from 1 to 100');
        spec.quality = n;
        break;
      }
      case 'r': {
        const n = Number(value);
        if (!/^-?\d{1,3}$/.test(value) || n % 90 !== 0) throw bad(token, 'must be r_90, r_180 or r_270');
        const turn = (((n % 360) + 360) % 360) as 0 | 90 | 180 | 270;
        spec.rotate = turn === 0 ? undefined : turn;
        break;
      }
      case 'flip':
        if (value === 'h') Object.assign(spec, { flipH: true, flipV: false });
        else if (value === 'v') Object.assign(spec, { flipH: false, flipV: true });
        else if (value === 'hv' || value === 'vh') Object.assign(spec, { flipH: true, flipV: true });
        else throw bad(token, 'must be flip_h, flip_v or flip_hv');
        break;
      case 'ac':
        if (value !== 'none') throw bad(token, 'must be ac_none (removes the audio)');
        spec.removeAudio = true;
        break;
      default:
        throw bad(token, `is not a video transformation (known: ${KNOWN})`);
    }
  }
  if (end !== undefined) {
    // so_5,eo_15 is st_5,d_10: one rendition, one name.
    if (end <= (spec.start ?? 0))
      throw errors.validation(`video transform: eo_${end} must be after the start (so_${spec.start ?? 0})`);
    spec.duration = Math.round((end - (spec.start ?? 0)) * 1000) / 1000;
  }
  if (spec.background && spec.mode !== 'pad_resize')
    throw errors.validation('video transform: bg_ is the padding of cm_pad_resize; add cm_pad_resize');
  // ar_ with one side computes the other (essentials/video/aspect-ratio).
  if (spec.aspect) {
    const [a, b] = spec.aspect;
    if (spec.width !== undefined && spec.height === undefined)
      spec.height = sideOf(spec.width * (b / a), `ar_${a}:${b} with w_${spec.width}`);
    else if (spec.height !== undefined && spec.width === undefined)
      spec.width = sideOf(spec.height * (a / b), `ar_${a}:${b} with h_${spec.height}`);
    if (spec.width !== undefined && spec.height !== undefined) delete spec.aspect;
  }
  return spec;
}

function sideOf(n: number, what: string): number {
  const side = even(Math.round(n));
  if (side > VIDEO_MAX_SIDE) throw errors.validation(`video transform: ${what} is past ${VIDEO_MAX_SIDE} pixels`);
  return side;
}

/** Token names only the video grammar has: text naming one was meant for a video. */
const VIDEO_ONLY = /(^|,)(so|eo|st|d|cm|ac|thumb)_|(^|,)f_(mp4|webm)(,|$)/;

/** Whether `text` names a token only the video grammar (or the poster grammar) knows. */
export function namesVideoTokens(text: string): boolean {
  return VIDEO_ONLY.test(text);
}

/** What the output is when `f_` does not say: WebM stays WebM, everything else becomes MP4. */
export function defaultVideoFormat(mimeType: string): VideoFormat {
  return mimeType === 'video/webm' ? 'webm' : 'mp4';
}

export const VIDEO_MIME: Record<VideoFormat, string> = {
  mp4: 'video/mp4',
  webm: 'video/webm',
  gif: 'image/gif',
};

const secs = (n: number) => String(Number(n.toFixed(3)));

/**
 * The canonical name of a video rendition (its storage name and ETag part): one entry per
 * distinct output however the URL spelled it (order, `st_` for `so_`, `w_101` for `w_102`).
 */
export function videoRenditionName(spec: VideoSpec, format: VideoFormat): string {
  const parts: string[] = [];
  if (spec.width !== undefined) parts.push(`w_${spec.width}`);
  if (spec.height !== undefined) parts.push(`h_${spec.height}`);
  if (spec.aspect) parts.push(`ar_${spec.aspect[0]}-${spec.aspect[1]}`);
  if (spec.mode) parts.push(`cm_${spec.mode}`);
  if (spec.background)
    parts.push(spec.background.kind === 'colour' ? `bg_${spec.background.hex}` : `bg_blurred_${spec.background.sigma}`);
  if (spec.start) parts.push(`so_${secs(spec.start)}`);
  if (spec.duration !== undefined) parts.push(`d_${secs(spec.duration)}`);
  if (spec.quality !== undefined) parts.push(`q_${spec.quality}`);
  if (spec.flipH || spec.flipV) parts.push(`flip_${spec.flipH ? 'h' : ''}${spec.flipV ? 'v' : ''}`);
  if (spec.rotate) parts.push(`r_${spec.rotate}`);
  if (spec.removeAudio && format !== 'gif') parts.push('ac_none');
  parts.push(`f_${format}`);
  return `video.${parts.join('.')}`;
}
