// The effects module (src/media/transform/effects.ts) on its own: every effect's syntax, a golden
// image of it on the fixed scene, and a measured property that shows the effect did what it says
// whatever the golden holds; chains in the order written; the cost caps.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import sharp, { type Sharp } from 'sharp';
import {
  applyEffects,
  canonicalEffect,
  checkEffects,
  type Effect,
  type EffectContext,
  MAX_EFFECTS,
  parseEffect,
} from '../src/media/transform/effects.ts';
import { EFFECTS, type Param } from '../src/media/transform/effects/catalogue.ts';
import { passCount } from '../src/media/transform/effects/passes.ts';
import { assertGolden, GOLDEN_SOURCE, similarity } from './helpers/golden.ts';

const W = 320;
const H = 240;
const ctx: EffectContext = { width: W, height: H, compositeAfter: false };

const parse = (chain: string): Effect[] => chain.split(',').map(parseEffect);
const scene = () => sharp(GOLDEN_SOURCE).resize(W, H);

/** The chain applied to the scene (or `input`), encoded as PNG. */
async function render(chain: string, input: () => Sharp = scene, c: EffectContext = ctx): Promise<Buffer> {
  return (await applyEffects(input(), chain ? parse(chain) : [], c)).png().toBuffer();
}

interface Pixels {
  data: Buffer;
  width: number;
  height: number;
}

async function rgb(png: Buffer): Promise<Pixels> {
  const { data, info } = await sharp(png)
    .removeAlpha()
    .toColourspace('srgb')
    .raw()
    .toBuffer({ resolveWithObject: true });
  assert.equal(info.channels, 3);
  return { data, width: info.width, height: info.height };
}

const luma = (p: Pixels, i: number) => 0.2126 * p.data[i * 3] + 0.7152 * p.data[i * 3 + 1] + 0.0722 * p.data[i * 3 + 2];

function lumaStats(p: Pixels): { mean: number; sd: number; min: number; max: number } {
  let sum = 0;
  let sq = 0;
  let min = 255;
  let max = 0;
  const n = p.width * p.height;
  for (let i = 0; i < n; i++) {
    const y = luma(p, i);
    sum += y;
    sq += y * y;
    min = Math.min(min, y);
    max = Math.max(max, y);
  }
  const mean = sum / n;
  return { mean, sd: Math.sqrt(sq / n - mean * mean), min, max };
}

/** Mean R, G, B over a rectangle. */
function region(p: Pixels, x: number, y: number, w: number, h: number): [number, number, number] {
  const s = [0, 0, 0];
  for (let j = y; j < y + h; j++)
    for (let i = x; i < x + w; i++) for (let c = 0; c < 3; c++) s[c] += p.data[(j * p.width + i) * 3 + c];
  return s.map((v) => v / (w * h)) as [number, number, number];
}
const whole = (p: Pixels) => region(p, 0, 0, p.width, p.height);
const regionLuma = (p: Pixels, x: number, y: number, w: number, h: number) => {
  const [r, g, b] = region(p, x, y, w, h);
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
};

/** Mean absolute difference between horizontal neighbours' luma: how much edge and texture there is. */
function edgeEnergy(p: Pixels): number {
  let sum = 0;
  for (let y = 0; y < p.height; y++)
    for (let x = 1; x < p.width; x++) sum += Math.abs(luma(p, y * p.width + x) - luma(p, y * p.width + x - 1));
  return sum / (p.height * (p.width - 1));
}

/** Mean chroma as the spread between the largest and smallest channel. */
function chroma(p: Pixels): number {
  let sum = 0;
  for (let i = 0; i < p.width * p.height; i++) {
    const c = [p.data[i * 3], p.data[i * 3 + 1], p.data[i * 3 + 2]];
    sum += Math.max(...c) - Math.min(...c);
  }
  return sum / (p.width * p.height);
}

function hueOf([r, g, b]: [number, number, number]): number {
  const max = Math.max(r, g, b);
  const d = max - Math.min(r, g, b);
  if (d === 0) return 0;
  const h = max === r ? ((g - b) / d) % 6 : max === g ? (b - r) / d + 2 : (r - g) / d + 4;
  return (h * 60 + 360) % 360;
}

/** A 256x8 grey ramp, 0 at the left to 255 at the right. */
const RAMP = Buffer.alloc(256 * 8 * 3);
for (let y = 0; y < 8; y++) for (let x = 0; x < 256; x++) RAMP.fill(x, (y * 256 + x) * 3, (y * 256 + x) * 3 + 3);
const ramp = () => sharp(RAMP, { raw: { width: 256, height: 8, channels: 3 } });
const rampCtx: EffectContext = { width: 256, height: 8, compositeAfter: false };
/** The ramp's value at input grey `x` after `chain` (the middle row). */
async function curve(chain: string): Promise<(x: number) => number> {
  const p = await rgb(await render(chain, ramp, rampCtx));
  return (x) => luma(p, 4 * 256 + x);
}

function rejects(token: string, message: RegExp) {
  assert.throws(
    () => parseEffect(token),
    (err: any) => err.errorCode === 'VALIDATION_FAILED' && err.status === 400 && message.test(err.message),
    token,
  );
}

describe('parsing', () => {
  test('every effect with its documented values, defaults filled into the canonical text', () => {
    const cases: [string, string][] = [
      ['e_brightness:20', 'e_brightness:20'],
      ['e_brightness:-99', 'e_brightness:-99'],
      ['e_contrast:-100', 'e_contrast:-100'],
      ['e_exposure:025', 'e_exposure:25'],
      ['e_highlights:-40', 'e_highlights:-40'],
      ['e_shadows:100', 'e_shadows:100'],
      ['e_gamma:-50', 'e_gamma:-50'],
      ['e_gamma:150', 'e_gamma:150'],
      ['e_saturation:-0', 'e_saturation:0'],
      ['e_hue:-180', 'e_hue:-180'],
      ['e_temperature:40', 'e_temperature:40'],
      ['e_tint:-100', 'e_tint:-100'],
      ['e_warmth:30', 'e_warmth:30'],
      ['e_sharpen', 'e_sharpen:100'],
      ['e_sharpen:2000', 'e_sharpen:2000'],
      ['e_unsharp_mask:150', 'e_unsharp_mask:150'],
      ['e_structure:0', 'e_structure:0'],
      ['e_grayscale', 'e_grayscale'],
      ['e_blackwhite:50', 'e_blackwhite:50'],
      ['e_invert', 'e_invert'],
      ['e_fade:60', 'e_fade:60'],
      ['e_vignette:45', 'e_vignette:45'],
      ['e_blur', 'e_blur:5'],
      ['e_blur:0.3', 'e_blur:0.3'],
      ['e_blur:1000', 'e_blur:1000'],
      ['e_blur:2.50', 'e_blur:2.5'],
      ['e_median:5', 'e_median:5'],
      ['e_auto_enhance', 'e_auto_enhance'],
      ['e_normalize', 'e_normalize'],
      ['e_improve', 'e_improve'],
      ['e_improve:indoor', 'e_improve:indoor:100'],
      ['e_improve:outdoor:80', 'e_improve:outdoor:80'],
      ['e_linear:1.2', 'e_linear:1.2:0'],
      ['e_linear:1.2:10', 'e_linear:1.2:10'],
      ['e_threshold:128', 'e_threshold:128'],
      ['e_threshold:128:gray', 'e_threshold:128:gray'],
    ];
    for (const [token, canonical] of cases) assert.equal(canonicalEffect(parseEffect(token)), canonical, token);
    assert.deepEqual(parseEffect('e_improve:outdoor'), { name: 'improve', value: 'outdoor', args: ['outdoor', 100] });
  });

  test('values out of range, malformed or missing are refused with the syntax and the range', () => {
    rejects(
      'e_brightness:-100',
      /"e_brightness:-100" must be e_brightness:\{level\}, level a whole number from -99 to 100/,
    );
    rejects('e_brightness:101', /from -99 to 100/);
    rejects('e_brightness', /must be e_brightness:\{level\}/);
    rejects('e_brightness:', /must be e_brightness/);
    rejects('e_brightness:2.5', /a whole number/);
    rejects('e_brightness:+20', /a whole number/);
    rejects('e_brightness:20:1', /must be e_brightness/);
    rejects('e_contrast:-101', /from -100 to 100/);
    rejects('e_exposure:abc', /from -100 to 100/);
    rejects('e_highlights:200', /from -100 to 100/);
    rejects('e_shadows', /e_shadows:\{level\}/);
    rejects('e_gamma:-51', /from -50 to 150/);
    rejects('e_gamma:151', /from -50 to 150/);
    rejects('e_saturation:-101', /from -100 to 100/);
    rejects('e_hue:181', /e_hue:\{degrees\}, degrees a whole number from -180 to 180/);
    rejects('e_temperature:101', /from -100 to 100/);
    rejects('e_tint:1e2', /from -100 to 100/);
    rejects('e_warmth:-101', /from -100 to 100/);
    rejects('e_sharpen:0', /e_sharpen\[:\{strength\}\], strength a whole number from 1 to 2000 \(default 100\)/);
    rejects('e_sharpen:2001', /from 1 to 2000/);
    rejects('e_unsharp_mask', /e_unsharp_mask:\{strength\}, strength a whole number from 1 to 2000/);
    rejects('e_structure:101', /from 0 to 100/);
    rejects('e_structure:-1', /from 0 to 100/);
    rejects('e_grayscale:50', /e_grayscale, with no value/);
    rejects('e_blackwhite', /e_blackwhite:\{level\}, level a whole number from 0 to 100/);
    rejects('e_invert:1', /e_invert, with no value/);
    rejects('e_fade:101', /from 0 to 100/);
    rejects('e_vignette:-5', /from 0 to 100/);
    rejects('e_blur:0.2', /e_blur\[:\{sigma\}\], sigma a number from 0.3 to 1000 \(default 5\)/);
    rejects('e_blur:1001', /from 0.3 to 1000/);
    rejects('e_blur:NaN', /from 0.3 to 1000/);
    rejects('e_median:4', /size an odd whole number from 3 to 15/);
    rejects('e_median:17', /from 3 to 15/);
    rejects('e_auto_enhance:1', /with no value/);
    rejects('e_normalize:5', /with no value/);
    rejects('e_improve:kitchen', /e_improve\[:\{mode\}\[:\{blend\}\]\], mode indoor or outdoor/);
    rejects('e_improve:indoor:101', /blend a whole number from 0 to 100/);
    rejects('e_linear:11', /a a number from 0 to 10/);
    rejects('e_threshold:256', /value a whole number from 0 to 255/);
    rejects('e_threshold:100:grey', /mode gray/);
  });

  test('unknown effects name the catalogue; the hosted ones Stowage leaves out say so', () => {
    rejects('e_sepia', /"e_sepia" is not a known effect; the effects are e_brightness, .*e_vignette/);
    rejects('e_constructor', /is not a known effect/);
    rejects('e_toString', /is not a known effect/);
    rejects('e_', /is not a known effect/);
    rejects('brightness:20', /is not a known effect/);
    rejects('e_extend:10:10:10:10:white', /is not supported: it changes the image size or alpha channel/);
    rejects('e_remove_alpha', /is not supported/);
    rejects(`e_${'x'.repeat(500)}`, /^transform: "e_x{38}" is not a known effect/);
  });
});

describe('each effect: a golden image and what it measurably does', () => {
  let source: Pixels;
  const sourceOnce = async () => {
    source ??= await rgb(await render(''));
    return source;
  };
  /** Renders, compares with the golden image, and returns the pixels to measure. */
  const golden = async (name: string, chain: string, opts?: { minSsim?: number; maxDelta?: number }) => {
    const png = await render(chain);
    await assertGolden(`effect-${name}`, png, opts);
    return rgb(png);
  };

  test('brightness, contrast and exposure move the mean and the spread of luma', async () => {
    const src = lumaStats(await sourceOnce());
    const bright = lumaStats(await golden('brightness-20', 'e_brightness:20'));
    assert.ok(bright.mean > src.mean + 10, `${bright.mean} > ${src.mean}`);
    const dark = lumaStats(await golden('brightness--30', 'e_brightness:-30'));
    assert.ok(dark.mean < src.mean - 15, `${dark.mean} < ${src.mean}`);
    const contrast = lumaStats(await golden('contrast-30', 'e_contrast:30'));
    assert.ok(contrast.sd > src.sd * 1.15, `sd ${contrast.sd} vs ${src.sd}`);
    const soft = lumaStats(await golden('contrast--50', 'e_contrast:-50'));
    assert.ok(soft.sd < src.sd * 0.7, `sd ${soft.sd} vs ${src.sd}`);
    const exposure = lumaStats(await golden('exposure-25', 'e_exposure:25'));
    assert.ok(exposure.mean > src.mean + 5, `${exposure.mean} > ${src.mean}`);
  });

  test('gamma bends the mid-tones as out = in^(1/gamma) and leaves black and white', async () => {
    await golden('gamma-50', 'e_gamma:50');
    const up = await curve('e_gamma:50');
    assert.ok(Math.abs(up(128) - 255 * (128 / 255) ** (1 / 1.5)) < 3, `${up(128)}`);
    assert.ok(up(0) < 2 && up(255) > 253);
    const down = await curve('e_gamma:-40');
    assert.ok(Math.abs(down(128) - 255 * (128 / 255) ** (1 / 0.6)) < 3, `${down(128)}`);
  });

  test('highlights and shadows move their end of the tones and hardly the other', async () => {
    await golden('highlights--40', 'e_highlights:-40');
    await golden('shadows-30', 'e_shadows:30');
    const down = await curve('e_highlights:-60');
    assert.ok(down(230) < 230 - 20, `highlights pulled down: ${down(230)}`);
    assert.ok(Math.abs(down(30) - 30) < 3, `shadows kept: ${down(30)}`);
    const up = await curve('e_shadows:60');
    assert.ok(up(30) > 30 + 20, `shadows lifted: ${up(30)}`);
    assert.ok(Math.abs(up(230) - 230) < 3, `highlights kept: ${up(230)}`);
    const lift = await curve('e_highlights:60');
    assert.ok(lift(200) > 200 + 5 && Math.abs(lift(20) - 20) < 3);
    const sink = await curve('e_shadows:-60');
    assert.ok(sink(50) < 50 - 5 && Math.abs(sink(240) - 240) < 3);
  });

  test('saturation: -100 leaves no colour, +50 adds some', async () => {
    const grey = await golden('saturation--100', 'e_saturation:-100');
    assert.ok(chroma(grey) < 1.5, `chroma ${chroma(grey)}`);
    const vivid = await golden('saturation-30', 'e_saturation:30');
    assert.ok(chroma(vivid) > chroma(await sourceOnce()) * 1.1);
  });

  test('hue rotates the red quadrant towards yellow and green', async () => {
    const before = hueOf(region(await sourceOnce(), 100, 10, 50, 50));
    const after = hueOf(region(await golden('hue-90', 'e_hue:90'), 100, 10, 50, 50));
    const moved = (after - before + 360) % 360;
    assert.ok(moved > 50 && moved < 140, `hue ${before} -> ${after}`);
  });

  test('temperature and warmth raise red against blue; tint moves green against magenta', async () => {
    const ratio = (p: Pixels) => whole(p)[0] / whole(p)[2];
    const greenness = (p: Pixels) => whole(p)[1] / (whole(p)[0] + whole(p)[2]);
    const src = await sourceOnce();
    assert.ok(ratio(await golden('temperature-40', 'e_temperature:40')) > ratio(src) * 1.2);
    assert.ok(ratio(await golden('temperature--60', 'e_temperature:-60')) < ratio(src) * 0.8);
    const warm = await golden('warmth-30', 'e_warmth:30');
    assert.ok(ratio(warm) > ratio(src) * 1.1);
    assert.ok(Math.abs(lumaStats(warm).mean - lumaStats(src).mean) < 3, 'warmth keeps the brightness');
    assert.ok(greenness(await golden('tint-20', 'e_tint:20')) < greenness(src) * 0.95);
  });

  test('grayscale gives equal channels; invert maps x to 255 - x', async () => {
    const grey = await golden('grayscale', 'e_grayscale');
    assert.ok(chroma(grey) < 1, `chroma ${chroma(grey)}`);
    const inverted = await golden('invert', 'e_invert');
    const src = await sourceOnce();
    for (let i = 0; i < src.data.length; i++) assert.equal(inverted.data[i], 255 - src.data[i]);
  });

  test('blackwhite and threshold give only 0 and 255', async () => {
    const bw = await golden('blackwhite-50', 'e_blackwhite:50');
    assert.ok(bw.data.every((v) => v === 0 || v === 255));
    assert.ok(chroma(bw) === 0, 'and no colour');
    const share = bw.data.filter((v) => v === 255).length / bw.data.length;
    assert.ok(share > 0.2 && share < 0.8, `white share ${share}`);
    const t = await golden('threshold-128', 'e_threshold:128');
    assert.ok(t.data.every((v) => v === 0 || v === 255));
    assert.ok(chroma(t) > 50, 'each channel on its own keeps colour');
    const white = await rgb(await render('e_blackwhite:0'));
    assert.ok(white.data.every((v) => v === 255));
  });

  test('fade lifts the blacks and flattens the tones; vignette darkens the corners more than the centre', async () => {
    const src = await sourceOnce();
    const faded = await golden('fade-60', 'e_fade:60');
    assert.ok(lumaStats(faded).min > lumaStats(src).min + 25, `min ${lumaStats(faded).min}`);
    assert.ok(lumaStats(faded).sd < lumaStats(src).sd);
    const v = await golden('vignette-45', 'e_vignette:45');
    const ratio = (x: number, y: number) => regionLuma(v, x, y, 16, 16) / regionLuma(src, x, y, 16, 16);
    const corners = [ratio(2, 2), ratio(W - 18, 2), ratio(2, H - 40), ratio(W - 18, H - 40)];
    const centre = ratio(W / 2 - 8, H / 2 - 8);
    assert.ok(centre > 0.98, `centre kept: ${centre}`);
    for (const c of corners) assert.ok(c < 0.85, `corner darkened: ${c}`);
  });

  test('blur lowers edge energy (bare e_blur is e_blur:5); sharpen, unsharp mask and structure raise it', async () => {
    const src = edgeEnergy(await sourceOnce());
    const blurred = await golden('blur-5', 'e_blur:5');
    assert.ok(edgeEnergy(blurred) < src * 0.5);
    assert.deepEqual(await rgb(await render('e_blur')), blurred);
    const sharpened = await golden('sharpen', 'e_sharpen');
    assert.ok(edgeEnergy(sharpened) > src * 1.05, `${edgeEnergy(sharpened)} vs ${src}`);
    assert.deepEqual(await rgb(await render('e_sharpen:100')), sharpened);
    assert.ok(edgeEnergy(await golden('unsharp-mask-150', 'e_unsharp_mask:150')) > src * 1.05);
    assert.ok(edgeEnergy(await golden('structure-40', 'e_structure:40')) > src * 1.03);
  });

  test('median removes the one-pixel stripes', async () => {
    const src = await sourceOnce();
    const m = await golden('median-5', 'e_median:5');
    assert.ok(edgeEnergy(m) < edgeEnergy(src) * 0.7, `${edgeEnergy(m)} vs ${edgeEnergy(src)}`);
  });

  test('normalize and auto_enhance stretch a dull image to the full range', async () => {
    const dull = () => sharp(GOLDEN_SOURCE).resize(W, H).linear(0.5, 64);
    const before = lumaStats(await rgb(await render('', dull)));
    assert.ok(before.max - before.min < 140);
    for (const [name, chain] of [
      ['normalize', 'e_normalize'],
      ['auto-enhance', 'e_auto_enhance'],
    ]) {
      const png = await render(chain, dull);
      await assertGolden(`effect-${name}`, png);
      const after = lumaStats(await rgb(png));
      assert.ok(after.max - after.min > 200, `${chain}: ${after.min}-${after.max}`);
    }
  });

  test('improve: the outdoor profile adds more colour than indoor, indoor more light; blend scales it', async () => {
    const src = await sourceOnce();
    const auto = await golden('improve', 'e_improve');
    const indoor = await golden('improve-indoor', 'e_improve:indoor');
    const outdoor = await golden('improve-outdoor-80', 'e_improve:outdoor:80');
    assert.ok(chroma(outdoor) > chroma(indoor) && chroma(outdoor) > chroma(src) * 1.08);
    assert.ok(lumaStats(indoor).mean > lumaStats(src).mean + 5);
    assert.ok(edgeEnergy(auto) > edgeEnergy(src));
    const none = await rgb(await render('e_improve:outdoor:0'));
    assert.ok(Math.abs(chroma(none) - chroma(src)) < 0.5, 'blend 0 changes nothing');
  });

  test('linear computes a x in + b', async () => {
    const f = await curve('e_linear:1.2:10');
    for (const x of [0, 50, 100, 200, 240]) assert.ok(Math.abs(f(x) - Math.min(255, 1.2 * x + 10)) <= 1, `${x}`);
  });
});

describe('chains', () => {
  test('apply in the order written: brightness then contrast differs from contrast then brightness', async () => {
    const bc = await render('e_brightness:30,e_contrast:40');
    const cb = await render('e_contrast:40,e_brightness:30');
    const a = lumaStats(await rgb(bc));
    const b = lumaStats(await rgb(cb));
    assert.ok(Math.abs(a.mean - b.mean) > 5, `${a.mean} vs ${b.mean}`);
    await assertGolden(
      'effect-chain-brightness-contrast-saturation',
      await render('e_brightness:20,e_contrast:10,e_saturation:-30'),
    );
  });

  test('a folded chain matches the effects applied one render after another', async () => {
    for (const chain of ['e_brightness:10,e_contrast:20,e_saturation:-30', 'e_temperature:30,e_grayscale,e_tint:20']) {
      let step = await render('');
      for (const token of chain.split(',')) step = await render(token, () => sharp(step));
      const s = await similarity(await render(chain), step);
      assert.ok(s.meanDelta < 1.5 && s.ssim > 0.98, `${chain}: ${JSON.stringify(s)}`);
    }
  });

  test('an order sharp would not keep is kept, in a pass of its own', async () => {
    // sharp negates after it modulates; here brightness must act on the negative.
    const first = await rgb(await render('e_invert,e_brightness:30'));
    let step = await render('e_invert');
    step = await render('e_brightness:30', () => sharp(step));
    assert.deepEqual(first, await rgb(step));
    const reverse = await rgb(await render('e_brightness:30,e_invert'));
    assert.ok(Math.abs(lumaStats(first).mean - lumaStats(reverse).mean) > 10);
  });

  test('passes: none for a chain in sharp order, one per break of it', async () => {
    const passes = async (chain: string, c: EffectContext = ctx) => {
      passCount.value = 0;
      await (await applyEffects(scene(), parse(chain), c)).png().toBuffer();
      return passCount.value;
    };
    assert.equal(await passes('e_brightness:20,e_contrast:10,e_saturation:-30'), 0);
    assert.equal(await passes('e_median:3,e_blur:1,e_temperature:10,e_hue:20,e_sharpen,e_linear:1.1,e_invert'), 0);
    assert.equal(await passes('e_saturation:20,e_temperature:30'), 1);
    assert.equal(await passes('e_sharpen,e_sharpen'), 1);
    assert.equal(await passes('e_invert,e_invert'), 1);
    // With layers to come, operations sharp would run after the layers' composite get a pass first.
    assert.equal(await passes('e_brightness:20,e_invert', { ...ctx, compositeAfter: true }), 1);
    assert.equal(await passes('e_brightness:20,e_sharpen', { ...ctx, compositeAfter: true }), 0);
  });

  test('layers composited onto the result are not touched by the effects', async () => {
    const white = await sharp({ create: { width: 40, height: 40, channels: 3, background: '#ffffff' } })
      .png()
      .toBuffer();
    for (const chain of ['e_invert', 'e_vignette:100', 'e_normalize,e_gamma:100', 'e_shadows:-80']) {
      const img = await applyEffects(scene(), parse(chain), { width: W, height: H });
      const out = await rgb(
        await img
          .composite([{ input: white, left: 0, top: 0 }])
          .png()
          .toBuffer(),
      );
      assert.deepEqual(region(out, 0, 0, 40, 40), [255, 255, 255], chain);
    }
  });

  test('every pipeline made carries the time limit', async () => {
    const img = await applyEffects(scene(), parse('e_invert,e_brightness:10,e_vignette:30'), {
      ...ctx,
      timeoutSeconds: 7,
    });
    assert.equal((img as unknown as { options: { timeoutSeconds: number } }).options.timeoutSeconds, 7);
  });

  test('an image with alpha keeps it through every effect but blur', async () => {
    const LOGO = GOLDEN_SOURCE.replace('source.jpg', 'logo.png');
    const alpha = async (png: Buffer) => sharp(png).ensureAlpha().extractChannel(3).raw().toBuffer();
    const before = await alpha(await sharp(LOGO).png().toBuffer());
    for (const chain of [
      'e_vignette:80',
      'e_shadows:50,e_highlights:-50',
      'e_invert',
      'e_blackwhite:50',
      'e_gamma:-30',
    ]) {
      const out = await (await applyEffects(sharp(LOGO), parse(chain), { width: 200, height: 100 })).png().toBuffer();
      assert.deepEqual(await alpha(out), before, chain);
    }
  });
});

describe('bounds', () => {
  const tooStrong = (chain: string, size: [number, number], message: RegExp) =>
    assert.throws(
      () => checkEffects(parse(chain), { width: size[0], height: size[1] }),
      (err: any) => err.errorCode === 'EFFECT_TOO_STRONG' && err.status === 400 && message.test(err.message),
      chain,
    );

  test('blur, sharpen, unsharp mask and median are capped by the output size', () => {
    tooStrong(
      'e_blur:1000',
      [4000, 3000],
      /e_blur:1000 is stronger than a 4000x3000 rendition can show; at most e_blur:25 /,
    );
    tooStrong('e_blur:100', [100, 75], /at most e_blur:25 /);
    tooStrong('e_sharpen:1000', [4000, 3000], /at most e_sharpen:500 /);
    tooStrong('e_unsharp_mask:2000', [4000, 3000], /e_unsharp_mask:2000 .* at most e_unsharp_mask:1800 /);
    tooStrong('e_median:15', [4000, 3000], /at most e_median:3 /);
    tooStrong('e_brightness:10,e_blur:500', [4000, 3000], /e_blur:500/);
    checkEffects(parse('e_blur:25,e_sharpen:500,e_unsharp_mask:1800,e_median:3'), { width: 4000, height: 3000 });
    checkEffects(parse('e_blur:100,e_sharpen:2000,e_median:15'), { width: 400, height: 300 });
  });

  test(`more than ${MAX_EFFECTS} effects are refused`, () => {
    const many = Array.from({ length: MAX_EFFECTS + 1 }, () => 'e_brightness:1').join(',');
    assert.throws(
      () => checkEffects(parse(many), ctx),
      (err: any) =>
        err.errorCode === 'VALIDATION_FAILED' && /at most 20 effects in one transformation/.test(err.message),
    );
    checkEffects(parse(many.split(',').slice(1).join(',')), ctx);
  });

  test('a long chain of every kind renders within bounds and keeps the size', async () => {
    const chain =
      'e_auto_enhance,e_shadows:30,e_highlights:-20,e_warmth:25,e_structure:25,e_vignette:40,e_gamma:20,' +
      'e_invert,e_median:3,e_blur:1,e_hue:30,e_fade:20,e_blackwhite:40,e_sharpen,e_linear:0.9:5,e_normalize';
    checkEffects(parse(chain), ctx);
    const started = performance.now();
    const out = await sharp(await render(chain)).metadata();
    assert.deepEqual([out.width, out.height], [W, H]);
    assert.ok(performance.now() - started < 5000);
  });

  test('random chains of valid tokens parse, pass or hit a cap, and render at the output size', async () => {
    let seed = 20;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const pick = (p: Param): string => {
      if (p.kind === 'word') return p.values[Math.floor(random() * p.values.length)];
      const v = p.min + random() * (p.max - p.min);
      if (p.kind === 'number') return String(Math.round(v * 10) / 10);
      const whole = Math.round(v);
      return String(p.odd && whole % 2 === 0 ? (whole < p.max ? whole + 1 : whole - 1) : whole);
    };
    const names = Object.keys(EFFECTS);
    const small = { width: 96, height: 72 };
    for (let i = 0; i < 30; i++) {
      const tokens = Array.from({ length: 1 + Math.floor(random() * 6) }, () => {
        const name = names[Math.floor(random() * names.length)];
        const values = EFFECTS[name].params.filter((_, j) => j === 0 || random() < 0.5).map(pick);
        return [`e_${name}`, ...(EFFECTS[name].params[0]?.optional && random() < 0.3 ? [] : values)].join(':');
      });
      const effects = tokens.map(parseEffect);
      try {
        checkEffects(effects, small);
      } catch (err: any) {
        assert.equal(err.errorCode, 'EFFECT_TOO_STRONG', tokens.join(','));
        continue;
      }
      const out = await applyEffects(sharp(GOLDEN_SOURCE).resize(96, 72), effects, small);
      const meta = await sharp(await out.png().toBuffer()).metadata();
      assert.deepEqual([meta.width, meta.height, meta.channels], [96, 72, 3], tokens.join(','));
    }
  });
});
