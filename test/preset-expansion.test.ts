// expandPresets / isPresetsOnly / normalizePresetText (src/media/presets.ts): `t_{name}` replaced
// in place, later parameters win over a preset's, unknown names are 400 naming the reference.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AppError } from '../src/errors.ts';
import {
  expandPresets,
  isPresetsOnly,
  MAX_PRESET_LENGTH,
  MAX_PRESETS_PER_URL,
  MAX_UNSIGNED_PRESETS,
  normalizePresetText,
} from '../src/media/presets.ts';

const PRESETS: Record<string, string> = {
  thumb: 'c_fill,w_200,h_200,p_c',
  gray: 'e_grayscale,e_sharpen:50',
  'thumbnail-2': 'w_100',
  big: 'w_800,q_90',
  banner: 'l_image:logo.png,w_50,x_10,fl_layer_apply,w_400',
};
const lookup = (name: string) => PRESETS[name];

function code(fn: () => unknown): { code: string; status: number; message: string } {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof AppError, String(err));
    return { code: err.errorCode, status: err.status, message: err.message };
  }
  assert.fail('expected an error');
}

describe('expandPresets', () => {
  test('text without presets comes back as it is, unread', () => {
    let asked = 0;
    const counting = (n: string) => {
      asked++;
      return lookup(n);
    };
    assert.equal(expandPresets('w_100,w_100,zz_1', counting), 'w_100,w_100,zz_1');
    assert.equal(asked, 0);
  });

  test('a preset alone, and in place among other tokens', () => {
    assert.equal(expandPresets('t_thumb', lookup), 'c_fill,w_200,h_200,p_c');
    assert.equal(expandPresets('t_thumb,e_grayscale', lookup), 'c_fill,w_200,h_200,p_c,e_grayscale');
    assert.equal(expandPresets('f_webp,t_thumbnail-2,q_80', lookup), 'f_webp,w_100,q_80');
    assert.equal(expandPresets('t_thumb,t_gray', lookup), 'c_fill,w_200,h_200,p_c,e_grayscale,e_sharpen:50');
  });

  test('a later token wins over a preset on the same parameter', () => {
    assert.equal(expandPresets('t_thumb,w_300', lookup), 'c_fill,h_200,p_c,w_300');
    // Written first, the URL's token yields to the preset after it.
    assert.equal(expandPresets('w_300,t_thumb', lookup), 'c_fill,w_200,h_200,p_c');
    // Between presets: the later preset's value.
    assert.equal(expandPresets('t_big,t_thumb', lookup), 'q_90,c_fill,w_200,h_200,p_c');
    assert.equal(expandPresets('t_thumb,t_big', lookup), 'c_fill,h_200,p_c,w_800,q_90');
    // Effects are parameters by effect name: another effect adds, the same one replaces.
    assert.equal(expandPresets('t_gray,e_sharpen:120,e_blur:3', lookup), 'e_grayscale,e_sharpen:120,e_blur:3');
  });

  test("tokens written in the URL are never merged with each other: that is the parser's call", () => {
    assert.equal(expandPresets('w_1,t_thumbnail-2,w_2', lookup), 'w_2');
    assert.equal(expandPresets('h_1,h_2,t_thumbnail-2', lookup), 'h_1,h_2,w_100');
  });

  test('the same preset twice gives its tokens once', () => {
    assert.equal(expandPresets('t_thumb,t_thumb', lookup), 'c_fill,w_200,h_200,p_c');
  });

  test("a layer's tokens are never merged, nor merge others", () => {
    assert.equal(expandPresets('t_banner', lookup), 'l_image:logo.png,w_50,x_10,fl_layer_apply,w_400');
    assert.equal(expandPresets('t_banner,w_500', lookup), 'l_image:logo.png,w_50,x_10,fl_layer_apply,w_500');
    assert.equal(expandPresets('t_banner,x_3', lookup), 'l_image:logo.png,w_50,x_10,fl_layer_apply,w_400,x_3');
  });

  test('an unknown name is 400 TRANSFORM_PRESET_NOT_FOUND naming the reference, and nothing else', () => {
    const e = code(() => expandPresets('w_100,t_nope', lookup));
    assert.equal(e.code, 'TRANSFORM_PRESET_NOT_FOUND');
    assert.equal(e.status, 400);
    assert.match(e.message, /"t_nope"/);
    for (const name of Object.keys(PRESETS)) assert.ok(!e.message.includes(name), e.message);
    // Names that cannot be preset names are not even looked up.
    const asked: string[] = [];
    for (const bad of ['t_', 't_Thumb', 't_-x', `t_${'a'.repeat(65)}`, 't_a b', 't_thumb:1']) {
      assert.equal(code(() => expandPresets(bad, (n) => (asked.push(n), 'w_1'))).code, 'TRANSFORM_PRESET_NOT_FOUND');
    }
    assert.deepEqual(asked, []);
    // The echo is bounded.
    assert.ok(code(() => expandPresets(`t_${'x'.repeat(5000)}`, lookup)).message.length < 200);
  });

  test('a stored preset that names another is refused, never followed', () => {
    assert.equal(code(() => expandPresets('t_loop', (n) => (n === 'loop' ? 't_loop' : undefined))).status, 400);
  });

  test(`at most ${MAX_PRESETS_PER_URL} preset references in one URL`, () => {
    const many = Array.from({ length: MAX_PRESETS_PER_URL }, () => 't_thumbnail-2').join(',');
    assert.equal(expandPresets(many, lookup), 'w_100');
    assert.equal(code(() => expandPresets(`${many},t_thumbnail-2`, lookup)).code, 'VALIDATION_FAILED');
  });

  test('linear in the number of tokens: a long URL against a long preset stays fast', () => {
    const long = Array.from({ length: 300 }, (_, i) => `e_x${i}:1`).join(',');
    const url = `t_long,${Array.from({ length: 4000 }, (_, i) => `e_x${i % 600}:2`).join(',')}`;
    const started = performance.now();
    expandPresets(url, () => long);
    assert.ok(performance.now() - started < 200);
  });
});

describe('isPresetsOnly', () => {
  test('true for preset references alone', () => {
    assert.equal(isPresetsOnly('t_a'), true);
    assert.equal(isPresetsOnly('t_thumb,t_gray'), true);
    assert.equal(isPresetsOnly('t_thumbnail-2,t_a_b'), true);
  });
  test('false as soon as anything else is there', () => {
    for (const text of ['w_100', 't_a,w_100', 'w_100,t_a', 't_a,', ',t_a', 't_', 't_A', 't_a,t_', 't_a b', '', 't_a/b'])
      assert.equal(isPresetsOnly(text), false, text);
    assert.equal(isPresetsOnly(Array.from({ length: MAX_PRESETS_PER_URL + 1 }, () => 't_a').join(',')), false);
  });
  test('with a maximum: at most that many references', () => {
    assert.equal(MAX_UNSIGNED_PRESETS, 2);
    assert.equal(isPresetsOnly('t_a,t_b', MAX_UNSIGNED_PRESETS), true);
    assert.equal(isPresetsOnly('t_a,t_a', MAX_UNSIGNED_PRESETS), true);
    assert.equal(isPresetsOnly('t_a,t_b,t_c', MAX_UNSIGNED_PRESETS), false);
    assert.equal(isPresetsOnly('t_a,t_b,t_c'), true);
  });
});

describe('normalizePresetText', () => {
  test('trims each token', () => {
    assert.equal(normalizePresetText(' w_100 , h_50'), 'w_100,h_50');
  });
  test('refuses empty tokens, t_ tokens and overlong text', () => {
    for (const bad of ['', ' ', 'w_1,,h_1', 'w_1,', 't_other', 'w_1, t_x'])
      assert.equal(code(() => normalizePresetText(bad)).code, 'VALIDATION_FAILED', bad);
    const long = Array.from({ length: MAX_PRESET_LENGTH }, () => 'w_1').join(',');
    assert.match(code(() => normalizePresetText(long)).message, /at most 1024/);
  });
});
