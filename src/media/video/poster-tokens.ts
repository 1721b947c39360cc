// The poster grammar of delivery (docs/api/delivery.md#video-posters): `thumb_ar` asks for one
// frame of a video as WebP, its aspect ratio kept, as the hosted docs (essentials/video/thumbnail)
// spell it. What may go with it: the frame's time (`so_{s}`, or `st_{s}`, the hosted start offset
// and start time: a trimmed video's first frame is the frame at its start), a size (`w_`, `h_`:
// both given = the box the poster fits in), and the WebP quality (`q_`). Every other token of the
// image or video grammar is refused with thumb_ar, so that no URL is served as something it did
// not ask for.
import { appError } from '../../errors.ts';

export const POSTER_TOKEN = 'thumb_ar';

/** The hosted video grammar's limit on a dimension (issue 21: 1 to 4320, rounded to even). */
export const POSTER_MAX_SIDE = 4320;

export interface PosterSpec {
  /** Seconds into the video (0 = the first frame). */
  atSeconds: number;
  /** Even pixel sizes; with both, the poster fits inside width x height. */
  width?: number;
  height?: number;
  /** WebP quality; undefined = the default (80). */
  quality?: number;
}

const SECONDS = /^\d{1,6}(\.\d{1,3})?$/;
const PIXELS = /^\d{1,4}$/;
const QUALITY = /^\d{1,3}$/;

/** Whether the (preset-expanded) comma-separated tokens ask for a poster. */
export function asksForPoster(tokens: string): boolean {
  return tokens.split(',').includes(POSTER_TOKEN);
}

const refuse = (message: string) => appError('TRANSFORM_NOT_APPLICABLE', `poster (thumb_ar): ${message}`);

/** Rounded up to even (codecs and ffmpeg's scaler want even sizes), at least 2. */
const even = (n: number) => Math.max(2, n + (n % 2));

/**
 * The poster `tokens` ask for (tokens already expanded from presets, still comma-separated).
 * Throws 400 for a malformed value or a token that does not apply to a poster. A later token of
 * one name wins over an earlier one, as in the image grammar.
 */
export function parsePosterTokens(tokens: string): PosterSpec {
  const spec: PosterSpec = { atSeconds: 0 };
  for (const piece of tokens.split(',')) {
    if (piece === POSTER_TOKEN) continue;
    const cut = piece.indexOf('_');
    const name = cut === -1 ? piece : piece.slice(0, cut);
    const value = cut === -1 ? '' : piece.slice(cut + 1);
    const shown = piece.slice(0, 40);
    switch (name) {
      case 'so':
      case 'st': {
        if (!SECONDS.test(value)) throw refuse(`"${shown}" is not a time in seconds (so_2, so_1.5)`);
        spec.atSeconds = Number(value);
        break;
      }
      case 'w':
      case 'h': {
        const n = Number(value);
        if (!PIXELS.test(value) || n < 1 || n > POSTER_MAX_SIDE)
          throw refuse(`"${shown}" is not a size from 1 to ${POSTER_MAX_SIDE} pixels`);
        if (name === 'w') spec.width = even(n);
        else spec.height = even(n);
        break;
      }
      case 'q': {
        const n = Number(value);
        if (!QUALITY.test(value) || n < 1 || n > 100) throw refuse(`"${shown}" is not a quality from 1 to 100`);
        spec.quality = n;
        break;
      }
      default:
        throw refuse(`"${shown}" does not apply to a poster (thumb_ar takes so_/st_, w_, h_ and q_)`);
    }
  }
  return spec;
}

/** The poster's canonical tokens: one cache entry per distinct poster, however the URL spelled it. */
export function posterName(spec: PosterSpec): string {
  const parts = [POSTER_TOKEN];
  if (spec.atSeconds > 0) parts.push(`so_${Number(spec.atSeconds.toFixed(3))}`);
  if (spec.width !== undefined) parts.push(`w_${spec.width}`);
  if (spec.height !== undefined) parts.push(`h_${spec.height}`);
  if (spec.quality !== undefined) parts.push(`q_${spec.quality}`);
  return parts.join('.');
}
