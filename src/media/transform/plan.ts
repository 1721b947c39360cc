// What a spec makes of one source, decided from the source's size alone (its header), before any
// pixel is decoded: the part of the source taken, the resize, the rotation and the output size,
// checked against the render limits (RENDITION_TOO_LARGE, EFFECT_TOO_STRONG: 400).
//
// The order is the hosted docs' (docs/transformations.md#order): zoom, crop mode and size (w_, h_,
// ar_, dpr_), position, then flip, rotation, effects, layers, corners, background. Sizes apply to
// the image as stored: `w_360,r_90` of a 480x360 image is 270x360. No enlargement unless el_1: a
// box larger than the image could fill at its own size shrinks by that factor, keeping its shape
// (w_1600,h_900 of an 800x600 image is 800x450).
import { errors } from '../../errors.ts';
import { checkEffects } from './effects.ts';
import type { Compass, Length, TransformSpec } from './spec.ts';

export interface RenderLimits {
  /** Largest output, in megapixels. */
  maxMegapixels: number;
  /** Longest output side, in pixels. */
  maxSide: number;
}

export interface Size {
  width: number;
  height: number;
}

export interface Rect extends Size {
  left: number;
  top: number;
}

export type Strategy = 'entropy' | 'attention';

export interface RenderPlan {
  /** The part of the source (EXIF orientation applied) the rendition is made of; all of it when absent. */
  region?: Rect;
  /** The resize of that part: exactly to this size, or libvips' contain (c_pad) or smart cover. */
  resize?: Size & { fit: 'fill' | 'contain' | 'cover'; strategy?: Strategy; gravity?: Compass };
  /** The size after the resize, before the rotation. */
  resized: Size;
  /** Degrees clockwise, [0, 360). */
  angle: number;
  /** The output's size. */
  width: number;
  height: number;
  /** br_: the corners' radii in output pixels. */
  radius?: { rx: number; ry: number };
  /**
   * A smart position the region depends on, found on the source by the pipeline (focus.ts) and
   * handed back to planRendition as `focus`; until then the region is centred (its size is final).
   */
  focus?: 'face' | Strategy;
}

type Mode = 'none' | 'fit' | 'fill' | 'crop' | 'pad' | 'scale';

const px = (l: Length, side: number) => (typeof l === 'number' ? l : Math.max(1, Math.round(l.fraction * side)));
const round1 = (n: number) => Math.max(1, Math.round(n));

/** The box w_/h_/ar_/dpr_ ask for, in pixels, the missing side from ar_ (ar_ alone: the largest such box). */
function requestedBox(spec: TransformSpec, sw: number, sh: number): [number | undefined, number | undefined] {
  let w = spec.width === undefined ? undefined : px(spec.width, sw);
  let h = spec.height === undefined ? undefined : px(spec.height, sh);
  if (spec.aspectRatio) {
    const a = spec.aspectRatio[0] / spec.aspectRatio[1];
    if (w && !h) h = round1(w / a);
    else if (h && !w) w = round1(h * a);
    else if (!w && !h) [w, h] = sw / sh > a ? [round1(sh * a), sh] : [sw, round1(sw / a)];
  }
  const dpr = typeof spec.dpr === 'number' ? spec.dpr : 1;
  return [w && round1(w * dpr), h && round1(h * dpr)];
}

function modeOf(spec: TransformSpec, w?: number, h?: number): Mode {
  if (!w && !h) return 'none';
  const both = Boolean(w && h);
  switch (spec.crop) {
    case 'crop':
    case 'scale':
      return spec.crop;
    case 'pad':
      return both ? 'pad' : 'fit';
    case 'fit':
      return 'fit';
    default:
      return both ? 'fill' : 'fit';
  }
}

/** How much larger than the image the box asks it to be (over 1: an enlargement). */
function enlargement(mode: Mode, sw: number, sh: number, w?: number, h?: number): number {
  const ratios = [w && w / sw, h && h / sh].filter((r): r is number => r !== undefined && r > 0);
  return mode === 'fit' || mode === 'pad' ? Math.min(...ratios) : Math.max(...ratios);
}

/** Where a `rw` x `rh` part of a `sw` x `sh` image starts, placed by compass or centred on a point. */
function place(rw: number, rh: number, sw: number, sh: number, gravity: Compass, at?: { x: number; y: number }) {
  const clamp = (v: number, max: number) => Math.min(Math.max(0, v), max);
  if (at) return { left: clamp(at.x - rw / 2, sw - rw), top: clamp(at.y - rh / 2, sh - rh) };
  const h = gravity.includes('l') ? 0 : gravity.includes('r') ? 1 : 0.5;
  const v = gravity.includes('t') ? 0 : gravity.includes('b') ? 1 : 0.5;
  return { left: (sw - rw) * h, top: (sh - rh) * v };
}

/** The canvas a rotation makes: libvips rounds its bounding box; `bound` rounds up (the limits' check). */
function rotated(angle: number, width: number, height: number, bound = false): Size {
  if (angle === 90 || angle === 270) return { width: height, height: width };
  if (angle % 180 === 0) return { width, height };
  const c = Math.abs(Math.cos((angle * Math.PI) / 180));
  const s = Math.abs(Math.sin((angle * Math.PI) / 180));
  const r = bound ? Math.ceil : Math.round;
  return { width: r(width * c + height * s), height: r(width * s + height * c) };
}

function angleOf(spec: TransformSpec, out: Size): number {
  if (spec.rotate === 'portrait') return out.width > out.height ? 90 : 0;
  if (spec.rotate === 'landscape') return out.height > out.width ? 90 : 0;
  return spec.rotate ?? 0;
}

function checkSize(size: Size, limits: RenderLimits): void {
  const megapixels = (size.width * size.height) / 1e6;
  if (size.width > limits.maxSide || size.height > limits.maxSide || megapixels > limits.maxMegapixels)
    throw errors.renditionTooLarge(size.width, size.height, limits.maxMegapixels, limits.maxSide);
}

/**
 * Checks `spec` against `limits` for a source of `source` pixels (EXIF orientation applied) and
 * says what the render does. `focus`: the point a smart position (p_face, p_entropy, p_attention
 * where libvips cannot place it itself) was found at, in source pixels. Throws RENDITION_TOO_LARGE
 * and EFFECT_TOO_STRONG (400).
 */
export function planRendition(
  spec: TransformSpec,
  source: Size,
  limits: RenderLimits,
  focus?: { x: number; y: number },
): RenderPlan {
  const { width: sw, height: sh } = source;
  let [bw, bh] = requestedBox(spec, sw, sh);
  const mode = modeOf(spec, bw, bh);
  if (mode !== 'none') {
    const factor = enlargement(mode, sw, sh, bw, bh);
    // c_crop cuts out a part of the image, each side at most the image's (below).
    if (factor > 1 && !spec.enlarge && mode !== 'crop') {
      bw = bw && round1(bw / factor);
      bh = bh && round1(bh / factor);
    }
  }
  const position = spec.position ?? 'c';
  const smart = position === 'face' || position === 'entropy' || position === 'attention';
  const gravity: Compass = smart ? 'c' : (position as Compass);
  const at =
    focus ??
    (spec.point && {
      x: spec.point.relative ? spec.point.x * sw : spec.point.x,
      y: spec.point.relative ? spec.point.y * sh : spec.point.y,
    });
  // z_: a 1/zoom part of the image stands for the whole of it (V, sw x sh) in what follows.
  const zoom = spec.zoom ?? 1;
  const zoomed = place(sw / zoom, sh / zoom, sw, sh, gravity, at);
  const inV = at && { x: (at.x - zoomed.left) * zoom, y: (at.y - zoomed.top) * zoom };

  // The part of V to take and the size it becomes.
  let part = { left: 0, top: 0, width: sw, height: sh };
  let out: Size = { width: sw, height: sh };
  let fit: 'fill' | 'contain' | 'cover' = 'fill';
  let placed = false;
  if (mode === 'fit') {
    const s = Math.min(...[bw && bw / sw, bh && bh / sh].filter((r): r is number => Boolean(r)));
    out = { width: round1(sw * s), height: round1(sh * s) };
  } else if (mode === 'scale') {
    out = { width: bw ?? round1((sw * (bh as number)) / sh), height: bh ?? round1((sh * (bw as number)) / sw) };
  } else if (mode === 'pad') {
    out = { width: bw as number, height: bh as number };
    fit = 'contain';
  } else if (mode === 'fill' || mode === 'crop') {
    out = {
      width: Math.min(bw ?? sw, mode === 'crop' ? sw : Infinity),
      height: Math.min(bh ?? sh, mode === 'crop' ? sh : Infinity),
    };
    const s = mode === 'crop' ? 1 : Math.max(out.width / sw, out.height / sh);
    const rw = Math.min(sw, out.width / s);
    const rh = Math.min(sh, out.height / s);
    part = { ...place(rw, rh, sw, sh, gravity, inV), width: rw, height: rh };
    placed = true;
  }
  const plan: RenderPlan = { resized: out, angle: 0, width: 0, height: 0 };
  // libvips places a smart cover crop itself, without a first look at the image.
  const native = smart && !at && mode === 'fill' && zoom === 1 && position !== 'face';
  if (smart && !at && (placed || zoom > 1) && !native) plan.focus = position as RenderPlan['focus'];
  // V back to the source's pixels.
  const region = native
    ? { left: 0, top: 0, width: sw, height: sh }
    : {
        left: Math.floor(zoomed.left + part.left / zoom),
        top: Math.floor(zoomed.top + part.top / zoom),
        width: round1(part.width / zoom),
        height: round1(part.height / zoom),
      };
  region.width = Math.min(region.width, sw - region.left);
  region.height = Math.min(region.height, sh - region.top);
  if (region.width !== sw || region.height !== sh) plan.region = region;
  if (native) plan.resize = { ...out, fit: 'cover', strategy: position as Strategy };
  else if (fit === 'contain') plan.resize = { ...out, fit, gravity };
  else if (region.width !== out.width || region.height !== out.height) plan.resize = { ...out, fit };
  plan.angle = angleOf(spec, out);
  const final = rotated(plan.angle, out.width, out.height);
  checkSize(out, limits);
  checkSize(rotated(plan.angle, out.width, out.height, true), limits);
  plan.width = final.width;
  plan.height = final.height;
  if (spec.radius === 'max') plan.radius = { rx: final.width / 2, ry: final.height / 2 };
  else if (spec.radius) {
    const r = Math.min(spec.radius, Math.min(final.width, final.height) / 2);
    plan.radius = { rx: r, ry: r };
  }
  checkEffects(spec.effects ?? [], { width: final.width, height: final.height });
  return plan;
}
