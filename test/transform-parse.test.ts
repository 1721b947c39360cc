// The transformation grammar (docs/transformations.md), without HTTP: every token the core owns,
// valid and invalid with the message it gets; chains across segments; duplicates; percent-encoding;
// which path segments are tokens; canonical cache keys; client hints; and the plan's geometry and
// bounds.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AppError } from '../src/errors.ts';
import { canonical, canonicalName } from '../src/media/transform/canonical.ts';
import { bucket, clientHints, withHints } from '../src/media/transform/client-hints.ts';
import { parseTransform } from '../src/media/transform/parse.ts';
import { planRendition } from '../src/media/transform/plan.ts';
import type { TransformSpec } from '../src/media/transform/spec.ts';
import { isTokenSegment, tokenSegmentCount } from '../src/media/transform/tokens.ts';

const refusal = (text: string): { code: string; message: string } => {
  try {
    parseTransform(text);
  } catch (err) {
    assert.ok(err instanceof AppError, `${text}: ${err}`);
    assert.equal(err.status, 400, text);
    return { code: err.errorCode, message: err.message };
  }
  assert.fail(`${text} was accepted`);
};

describe('transformation grammar', () => {
  test('every token the core owns, read as the docs write it', () => {
    const cases: [string, TransformSpec][] = [
      ['w_720', { width: 720 }],
      ['h_540', { height: 540 }],
      ['w_0.5', { width: { fraction: 0.5 } }],
      ['h_0.75', { height: { fraction: 0.75 } }],
      ['w_1.5', { width: { fraction: 1.5 } }],
      ['ar_16:9', { aspectRatio: [16, 9] }],
      ['ar_1.91:1', { aspectRatio: [1.91, 1] }],
      ['c_fill', { crop: 'fill' }],
      ['c_fit', { crop: 'fit' }],
      ['c_crop', { crop: 'crop' }],
      ['c_scale', { crop: 'scale' }],
      ['c_pad', { crop: 'pad' }],
      ['p_tl', { position: 'tl' }],
      ['p_top-left', { position: 'tl' }],
      ['p_center', { position: 'c' }],
      ['p_entropy', { position: 'entropy' }],
      ['p_attention', { position: 'attention' }],
      ['p_face', { position: 'face' }],
      ['fo_face', { position: 'face' }],
      ['ps_120:80', { point: { x: 120, y: 80, relative: false } }],
      ['ps_120,80', { point: { x: 120, y: 80, relative: false } }],
      ['ps_0.25:0.5', { point: { x: 0.25, y: 0.5, relative: true } }],
      ['z_1.5', { zoom: 1.5 }],
      ['z_2.0', { zoom: 2 }],
      ['z_1', {}],
      ['dpr_2', { dpr: 2 }],
      ['dpr_1.5', { dpr: 1.5 }],
      ['dpr_auto', { dpr: 'auto' }],
      ['f_auto', { format: 'auto' }],
      ['f_jpeg', { format: 'jpg' }],
      ['f_jpg', { format: 'jpg' }],
      ['f_tiff', { format: 'tiff' }],
      ['f_avif', { format: 'avif' }],
      ['q_80', { quality: 80 }],
      ['q_auto', { quality: 'auto' }],
      ['r_90', { rotate: 90 }],
      ['r_450', { rotate: 90 }],
      ['r_-45', { rotate: 315 }],
      ['r_23.5', { rotate: 23.5 }],
      ['r_360', {}],
      ['r_auto', {}],
      ['r_portrait', { rotate: 'portrait' }],
      ['r_landscape', { rotate: 'landscape' }],
      ['flip_h', { flip: 'h' }],
      ['flip_vh', { flip: 'hv' }],
      ['bg_white', { background: '#ffffff' }],
      ['bg_RebeccaPurple', { background: '#663399' }],
      ['bg_fff', { background: '#ffffff' }],
      ['bg_FF0000', { background: '#ff0000' }],
      ['bg_rgb:ff000080', { background: '#ff000080' }],
      ['bg_transparent', { background: '#00000000' }],
      ['br_20', { radius: 20 }],
      ['br_max', { radius: 'max' }],
      ['br_0', {}],
      ['el_1', { enlarge: true }],
      ['el_0', {}],
    ];
    for (const [text, spec] of cases) assert.deepEqual(parseTransform(text), spec, text);
  });

  test('every malformed token is a 400 that names it and says what is allowed', () => {
    const cases: [string, RegExp][] = [
      ['w_abc', /"w_abc" needs a whole number from 1 to 10000/],
      ['w_0', /"w_0" needs a whole number from 1 to 10000/],
      ['w_10001', /from 1 to 10000/],
      ['w_0.0', /"w_0.0" needs a fraction of the source from 0.01 to 4/],
      ['w_5.5', /fraction of the source/],
      ['ar_16', /"ar_16" needs a ratio like ar_16:9/],
      ['ar_0:9', /needs a ratio/],
      ['c_stretch', /must be c_fill, c_fit, c_crop, c_scale or c_pad/],
      ['p_middle', /must be p_c, .* p_face/],
      ['fo_car', /"fo_car" asks for object focus, which Stowage does not support/],
      ['ps_12', /needs a point of the source: ps_\{x\}:\{y\}/],
      ['ps_0.5:3', /needs a point/],
      ['z_6', /"z_6" needs a zoom factor from 1 to 5/],
      ['z_0.5', /zoom factor from 1 to 5/],
      ['dpr_5', /"dpr_5" needs a device pixel ratio from 1 to 4/],
      ['f_bmp', /must be f_auto, f_webp, f_avif, f_jpg \(f_jpeg\), f_png, f_gif or f_tiff/],
      ['f_toString', /must be f_auto/],
      ['p_constructor', /must be p_c/],
      ['q_0', /"q_0" needs a whole number from 1 to 100/],
      ['r_sideways', /needs degrees \(r_90, r_-45, r_23.5\), r_auto, r_portrait or r_landscape/],
      ['flip_x', /must be flip_h, flip_v or flip_hv/],
      ['bg_notacolour', /needs a hex colour .* or a CSS colour name \(bg_white\)/],
      ['bg_12345', /needs a hex colour/],
      ['br_-3', /needs a whole number from 0 to 10000/],
      ['el_2', /must be el_0 or el_1/],
      ['zz_1', /"zz_1" is not a known transformation \(known: w_ h_/],
      ['hello', /"hello" is not a transformation token/],
      ['w_100,,h_100', /an empty token/],
      ['w_100/', /an empty token/],
      ['w_%zz', /"w_%zz" is not valid percent-encoding/],
      ['fl_layer_apply', /closes no layer/],
      ['l_text:Arial_20:hi', /"l_text:Arial_20:hi" opens a layer that no fl_layer_apply closes/],
      ['', /transform is empty/],
    ];
    for (const [text, message] of cases) {
      const r = refusal(text);
      assert.equal(r.code, 'VALIDATION_FAILED', text);
      assert.match(r.message, message, text);
    }
  });

  test('e_ tokens go to the effects module in the order written, decoded', () => {
    // The effects module decides what it accepts; its refusal names the decoded token.
    const r = refusal('w_100,e_no%20such');
    assert.match(r.message, /"e_no such"/);
  });

  test('duplicates are canonicalised: the later one wins', () => {
    assert.deepEqual(parseTransform('w_100,w_200'), { width: 200 });
    assert.deepEqual(parseTransform('p_face,ps_10:20'), { point: { x: 10, y: 20, relative: false } });
    assert.deepEqual(parseTransform('ps_10:20,p_tl'), { position: 'tl' });
    assert.deepEqual(parseTransform('r_90,r_auto'), {});
    assert.deepEqual(parseTransform('f_png,f_jpeg'), { format: 'jpg' });
  });

  test('a chain of segments is one list, in order', () => {
    assert.deepEqual(parseTransform('w_400/r_90,f_png'), { width: 400, rotate: 90, format: 'png' });
    assert.deepEqual(parseTransform('w_400/w_200'), { width: 200 });
    assert.match(refusal('w_400/zz_1').message, /"zz_1"/);
  });

  test('a "/" inside a layer group belongs to it (a preset writes image paths so)', () => {
    assert.match(refusal('l_image:logos/w_mark.png,o_50').message, /"l_image:logos\/w_mark.png" opens a layer/);
    assert.match(refusal('w_10/l_image:a/b.png,x_1').message, /"l_image:a\/b.png" opens a layer/);
  });

  test('text is split on literal commas only: an escaped comma stays in its token', () => {
    const r = refusal('l_text:Arial_20:a%2Cb%20c,w_100');
    assert.match(r.message, /"l_text:Arial_20:a%2Cb%20c" opens a layer/);
  });
});

describe('which path segments are tokens', () => {
  test('shape on the path as requested', () => {
    for (const yes of [
      'w_100',
      'w_100,h_100,c_fill',
      'ps_120,80,w_10',
      'l_text:Arial_20:Hi%2C%20you,fl_layer_apply',
      'e_blur:300',
    ])
      assert.ok(isTokenSegment(yes), yes);
    for (const no of ['photos', 'w%5F100', 'w_200%2Ch_100', 'W_100', '120,80', 'w_1,80', '', 'a_b/c', 'my photos'])
      assert.ok(!isTokenSegment(no), no);
  });

  test('leading token segments, always leaving a file, four at most', () => {
    assert.equal(tokenSegmentCount(['w_100', 'a.jpg']), 1);
    assert.equal(tokenSegmentCount(['l_text:x,fl_layer_apply', 'w_100', 'dir', 'a.jpg']), 2);
    assert.equal(tokenSegmentCount(['w_100']), 0);
    assert.equal(tokenSegmentCount(['dir', 'w_100', 'a.jpg']), 0);
    assert.equal(tokenSegmentCount(['w_1', 'w_2', 'w_3', 'w_4', 'w_5', 'a.jpg']), 0);
    assert.equal(tokenSegmentCount(['w_1', 'w_2', 'w_3', 'w_4', 'a.jpg']), 4);
  });
});

describe('canonical cache keys', () => {
  const key = (t: string) => canonical(parseTransform(t), 'jpg');

  test('equal for the same transformation in any order, written any way', () => {
    assert.equal(key('q_80,w_720,c_crop'), key('c_crop,q_80,w_720'));
    assert.equal(key('w_720/q_80'), key('q_80,w_720'));
    assert.equal(key('bg_white,r_450'), key('r_90,bg_fff'));
    assert.equal(key('w_100,w_200'), key('w_200'));
    assert.equal(key('ps_1,2'), key('ps_1:2'));
    assert.equal(key('p_face'), key('fo_face'));
  });

  test('different where the picture differs', () => {
    const all = [
      'w_720',
      'h_720',
      'w_0.5',
      'h_0.5',
      'c_crop,w_10',
      'c_fill,w_10',
      'z_2',
      'dpr_2',
      'r_90',
      'br_10',
      'br_max',
      'el_1',
      'ps_1:2',
      'ps_2:1',
      'q_80',
      'flip_h',
      'flip_v',
    ];
    assert.equal(new Set(all.map(key)).size, all.length);
    assert.notEqual(canonical({}, 'jpg'), canonical({}, 'png'));
  });

  test('effect order is kept: it changes the picture', () => {
    const a = canonical({ effects: [{ name: 'grayscale' }, { name: 'blur', value: 5 }] }, 'jpg');
    const b = canonical({ effects: [{ name: 'blur', value: 5 }, { name: 'grayscale' }] }, 'jpg');
    assert.notEqual(a, b);
    assert.equal(a, 'e_grayscale,e_blur:5,f_jpg');
  });

  test('a storage-safe name: itself when plain, a digest otherwise', () => {
    assert.equal(canonicalName('w_720,f_jpg'), 'w_720,f_jpg');
    assert.match(canonicalName('w_720,e_blur:60,f_jpg'), /^x-[0-9a-f]{40}$/, 'no colon in a storage key');
    const odd = canonicalName('[l_text:Arial_20:a/b "c"],f_jpg');
    assert.match(odd, /^x-[0-9a-f]{40}$/);
    assert.equal(odd, canonicalName('[l_text:Arial_20:a/b "c"],f_jpg'));
  });
});

describe('client hints', () => {
  test('width buckets round up, the largest caps', () => {
    assert.deepEqual([1, 320, 321, 500, 1080, 1500, 5000].map(bucket), [320, 320, 480, 720, 1080, 1920, 1920]);
  });

  test('the default width: width hints, then Save-Data, then the kind of device', () => {
    const w = (h: Record<string, string>) => clientHints(h).width;
    assert.equal(w({ 'sec-ch-width': '650' }), 720);
    assert.equal(w({ width: '1300', 'user-agent': 'iPhone' }), 1440);
    assert.equal(w({ 'save-data': 'on', 'user-agent': 'Mozilla/5.0 (iPhone)' }), 480);
    assert.equal(w({ 'user-agent': 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X)' }), 1080);
    assert.equal(w({ 'user-agent': 'Mozilla/5.0 (Linux; Android 14; Pixel 8) Mobile' }), 1080);
    assert.equal(w({ 'user-agent': 'Mozilla/5.0 (Linux; Android 10; K) Mobile Safari' }), 720);
    assert.equal(w({ 'user-agent': 'Mozilla/5.0 (Linux; Android 13; SM-X700)' }), 1080);
    assert.equal(w({ 'user-agent': 'Opera/9.80 (J2ME/MIDP; Opera Mini/4.2)' }), 480);
    assert.equal(w({ 'user-agent': 'Mozilla/5.0 (Windows NT 10.0; Win64; x64)' }), 1080);
    assert.equal(w({ 'user-agent': 'curl/8.0' }), undefined, 'a script gets the image at its size');
    assert.equal(w({ 'sec-ch-width': 'wide', 'user-agent': 'node' }), undefined);
    assert.equal(clientHints({ 'sec-ch-dpr': '2.625' }).dpr, 2.63);
    assert.equal(clientHints({ dpr: '9' }).dpr, 4);
    assert.equal(clientHints({}).dpr, 1);
  });

  test('the spec gets what the hints decide, and the answer varies on them only then', () => {
    const hints = clientHints({ 'sec-ch-width': '400', 'sec-ch-dpr': '2' });
    assert.deepEqual(withHints({ format: 'webp' }, hints), {
      spec: { format: 'webp', width: 480 },
      vary: ['Sec-CH-Width', 'Width', 'Save-Data', 'User-Agent'],
    });
    assert.deepEqual(withHints({ width: 100, dpr: 'auto' }, hints), {
      spec: { width: 100, dpr: 2 },
      vary: ['Sec-CH-DPR', 'DPR'],
    });
    assert.deepEqual(withHints({ aspectRatio: [1, 1] }, hints).vary, []);
    assert.deepEqual(withHints({ dpr: 'auto' }), { spec: {}, vary: [] }, 'no request: dpr_auto is 1, no default width');
  });
});

describe('the plan: geometry and bounds', () => {
  const limits = { maxMegapixels: 25, maxSide: 8192 };
  const plan = (t: string, w = 800, h = 600) => planRendition(parseTransform(t), { width: w, height: h }, limits);
  const size = (t: string, w?: number, h?: number) => {
    const p = plan(t, w, h);
    return [p.width, p.height];
  };

  test('the documented order: resize, then rotate', () => {
    assert.deepEqual(size('w_360,r_90', 480, 360), [270, 360]);
    assert.deepEqual(size('r_90,w_360', 480, 360), [270, 360]);
    assert.deepEqual(size('r_portrait'), [600, 800]);
    assert.deepEqual(size('r_landscape'), [800, 600]);
    assert.deepEqual(size('r_portrait', 600, 800), [600, 800]);
  });

  test('no upscaling unless el_1; fractions of the source; dpr multiplies', () => {
    assert.deepEqual(size('w_1600'), [800, 600]);
    assert.deepEqual(size('w_1600,el_1'), [1600, 1200]);
    assert.deepEqual(size('w_1600,h_900'), [800, 450]);
    assert.deepEqual(size('w_0.5'), [400, 300]);
    assert.deepEqual(size('h_0.25'), [200, 150]);
    assert.deepEqual(size('w_1.5'), [800, 600]);
    assert.deepEqual(size('w_300,dpr_2'), [600, 450]);
    assert.deepEqual(size('w_600,dpr_2'), [800, 600], 'dpr does not enlarge either');
    assert.deepEqual(size('w_600,dpr_2,el_1'), [1200, 900]);
  });

  test('crop modes: c_crop cuts a part at the image own scale, c_fill scales then cuts, c_scale distorts', () => {
    const crop = plan('w_300,h_300,c_crop');
    assert.deepEqual(crop.region, { left: 250, top: 150, width: 300, height: 300 });
    assert.equal(crop.resize, undefined, 'no resize: a part of the image as it is');
    const fill = plan('w_300,h_300,c_fill');
    assert.deepEqual(fill.region, { left: 100, top: 0, width: 600, height: 600 });
    assert.deepEqual([fill.resize?.width, fill.resize?.height], [300, 300]);
    assert.deepEqual(plan('w_300,h_300,c_crop,p_tl').region, { left: 0, top: 0, width: 300, height: 300 });
    assert.deepEqual(plan('w_300,h_300,c_crop,p_br').region, { left: 500, top: 300, width: 300, height: 300 });
    assert.deepEqual(plan('w_200,h_200,c_crop,ps_0:0').region, { left: 0, top: 0, width: 200, height: 200 });
    assert.deepEqual(plan('w_200,h_200,c_crop,ps_700,500').region, { left: 600, top: 400, width: 200, height: 200 });
    assert.deepEqual(size('w_1000,h_1000,c_crop'), [800, 600], 'a part is never larger than the image');
    assert.deepEqual(size('w_400,h_100,c_scale'), [400, 100]);
    assert.deepEqual(size('w_400,h_100,c_fit'), [133, 100]);
    assert.deepEqual(size('w_400,h_100,c_pad'), [400, 100]);
    assert.deepEqual(size('ar_1:1'), [600, 600]);
    assert.equal(plan('w_300,h_300,c_fill,p_attention').resize?.strategy, 'attention', 'libvips places it itself');
    assert.equal(plan('w_300,h_300,c_crop,p_attention').focus, 'attention', 'a first look is needed');
    assert.equal(plan('w_300,h_300,p_face').focus, 'face');
    assert.equal(plan('w_300,p_face').focus, undefined, 'nothing to place: the whole image is kept');
  });

  test('zoom takes 1/z of each side around the position', () => {
    const z = plan('z_2,w_400,h_400');
    assert.deepEqual(z.region, { left: 250, top: 150, width: 300, height: 300 });
    assert.deepEqual([z.width, z.height], [400, 400]);
    assert.deepEqual(plan('z_2,p_tl').region, { left: 0, top: 0, width: 400, height: 300 });
    assert.deepEqual(size('z_2'), [800, 600], 'the part stands for the whole image');
  });

  test('corners: a circle at half the side, br_max an ellipse', () => {
    assert.deepEqual(plan('w_300,h_300,c_fill,br_500').radius, { rx: 150, ry: 150 });
    assert.deepEqual(plan('br_max').radius, { rx: 400, ry: 300 });
    assert.deepEqual(plan('br_20').radius, { rx: 20, ry: 20 });
  });

  test('bounds hold for everything: dpr, fractions, zoom, rotation', () => {
    const tooLarge = (t: string, w = 800, h = 600) =>
      assert.throws(
        () => plan(t, w, h),
        (e: AppError) => e.errorCode === 'RENDITION_TOO_LARGE',
        t,
      );
    tooLarge('w_4000,dpr_4,el_1');
    tooLarge('w_4.0,el_1', 3000, 2000);
    tooLarge('w_10000,h_10000,c_pad,el_1');
    tooLarge('z_5', 6000, 5000);
    tooLarge('r_45', 6000, 4000);
    tooLarge('w_0.5,dpr_4,el_1', 6000, 4000);
  });
});
