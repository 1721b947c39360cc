// Any S3-compatible service (AWS S3, MinIO, R2, OpenStack Swift's S3 layer). Puts stream
// through @aws-sdk/lib-storage (bounded memory, multipart above one part); multipart uploads
// hand out presigned UploadPart URLs and complete from ListParts, so clients never need to
// read an ETag. Parts can also come through the service (`writePart`, for tus): each is streamed
// to UploadPart with its exact length declared, so no part is held in memory.
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  ListPartsCommand,
  NoSuchKey,
  NotFound,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import type { Readable } from 'node:stream';
import { meterBody, PartWriteGate } from './part-writes.ts';
import { applyBucketCors, checkBucketCors } from './s3-cors.ts';
import { PartPresigner } from './s3-presign.ts';
import {
  assertKey,
  type BucketCors,
  type ByteRange,
  type MultipartStorage,
  type ObjectInfo,
  ObjectNotFoundError,
  type PartInfo,
  type PartToSign,
  type StorageDriver,
} from './driver.ts';

export interface S3Settings {
  endpoint?: string;
  /**
   * Where browsers reach the store, when that is not `endpoint` (Stowage talks to MinIO at
   * http://minio:9000 inside a compose network; browsers PUT parts to https://s3.example.com).
   * Part URLs are presigned for this host; the proxy in front must pass the Host header on.
   */
  publicEndpoint?: string;
  region: string;
  bucket: string;
  accessKeyId?: string;
  secretAccessKey?: string;
  forcePathStyle: boolean;
}

const isMissing = (err: unknown) =>
  err instanceof NoSuchKey ||
  err instanceof NotFound ||
  (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 404;

export class S3Storage implements StorageDriver, MultipartStorage {
  readonly name = 's3' as const;
  readonly description = 'files are in an S3 bucket';
  readonly client: S3Client;
  private readonly bucket: string;
  /** Browsers PUT parts to presigned URLs, so the bucket's CORS must allow them (storage/s3-cors.ts). */
  readonly bucketCors: BucketCors;
  /** The origin of presigned part URLs: the endpoint's, or any AWS bucket host of the region. */
  readonly partUploadOrigin: string;
  private readonly partPresigner: PartPresigner;
  /** Signs for the public endpoint when there is one; never sends a request. */
  private readonly presignClient: S3Client;
  /** Part writes through the service (tus), which complete and abort seal (storage/part-writes.ts). */
  private readonly gate = new PartWriteGate();

  constructor(settings: S3Settings) {
    this.bucket = settings.bucket;
    const clientFor = (endpoint: string | undefined) =>
      new S3Client({
        endpoint,
        region: settings.region,
        forcePathStyle: settings.forcePathStyle,
        credentials: settings.accessKeyId
          ? { accessKeyId: settings.accessKeyId, secretAccessKey: settings.secretAccessKey ?? '' }
          : undefined,
        // Presigned part URLs must not carry checksum parameters a browser cannot compute.
        requestChecksumCalculation: 'WHEN_REQUIRED',
        responseChecksumValidation: 'WHEN_REQUIRED',
      });
    this.client = clientFor(settings.endpoint);
    this.presignClient = settings.publicEndpoint ? clientFor(settings.publicEndpoint) : this.client;
    this.partPresigner = new PartPresigner(this.presignClient, this.bucket);
    const browserEndpoint = settings.publicEndpoint ?? settings.endpoint;
    this.partUploadOrigin = browserEndpoint
      ? new URL(browserEndpoint).origin
      : `https://*.s3.${settings.region}.amazonaws.com`;
    // Messages never hold the credentials.
    const secrets = [settings.accessKeyId, settings.secretAccessKey];
    const bucket = settings.bucket;
    this.bucketCors = {
      bucket,
      check: (opts = {}) => checkBucketCors(this.client, bucket, { ...opts, secrets }),
      apply: (opts = {}) => applyBucketCors(this.client, bucket, { ...opts, secrets }),
    };
  }

  async check(): Promise<void> {
    await this.client.send(new HeadBucketCommand({ Bucket: this.bucket }));
  }

  async put(
    key: string,
    body: Readable,
    opts: { contentType?: string; signal?: AbortSignal } = {},
  ): Promise<{ size: number }> {
    assertKey(key);
    let size = 0;
    body.on('data', (chunk: Buffer) => {
      size += chunk.length;
    });
    // 8 MiB parts, 4 in flight: at most ~32 MiB buffered whatever the file size. S3 makes the
    // object visible only when the upload completes; lib-storage aborts it on failure.
    const upload = new Upload({
      client: this.client,
      params: { Bucket: this.bucket, Key: key, Body: body, ContentType: opts.contentType },
      partSize: 8 * 1024 * 1024,
      queueSize: 4,
      leavePartsOnError: false,
    });
    const onAbort = () => void upload.abort().catch(() => {});
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      await upload.done();
    } finally {
      opts.signal?.removeEventListener('abort', onAbort);
    }
    return { size };
  }

  async get(key: string, range?: ByteRange): Promise<Readable> {
    assertKey(key);
    try {
      const res = await this.client.send(
        new GetObjectCommand({
          Bucket: this.bucket,
          Key: key,
          Range: range ? `bytes=${range.start}-${range.end}` : undefined,
        }),
      );
      return res.Body as Readable;
    } catch (err) {
      if (isMissing(err)) throw new ObjectNotFoundError(key);
      throw err;
    }
  }

  async stat(key: string): Promise<ObjectInfo | null> {
    assertKey(key);
    try {
      const res = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      return { key, size: res.ContentLength ?? 0, lastModified: res.LastModified ?? new Date(0) };
    } catch (err) {
      if (isMissing(err)) return null;
      throw err;
    }
  }

  async delete(key: string): Promise<void> {
    assertKey(key);
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
  }

  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    let token: string | undefined;
    do {
      const res = await this.client.send(
        new ListObjectsV2Command({ Bucket: this.bucket, Prefix: prefix, ContinuationToken: token }),
      );
      for (const o of res.Contents ?? []) {
        if (o.Key) yield { key: o.Key, size: o.Size ?? 0, lastModified: o.LastModified ?? new Date(0) };
      }
      token = res.IsTruncated ? res.NextContinuationToken : undefined;
    } while (token);
  }

  async createMultipart(key: string, opts: { contentType?: string }): Promise<string> {
    assertKey(key);
    const res = await this.client.send(
      new CreateMultipartUploadCommand({ Bucket: this.bucket, Key: key, ContentType: opts.contentType }),
    );
    if (!res.UploadId) throw new Error('storage returned no UploadId');
    return res.UploadId;
  }

  /** Presigned UploadPart URLs, each signed with its part's length (storage/s3-presign.ts). */
  async presignParts(
    key: string,
    uploadId: string,
    parts: readonly PartToSign[],
    expiresInSeconds: number,
    signingDate = new Date(),
  ): Promise<string[]> {
    assertKey(key);
    return this.partPresigner.presign(key, uploadId, parts, expiresInSeconds, signingDate);
  }

  /**
   * One part through the service, streamed to UploadPart: the length is declared up front (as
   * S3 requires), and the meter cuts the request the moment the body runs long or ends short,
   * so S3 never keeps a part of the wrong length. S3 replaces a part sent again whole.
   */
  writePart(
    key: string,
    uploadId: string,
    partNumber: number,
    body: Readable,
    length: number,
    signal?: AbortSignal,
  ): Promise<PartInfo> {
    assertKey(key);
    return this.gate.run(uploadId, signal, async (cut) => {
      const { meter, failed } = meterBody(body, length);
      let etag: string | undefined;
      try {
        const res = await this.client.send(
          new UploadPartCommand({
            Bucket: this.bucket,
            Key: key,
            UploadId: uploadId,
            PartNumber: partNumber,
            ContentLength: length,
            Body: meter.stream,
          }),
          { abortSignal: AbortSignal.any([cut, failed]) },
        );
        etag = res.ETag;
      } catch (err) {
        if (isMissing(err)) throw new ObjectNotFoundError(`multipart ${uploadId}`);
        throw meter.error ?? err;
      }
      meter.check();
      cut.throwIfAborted();
      if (!etag) throw new Error('storage returned no ETag for the part');
      return { partNumber, size: length, etag };
    });
  }

  sealMultipart(uploadId: string): Promise<void> {
    return this.gate.seal(uploadId);
  }

  unsealMultipart(uploadId: string): void {
    this.gate.unseal(uploadId);
  }

  async listParts(key: string, uploadId: string): Promise<PartInfo[]> {
    assertKey(key);
    const parts: PartInfo[] = [];
    let marker: string | undefined;
    try {
      do {
        const res = await this.client.send(
          new ListPartsCommand({ Bucket: this.bucket, Key: key, UploadId: uploadId, PartNumberMarker: marker }),
        );
        for (const p of res.Parts ?? [])
          parts.push({ partNumber: p.PartNumber!, size: p.Size ?? 0, etag: p.ETag ?? '' });
        marker = res.IsTruncated ? res.NextPartNumberMarker : undefined;
      } while (marker);
    } catch (err) {
      if (isMissing(err)) throw new ObjectNotFoundError(`multipart ${uploadId}`);
      throw err;
    }
    return parts.sort((a, b) => a.partNumber - b.partNumber);
  }

  async completeMultipart(key: string, uploadId: string, parts: PartInfo[]): Promise<void> {
    assertKey(key);
    await this.client.send(
      new CompleteMultipartUploadCommand({
        Bucket: this.bucket,
        Key: key,
        UploadId: uploadId,
        MultipartUpload: { Parts: parts.map((p) => ({ PartNumber: p.partNumber, ETag: p.etag })) },
      }),
    );
  }

  async abortMultipart(key: string, uploadId: string): Promise<void> {
    assertKey(key);
    // Part writes of this node in flight end first: none can land after the abort.
    await this.gate.seal(uploadId);
    try {
      await this.client.send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: key, UploadId: uploadId }));
    } catch (err) {
      if (!isMissing(err)) throw err;
    } finally {
      this.gate.unseal(uploadId);
    }
  }

  destroy(): void {
    this.client.destroy();
    if (this.presignClient !== this.client) this.presignClient.destroy();
  }

  close(): void {
    this.destroy();
  }
}
