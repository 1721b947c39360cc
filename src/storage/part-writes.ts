// Sealing of multipart uploads whose parts are written through the service (local disk, Azure,
// GCS): once complete or abort seals an upload, part writes in flight are cut and awaited, and
// later ones are refused with MultipartSealedError, until it is unsealed. Per process: every
// part write of an upload and its complete run on the node that holds the session.
import { type Readable, Transform } from 'node:stream';
import { xxh3 } from '@node-rs/xxhash';
import { MultipartSealedError, ObjectNotFoundError, PartLengthError } from './driver.ts';

export class PartWriteGate {
  /** Part writes in flight, per upload: what sealing cuts and waits for. */
  private readonly writers = new Map<string, Set<{ cut: AbortController; settled: Promise<unknown> }>>();
  /** Uploads being completed or aborted: part writes are refused. */
  private readonly sealed = new Set<string>();

  async seal(uploadId: string): Promise<void> {
    this.sealed.add(uploadId);
    const running = [...(this.writers.get(uploadId) ?? [])];
    for (const w of running) w.cut.abort(new MultipartSealedError());
    await Promise.allSettled(running.map((w) => w.settled));
  }

  unseal(uploadId: string): void {
    this.sealed.delete(uploadId);
  }

  /**
   * Runs one part write with a signal that the caller's `signal` or a seal aborts. A write cut
   * by a seal fails with MultipartSealedError; any other failure goes through `mapError`.
   */
  async run<T>(
    uploadId: string,
    signal: AbortSignal | undefined,
    write: (signal: AbortSignal) => Promise<T>,
    mapError: (err: unknown) => unknown = (err) => err,
  ): Promise<T> {
    // Registered before the seal is checked: a seal either sees this writer (and cuts it) or
    // came first (and this writer is refused). No third order exists.
    const cut = new AbortController();
    let settle!: () => void;
    const entry = { cut, settled: new Promise<void>((resolve) => (settle = resolve)) };
    let set = this.writers.get(uploadId);
    if (!set) {
      set = new Set();
      this.writers.set(uploadId, set);
    }
    set.add(entry);
    try {
      if (this.sealed.has(uploadId)) throw new MultipartSealedError();
      return await write(signal ? AbortSignal.any([signal, cut.signal]) : cut.signal);
    } catch (err) {
      throw cut.signal.aborted ? new MultipartSealedError() : mapError(err);
    } finally {
      set.delete(entry);
      if (set.size === 0) this.writers.delete(uploadId);
      settle();
    }
  }
}

/**
 * Passes a part's bytes on, failing with PartLengthError as soon as more than `length` arrive
 * or when the body ends short, and computes its ETag as they pass: XXH3-64 in hex, quoted
 * (about 10 GB/s, so it costs the event loop next to nothing). A store that sends the part on
 * with a declared length is thus never left waiting for bytes that will not come. `error` is
 * the length error, when there was one (an HTTP client may report it as something else).
 */
export function partMeter(length: number): {
  stream: Transform;
  check(): void;
  etag(): string;
  readonly error: PartLengthError | undefined;
} {
  const hash = xxh3.Xxh3.withSeed();
  let received = 0;
  let error: PartLengthError | undefined;
  const stream = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      received += chunk.length;
      if (received > length) {
        error = new PartLengthError(length, received);
        return cb(error);
      }
      hash.update(chunk);
      cb(null, chunk);
    },
    flush(cb) {
      if (received !== length) error = new PartLengthError(length, received);
      cb(error ?? null);
    },
  });
  return {
    stream,
    check() {
      if (received !== length) throw new PartLengthError(length, received);
    },
    etag: () => `"${hash.digest().toString(16).padStart(16, '0')}"`,
    get error() {
      return error;
    },
  };
}

/**
 * `body` piped through a partMeter, for a store that reads the part as its request goes (S3's
 * UploadPart, Azure's stageBlock): `failed` aborts once the body fails or its length is wrong,
 * for the request's abort signal, so the store does not wait for the rest.
 */
export function meterBody(
  body: Readable,
  length: number,
): { meter: ReturnType<typeof partMeter>; failed: AbortSignal } {
  const meter = partMeter(length);
  const failed = new AbortController();
  meter.stream.on('error', (err) => failed.abort(err));
  body.once('error', (err) => meter.stream.destroy(err));
  body.pipe(meter.stream);
  return { meter, failed: failed.signal };
}

// --- bookkeeping shared by drivers that keep a multipart upload as objects (Azure, GCS) -----

/** Where such uploads keep their parts and meta; no object key the service makes starts with a dot. */
export const MULTIPART_PREFIX = '.multipart/';
const UPLOAD_ID_RE = /^[0-9a-f-]{36}$/;

/** The part number, zero-padded, so names (and Azure block ids) all have one length. */
export const padPart = (n: number) => String(n).padStart(5, '0');

/** What an upload's `meta` object holds. */
export interface UploadMeta {
  key: string;
  size: number;
  partSize: number;
  contentType?: string;
}

/** The folder of one upload; an id the service could not have made is simply not found. */
export function multipartDir(uploadId: string): string {
  if (!UPLOAD_ID_RE.test(uploadId)) throw new ObjectNotFoundError(`multipart ${uploadId}`);
  return `${MULTIPART_PREFIX}${uploadId}/`;
}

/** Uploads' meta, read once per upload rather than once per part; at most 10,000 kept. */
export class MetaCache {
  private readonly metas = new Map<string, UploadMeta>();
  get(uploadId: string): UploadMeta | undefined {
    return this.metas.get(uploadId);
  }
  set(uploadId: string, meta: UploadMeta): UploadMeta {
    if (this.metas.size >= 10_000) this.metas.delete(this.metas.keys().next().value!);
    this.metas.set(uploadId, meta);
    return meta;
  }
  delete(uploadId: string): void {
    this.metas.delete(uploadId);
  }
}

/** A part that does not belong to this upload's key, or does not fit in its size, is refused. */
export function checkPart(meta: UploadMeta, uploadId: string, key: string, partNumber: number, length: number): void {
  if (meta.key !== key) throw new ObjectNotFoundError(`multipart ${uploadId}`);
  const offset = (partNumber - 1) * meta.partSize;
  if (partNumber < 1 || offset + length > meta.size) throw new PartLengthError(Math.max(0, meta.size - offset), length);
}
