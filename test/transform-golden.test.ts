// One golden image per token the transformation core owns (docs/transformations.md), rendered from
// the fixed scene (GOLDEN_SOURCE, 800x600) through the real parser, plan and pipeline, compared by
// SSIM and colour difference with test/fixtures/golden/expected/core-*.png. PNG output, so the
// encoder adds no noise of its own. STOWAGE_UPDATE_GOLDEN=1 rewrites them (look at each).
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import sharp from 'sharp';
import { renderTransform } from '../src/media/transform/render.ts';
import { assertGolden, GOLDEN_SOURCE } from './helpers/golden.ts';

const limits = { maxMegapixels: 25, maxSide: 8192, timeoutMs: 10_000, faceTimeoutMs: 500 };

/** Token text → the size it must have (and a golden named after the token). */
export const CORE_GOLDENS: [string, [number, number]][] = [
  ['w_320', [320, 240]],
  ['h_150', [200, 150]],
  ['w_0.25', [200, 150]],
  ['ar_16:9,w_320', [320, 180]],
  ['w_240,h_240,c_fill', [240, 240]],
  ['w_240,h_240,c_fit', [240, 180]],
  ['w_240,h_240,c_crop', [240, 240]],
  ['w_240,h_120,c_scale', [240, 120]],
  ['w_240,h_240,c_pad,bg_gold', [240, 240]],
  ['w_240,h_240,c_crop,p_tl', [240, 240]],
  ['w_240,h_240,c_crop,p_br', [240, 240]],
  ['w_160,h_160,c_crop,p_entropy', [160, 160]],
  ['w_240,h_120,c_fill,p_attention', [240, 120]],
  ['w_200,h_200,c_crop,ps_560,420', [200, 200]],
  ['z_2,w_320,h_240', [320, 240]],
  ['z_2.5,w_240,h_240,p_tl', [240, 240]],
  ['w_160,dpr_2', [320, 240]],
  ['w_320,r_90', [240, 320]],
  ['w_240,r_30,bg_white', [298, 276]],
  ['w_320,r_-90', [240, 320]],
  ['w_320,r_portrait', [240, 320]],
  ['w_320,flip_h', [320, 240]],
  ['w_320,flip_v', [320, 240]],
  ['w_320,flip_h,r_90', [240, 320]],
  ['w_320,br_40', [320, 240]],
  ['w_240,h_240,c_fill,br_max', [240, 240]],
  ['w_320,br_40,bg_navy', [320, 240]],
  ['w_320,bg_rgb:ff000080,br_max', [320, 240]],
];

const slug = (tokens: string) =>
  `core-${tokens
    .replaceAll('-', 'm')
    .replace(/[^a-z0-9]+/gi, '-')
    .replace(/-+$/, '')}`;

describe('transformation goldens (core tokens)', () => {
  for (const [tokens, [width, height]] of CORE_GOLDENS)
    test(tokens, async () => {
      const { data } = await renderTransform(tokens, GOLDEN_SOURCE, { limits, maxPixels: 1e8, format: 'png' });
      const meta = await sharp(data).metadata();
      assert.deepEqual([meta.width, meta.height], [width, height], tokens);
      await assertGolden(slug(tokens), data);
    });

  test('c_crop cuts out a part (not the same as c_fill)', async () => {
    const render = (t: string) => renderTransform(t, GOLDEN_SOURCE, { limits, maxPixels: 1e8, format: 'png' });
    const crop = await sharp((await render('w_240,h_240,c_crop')).data)
      .raw()
      .toBuffer();
    const fill = await sharp((await render('w_240,h_240,c_fill')).data)
      .raw()
      .toBuffer();
    assert.notDeepEqual(crop, fill);
  });

  test('p_face centres a cut on the face (the face finder, then the plan again)', async () => {
    // By eye (test/fixtures/faces/README.md): the face of one-face.jpg (400x478) is centred near 190,197.
    const portrait = join(import.meta.dirname, 'fixtures', 'faces', 'one-face.jpg');
    for (const tokens of ['w_120,h_120,c_crop,p_face', 'w_100,h_300,c_fill,fo_face', 'z_3,p_face']) {
      const { plan } = await renderTransform(tokens, portrait, { limits, maxPixels: 1e8, format: 'png' });
      const r = plan.region as { left: number; top: number; width: number; height: number };
      const centre = { x: r.left + r.width / 2, y: r.top + r.height / 2 };
      // A cut may stop at the image's edge: the face is inside it, near its middle where there is room.
      assert.ok(
        r.left <= 150 && r.left + r.width >= 230 && r.top <= 160 && r.top + r.height >= 235,
        `${tokens}: ${JSON.stringify(r)}`,
      );
      assert.ok(Math.abs(centre.x - 190) < 40, `${tokens}: centre ${JSON.stringify(centre)}`);
    }
  });

  test('p_face without a face falls back to attention', async () => {
    const render = (t: string) => renderTransform(t, GOLDEN_SOURCE, { limits, maxPixels: 1e8, format: 'png' });
    const face = (await render('w_160,h_160,c_crop,p_face')).plan.region;
    const attention = (await render('w_160,h_160,c_crop,p_attention')).plan.region;
    assert.deepEqual(face, attention);
  });
});
