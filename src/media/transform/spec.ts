// What a transformation asks for, once parsed (parse.ts): the one shape the plan (plan.ts), the
// pipeline (pipeline.ts) and the cache key (canonical.ts) read. Effects and layers keep the shapes
// of their own modules (effects.ts, layers.ts).
import type { Effect } from './effects.ts';
import type { LayerSpec } from './layers.ts';

export type OutputFormat = 'webp' | 'avif' | 'jpg' | 'png' | 'gif' | 'tiff';
export type Compass = 'c' | 't' | 'b' | 'l' | 'r' | 'tl' | 'tr' | 'bl' | 'br';
export type Position = Compass | 'entropy' | 'attention' | 'face';
export type CropMode = 'fill' | 'fit' | 'crop' | 'pad' | 'scale';

/** A size in pixels, or a fraction of the source's side (`w_0.5`). */
export type Length = number | { fraction: number };

/** `ps_{x}:{y}`: a point of the source (EXIF orientation applied), in pixels or as fractions of its sides. */
export interface Point {
  x: number;
  y: number;
  relative: boolean;
}

export interface TransformSpec {
  width?: Length;
  height?: Length;
  aspectRatio?: [number, number];
  crop?: CropMode;
  position?: Position;
  point?: Point;
  /** z_: 1 to 5, the part of the image kept is 1/zoom of each side. */
  zoom?: number;
  /** dpr_: multiplies w_ and h_; 'auto' until the delivery request's hints resolve it. */
  dpr?: number | 'auto';
  format?: OutputFormat | 'auto';
  quality?: number | 'auto';
  /** Degrees clockwise in [0, 360), or a rule decided from the image's shape. */
  rotate?: number | 'portrait' | 'landscape';
  flip?: 'h' | 'v' | 'hv';
  /** "#rrggbb" or "#rrggbbaa". */
  background?: string;
  /** br_: corner radius in output pixels, or 'max' (an ellipse inscribed in the output). */
  radius?: number | 'max';
  /** el_1: the image may be scaled up beyond its own size (never by default). */
  enlarge?: boolean;
  /** e_ tokens outside layers, in the order written. */
  effects?: readonly Effect[];
  /** l_ … fl_layer_apply groups, in the order written. */
  layers?: readonly LayerSpec[];
}

/** Longest side a w_/h_ may ask for (the render limits then apply to the output). */
export const MAX_DIMENSION = 10_000;
/** Layers per transformation: each one is a decode and a composite within the render's time budget. */
export const MAX_LAYERS = 8;
