// The storage interface every back end implements: local disk (storage/local.ts) and any
// S3-compatible service (storage/s3.ts). Both pass one contract suite
// (test/storage-contract.test.ts). Keys are relative paths chosen by the service
// (`[A-Za-z0-9._/-]`, no `..`), never raw user input.
import type { Readable } from 'node:stream';

export interface ObjectInfo {
  key: string;
  size: number;
  lastModified: Date;
}

/** Inclusive byte range, as in HTTP Range. */
export interface ByteRange {
  start: number;
  end: number;
}

/** A part write to an upload that complete or abort has sealed (see MultipartStorage.sealMultipart). */
export class MultipartSealedError extends Error {
  constructor() {
    super('this multipart upload is being completed or aborted; its parts can no longer change');
    this.name = 'MultipartSealedError';
  }
}

export class ObjectNotFoundError extends Error {
  readonly code = 'ENOENT';
  constructor(key: string) {
    super(`no object at ${key}`);
    this.name = 'ObjectNotFoundError';
  }
}

export interface StorageDriver {
  readonly name: 'local' | 's3';
  /** Throws when the storage does not answer or cannot be written. */
  check(): Promise<void>;
  /**
   * Streams `body` to `key`. Atomic: readers see no object or the whole object, never part of
   * it; if the stream fails or `signal` aborts, nothing is left behind. `durable: false` skips
   * the flush to disk, for what can be made again (rendition caches).
   */
  put(
    key: string,
    body: Readable,
    opts?: { contentType?: string; signal?: AbortSignal; durable?: boolean; hash?: boolean },
  ): Promise<{ size: number; sha256?: string }>;
  /**
   * True when `put(…, { hash: true })` returns the SHA-256 of what it stored, computed off the
   * main thread; the caller then does not hash.
   */
  readonly hashesOnPut?: boolean;
  /** Throws ObjectNotFoundError when there is no such object. */
  get(key: string, range?: ByteRange): Promise<Readable>;
  stat(key: string): Promise<ObjectInfo | null>;
  /** Idempotent. */
  delete(key: string): Promise<void>;
  list(prefix: string): AsyncIterable<ObjectInfo>;
  /** Local disk only: the file behind a key, for readers (libvips) that open files themselves. */
  localPath?(key: string): string;
}

export interface PartToSign {
  partNumber: number;
  length: number;
}

export interface PartInfo {
  partNumber: number;
  size: number;
  /** Quoted, as S3 writes it. */
  etag: string;
}

/**
 * Multipart uploads: optional capability (see `supportsMultipart`). Parts go straight to
 * storage (S3 presigned URLs) or through the service (local disk, `writePart`).
 */
export interface MultipartStorage {
  createMultipart(key: string, opts: { contentType?: string; size: number; partSize: number }): Promise<string>;
  /**
   * S3: presigned UploadPart URLs, one per `{partNumber, length}` asked for, in that order, each
   * signed for exactly that length. Drivers without it get parts through `writePart`.
   */
  presignParts?(
    key: string,
    uploadId: string,
    parts: readonly PartToSign[],
    expiresInSeconds: number,
  ): Promise<string[]>;
  /** Local disk: writes one part in place; must receive exactly `length` bytes. */
  writePart?(
    key: string,
    uploadId: string,
    partNumber: number,
    body: Readable,
    length: number,
    signal?: AbortSignal,
  ): Promise<PartInfo>;
  listParts(key: string, uploadId: string): Promise<PartInfo[]>;
  /** Local disk: the file that holds the parts, part n at (n - 1) * partSize (hashed in place). */
  multipartDataPath?(uploadId: string): string;
  /**
   * Stores whose parts are written through the service (local disk): from now on no byte of
   * this upload changes. Part writes in flight are cut (their parts then count as missing) and
   * awaited until nothing more can reach the disk; later ones fail with MultipartSealedError,
   * until `unsealMultipart` (a complete that found parts missing gives the session back).
   */
  sealMultipart?(uploadId: string): Promise<void>;
  unsealMultipart?(uploadId: string): void;
  /** Makes the object visible at `key` from all parts, in order. */
  completeMultipart(key: string, uploadId: string, parts: PartInfo[]): Promise<void>;
  /** Frees every stored part. Idempotent. */
  abortMultipart(key: string, uploadId: string): Promise<void>;
}

export const supportsMultipart = (driver: StorageDriver): driver is StorageDriver & MultipartStorage =>
  typeof (driver as Partial<MultipartStorage>).createMultipart === 'function';

const KEY_RE = /^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/;

/** Keys are made by the service; this guards against a bug ever turning one into a path escape. */
export function assertKey(key: string): void {
  if (!KEY_RE.test(key) || key.split('/').some((s) => s === '.' || s === '..') || key.length > 1024) {
    throw new Error(`invalid storage key: ${JSON.stringify(key).slice(0, 80)}`);
  }
}
