// Text and image layers (`l_text:…`/`l_image:…` … `fl_layer_apply`): the interface the transformation
// parser and pipeline use. The parser hands over each layer's tokens; the pipeline asks for sharp
// overlays once it knows the output's size, and composites them in one `composite()` call.
// The syntax, options and limits are in docs/transformations/layers.md; the work is in layers/.
import type { OverlayOptions } from 'sharp';
import { errors } from '../../errors.ts';
import { renderImage } from './layers/image.ts';
import { parseLayerTokens } from './layers/parse.ts';
import { origin, overlay } from './layers/place.ts';
import { scaleAlpha } from './layers/raw.ts';
import type { ImageLayer, TextLayer } from './layers/spec.ts';
import { LIMITS } from './layers/spec.ts';
import { renderText } from './layers/text.ts';

/**
 * One parsed layer: `kind` tells which; `tokens` is its canonical form (see canonicalLayer); the rest
 * is in layers/spec.ts.
 */
export type LayerSpec = TextLayer | ImageLayer;

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

/** At most this many layers in one transformation (layerOverlays refuses more). */
export const MAX_LAYERS = LIMITS.layers;

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
  return parseLayerTokens(tokens);
}

/**
 * A stable text for the layer, part of the rendition's cache key: its tokens in a fixed order, defaults
 * left out, text and path percent-encoded one way, without the closing `fl_layer_apply`.
 */
export function canonicalLayer(layer: LayerSpec): string {
  return layer.tokens.join(',');
}

/**
 * The order layers are drawn in, as the hosted service documents it: underlays first, then text, then
 * image overlays, each group in the order written.
 */
function drawingOrder(layers: readonly LayerSpec[]): LayerSpec[] {
  const rank = (l: LayerSpec) => (l.kind === 'image' && l.underlay ? 0 : l.kind === 'text' ? 1 : 2);
  return layers
    .map((layer, i) => ({ layer, i }))
    .sort((a, b) => rank(a.layer) - rank(b.layer) || a.i - b.i)
    .map((x) => x.layer);
}

/**
 * The overlays for sharp's `composite()` onto an output of `base` size, in the order they apply
 * (underlays use `blend: 'dest-over'`). Each is raw RGBA already cut to the output.
 */
export async function layerOverlays(
  layers: readonly LayerSpec[],
  base: { width: number; height: number },
  ctx: LayerContext,
): Promise<OverlayOptions[]> {
  if (layers.length === 0) return [];
  if (layers.length > LIMITS.layers) {
    throw errors.validation(`transform: ${layers.length} layers; a transformation may have at most ${LIMITS.layers}`);
  }
  const opts = { maxPixels: ctx.maxPixels, timeoutSeconds: ctx.timeoutSeconds };
  const out: OverlayOptions[] = [];
  // One at a time: each layer's pixels are held until composite(), and renders share the CPU anyway.
  for (const layer of drawingOrder(layers)) {
    const raw =
      layer.kind === 'text' ? await renderText(layer, base, opts) : await renderImage(layer, ctx.loadImage, opts);
    const alpha = (layer.opacity / 100) * (layer.kind === 'text' ? layer.colorAlpha / 255 : 1);
    scaleAlpha(raw, alpha);
    const o = overlay(raw, origin(layer.position, raw, base), base, {
      blend: layer.blend,
      underlay: layer.kind === 'image' && layer.underlay,
    });
    if (o) out.push(o);
  }
  return out;
}
