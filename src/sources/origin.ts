// Reading an object from a source, for delivery: the same SDKs and the same outbound guard as
// the source test, so an origin can reach only what any outbound request may.
import type { Readable } from 'node:stream';
import { GetObjectCommand } from '@aws-sdk/client-s3';
import { AppError, errors } from '../errors.ts';
import { OutboundBlockedError } from '../outbound/guard.ts';
import { outboundRequest } from '../outbound/http-client.ts';
import type { ProbeDeps } from './probe.ts';
import { azureServiceFor, checkGcsEndpoint, gcsStorageFor, s3ClientFor } from './clients.ts';
import { type Configuration, parseServiceAccount, type SourceType } from './source-types.ts';

export interface OriginObject {
  body: Readable;
  contentType?: string;
  size?: number;
  etag?: string;
  lastModified?: Date;
  /** The address of the object at the origin (for canonical links). */
  location?: string;
}

/** Request headers an image_source with forward_header passes on; never credentials or cookies. */
const FORWARDED = ['accept', 'accept-language', 'user-agent', 'referer'];

const notFound = () => errors.nothingStored('The origin has nothing at this path');
const failed = (why: string) => new AppError(502, 'ORIGIN_FAILED', 'Origin failed', why);

export async function openOrigin(type: SourceType, config: Configuration, path: string, deps: ProbeDeps, clientHeaders: Record<string, string | string[] | undefined> = {}): Promise<OriginObject> {
  try {
    switch (type) {
      case 'image_source':
        return await fromWeb(config, path, deps, clientHeaders);
      case 's3':
        return await fromS3(config, path, deps);
      case 'azure':
        return await fromAzure(config, path, deps);
      case 'google_cloud':
        return await fromGoogle(config, path, deps);
    }
  } catch (err) {
    if (err instanceof AppError) throw err;
    if (err instanceof OutboundBlockedError) throw failed(`the origin address is refused: ${err.message}`);
    const status = (err as { $metadata?: { httpStatusCode?: number }; statusCode?: number; code?: number }).$metadata?.httpStatusCode ?? (err as { statusCode?: number }).statusCode ?? (err as { code?: unknown }).code;
    if (status === 404) throw notFound();
    if (status === 403 || status === 401) throw failed('the origin refused the stored credentials');
    throw failed('the origin could not be reached');
  }
}

async function fromWeb(config: Configuration, path: string, deps: ProbeDeps, clientHeaders: Record<string, string | string[] | undefined>): Promise<OriginObject> {
  const url = `${String(config.base_url)}/${path}`;
  const headers: Record<string, string> = {};
  if (config.forward_header === true) {
    for (const name of FORWARDED) {
      const v = clientHeaders[name];
      if (typeof v === 'string') headers[name] = v;
    }
  }
  const res = await outboundRequest(deps.guard, url, { timeoutMs: deps.timeoutMs, bodyTimeoutMs: deps.timeoutMs * 6, headers });
  if (res.status === 404 || res.status === 410) {
    res.body.resume();
    throw notFound();
  }
  if (res.status < 200 || res.status > 299) {
    res.body.resume();
    throw failed(`the origin answered HTTP ${res.status}`);
  }
  const len = Number(res.headers['content-length']);
  return {
    body: res.body,
    contentType: res.headers['content-type'],
    size: Number.isFinite(len) ? len : undefined,
    etag: res.headers.etag,
    lastModified: res.headers['last-modified'] ? new Date(res.headers['last-modified']) : undefined,
    location: url,
  };
}

async function fromS3(config: Configuration, path: string, deps: ProbeDeps): Promise<OriginObject> {
  const client = await s3ClientFor(config, deps, { attempts: 2, requestTimeoutMs: deps.timeoutMs * 6 });
  const res = await client.send(new GetObjectCommand({ Bucket: String(config.bucket), Key: path }));
  const body = res.Body as Readable;
  body.once('close', () => client.destroy());
  return { body, contentType: res.ContentType, size: res.ContentLength, etag: res.ETag, lastModified: res.LastModified };
}

async function fromAzure(config: Configuration, path: string, deps: ProbeDeps): Promise<OriginObject> {
  const service = await azureServiceFor(config, deps, { attempts: 2, requestTimeoutMs: deps.timeoutMs * 6 });
  const res = await service.getContainerClient(String(config.container_name)).getBlobClient(path).download();
  return { body: res.readableStreamBody as Readable, contentType: res.contentType, size: res.contentLength, etag: res.etag, lastModified: res.lastModified };
}

async function fromGoogle(config: Configuration, path: string, deps: ProbeDeps): Promise<OriginObject> {
  const account = parseServiceAccount(String(config.service_account_json));
  if (!account) throw failed('the stored service account is not usable');
  await checkGcsEndpoint(deps);
  const file = gcsStorageFor(account, deps).bucket(String(config.bucket_name)).file(path);
  const [meta] = await file.getMetadata();
  return {
    body: file.createReadStream({ validation: false }),
    contentType: meta.contentType,
    size: meta.size === undefined ? undefined : Number(meta.size),
    etag: meta.etag,
    lastModified: meta.updated ? new Date(meta.updated) : undefined,
  };
}
