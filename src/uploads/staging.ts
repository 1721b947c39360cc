// Staging, the first step of every upload: the body streams to a new storage object while it
// is hashed (SHA-256), counted against the size limit and the quota, and its first bytes kept
// for type detection. The storage intent is recorded before the first byte is written, so a
// crash leaves at most an intent, which the sweeper turns into a deletion (see blob-store.ts).
import { createHash } from 'node:crypto';
import { type Readable, Transform } from 'node:stream';
import type { BlobRepository } from '../db/blobs.ts';
import { errors } from '../errors.ts';
import { HEAD_BYTES } from '../media/detect.ts';
import type { StorageDriver } from '../storage/driver.ts';
import type { BlobStore } from './blob-store.ts';

/** The body stopped before its end (the client went away, or the form ended inside the file). */
export class IncompleteBodyError extends Error {
  readonly code = 'EINCOMPLETE';
  constructor() {
    super('the body ended before the whole file arrived');
    this.name = 'IncompleteBodyError';
  }
}

export interface Staged {
  workspaceId: string;
  key: string;
  size: number;
  sha256: string;
  /** The first bytes, for type detection and image headers. */
  head: Buffer;
}

export interface StageLimits {
  /** Largest size allowed for this file (413 above). */
  maxFileSize: number;
  /** The workspace's quota in bytes, when it has one: bytes are reserved against it as they stream (402 when they do not fit). */
  quotaBytes?: number | null;
  /**
   * What the body will hold at most, when known (a request's Content-Length): reserved whole
   * before the first byte, so parallel uploads near the quota are served first come, first
   * served instead of all growing into it and all failing.
   */
  expectedBytes?: number;
}

/** What staging uses: the blob store's keys, intents and reservations, and the storage. */
export interface StagingDeps {
  storage: StorageDriver;
  /** Intents untouched this long are taken for dead by the sweeper: the upload touches its own more often. */
  graceMs: number;
  blobs: Pick<BlobStore, 'newKey' | 'recordIntent' | 'reserve' | 'forget'>;
  repo: Pick<BlobRepository, 'touchIntent'>;
}

/**
 * Bodies up to this size are hashed on the main thread as they stream, even where the storage
 * could hash on a thread of its own: about 0.6 ms of SHA-256 in total for the largest, spread over
 * its chunks, against about 0.1 ms of messages between the threads for any size (issue 25).
 */
const HASH_HERE_BELOW = 1024 * 1024;

/** Quota is reserved in steps this large as a body streams (one database update per step). */
const RESERVE_STEP = 8 * 1024 * 1024;

export async function stageBody(
  deps: StagingDeps,
  workspaceId: string,
  body: Readable,
  limits: StageLimits,
  signal?: AbortSignal,
): Promise<Staged> {
  const { storage, blobs } = deps;
  // Already given up on (the form was parsed to its broken end before we got here).
  if (body.destroyed && !body.readableEnded) throw new IncompleteBodyError();
  const key = blobs.newKey(workspaceId);
  const quota = limits.quotaBytes ?? null;
  // The intent must be in the database before the object can exist at `key` (a crash in between
  // leaves it for the sweep to delete). Local disk writes a temporary file and renames it into
  // place: there the insert runs while the bytes are written, and the rename waits for it (one
  // database round trip, and on PostgreSQL its commit's WAL flush, off every upload's time).
  // Quota reservations update the intent, so with a quota it comes first, as on other storage.
  const intent = blobs.recordIntent(workspaceId, key, 'upload');
  const overlap = storage.publishesLate === true && quota === null;
  if (overlap)
    intent.catch(() => {}); // its error reaches put (below), which fails with it
  else await intent;
  // Local disk hashes on its own thread as it writes; otherwise the bytes are hashed here. So are
  // small bodies (by their request's length): for them the thread's messages cost more than the hash.
  const small =
    limits.expectedBytes !== undefined && limits.expectedBytes > 0 && limits.expectedBytes <= HASH_HERE_BELOW;
  const offload = storage.hashesOnPut === true && !small;
  const hash = offload ? undefined : createHash('sha256');
  const headChunks: Buffer[] = [];
  let headLength = 0;
  let size = 0;
  // With a quota, the bytes are reserved ahead of the stream, a step at a time; near the
  // quota, just what is needed. Without one, nothing is written per chunk.
  let reserved = 0;
  // Steps are at most a sixteenth of the quota, so a small quota is not held in big lumps
  // by uploads that turn out small.
  const stepSize = quota === null ? RESERVE_STEP : Math.max(64 * 1024, Math.min(RESERVE_STEP, Math.floor(quota / 16)));
  const reserveUpTo = async (need: number) => {
    const step = Math.max(need - reserved, Math.min(stepSize, limits.maxFileSize - reserved));
    if (await blobs.reserve(workspaceId, key, step, quota!)) reserved += step;
    else if (step > need - reserved && (await blobs.reserve(workspaceId, key, need - reserved, quota!)))
      reserved = need;
    else throw errors.storageLimitExceeded();
  };
  if (
    quota !== null &&
    limits.expectedBytes !== undefined &&
    Number.isSafeInteger(limits.expectedBytes) &&
    limits.expectedBytes > 0
  ) {
    const expected = Math.min(limits.expectedBytes, limits.maxFileSize);
    if (!(await blobs.reserve(workspaceId, key, expected, quota))) {
      await blobs.forget(workspaceId, key);
      throw errors.storageLimitExceeded();
    }
    reserved = expected;
  }
  const meter = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      size += chunk.length;
      if (size > limits.maxFileSize) return cb(errors.fileTooLarge(limits.maxFileSize));
      hash?.update(chunk);
      if (headLength < HEAD_BYTES) {
        headChunks.push(chunk.subarray(0, HEAD_BYTES - headLength));
        headLength += Math.min(chunk.length, HEAD_BYTES - headLength);
      }
      if (quota !== null && size > reserved) {
        reserveUpTo(size).then(() => cb(null, chunk), cb);
        return;
      }
      cb(null, chunk);
    },
  });
  // Errors travel both ways: a failing client fails the write; a failing write (or a limit)
  // stops reading the client.
  // A limit can trip before the driver attaches to the meter (it may open a file first): the
  // error is kept on the stream, where the driver's pipeline finds it, never thrown unheard.
  meter.on('error', () => {});
  const onBodyError = (err: Error) => meter.destroy(err);
  body.once('error', onBodyError);
  // A body destroyed without an error (a multipart parser giving up on a form that ends inside
  // the file) neither ends nor fails: without this the upload would wait forever.
  const onBodyClose = () => {
    if (!body.readableEnded) meter.destroy(new IncompleteBodyError());
  };
  body.once('close', onBodyClose);
  body.pipe(meter);
  // However long the upload takes, its intent stays fresh, so no sweeper takes it for dead.
  const heartbeat = setInterval(
    () => {
      deps.repo.touchIntent(key).catch(() => {});
    },
    Math.max(1000, Math.floor(deps.graceMs / 3)),
  );
  heartbeat.unref();
  let sha256: string | undefined;
  try {
    ({ sha256 } = await storage.put(key, meter, { signal, hash: offload, after: overlap ? intent : undefined }));
  } catch (err) {
    body.unpipe(meter);
    body.off('error', onBodyError);
    body.off('close', onBodyClose);
    // Not before the intent's insert has settled, or the insert could land after the forget.
    await intent.catch(() => {});
    await blobs.forget(workspaceId, key);
    throw err;
  } finally {
    clearInterval(heartbeat);
  }
  body.off('error', onBodyError);
  body.off('close', onBodyClose);
  sha256 ??= hash?.digest('hex');
  if (!sha256) throw new Error('storage stored the bytes without their hash');
  return { workspaceId, key, size, sha256, head: Buffer.concat(headChunks) };
}
