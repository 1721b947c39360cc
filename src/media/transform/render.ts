import type { LayerContext } from './layers.ts';
// The steps every render takes between a parsed spec and its pipeline, in one place for delivery,
// upload transforms, the tests and the docs' example images: the checked plan, the smart position
// it may need (focus.ts), the plan again around that point.
import sharp from 'sharp';
import type { RenderSettings } from '../../config.ts';
import { withHints } from './client-hints.ts';
import { resolveFocus } from './focus.ts';
import { parseTransform } from './parse.ts';
import { formatOfMime, renderImage } from './pipeline.ts';
import { planRendition, type RenderPlan, type Size } from './plan.ts';
import type { OutputFormat, TransformSpec } from './spec.ts';

type Limits = Pick<RenderSettings, 'maxMegapixels' | 'maxSide' | 'timeoutMs' | 'faceTimeoutMs'>;

/** The plan for `input`, its smart position found: what renderImage is given. */
export async function focusedPlan(
  spec: TransformSpec,
  checked: RenderPlan,
  input: string | Buffer,
  size: Size,
  opts: { limits: Limits; maxPixels: number },
): Promise<RenderPlan> {
  const focus = await resolveFocus(checked, input, size, {
    maxPixels: opts.maxPixels,
    faceTimeoutMs: opts.limits.faceTimeoutMs ?? Math.min(opts.limits.timeoutMs / 4, 2000),
    timeoutSeconds: Math.ceil(opts.limits.timeoutMs / 1000),
  });
  return focus ? planRendition(spec, size, opts.limits, focus) : checked;
}

/**
 * Transformation `text` applied to `input`, encoded: the real parser, plan and pipeline without
 * storage or HTTP (tests, scripts/gen-transformation-examples.ts). Throws what delivery would answer.
 */
export async function renderTransform(
  text: string,
  input: string | Buffer,
  opts: { limits: Limits; maxPixels: number; format?: OutputFormat; loadImage?: LayerContext['loadImage'] },
): Promise<{ data: Buffer; plan: RenderPlan; format: OutputFormat }> {
  const { spec } = withHints(parseTransform(text));
  const meta = await sharp(input).metadata();
  const size = meta.autoOrient ?? { width: meta.width ?? 0, height: meta.height ?? 0 };
  const format =
    opts.format ?? (spec.format === 'auto' ? 'webp' : (spec.format ?? formatOfMime(`image/${meta.format}`)));
  const plan = await focusedPlan(spec, planRendition(spec, size, opts.limits), input, size, opts);
  const img = await renderImage(spec, plan, input, {
    format,
    maxPixels: opts.maxPixels,
    timeoutSeconds: Math.ceil(opts.limits.timeoutMs / 1000),
    loadImage: opts.loadImage,
  });
  return { data: await img.toBuffer(), plan, format };
}
