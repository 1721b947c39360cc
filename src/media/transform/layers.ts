// Text and image layers (`l_text:…`/`l_image:…` … `fl_layer_apply`): the interface the transformation
// parser and pipeline use. The parser hands over each layer's tokens; the pipeline asks for sharp
// overlays once it knows the output's size, and composites them in one `composite()` call.
import type { OverlayOptions } from 'sharp';
import { errors } from '../../errors.ts';

/** One parsed layer; its shape belongs to this module. */
export interface LayerSpec {
  readonly kind: 'text' | 'image';
  readonly tokens: readonly string[];
}

/** What rendering a layer needs from the delivery service. */
export interface LayerContext {
  /**
   * An image layer's source: a file of the same workspace named by the layer's path, as a local file
   * path or its bytes, after the same checks as any input (it exists, is an image, within bounds).
   * Throws a 400 AppError when it cannot be used.
   */
  loadImage(path: string): Promise<string | Buffer>;
  /** Decoding stops above this many pixels. */
  maxPixels: number;
  /** libvips stops after this many seconds (0 or undefined = never). */
  timeoutSeconds?: number;
}

/** The token that closes a layer. */
export const LAYER_END = 'fl_layer_apply';

/** Whether `token` (still percent-encoded) opens a layer. */
export function isLayerStart(token: string): boolean {
  return token.startsWith('l_text:') || token.startsWith('l_image:');
}

/**
 * One layer from its tokens: the opening `l_text:`/`l_image:` token and every token up to, not
 * including, `fl_layer_apply`. Tokens arrive still percent-encoded (a comma in a text is `%2C`), as
 * split on literal commas. Throws a 400 naming the token on anything it does not accept.
 */
export function parseLayer(tokens: readonly string[]): LayerSpec {
  throw errors.validation(`transform: "${(tokens[0] ?? '').slice(0, 40)}" layers are not supported yet`);
}

/** A stable text for the layer, part of the rendition's cache key. */
export function canonicalLayer(layer: LayerSpec): string {
  return layer.tokens.join(',');
}

/**
 * The overlays for sharp's `composite()` onto an output of `base` size, in the order they apply
 * (underlays use `blend: 'dest-over'`).
 */
export async function layerOverlays(
  layers: readonly LayerSpec[],
  base: { width: number; height: number },
  ctx: LayerContext,
): Promise<OverlayOptions[]> {
  if (layers.length === 0) return [];
  throw errors.validation(`transform: layers are not supported yet (${base.width}x${base.height}, ${ctx.maxPixels})`);
}
