// Any S3-compatible service (AWS S3, MinIO, R2, OpenStack Swift's S3 layer). Puts stream
// through @aws-sdk/lib-storage (bounded memory, multipart above one part); multipart uploads
// hand out presigned UploadPart URLs and complete from ListParts, so clients never need to
// read an ETag.
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
import { getSignedUrl, S3RequestPresigner } from '@aws-sdk/s3-request-presigner';
import type { Readable } from 'node:stream';
import { applyBucketCors, checkBucketCors } from './s3-cors.ts';
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
  region: string;
  bucket: string;
  accessKeyId?: string;
  secretAccessKey?: string;
  forcePathStyle: boolean;
}

/** The SDK's query encoding (RFC 3986, keys sorted), so URLs read as getSignedUrl writes them. */
const escapeUri = (s: string) =>
  encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
const queryString = (query: Record<string, string>) =>
  Object.keys(query)
    .sort()
    .map((k) => `${escapeUri(k)}=${escapeUri(query[k])}`)
    .join('&');

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
  /** Part URL presigners by signing region and service (see presignParts). */
  private readonly presigners = new Map<string, S3RequestPresigner>();

  constructor(settings: S3Settings) {
    this.bucket = settings.bucket;
    this.client = new S3Client({
      endpoint: settings.endpoint,
      region: settings.region,
      forcePathStyle: settings.forcePathStyle,
      credentials: settings.accessKeyId
        ? { accessKeyId: settings.accessKeyId, secretAccessKey: settings.secretAccessKey ?? '' }
        : undefined,
      // Presigned part URLs must not carry checksum parameters a browser cannot compute.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
    this.partUploadOrigin = settings.endpoint
      ? new URL(settings.endpoint).origin
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

  /**
   * Presigned UploadPart URLs. The first goes through the SDK's whole presign path, which
   * resolves the endpoint, the addressing style and the signing region exactly as for a real
   * request; the others are that request with another part number and length, signed by the
   * SDK's presigner directly. getSignedUrl costs about eight times as much per URL (it runs the
   * client's middleware stack and endpoint rules each time), which a 10,000-part upload felt
   * as seconds of event-loop time. `signingDate` is for tests that compare with getSignedUrl.
   */
  async presignParts(
    key: string,
    uploadId: string,
    parts: readonly PartToSign[],
    expiresInSeconds: number,
    signingDate = new Date(),
  ): Promise<string[]> {
    assertKey(key);
    if (parts.length === 0) return [];
    // The length is signed: storage refuses a part of any other size.
    const options = { expiresIn: expiresInSeconds, signableHeaders: new Set(['content-length']), signingDate };
    const command = (p: PartToSign) =>
      new UploadPartCommand({
        Bucket: this.bucket,
        Key: key,
        UploadId: uploadId,
        PartNumber: p.partNumber,
        ContentLength: p.length,
      });
    const first = await getSignedUrl(this.client, command(parts[0]), options);
    const urls = [first];
    if (parts.length === 1) return urls;

    const url = new URL(first);
    // <access key>/<date>/<region>/<service>/aws4_request, as the SDK resolved them.
    const scope = (url.searchParams.get('X-Amz-Credential') ?? '').split('/');
    const [region, service] = scope.slice(-3, -1);
    if (scope.length < 5 || !region || !service) throw new Error('presigned URL without a credential scope');
    const query: Record<string, string> = {};
    for (const [k, v] of url.searchParams) if (!k.startsWith('X-Amz-')) query[k] = v;
    // The path exactly as the SDK encoded it (not re-parsed).
    const path = first.slice(first.indexOf('/', url.protocol.length + 2), first.indexOf('?'));
    const port = url.port ? Number(url.port) : undefined;
    const presigner = this.presigner(region, service);
    for (let i = 1; i < parts.length; i++) {
      const p = parts[i];
      // 75 to 150 µs each here: a 10,000-part start lets other requests in every 256 URLs.
      if (i % 256 === 0) await new Promise<void>((resolve) => setImmediate(resolve));
      const signed = await presigner.presign(
        {
          protocol: url.protocol,
          hostname: url.hostname,
          port,
          method: 'PUT',
          path,
          query: { ...query, partNumber: String(p.partNumber) },
          headers: { host: url.host, 'content-length': String(p.length) },
        },
        { ...options, signingRegion: region, signingService: service },
      );
      urls.push(
        `${signed.protocol}//${signed.hostname}${signed.port ? `:${signed.port}` : ''}${signed.path}?${queryString(signed.query as Record<string, string>)}`,
      );
    }
    return urls;
  }

  private presigner(region: string, service: string): S3RequestPresigner {
    const id = `${region}/${service}`;
    let presigner = this.presigners.get(id);
    if (!presigner) {
      // As getSignedUrl builds it: the client's credentials and hash, the resolved scope.
      presigner = new S3RequestPresigner({
        ...this.client.config,
        signingName: service,
        region: async () => region,
      } as ConstructorParameters<typeof S3RequestPresigner>[0]);
      this.presigners.set(id, presigner);
    }
    return presigner;
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
    try {
      await this.client.send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: key, UploadId: uploadId }));
    } catch (err) {
      if (!isMissing(err)) throw err;
    }
  }

  destroy(): void {
    this.client.destroy();
  }

  close(): void {
    this.destroy();
  }
}
