// The golden comparison itself: it must pass the same image, and fail the kinds of mistakes the
// transformation goldens are there to catch.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import sharp from 'sharp';
import { GOLDEN_SOURCE, similarity } from './helpers/golden.ts';

test('an image is identical to itself, and to a re-encoding of itself within the thresholds', async () => {
  const same = await similarity(GOLDEN_SOURCE, GOLDEN_SOURCE);
  assert.equal(same.ssim, 1);
  assert.equal(same.meanDelta, 0);
  const png = await sharp(GOLDEN_SOURCE).png().toBuffer();
  const webp = await sharp(GOLDEN_SOURCE).webp({ quality: 90 }).toBuffer();
  const s = await similarity(webp, png);
  assert.ok(s.ssim > 0.97 && s.meanDelta < 4, JSON.stringify(s));
});

test('a blur, a crop moved by 20 px, a colour shift and a different size all fail', async () => {
  const src = await sharp(GOLDEN_SOURCE).png().toBuffer();
  const blurred = await sharp(GOLDEN_SOURCE).blur(3).png().toBuffer();
  assert.ok((await similarity(blurred, src)).ssim < 0.97);
  const a = await sharp(GOLDEN_SOURCE).extract({ left: 0, top: 0, width: 400, height: 300 }).png().toBuffer();
  const b = await sharp(GOLDEN_SOURCE).extract({ left: 20, top: 0, width: 400, height: 300 }).png().toBuffer();
  assert.ok((await similarity(a, b)).ssim < 0.97);
  const tinted = await sharp(GOLDEN_SOURCE).tint('#ff0000').png().toBuffer();
  assert.ok((await similarity(tinted, src)).meanDelta > 4);
  const small = await sharp(GOLDEN_SOURCE).resize(400).png().toBuffer();
  await assert.rejects(similarity(small, src), /expected size/);
});
