// Every effect Stowage knows: how its value is written (ranges and defaults as the hosted service's
// documentation gives them, essentials/effects.mdx), what it compiles to, and what it may cost at an
// output size. docs/transformations/effects.md is the reader's version of this table.
import { diagonal, type Matrix, modulate, type Op } from './ops.ts';

export interface Size {
  width: number;
  height: number;
}

export type Param =
  | { kind: 'int'; name: string; min: number; max: number; odd?: boolean; default?: number; optional?: boolean }
  | { kind: 'number'; name: string; min: number; max: number; default?: number; optional?: boolean }
  | { kind: 'word'; name: string; values: readonly string[]; default?: string; optional?: boolean };

export type Args = readonly (number | string)[];

export interface Definition {
  /** The values after the name, `:`-separated, in order. */
  params: readonly Param[];
  compile(args: Args, size: Size): Op[];
  /**
   * The strongest value this output size allows, as a token, when `args` ask for more; undefined when
   * they are within bounds.
   */
  limit?(args: Args, size: Size): string | undefined;
}

const level = (min = -100, max = 100): Param => ({ kind: 'int', name: 'level', min, max });
const n = (args: Args, i = 0) => args[i] as number;
const megapixels = (s: Size) => (s.width * s.height) / 1e6;

/**
 * Gaussian blur costs about (output megapixels x sigma) ms; a sigma beyond a quarter of the longest
 * side shows nothing more than a flat colour. Sharpening costs a fixed pass plus a part growing with
 * sigma, and a sigma wider than a few pixels only adds halos. A median filter's window costs its
 * area per pixel.
 */
const BLUR_WORK = 300;
const SHARPEN_WORK = 60;
const MEDIAN_WORK = 200;

export const blurCap = (s: Size) =>
  Math.max(0.3, Math.min(1000, Math.max(s.width, s.height) / 4, BLUR_WORK / megapixels(s)));
const sharpenCap = (s: Size) => Math.max(0.5, Math.min(10, SHARPEN_WORK / megapixels(s)));
/** e_sharpen's strength (1-2000) as a sigma, as Stowage has always read it: 100 is sigma 1. */
export const sharpenSigma = (strength: number) => Math.min(10, Math.max(0.5, strength / 100));
/** e_unsharp_mask's strength as the sigma of its mask: wider and stronger together. */
export const unsharpSigma = (strength: number) => 0.5 + strength / 400;

/** Rec. 709 luma weights: the grey every channel gets. */
const LUMA: Matrix = [0.2126, 0.7152, 0.0722, 0.2126, 0.7152, 0.0722, 0.2126, 0.7152, 0.0722];

/**
 * 255 from `t` up, 0 below: a linear() so steep that its clipping to 0-255 is the threshold, centred
 * half a step below `t` because a recomb before it (luma) leaves fractions. Unlike sharp's
 * threshold() it leaves alpha alone and the image in colour, so later effects and layers keep
 * working on three channels.
 */
const threshold = (t: number): Op => ({ kind: 'linear', a: 1e6, b: -1e6 * (t - 0.5) });

/** Channel gains scaled so that luma stays where it was (a colour shift without a brightness shift). */
function lumaKeeping(r: number, g: number, b: number): Op {
  const k = 1 / (LUMA[0] * r + LUMA[1] * g + LUMA[2] * b);
  return diagonal(r * k, g * k, b * k);
}

/**
 * Local contrast ("clarity"): an unsharp mask wider than sharpening's, applied evenly to flat and
 * busy areas, with its overshoot limited. CLAHE would be the textbook tool, but libvips' hist_local
 * took 3.2 s on a 1600x1200 image with a 16 px window here, too slow for a render on request; this
 * costs about 0.15 s at that size.
 */
function structure(amount: number, s: Size): Op[] {
  if (amount <= 0) return [];
  const sigma = Math.min(sharpenCap(s), Math.max(1.5, Math.min(4, Math.max(s.width, s.height) / 300)));
  const clip = 4 + 25 * amount;
  return [{ kind: 'sharpen', sigma, m1: 2.5 * amount, m2: 2.5 * amount, x1: 0, y2: clip, y3: clip }];
}

/** e_improve's profiles at a blend of `b` (0-1): the blend scales every part. */
const improveProfiles: Record<string, (b: number, s: Size) => Op[]> = {
  // No mode: a little more colour and local contrast, nothing that shifts the white balance.
  auto: (b, s) => [modulate({ saturation: 1 + 0.1 * b, brightness: 1 + 0.03 * b }), ...structure(0.3 * b, s)],
  // Indoor light is dim and yellow: lift the mids, cool it a little, keep colour moderate.
  indoor: (b, s) => [
    lumaKeeping(1 - 0.03 * b, 1 - 0.01 * b, 1 + 0.06 * b),
    modulate({ brightness: 1 + 0.08 * b, saturation: 1 + 0.05 * b }),
    ...structure(0.25 * b, s),
  ],
  // Daylight scenes take more colour and more local contrast (haze).
  outdoor: (b, s) => [modulate({ saturation: 1 + 0.2 * b }), ...structure(0.45 * b, s)],
};

export const EFFECTS: Record<string, Definition> = {
  // --- tone: all of these are affine maps of LCh lightness and chroma, so they share one modulate().
  brightness: {
    // -99: a factor of 0.01 (-100 would be black, which the docs leave out).
    params: [level(-99, 100)],
    compile: (a) => [modulate({ brightness: 1 + n(a) / 100 })],
  },
  contrast: {
    // Lightness spread around the middle grey (L 50), chroma with it, as an RGB contrast would: -100
    // is a flat grey. In LCh rather than with linear() so that it folds with brightness and
    // saturation into one operation, and runs before any layer is composited.
    params: [level()],
    compile: (a) => {
      const c = 1 + n(a) / 100;
      return [modulate({ brightness: c, lightness: 50 * (1 - c), saturation: c })];
    },
  },
  exposure: {
    // +-100 is +-2 stops: luminance times 2^stops, which is lightness (and chroma) times its cube
    // root, since CIE L is about the cube root of luminance.
    params: [level()],
    compile: (a) => {
      const f = 2 ** (n(a) / 50 / 3);
      return [modulate({ brightness: f, saturation: f })];
    },
  },
  highlights: {
    params: [level()],
    compile: (a) => (n(a) === 0 ? [] : [{ kind: 'tone', zone: 'highlights', amount: n(a) / 100 }]),
  },
  shadows: {
    params: [level()],
    compile: (a) => (n(a) === 0 ? [] : [{ kind: 'tone', zone: 'shadows', amount: n(a) / 100 }]),
  },
  gamma: {
    // The gamma is 1 + level/100 (0.5 to 2.5): above 1 the mid-tones brighten, below they darken.
    params: [level(-50, 150)],
    compile: (a) => (n(a) === 0 ? [] : [{ kind: 'gamma', g: 1 + n(a) / 100 }]),
  },
  fade: {
    // A washed-out print: blacks lifted to L 25 at 100, whites a little lower, colour 40% weaker.
    params: [level(0, 100)],
    compile: (a) => {
      const f = n(a) / 100;
      return [modulate({ brightness: 1 - 0.3 * f, lightness: 25 * f, saturation: 1 - 0.4 * f })];
    },
  },
  // --- colour
  saturation: {
    params: [level()],
    compile: (a) => [modulate({ saturation: 1 + n(a) / 100 })],
  },
  hue: {
    params: [{ kind: 'int', name: 'degrees', min: -180, max: 180 }],
    compile: (a) => [modulate({ hue: n(a) })],
  },
  temperature: {
    // Towards orange (red up, green a little, blue down) or blue; the image gets brighter or darker
    // with it, as a white-balance change does.
    params: [level()],
    compile: (a) => {
      const t = n(a) / 100;
      return [diagonal(1 + 0.25 * t, 1 + 0.05 * t, 1 - 0.25 * t)];
    },
  },
  warmth: {
    // Red against blue, with luma kept, so it changes the colour and not the brightness.
    params: [level()],
    compile: (a) => {
      const t = n(a) / 100;
      return [lumaKeeping(1 + 0.2 * t, 1, 1 - 0.2 * t)];
    },
  },
  tint: {
    // Positive is magenta (green down, red and blue up), negative green.
    params: [level()],
    compile: (a) => {
      const t = n(a) / 100;
      return [diagonal(1 + 0.1 * t, 1 - 0.2 * t, 1 + 0.1 * t)];
    },
  },
  grayscale: {
    // Luma in every channel (a recomb, so it folds with temperature, tint and warmth); the image
    // keeps three channels, so a later colour effect or layer still has colour to work with.
    params: [],
    compile: () => [{ kind: 'recomb', matrix: LUMA }],
  },
  invert: {
    params: [],
    compile: () => [{ kind: 'negate' }],
  },
  blackwhite: {
    // Luma against a threshold of level% of white; 0 makes everything white.
    params: [level(0, 100)],
    compile: (a) => [{ kind: 'recomb', matrix: LUMA }, threshold(Math.round(n(a) * 2.55))],
  },
  // --- detail
  blur: {
    params: [{ kind: 'number', name: 'sigma', min: 0.3, max: 1000, default: 5 }],
    compile: (a) => [{ kind: 'blur', sigma: n(a) }],
    limit: (a, s) => (n(a) > blurCap(s) ? `e_blur:${Math.floor(blurCap(s) * 10) / 10}` : undefined),
  },
  sharpen: {
    params: [{ kind: 'int', name: 'strength', min: 1, max: 2000, default: 100 }],
    compile: (a) => [{ kind: 'sharpen', sigma: sharpenSigma(n(a)) }],
    limit: (a, s) => (sharpenSigma(n(a)) > sharpenCap(s) ? `e_sharpen:${Math.floor(sharpenCap(s) * 100)}` : undefined),
  },
  unsharp_mask: {
    // A classic unsharp mask: nothing added in flat areas (m1 0, below a threshold of 2), edges
    // amplified by strength/50, overshoot limited so halos stay small.
    params: [{ kind: 'int', name: 'strength', min: 1, max: 2000 }],
    compile: (a) => {
      const strength = n(a);
      const clip = Math.min(100, 10 + strength / 10);
      return [{ kind: 'sharpen', sigma: unsharpSigma(strength), m1: 0, m2: strength / 50, x1: 2, y2: clip, y3: clip }];
    },
    limit: (a, s) =>
      unsharpSigma(n(a)) > sharpenCap(s)
        ? `e_unsharp_mask:${Math.max(1, Math.floor((sharpenCap(s) - 0.5) * 400))}`
        : undefined,
  },
  structure: {
    params: [level(0, 100)],
    compile: (a, s) => structure(n(a) / 100, s),
  },
  median: {
    params: [{ kind: 'int', name: 'size', min: 3, max: 15, odd: true }],
    compile: (a) => [{ kind: 'median', size: n(a) }],
    limit: (a, s) => {
      const most = Math.max(3, Math.floor(Math.sqrt(MEDIAN_WORK / megapixels(s))));
      return n(a) > most ? `e_median:${most % 2 ? most : most - 1}` : undefined;
    },
  },
  vignette: {
    params: [level(0, 100)],
    compile: (a) => (n(a) === 0 ? [] : [{ kind: 'vignette', strength: n(a) / 100 }]),
  },
  // --- automatic
  auto_enhance: {
    // The luminance stretched to the 1st-99th percentiles, colour 10% stronger (the two commute:
    // normalise moves lightness only).
    params: [],
    compile: () => [modulate({ saturation: 1.1 }), { kind: 'normalise' }],
  },
  normalize: {
    params: [],
    compile: () => [{ kind: 'normalise' }],
  },
  improve: {
    params: [
      { kind: 'word', name: 'mode', values: ['indoor', 'outdoor'], optional: true },
      { kind: 'int', name: 'blend', min: 0, max: 100, default: 100 },
    ],
    compile: (a, s) => improveProfiles[(a[0] as string | undefined) ?? 'auto'](a.length > 1 ? n(a, 1) / 100 : 1, s),
  },
  // --- arithmetic
  linear: {
    params: [
      { kind: 'number', name: 'a', min: 0, max: 10 },
      { kind: 'number', name: 'b', min: -255, max: 255, default: 0 },
    ],
    compile: (a) => [{ kind: 'linear', a: n(a), b: n(a, 1) }],
  },
  threshold: {
    // Each channel on its own, or with :gray the luma, against the value.
    params: [
      { kind: 'int', name: 'value', min: 0, max: 255 },
      { kind: 'word', name: 'mode', values: ['gray'], optional: true },
    ],
    compile: (a) => [...(a[1] === 'gray' ? [{ kind: 'recomb', matrix: LUMA } as const] : []), threshold(n(a))],
  },
};

/**
 * Effects of the hosted service that Stowage leaves out: they change the image's size or its alpha
 * channel, which the transformation's plan decides, not an effect.
 */
export const UNSUPPORTED = new Set([
  'extend',
  'affine',
  'flatten',
  'unflatten',
  'extract',
  'ensure_alpha',
  'remove_alpha',
]);
