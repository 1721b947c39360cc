// Effects (`e_{name}[:{value}]` outside a layer): the interface the transformation parser and pipeline
// use. The parser hands over each effect token; the plan checks their cost against the output's size;
// the pipeline applies them in the order written, after the resize.
import type { Sharp } from 'sharp';
import { errors } from '../../errors.ts';

/** One parsed effect; its shape belongs to this module. */
export interface Effect {
  readonly name: string;
  readonly value?: number | string;
}

/** What applying effects needs to know. */
export interface EffectContext {
  /** The output's size (after resize and crop), for strength caps and size-relative effects. */
  width: number;
  height: number;
  /** libvips stops after this many seconds (0 or undefined = never), for any extra pass. */
  timeoutSeconds?: number;
}

/**
 * One effect from its token (`e_brightness:20`, `e_grayscale`, percent-decoded). Throws a 400 naming
 * the token, what is allowed and the range when it is not accepted.
 */
export function parseEffect(token: string): Effect {
  throw errors.validation(`transform: "${token.slice(0, 40)}" is not a known effect`);
}

/** A stable text for the effect, part of the rendition's cache key. */
export function canonicalEffect(effect: Effect): string {
  return effect.value === undefined ? `e_${effect.name}` : `e_${effect.name}:${effect.value}`;
}

/**
 * Throws EFFECT_TOO_STRONG (400) when an effect costs more than it can show at this output size
 * (blur and sharpen sigma caps, scaled with the output's megapixels).
 */
export function checkEffects(effects: readonly Effect[], ctx: EffectContext): void {
  if (effects.length > 0 && ctx.width < 0) throw errors.validation('transform: no effects yet');
}

/**
 * The effects applied, in order, to `img` (already resized). sharp applies each kind of operation
 * once per pipeline in its own fixed order, so a chain that needs another order or the same operation
 * twice continues in a new pipeline over the raw pixels; the returned pipeline is the one to encode.
 */
export async function applyEffects(img: Sharp, effects: readonly Effect[], ctx: EffectContext): Promise<Sharp> {
  if (effects.length === 0) return img;
  throw errors.validation(`transform: effects are not supported yet (${ctx.width}x${ctx.height})`);
}
