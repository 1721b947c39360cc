// GET /{workspace_id}/{path} and /{workspace_id}/{tokens}/{path}: public delivery.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { appError } from '../../errors.ts';
import type { DeliverySigner } from '../../crypto/delivery-url.ts';
import type { Delivered, DeliveryService } from '../../services/delivery.ts';
import type { ByteRange } from '../../storage/driver.ts';
import { checkTransformSignature, type TransformGateDeps } from '../transform-signature.ts';

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

function notModified(request: FastifyRequest, d: Delivered): boolean {
  const inm = request.headers['if-none-match'];
  if (typeof inm === 'string')
    return inm.split(',').some((t) => t.trim() === '*' || t.trim().replace(/^W\//, '') === d.etag);
  const ims = request.headers['if-modified-since'];
  if (typeof ims === 'string') {
    const since = Date.parse(ims);
    return Number.isFinite(since) && Math.floor(d.lastModified.getTime() / 1000) <= Math.floor(since / 1000);
  }
  return false;
}

export async function deliveryRoutes(
  app: FastifyInstance,
  opts: { delivery: DeliveryService; signer: DeliverySigner; transformGate?: TransformGateDeps },
): Promise<void> {
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
      const d = await opts.delivery.resolve({
        workspaceId: workspace,
        path,
        query,
        accept: request.headers.accept,
        headers: request.headers,
      });
      if (d.isPrivate) {
        const { expires, signature } = request.query;
        const verdict = opts.signer.verify(
          pathname,
          { expires: text(expires), signature: text(signature) },
          Math.floor(Date.now() / 1000),
        );
        if (verdict === 'missing') throw appError('SIGNED_URL_REQUIRED');
        if (verdict === 'bad') throw appError('INVALID_SIGNATURE');
        if (verdict === 'expired') throw appError('URL_EXPIRED');
      }

      reply.headers({
        ...SAFE_HEADERS,
        etag: d.etag,
        'last-modified': d.lastModified.toUTCString(),
        'cache-control': d.isPrivate
          ? 'private, max-age=300'
          : d.isRendition
            ? 'public, max-age=86400, stale-while-revalidate=604800'
            : 'public, max-age=300, must-revalidate',
        'accept-ranges': d.ranges ? 'bytes' : 'none',
      });
      // Replaces CORS's `Vary: Origin`, as `Vary: Accept` always did: delivery answers
      // `Access-Control-Allow-Origin: *`, the same for every Origin.
      const vary = [...(d.varyAccept ? ['Accept'] : []), ...(d.vary ?? [])];
      if (vary.length > 0) reply.header('vary', vary.join(', '));
      if (d.canonical) reply.header('link', `<${d.canonical}>; rel="canonical"`);
      if (notModified(request, d)) return reply.code(304).send();

      const range = d.ranges && d.size !== undefined ? parseRange(request.headers.range, d.size) : null;
      if (range === 'unsatisfiable') {
        reply.header('content-range', `bytes */${d.size}`);
        throw appError('RANGE_NOT_SATISFIABLE', `The file is ${d.size} bytes long`);
      }
      reply.type(d.contentType);
      if (range && d.size !== undefined) {
        reply
          .code(206)
          .header('content-range', `bytes ${range.start}-${range.end}/${d.size}`)
          .header('content-length', range.end - range.start + 1);
        return reply.send(await d.open(range));
      }
      if (d.size !== undefined) reply.header('content-length', d.size);
      return reply.send(await d.open());
    },
  );
}
