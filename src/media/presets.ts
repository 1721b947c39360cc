// Named presets (`t_{name}`, docs/api/presets.md): a workspace stores a transformation under a
// name, and a delivery URL names it instead of spelling it out. Expansion is text to text and
// runs before the transformation parser, so the parser (whichever grammar it reads) never sees
// a `t_` token. Pure functions only: loading a workspace's presets is the service's business.
import { appError, errors } from '../errors.ts';

/** A preset's name: what follows `t_`. Lower case, so that one name is spelled one way in URLs. */
export const PRESET_NAME = /^[a-z0-9][a-z0-9_-]{0,63}$/;
/** Longest preset text, in characters (the hosted docs' longest recipe is about 150). */
export const MAX_PRESET_LENGTH = 1024;
/** Presets one URL may name: enough to combine a few, few enough that expansion stays small. */
export const MAX_PRESETS_PER_URL = 8;
/**
 * Presets a URL may combine and still pass the signed-transformations gate unsigned. Each added
 * reference multiplies the renditions a stranger can ask for (n presets: n + n² variants of a
 * file at 2, n⁸ at 8), which is what requiring signatures is there to bound.
 */
export const MAX_UNSIGNED_PRESETS = 2;

const PRESET_TOKEN = /^t_(.*)$/s;
const TOKEN = /^([a-z]+)_(.*)$/s;
/**
 * Tokens that belong to a layer (`l_…` up to `fl_layer_apply`) or only mean something inside
 * one: they are positional, may legitimately repeat, and are never merged.
 */
const LAYER_SCOPED = new Set(['l', 'lx', 'ly', 'lw', 'lh', 'tp', 'x', 'y', 'co', 'a', 'o']);

/** Whether one token of a URL is a preset reference (`t_…`), whatever follows. */
export function isPresetToken(token: string): boolean {
  return PRESET_TOKEN.test(token);
}

/**
 * Whether a token segment names presets and nothing else (`t_a`, `t_a,t_b`), each a well-formed
 * name, at most `max` of them. The signed-transformations gate lets such URLs through unsigned
 * (with MAX_UNSIGNED_PRESETS): the workspace's owner wrote every transformation they can ask for.
 */
export function isPresetsOnly(tokensText: string, max = MAX_PRESETS_PER_URL): boolean {
  const tokens = tokensText.split(',');
  if (tokens.length > max) return false;
  return tokens.every((t) => {
    const m = PRESET_TOKEN.exec(t);
    return m !== null && PRESET_NAME.test(m[1]);
  });
}

/**
 * A preset's text as stored: tokens trimmed, no empty token, no `t_` (a preset never names
 * another, so expansion is one level deep and cannot loop), at most MAX_PRESET_LENGTH long.
 * Throws 400 VALIDATION_FAILED naming the problem; the caller parses the result too.
 */
export function normalizePresetText(text: string): string {
  const tokens = text.split(',').map((t) => t.trim());
  if (tokens.some((t) => t === ''))
    throw errors.validation('transformation: an empty token (two commas, or a comma at an end)');
  const nested = tokens.find(isPresetToken);
  if (nested !== undefined)
    throw errors.validation(`transformation: "${nested.slice(0, 70)}" names a preset; a preset cannot contain another`);
  const joined = tokens.join(',');
  if (joined.length > MAX_PRESET_LENGTH)
    throw errors.validation(`transformation is ${joined.length} characters long; at most ${MAX_PRESET_LENGTH}`);
  return joined;
}

/**
 * What makes two tokens "the same parameter": the token's name (`w`, `c`, `q`…), and for effects
 * and flags the effect or flag as well (`e_blur:5` and `e_grayscale` are different parameters).
 * Undefined for tokens that are never merged (layer tokens, and what does not read as a token:
 * the parser says what is wrong with it).
 */
function parameterOf(token: string): string | undefined {
  const m = TOKEN.exec(token);
  if (!m) return undefined;
  const [, name, value] = m;
  if (LAYER_SCOPED.has(name)) return undefined;
  if (name === 'e' || name === 'fl') return `${name}_${value.split(':')[0]}`;
  return name;
}

interface Placed {
  token: string;
  /** 0: written in the URL; n: from the n-th preset reference. */
  from: number;
  parameter?: string;
}

/**
 * Replaces each `t_{name}` of a comma-separated token list with that preset's tokens, in place:
 * `t_thumb,e_grayscale` is the preset's tokens followed by `e_grayscale`.
 *
 * A parameter given both by a preset and by a later token (another preset's, or one written in
 * the URL) takes the later value: `t_thumb,w_300` is `t_thumb` with width 300, and `w_300,t_thumb`
 * is `t_thumb` as it stands. Tokens written in the URL are never dropped for one another (two
 * `w_` written in a URL are the parser's to judge). Layer tokens are never merged.
 *
 * Unknown names are 400 TRANSFORM_PRESET_NOT_FOUND naming the reference as written (400, not
 * 404: delivery URLs are public, and 404 there means "no such file"). `lookup` answers a
 * workspace's preset text by name, or undefined. Text without `t_` tokens comes back unchanged.
 */
export function expandPresets(tokensText: string, lookup: (name: string) => string | undefined): string {
  const tokens = tokensText.split(',');
  if (!tokens.some(isPresetToken)) return tokensText;
  const placed: Placed[] = [];
  let references = 0;
  for (const token of tokens) {
    const m = PRESET_TOKEN.exec(token);
    if (!m) {
      placed.push({ token, from: 0 });
      continue;
    }
    references++;
    if (references > MAX_PRESETS_PER_URL)
      throw errors.validation(`transform names more than ${MAX_PRESETS_PER_URL} presets`);
    const name = m[1];
    const text = PRESET_NAME.test(name) ? lookup(name) : undefined;
    if (text === undefined)
      throw appError(
        'TRANSFORM_PRESET_NOT_FOUND',
        `transform: "${token.slice(0, 70)}" is not a preset of this workspace`,
      );
    for (const inner of text.split(',')) {
      // Stored presets are checked when written; this keeps a stray one from recursing.
      if (isPresetToken(inner))
        throw appError('TRANSFORM_PRESET_NOT_FOUND', `transform: preset "${name}" names another preset`);
      placed.push({ token: inner, from: references });
    }
  }
  markParameters(placed);
  // The last occurrence of each parameter stands; an earlier one goes when a later one comes
  // from elsewhere (another preset, or the URL against a preset). One pass from the end: per
  // parameter, the origin of the later tokens, or null once they come from more than one.
  const later = new Map<string, number | null>();
  const kept: string[] = [];
  for (let i = placed.length - 1; i >= 0; i--) {
    const { token, from, parameter } = placed[i];
    if (parameter === undefined) {
      kept.push(token);
      continue;
    }
    const seen = later.get(parameter);
    if (seen === undefined || seen === from) kept.push(token);
    later.set(parameter, seen === undefined || seen === from ? from : null);
  }
  kept.reverse();
  return kept.join(',');
}

/** Gives each token its parameter, except tokens inside a layer (`l_…` to `fl_layer_apply` of the same origin). */
function markParameters(placed: Placed[]): void {
  let layerOf: number | undefined;
  for (const p of placed) {
    if (layerOf !== undefined && p.from !== layerOf) layerOf = undefined;
    if (p.token.startsWith('l_')) layerOf = p.from;
    if (layerOf === undefined) p.parameter = parameterOf(p.token);
    if (p.token === 'fl_layer_apply') layerOf = undefined;
  }
}
