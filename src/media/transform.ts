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
  /** el_1: the image may be scaled up beyond its own size (never by default). */
  enlarge?: boolean;
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
      case 'el':
        if (value !== '0' && value !== '1') throw bad(token, 'must be el_0 or el_1');
        if (value === '1') spec.enlarge = true;
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
  /** The checked plan for this source (planRendition): its box and effect strengths are used. */
  plan?: RenderPlan;
  /** libvips stops the render after this many seconds (sharp's timeout; 0 = never). */
  timeoutSeconds?: number;
}

export interface RenderLimits {
  /** Largest output, in megapixels. */
  maxMegapixels: number;
  /** Longest output side, in pixels. */
  maxSide: number;
}

/** What a spec makes of one source: the resize box (after the no-enlargement rule) and the output. */
export interface RenderPlan {
  box?: { width?: number; height?: number };
  /**
   * With `r_` and a shrinking resize: the size to shrink the source to before rotating it.
   * libvips rotates a whole decoded image (a 48-megapixel JPEG took 430 MiB for r_45,w_800);
   * scaling first commutes with the rotation and lets JPEG and WebP shrink while decoding.
   */
  preShrink?: { width: number; height: number };
  width: number;
  height: number;
  blurSigma?: number;
  sharpenSigma?: number;
}

/**
 * Gaussian blur costs about (output megapixels x sigma) ms here; a sigma beyond a quarter of the
 * longest side shows nothing more than a flat colour. The cap is the smaller of the two.
 * Sharpening costs a fixed pass plus a part growing with sigma, and a sigma wider than a few
 * pixels only adds halos.
 */
const BLUR_WORK = 300;
const SHARPEN_WORK = 60;

/** The pre-shrunk source keeps 10% more than the final resize needs, so that resize only shrinks. */
const PRESHRINK_MARGIN = 1.1;

const blurSigma = (n: number) => Math.min(1000, Math.max(0.3, n / 10));
const sharpenSigma = (n: number) => Math.min(10, Math.max(0.5, n / 100));

/** The box the tokens ask for: w_ and h_, the missing one from ar_ when given. */
function requestedBox(spec: TransformSpec): { width?: number; height?: number } {
  let { width, height } = spec;
  if (spec.aspectRatio && (width || height)) {
    const [aw, ah] = spec.aspectRatio;
    if (width && !height) height = Math.max(1, Math.round((width * ah) / aw));
    else if (height && !width) width = Math.max(1, Math.round((height * aw) / ah));
  }
  return { width, height };
}

function fitOf(spec: TransformSpec, width?: number, height?: number): 'inside' | 'contain' | 'cover' {
  if (spec.crop === 'fit') return 'inside';
  if (spec.crop === 'pad') return 'contain';
  if (spec.crop === 'fill' || spec.crop === 'crop' || (width && height)) return 'cover';
  return 'inside';
}

/** The source's size after `r_` (a rotation by other than a right angle grows the canvas). */
function rotated(spec: TransformSpec, width: number, height: number): [number, number] {
  const a = (((spec.rotate ?? 0) % 360) + 360) % 360;
  if (a === 90 || a === 270) return [height, width];
  if (a % 180 === 0) return [width, height];
  const c = Math.abs(Math.cos((a * Math.PI) / 180));
  const s = Math.abs(Math.sin((a * Math.PI) / 180));
  return [Math.ceil(width * c + height * s), Math.ceil(width * s + height * c)];
}

/**
 * Checks `spec` against `limits` for a source of `source` pixels (EXIF orientation applied) and
 * says what the render does. No enlargement unless el_1: a box larger than the image could fill
 * at its own size shrinks by that factor, keeping its shape (w_1600,h_900 of an 800x600 image is
 * 800x450; c_pad pads the image at its own size). Throws RENDITION_TOO_LARGE and
 * EFFECT_TOO_STRONG (400).
 */
export function planRendition(
  spec: TransformSpec,
  source: { width: number; height: number },
  limits: RenderLimits,
): RenderPlan {
  const [sw, sh] = rotated(spec, source.width, source.height);
  let { width, height } = requestedBox(spec);
  let out = { width: sw, height: sh };
  let box: RenderPlan['box'];
  const plan: Partial<RenderPlan> = {};
  if (width || height) {
    const fit = fitOf(spec, width, height);
    const sx = width ? width / sw : undefined;
    const sy = height ? height / sh : undefined;
    const both = sx !== undefined && sy !== undefined;
    let scale = both ? (fit === 'cover' ? Math.max(sx, sy) : Math.min(sx, sy)) : (sx ?? sy ?? 1);
    if (spec.crop === 'crop' && scale > 1) {
      // c_crop keeps sharp's withoutEnlargement: the image is left at its size.
      out = { width: sw, height: sh };
    } else {
      if (scale > 1 && !spec.enlarge) {
        if (width) width = Math.max(1, Math.round(width / scale));
        if (height) height = Math.max(1, Math.round(height / scale));
        scale = 1;
      }
      out =
        both && fit !== 'inside'
          ? { width: width!, height: height! }
          : {
              width: width ?? Math.max(1, Math.round(sw * scale)),
              height: height ?? Math.max(1, Math.round(sh * scale)),
            };
    }
    box = { width, height };
    // The factor the resize applies to the rotated source (c_crop over its size applies none).
    const final = spec.crop === 'crop' && scale > 1 ? 1 : scale;
    if (spec.rotate && spec.rotate % 360 !== 0 && final * PRESHRINK_MARGIN < 1)
      plan.preShrink = {
        width: Math.max(1, Math.round(source.width * final * PRESHRINK_MARGIN)),
        height: Math.max(1, Math.round(source.height * final * PRESHRINK_MARGIN)),
      };
  }
  const megapixels = (out.width * out.height) / 1e6;
  if (out.width > limits.maxSide || out.height > limits.maxSide || megapixels > limits.maxMegapixels)
    throw errors.renditionTooLarge(out.width, out.height, limits.maxMegapixels, limits.maxSide);
  Object.assign(plan, { box, width: out.width, height: out.height });
  const longest = Math.max(out.width, out.height);
  if (spec.blur) {
    const cap = Math.max(0.3, Math.min(1000, longest / 4, BLUR_WORK / megapixels));
    plan.blurSigma = blurSigma(spec.blur);
    if (plan.blurSigma > cap)
      throw errors.effectTooStrong(`e_blur:${spec.blur}`, out.width, out.height, `e_blur:${Math.floor(cap * 10)}`);
  }
  if (spec.sharpen) {
    const cap = Math.max(0.5, Math.min(10, SHARPEN_WORK / megapixels));
    plan.sharpenSigma = sharpenSigma(spec.sharpen);
    if (plan.sharpenSigma > cap)
      throw errors.effectTooStrong(
        `e_sharpen:${spec.sharpen}`,
        out.width,
        out.height,
        `e_sharpen:${Math.floor(cap * 100)}`,
      );
  }
  return plan as RenderPlan;
}

/** Decoded pixels (a pre-shrunk source). */
export interface RawImage {
  data: Buffer;
  info: { width: number; height: number; channels: 1 | 2 | 3 | 4 };
}

/**
 * The source at `path` (or in memory), EXIF orientation applied, shrunk to `size` (RenderPlan.preShrink): the
 * input of the render's pipeline when it rotates.
 */
export async function preShrink(
  path: string | Buffer,
  size: { width: number; height: number },
  opts: { maxPixels: number; timeoutSeconds?: number },
): Promise<RawImage> {
  let img = sharp(path, { limitInputPixels: opts.maxPixels, failOn: 'error', sequentialRead: true })
    .rotate()
    .resize({ width: size.width, height: size.height, fit: 'fill' });
  if (opts.timeoutSeconds) img = img.timeout({ seconds: opts.timeoutSeconds });
  const { data, info } = await img.raw().toBuffer({ resolveWithObject: true });
  return { data, info: { width: info.width, height: info.height, channels: info.channels } };
}

/**
 * A sharp pipeline for `spec` and the format it writes: a Duplex stream, or, given a file path
 * (or bytes already in memory), one that reads the file itself (libvips is faster on files than on streams, and a stream is
 * gathered whole into memory before sharp decodes it). Resizing comes before every effect, so
 * libvips can shrink JPEG and WebP while decoding them.
 */
export function buildPipeline(
  spec: TransformSpec,
  opts: ApplyOptions,
  input?: string | Buffer | RawImage,
): { pipeline: SharpPipeline; format: OutputFormat | null } {
  const options = { limitInputPixels: opts.maxPixels, failOn: 'error' as const, sequentialRead: true };
  let img = (
    typeof input === 'string' || Buffer.isBuffer(input)
      ? sharp(input, options)
      : input
        ? sharp(input.data, { ...options, raw: input.info })
        : sharp(options)
  ).rotate();
  if (opts.timeoutSeconds) img = img.timeout({ seconds: opts.timeoutSeconds });
  if (spec.rotate) img = img.rotate(spec.rotate, { background: spec.background ?? '#00000000' });
  if (spec.flip === 'v' || spec.flip === 'hv') img = img.flip();
  if (spec.flip === 'h' || spec.flip === 'hv') img = img.flop();
  const { width, height } = opts.plan ? (opts.plan.box ?? {}) : requestedBox(spec);
  if (width || height) {
    img = img.resize({
      width,
      height,
      fit: fitOf(spec, width, height),
      position: GRAVITY[spec.position ?? 'c'],
      background: spec.background ?? (spec.crop === 'pad' ? '#ffffff' : undefined),
      withoutEnlargement: spec.crop === 'crop',
    });
  }
  if (spec.grayscale) img = img.grayscale();
  if (spec.blur) img = img.blur(opts.plan?.blurSigma ?? blurSigma(spec.blur));
  if (spec.sharpen) img = img.sharpen({ sigma: opts.plan?.sharpenSigma ?? sharpenSigma(spec.sharpen) });
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
