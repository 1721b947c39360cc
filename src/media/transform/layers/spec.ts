// The parsed form of a layer and the bounds every layer is held to. Kept apart from the parser and the
// renderers so both can import it without importing each other.

/** The nine anchors of `tp_`/`ip_`, named as sharp names its gravities. */
export type Placement =
  | 'northwest'
  | 'north'
  | 'northeast'
  | 'west'
  | 'centre'
  | 'east'
  | 'southwest'
  | 'south'
  | 'southeast';

/** Where a layer goes; see docs/transformations/layers.md#position for how these combine. */
export interface LayerPosition {
  readonly placement?: Placement;
  /** The layer's centre on the output, in pixels from the left/top edge (`lx_`/`ly_`). */
  readonly lx?: number;
  readonly ly?: number;
  /** Offsets (`x_`/`y_`): from an anchored edge inwards, else right/down; coordinates when nothing anchors. */
  readonly x?: number;
  readonly y?: number;
}

/** How a layer meets what is under it: sharp's composite modes; `mask` keeps the output only where the layer is. */
export type LayerBlend = 'screen' | 'overlay' | 'multiply' | 'mask';

/** `lc_`: how `lw_`/`lh_` apply when both are known. */
export type LayerFit = 'crop' | 'fill' | 'fit' | 'resize' | 'scale';

export interface LayerEffect {
  readonly name: 'saturation' | 'contrast' | 'brightness' | 'sharpen' | 'grayscale' | 'improve';
  readonly value?: number | 'indoor' | 'outdoor';
}

interface LayerCommon {
  /** The layer's canonical tokens (without `fl_layer_apply`): its part of the rendition's cache key. */
  readonly tokens: readonly string[];
  readonly position: LayerPosition;
  /** 0-100 (`o_`). */
  readonly opacity: number;
  /** Degrees clockwise (`a_` on text, `lr_` on images). */
  readonly angle: number;
  readonly blend?: LayerBlend;
}

export interface TextLayer extends LayerCommon {
  readonly kind: 'text';
  /** The requested family, lower case, as written (`arial`, `times new roman`). */
  readonly font: string;
  /** Pixels. */
  readonly size: number;
  readonly bold: boolean;
  readonly italic: boolean;
  readonly underline: boolean;
  readonly align: 'left' | 'center' | 'right';
  /** Percent-decoded; may hold line feeds. */
  readonly text: string;
  /** `rrggbb`, lower case. */
  readonly color: string;
  /** 0-255, from an 8-digit `co_`. */
  readonly colorAlpha: number;
}

export interface ImageLayer extends LayerCommon {
  readonly kind: 'image';
  /** The workspace path of the layer's image, percent-decoded, folders separated by `/`. */
  readonly path: string;
  readonly underlay: boolean;
  readonly width?: number;
  readonly height?: number;
  readonly fit?: LayerFit;
  /** Width over height (`lar_`). */
  readonly aspect?: number;
  /** Corner radius in pixels (`lbr_`), capped at half the shorter side when drawn. */
  readonly radius: number;
  readonly flip?: 'h' | 'v' | 'hv';
  /** `lzoom_`: above 1 crops into the centre and enlarges back; below 1 shrinks inside the same box. */
  readonly zoom: number;
  readonly effects: readonly LayerEffect[];
}

export const LIMITS = {
  /** Layers in one transformation. */
  layers: 10,
  /** Characters (code points) of a text, after percent-decoding. */
  textLength: 500,
  fontSize: { min: 1, max: 500 },
  /** Characters of a font family name. */
  fontName: 64,
  /** Characters of a layer image's path. */
  path: 1024,
  /** |lx|, |ly|, |x|, |y| in pixels. */
  offset: 10_000,
  /** lw_, lh_ in pixels. */
  dimension: 10_000,
  zoom: { min: 0.1, max: 10 },
  /** Rendered text, wrapped at the output's width, may be at most this many times the output's height. */
  textToOutputHeight: 2,
} as const;
