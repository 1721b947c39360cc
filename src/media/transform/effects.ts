// Effects (`e_{name}[:{value}]` outside a layer): the interface the transformation parser and pipeline
// use. The parser hands over each effect token; the plan checks their cost against the output's size;
// the pipeline applies them in the order written, after the resize.
//
// What each effect means is the table in effects/catalogue.ts; how a list of them runs with sharp in
// few passes is effects/passes.ts.
import type { Sharp } from 'sharp';
import { errors } from '../../errors.ts';
import { type Args, EFFECTS, type Param, UNSUPPORTED } from './effects/catalogue.ts';
import { runOps } from './effects/passes.ts';

/** One parsed effect; its shape belongs to this module. */
export interface Effect {
  readonly name: string;
  /** The first value, defaults filled in (`e_sharpen` has 100). */
  readonly value?: number | string;
  /** Every value, in order, defaults filled in (`e_improve:outdoor` has `['outdoor', 100]`). */
  readonly args?: readonly (number | string)[];
}

/** What applying effects needs to know. */
export interface EffectContext {
  /** The output's size (after resize and crop), for strength caps and size-relative effects. */
  width: number;
  height: number;
  /** libvips stops after this many seconds (0 or undefined = never), for any extra pass. */
  timeoutSeconds?: number;
  /**
   * Whether the caller composites layers onto the returned pipeline (undefined counts as yes). sharp
   * runs gamma, linear, normalise and negate after its composite step, and keeps one
   * composite per pipeline; with layers to come, effects that need either end in a pass of their own
   * so the layers are laid over the finished image. Say false when there are none, to save it.
   */
  compositeAfter?: boolean;
}

/** More effects than this in one transformation is a 400: each may cost a pass over the image. */
export const MAX_EFFECTS = 20;

const NAMES = Object.keys(EFFECTS)
  .map((name) => `e_${name}`)
  .join(', ');

function describe(p: Param): string {
  const optional = p.optional ? ' (optional)' : p.default !== undefined ? ` (default ${p.default})` : '';
  if (p.kind === 'word') return `${p.name} ${p.values.join(' or ')}${optional}`;
  const what = p.kind === 'number' ? 'a number' : p.odd ? 'an odd whole number' : 'a whole number';
  return `${p.name} ${what} from ${p.min} to ${p.max}${optional}`;
}

/** `e_improve[:{mode}[:{blend}]], mode indoor or outdoor (optional), blend ...`. */
function syntax(name: string, params: readonly Param[]): string {
  if (params.length === 0) return `e_${name}, with no value`;
  let form = `e_${name}`;
  let close = '';
  for (const p of params) {
    if (p.optional || p.default !== undefined) {
      form += `[:{${p.name}}`;
      close += ']';
    } else form += `:{${p.name}}`;
  }
  return `${form}${close}, ${params.map(describe).join('; ')}`;
}

function parseValue(p: Param, text: string): number | string | undefined {
  if (p.kind === 'word') return p.values.includes(text) ? text : undefined;
  const pattern = p.kind === 'int' ? /^-?\d{1,5}$/ : /^-?\d{1,5}(?:\.\d{1,4})?$/;
  if (!pattern.test(text)) return undefined;
  const value = Number(text) + 0; // -0 reads as 0
  if (value < p.min || value > p.max) return undefined;
  if (p.kind === 'int' && p.odd && value % 2 === 0) return undefined;
  return value;
}

/**
 * One effect from its token (`e_brightness:20`, `e_grayscale`, percent-decoded). Throws a 400 naming
 * the token, what is allowed and the range when it is not accepted.
 */
export function parseEffect(token: string): Effect {
  const bad = (why: string) => errors.validation(`transform: "${token.slice(0, 40)}" ${why}`);
  const m = /^e_([a-z_]{1,20})(?::(.*))?$/.exec(token);
  const name = m?.[1] ?? '';
  const def = Object.hasOwn(EFFECTS, name) ? EFFECTS[name] : undefined;
  if (!m || !def) {
    if (UNSUPPORTED.has(name))
      throw bad('is not supported: it changes the image size or alpha channel (docs/transformations/effects.md)');
    throw bad(`is not a known effect; the effects are ${NAMES}`);
  }
  const given = m[2] === undefined ? [] : m[2].split(':');
  const wrong = () => bad(`must be ${syntax(name, def.params)}`);
  if (given.length > def.params.length) throw wrong();
  const args: (number | string)[] = [];
  for (const [i, p] of def.params.entries()) {
    if (i < given.length) {
      const value = parseValue(p, given[i]);
      if (value === undefined) throw wrong();
      args.push(value);
    } else if (p.default !== undefined) args.push(p.default);
    else if (p.optional) break;
    else throw wrong();
  }
  return args.length === 0 ? { name } : { name, value: args[0], args };
}

const argsOf = (effect: Effect): Args => effect.args ?? (effect.value === undefined ? [] : [effect.value]);

/** A stable text for the effect, part of the rendition's cache key. */
export function canonicalEffect(effect: Effect): string {
  return [`e_${effect.name}`, ...argsOf(effect)].join(':');
}

/**
 * Throws EFFECT_TOO_STRONG (400) when an effect costs more than it can show at this output size
 * (blur, sharpen, unsharp mask sigmas and median windows, scaled with the output's megapixels), and
 * a 400 for more than MAX_EFFECTS effects.
 */
export function checkEffects(effects: readonly Effect[], ctx: EffectContext): void {
  if (effects.length > MAX_EFFECTS)
    throw errors.validation(
      `transform: ${effects.length} effects; at most ${MAX_EFFECTS} effects in one transformation`,
    );
  for (const effect of effects) {
    const max = EFFECTS[effect.name]?.limit?.(argsOf(effect), ctx);
    if (max) throw errors.effectTooStrong(canonicalEffect(effect), ctx.width, ctx.height, max);
  }
}

/**
 * The effects applied, in order, to `img` (already resized). sharp applies each kind of operation
 * once per pipeline in its own fixed order, so a chain that needs another order or the same operation
 * twice continues in a new pipeline over the raw pixels; the returned pipeline is the one to encode.
 */
export async function applyEffects(img: Sharp, effects: readonly Effect[], ctx: EffectContext): Promise<Sharp> {
  if (effects.length === 0) return img;
  const size = { width: ctx.width, height: ctx.height };
  const ops = effects.flatMap((effect) => EFFECTS[effect.name].compile(argsOf(effect), size));
  return runOps(img, ops, {
    width: ctx.width,
    height: ctx.height,
    timeoutSeconds: ctx.timeoutSeconds,
    compositeAfter: ctx.compositeAfter !== false,
  });
}
