// Text and image layers, called the way the transformation pipeline calls them: parseLayer on each
// layer's tokens, layerOverlays for the output's size, one sharp composite(). Each feature has a golden
// (test/fixtures/golden/expected/layer-*.png) and a property measured on the pixels that does not
// depend on it; then what an anonymous caller could send to hurt the service.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import sharp, { type OverlayOptions } from 'sharp';
import { AppError, errors } from '../src/errors.ts';
import {
  canonicalLayer,
  isLayerStart,
  LAYER_END,
  type LayerContext,
  layerOverlays,
  parseLayer,
} from '../src/media/transform/layers.ts';
import { escapeMarkup, FONTCONFIG_FILE, familyList } from '../src/media/transform/layers/text.ts';
import { assertGolden, GOLDEN_LOGO, GOLDEN_SOURCE } from './helpers/golden.ts';

const BASE = { width: 800, height: 600 };

function context(over: Partial<LayerContext> = {}): LayerContext & { asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    async loadImage(path) {
      asked.push(path);
      if (path === 'logo.png') return GOLDEN_LOGO;
      throw errors.validation(`transform: no image "${path}" in this workspace`);
    },
    maxPixels: 40_000_000,
    timeoutSeconds: 20,
    ...over,
  };
}

/** The layers (each a list of tokens, split as the parser splits a URL) drawn on `base`, as PNG. */
async function render(layers: string[][], base: string | Buffer = GOLDEN_SOURCE, ctx = context()): Promise<Buffer> {
  const meta = await sharp(base).metadata();
  const overlays = await layerOverlays(
    layers.map((t) => parseLayer(t)),
    { width: meta.width, height: meta.height },
    ctx,
  );
  return sharp(base).composite(overlays).png().toBuffer();
}

async function rgba(input: string | Buffer): Promise<{ data: Buffer; width: number; height: number }> {
  const { data, info } = await sharp(input).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
  return { data, width: info.width, height: info.height };
}

/** Pixels that differ from the base by more than `min` on some channel, with their bounding box and total difference. */
async function changes(actual: Buffer, base: string | Buffer = GOLDEN_SOURCE, min = 24) {
  const a = await rgba(actual);
  const b = await rgba(base);
  let count = 0;
  let total = 0;
  const box = { x0: Infinity, y0: Infinity, x1: -1, y1: -1 };
  for (let y = 0; y < a.height; y++) {
    for (let x = 0; x < a.width; x++) {
      const i = (y * a.width + x) * 4;
      let d = 0;
      for (let c = 0; c < 4; c++) d = Math.max(d, Math.abs(a.data[i + c] - b.data[i + c]));
      total +=
        Math.abs(a.data[i] - b.data[i]) +
        Math.abs(a.data[i + 1] - b.data[i + 1]) +
        Math.abs(a.data[i + 2] - b.data[i + 2]);
      if (d > min) {
        count++;
        box.x0 = Math.min(box.x0, x);
        box.y0 = Math.min(box.y0, y);
        box.x1 = Math.max(box.x1, x);
        box.y1 = Math.max(box.y1, y);
      }
    }
  }
  return { count, total, box };
}

async function countPixels(
  input: Buffer | string,
  match: (r: number, g: number, b: number) => boolean,
): Promise<number> {
  const { data } = await rgba(input);
  let n = 0;
  for (let i = 0; i < data.length; i += 4) if (match(data[i], data[i + 1], data[i + 2])) n++;
  return n;
}
const pureRed = (r: number, g: number, b: number) => r > 230 && g < 40 && b < 40;

function refused(fn: () => unknown, message: RegExp) {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof AppError, String(err));
    assert.equal(err.status, 400);
    assert.match(err.message, message);
    return true;
  });
}

async function rejected(p: Promise<unknown>, message: RegExp, code = 'VALIDATION_FAILED') {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof AppError, String(err));
    assert.equal(err.status, 400);
    assert.equal(err.errorCode, code);
    assert.match(err.message, message);
    return true;
  });
}

test('isLayerStart and LAYER_END: only l_text:/l_image: open a layer', () => {
  assert.equal(LAYER_END, 'fl_layer_apply');
  assert.ok(isLayerStart('l_text:arial_24:Hi'), `isLayerStart('l_text:arial_24:Hi')`);
  assert.ok(isLayerStart('l_image:logo.png'), `isLayerStart('l_image:logo.png')`);
  assert.ok(!isLayerStart('l_type:underlay'), `!isLayerStart('l_type:underlay')`);
  assert.ok(!isLayerStart('w_100'), `!isLayerStart('w_100')`);
});

test('text layers: the documented syntax parses, and canonicalises one way', () => {
  const t = parseLayer(['l_text:arial_24_bold_italic_center:Hello%20World', 'co_FF0000', 'tp_north-west']);
  assert.equal(t.kind, 'text');
  assert.ok(t.kind === 'text', `t.kind === 'text'`);
  assert.equal(t.font, 'arial');
  assert.equal(t.size, 24);
  assert.deepEqual([t.bold, t.italic, t.underline, t.align], [true, true, false, 'center']);
  assert.equal(t.text, 'Hello World');
  assert.equal(t.color, 'ff0000');
  assert.equal(t.position.placement, 'northwest');
  // Style and alignment are optional; co_rgb: and co_ are the same colour; tp_nw is tp_north-west.
  const same = parseLayer(['l_text:Arial_24_italic_bold:Hello%20World', 'tp_nw', 'co_rgb:ff0000']);
  assert.equal(canonicalLayer(same), canonicalLayer(t));
  assert.equal(canonicalLayer(t), 'l_text:arial_24_bold_italic_center:Hello%20World,co_ff0000,tp_nw');
  // A comma in a text arrives as %2C; a later token of the same option wins.
  const c = parseLayer([
    'l_text:times%20new%20roman_72_normal_left:a%2Cb%3Ac',
    'co_000',
    'co_00FF0080',
    'lx_10',
    'ly_20',
    'x_-5',
    'y_5',
    'a_-30',
    'o_50',
  ]);
  assert.ok(c.kind === 'text', `c.kind === 'text'`);
  assert.deepEqual(
    [c.font, c.align, c.text, c.color, c.colorAlpha, c.angle, c.opacity],
    ['times new roman', 'left', 'a,b:c', '00ff00', 128, -30, 50],
  );
  assert.deepEqual(c.position, { lx: 10, ly: 20, x: -5, y: 5 });
  // A colon in the text is the text's.
  const colon = parseLayer(['l_text:arial_20:12:30']);
  assert.ok(colon.kind === 'text' && colon.text === '12:30', `colon.kind === 'text' && colon.text === '12:30'`);
});

test('text layers: each wrong token is refused, naming it and what is allowed', () => {
  const cases: [string[], RegExp][] = [
    [['l_text:arial_24'], /l_text:\{font\}_\{size\}/],
    [['l_text:arial:Hi'], /needs a font size/],
    [['l_text:arial_big:Hi'], /"l_text:arial_big:Hi" needs a whole number from 1 to 500/],
    [['l_text:arial_0:Hi'], /out of range: 1 to 500/],
    [['l_text:arial_1000000:Hi'], /out of range: 1 to 500/],
    [['l_text:arial_24_heavy:Hi'], /"heavy": a style is bold, italic, underline or normal/],
    [['l_text:arial_24_left_bold:Hi'], /after the alignment/],
    [['l_text:ar%3Cial_24:Hi'], /font family of letters, digits/],
    [['l_text:arial_24:'], /no text to draw/],
    [['l_text:arial_24:%20%20'], /no text to draw/],
    [['l_text:arial_24:Hi', 'co_red'], /hex colour/],
    [['l_text:arial_24:Hi', 'co_rgb:12345'], /hex colour/],
    [['l_text:arial_24:Hi', 'tp_middle'], /is not a placement/],
    [['l_text:arial_24:Hi', 'a_400'], /out of range: -360 to 360/],
    [['l_text:arial_24:Hi', 'o_101'], /out of range: 0 to 100/],
    [['l_text:arial_24:Hi', 'x_1.5'], /whole number/],
    [['l_text:arial_24:Hi', 'lx_99999'], /out of range/],
    [['l_text:arial_24:Hi', 'e_blur'], /blend mode: e_screen, e_overlay, e_multiply or e_mask/],
    [['l_text:arial_24:Hi', 'lw_100'], /applies to image layers/],
    [['l_text:arial_24:Hi', 'w_100'], /"w_100" is not a layer option \(a text layer takes co_/],
    [['l_text:arial_24:Hi', 'fl_layer_apply', 'w_1'], /not a layer option/],
  ];
  for (const [tokens, message] of cases) refused(() => parseLayer(tokens), message);
});

test('image layers: the documented options parse; folders are %2F (or / from a preset)', () => {
  const l = parseLayer([
    'l_image:brand%2Flogos%2Flogo%20dark.png',
    'l_type:overlay',
    'lw_200',
    'lc_fill',
    'lar_16:9',
    'lbr_20',
    'lflip_hv',
    'lzoom_1.5',
    'le_sharpen:120',
    'le_saturation:30',
    'le_grayscale',
    'le_improve:outdoor',
    'lr_45',
    'ip_south-east',
    'x_10',
    'y_20',
    'o_70',
    'e_screen',
  ]);
  assert.ok(l.kind === 'image', `l.kind === 'image'`);
  assert.equal(l.path, 'brand/logos/logo dark.png');
  assert.deepEqual(
    [l.width, l.height, l.fit, l.radius, l.flip, l.zoom, l.angle, l.opacity, l.blend],
    [200, undefined, 'fill', 20, 'hv', 1.5, 45, 70, 'screen'],
  );
  assert.ok(Math.abs((l.aspect ?? 0) - 16 / 9) < 1e-9, `Math.abs((l.aspect ?? 0) - 16 / 9) < 1e-9`);
  // Effects apply in one fixed order whatever order they are written in.
  assert.deepEqual(
    l.effects.map((e) => e.name),
    ['improve', 'saturation', 'grayscale', 'sharpen'],
  );
  assert.equal(
    canonicalLayer(l),
    'l_image:brand%2Flogos%2Flogo%20dark.png,lw_200,lc_fill,lar_16:9,lbr_20,lflip_hv,lzoom_1.5,lr_45,le_improve:outdoor,le_saturation:30,le_grayscale,le_sharpen:120,tp_se,x_10,y_20,o_70,e_screen',
  );
  assert.equal(
    canonicalLayer(
      parseLayer([
        'l_image:brand/logos/logo%20dark.png',
        'lw_200',
        'lc_fill',
        'lar_16%3A9',
        'lbr_20',
        'lflip_hv',
        'lzoom_1.5',
        'lr_45',
        'le_improve:outdoor',
        'le_saturation:30',
        'le_grayscale',
        'le_sharpen:120',
        'tp_se',
        'x_10',
        'y_20',
        'o_70',
        'e_screen',
      ]),
    ),
    canonicalLayer(l),
  );
  const u = parseLayer(['l_image:logo.png', 'l_type:underlay']);
  assert.ok(u.kind === 'image' && u.underlay, `u.kind === 'image' && u.underlay`);
  assert.equal(canonicalLayer(parseLayer(['l_image:logo.png', 'l_type:overlay', 'o_100'])), 'l_image:logo.png');
});

test('image layers: each wrong token is refused, naming it and what is allowed', () => {
  const cases: [string[], RegExp][] = [
    [['l_image:'], /needs the path of an image/],
    [['l_image:..%2Fother-workspace%2Flogo.png'], /without empty, "\." or "\.\." folders/],
    [['l_image:brand%2F..%2F..%2Flogo.png'], /"\.\." folders/],
    [['l_image:brand/../logo.png'], /"\.\." folders/],
    [['l_image:%2Fetc%2Fpasswd'], /relative to the workspace/],
    [['l_image:a%2F%2Fb.png'], /empty/],
    [['l_image:https:%2F%2Fevil.example%2Fx.png'], /empty/],
    [['l_image:a%5Cb.png'], /backslash/],
    [['l_image:logo%00.png'], /control character/],
    [['l_image:logo%0A.png'], /control character/],
    [['l_image:logo%E0%A4%A.png'], /malformed percent-escape/],
    [[`l_image:${'a'.repeat(2000)}`], /longer than 1024/],
    [['l_image:logo.png', 'l_type:middle'], /l_type:overlay or l_type:underlay/],
    [['l_image:logo.png', 'lw_0'], /out of range: 1 to 10000/],
    [['l_image:logo.png', 'lh_-5'], /out of range: 1 to 10000/],
    [['l_image:logo.png', 'lc_pad'], /lc_crop, lc_fill, lc_fit, lc_resize, lc_scale/],
    [['l_image:logo.png', 'lc_fill'], /needs both lw_ and lh_/],
    [['l_image:logo.png', 'lar_0:9'], /ratio w:h/],
    [['l_image:logo.png', 'lar_16:9', 'lw_10', 'lh_10'], /at most one of lw_ and lh_/],
    [['l_image:logo.png', 'lflip_x'], /lflip_h, lflip_v or lflip_hv/],
    [['l_image:logo.png', 'lzoom_0'], /out of range: 0.1 to 10/],
    [['l_image:logo.png', 'lzoom_100'], /out of range/],
    [['l_image:logo.png', 'le_blur:3'], /not a layer effect/],
    [['l_image:logo.png', 'le_saturation'], /needs a level/],
    [['l_image:logo.png', 'le_contrast:200'], /out of range: -100 to 100/],
    [['l_image:logo.png', 'le_sharpen:0'], /out of range: 1 to 2000/],
    [['l_image:logo.png', 'le_improve:night'], /le_improve:indoor or le_improve:outdoor/],
    [['l_image:logo.png', 'le_grayscale:5'], /takes no value/],
    [['l_image:logo.png', 'lr_720'], /out of range: -360 to 360/],
    [['l_image:logo.png', 'a_45'], /an image layer rotates with lr_/],
    [['l_image:logo.png', 'co_FF0000'], /applies to text layers/],
    [['l_image:logo.png', 'w_100'], /inside a layer write lw_/],
    [['l_image:logo.png', 'l_type:underlay', 'e_multiply'], /applies to overlays/],
    [['l_image:logo.png', 'q_80'], /not a layer option/],
    [['l_video:clip.mp4'], /does not open a layer/],
  ];
  for (const [tokens, message] of cases) refused(() => parseLayer(tokens), message);
});

test('golden + property: text at tp_north changes pixels only along the top', async () => {
  const out = await render([['l_text:arial_48_bold_center:Title', 'tp_north', 'co_FFFFFF']]);
  await assertGolden('layer-text-north', out);
  const { count, box } = await changes(out);
  assert.ok(count > 500, `the text drew ${count} pixels`);
  assert.ok(box.y0 >= 0 && box.y1 < 60, `changed rows ${box.y0}-${box.y1} are within the top 60`);
  // Centred horizontally.
  assert.ok(Math.abs((box.x0 + box.x1) / 2 - 400) < 10, `centre x ${(box.x0 + box.x1) / 2}`);
});

test('golden + property: co_FF0000 adds red pixels; styles, alignment and a line feed render', async () => {
  const out = await render([
    ['l_text:arial_40_bold_italic_underline_right:Sale%0Atoday%20only', 'co_FF0000', 'tp_north-east', 'x_20', 'y_20'],
  ]);
  await assertGolden('layer-text-styles', out);
  const before = await countPixels(GOLDEN_SOURCE, pureRed);
  const after = await countPixels(out, pureRed);
  assert.ok(after - before > 1000, `red pixels ${before} -> ${after}`);
  const { box } = await changes(out);
  // Anchored top-right, 20 px in from each edge, two lines tall.
  assert.ok(box.x1 <= 780 && box.x1 > 760, `right edge ${box.x1}`);
  assert.ok(box.y0 >= 20 && box.y0 < 35 && box.y1 > 100, `rows ${box.y0}-${box.y1}`);
});

test('golden + property: lx_/ly_ put the layer centre there; a_ rotates text', async () => {
  const out = await render([['l_image:logo.png', 'lx_300', 'ly_250']]);
  await assertGolden('layer-image-lxly', out);
  const { box } = await changes(out);
  assert.ok(Math.abs((box.x0 + box.x1) / 2 - 300) <= 3, `centre x ${(box.x0 + box.x1) / 2}`);
  assert.ok(Math.abs((box.y0 + box.y1) / 2 - 250) <= 3, `centre y ${(box.y0 + box.y1) / 2}`);

  const text = await render([['l_text:arial_60_bold:DIAGONAL', 'a_45', 'lx_400', 'ly_300', 'co_FFFFFF']]);
  await assertGolden('layer-text-rotated', text);
  const t = await changes(text);
  const w = t.box.x1 - t.box.x0;
  const h = t.box.y1 - t.box.y0;
  // At 45° the text's box is about as tall as it is wide, and centred on (400, 300).
  assert.ok(Math.abs(w - h) < 40 && h > 200, `box ${w}x${h}`);
  // The ink sits inside the text's box with the glyphs' side bearings around it: the box is centred
  // to the pixel, the ink within a few.
  const centre = [(t.box.x0 + t.box.x1) / 2, (t.box.y0 + t.box.y1) / 2];
  assert.ok(Math.abs(centre[0] - 400) <= 10 && Math.abs(centre[1] - 300) <= 10, `ink centre ${centre}`);
  const [o] = await layerOverlays(
    [parseLayer(['l_text:arial_60_bold:DIAGONAL', 'a_45', 'lx_400', 'ly_300'])],
    BASE,
    context(),
  );
  const r = o as { left: number; top: number; raw: { width: number; height: number } };
  assert.ok(
    Math.abs(r.left + r.raw.width / 2 - 400) <= 1 && Math.abs(r.top + r.raw.height / 2 - 300) <= 1,
    JSON.stringify(r),
  );
});

test('golden + property: o_50 halves the logo contribution', async () => {
  const full = await render([['l_image:logo.png', 'ip_south-east', 'lw_300']]);
  const half = await render([['l_image:logo.png', 'ip_south-east', 'lw_300', 'o_50']]);
  await assertGolden('layer-image-southeast', full);
  await assertGolden('layer-image-opacity', half);
  const f = await changes(full, GOLDEN_SOURCE, 0);
  const h = await changes(half, GOLDEN_SOURCE, 0);
  const ratio = h.total / f.total;
  assert.ok(ratio > 0.45 && ratio < 0.55, `half / full = ${ratio.toFixed(3)}`);
  // lw_300 keeps the 2:1 logo's proportions, and ip_south-east puts it in the corner.
  assert.ok(f.box.x1 === 799 && f.box.y1 === 599 && f.box.x0 >= 500 && f.box.y0 >= 450, JSON.stringify(f.box));
});

test('golden + property: an underlay is hidden where the base is opaque and shows where it is transparent', async () => {
  const opaque = await render([['l_image:logo.png', 'l_type:underlay', 'lw_800', 'lh_600']]);
  assert.equal((await changes(opaque, GOLDEN_SOURCE, 0)).count, 0);

  const clear = await sharp({ create: { width: 400, height: 300, channels: 4, background: '#00000000' } })
    .composite([{ input: await sharp(GOLDEN_LOGO).resize(200, 100).toBuffer(), left: 0, top: 0 }])
    .png()
    .toBuffer();
  const under = await render([['l_image:logo.png', 'l_type:underlay', 'lw_400', 'lh_200', 'ip_south']], clear);
  await assertGolden('layer-image-underlay', under);
  const px = await rgba(under);
  const logo = await rgba(await sharp(GOLDEN_LOGO).resize(400, 200).png().toBuffer());
  // Where the base is clear (the bottom), the underlay's pixels are the result's.
  const at = (img: { data: Buffer; width: number }, x: number, y: number) => [
    ...img.data.subarray((y * img.width + x) * 4, (y * img.width + x) * 4 + 4),
  ];
  assert.deepEqual(at(px, 200, 250), at(logo, 200, 150));
  // Where the base is opaque (its logo, top-left), it stays.
  assert.deepEqual(at(px, 100, 50), at(await rgba(clear), 100, 50));
});

test('golden: layer sizing, effects, rounded corners, flip, zoom, rotation and blend modes', async () => {
  const out = await render([
    ['l_image:logo.png', 'lw_300', 'lh_300', 'lc_fill', 'lbr_60', 'le_grayscale', 'ip_north-west', 'x_20', 'y_20'],
    ['l_image:logo.png', 'lw_240', 'lflip_h', 'lzoom_2', 'le_contrast:50', 'lr_-20', 'ip_north-east', 'x_20', 'y_20'],
    ['l_image:logo.png', 'lw_400', 'lar_2:1', 'e_multiply', 'ip_south-west'],
    ['l_image:logo.png', 'lw_300', 'e_screen', 'o_80', 'lx_600', 'ly_450'],
  ]);
  await assertGolden('layer-image-options', out);
  const masked = await render([['l_image:logo.png', 'lw_600', 'lh_400', 'e_mask', 'ip_center']]);
  await assertGolden('layer-image-mask', masked);
  const m = await rgba(masked);
  // Outside the mask the output is transparent; inside the logo's opaque middle it is the source.
  assert.equal(m.data[(10 * m.width + 10) * 4 + 3], 0);
  assert.equal(m.data[(300 * m.width + 400) * 4 + 3], 255);
});

test('golden: the documented combination of a text and an image layer', async () => {
  const out = await render([
    ['l_text:arial_32_bold_center:NEW', 'tp_north', 'co_FF0000'],
    ['l_image:logo.png', 'ip_south-east', 'lw_150'],
  ]);
  await assertGolden('layer-combined', out);
});

test('a layer larger than the output is cut to it; one wholly outside draws nothing', async () => {
  const big = await render([['l_image:logo.png', 'lw_3000']]);
  const meta = await sharp(big).metadata();
  assert.deepEqual([meta.width, meta.height], [800, 600]);
  const covered = (await changes(big)).count;
  assert.ok(covered > 400_000, `${covered} pixels changed`);
  const overlays = await layerOverlays([parseLayer(['l_image:logo.png', 'x_5000', 'y_10'])], BASE, context());
  assert.deepEqual(overlays, []);
  const partly = await layerOverlays([parseLayer(['l_image:logo.png', 'x_-150', 'y_-50'])], BASE, context());
  const o = partly[0] as OverlayOptions & { raw: { width: number; height: number } };
  assert.deepEqual([o.left, o.top, o.raw.width, o.raw.height], [0, 0, 50, 50]);
});

test('attacker: Pango markup in a text is drawn literally', async () => {
  assert.equal(
    escapeMarkup(`<span foreground="red">&'</span>`),
    '&#60;span foreground=&#34;red&#34;&#62;&#38;&#39;&#60;/span&#62;',
  );
  const injected = encodeURIComponent('<span foreground="#ff0000" size="100000">X</span>');
  const [o] = await layerOverlays([parseLayer([`l_text:arial_32:${injected}`, 'tp_north'])], BASE, context());
  const [x] = await layerOverlays([parseLayer(['l_text:arial_32:X', 'tp_north'])], BASE, context());
  const width = (o as { raw: { width: number } }).raw.width;
  assert.ok(width > 10 * (x as { raw: { width: number } }).raw.width, `the tags are drawn: ${width} px wide`);
  const out = await render([[`l_text:arial_32:${injected}`, 'tp_north']]);
  assert.equal(await countPixels(out, pureRed), await countPixels(GOLDEN_SOURCE, pureRed));
  // An unbalanced tag or a lone ampersand is text too, not a libvips error.
  await render([['l_text:arial_20:a%20%3Cb%20%26%20c', 'tp_south']]);
});

test('attacker: huge texts, sizes, control characters and malformed escapes are 400s, before any drawing', async () => {
  refused(() => parseLayer([`l_text:arial_24:${'A'.repeat(50_000)}`]), /longer than 500 characters/);
  refused(() => parseLayer([`l_text:arial_24:${'%41'.repeat(501)}`]), /longer than 500 characters/);
  refused(() => parseLayer(['l_text:arial_1000000:Hi']), /out of range: 1 to 500/);
  for (const c of ['%00', '%07', '%0D', '%1B', '%7F', '%C2%85']) {
    refused(() => parseLayer([`l_text:arial_24:a${c}b`]), /control character/);
  }
  refused(() => parseLayer(['l_text:arial_24:100%']), /malformed percent-escape/);
  refused(() => parseLayer(['l_text:arial_24:%ZZ']), /malformed percent-escape/);
  refused(() => parseLayer(['l_text:arial_24:%FF%FE']), /malformed percent-escape/);

  // Within the parser's bounds but not within the output: refused at drawing, quickly.
  const started = Date.now();
  await rejected(
    layerOverlays([parseLayer(['l_text:arial_500:Hi'])], { width: 300, height: 200 }, context()),
    /font size of 500 px, larger than the output's height of 200 px/,
  );
  await rejected(
    layerOverlays([parseLayer([`l_text:arial_250:${'W'.repeat(500)}`])], BASE, context()),
    /too long: wrapped at the output's width \(800 px\) it would be about \d+ px tall/,
  );
  assert.ok(Date.now() - started < 5000, `${Date.now() - started} ms`);
  // Nothing visible, or combining marks stacked to the sky.
  await rejected(layerOverlays([parseLayer(['l_text:arial_24:%E2%80%8B'])], BASE, context()), /no visible character/);
  await rejected(
    layerOverlays([parseLayer([`l_text:arial_24:a${'%CC%81'.repeat(499)}`])], BASE, context()),
    /too long/,
  );
  await rejected(
    layerOverlays([parseLayer([`l_text:arial_200:a${'%CC%81'.repeat(499)}`])], BASE, context()),
    /too long/,
  );
  // 500 characters at a size that fits: drawn, wrapped at the output's width.
  const [o] = await layerOverlays([parseLayer([`l_text:arial_12:${'word '.repeat(100)}`])], BASE, context());
  const wrapped = (o as { raw: { width: number } }).raw.width;
  assert.ok(wrapped <= 800, `${wrapped} px wide`);
});

test('attacker: a layer path of another workspace is looked up in this one; 50 layers are refused unread', async () => {
  const ctx = context();
  await rejected(
    layerOverlays([parseLayer(['l_image:ws_other%2Flogo.png'])], BASE, ctx),
    /no image "ws_other\/logo.png"/,
  );
  assert.deepEqual(ctx.asked, ['ws_other/logo.png']);

  const many = Array.from({ length: 50 }, () => parseLayer(['l_image:logo.png']));
  const ctx2 = context();
  await rejected(layerOverlays(many, BASE, ctx2), /50 layers; a transformation may have at most 10/);
  assert.deepEqual(ctx2.asked, []);
  assert.equal((await layerOverlays(many.slice(0, 10), BASE, context())).length, 10);
});

// sharp rasterises an SVG at the size it is resized to (its shrink-on-load), which this keeps true.
test('an SVG layer is drawn at the size asked for, not enlarged from its own', async () => {
  const svg = Buffer.from(
    '<svg xmlns="http://www.w3.org/2000/svg" width="20" height="20"><circle cx="10" cy="10" r="9" fill="#ff0000"/></svg>',
  );
  const ctx = context({ loadImage: async () => svg });
  const [o] = await layerOverlays([parseLayer(['l_image:dot.svg', 'lw_400', 'ip_nw'])], BASE, ctx);
  const r = o as { input: Buffer; raw: { width: number; height: number } };
  assert.deepEqual([r.raw.width, r.raw.height], [400, 400]);
  // A crisp edge: along the middle row, alpha goes from 0 to 255 within a few pixels.
  const row = 200 * 400 * 4;
  const alphas = Array.from({ length: 60 }, (_, i) => r.input[row + (i + 5) * 4 + 3]);
  const ramp = alphas.filter((a) => a > 10 && a < 245).length;
  assert.ok(ramp <= 3, `edge ramp of ${ramp} px: ${alphas.join(',')}`);
});

test('attacker: an undecodable layer, or one above the pixel limit, is a 400', async () => {
  const junk = context({ loadImage: async () => Buffer.from('not an image at all') });
  await rejected(
    layerOverlays([parseLayer(['l_image:logo.png'])], BASE, junk),
    /layer image "logo.png" could not be decoded/,
    'TRANSFORM_FAILED',
  );
  await rejected(
    layerOverlays([parseLayer(['l_image:logo.png'])], BASE, context({ maxPixels: 10_000 })),
    /larger than the pixel limit/,
    'IMAGE_TOO_LARGE',
  );
  await rejected(
    layerOverlays([parseLayer(['l_image:logo.png', 'lw_10000', 'lh_10000'])], BASE, context()),
    /would be 10000x10000 px, more than the limit/,
    'IMAGE_TOO_LARGE',
  );
});

test('fonts: the family asked for first, metric-compatible substitutes, then the bundled Arimo', () => {
  assert.deepEqual(familyList('arial'), ['arial', 'Liberation Sans', 'Arimo']);
  assert.deepEqual(familyList('times new roman'), ['times new roman', 'Liberation Serif', 'DejaVu Serif', 'Arimo']);
  assert.deepEqual(familyList('sans-serif'), ['Arimo']);
  assert.deepEqual(familyList('arimo'), ['Arimo']);
  assert.deepEqual(familyList('comic neue'), ['comic neue', 'Arimo']);
});

test('fonts: an unknown family draws with the bundled font, the same as asking for it', async () => {
  const draw = async (font: string) => {
    const [o] = await layerOverlays([parseLayer([`l_text:${font}_40:Hamburgefonstiv`])], BASE, context());
    return o.input as Buffer;
  };
  const arimo = await draw('arimo');
  assert.ok(arimo.equals(await draw('no%20such%20family')), 'an unknown family is Arimo');
  assert.ok(arimo.equals(await draw('sans-serif')), 'sans-serif is Arimo');
});

test('fonts: a server without any font installed draws the same text, to the byte', async () => {
  // The same configuration, with no system fonts and none of the system's rendering settings.
  const dir = mkdtempSync(join(tmpdir(), 'stowage-fonts-'));
  const bare = join(dir, 'fonts.conf');
  writeFileSync(bare, readFileSync(FONTCONFIG_FILE, 'utf8').replace('/etc/fonts/fonts.conf', join(dir, 'none.conf')));
  const tokens = ['l_text:arial_40_bold_italic:Hamburgefonstiv%0Aand%20more', 'a_10'];
  const digest = async () => {
    const [o] = await layerOverlays([parseLayer(tokens)], BASE, context());
    return createHash('sha256')
      .update(o.input as Buffer)
      .digest('hex');
  };
  const script = `
    import { createHash } from 'node:crypto';
    import { layerOverlays, parseLayer } from './src/media/transform/layers.ts';
    const [o] = await layerOverlays([parseLayer(${JSON.stringify(tokens)})], { width: 800, height: 600 }, { loadImage: async () => Buffer.alloc(0), maxPixels: 40e6 });
    console.log(createHash('sha256').update(o.input).digest('hex'));`;
  const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: join(import.meta.dirname, '..'),
    env: { ...process.env, FONTCONFIG_FILE: bare },
    encoding: 'utf8',
    timeout: 60_000,
  });
  assert.equal(child.status, 0, child.stderr);
  assert.equal(child.stdout.trim(), await digest());
});

test('every layer the hosted documentation shows parses and draws', async () => {
  // The transformation part of each layer URL in the hosted docs (essentials/layers, text-layers,
  // image-layers, and the recipes page's preset, whose path has a literal / and a space).
  const documented = [
    'l_text:arial_24_bold_center:Hello%20World,fl_layer_apply',
    'l_text:arial_32_bold_center:Sale,co_FF0000,fl_layer_apply',
    'l_text:arial_48_bold_center:NEW,co_FFFFFF,fl_layer_apply',
    'l_text:arial_24_bold_center:Watermark,x_100,y_50,fl_layer_apply',
    'l_text:arial_32_bold_center:Title,tp_north,co_FFFFFF,fl_layer_apply',
    'l_text:arial_24_normal_left:Copyright,tp_south-east,co_FFFFFF,fl_layer_apply',
    'l_text:arial_32_bold_center:DIAGONAL,a_45,tp_center,co_FF0000,fl_layer_apply',
    'l_text:arial_24_bold_italic_center:Styled%20Text,co_0000FF,fl_layer_apply',
    'l_text:arial_120_bold_center:PORSCHE,tp_north-west,fl_layer_apply',
    'l_text:arial_100_bold_center:LIMITED%20EDITION,co_rgb:FFD700,tp_south,fl_layer_apply',
    'l_text:arial_100_bold_center:FIXED,lx_200,ly_200,fl_layer_apply',
    'l_text:arial_72_bold:LIMITED%20EDITION,tp_north-west,fl_layer_apply,l_text:arial_44_bold:By%20Autorender,tp_south,fl_layer_apply',
    'l_image:logo.png,fl_layer_apply',
    'l_image:background.jpg,l_type:underlay,fl_layer_apply',
    'l_image:watermark.png,l_type:overlay,fl_layer_apply',
    'l_image:logo.png,lw_200,lh_100,fl_layer_apply',
    'l_image:badge.png,x_50,y_50,fl_layer_apply',
    'l_image:logo.png,ip_south-east,lw_150,fl_layer_apply',
    'l_image:watermark.png,o_50,ip_center,fl_layer_apply',
    'l_image:badge.png,lr_45,ip_center,fl_layer_apply',
    'l_image:overlay.jpg,lc_fill,lw_400,lh_300,fl_layer_apply',
    'l_image:overlay.jpg,lar_16:9,lw_800,fl_layer_apply',
    'l_image:badge.png,lbr_20,lw_200,lh_200,fl_layer_apply',
    'l_image:logo.png,lflip_h,ip_center,fl_layer_apply',
    'l_image:icon.png,lzoom_1.5,ip_center,fl_layer_apply',
    'l_image:overlay.jpg,le_saturation:30,le_sharpen:120,lw_400,fl_layer_apply',
    'l_image:overlay.jpg,e_screen,o_70,ip_center,fl_layer_apply',
    'l_image:logo.svg,lw_300,tp_south-east,fl_layer_apply',
    'l_image:logo.svg,lw_200,lx_150,ly_150,fl_layer_apply',
    'l_text:arial_32_bold_center:NEW,tp_north,co_FF0000,fl_layer_apply,l_image:logo.png,ip_south-east,lw_150,fl_layer_apply',
    'l_image:Rolex_Night/m126333-0010 copy2.webp,l_type:overlay,x_0,y_0,fl_layer_apply',
  ];
  const any = context({ loadImage: async () => GOLDEN_LOGO });
  for (const chain of documented) {
    const layers: string[][] = [];
    let current: string[] = [];
    for (const token of chain.split(',')) {
      if (token === 'fl_layer_apply') {
        layers.push(current);
        current = [];
      } else current.push(token);
    }
    const specs = layers.map((tokens) => parseLayer(tokens));
    const overlays = await layerOverlays(specs, BASE, any);
    assert.ok(overlays.length >= 1 || specs.some((s) => s.kind === 'image' && s.underlay), chain);
  }
});
