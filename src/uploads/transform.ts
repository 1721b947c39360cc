// An upload's `transform`: the staged image is decoded, transformed and staged again, and the
// stored file is the transformed image. Runs inside the commit step, before type detection.
import { PassThrough } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { AppError, appError, errors } from '../errors.ts';
import { detect } from '../media/detect.ts';
import { buildPipeline, type TransformSpec } from '../media/transform.ts';
import type { BlobStore } from './blob-store.ts';
import type { StageLimits, Staged } from './staging.ts';

export interface TransformDeps {
  blobs: BlobStore;
  maxImagePixels: number;
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
  const { pipeline: img, format } = buildPipeline(spec, {
    autoFormat: 'webp',
    maxPixels: deps.maxImagePixels,
  });
  const source = await deps.blobs.storage.get(staged.key);
  const out = new PassThrough();
  const running = pipeline(source, img, out).catch((err) => {
    out.destroy(err);
  });
  let result: Staged;
  try {
    result = await deps.blobs.stage(staged.workspaceId, out, await deps.limits(staged.workspaceId));
    await running;
  } catch (err) {
    if (err instanceof AppError) throw err;
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
