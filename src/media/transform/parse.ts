// The one parser of transformation text (docs/transformations.md): one or more segments joined by
// "/", each a list of tokens split on literal commas, still percent-encoded as in the URL (a text
// layer's "%2C" is a comma of its text, never a separator). Values are decoded once, here or by
// the layers module. A token given twice is not refused: the later one wins (effects and layers
// are kept, in order). Anything else malformed is a 400 naming the token and what is allowed.
import { errors } from '../../errors.ts';
import { namedColour } from './colours.ts';
import { type Effect, parseEffect } from './effects.ts';
import { isLayerStart, LAYER_END, type LayerSpec, parseLayer } from './layers.ts';
import {
  type Compass,
  type CropMode,
  type Length,
  MAX_DIMENSION,
  MAX_LAYERS,
  type OutputFormat,
  type Position,
  type TransformSpec,
} from './spec.ts';

const bad = (token: string, why: string) => errors.validation(`transform: "${token.slice(0, 60)}" ${why}`);

const COMPASS: Record<string, Compass> = {
  c: 'c',
  center: 'c',
  centre: 'c',
  t: 't',
  top: 't',
  b: 'b',
  bottom: 'b',
  l: 'l',
  left: 'l',
  r: 'r',
  right: 'r',
  tl: 'tl',
  'top-left': 'tl',
  tr: 'tr',
  'top-right': 'tr',
  bl: 'bl',
  'bottom-left': 'bl',
  br: 'br',
  'bottom-right': 'br',
};
const CROPS: readonly CropMode[] = ['fill', 'fit', 'crop', 'pad', 'scale'];
const FORMATS: Record<string, OutputFormat | 'auto'> = {
  auto: 'auto',
  webp: 'webp',
  avif: 'avif',
  jpg: 'jpg',
  jpeg: 'jpg',
  png: 'png',
  gif: 'gif',
  tiff: 'tiff',
  tif: 'tiff',
};
const KNOWN = 'w_ h_ ar_ c_ p_ ps_ fo_ z_ dpr_ f_ q_ r_ flip_ bg_ br_ el_ e_ l_';

/** A decimal within [min, max] with at most `decimals` places, or undefined. */
function decimal(raw: string, min: number, max: number, decimals = 4): number | undefined {
  const re = new RegExp(`^-?\\d{1,6}(\\.\\d{1,${decimals}})?$`);
  if (!re.test(raw)) return undefined;
  const n = Number(raw);
  return n >= min && n <= max ? n : undefined;
}

function int(token: string, raw: string, min: number, max: number): number {
  if (!/^\d{1,6}$/.test(raw) || Number(raw) < min || Number(raw) > max)
    throw bad(token, `needs a whole number from ${min} to ${max}`);
  return Number(raw);
}

/** w_/h_: whole pixels, or a fraction of the source's side when written with a decimal point. */
function length(token: string, raw: string): Length {
  if (raw.includes('.')) {
    const f = decimal(raw, 0.0001, 4);
    if (f === undefined || f <= 0) throw bad(token, 'needs a fraction of the source from 0.01 to 4 (w_0.5 is half)');
    return { fraction: f };
  }
  return int(token, raw, 1, MAX_DIMENSION);
}

function rotation(token: string, raw: string): TransformSpec['rotate'] {
  if (raw === 'auto') return undefined;
  if (raw === 'portrait' || raw === 'landscape') return raw;
  const n = decimal(raw, -100_000, 100_000, 2);
  if (n === undefined) throw bad(token, 'needs degrees (r_90, r_-45, r_23.5), r_auto, r_portrait or r_landscape');
  // r_450 is r_90, r_-45 is r_315 (the docs' normalisation); a full turn is no rotation.
  const a = ((n % 360) + 360) % 360;
  return a === 0 ? undefined : a;
}

function colour(token: string, raw: string): string {
  const hex = raw.startsWith('rgb:') ? raw.slice(4) : raw;
  if (/^([0-9a-fA-F]{3}|[0-9a-fA-F]{6}|[0-9a-fA-F]{8})$/.test(hex)) {
    const h = hex.toLowerCase();
    return `#${h.length === 3 ? [...h].map((c) => c + c).join('') : h}`;
  }
  if (raw === 'transparent') return '#00000000';
  const named = namedColour(raw);
  if (!named)
    throw bad(token, 'needs a hex colour (bg_fff, bg_ff0000, bg_rgb:ff000080) or a CSS colour name (bg_white)');
  return named;
}

/** `ps_{x}:{y}`, or `ps_{x}` followed by `{y}` as its own comma piece (the hosted docs' spelling). */
function point(token: string, x: string, y: string | undefined): NonNullable<TransformSpec['point']> {
  const relative = x.includes('.') || (y ?? '').includes('.');
  const max = relative ? 1 : 100_000;
  const px = decimal(x, 0, max);
  const py = y === undefined ? undefined : decimal(y, 0, max);
  if (px === undefined || py === undefined)
    throw bad(token, 'needs a point of the source: ps_{x}:{y} in pixels (ps_120:80) or as fractions (ps_0.25:0.5)');
  return { x: px, y: py, relative };
}

function decode(token: string): string {
  try {
    return decodeURIComponent(token);
  } catch {
    throw bad(token, 'is not valid percent-encoding');
  }
}

/** `spec[key] = value`, dropping the key for a value that means "as if not given" (r_auto, z_1). */
function set<K extends keyof TransformSpec>(spec: TransformSpec, key: K, value: TransformSpec[K]): void {
  if (value === undefined) delete spec[key];
  else spec[key] = value;
}

/** One token (decoded) into `spec`. */
function apply(spec: TransformSpec, token: string, name: string, value: string): void {
  switch (name) {
    case 'w':
      set(spec, 'width', length(token, value));
      return;
    case 'h':
      set(spec, 'height', length(token, value));
      return;
    case 'ar': {
      const r = /^(\d{1,4}(?:\.\d{1,3})?)[:-](\d{1,4}(?:\.\d{1,3})?)$/.exec(value);
      if (!r || Number(r[1]) <= 0 || Number(r[2]) <= 0) throw bad(token, 'needs a ratio like ar_16:9');
      spec.aspectRatio = [Number(r[1]), Number(r[2])];
      return;
    }
    case 'c':
      if (!CROPS.includes(value as CropMode)) throw bad(token, 'must be c_fill, c_fit, c_crop, c_scale or c_pad');
      spec.crop = value as CropMode;
      return;
    case 'p':
    case 'fo': {
      const smart = ['entropy', 'attention', 'face'].includes(value) ? (value as Position) : undefined;
      const position: Position | undefined = Object.hasOwn(COMPASS, value) ? COMPASS[value] : smart;
      if (name === 'fo' && position !== 'face')
        throw bad(
          token,
          'asks for object focus, which Stowage does not support; fo_face and p_{position} are supported',
        );
      if (!position)
        throw bad(token, 'must be p_c, p_t, p_b, p_l, p_r, p_tl, p_tr, p_bl, p_br, p_entropy, p_attention or p_face');
      set(spec, 'position', position);
      set(spec, 'point', undefined);
      return;
    }
    case 'z': {
      const z = decimal(value, 1, 5, 2);
      if (z === undefined) throw bad(token, 'needs a zoom factor from 1 to 5 (z_1.5)');
      set(spec, 'zoom', z === 1 ? undefined : z);
      return;
    }
    case 'dpr': {
      const d = value === 'auto' ? 'auto' : decimal(value, 1, 4, 2);
      if (d === undefined) throw bad(token, 'needs a device pixel ratio from 1 to 4 (dpr_2, dpr_1.5) or dpr_auto');
      set(spec, 'dpr', d === 1 ? undefined : d);
      return;
    }
    case 'f':
      if (!Object.hasOwn(FORMATS, value))
        throw bad(token, 'must be f_auto, f_webp, f_avif, f_jpg (f_jpeg), f_png, f_gif or f_tiff');
      spec.format = FORMATS[value];
      return;
    case 'q':
      spec.quality = value === 'auto' ? 'auto' : int(token, value, 1, 100);
      return;
    case 'r':
      set(spec, 'rotate', rotation(token, value));
      return;
    case 'flip':
      if (!['h', 'v', 'hv', 'vh'].includes(value)) throw bad(token, 'must be flip_h, flip_v or flip_hv');
      spec.flip = value === 'vh' ? 'hv' : (value as TransformSpec['flip']);
      return;
    case 'bg':
      spec.background = colour(token, value);
      return;
    case 'br':
      set(spec, 'radius', value === 'max' ? 'max' : int(token, value, 0, MAX_DIMENSION) || undefined);
      return;
    case 'el':
      if (value !== '0' && value !== '1') throw bad(token, 'must be el_0 or el_1');
      set(spec, 'enlarge', value === '1' || undefined);
      return;
    default:
      throw bad(token, `is not a known transformation (known: ${KNOWN})`);
  }
}

/**
 * The raw tokens of `text`: split on commas and on the "/" between segments, except that inside a
 * layer group a "/" belongs to the token (a preset's `l_image:logos/mark.png`).
 */
function rawTokens(text: string): string[] {
  const out: string[] = [];
  let inLayer = false;
  for (const piece of text.split(',')) {
    piece.split('/').forEach((part, i) => {
      if (inLayer && i > 0 && out[out.length - 1] !== LAYER_END) out[out.length - 1] += `/${part}`;
      else out.push(part);
      if (isLayerStart(part.trim())) inLayer = true;
      else if (part.trim() === LAYER_END) inLayer = false;
    });
  }
  return out;
}

/**
 * The transformation `text` asks for: every token of every segment, as one list (a later segment
 * does not start a new image: `w_400/e_grayscale` is `w_400,e_grayscale`). Throws a 400
 * (VALIDATION_FAILED) naming the first token it does not accept.
 */
export function parseTransform(text: string): TransformSpec {
  const raw = rawTokens(text);
  if (text.trim() === '') throw errors.validation('transform is empty');
  const spec: TransformSpec = {};
  const effects: Effect[] = [];
  const layers: LayerSpec[] = [];
  for (let i = 0; i < raw.length; i++) {
    const token = raw[i].trim();
    if (token === '') throw errors.validation('transform: an empty token (two commas or slashes in a row)');
    if (isLayerStart(token)) {
      const end = raw.indexOf(LAYER_END, i + 1);
      if (end === -1) throw bad(token, `opens a layer that no ${LAYER_END} closes`);
      if (layers.length === MAX_LAYERS) throw bad(token, `is one layer too many (at most ${MAX_LAYERS})`);
      layers.push(parseLayer(raw.slice(i, end)));
      i = end;
      continue;
    }
    if (token === LAYER_END) throw bad(token, 'closes no layer (l_text:… or l_image:… first)');
    const decoded = decode(token);
    const m = /^([a-z]+)_(.*)$/s.exec(decoded);
    if (!m) throw bad(token, `is not a transformation token (known: ${KNOWN})`);
    const [, name, value] = m;
    if (name === 'e') {
      effects.push(parseEffect(decoded));
    } else if (name === 'ps') {
      const [x, y] = value.split(':');
      const next = y === undefined && i + 1 < raw.length && /^[\d.]+$/.test(raw[i + 1]) ? raw[++i] : undefined;
      spec.point = point(token, x, y ?? next);
      set(spec, 'position', undefined);
    } else apply(spec, token, name, value);
  }
  if (effects.length > 0) spec.effects = effects;
  if (layers.length > 0) spec.layers = layers;
  return spec;
}
