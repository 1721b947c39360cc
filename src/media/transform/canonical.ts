// The cache key of a rendition: one stable text for a whole spec. Tokens whose order does not
// matter come in one fixed order (the docs' order of operations), so `q_80,w_720` and
// `w_720,q_80` share a rendition; effects and layers keep the order written, which changes the
// picture (`e_grayscale,e_sepia` is not `e_sepia,e_grayscale`).
import { createHash } from 'node:crypto';
import { canonicalEffect } from './effects.ts';
import { canonicalLayer } from './layers.ts';
import type { Length, OutputFormat, TransformSpec } from './spec.ts';

const len = (l: Length) => (typeof l === 'number' ? String(l) : String(l.fraction));

/** A stable text for `spec` rendered as `format` (no commas inside a layer's own text are added here). */
export function canonical(spec: TransformSpec, format: OutputFormat): string {
  const parts: string[] = [];
  const add = (cond: unknown, text: () => string) => {
    if (cond !== undefined && cond !== false) parts.push(text());
  };
  add(spec.crop, () => `c_${spec.crop}`);
  add(spec.aspectRatio, () => `ar_${spec.aspectRatio?.join('-')}`);
  add(spec.width, () => `w_${len(spec.width as Length)}`);
  add(spec.height, () => `h_${len(spec.height as Length)}`);
  add(spec.position, () => `p_${spec.position}`);
  add(spec.point, () => `ps_${spec.point?.x}-${spec.point?.y}`);
  add(spec.zoom, () => `z_${spec.zoom}`);
  add(spec.dpr, () => `dpr_${spec.dpr}`);
  add(spec.flip, () => `flip_${spec.flip}`);
  add(spec.rotate, () => `r_${spec.rotate}`);
  add(spec.radius, () => `br_${spec.radius}`);
  add(spec.background, () => `bg_${spec.background?.slice(1)}`);
  add(spec.enlarge, () => 'el_1');
  for (const e of spec.effects ?? []) parts.push(canonicalEffect(e));
  for (const l of spec.layers ?? []) parts.push(`[${canonicalLayer(l)}]`);
  add(spec.quality, () => `q_${spec.quality}`);
  parts.push(`f_${format}`);
  return parts.join(',');
}

/**
 * `canonical()` as a storage key and entity-tag part: itself when it is short and holds only what a
 * storage key may (letters, digits, "_", ".", "-"; commas become dots there), else a digest of it
 * (an effect's "e_blur:60", a text layer's any character, an image layer's path).
 */
export function canonicalName(text: string): string {
  if (/^[A-Za-z0-9_.,-]{1,200}$/.test(text)) return text;
  return `x-${createHash('sha256').update(text).digest('hex').slice(0, 40)}`;
}
