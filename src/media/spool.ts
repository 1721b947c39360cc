// A stream written to a file of its own before sharp reads it: sharp gathers a stream whole into
// memory before decoding it, and reads a file in strips. Bounded as it comes.
import { randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { type Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { AppError, appError } from '../errors.ts';

const ready = new Map<string, Promise<unknown>>();

/**
 * `body` as a new file in `dir` (its path); IMAGE_TOO_LARGE past `maxBytes`, TRANSFORM_FAILED when
 * it cannot be read. The caller removes the file.
 */
export async function spoolToFile(body: Readable, dir: string, maxBytes: number): Promise<string> {
  if (!ready.has(dir)) ready.set(dir, mkdir(dir, { recursive: true }));
  await ready.get(dir);
  const path = join(dir, randomUUID());
  let seen = 0;
  const bound = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      seen += chunk.length;
      cb(seen > maxBytes ? appError('IMAGE_TOO_LARGE') : null, chunk);
    },
  });
  try {
    await pipeline(body, bound, createWriteStream(path, { flags: 'wx' }));
  } catch (err) {
    await rm(path, { force: true });
    if (err instanceof AppError) throw err;
    throw appError('TRANSFORM_FAILED', 'the image could not be read');
  }
  return path;
}

/** No image within the pixel limit needs more than 8 bytes a pixel even uncompressed (16-bit RGBA). */
export const spoolLimit = (maxPixels: number) => maxPixels * 8 + 1024 * 1024;
