// The operations effects compile to: each is one sharp (libvips) operation, or one of the two passes
// this module draws itself (a vignette and a shadows/highlights tone mask). Kept apart from the
// catalogue so that the catalogue says what an effect means and passes.ts how sharp runs it.

/** A 3x3 colour matrix, rows are the output channels R, G, B. */
export type Matrix = readonly [number, number, number, number, number, number, number, number, number];

export type Op =
  | { kind: 'median'; size: number }
  | { kind: 'blur'; sigma: number }
  | { kind: 'recomb'; matrix: Matrix }
  /**
   * An affine map in LCh, which is what sharp's modulate() is: L' = brightness x L + lightness,
   * C' = saturation x C, h' = h + hue. Brightness, contrast, exposure, saturation, hue and fade are
   * all of this shape, so any run of them folds into one modulate().
   */
  | { kind: 'modulate'; brightness: number; lightness: number; saturation: number; hue: number }
  | { kind: 'sharpen'; sigma: number; m1?: number; m2?: number; x1?: number; y2?: number; y3?: number }
  /** out = in ^ (1 / g), per channel on 0-1. */
  | { kind: 'gamma'; g: number }
  /** out = a x in + b, clipped to 0-255. */
  | { kind: 'linear'; a: number; b: number }
  | { kind: 'normalise' }
  | { kind: 'negate' }
  /** Corners darkened by `strength` (0-1) of black, along an elliptic radial gradient. */
  | { kind: 'vignette'; strength: number }
  /** Shadows or highlights lifted (amount > 0) or pulled down (amount < 0), amount in -1..1. */
  | { kind: 'tone'; zone: 'shadows' | 'highlights'; amount: number };

export const IDENTITY: Matrix = [1, 0, 0, 0, 1, 0, 0, 0, 1];

/** `b` applied after `a`: the matrix product b x a. */
export function matrixAfter(b: Matrix, a: Matrix): Matrix {
  const out: number[] = [];
  for (let r = 0; r < 3; r++)
    for (let c = 0; c < 3; c++) out.push(b[r * 3] * a[c] + b[r * 3 + 1] * a[3 + c] + b[r * 3 + 2] * a[6 + c]);
  return out as unknown as Matrix;
}

export const modulate = (o: Partial<Omit<Extract<Op, { kind: 'modulate' }>, 'kind'>>): Op => ({
  kind: 'modulate',
  brightness: o.brightness ?? 1,
  lightness: o.lightness ?? 0,
  saturation: o.saturation ?? 1,
  hue: o.hue ?? 0,
});

export const diagonal = (r: number, g: number, b: number): Op => ({
  kind: 'recomb',
  matrix: [r, 0, 0, 0, g, 0, 0, 0, b],
});
