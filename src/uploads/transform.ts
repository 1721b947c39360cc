// An upload's `transform`: the staged image is decoded, transformed and staged again, and the
// stored file is the transformed image. Runs inside the commit step, before type detection.
import { PassThrough } from 'node:stream';
import sharp from 'sharp';
import { pipeline } from 'node:stream/promises';
import { AppError, appError, errors } from '../errors.ts';
import { detect } from '../media/detect.ts';
import { type RenderSettings, renderDefaults } from '../config.ts';
import { buildPipeline, planRendition, type TransformSpec } from '../media/transform.ts';
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
  // On local disk libvips reads the staged file itself, in strips, instead of gathering it in memory.
  const path = deps.blobs.storage.localPath?.(staged.key);
  // The size from the header, EXIF orientation applied (libvips reads it where image-size could
  // not); still unknown, only the pixel limit applies.
  const size =
    detected.width && detected.height
      ? { width: detected.width, height: detected.height }
      : path
        ? await headerSize(path)
        : undefined;
  const plan = size ? planRendition(spec, size, render) : undefined;
  const { pipeline: img, format } = buildPipeline(
    spec,
    {
      autoFormat: 'webp',
      maxPixels: deps.maxImagePixels,
      plan,
      timeoutSeconds: Math.ceil(render.timeoutMs / 1000),
    },
    path,
  );
  const out = new PassThrough();
  const running = (path ? pipeline(img, out) : pipeline(await deps.blobs.storage.get(staged.key), img, out)).catch(
    (err) => {
      out.destroy(err);
    },
  );
  let result: Staged;
  try {
    result = await deps.blobs.stage(staged.workspaceId, out, await deps.limits(staged.workspaceId));
    await running;
  } catch (err) {
    if (err instanceof AppError) throw err;
    if (/^timeout\b/.test(String((err as Error).message)))
      throw errors.renderTimeout(render.timeoutMs, Math.max(1, Math.ceil(render.timeoutMs / 1000)));
    throw appError(
      'TRANSFORM_FAILED',
      /pixel limit/i.test(String((err as Error).message))
        ? 'the image is larger than the pixel limit'
        : 'the image could not be decoded for transform',
    );
  }
  await deps.blobs.discard(staged);
  return { staged: result, format };
}

async function headerSize(path: string): Promise<{ width: number; height: number } | undefined> {
  try {
    const meta = await sharp(path, { limitInputPixels: false }).metadata();
    return meta.autoOrient ?? (meta.width && meta.height ? { width: meta.width, height: meta.height } : undefined);
  } catch {
    return undefined;
  }
}
