// One place that turns anything thrown into the documented error shape
// `{success:false, error, errorCode, message}`. Unknown errors become 500 without internals;
// an unreachable database becomes 503.
import { once } from 'node:events';
import { type IncomingMessage, STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyInstance, FastifyReply } from 'fastify';
import FindMyWay from 'find-my-way';
import { ERROR_CATALOGUE, type ErrorCode } from '../contract/error-catalogue.ts';
import { AppError, errors } from '../errors.ts';

/** The documented error body for a catalogue code: its `error` text unless told, its default message unless told. */
const body = (errorCode: ErrorCode, message?: string, error?: string) => {
  const entry = ERROR_CATALOGUE[errorCode];
  return {
    success: false,
    error: error ?? entry.error,
    errorCode,
    code: errorCode,
    message: message ?? entry.message,
  };
};
const statusOf = (code: ErrorCode): number => ERROR_CATALOGUE[code].status;

/** Fastify's own errors, as catalogue codes (with the texts that say what went wrong here). */
const FASTIFY_CODES: Record<string, { code: ErrorCode; error?: string; message?: string }> = {
  FST_ERR_CTP_BODY_TOO_LARGE: { code: 'PAYLOAD_TOO_LARGE' },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: { code: 'UNSUPPORTED_MEDIA_TYPE' },
  FST_ERR_CTP_EMPTY_JSON_BODY: { code: 'INVALID_JSON', message: 'The body is empty but Content-Type says JSON' },
  FST_ERR_CTP_INVALID_JSON_BODY: { code: 'INVALID_JSON' },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { code: 'INVALID_CONTENT_LENGTH' },
  FST_ERR_CTP_INVALID_TYPE: {
    code: 'INVALID_CONTENT_TYPE',
    error: 'Bad request',
    message: 'The Content-Type header is not valid',
  },
};

/** Errors that mean a dependency (database, storage) is down rather than a bug. */
const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  '57P01',
  '57P02',
  '57P03',
  '53300',
  'SQLITE_BUSY',
]);

/**
 * A full disk or exhausted disk quota that reached here unmapped (a directory or a database
 * write on the same disk as local storage: SQLite says SQLITE_FULL): 507, as storage drivers
 * answer it (storage/local.ts mapDiskFull).
 */
const DISK_FULL_CODES = new Set(['ENOSPC', 'EDQUOT', 'SQLITE_FULL']);

export function isDiskFull(err: unknown): boolean {
  const code = (err as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && DISK_FULL_CODES.has(code);
}

export function isUnavailable(err: unknown): boolean {
  const e = err as { code?: string; message?: string } | undefined;
  if (e?.code && UNAVAILABLE_CODES.has(e.code)) return true;
  if ((err as { name?: string })?.name === 'MaxRetriesPerRequestError') return true;
  return /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Stream isn't writeable|Connection is closed/.test(
    e?.message ?? '',
  );
}

/**
 * Errors Fastify raises before routing (a malformed URL, a path parameter over its length
 * limit): answered in the same shape, without echoing the URL.
 */
export function frameworkErrors(err: FastifyError, _request: unknown, reply: FastifyReply): void {
  if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    reply.code(statusOf('URI_TOO_LONG')).send(body('URI_TOO_LONG'));
  } else if (err.code === 'FST_ERR_BAD_URL') {
    reply.code(statusOf('BAD_URL')).send(body('BAD_URL'));
  } else {
    reply.code(statusOf('BAD_REQUEST')).send(body('BAD_REQUEST'));
  }
}

/**
 * Errors Node's HTTP parser raises before a request exists (headers too large, headers not
 * sent within STOWAGE_HEADERS_TIMEOUT_MS, malformed HTTP): answered in the documented shape on
 * the raw socket, which is then closed. Fastify's `clientErrorHandler`.
 */
export function clientErrorHandler(err: NodeJS.ErrnoException, socket: Duplex): void {
  // A connection reset: nobody is left to answer.
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [code, message]: [ErrorCode, string?] =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? ['REQUEST_TIMEOUT']
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? ['HEADERS_TOO_LARGE']
        : ['BAD_REQUEST', 'The request is not valid HTTP'];
  if (socket.writable) socket.write(rawAnswer(statusOf(code), body(code, message)));
  socket.destroy();
}

/** A complete HTTP/1.1 answer that closes the connection, for sockets without a response object. */
export function rawAnswer(status: number, payload: unknown): string {
  const text = JSON.stringify(payload);
  return `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\nContent-Type: application/json; charset=utf-8\r\nCache-Control: no-store\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`;
}

/** Refused bodies up to this size are read to their end before the answer (see `drainSmallBody`). */
const DRAIN_LIMIT = 1024 * 1024;
const DRAIN_MS = 1000;

/**
 * Reads the rest of a small refused body (a refusal before the handler took it: a wrong key, a
 * quota, a rate limit; or while a parser was reading it: a file over its size) to its end, and
 * drops it. A refusal sent while the client is still sending goes out with `Connection: close`,
 * and the reset that closing a connection with unread bytes causes can destroy the answer
 * before the client reads it (fetch then says "fetch failed", EPIPE, instead of 401 or 413).
 * Larger bodies are not worth reading: their connection is closed. At most DRAIN_MS of waiting.
 */
export async function drainSmallBody(req: IncomingMessage): Promise<void> {
  const n = Number(req.headers['content-length']);
  const declared = Number.isSafeInteger(n) && n > 0 ? n : 0;
  if (req.complete || req.readableEnded || declared === 0 || declared > DRAIN_LIMIT) return;
  // A parser the body was piped into (a form whose file went over its limit) is done with it:
  // its stream has stopped being read, so it would stall the body. Take the body from it.
  req.unpipe();
  req.resume();
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    once(req, 'end').catch(() => {}),
    once(req, 'close').catch(() => {}),
    new Promise((r) => (timer = setTimeout(r, DRAIN_MS))),
  ]);
  clearTimeout(timer);
}

export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler(async (err: FastifyError, request, reply) => {
    // Refused before its body was read to the end (a wrong key, a part cut by complete, a file
    // over its limit): a small unread body is read first, so the client sees the answer; the
    // rest is not worth reading, and an unread body would hold the connection open for good.
    // Close it after this answer.
    if (!request.raw.complete) await drainSmallBody(request.raw);
    if (!request.raw.complete) reply.header('connection', 'close');
    if (err instanceof AppError) {
      if (err.extra.headers) reply.headers(err.extra.headers);
      // A failed delivery must not keep the headers set for the file it was going to send.
      for (const h of ['etag', 'last-modified', 'cache-control', 'accept-ranges', 'vary', 'content-length', 'link'])
        reply.removeHeader(h);
      return reply.code(err.status).send(err.toBody());
    }
    if (err.validation) {
      const first = err.validation[0];
      const where = `${err.validationContext ?? 'request'}${first?.instancePath?.replace(/\//g, '.') ?? ''}`;
      const message = first ? `${where} ${first.message}` : err.message;
      return reply.code(statusOf('VALIDATION_FAILED')).send(body('VALIDATION_FAILED', message));
    }
    const mapped = err.code ? FASTIFY_CODES[err.code] : undefined;
    if (mapped) return reply.code(statusOf(mapped.code)).send(body(mapped.code, mapped.message, mapped.error));
    if (err instanceof SyntaxError && err.statusCode === 400) {
      return reply.code(statusOf('INVALID_JSON')).send(body('INVALID_JSON'));
    }
    // Other client errors a plugin raises keep the plugin's status and code (docs/errors.md says so).
    if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500) {
      const code = err.code ?? 'BAD_REQUEST';
      const error = ERROR_CATALOGUE.BAD_REQUEST.error;
      return reply.code(err.statusCode).send({ success: false, error, errorCode: code, code, message: err.message });
    }
    if (isDiskFull(err)) {
      request.log.warn({ code: (err as { code?: string }).code }, 'disk full');
      const full = errors.insufficientStorage();
      return reply.code(full.status).send(full.toBody());
    }
    if (isUnavailable(err)) {
      request.log.warn({ code: (err as { code?: string }).code }, 'dependency unavailable');
      reply.header('retry-after', '5');
      return reply.code(statusOf('SERVICE_UNAVAILABLE')).send(body('SERVICE_UNAVAILABLE'));
    }
    request.log.error({ err }, 'unhandled error');
    return reply.code(statusOf('INTERNAL_ERROR')).send(body('INTERNAL_ERROR'));
  });

  // Wrong method on a known path is 405 with Allow, not 404: keep a second router that knows
  // every path with its methods.
  const known = FindMyWay({ ignoreTrailingSlash: true });
  const methodsByPath = new Map<string, Set<string>>();
  app.addHook('onRoute', (route) => {
    // The delivery catch-all (/:workspace/*) would make every unknown path "known".
    // So would @fastify/cors's OPTIONS '*' route, which answers preflights.
    if (route.url.startsWith('/:') || route.url === '*') return;
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    let set = methodsByPath.get(route.url);
    if (!set) {
      set = new Set();
      methodsByPath.set(route.url, set);
      known.on('GET', route.url, () => {}, { methods: set });
    }
    for (const m of methods) set.add(m.toUpperCase());
  });

  app.setNotFoundHandler((request, reply) => {
    // A preflight @fastify/cors did not allow lands here: no CORS headers, and no talk of methods.
    if (request.method === 'OPTIONS' && request.headers['access-control-request-method']) {
      const refused = errors.preflightRefused();
      return reply.code(refused.status).send(refused.toBody());
    }
    const path = request.url.split('?')[0];
    const match = known.find('GET', path) as { store?: { methods: Set<string> } } | null;
    if (match?.store && !match.store.methods.has(request.method)) {
      const allow = [...match.store.methods]
        .filter((m) => m !== 'HEAD')
        .sort()
        .join(', ');
      reply.header('allow', allow);
      return reply
        .code(statusOf('METHOD_NOT_ALLOWED'))
        .send(body('METHOD_NOT_ALLOWED', `${request.method} is not allowed here; use ${allow}`));
    }
    const shown = path.length > 120 ? `${path.slice(0, 120)}…` : path;
    return reply.code(statusOf('ROUTE_NOT_FOUND')).send(body('ROUTE_NOT_FOUND', `No route ${request.method} ${shown}`));
  });
}
