// The sharp (libvips) pipeline of a rendition, from its checked plan (plan.ts). The resize comes
// first, in the pipeline that decodes the source, so libvips can shrink JPEG and WebP while
// decoding; flip and rotation follow on the resized pixels (a second pipeline over them, as sharp
// would otherwise rotate before resizing), then effects (effects.ts), then one composite of the
// layers (layers.ts) and the rounded corners, then the background, then the encoder.
import sharp, { type OverlayOptions, type Sharp } from 'sharp';
import { errors } from '../../errors.ts';
import { applyEffects } from './effects.ts';
import { type LayerContext, layerOverlays } from './layers.ts';
import type { RenderPlan } from './plan.ts';
import type { Compass, OutputFormat, TransformSpec } from './spec.ts';

export interface RenderOptions {
  /** The encoder (f_auto and "as the source" already resolved by the caller). */
  format: OutputFormat;
  /** Decoding stops above this many pixels (decompression bombs). */
  maxPixels: number;
  /** libvips stops each pass after this many seconds (sharp's timeout; 0 = never). */
  timeoutSeconds?: number;
  /** Where image layers come from; without it an image layer is refused. */
  loadImage?: LayerContext['loadImage'];
}

const GRAVITY: Record<Compass, string> = {
  c: 'centre',
  t: 'north',
  b: 'south',
  l: 'west',
  r: 'east',
  tl: 'northwest',
  tr: 'northeast',
  bl: 'southwest',
  br: 'southeast',
};
const WITH_ALPHA = new Set<OutputFormat>(['webp', 'avif', 'png', 'gif', 'tiff']);

/** The format a stored image of `mime` is rendered to when no f_ asks otherwise. */
export function formatOfMime(mime: string): OutputFormat {
  if (mime === 'image/png') return 'png';
  if (mime === 'image/webp') return 'webp';
  if (mime === 'image/avif') return 'avif';
  if (mime === 'image/gif') return 'gif';
  return 'jpg';
}

async function rawPass(img: Sharp, opts: RenderOptions): Promise<Sharp> {
  const { data, info } = await img.raw().toBuffer({ resolveWithObject: true });
  const next = sharp(data, { raw: { width: info.width, height: info.height, channels: info.channels } });
  return opts.timeoutSeconds ? next.timeout({ seconds: opts.timeoutSeconds }) : next;
}

function roundedMask(plan: RenderPlan): OverlayOptions {
  const { rx, ry } = plan.radius as { rx: number; ry: number };
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${plan.width}" height="${plan.height}"><rect width="${plan.width}" height="${plan.height}" rx="${rx}" ry="${ry}"/></svg>`;
  return { input: Buffer.from(svg), blend: 'dest-in' };
}

function encode(img: Sharp, spec: TransformSpec, format: OutputFormat): Sharp {
  const q = spec.quality === 'auto' ? undefined : spec.quality;
  switch (format) {
    case 'webp':
      return img.webp({ quality: q ?? 80 });
    case 'avif':
      return img.avif({ quality: q ?? 55 });
    case 'jpg':
      return img.jpeg({ quality: q ?? 80, mozjpeg: true });
    case 'png':
      return img.png();
    case 'gif':
      return img.gif();
    case 'tiff':
      return img.tiff({ quality: q ?? 80 });
  }
}

/**
 * The rendition of `input` (a file path or bytes) as a sharp pipeline ready to be read: `plan`
 * from planRendition for this source (with its focus resolved, focus.ts).
 */
export async function renderImage(
  spec: TransformSpec,
  plan: RenderPlan,
  input: string | Buffer,
  opts: RenderOptions,
): Promise<Sharp> {
  let img = sharp(input, { limitInputPixels: opts.maxPixels, failOn: 'error', sequentialRead: true }).rotate();
  if (opts.timeoutSeconds) img = img.timeout({ seconds: opts.timeoutSeconds });
  if (plan.region) img = img.extract(plan.region);
  const r = plan.resize;
  if (r)
    img = img.resize({
      width: r.width,
      height: r.height,
      fit: r.fit,
      position: r.strategy ?? GRAVITY[r.gravity ?? 'c'],
      background: spec.background ?? '#ffffff',
    });
  if (plan.angle || spec.flip) {
    img = await rawPass(img, opts);
    // sharp mirrors before it rotates, whatever the call order: the docs' order (flip, then rotate).
    if (plan.angle) img = img.rotate(plan.angle, { background: spec.background ?? '#00000000' });
    if (spec.flip === 'v' || spec.flip === 'hv') img = img.flip();
    if (spec.flip === 'h' || spec.flip === 'hv') img = img.flop();
  }
  const size = { width: plan.width, height: plan.height };
  const compositeAfter = (spec.layers?.length ?? 0) > 0 || plan.radius !== undefined;
  img = await applyEffects(img, spec.effects ?? [], { ...size, timeoutSeconds: opts.timeoutSeconds, compositeAfter });
  const overlays = await layerOverlays(spec.layers ?? [], size, {
    loadImage:
      opts.loadImage ??
      (async (path) => {
        throw errors.validation(`transform: an image layer (${path.slice(0, 60)}) needs a stored file to read`);
      }),
    maxPixels: opts.maxPixels,
    timeoutSeconds: opts.timeoutSeconds,
  });
  if (plan.radius) overlays.push(roundedMask(plan));
  // Rounded corners of a JPEG would be black: they take the background, white unless bg_ says.
  const background = spec.background ?? (plan.radius && !WITH_ALPHA.has(opts.format) ? '#ffffff' : undefined);
  if (overlays.length > 0) {
    img = img.composite(overlays);
    // sharp flattens before compositing: the background goes under the composited pixels in a pass of its own.
    if (background) img = (await rawPass(img, opts)).flatten({ background });
  } else if (background && spec.crop !== 'pad') img = img.flatten({ background });
  return encode(img, spec, opts.format);
}
