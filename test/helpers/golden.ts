// Golden images for the transformation tests: a rendition is compared with an expected image kept in
// test/fixtures/golden/expected/ by structural similarity (SSIM, on luma, 8x8 windows) and by the mean
// colour difference, so a libvips upgrade that moves pixels by a rounding error passes while a wrong
// crop, a missing effect or a shifted layer fails.
//
// A missing expected image fails the test. `STOWAGE_UPDATE_GOLDEN=1 npm test -- <suite>` writes the
// renditions as the new expected images: look at every one you write (they are PNGs) before
// committing it, since from then on it is the definition of right.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import sharp from 'sharp';

export const GOLDEN_DIR = join(import.meta.dirname, '..', 'fixtures', 'golden');
/** The fixed inputs (scripts/make-golden-sources.ts): an 800x600 JPEG scene and a 200x100 PNG logo with alpha. */
export const GOLDEN_SOURCE = join(GOLDEN_DIR, 'source.jpg');
export const GOLDEN_LOGO = join(GOLDEN_DIR, 'logo.png');

export interface Similarity {
  /** Mean SSIM over 8x8 windows of luma, 1 for identical images. */
  ssim: number;
  /** Mean absolute difference per channel (RGBA, 0-255). */
  meanDelta: number;
}

interface Pixels {
  data: Buffer;
  width: number;
  height: number;
}

/** RGBA pixels, EXIF orientation applied, alpha premultiplied onto white (so transparent areas compare). */
async function pixels(input: Buffer | string): Promise<Pixels & { rgba: Buffer }> {
  const img = sharp(input).rotate();
  const rgba = await img.clone().ensureAlpha().raw().toBuffer({ resolveWithObject: true });
  const flat = await sharp(input)
    .rotate()
    .flatten({ background: '#ffffff' })
    .toColourspace('b-w')
    .raw()
    .toBuffer({ resolveWithObject: true });
  return { data: flat.data, width: flat.info.width, height: flat.info.height, rgba: rgba.data };
}

function ssim(a: Pixels, b: Pixels): number {
  const C1 = (0.01 * 255) ** 2;
  const C2 = (0.03 * 255) ** 2;
  const W = 8;
  let total = 0;
  let windows = 0;
  for (let y = 0; y + W <= a.height; y += W / 2) {
    for (let x = 0; x + W <= a.width; x += W / 2) {
      let sa = 0;
      let sb = 0;
      let saa = 0;
      let sbb = 0;
      let sab = 0;
      for (let j = 0; j < W; j++) {
        const row = (y + j) * a.width + x;
        for (let i = 0; i < W; i++) {
          const va = a.data[row + i];
          const vb = b.data[row + i];
          sa += va;
          sb += vb;
          saa += va * va;
          sbb += vb * vb;
          sab += va * vb;
        }
      }
      const n = W * W;
      const ma = sa / n;
      const mb = sb / n;
      const va = saa / n - ma * ma;
      const vb = sbb / n - mb * mb;
      const cov = sab / n - ma * mb;
      total += ((2 * ma * mb + C1) * (2 * cov + C2)) / ((ma * ma + mb * mb + C1) * (va + vb + C2));
      windows++;
    }
  }
  // Images smaller than one window: compare them as one window.
  if (windows === 0) return a.data.equals(b.data) ? 1 : 0;
  return total / windows;
}

/** How alike two encoded images (or files) are; they must have the same size. */
export async function similarity(actual: Buffer | string, expected: Buffer | string): Promise<Similarity> {
  const [a, b] = await Promise.all([pixels(actual), pixels(expected)]);
  assert.deepEqual([a.width, a.height], [b.width, b.height], 'the rendition has the expected size');
  let delta = 0;
  for (let i = 0; i < a.rgba.length; i++) delta += Math.abs(a.rgba[i] - b.rgba[i]);
  return { ssim: ssim(a, b), meanDelta: delta / a.rgba.length };
}

/**
 * Asserts that `actual` (an encoded rendition) looks like test/fixtures/golden/expected/`name`.png:
 * same size, SSIM at least `minSsim` (default 0.97) and mean colour difference at most `maxDelta`
 * (default 4 of 255).
 */
export async function assertGolden(
  name: string,
  actual: Buffer,
  opts: { minSsim?: number; maxDelta?: number } = {},
): Promise<Similarity> {
  const file = join(GOLDEN_DIR, 'expected', `${name}.png`);
  if (process.env.STOWAGE_UPDATE_GOLDEN === '1') {
    mkdirSync(dirname(file), { recursive: true });
    await sharp(actual).png({ compressionLevel: 9 }).toFile(file);
  }
  assert.ok(
    existsSync(file),
    `no expected image ${file}: run with STOWAGE_UPDATE_GOLDEN=1, then look at it before committing it`,
  );
  const s = await similarity(actual, file);
  const minSsim = opts.minSsim ?? 0.97;
  const maxDelta = opts.maxDelta ?? 4;
  assert.ok(
    s.ssim >= minSsim && s.meanDelta <= maxDelta,
    `${name}: SSIM ${s.ssim.toFixed(4)} (at least ${minSsim}), mean difference ${s.meanDelta.toFixed(2)} (at most ${maxDelta})`,
  );
  return s;
}
