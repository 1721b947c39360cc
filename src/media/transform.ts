// Transformation strings: one comma-separated segment of tokens (docs/api/delivery.md#transformations),
// used at upload (`transform`) and, later, in delivery URLs. Parsing is strict: an unknown,
// malformed or repeated token is a 400, never ignored.
import sharp from 'sharp';
import { errors } from '../errors.ts';

type SharpPipeline = ReturnType<typeof sharp>;

export type OutputFormat = 'webp' | 'avif' | 'jpg' | 'png' | 'gif';
export type Position = 'c' | 't' | 'b' | 'l' | 'r' | 'tl' | 'tr' | 'bl' | 'br' | 'entropy' | 'attention';

export interface TransformSpec {
  width?: number;
  height?: number;
  aspectRatio?: [number, number];
  crop?: 'fill' | 'fit' | 'crop' | 'pad';
  position?: Position;
  format?: OutputFormat | 'auto';
  quality?: number | 'auto';
  rotate?: number;
  flip?: 'h' | 'v' | 'hv';
  background?: string;
  grayscale?: boolean;
  blur?: number;
  sharpen?: number;
}

const MAX_DIMENSION = 10_000;
const POSITIONS = new Set(['c', 't', 'b', 'l', 'r', 'tl', 'tr', 'bl', 'br', 'entropy', 'attention']);

export function parseTransform(text: string): TransformSpec {
  const spec: TransformSpec = {};
  const seen = new Set<string>();
  const bad = (token: string, why: string) => errors.validation(`transform: "${token.slice(0, 40)}" ${why}`);
  const int = (token: string, raw: string, min: number, max: number) => {
    if (!/^\d{1,6}$/.test(raw) || Number(raw) < min || Number(raw) > max)
      throw bad(token, `needs a whole number from ${min} to ${max}`);
    return Number(raw);
  };
  if (text.trim() === '') throw errors.validation('transform is empty');
  for (const token of text.split(',')) {
    const m = /^([a-z]+)_(.*)$/.exec(token.trim());
    if (!m) throw bad(token, 'is not a transformation token');
    const [, name, value] = m;
    const key = name === 'e' ? `e_${value.split(':')[0]}` : name;
    if (seen.has(key)) throw bad(token, 'is repeated');
    seen.add(key);
    switch (name) {
      case 'w':
        spec.width = int(token, value, 1, MAX_DIMENSION);
        break;
      case 'h':
        spec.height = int(token, value, 1, MAX_DIMENSION);
        break;
      case 'ar': {
        const r = /^(\d{1,4}(?:\.\d{1,3})?):(\d{1,4}(?:\.\d{1,3})?)$/.exec(value);
        if (!r || Number(r[1]) <= 0 || Number(r[2]) <= 0) throw bad(token, 'needs a ratio like 16:9');
        spec.aspectRatio = [Number(r[1]), Number(r[2])];
        break;
      }
      case 'c':
        if (!['fill', 'fit', 'crop', 'pad'].includes(value)) throw bad(token, 'must be c_fill, c_fit, c_crop or c_pad');
        spec.crop = value as TransformSpec['crop'];
        break;
      case 'p':
        if (!POSITIONS.has(value))
          throw bad(token, 'must be one of p_c, p_t, p_b, p_l, p_r, p_tl, p_tr, p_bl, p_br, p_entropy, p_attention');
        spec.position = value as Position;
        break;
      case 'f':
        if (!['auto', 'webp', 'avif', 'jpg', 'png', 'gif'].includes(value))
          throw bad(token, 'must be f_auto, f_webp, f_avif, f_jpg, f_png or f_gif');
        spec.format = value as TransformSpec['format'];
        break;
      case 'q':
        spec.quality = value === 'auto' ? 'auto' : int(token, value, 1, 100);
        break;
      case 'r': {
        if (!/^-?\d{1,3}$/.test(value) || Math.abs(Number(value)) > 360)
          throw bad(token, 'needs degrees from -360 to 360');
        spec.rotate = Number(value);
        break;
      }
      case 'flip':
        if (!['h', 'v', 'hv'].includes(value)) throw bad(token, 'must be flip_h, flip_v or flip_hv');
        spec.flip = value as TransformSpec['flip'];
        break;
      case 'bg':
        if (!/^([0-9a-fA-F]{3}|[0-9a-fA-F]{6}|[0-9a-fA-F]{8})$/.test(value))
          throw bad(token, 'needs a hex colour like bg_fff or bg_ff0000');
        spec.background = `#${value.toLowerCase()}`;
        break;
      case 'e': {
        const [effect, arg] = value.split(':');
        if (effect === 'grayscale' && arg === undefined) spec.grayscale = true;
        else if (effect === 'blur' && arg !== undefined) spec.blur = int(token, arg, 1, 2000);
        else if (effect === 'sharpen' && arg !== undefined) spec.sharpen = int(token, arg, 1, 2000);
        else throw bad(token, 'must be e_grayscale, e_blur:{n} or e_sharpen:{n}');
        break;
      }
      default:
        throw bad(token, 'is not a known transformation');
    }
  }
  return spec;
}

const GRAVITY: Record<Position, string> = {
  c: 'centre',
  t: 'north',
  b: 'south',
  l: 'west',
  r: 'east',
  tl: 'northwest',
  tr: 'northeast',
  bl: 'southwest',
  br: 'southeast',
  entropy: 'entropy',
  attention: 'attention',
};

export interface ApplyOptions {
  /** The format to use for f_auto. */
  autoFormat: OutputFormat;
  /** Decoding stops above this many pixels (decompression bombs). */
  maxPixels: number;
}

/**
 * A sharp pipeline for `spec` and the format it writes: a Duplex stream, or, given a file path,
 * one that reads the file itself (libvips is faster on files than on streams).
 */
export function buildPipeline(
  spec: TransformSpec,
  opts: ApplyOptions,
  inputPath?: string,
): { pipeline: SharpPipeline; format: OutputFormat | null } {
  const options = { limitInputPixels: opts.maxPixels, failOn: 'error' as const, sequentialRead: true };
  let img = (inputPath ? sharp(inputPath, options) : sharp(options)).rotate();
  if (spec.rotate) img = img.rotate(spec.rotate, { background: spec.background ?? '#00000000' });
  if (spec.flip === 'v' || spec.flip === 'hv') img = img.flip();
  if (spec.flip === 'h' || spec.flip === 'hv') img = img.flop();
  let { width, height } = spec;
  if (spec.aspectRatio && (width || height)) {
    const [aw, ah] = spec.aspectRatio;
    if (width && !height) height = Math.max(1, Math.round((width * ah) / aw));
    else if (height && !width) width = Math.max(1, Math.round((height * aw) / ah));
  }
  if (width || height) {
    const fit =
      spec.crop === 'fit'
        ? 'inside'
        : spec.crop === 'pad'
          ? 'contain'
          : spec.crop === 'fill' || spec.crop === 'crop' || (width && height)
            ? 'cover'
            : 'inside';
    img = img.resize({
      width,
      height,
      fit,
      position: GRAVITY[spec.position ?? 'c'],
      background: spec.background ?? (spec.crop === 'pad' ? '#ffffff' : undefined),
      withoutEnlargement: spec.crop === 'crop',
    });
  }
  if (spec.grayscale) img = img.grayscale();
  if (spec.blur) img = img.blur(Math.min(1000, Math.max(0.3, spec.blur / 10)));
  if (spec.sharpen) img = img.sharpen({ sigma: Math.min(10, Math.max(0.5, spec.sharpen / 100)) });
  if (spec.background && spec.crop !== 'pad') img = img.flatten({ background: spec.background });
  const format = spec.format === 'auto' ? opts.autoFormat : (spec.format ?? null);
  const quality = spec.quality === 'auto' || spec.quality === undefined ? undefined : spec.quality;
  switch (format) {
    case 'webp':
      img = img.webp({ quality: quality ?? 80 });
      break;
    case 'avif':
      img = img.avif({ quality: quality ?? 55 });
      break;
    case 'jpg':
      img = img.jpeg({ quality: quality ?? 80, mozjpeg: true });
      break;
    case 'png':
      img = img.png();
      break;
    case 'gif':
      img = img.gif();
      break;
    default:
      if (quality !== undefined)
        img = img.jpeg({ quality, force: false }).webp({ quality, force: false }).avif({ quality, force: false });
  }
  return { pipeline: img, format };
}
