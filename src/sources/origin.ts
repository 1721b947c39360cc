// Reading an object from a source, for delivery: the same SDKs and the same outbound guard as
// the source test, so an origin can reach only what any outbound request may.
import type { Readable } from 'node:stream';
import { GetObjectCommand } from '@aws-sdk/client-s3';
import { AppError, appError, errors } from '../errors.ts';
import { OutboundBlockedError } from '../outbound/guard.ts';
import { outboundRequest } from '../outbound/http-client.ts';
import type { ProbeDeps } from './probe.ts';
import { azureServiceFor, checkGcsEndpoint, gcsStorageFor, s3ClientFor } from './clients.ts';
import { type Configuration, mayForward, parseServiceAccount, type SourceType } from './source-types.ts';

export interface OriginObject {
  body: Readable;
  contentType?: string;
  size?: number;
  etag?: string;
  lastModified?: Date;
  /** The address of the object at the origin (for canonical links). */
  location?: string;
}

/** Request headers an image_source with `forward_header: true` passes on; never credentials or cookies. */
const FORWARDED = ['accept', 'accept-language', 'user-agent', 'referer'];

/** The canonical header of an image_source without one configured (the hosted service's default). */
export const DEFAULT_CANONICAL_HEADER = 'x-forwarded-host';

export type ClientHeaders = Record<string, string | string[] | undefined>;

/** What a web origin is asked for besides the path: derived from the source and the client's request. */
export interface WebOriginRequest {
  /** The delivery URL's query, normalised for the origin (no leading "?"); undefined when there is none. */
  query?: string;
  /** Request headers sent to the origin. */
  headers: Record<string, string>;
  /**
   * The client request headers, by configuration, whose values reach the origin and so may change
   * its answer (canonical header, forward_header names): the answer's `Vary`.
   */
  vary: string[];
  /** Those headers with the values sent, in a stable order: part of every cache key. */
  keyed: [string, string][];
}

/**
 * Characters a query keeps as they are (RFC 3986 `query`: pchar, "/" and "?"); "%" only before
 * two hex digits. Anything else is percent-encoded (UTF-8), so the text is a valid URL query
 * and cannot leave the `<…>` of a Link header.
 */
const QUERY_CHAR = /[A-Za-z0-9\-._~!$&'()*+,;=:@/?]/;

/**
 * The query of a delivery URL as a web origin gets it: the raw text after "?" (without any
 * fragment), every byte kept except those a URL query may not hold, which are percent-encoded.
 * Stowage reads no query parameter of a source URL (sources have no private files, so no
 * `expires`/`signature` is ever checked there): the whole query is the origin's. Empty: none.
 */
export function originQuery(raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  const text = raw.startsWith('?') ? raw.slice(1) : raw;
  if (text === '') return undefined;
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (QUERY_CHAR.test(c)) out += c;
    else if (c === '%' && /^[0-9A-Fa-f]{2}$/.test(text.slice(i + 1, i + 3))) out += c;
    else {
      const cp = text.codePointAt(i)!;
      if (cp > 0xffff) i++;
      try {
        out += encodeURIComponent(String.fromCodePoint(cp));
      } catch {
        out += '%EF%BF%BD'; // a lone surrogate: U+FFFD
      }
    }
  }
  return out;
}

/** A header value as HTTP allows it to be sent: tab, visible ASCII, space, obs-text. */
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/** A host as a canonical header may carry it: a name or an IP literal, with an optional port. */
const HOST_VALUE =
  /^(?:\[[0-9a-f:.]{2,45}\]|[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*\.?)(?::[0-9]{1,5})?$/;

/** The canonical host in a client's header value (`X-Forwarded-Host: a.example, proxy`: the first), or undefined. */
function canonicalHost(value: string | string[] | undefined): string | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (typeof text !== 'string') return undefined;
  const first = text.split(',')[0].trim().toLowerCase();
  return first.length <= 261 && HOST_VALUE.test(first) ? first : undefined;
}

/** The header whose host an image_source passes on: the configured name, the default when none, none for a boolean. */
export function canonicalHeaderName(config: Configuration): string | undefined {
  const c = config.canonical_header;
  if (c === undefined) return DEFAULT_CANONICAL_HEADER;
  return typeof c === 'string' ? c.toLowerCase() : undefined;
}

/**
 * What an image_source's origin is sent for one delivery request:
 * - the query of the delivery URL (`originQuery`);
 * - `canonical_header` naming a header (default `x-forwarded-host`): that header of the client's
 *   request, when its value is a host (the first of a list), is sent to the origin under the
 *   same name, lower-cased; `true`/`false` send nothing (`true` is the Link response header);
 * - `forward_header: true`: Accept, Accept-Language, User-Agent, Referer (as always: not part of
 *   any cache key); a list: exactly the named headers the client sent.
 * No header configuration validation refuses (credentials, cookies, host, hop-by-hop) is ever
 * sent, whatever is stored.
 */
export function webOriginRequest(
  config: Configuration,
  clientHeaders: ClientHeaders,
  rawQuery: string | undefined,
): WebOriginRequest {
  const headers: Record<string, string> = {};
  const keyed: [string, string][] = [];
  const vary: string[] = [];
  const canonical = canonicalHeaderName(config);
  const forward = config.forward_header;
  if (forward === true) {
    for (const name of FORWARDED) {
      const v = clientHeaders[name];
      if (typeof v === 'string') headers[name] = v;
    }
  } else if (Array.isArray(forward)) {
    for (const item of forward) {
      // Validation stores lower-case names; a row written otherwise is read the same way.
      const name = String(item).toLowerCase();
      if (!mayForward(name) || name === canonical || vary.includes(name)) continue;
      vary.push(name);
      const v = clientHeaders[name];
      const text = Array.isArray(v) ? v.join(', ') : v;
      // Only what Node will send as a header value (it throws on anything else).
      if (typeof text !== 'string' || !FIELD_VALUE.test(text)) continue;
      headers[name] = text;
      keyed.push([name, text]);
    }
  }
  if (canonical !== undefined && mayForward(canonical)) {
    vary.push(canonical);
    const host = canonicalHost(clientHeaders[canonical]);
    if (host !== undefined) {
      headers[canonical] = host;
      keyed.push([canonical, host]);
    }
  }
  keyed.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return { query: originQuery(rawQuery), headers, vary, keyed };
}

/** The URL a web origin is asked for: base_url, the path (already encoded), the query. */
export const webOriginUrl = (config: Configuration, path: string, query: string | undefined): string =>
  `${String(config.base_url)}/${path}${query === undefined ? '' : `?${query}`}`;

const notFound = () => errors.nothingStored('The origin has nothing at this path');
const failed = (why: string) => appError('ORIGIN_FAILED', why);

/**
 * Opens the object at `path` (a web origin: already percent-encoded; a bucket: the key). `web` is
 * what else a web origin is sent (`webOriginRequest`); buckets take no query or headers.
 */
export async function openOrigin(
  type: SourceType,
  config: Configuration,
  path: string,
  deps: ProbeDeps,
  web?: WebOriginRequest,
): Promise<OriginObject> {
  try {
    switch (type) {
      case 'image_source':
        return await fromWeb(config, path, deps, web ?? webOriginRequest(config, {}, undefined));
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
    const status =
      (err as { $metadata?: { httpStatusCode?: number }; statusCode?: number; code?: number }).$metadata
        ?.httpStatusCode ??
      (err as { statusCode?: number }).statusCode ??
      (err as { code?: unknown }).code;
    if (status === 404) throw notFound();
    if (status === 403 || status === 401) throw failed('the origin refused the stored credentials');
    throw failed('the origin could not be reached');
  }
}

async function fromWeb(
  config: Configuration,
  path: string,
  deps: ProbeDeps,
  web: WebOriginRequest,
): Promise<OriginObject> {
  const url = webOriginUrl(config, path, web.query);
  const res = await outboundRequest(deps.guard, url, {
    timeoutMs: deps.timeoutMs,
    bodyTimeoutMs: deps.timeoutMs * 6,
    headers: web.headers,
  });
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
  return {
    body,
    contentType: res.ContentType,
    size: res.ContentLength,
    etag: res.ETag,
    lastModified: res.LastModified,
  };
}

async function fromAzure(config: Configuration, path: string, deps: ProbeDeps): Promise<OriginObject> {
  const service = await azureServiceFor(config, deps, { attempts: 2, requestTimeoutMs: deps.timeoutMs * 6 });
  const res = await service.getContainerClient(String(config.container_name)).getBlobClient(path).download();
  return {
    body: res.readableStreamBody as Readable,
    contentType: res.contentType,
    size: res.contentLength,
    etag: res.etag,
    lastModified: res.lastModified,
  };
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
