// Google Cloud Storage, one bucket, through its JSON API (`apiEndpoint` for an emulator). An
// object upload is atomic: the object appears when the upload completes, never in part.
// Multipart uploads write each part through the service as an object of its own and complete by
// composing them in storage (see storage/gcs-multipart.ts), so no byte is copied.
import { type Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { type Bucket, Storage } from '@google-cloud/storage';
import {
  assertKey,
  type ByteRange,
  type MultipartStorage,
  type ObjectInfo,
  ObjectNotFoundError,
  type PartInfo,
  type StorageDriver,
} from './driver.ts';
import { GcsMultipart } from './gcs-multipart.ts';
import { MULTIPART_PREFIX } from './part-writes.ts';

export interface GcsSettings {
  bucket: string;
  projectId?: string;
  /** A service account key; absent: Google's application default credentials. */
  credentials?: { client_email: string; private_key: string };
  /** The JSON API's base URL; absent: Google's. */
  apiEndpoint?: string;
}

export const isGcsMissing = (err: unknown) => (err as { code?: unknown }).code === 404;

export class GcsStorage implements StorageDriver, MultipartStorage {
  readonly name = 'gcs' as const;
  readonly description = 'files are in a Google Cloud Storage bucket';
  readonly bucket: Bucket;
  private readonly multipart: GcsMultipart;

  constructor(settings: GcsSettings) {
    this.bucket = new Storage({
      apiEndpoint: settings.apiEndpoint,
      projectId: settings.projectId,
      credentials: settings.credentials,
    }).bucket(settings.bucket);
    this.multipart = new GcsMultipart(this.bucket);
  }

  async check(): Promise<void> {
    await this.bucket.getMetadata();
  }

  async put(
    key: string,
    body: Readable,
    opts: { contentType?: string; signal?: AbortSignal } = {},
  ): Promise<{ size: number }> {
    assertKey(key);
    let size = 0;
    const counter = new Transform({
      transform(chunk: Buffer, _enc, cb) {
        size += chunk.length;
        cb(null, chunk);
      },
    });
    // One request, checked against the MD5 storage computes; a cut stream aborts it, and GCS
    // then keeps no object (and the previous one, if any, intact).
    const sink = this.bucket
      .file(key)
      .createWriteStream({ resumable: false, validation: 'md5', contentType: opts.contentType });
    await pipeline(body, counter, sink, { signal: opts.signal });
    return { size };
  }

  async get(key: string, range?: ByteRange): Promise<Readable> {
    assertKey(key);
    const stream = this.bucket
      .file(key)
      .createReadStream(range ? { start: range.start, end: range.end, validation: false } : { validation: false });
    // The request starts on the first read; its answer decides between a stream and an error.
    await new Promise<void>((resolve, reject) => {
      stream.once('error', (err) => reject(isGcsMissing(err) ? new ObjectNotFoundError(key) : err));
      stream.once('response', (res: { statusCode?: number }) => {
        if ((res.statusCode ?? 0) < 300) resolve();
      });
      stream.read(0);
    });
    return stream;
  }

  async stat(key: string): Promise<ObjectInfo | null> {
    assertKey(key);
    try {
      const [meta] = await this.bucket.file(key).getMetadata();
      return { key, size: Number(meta.size ?? 0), lastModified: new Date(meta.updated ?? 0) };
    } catch (err) {
      if (isGcsMissing(err)) return null;
      throw err;
    }
  }

  async delete(key: string): Promise<void> {
    assertKey(key);
    await this.bucket.file(key).delete({ ignoreNotFound: true });
  }

  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    let pageToken: string | undefined;
    do {
      const [files, next] = await this.bucket.getFiles({ prefix, autoPaginate: false, pageToken });
      for (const f of files) {
        // Multipart parts are not objects.
        if (f.name.startsWith(MULTIPART_PREFIX)) continue;
        yield { key: f.name, size: Number(f.metadata.size ?? 0), lastModified: new Date(f.metadata.updated ?? 0) };
      }
      pageToken = (next as { pageToken?: string } | null)?.pageToken;
    } while (pageToken);
  }

  // --- multipart: parts through the service, joined by compose -------------------------------

  createMultipart(key: string, opts: { contentType?: string; size: number; partSize: number }): Promise<string> {
    assertKey(key);
    return this.multipart.create(key, opts);
  }

  writePart(
    key: string,
    uploadId: string,
    partNumber: number,
    body: Readable,
    length: number,
    signal?: AbortSignal,
  ): Promise<PartInfo> {
    return this.multipart.writePart(key, uploadId, partNumber, body, length, signal);
  }

  listParts(_key: string, uploadId: string): Promise<PartInfo[]> {
    return this.multipart.listParts(uploadId);
  }

  sealMultipart(uploadId: string): Promise<void> {
    return this.multipart.gate.seal(uploadId);
  }

  unsealMultipart(uploadId: string): void {
    this.multipart.gate.unseal(uploadId);
  }

  completeMultipart(key: string, uploadId: string, parts: PartInfo[]): Promise<void> {
    return this.multipart.complete(key, uploadId, parts);
  }

  abortMultipart(_key: string, uploadId: string): Promise<void> {
    return this.multipart.abort(uploadId);
  }
}
