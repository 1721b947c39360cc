// Any valid chain of the core's tokens either renders within the output bounds, at the size the
// plan said, or is refused with a 400: never another error, never a hang (fast-check draws the
// chains; a failure prints the smallest chain that fails).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import sharp from 'sharp';
import { AppError } from '../src/errors.ts';
import { renderTransform } from '../src/media/transform/render.ts';
import { GOLDEN_SOURCE } from './helpers/golden.ts';

const limits = { maxMegapixels: 1.5, maxSide: 1600, timeoutMs: 5000, faceTimeoutMs: 200 };

const int = (min: number, max: number) => fc.integer({ min, max });
const tenths = (min: number, max: number) => int(min * 10, max * 10).map((n) => (n / 10).toFixed(1));
const length = (name: string) =>
  fc.oneof(
    int(1, 3000).map((n) => `${name}_${n}`),
    int(1, 400).map((n) => `${name}_${(n / 100).toFixed(2)}`),
  );

const token = fc.oneof(
  length('w'),
  length('h'),
  fc.tuple(int(1, 21), int(1, 21)).map(([a, b]) => `ar_${a}:${b}`),
  fc.constantFrom('c_fill', 'c_fit', 'c_crop', 'c_scale', 'c_pad'),
  fc.constantFrom('c', 't', 'b', 'l', 'r', 'tl', 'tr', 'bl', 'br', 'entropy', 'attention', 'face').map((p) => `p_${p}`),
  fc.constant('fo_face'),
  fc.tuple(int(0, 1200), int(0, 900), fc.boolean()).map(([x, y, comma]) => (comma ? `ps_${x},${y}` : `ps_${x}:${y}`)),
  tenths(1, 5).map((z) => `z_${z}`),
  fc.oneof(tenths(1, 4), fc.constant('auto')).map((d) => `dpr_${d}`),
  fc.constantFrom('png', 'webp', 'jpg', 'jpeg', 'gif', 'tiff', 'auto').map((f) => `f_${f}`),
  int(1, 100).map((q) => `q_${q}`),
  fc.oneof(int(-1000, 1000).map(String), fc.constantFrom('auto', 'portrait', 'landscape')).map((r) => `r_${r}`),
  fc.constantFrom('h', 'v', 'hv').map((f) => `flip_${f}`),
  fc
    .oneof(
      int(0, 0xffffff).map((n) => n.toString(16).padStart(6, '0')),
      fc.constantFrom('white', 'navy', 'gold'),
    )
    .map((c) => `bg_${c}`),
  fc.oneof(int(0, 600).map(String), fc.constant('max')).map((r) => `br_${r}`),
  fc.constantFrom('el_0', 'el_1'),
);

/** One to seven tokens, in one segment or split over two. */
const chain = fc
  .tuple(fc.array(token, { minLength: 1, maxLength: 7 }), fc.nat())
  .map(([tokens, cut]) =>
    tokens.length > 1 && cut % 2 === 0
      ? `${tokens.slice(0, 1 + (cut % (tokens.length - 1))).join(',')}/${tokens.slice(1 + (cut % (tokens.length - 1))).join(',')}`
      : tokens.join(','),
  );

const hang = (ms: number) =>
  new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no answer in ${ms} ms`)), ms).unref());

test('any valid chain renders within bounds or is refused with a 400', { timeout: 240_000 }, async () => {
  const source = await sharp(GOLDEN_SOURCE).resize(400).jpeg().toBuffer();
  await fc.assert(
    fc.asyncProperty(chain, async (text) => {
      let out: Awaited<ReturnType<typeof renderTransform>>;
      try {
        out = await Promise.race([renderTransform(text, source, { limits, maxPixels: 1e8 }), hang(8000)]);
      } catch (err) {
        assert.ok(err instanceof AppError, `${text}: ${(err as Error).stack}`);
        assert.equal(err.status, 400, `${text}: ${err.errorCode} ${err.message}`);
        return;
      }
      const meta = await sharp(out.data).metadata();
      assert.deepEqual([meta.width, meta.height], [out.plan.width, out.plan.height], text);
      assert.ok((out.plan.width * out.plan.height) / 1e6 <= limits.maxMegapixels, text);
      assert.ok(Math.max(out.plan.width, out.plan.height) <= limits.maxSide, text);
    }),
    { numRuns: 120 },
  );
});
