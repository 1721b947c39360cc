// Layers travel between steps as raw RGBA (straight, not premultiplied alpha): opacity, rounded corners
// and cropping to the output are then plain byte edits, and composite() takes the bytes as they are.
import sharp, { type Sharp } from 'sharp';

export interface RawLayer {
  data: Buffer;
  width: number;
  height: number;
}

/** A pipeline over `layer`'s pixels. */
export function fromRaw(layer: RawLayer): Sharp {
  return sharp(layer.data, { raw: { width: layer.width, height: layer.height, channels: 4 } });
}

/** Runs `img` to 4-channel sRGB pixels. */
export async function toRaw(img: Sharp): Promise<RawLayer> {
  const { data, info } = await img.toColourspace('srgb').ensureAlpha().raw().toBuffer({ resolveWithObject: true });
  if (info.channels !== 4) throw new Error(`layer pixels have ${info.channels} channels, not 4`);
  return { data, width: info.width, height: info.height };
}

/** Multiplies every pixel's alpha by `factor` (0-1). */
export function scaleAlpha(layer: RawLayer, factor: number): void {
  if (factor >= 1) return;
  const { data } = layer;
  for (let i = 3; i < data.length; i += 4) data[i] = Math.round(data[i] * factor);
}

/**
 * Rounds the corners with radius `r` (capped at half the shorter side), anti-aliased over one pixel:
 * only the four r×r corner squares are touched.
 */
export function roundCorners(layer: RawLayer, r: number): void {
  const { data, width, height } = layer;
  const radius = Math.min(r, width / 2, height / 2);
  if (radius <= 0) return;
  const span = Math.ceil(radius);
  for (let j = 0; j < span; j++) {
    for (let i = 0; i < span; i++) {
      // Distance from this pixel's centre to the corner circle's centre.
      const dx = radius - (i + 0.5);
      const dy = radius - (j + 0.5);
      if (dx <= 0 || dy <= 0) continue;
      const keep = Math.max(0, Math.min(1, radius - Math.hypot(dx, dy) + 0.5));
      if (keep >= 1) continue;
      for (const [x, y] of [
        [i, j],
        [width - 1 - i, j],
        [i, height - 1 - j],
        [width - 1 - i, height - 1 - j],
      ]) {
        const a = (y * width + x) * 4 + 3;
        data[a] = Math.round(data[a] * keep);
      }
    }
  }
}

/** Rotates clockwise by `degrees` on a transparent background (the box grows to hold the corners). */
export async function rotateRaw(layer: RawLayer, degrees: number): Promise<RawLayer> {
  if (degrees % 360 === 0) return layer;
  return toRaw(fromRaw(layer).rotate(degrees, { background: { r: 0, g: 0, b: 0, alpha: 0 } }));
}

/** The size of a w×h box rotated by `degrees`. */
export function rotatedSize(width: number, height: number, degrees: number): { width: number; height: number } {
  const t = (degrees * Math.PI) / 180;
  const c = Math.abs(Math.cos(t));
  const s = Math.abs(Math.sin(t));
  return { width: Math.ceil(width * c + height * s), height: Math.ceil(width * s + height * c) };
}
