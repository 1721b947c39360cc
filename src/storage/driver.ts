// The storage interface every back end implements: local disk (storage/local.ts), any
// S3-compatible service (storage/s3.ts), Azure Blob Storage (storage/azure.ts) and Google Cloud
// Storage (storage/gcs.ts). All pass one contract suite (test/storage-contract.test.ts). Keys are
// relative paths chosen by the service (`[A-Za-z0-9._/-]`, no `..`), never raw user input.
//
// What differs between back ends is said by capabilities (optional members, see
// `capabilitiesOf`), never by the driver's kind: callers ask "can it presign parts?", not "is it
// S3?". Which driver a configuration gets is decided in one place only (storage/open.ts).
import type { Readable } from 'node:stream';
import type { CorsApply, CorsCheck, CorsOptions } from './s3-cors.ts';

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

/** A part written through the service that is longer or shorter than declared. */
export class PartLengthError extends Error {
  readonly code = 'EPARTLENGTH';
  constructor(
    public readonly expected: number,
    public readonly received: number,
  ) {
    super(`part must be exactly ${expected} bytes; ${received > expected ? 'more' : `only ${received}`} arrived`);
    this.name = 'PartLengthError';
  }
}

export class ObjectNotFoundError extends Error {
  readonly code = 'ENOENT';
  constructor(key: string) {
    super(`no object at ${key}`);
    this.name = 'ObjectNotFoundError';
  }
}

/** The configured back end (STOWAGE_STORAGE); for messages and metrics only, never to branch on. */
export type StorageKind = 'local' | 's3' | 'azure' | 'gcs';

/** A bucket's CORS, which browsers need to PUT parts straight to storage (storage/s3-cors.ts). */
export interface BucketCors {
  /** The bucket checked, for messages. */
  readonly bucket: string;
  /** Whether browsers on `origins` can PUT parts and read their ETag. Never throws for a storage error. */
  check(opts?: Omit<CorsOptions, 'secrets'>): Promise<CorsCheck>;
  /** Adds Stowage's rule in front of the bucket's own unless they already allow part uploads. */
  apply(opts?: Omit<CorsOptions, 'secrets'>): Promise<CorsApply>;
}

export interface StorageDriver {
  readonly name: StorageKind;
  /** For people: where files are, as in "files are on local disk". */
  readonly description: string;
  /** Prepares the store (folders); called once before use. */
  init?(): Promise<void>;
  /** Frees connections and sockets; the driver is not used afterwards. */
  close?(): void | Promise<void>;
  /** Throws when the storage does not answer or cannot be written. */
  check(): Promise<void>;
  /**
   * Streams `body` to `key`. Atomic: readers see no object or the whole object, never part of
   * it; if the stream fails or `signal` aborts, nothing is left behind. `durable: false` skips
   * the flush to disk, for what can be made again (rendition caches). `after`, for a driver that
   * `publishesLate`: the object appears at `key` only once it has settled, and put fails with
   * its error if it rejects.
   */
  put(
    key: string,
    body: Readable,
    opts?: { contentType?: string; signal?: AbortSignal; durable?: boolean; hash?: boolean; after?: Promise<unknown> },
  ): Promise<{ size: number; sha256?: string }>;
  /**
   * True when put writes somewhere else first and makes the object appear at its key at the end
   * (local disk: a temporary file, then a rename), honouring `after`: what must be recorded
   * before the object exists can then be recorded while the bytes are written.
   */
  readonly publishesLate?: boolean;
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
  /** Stores on a disk of this machine: the file behind a key, for readers (libvips) that open files themselves. */
  localPath?(key: string): string;
  /** Stores on a disk of this machine: bytes an unprivileged writer may still use there. */
  freeSpace?(): Promise<number>;
  /** Stores whose bucket needs CORS for browser part uploads (S3): check and apply it. */
  readonly bucketCors?: BucketCors;
  /** Where browsers send parts (presigned URLs), for the dashboard's connect-src. */
  readonly partUploadOrigin?: string;
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
  /** False when completing copies the parts through the service (no driver does today). */
  readonly concatenatesInStorage?: boolean;
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

/** What a driver can do, for callers and the contract suite to ask instead of its kind. */
export interface StorageCapabilities {
  /** Multipart uploads (createMultipart, listParts, completeMultipart, abortMultipart). */
  multipart: boolean;
  /** Clients PUT parts straight to storage at presigned URLs (`presignParts`). */
  presignParts: boolean;
  /** Parts go through the service (`writePart`). */
  writePart: boolean;
  /** `get(key, range)` reads only the bytes asked for (every driver). */
  readRange: boolean;
  /** A file path behind each key (`localPath`) and the free space of its disk (`freeSpace`). */
  localPath: boolean;
  freeSpace: boolean;
  /** Completing a multipart upload joins the parts inside storage: no byte passes through the service. */
  serverSideConcat: boolean;
  /** The bucket's CORS can be checked and applied (`bucketCors`). */
  bucketCors: boolean;
}

export function capabilitiesOf(driver: StorageDriver): StorageCapabilities {
  const multipart = supportsMultipart(driver);
  return {
    multipart,
    presignParts: multipart && typeof driver.presignParts === 'function',
    writePart: multipart && typeof driver.writePart === 'function',
    readRange: true,
    localPath: typeof driver.localPath === 'function',
    freeSpace: typeof driver.freeSpace === 'function',
    // Every multipart driver here completes inside storage (a rename, S3's complete, Azure's block
    // list, GCS's compose); a driver that has to copy parts through the service would say false.
    serverSideConcat: multipart && driver.concatenatesInStorage !== false,
    bucketCors: driver.bucketCors !== undefined,
  };
}

const KEY_RE = /^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/;

/** Keys are made by the service; this guards against a bug ever turning one into a path escape. */
export function assertKey(key: string): void {
  if (!KEY_RE.test(key) || key.split('/').some((s) => s === '.' || s === '..') || key.length > 1024) {
    throw new Error(`invalid storage key: ${JSON.stringify(key).slice(0, 80)}`);
  }
}
