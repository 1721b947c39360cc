// Where a rendered layer lands on the output, and the overlay sharp composites: cut to the output,
// since composite() refuses an overlay larger than its base and only pixels on the output show.
import type { Blend, OverlayOptions } from 'sharp';
import type { RawLayer } from './raw.ts';
import type { LayerBlend, LayerPosition, Placement } from './spec.ts';

type Axis = 0 | 0.5 | 1;
const ANCHOR: Record<Placement, [Axis, Axis]> = {
  northwest: [0, 0],
  north: [0.5, 0],
  northeast: [1, 0],
  west: [0, 0.5],
  centre: [0.5, 0.5],
  east: [1, 0.5],
  southwest: [0, 1],
  south: [0.5, 1],
  southeast: [1, 1],
};

/**
 * The layer's top-left corner on the output. Per axis: `lx_`/`ly_` put the layer's centre there; else
 * the anchor (`tp_`/`ip_`; top-left when only `x_`/`y_` are given, as coordinates; the centre when
 * nothing is) with `x_`/`y_` moving it away from an anchored edge, or right/down from a centred one.
 * The offsets add to `lx_`/`ly_` too.
 */
export function origin(
  pos: LayerPosition,
  layer: { width: number; height: number },
  base: { width: number; height: number },
): { left: number; top: number } {
  const fallback: [Axis, Axis] = pos.x !== undefined || pos.y !== undefined ? [0, 0] : [0.5, 0.5];
  const [ax, ay] = pos.placement ? ANCHOR[pos.placement] : fallback;
  const axis = (centre: number | undefined, a: Axis, offset: number, size: number, room: number): number => {
    if (centre !== undefined) return Math.round(centre - size / 2 + offset);
    const start = Math.round(a * (room - size));
    return a === 1 ? start - offset : start + offset;
  };
  return {
    left: axis(pos.lx, ax, pos.x ?? 0, layer.width, base.width),
    top: axis(pos.ly, ay, pos.y ?? 0, layer.height, base.height),
  };
}

const BLEND: Record<LayerBlend, Blend> = {
  screen: 'screen',
  overlay: 'overlay',
  multiply: 'multiply',
  mask: 'dest-in',
};

/**
 * The overlay for `layer` with its top-left at (`left`, `top`), cut to the output; null when no pixel
 * of it is on the output (a mask still applies then: it hides the whole output).
 */
export function overlay(
  layer: RawLayer,
  at: { left: number; top: number },
  base: { width: number; height: number },
  mode: { blend?: LayerBlend; underlay?: boolean },
): OverlayOptions | null {
  const x0 = Math.max(0, at.left);
  const y0 = Math.max(0, at.top);
  const x1 = Math.min(base.width, at.left + layer.width);
  const y1 = Math.min(base.height, at.top + layer.height);
  const visible = x1 > x0 && y1 > y0;

  if (mode.blend === 'mask') {
    // dest-in only acts under the overlay's rectangle: a mask covers the whole output, transparent
    // (so hiding the output) wherever the layer is not.
    const canvas = Buffer.alloc(base.width * base.height * 4);
    if (visible) copyRows(layer, at, { x0, y0, x1, y1 }, canvas, base.width, 0, 0);
    return {
      input: canvas,
      raw: { width: base.width, height: base.height, channels: 4 },
      left: 0,
      top: 0,
      blend: 'dest-in',
    };
  }
  if (!visible) return null;

  const width = x1 - x0;
  const height = y1 - y0;
  let data = layer.data;
  if (width !== layer.width || height !== layer.height) {
    data = Buffer.alloc(width * height * 4);
    copyRows(layer, at, { x0, y0, x1, y1 }, data, width, x0, y0);
  }
  const blend: Blend = mode.underlay ? 'dest-over' : mode.blend ? BLEND[mode.blend] : 'over';
  return { input: data, raw: { width, height, channels: 4 }, left: x0, top: y0, blend };
}

/** Copies the part of `layer` inside the output rectangle into `into` (`stride` pixels wide, origin at ox, oy). */
function copyRows(
  layer: RawLayer,
  at: { left: number; top: number },
  r: { x0: number; y0: number; x1: number; y1: number },
  into: Buffer,
  stride: number,
  ox: number,
  oy: number,
): void {
  const rowBytes = (r.x1 - r.x0) * 4;
  for (let y = r.y0; y < r.y1; y++) {
    const from = ((y - at.top) * layer.width + (r.x0 - at.left)) * 4;
    layer.data.copy(into, ((y - oy) * stride + (r.x0 - ox)) * 4, from, from + rowBytes);
  }
}
