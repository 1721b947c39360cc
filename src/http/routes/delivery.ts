// GET /{workspace_id}/{path} and /{workspace_id}/{tokens}/{path}: public delivery. The answer
// (status, validators, Range, caching headers) is decided once, in `answer()`, for both ways a
// request is served: this Fastify route, and `deliveryFastPath`, which answers a request whose
// file is held in memory (DeliveryCache) straight from the HTTP server, before Fastify's routing
// and hooks, as a static file server would. Everything else (misses, private files, errors,
// sources) takes the route.
import { access } from 'node:fs/promises';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { isAbsolute, relative, sep } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { FastifyInstance } from 'fastify';
import { appError, errors } from '../../errors.ts';
import type { DeliverySigner } from '../../crypto/delivery-url.ts';
import {
  type Delivered,
  type DeliveryService,
  type DeliveryTarget,
  RenditionPending,
} from '../../services/delivery.ts';
import type { CachedDelivery, DeliveryCache } from '../../services/delivery-cache.ts';
import { type ByteRange, ObjectNotFoundError } from '../../storage/driver.ts';
import { EXPOSED_HEADERS } from '../cors.ts';
import { clientHints } from '../../media/transform/client-hints.ts';
import { withQuery } from '../../media/video/stream.ts';
import {
  checkTransformSignature,
  hasTokens,
  streamDepth,
  streamScope,
  type TransformGateDeps,
} from '../transform-signature.ts';

/** User files are served as data, never as active content on the service's origin. */
const SAFE_HEADERS = {
  'x-content-type-options': 'nosniff',
  'content-security-policy': "default-src 'none'; img-src data:; style-src 'unsafe-inline'; sandbox",
  'cross-origin-resource-policy': 'cross-origin',
};

/** One `bytes=` range (the only kind served); null when absent or not understood. */
export function parseRange(header: string | undefined, size: number): ByteRange | null | 'unsatisfiable' {
  if (!header) return null;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return null;
  if (m[1] === '') {
    const suffix = Number(m[2]);
    if (suffix === 0) return 'unsatisfiable';
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(m[1]);
  const end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (start >= size || start > end) return 'unsatisfiable';
  return { start, end };
}

/**
 * The request's path exactly as sent, before any decoding: up to the query (or a fragment, where
 * the router also stops). Signatures cover this text, and the delivery path is decoded from it,
 * once: the router's `*` parameter is already decoded (find-my-way decodes the whole path, "%2F"
 * and "%25" included), so decoding that again decoded twice ("a%2520b" reached "a b").
 */
export function rawPath(url: string): string {
  const end = url.search(/[?#]/);
  return end === -1 ? url : url.slice(0, end);
}

/** The request's query text (after "?", before any fragment), exactly as sent; undefined when there is no "?". */
export function rawQuery(url: string): string | undefined {
  const q = url.indexOf('?');
  if (q === -1) return undefined;
  const hash = url.indexOf('#', q);
  return url.slice(q + 1, hash === -1 ? undefined : hash);
}

/** A query value as text: a repeated one (`?signature=a&signature=b`) is its values joined, which never verifies. */
function text(value: string | string[] | undefined): string | undefined {
  return value === undefined ? undefined : String(value);
}

/** Whether the request's validators say the client's copy is current (RFC 9110 13.1.2, 13.1.3). */
function notModified(headers: IncomingHttpHeaders, d: Delivered): boolean {
  const inm = headers['if-none-match'];
  // If-None-Match wins over If-Modified-Since, and compares weakly. The list is read tag by tag,
  // not split on commas: a rendition's tag holds its tokens ("…-w_50,f_png"), commas included.
  if (typeof inm === 'string') {
    if (inm.trim() === '*') return true;
    for (const m of inm.matchAll(/(?:W\/)?("[^"]*")/g)) if (m[1] === d.etag) return true;
    return false;
  }
  const ims = headers['if-modified-since'];
  if (typeof ims === 'string') {
    const since = Date.parse(ims);
    return Number.isFinite(since) && Math.floor(d.lastModified.getTime() / 1000) <= Math.floor(since / 1000);
  }
  return false;
}

/**
 * If-Range (RFC 9110 13.1.5): the range is served only when the client's copy is this one. An
 * entity tag must match strongly (a weak one never does); a date must equal Last-Modified
 * exactly, and only counts when Last-Modified is strong, at least a second old. Otherwise the
 * whole file is sent.
 */
export function ifRangeHolds(value: string | undefined, d: Delivered, now = Date.now()): boolean {
  if (value === undefined) return true;
  const v = value.trim();
  if (v.startsWith('"') || v.startsWith('W/')) return v === d.etag;
  const at = Date.parse(v);
  const modified = Math.floor(d.lastModified.getTime() / 1000) * 1000;
  return Number.isFinite(at) && at === modified && now - d.lastModified.getTime() >= 1000;
}

/**
 * `?v=` pins a URL to content: when it is 8 to 64 hex digits that begin the SHA-256 of the file
 * (the record's `hash`), what the URL answers can never change (another content is another
 * URL), so it is cached as immutable for a year. Only for a workspace's own public files, whose
 * ETag begins with that SHA-256 (originals: all of it; renditions: its first 32 digits); a
 * source's objects and private files never are.
 */
export function contentAddressed(d: Delivered, own: boolean, v: string | undefined): boolean {
  if (!own || d.isPrivate || v === undefined || !/^[0-9a-f]{8,64}$/.test(v)) return false;
  const hash = /^"([0-9a-f]{32,64})(?:"|-)/.exec(d.etag);
  return hash !== null && v.length <= hash[1].length && hash[1].startsWith(v);
}

export const IMMUTABLE = 'public, max-age=31536000, immutable';

/** Playlists are small; a larger one is not a package's. */
const MAX_PLAYLIST_BYTES = 4 * 1024 * 1024;

/**
 * A private package's playlist or manifest with `query` (the package's signature) on every
 * address in it: answered whole (no Range), its tag naming the expiry so a cached copy with an
 * older signature is never taken for it.
 */
async function signedPlaylist(
  d: Delivered,
  body: Buffer | undefined,
  query: string,
  expires: number,
): Promise<{ delivered: Delivered; body: Buffer }> {
  let bytes = body;
  if (!bytes) {
    const chunks: Buffer[] = [];
    let total = 0;
    for await (const chunk of await d.open()) {
      total += (chunk as Buffer).length;
      if (total > MAX_PLAYLIST_BYTES) throw errors.nothingStored();
      chunks.push(chunk as Buffer);
    }
    bytes = Buffer.concat(chunks);
  }
  const signed = Buffer.from(withQuery(bytes.toString('utf8'), d.playlist!, query), 'utf8');
  const delivered: Delivered = {
    ...d,
    open: async () => Readable.from([signed]),
    size: signed.length,
    etag: `${d.etag.slice(0, -1)}-e${expires}"`,
    // Signed addresses expire: never a shared or year-long copy (`private, max-age=300`).
    isPrivate: true,
    ranges: false,
    localFile: undefined,
  };
  return { delivered, body: signed };
}

export interface Answer {
  status: 200 | 206 | 304 | 416;
  headers: Record<string, string | number>;
  range?: ByteRange;
}

/** The status and headers of the answer to a GET or HEAD of `d` (the body is the caller's). */
export function answer(headers: IncomingHttpHeaders, d: Delivered, immutable: boolean): Answer {
  const h: Record<string, string | number> = {
    ...SAFE_HEADERS,
    etag: d.etag,
    'last-modified': d.lastModified.toUTCString(),
    'cache-control': d.isPrivate
      ? 'private, max-age=300'
      : immutable
        ? IMMUTABLE
        : d.shortLived
          ? 'public, max-age=60, stale-while-revalidate=60'
          : d.isRendition
            ? 'public, max-age=86400, stale-while-revalidate=604800'
            : 'public, max-age=300, must-revalidate',
    'accept-ranges': d.ranges ? 'bytes' : 'none',
  };
  // Replaces CORS's `Vary: Origin`, as `Vary: Accept` always did: delivery answers
  // `Access-Control-Allow-Origin: *`, the same for every Origin.
  const vary = [...(d.varyAccept ? ['Accept'] : []), ...(d.vary ?? [])];
  if (vary.length > 0) h.vary = vary.join(', ');
  if (d.canonical) h.link = `<${d.canonical}>; rel="canonical"`;
  if (notModified(headers, d)) return { status: 304, headers: h };
  const range =
    d.ranges && d.size !== undefined && ifRangeHolds(headerText(headers['if-range']), d)
      ? parseRange(headerText(headers.range), d.size)
      : null;
  if (range === 'unsatisfiable') {
    h['content-range'] = `bytes */${d.size}`;
    return { status: 416, headers: h };
  }
  h['content-type'] = d.contentType;
  if (range && d.size !== undefined) {
    h['content-range'] = `bytes ${range.start}-${range.end}/${d.size}`;
    h['content-length'] = range.end - range.start + 1;
    return { status: 206, headers: h, range };
  }
  if (d.size !== undefined) h['content-length'] = d.size;
  return { status: 200, headers: h };
}

/** STOWAGE_ACCEL_REDIRECT: nginx's internal location, and the directory its paths are relative to (the data dir). */
export interface AccelRedirect {
  prefix: string;
  root: string;
}

/**
 * A 200 or 206 of `d` as nginx is to send it (docs/deploy.md, "Serving files through nginx"):
 * the same headers, no body, and `X-Accel-Redirect` naming the file under the internal location.
 * Always a 200 without length or range: nginx sends the file and applies Range and If-Range
 * itself, against the ETag and Last-Modified its location takes back from this answer.
 * Undefined (Stowage sends the bytes) when the file is not on this machine's disk.
 */
export function accelerated(a: Answer, d: Delivered, accel: AccelRedirect | undefined): Answer | undefined {
  if (!accel || !d.localFile || (a.status !== 200 && a.status !== 206)) return undefined;
  const path = relative(accel.root, d.localFile);
  // Storage keys never hold dot segments (assertKey); this keeps even a misconfigured root from
  // naming anything outside it.
  if (isAbsolute(path) || path.split(sep).some((s) => s === '' || s === '.' || s === '..')) return undefined;
  // nginx adds its own Accept-Ranges to the upstream's: one is enough.
  const { 'content-length': _length, 'content-range': _range, 'accept-ranges': _ranges, ...headers } = a.headers;
  headers['x-accel-redirect'] = accel.prefix + path.split(sep).map(encodeURIComponent).join('/');
  headers['content-length'] = 0;
  return { status: 200, headers };
}

/** Throws ObjectNotFoundError when the file behind a remembered lookup has gone, as `open()` would. */
async function stillThere(file: string): Promise<void> {
  try {
    await access(file);
  } catch {
    throw new ObjectNotFoundError(file);
  }
}

function headerText(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v.join(', ') : v;
}

/** The part of a held file the answer carries. */
function slice(body: Buffer, a: Answer): Buffer {
  return a.range ? body.subarray(a.range.start, a.range.end + 1) : body;
}

const OWN_WORKSPACE = /^[0-9A-Za-z]{10,16}$/;
const REQUEST_ID = /^[\x21-\x7e]{1,200}$/;

/** The `v` query parameter, when the query has exactly one. */
function versionOf(query: string | undefined): string | undefined {
  if (query === undefined || !query.includes('v=')) return undefined;
  const all = new URLSearchParams(query).getAll('v');
  return all.length === 1 ? all[0] : undefined;
}

/** Counts a fast-path answer in the same series as the route's (app.ts, onResponse). */
export interface FastPathMetrics {
  count(method: string, status: number, seconds: number): void;
}

/**
 * Answers a GET or HEAD of a public file whose lookup is remembered directly on the HTTP server,
 * before Fastify: no routing, hooks or database; a held file is sent from memory, a larger one
 * streamed from storage. Returns false (and writes nothing) for anything else, which then goes
 * through Fastify as usual: a lookup not remembered, a private file (its signature is checked by
 * the route, every time), a source's path, an unsatisfiable range. If the stored bytes turn out
 * to be gone before anything is written, the request is handed to `fallback` (the route).
 * The headers are the route's (same `answer()`), plus what the app's hooks add to every
 * delivery answer: `x-request-id`, the CORS headers of a simple request, `Vary: Origin`.
 */
export function deliveryFastPath(
  cache: DeliveryCache,
  metrics?: FastPathMetrics,
  transformGate?: TransformGateDeps,
  accel?: AccelRedirect,
): (req: IncomingMessage, res: ServerResponse, fallback: () => void) => boolean {
  const expose = EXPOSED_HEADERS.join(', ');
  let served = 0;
  const serve = fastServe(cache, metrics, expose, () => ++served, accel);
  return (req, res, fallback) => {
    const url = req.url ?? '';
    const pathname = rawPath(url);
    const stream = transformGate ? streamDepth(pathname) : 0;
    // A stream's playlist may need its addresses signed (a private or gated package): the route's.
    if (stream && /\.(m3u8|mpd)$/.test(pathname)) return false;
    // A rendition of a workspace that may require signed transformations: the gate first, as on
    // the route; a refusal (or anything unexpected) is left to the route, which answers it.
    if (transformGate && (req.method === 'GET' || req.method === 'HEAD') && (hasTokens(pathname) || stream)) {
      const workspaceId = pathname.slice(1, pathname.indexOf('/', 1));
      if (!OWN_WORKSPACE.test(workspaceId)) return false;
      checkTransformSignature(transformGate, workspaceId, pathname, rawQuery(url), Math.floor(Date.now() / 1000)).then(
        () => {
          if (!serve(req, res, fallback)) fallback();
        },
        () => fallback(),
      );
      return true;
    }
    return serve(req, res, fallback);
  };
}

function fastServe(
  cache: DeliveryCache,
  metrics: FastPathMetrics | undefined,
  expose: string,
  nextId: () => number,
  accel: AccelRedirect | undefined,
): (req: IncomingMessage, res: ServerResponse, fallback: () => void) => boolean {
  return (req, res, fallback) => {
    const method = req.method;
    if (method !== 'GET' && method !== 'HEAD') return false;
    const url = req.url ?? '';
    const pathname = rawPath(url);
    const slash = pathname.indexOf('/', 1);
    if (slash === -1) return false;
    const workspaceId = pathname.slice(1, slash);
    if (!OWN_WORKSPACE.test(workspaceId)) return false;
    const target: DeliveryTarget = {
      workspaceId,
      path: pathname.slice(slash + 1),
      accept: req.headers.accept,
      hints: clientHints(req.headers),
    };
    const held = cache.peek(target);
    if (!held || held.delivered.isPrivate) return false;
    const d = held.delivered;
    const started = performance.now();
    const a = answer(req.headers, d, contentAddressed(d, true, versionOf(rawQuery(url))));
    if (a.status === 416) return false;
    // A proxy's request id is echoed only when it is plain visible text (writeHead throws on
    // what a response header may not hold; the route is left to answer such a request).
    const id = req.headers['x-request-id'];
    a.headers['x-request-id'] = typeof id === 'string' && REQUEST_ID.test(id) ? id : `dfp-${nextId().toString(36)}`;
    a.headers['access-control-allow-origin'] = '*';
    a.headers['access-control-expose-headers'] = expose;
    // What the CORS hook leaves when the answer names no Vary of its own.
    a.headers.vary ??= 'Origin';
    const done = () => metrics?.count(method, a.status, (performance.now() - started) / 1000);
    const head = (answer = a): boolean => {
      try {
        res.writeHead(answer.status, answer.headers);
        return true;
      } catch {
        return false;
      }
    };
    const redirect = method === 'GET' ? accelerated(a, d, accel) : undefined;
    if (redirect) {
      stillThere(d.localFile!).then(
        () => {
          if (!head(redirect)) return fallback();
          res.end();
          done();
        },
        () => {
          cache.drop(target);
          fallback();
        },
      );
      return true;
    }
    if (held.body || a.status === 304 || method === 'HEAD') {
      // A header Node will not send (nothing is written yet): the route answers instead.
      if (!head()) return false;
      if (held.body && a.status !== 304 && method !== 'HEAD') res.end(slice(held.body, a));
      else res.end();
      done();
      return true;
    }
    d.open(a.range).then(
      (body) => {
        if (!head()) {
          body.destroy();
          return fallback();
        }
        res.once('finish', done);
        pipeline(body, res).catch(() => res.destroy());
      },
      (err) => {
        // Gone under a remembered lookup (another node deleted it): the route looks again.
        if (err instanceof ObjectNotFoundError) cache.drop(target);
        fallback();
      },
    );
    return true;
  };
}

export async function deliveryRoutes(
  app: FastifyInstance,
  opts: {
    delivery: DeliveryService;
    signer: DeliverySigner;
    cache?: DeliveryCache;
    transformGate?: TransformGateDeps;
    accel?: AccelRedirect;
  },
): Promise<void> {
  const { delivery, signer, cache } = opts;
  /** Whether a stream path of this workspace passed the signed-transformations gate (it requires them). */
  const gated = async (workspace: string, pathname: string) =>
    Boolean(opts.transformGate && streamDepth(pathname) && OWN_WORKSPACE.test(workspace)) &&
    (await opts.transformGate!.policy(workspace)).required;
  const resolve = (t: DeliveryTarget) => delivery.resolve(t);
  const lookup = async (target: DeliveryTarget): Promise<CachedDelivery> => {
    if (!cache) return { delivered: await resolve(target) };
    try {
      return await cache.get(target, resolve);
    } catch (err) {
      // Bytes gone under a remembered lookup (deleted or replaced through another node): ask again.
      if (!(err instanceof ObjectNotFoundError)) throw err;
      cache.drop(target);
      return cache.get(target, resolve);
    }
  };

  // No schemas (the path is decoded here, and a query is anything a CDN adds): the router's
  // parameters are text, and the query is what Node's querystring parser gives.
  app.get<{ Params: { workspace: string }; Querystring: Record<string, string | string[] | undefined> }>(
    '/:workspace/*',
    { config: { auth: 'none' }, schema: { hide: true } },
    async (request, reply) => {
      const { workspace } = request.params;
      // Not a workspace id (e.g. /api/...): an unknown route, answered by the 404 handler.
      if (!/^[0-9A-Za-z]{10,16}(-[A-Za-z0-9_-]{1,64})?$/.test(workspace)) return reply.callNotFound();
      // What follows the first segment, still encoded (the router never splits on an encoded "/").
      const pathname = rawPath(request.url);
      const slash = pathname.indexOf('/', 1);
      const path = slash === -1 ? '' : pathname.slice(slash + 1);
      // Signed transformations (transform-signature.ts): refused before anything is rendered.
      const query = opts.transformGate
        ? await checkTransformSignature(
            opts.transformGate,
            workspace,
            pathname,
            rawQuery(request.url),
            Math.floor(Date.now() / 1000),
          )
        : rawQuery(request.url);
      // A private file's URL must carry the service's signature: checked before any rendition of
      // it is made (resolve calls mayRender), and again on what is answered, held or not.
      const requireSignature = (streamDepth?: number) => {
        const { expires, signature } = request.query;
        const q = { expires: text(expires), signature: text(signature) };
        const now = Math.floor(Date.now() / 1000);
        let verdict = signer.verify(pathname, q, now);
        // A file of a streaming package: a signature of the package (the path up to the video's
        // name and "/") opens every file in it, which is what its playlists carry.
        if (verdict === 'bad' && streamDepth) verdict = signer.verify(streamScope(pathname, streamDepth), q, now);
        if (verdict === 'missing') throw appError('SIGNED_URL_REQUIRED');
        if (verdict === 'bad') throw appError('INVALID_SIGNATURE');
        if (verdict === 'expired') throw appError('URL_EXPIRED');
      };
      const target: DeliveryTarget = {
        mayRender: (isPrivate, streamDepth) => {
          if (isPrivate) requireSignature(streamDepth);
        },
        workspaceId: workspace,
        path,
        query,
        accept: request.headers.accept,
        hints: clientHints(request.headers),
        headers: request.headers,
      };
      // Twice at most: a rendition whose bytes are found gone (evicted by the rendition cache, on
      // any node, between its lookup and its read) is looked up again, which makes it again.
      for (let attempt = 0; ; attempt++) {
        let found: CachedDelivery;
        try {
          found = await lookup(target);
        } catch (err) {
          // A video rendition being made (docs/video.md): 202 and where it stands, never cached.
          if (!(err instanceof RenditionPending)) throw err;
          return reply
            .headers({ 'cache-control': 'no-store', 'retry-after': '2', ...SAFE_HEADERS })
            .code(202)
            .send(err.answer);
        }
        let { delivered: d, body } = found;
        if (d.isPrivate) requireSignature(d.streamDepth);
        if (d.playlist && d.streamDepth && (d.isPrivate || (await gated(workspace, pathname)))) {
          // Its addresses get the package's signature, so the player's next requests are let in:
          // until the URL's own expiry, or an hour for a `tsig` without one (the master is
          // fetched again for fresh ones).
          const given = text(request.query.expires);
          const expires = given && /^\d{1,12}$/.test(given) ? Number(given) : Math.floor(Date.now() / 1000) + 3600;
          const query = `expires=${expires}&signature=${signer.signature(streamScope(pathname, d.streamDepth), expires)}`;
          ({ delivered: d, body } = await signedPlaylist(d, body, query, expires));
        }

        const a = answer(request.headers, d, contentAddressed(d, OWN_WORKSPACE.test(workspace), versionOf(query)));
        if (a.status === 304) return reply.headers(a.headers).code(304).send();
        if (a.status === 416) {
          reply.headers(a.headers);
          throw appError('RANGE_NOT_SATISFIABLE', `The file is ${d.size} bytes long`);
        }
        // Checked and headed like any answer; nginx sends the bytes (accelerated()).
        const redirect = request.method === 'GET' ? accelerated(a, d, opts.accel) : undefined;
        if (body && !redirect) return reply.headers(a.headers).code(a.status).send(slice(body, a));
        let stream: Readable | undefined;
        try {
          if (redirect) await stillThere(d.localFile!);
          else stream = await d.open(a.range);
        } catch (err) {
          // The lookup was remembered and the bytes have gone since (deleted, or a rendition evicted).
          if (err instanceof ObjectNotFoundError) {
            cache?.drop(target);
            if (d.isRendition && attempt === 0) continue;
            throw errors.nothingStored();
          }
          throw err;
        }
        if (redirect) return reply.headers(redirect.headers).code(200).send();
        return reply.headers(a.headers).code(a.status).send(stream);
      }
    },
  );
}
