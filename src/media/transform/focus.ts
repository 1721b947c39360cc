// Smart positions the plan cannot place from the header alone: p_face/fo_face (faces.ts, within
// a time budget; libvips' attention when no face is found) and p_entropy/p_attention where libvips
// cannot apply them itself (c_crop at the image's own scale, z_). Each costs one look at a small
// version of the source (JPEG and WebP shrink while decoding).
import sharp from 'sharp';
import { FaceInputError, faceFocus, findFaces } from '../faces.ts';
import type { RenderPlan, Size, Strategy } from './plan.ts';

export interface FocusOptions {
  maxPixels: number;
  /** The face finder's budget; past it, no face. */
  faceTimeoutMs: number;
  timeoutSeconds?: number;
}

/** Longest side of the image libvips looks at for entropy/attention. */
const LOOK = 512;

/** The centre libvips' `strategy` picks for a `part`-sized crop of the source, in source pixels. */
async function strategyPoint(input: string | Buffer, strategy: Strategy, part: Size, source: Size, opts: FocusOptions) {
  const k = Math.min(1, LOOK / Math.max(source.width, source.height));
  // A box whose cover scale is k: the crop it leaves is `part` at that scale.
  const f = k / Math.max(part.width / source.width, part.height / source.height);
  const width = Math.max(1, Math.round(part.width * f));
  const height = Math.max(1, Math.round(part.height * f));
  let img = sharp(input, { limitInputPixels: opts.maxPixels, failOn: 'error' }).rotate();
  if (opts.timeoutSeconds) img = img.timeout({ seconds: opts.timeoutSeconds });
  const { info } = await img
    .resize({ width, height, fit: 'cover', position: strategy })
    .raw()
    .toBuffer({ resolveWithObject: true });
  const s = Math.max(width / source.width, height / source.height);
  return {
    x: (-(info.cropOffsetLeft ?? 0) + width / 2) / s,
    y: (-(info.cropOffsetTop ?? 0) + height / 2) / s,
  };
}

/** The point `plan.focus` asks for, or undefined when the plan needs none. */
export async function resolveFocus(
  plan: RenderPlan,
  input: string | Buffer,
  source: Size,
  opts: FocusOptions,
): Promise<{ x: number; y: number } | undefined> {
  if (!plan.focus) return undefined;
  if (plan.focus === 'face') {
    // An image the face finder cannot read goes on to attention, which answers for the image.
    const faces = await findFaces(input, { timeoutMs: opts.faceTimeoutMs, maxPixels: opts.maxPixels }).catch(
      (err: unknown) => {
        if (err instanceof FaceInputError) return [];
        throw err;
      },
    );
    const point = faceFocus(faces, source.width, source.height);
    if (point) return point;
  }
  const part = plan.region ?? source;
  return strategyPoint(input, plan.focus === 'entropy' ? 'entropy' : 'attention', part, source, opts);
}
