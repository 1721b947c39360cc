// Running a list of operations with sharp, in the order written, in as few passes as that allows.
//
// A sharp pipeline holds at most one operation of each kind and runs them in its own fixed order
// (sharp's pipeline.cc, after the resize): median, blur, recomb, modulate, sharpen, then
// composite, then gamma (brighten), linear, normalise, negate. So a list is cut into stages:
// an operation joins the current stage when its kind comes later in that order than everything
// already in the stage, or folds into the stage's last operation when the two compose exactly (two
// modulates, two recombs, two linears: affine maps compose into one affine map, computed once in
// floating point instead of rounded and clipped to 8 bits in between; only a clipping linear, which
// is how thresholds are made, is kept apart). Otherwise the stage is run to raw pixels
// and a new pipeline continues over them.
//
// The first stage is the caller's pipeline (decode and resize already in it), so a chain of effects
// that keeps sharp's order costs no pass of its own.
import sharp, { type OutputInfo, type OverlayOptions, type Sharp } from 'sharp';
import type { Op } from './ops.ts';
import { matrixAfter } from './ops.ts';

const ORDER = [
  'gammaDarken',
  'median',
  'blur',
  'recomb',
  'modulate',
  'sharpen',
  'composite',
  'gammaBrighten',
  'linear',
  'normalise',
  'negate',
] as const;
type Slot = (typeof ORDER)[number];
const rank = (slot: Slot) => ORDER.indexOf(slot);
const COMPOSITE = rank('composite');

function slotOf(op: Op): Slot {
  switch (op.kind) {
    case 'gamma':
      // sharp's gamma() darkens (x^g) before the resize and brightens (x^(1/g)) after the composite.
      return op.g < 1 ? 'gammaDarken' : 'gammaBrighten';
    case 'vignette':
    case 'tone':
      return 'composite';
    default:
      return op.kind;
  }
}

/** `next` applied after `prev` as one operation, when that is exact. */
function fold(prev: Op, next: Op): Op | undefined {
  if (prev.kind === 'modulate' && next.kind === 'modulate')
    return {
      kind: 'modulate',
      brightness: next.brightness * prev.brightness,
      lightness: next.brightness * prev.lightness + next.lightness,
      saturation: next.saturation * prev.saturation,
      hue: prev.hue + next.hue,
    };
  if (prev.kind === 'recomb' && next.kind === 'recomb')
    return { kind: 'recomb', matrix: matrixAfter(next.matrix, prev.matrix) };
  // A linear that clips (a threshold is one) is not affine over 0-255, so it folds only when it does not.
  const clips = (a: number, b: number) => Math.min(b, 255 * a + b) < 0 || Math.max(b, 255 * a + b) > 255;
  if (prev.kind === 'linear' && next.kind === 'linear' && !clips(prev.a, prev.b))
    return { kind: 'linear', a: next.a * prev.a, b: next.a * prev.b + next.b };
  return undefined;
}

export interface RunContext {
  width: number;
  height: number;
  timeoutSeconds?: number;
  /** Whether the caller composites layers onto the returned pipeline. */
  compositeAfter: boolean;
}

interface Stage {
  img: Sharp;
  /** A pipeline this module made over raw pixels (the caller's pipeline is not). */
  own: boolean;
  ops: Op[];
  /** The raw pixels an own stage reads. */
  raw?: Raw;
  /** The image a tone stage lays over its pixels. */
  overlay?: OverlayOptions;
}

type Raw = { data: Buffer; info: OutputInfo };

/** The stages' pipelines made and run, for a test to count passes. */
export const passCount = { value: 0 };

/**
 * The operations applied to `img`, in order; the pipeline to continue with (the caller's own when no
 * extra pass was needed).
 */
export async function runOps(img: Sharp, ops: readonly Op[], ctx: RunContext): Promise<Sharp> {
  let stage: Stage = { img, own: false, ops: [] };
  for (const op of ops) {
    if (op.kind === 'tone') {
      stage = await toneStage(stage, op, ctx);
      continue;
    }
    if (!fits(stage, op)) stage = await restart(stage, ctx);
    const last = stage.ops.at(-1);
    const folded = last && slotOf(last) === slotOf(op) ? fold(last, op) : undefined;
    if (folded) stage.ops[stage.ops.length - 1] = folded;
    else stage.ops.push(op);
  }
  // sharp keeps one composite() per pipeline (a later call replaces it), and runs gamma, linear,
  // normalise and negate after it: the caller's layers would undo or share an effect.
  if (ctx.compositeAfter && stage.ops.some((op) => rank(slotOf(op)) >= COMPOSITE)) stage = await restart(stage, ctx);
  return realise(stage, ctx);
}

function fits(stage: Stage, op: Op): boolean {
  const slot = slotOf(op);
  // gamma() in the caller's pipeline would turn off JPEG shrink-on-load; the darkening one runs
  // before the resize, so it must open a pipeline with no resize.
  if ((slot === 'gammaDarken' || slot === 'gammaBrighten') && !stage.own) return false;
  if (slot === 'gammaDarken' && stage.ops.length > 0) return false;
  // A vignette composites in a pipeline of this module's; a tone mask needs the pixels first.
  if (slot === 'composite' && !stage.own) return false;
  const last = stage.ops.at(-1);
  if (!last) return true;
  const lastRank = rank(slotOf(last));
  if (rank(slot) > lastRank) return true;
  return rank(slot) === lastRank && slot !== 'composite' && fold(last, op) !== undefined;
}

function withTimeout(img: Sharp, ctx: RunContext): Sharp {
  return ctx.timeoutSeconds ? img.timeout({ seconds: ctx.timeoutSeconds }) : img;
}

function overRaw(raw: Raw, ctx: RunContext): Sharp {
  const { width, height, channels } = raw.info;
  return withTimeout(sharp(raw.data, { raw: { width, height, channels } }), ctx);
}

async function pixels(stage: Stage, ctx: RunContext): Promise<Raw> {
  if (stage.raw && stage.ops.length === 0) return stage.raw;
  passCount.value++;
  return (await realise(stage, ctx)).raw().toBuffer({ resolveWithObject: true });
}

/** The stage run to raw pixels, and a new, empty stage over them. */
async function restart(stage: Stage, ctx: RunContext): Promise<Stage> {
  const raw = await pixels(stage, ctx);
  return { img: overRaw(raw, ctx), own: true, ops: [], raw };
}

/**
 * An elliptic vignette as a black overlay whose opacity grows from 0 at 40% of the way to the
 * corners to `strength` at the corners. Composited with `atop`, which darkens the colour and keeps
 * the image's own alpha (a plain multiply would make transparent parts opaque).
 */
function vignetteOverlay(strength: number, ctx: RunContext): OverlayOptions {
  const { width, height } = ctx;
  const stop = (offset: number, opacity: number) =>
    `<stop offset="${offset}" stop-color="#000" stop-opacity="${(opacity * strength).toFixed(4)}"/>`;
  const svg =
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}">` +
    '<defs><radialGradient id="v" cx="0.5" cy="0.5" r="0.7071">' +
    `${stop(0.4, 0)}${stop(0.7, 0.35)}${stop(0.85, 0.7)}${stop(1, 1)}` +
    `</radialGradient></defs><rect width="${width}" height="${height}" fill="url(#v)"/></svg>`;
  return { input: Buffer.from(svg), blend: 'atop' };
}

/**
 * Shadows and highlights as a tone curve through a luminance mask. The mask is the image's luma,
 * blurred (so that the curve follows regions, not pixels, and keeps their local contrast), squared
 * for highlights or inverted then squared for shadows, so that it weighs the extreme tones most and
 * leaves the mid-tones nearly alone. White (lift) or black (pull down) is laid over the image at
 * 0.4 of the mask's strength at level 100 with `atop`: a lift is then out = in + w(1 - in), a screen, and a pull
 * out = in(1 - w), a multiply, with w the mask, and the image's alpha stays its own.
 */
async function toneStage(stage: Stage, op: Extract<Op, { kind: 'tone' }>, ctx: RunContext): Promise<Stage> {
  const raw = await pixels(stage, ctx);
  const { width, height } = raw.info;
  const sigma = Math.min(20, Math.max(1, Math.max(width, height) / 100));
  // toColourspace('b-w') keeps the masks one channel (sharp would otherwise write sRGB).
  let luma = overRaw(raw, ctx).greyscale().blur(sigma).removeAlpha().toColourspace('b-w');
  if (op.zone === 'shadows') luma = luma.negate();
  const lumaRaw = await luma.raw().toBuffer();
  const one = { width, height, channels: 1 as const };
  const mask = await withTimeout(sharp(lumaRaw, { raw: one }), ctx)
    .gamma(2, 1)
    .linear(0.4 * Math.min(1, Math.abs(op.amount)), 0)
    .toColourspace('b-w')
    .raw()
    .toBuffer();
  if (mask.length !== width * height) throw new Error('effects: the tone mask is not one channel');
  const shade = op.amount > 0 ? 255 : 0;
  const overlay = await withTimeout(
    sharp({ create: { width, height, channels: 3, background: { r: shade, g: shade, b: shade } } }),
    ctx,
  )
    .joinChannel(mask, { raw: one })
    .raw()
    .toBuffer();
  passCount.value += 3;
  return {
    img: overRaw(raw, ctx),
    own: true,
    ops: [op],
    raw,
    overlay: { input: overlay, raw: { width, height, channels: 4 }, blend: 'atop' },
  };
}

/** The stage's operations set on its pipeline. */
function realise(stage: Stage, ctx: RunContext): Sharp {
  let img = stage.img;
  for (const op of stage.ops) {
    switch (op.kind) {
      case 'median':
        img = img.median(op.size);
        break;
      case 'blur':
        img = img.blur(op.sigma);
        break;
      case 'recomb': {
        const m = op.matrix;
        img = img.recomb([
          [m[0], m[1], m[2]],
          [m[3], m[4], m[5]],
          [m[6], m[7], m[8]],
        ]);
        break;
      }
      case 'modulate':
        img = img.modulate({
          brightness: op.brightness,
          saturation: op.saturation,
          hue: op.hue,
          lightness: op.lightness,
        });
        break;
      case 'sharpen':
        img = img.sharpen({ sigma: op.sigma, m1: op.m1, m2: op.m2, x1: op.x1, y2: op.y2, y3: op.y3 });
        break;
      case 'gamma':
        img = op.g < 1 ? img.gamma(1 / op.g, 1) : img.gamma(1, op.g);
        break;
      case 'linear':
        img = img.linear(op.a, op.b);
        break;
      case 'normalise':
        img = img.normalise();
        break;
      case 'negate':
        img = img.negate({ alpha: false });
        break;
      case 'vignette':
        img = img.composite([vignetteOverlay(op.strength, ctx)]);
        break;
      case 'tone':
        img = img.composite([stage.overlay as OverlayOptions]);
        break;
    }
  }
  // Compositing adds an alpha channel; an image that had none should not gain one.
  if (stage.raw?.info.channels === 3 && stage.ops.some((op) => slotOf(op) === 'composite')) img = img.removeAlpha();
  return img;
}
