// CORS (@fastify/cors), so that a page on any website can call the API with a public key or
// an upload token, and read what it needs from the answers.
//
// - Keys travel in headers, never cookies, so no credentials mode: `Access-Control-Allow-Origin`
//   is `*` (or the page's origin where a workspace restricts them), which shared caches may keep.
// - Error answers carry the headers too (the hook runs before auth), so a page reads a 401 or
//   a 403 ORIGIN_NOT_ALLOWED instead of an opaque network error.
// - A workspace's `allowed_origins` is enforced on every request that carries its public key or
//   one of its tokens (src/http/auth.ts). A preflight carries no key, so for key endpoints it
//   cannot know the workspace and allows any origin; the request itself is then refused. For
//   token uploads the token is in the path, so a preflight from a page the workspace does not
//   allow is refused already.
// - The dashboard, the API docs and the metrics are not cross-origin resources; the SDK's
//   browser build (/dashboard/sdk.js) is, so any page can import it as a module.
import cors, { type FastifyCorsOptions } from '@fastify/cors';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { originAllowed } from '../services/origins.ts';
import type { UploadTokenService } from '../uploads/tokens.ts';

/** Response headers browser code reads: part ETags, redirects, retry and rate-limit hints, ids. */
export const EXPOSED_HEADERS = [
  'etag',
  'location',
  'retry-after',
  'ratelimit-limit',
  'ratelimit-remaining',
  'ratelimit-reset',
  'x-request-id',
  'x-should-retry',
  'x-snapshot',
  'link',
  'content-range',
  'accept-ranges',
  'content-disposition',
];

/** How long a browser may cache a preflight answer (Chromium caps it at two hours). */
export const PREFLIGHT_MAX_AGE_S = 7200;

const NOT_CROSS_ORIGIN = /^\/(dashboard|examples|docs|metrics)(\/|$|\?)/;
const SDK_PATH = '/dashboard/sdk.js';
const TUS_PATH = /^\/api\/v1\/tus(\/|$|\?)/;
const TOKEN_PATH = /^\/api\/v1\/uploads\/(stw_ut_[^/?#]+)\/?(\?|$)/;

export async function installCors(
  app: FastifyInstance,
  opts: { tokens: UploadTokenService; publicUrl: string },
): Promise<void> {
  const ownOrigin = new URL(opts.publicUrl).origin;
  const base: FastifyCorsOptions = {
    origin: '*',
    methods: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'],
    // No allowedHeaders: whatever request headers the page asks for are allowed (none of
    // them is a credential the browser adds by itself).
    exposedHeaders: EXPOSED_HEADERS,
    credentials: false,
    maxAge: PREFLIGHT_MAX_AGE_S,
    cacheControl: PREFLIGHT_MAX_AGE_S,
    // An OPTIONS without Origin is not a preflight, but answering it 204 is harmless and
    // avoids a plain-text 400 outside the documented error shape.
    strictPreflight: false,
  };
  const off: FastifyCorsOptions = { origin: false };

  /** The allowed origins of the workspace a token in the path belongs to, if it is one. */
  const tokenOrigins = async (request: FastifyRequest): Promise<string[] | null> => {
    const m = TOKEN_PATH.exec(request.url);
    if (!m) return null;
    try {
      return (await opts.tokens.resolve(decodeURIComponent(m[1]))).principal.allowedOrigins;
    } catch {
      return null; // the upload itself answers 401, readable by the page
    }
  };

  await app.register(cors, {
    hook: 'onRequest',
    delegator: async (request: FastifyRequest) => {
      if (NOT_CROSS_ORIGIN.test(request.url) && !request.url.startsWith(SDK_PATH)) return off;
      const origin = request.headers.origin;
      // tus discovery (an OPTIONS that is no preflight) is answered by tus itself (routes/tus.ts).
      if (
        request.method === 'OPTIONS' &&
        TUS_PATH.test(request.url) &&
        !request.headers['access-control-request-method']
      )
        return { ...base, preflightContinue: true };
      if (request.method === 'OPTIONS' && typeof origin === 'string' && origin !== ownOrigin) {
        const allowed = await tokenOrigins(request);
        if (allowed && allowed.length > 0 && !originAllowed(allowed, origin)) return off;
      }
      return base;
    },
  });
}
