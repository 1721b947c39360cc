// Layer tokens to a LayerSpec, with a 400 naming the token and what is allowed for anything else.
// Every token is percent-decoded exactly once here: a text's `%2C` is a comma, a path's `%2F` a folder.
import { errors } from '../../../errors.ts';
import {
  type ImageLayer,
  type LayerBlend,
  type LayerEffect,
  type LayerFit,
  type LayerPosition,
  LIMITS,
  type Placement,
  type TextLayer,
} from './spec.ts';

const PLACEMENTS: Record<string, Placement> = {
  n: 'north',
  north: 'north',
  s: 'south',
  south: 'south',
  e: 'east',
  east: 'east',
  w: 'west',
  west: 'west',
  c: 'centre',
  center: 'centre',
  centre: 'centre',
  nw: 'northwest',
  'north-west': 'northwest',
  ne: 'northeast',
  'north-east': 'northeast',
  sw: 'southwest',
  'south-west': 'southwest',
  se: 'southeast',
  'south-east': 'southeast',
};
const PLACEMENT_CODE: Record<Placement, string> = {
  north: 'n',
  south: 's',
  east: 'e',
  west: 'w',
  centre: 'c',
  northwest: 'nw',
  northeast: 'ne',
  southwest: 'sw',
  southeast: 'se',
};
const PLACEMENT_HELP = 'n, s, e, w, c, nw, ne, sw, se or north, south, east, west, center, north-west, …';
const BLENDS: readonly LayerBlend[] = ['screen', 'overlay', 'multiply', 'mask'];
const FITS: readonly LayerFit[] = ['crop', 'fill', 'fit', 'resize', 'scale'];
const IMAGE_ONLY = ['l_type', 'lw', 'lh', 'lc', 'lar', 'lbr', 'lflip', 'lzoom', 'le', 'lr'];
// A line feed breaks a line; every other C0/C1 control character (and DEL) is refused.
// biome-ignore lint/suspicious/noControlCharactersInRegex: the point is to find them
const CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;

function bad(token: string, why: string): Error {
  const shown = token.length > 60 ? `${token.slice(0, 60)}…` : token;
  return errors.validation(`transform: "${shown}" ${why}`);
}

/** Percent-decodes once; a malformed escape or invalid UTF-8 is the caller's 400. */
function decode(token: string, raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw bad(token, 'has a malformed percent-escape (write % as %25)');
  }
}

/** Percent-encodes everything but unreserved characters: the canonical form of a text or path. */
function encode(value: string): string {
  return encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

function int(token: string, raw: string, min: number, max: number): number {
  if (!/^-?\d{1,7}$/.test(raw)) throw bad(token, `needs a whole number from ${min} to ${max}`);
  const n = Number(raw);
  if (n < min || n > max) throw bad(token, `is out of range: ${min} to ${max}`);
  return n;
}

function decimal(token: string, raw: string, min: number, max: number): number {
  if (!/^\d{1,5}(\.\d{1,4})?$/.test(raw)) throw bad(token, `needs a number from ${min} to ${max}`);
  const n = Number(raw);
  if (n < min || n > max) throw bad(token, `is out of range: ${min} to ${max}`);
  return n;
}

function color(token: string, raw: string): { color: string; alpha: number } {
  const hex = raw.replace(/^#/, '').toLowerCase();
  if (/^[0-9a-f]{3}$/.test(hex)) return { color: [...hex].map((c) => c + c).join(''), alpha: 255 };
  if (/^[0-9a-f]{6}$/.test(hex)) return { color: hex, alpha: 255 };
  if (/^[0-9a-f]{8}$/.test(hex)) return { color: hex.slice(0, 6), alpha: Number.parseInt(hex.slice(6), 16) };
  throw bad(token, 'needs a hex colour: RGB, RRGGBB or RRGGBBAA (co_FF0000, co_rgb:FF0000)');
}

function angle(token: string, raw: string): number {
  return int(token, raw, -360, 360);
}

interface Common {
  position: { placement?: Placement; lx?: number; ly?: number; x?: number; y?: number };
  opacity: number;
  angle: number;
  blend?: LayerBlend;
}

/** Options both kinds take; false when the token is not one of them. Later tokens win over earlier ones. */
function common(token: string, name: string, value: string, into: Common): boolean {
  const off = LIMITS.offset;
  switch (name) {
    case 'tp':
    case 'ip': {
      const placement = PLACEMENTS[value.toLowerCase()];
      if (!placement) throw bad(token, `is not a placement: ${PLACEMENT_HELP}`);
      into.position.placement = placement;
      return true;
    }
    case 'lx':
      into.position.lx = int(token, value, -off, off);
      return true;
    case 'ly':
      into.position.ly = int(token, value, -off, off);
      return true;
    case 'x':
      into.position.x = int(token, value, -off, off);
      return true;
    case 'y':
      into.position.y = int(token, value, -off, off);
      return true;
    case 'o':
      into.opacity = int(token, value, 0, 100);
      return true;
    case 'e': {
      if (!BLENDS.includes(value as LayerBlend)) {
        throw bad(token, 'inside a layer is a blend mode: e_screen, e_overlay, e_multiply or e_mask');
      }
      into.blend = value as LayerBlend;
      return true;
    }
    default:
      return false;
  }
}

/** `name` and `value` of an option token: `co_rgb:FF0000` → co, rgb:FF0000; `l_type:underlay` → l_type, underlay. */
function split(token: string): { name: string; value: string } {
  if (token.startsWith('l_type:')) return { name: 'l_type', value: token.slice(7) };
  const i = token.indexOf('_');
  if (i <= 0) return { name: token, value: '' };
  return { name: token.slice(0, i), value: token.slice(i + 1) };
}

function positionTokens(p: LayerPosition): string[] {
  const out: string[] = [];
  if (p.placement) out.push(`tp_${PLACEMENT_CODE[p.placement]}`);
  if (p.lx !== undefined) out.push(`lx_${p.lx}`);
  if (p.ly !== undefined) out.push(`ly_${p.ly}`);
  if (p.x !== undefined) out.push(`x_${p.x}`);
  if (p.y !== undefined) out.push(`y_${p.y}`);
  return out;
}

function commonTokens(c: Common): string[] {
  const out = positionTokens(c.position);
  if (c.opacity !== 100) out.push(`o_${c.opacity}`);
  if (c.blend) out.push(`e_${c.blend}`);
  return out;
}

function unknown(token: string, kind: 'text' | 'image'): Error {
  const allowed =
    kind === 'text'
      ? 'a text layer takes co_, tp_, lx_, ly_, x_, y_, a_, o_ and e_{screen|overlay|multiply|mask}'
      : 'an image layer takes l_type:, lw_, lh_, lc_, lar_, lbr_, lflip_, lzoom_, le_, lr_, ip_/tp_, lx_, ly_, x_, y_, o_ and e_{screen|overlay|multiply|mask}';
  return bad(token, `is not a layer option (${allowed}; a layer ends with fl_layer_apply)`);
}

const STYLES = new Set(['bold', 'italic', 'underline', 'normal', 'regular']);
const ALIGNS = new Set(['left', 'center', 'centre', 'right']);

function parseText(tokens: readonly string[]): TextLayer {
  const open = tokens[0];
  const body = open.slice('l_text:'.length);
  const colon = body.indexOf(':');
  if (colon < 0) throw bad(open, 'needs l_text:{font}_{size}[_{style}][_{align}]:{text}');
  const config = body.slice(0, colon).split('_');
  const rawText = body.slice(colon + 1);

  const font = decode(open, config[0]).trim().toLowerCase().replace(/\s+/g, ' ');
  if (!new RegExp(`^[a-z0-9][a-z0-9 -]{0,${LIMITS.fontName - 1}}$`).test(font)) {
    throw bad(
      open,
      `needs a font family of letters, digits, spaces and hyphens, at most ${LIMITS.fontName} characters`,
    );
  }
  if (config.length < 2) throw bad(open, 'needs a font size: l_text:{font}_{size}:{text}');
  const size = int(open, config[1], LIMITS.fontSize.min, LIMITS.fontSize.max);
  let bold = false;
  let italic = false;
  let underline = false;
  let align: TextLayer['align'] | undefined;
  for (const part of config.slice(2)) {
    const word = part.toLowerCase();
    if (align !== undefined) throw bad(open, `has "${word}" after the alignment, which comes last`);
    if (word === 'bold') bold = true;
    else if (word === 'italic') italic = true;
    else if (word === 'underline') underline = true;
    else if (STYLES.has(word)) {
      // normal/regular: the default style, written for readability.
    } else if (ALIGNS.has(word)) align = word === 'centre' ? 'center' : (word as TextLayer['align']);
    else
      throw bad(
        open,
        `has "${part}": a style is bold, italic, underline or normal; an alignment left, center or right`,
      );
  }

  // Each code point takes at most 12 characters percent-encoded: refuse what cannot fit before decoding it.
  if (rawText.length > LIMITS.textLength * 12)
    throw bad(open, `has a text longer than ${LIMITS.textLength} characters`);
  const text = decode(open, rawText);
  if (text.length === 0 || text.trim().length === 0) throw bad(open, 'has no text to draw');
  if ([...text].length > LIMITS.textLength) throw bad(open, `has a text longer than ${LIMITS.textLength} characters`);
  if (CONTROL.test(text)) throw bad(open, 'has a control character in its text (only a line feed, %0A, is allowed)');

  const c: Common = { position: {}, opacity: 100, angle: 0 };
  let col = { color: '000000', alpha: 255 };
  for (const token of tokens.slice(1)) {
    const decoded = decode(token, token);
    const { name, value } = split(decoded);
    if (common(decoded, name, value, c)) continue;
    if (name === 'co') col = color(decoded, value.startsWith('rgb:') ? value.slice(4) : value);
    else if (name === 'a') c.angle = angle(decoded, value);
    else if (IMAGE_ONLY.includes(name)) throw bad(decoded, 'applies to image layers (l_image:), not to text');
    else throw unknown(decoded, 'text');
  }

  const styles = [bold && 'bold', italic && 'italic', underline && 'underline'].filter(Boolean);
  const head = [font.replace(/ /g, '%20'), String(size), ...styles, align ?? 'center'].join('_');
  const canonical = [`l_text:${head}:${encode(text)}`];
  if (col.color !== '000000' || col.alpha !== 255) {
    canonical.push(`co_${col.color}${col.alpha === 255 ? '' : col.alpha.toString(16).padStart(2, '0')}`);
  }
  if (c.angle) canonical.push(`a_${c.angle}`);
  canonical.push(...commonTokens(c));
  return {
    kind: 'text',
    tokens: canonical,
    font,
    size,
    bold,
    italic,
    underline,
    align: align ?? 'center',
    text,
    color: col.color,
    colorAlpha: col.alpha,
    ...c,
  };
}

function parsePath(open: string): string {
  const raw = open.slice('l_image:'.length);
  if (raw.length > LIMITS.path * 3) throw bad(open, `has a path longer than ${LIMITS.path} characters`);
  const path = decode(open, raw);
  if (path.length === 0) throw bad(open, 'needs the path of an image of this workspace: l_image:{path}');
  if (path.length > LIMITS.path) throw bad(open, `has a path longer than ${LIMITS.path} characters`);
  if (CONTROL.test(path) || path.includes('\n')) throw bad(open, 'has a control character in its path');
  if (path.includes('\\')) throw bad(open, 'has a backslash in its path: folders are separated by / (%2F in a URL)');
  const segments = path.split('/');
  if (segments.some((s) => s === '' || s === '.' || s === '..')) {
    throw bad(open, 'needs a path relative to the workspace, without empty, "." or ".." folders');
  }
  return path;
}

function parseImage(tokens: readonly string[]): ImageLayer {
  const open = tokens[0];
  const path = parsePath(open);
  const c: Common = { position: {}, opacity: 100, angle: 0 };
  let underlay = false;
  let width: number | undefined;
  let height: number | undefined;
  let fit: LayerFit | undefined;
  let aspect: { value: number; text: string } | undefined;
  let radius = 0;
  let flip: ImageLayer['flip'];
  let zoom = 1;
  const effects = new Map<LayerEffect['name'], LayerEffect>();
  const dim = LIMITS.dimension;
  for (const token of tokens.slice(1)) {
    const decoded = decode(token, token);
    const { name, value } = split(decoded);
    if (common(decoded, name, value, c)) continue;
    switch (name) {
      case 'l_type':
        if (value !== 'overlay' && value !== 'underlay') throw bad(decoded, 'is l_type:overlay or l_type:underlay');
        underlay = value === 'underlay';
        break;
      case 'lw':
        width = int(decoded, value, 1, dim);
        break;
      case 'lh':
        height = int(decoded, value, 1, dim);
        break;
      case 'lc':
        if (!FITS.includes(value as LayerFit))
          throw bad(decoded, 'is one of lc_crop, lc_fill, lc_fit, lc_resize, lc_scale');
        fit = value as LayerFit;
        break;
      case 'lar': {
        const m = /^(\d{1,4}):(\d{1,4})$/.exec(value);
        const ratio = m
          ? Number(m[1]) / Number(m[2])
          : /^\d{1,3}(\.\d{1,4})?$/.test(value)
            ? Number(value)
            : Number.NaN;
        if (!(ratio >= 0.01 && ratio <= 100))
          throw bad(decoded, 'needs a ratio w:h (16:9) or a decimal (1.78), from 0.01 to 100');
        aspect = { value: ratio, text: m ? `${Number(m[1])}:${Number(m[2])}` : String(ratio) };
        break;
      }
      case 'lbr':
        radius = int(decoded, value, 0, dim);
        break;
      case 'lflip':
        if (value !== 'h' && value !== 'v' && value !== 'hv' && value !== 'vh')
          throw bad(decoded, 'is lflip_h, lflip_v or lflip_hv');
        flip = value === 'vh' ? 'hv' : value;
        break;
      case 'lzoom':
        zoom = decimal(decoded, value, LIMITS.zoom.min, LIMITS.zoom.max);
        break;
      case 'lr':
        c.angle = angle(decoded, value);
        break;
      case 'le': {
        const effect = layerEffect(decoded, value);
        effects.set(effect.name, effect);
        break;
      }
      case 'co':
      case 'a':
        throw bad(
          decoded,
          `applies to text layers; ${name === 'a' ? 'an image layer rotates with lr_' : 'an image layer has no colour'}`,
        );
      case 'w':
      case 'h':
      case 'c':
      case 'ar':
      case 'r':
        throw bad(decoded, `is not a layer option: inside a layer write l${name}_`);
      default:
        throw unknown(decoded, 'image');
    }
  }
  if (aspect && width !== undefined && height !== undefined) {
    throw bad(`lar_${aspect.text}`, 'needs at most one of lw_ and lh_: with both the size is already known');
  }
  if (underlay && c.blend) throw bad(`e_${c.blend}`, 'applies to overlays; an underlay is drawn beneath the image');
  if (fit && (width === undefined || height === undefined) && !aspect) {
    throw bad(`lc_${fit}`, 'needs both lw_ and lh_ (or one of them and lar_)');
  }

  const ordered = [...effects.values()].sort((a, b) => EFFECT_ORDER.indexOf(a.name) - EFFECT_ORDER.indexOf(b.name));
  const canonical = [`l_image:${path.split('/').map(encode).join('%2F')}`];
  if (underlay) canonical.push('l_type:underlay');
  if (width !== undefined) canonical.push(`lw_${width}`);
  if (height !== undefined) canonical.push(`lh_${height}`);
  if (fit) canonical.push(`lc_${fit}`);
  if (aspect) canonical.push(`lar_${aspect.text}`);
  if (radius) canonical.push(`lbr_${radius}`);
  if (flip) canonical.push(`lflip_${flip}`);
  if (zoom !== 1) canonical.push(`lzoom_${zoom}`);
  if (c.angle) canonical.push(`lr_${c.angle}`);
  for (const e of ordered) canonical.push(e.value === undefined ? `le_${e.name}` : `le_${e.name}:${e.value}`);
  canonical.push(...commonTokens(c));
  return {
    kind: 'image',
    tokens: canonical,
    path,
    underlay,
    width,
    height,
    fit,
    aspect: aspect?.value,
    radius,
    flip,
    zoom,
    effects: ordered,
    ...c,
  };
}

/** The fixed order layer effects apply in (sharp runs each operation once per pipeline, in its own order). */
export const EFFECT_ORDER: readonly LayerEffect['name'][] = [
  'improve',
  'brightness',
  'saturation',
  'contrast',
  'grayscale',
  'sharpen',
];

function layerEffect(token: string, value: string): LayerEffect {
  const [name, arg, ...rest] = value.split(':');
  if (rest.length > 0) throw bad(token, 'has more than one value');
  switch (name) {
    case 'saturation':
    case 'contrast':
    case 'brightness':
      if (arg === undefined) throw bad(token, `needs a level: le_${name}:{-100..100}`);
      return { name, value: int(token, arg, -100, 100) };
    case 'sharpen':
      return { name, value: arg === undefined ? 100 : int(token, arg, 1, 2000) };
    case 'grayscale':
      if (arg !== undefined) throw bad(token, 'takes no value');
      return { name };
    case 'improve':
      if (arg === undefined) return { name };
      if (arg !== 'indoor' && arg !== 'outdoor')
        throw bad(token, 'is le_improve, le_improve:indoor or le_improve:outdoor');
      return { name, value: arg };
    default:
      throw bad(
        token,
        'is not a layer effect: le_saturation:{n}, le_contrast:{n}, le_brightness:{n}, le_sharpen[:{n}], le_grayscale, le_improve[:indoor|outdoor]',
      );
  }
}

export function parseLayerTokens(tokens: readonly string[]): TextLayer | ImageLayer {
  const open = tokens[0] ?? '';
  if (open.startsWith('l_text:')) return parseText(tokens);
  if (open.startsWith('l_image:')) return parseImage(tokens);
  throw bad(open, 'does not open a layer: l_text:… or l_image:…');
}
