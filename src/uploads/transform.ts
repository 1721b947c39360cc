// An upload's `transform`: the staged image is decoded, transformed and staged again, and the
// stored file is the transformed image. Runs inside the commit step, before type detection.
import { PassThrough } from 'node:stream';
import sharp from 'sharp';
import { pipeline } from 'node:stream/promises';
import { AppError, appError, errors } from '../errors.ts';
import { detect } from '../media/detect.ts';
import { type RenderSettings, renderDefaults } from '../config.ts';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { withHints } from '../media/transform/client-hints.ts';
import { focusedPlan } from '../media/transform/render.ts';
import { formatOfMime, renderImage } from '../media/transform/pipeline.ts';
import { planRendition } from '../media/transform/plan.ts';
import type { TransformSpec } from '../media/transform/spec.ts';
import { spoolLimit, spoolToFile } from '../media/spool.ts';
import type { BlobStore } from './blob-store.ts';
import type { StageLimits, Staged } from './staging.ts';

export interface TransformDeps {
  blobs: BlobStore;
  maxImagePixels: number;
  /** The same output, effect and time bounds as delivery (STOWAGE_RENDER_*); the defaults when not given. */
  render?: RenderSettings;
  /** The limits for the next upload to the workspace (the transformed image is one). */
  limits(workspaceId: string): Promise<StageLimits>;
}

/** The transformed image, staged (the original is discarded), and its format when it changed. */
export async function transformStaged(
  deps: TransformDeps,
  staged: Staged,
  spec: TransformSpec,
): Promise<{ staged: Staged; format: string | null }> {
  const detected = await detect(staged.head, 'upload');
  if (!detected.mime_type.startsWith('image/') || detected.mime_type === 'image/svg+xml') throw errors.notAnImage();
  const render = deps.render ?? renderDefaults();
  const seconds = Math.ceil(render.timeoutMs / 1000);
  // On local disk libvips reads the staged file itself, in strips; elsewhere it is copied to a
  // file first (sharp would gather a stream whole into memory).
  const local = deps.blobs.storage.localPath?.(staged.key);
  const path =
    local ??
    (await spoolToFile(
      await deps.blobs.storage.get(staged.key),
      join(tmpdir(), 'stowage-transforms'),
      spoolLimit(deps.maxImagePixels),
    ));
  // No request here: dpr_auto is 1, and no default width.
  const resolved = withHints(spec).spec;
  const format =
    resolved.format === 'auto'
      ? 'webp'
      : (resolved.format ?? (detected.mime_type === 'image/tiff' ? 'tiff' : formatOfMime(detected.mime_type)));
  const out = new PassThrough();
  let result: Staged;
  try {
    // The size from the header, EXIF orientation applied (libvips reads it where image-size could not).
    const size = (await headerSize(path)) ?? { width: detected.width ?? 0, height: detected.height ?? 0 };
    if (!size.width || !size.height) throw appError('TRANSFORM_FAILED', 'the image could not be decoded for transform');
    const checked = planRendition(resolved, size, render);
    const plan = await focusedPlan(resolved, checked, path, size, { limits: render, maxPixels: deps.maxImagePixels });
    const img = await renderImage(resolved, plan, path, {
      format,
      maxPixels: deps.maxImagePixels,
      timeoutSeconds: seconds,
    });
    const running = pipeline(img, out).catch((err) => {
      out.destroy(err);
    });
    result = await deps.blobs.stage(staged.workspaceId, out, await deps.limits(staged.workspaceId));
    await running;
  } catch (err) {
    out.destroy();
    if (err instanceof AppError) throw err;
    if (/^timeout\b/.test(String((err as Error).message)))
      throw errors.renderTimeout(render.timeoutMs, Math.max(1, Math.ceil(render.timeoutMs / 1000)));
    throw appError(
      'TRANSFORM_FAILED',
      /pixel limit/i.test(String((err as Error).message))
        ? 'the image is larger than the pixel limit'
        : 'the image could not be decoded for transform',
    );
  } finally {
    if (!local) await rm(path, { force: true });
  }
  await deps.blobs.discard(staged);
  return { staged: result, format: spec.format ? format : null };
}

async function headerSize(path: string): Promise<{ width: number; height: number } | undefined> {
  try {
    const meta = await sharp(path, { limitInputPixels: false }).metadata();
    return meta.autoOrient ?? (meta.width && meta.height ? { width: meta.width, height: meta.height } : undefined);
  } catch {
    return undefined;
  }
}
