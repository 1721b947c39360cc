// Presigned UploadPart URLs for S3 multipart uploads, many at once: browsers PUT parts straight
// to storage. The first URL is the SDK's own (getSignedUrl); the rest are derived from it and
// signed by the SDK's presigner directly, which is about eight times cheaper per URL.
import { type S3Client, UploadPartCommand } from '@aws-sdk/client-s3';
import { getSignedUrl, S3RequestPresigner } from '@aws-sdk/s3-request-presigner';
import type { PartToSign } from './driver.ts';

/** The SDK's query encoding (RFC 3986, keys sorted), so URLs read as getSignedUrl writes them. */
const escapeUri = (s: string) =>
  encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
const queryString = (query: Record<string, string>) =>
  Object.keys(query)
    .sort()
    .map((k) => `${escapeUri(k)}=${escapeUri(query[k])}`)
    .join('&');

export class PartPresigner {
  /** Presigners by signing region and service (see presign). */
  private readonly presigners = new Map<string, S3RequestPresigner>();

  constructor(
    private readonly client: S3Client,
    private readonly bucket: string,
  ) {}

  /**
   * Presigned UploadPart URLs. The first goes through the SDK's whole presign path, which
   * resolves the endpoint, the addressing style and the signing region exactly as for a real
   * request; the others are that request with another part number and length, signed by the
   * SDK's presigner directly. getSignedUrl costs about eight times as much per URL (it runs the
   * client's middleware stack and endpoint rules each time), which a 10,000-part upload felt
   * as seconds of event-loop time. `signingDate` is for tests that compare with getSignedUrl.
   * The caller has checked the key.
   */
  async presign(
    key: string,
    uploadId: string,
    parts: readonly PartToSign[],
    expiresInSeconds: number,
    signingDate = new Date(),
  ): Promise<string[]> {
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
}
