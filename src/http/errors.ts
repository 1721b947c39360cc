// One place that turns anything thrown into the documented error shape
// `{success:false, error, errorCode, message}`. Unknown errors become 500 without internals;
// an unreachable database becomes 503.
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyInstance } from 'fastify';
import FindMyWay from 'find-my-way';
import { AppError, errors } from '../errors.ts';

const body = (error: string, errorCode: string, message: string) => ({
  success: false,
  error,
  errorCode,
  code: errorCode,
  message,
});

const FASTIFY_CODES: Record<string, [number, string, string, string]> = {
  FST_ERR_CTP_BODY_TOO_LARGE: [
    413,
    'PAYLOAD_TOO_LARGE',
    'Payload too large',
    'The request body is larger than this endpoint accepts',
  ],
  FST_ERR_CTP_INVALID_MEDIA_TYPE: [
    415,
    'UNSUPPORTED_MEDIA_TYPE',
    'Unsupported media type',
    'Send the body as application/json',
  ],
  FST_ERR_CTP_EMPTY_JSON_BODY: [400, 'INVALID_JSON', 'Invalid JSON', 'The body is empty but Content-Type says JSON'],
  FST_ERR_CTP_INVALID_JSON_BODY: [400, 'INVALID_JSON', 'Invalid JSON', 'The body is not valid JSON'],
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: [
    400,
    'INVALID_CONTENT_LENGTH',
    'Bad request',
    'Content-Length does not match the body',
  ],
  FST_ERR_CTP_INVALID_TYPE: [400, 'INVALID_CONTENT_TYPE', 'Bad request', 'The Content-Type header is not valid'],
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
export function frameworkErrors(
  err: FastifyError,
  _request: unknown,
  reply: { code(n: number): { send(b: unknown): unknown } },
): void {
  if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    reply.code(414).send(body('URI too long', 'URI_TOO_LONG', 'A path segment is longer than any valid id'));
  } else if (err.code === 'FST_ERR_BAD_URL') {
    reply.code(400).send(body('Bad request', 'BAD_URL', 'The request URL is malformed'));
  } else {
    reply.code(400).send(body('Bad request', 'BAD_REQUEST', 'The request could not be routed'));
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
  let answer: [number, string, string, string];
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT')
    answer = [408, 'REQUEST_TIMEOUT', 'Request timeout', 'The request headers did not arrive in time'];
  else if (err.code === 'HPE_HEADER_OVERFLOW')
    answer = [
      431,
      'HEADERS_TOO_LARGE',
      'Request header fields too large',
      'The request headers are larger than the server accepts',
    ];
  else answer = [400, 'BAD_REQUEST', 'Bad request', 'The request is not valid HTTP'];
  if (socket.writable) socket.write(rawAnswer(answer[0], body(answer[2], answer[1], answer[3])));
  socket.destroy();
}

/** A complete HTTP/1.1 answer that closes the connection, for sockets without a response object. */
export function rawAnswer(status: number, payload: unknown): string {
  const text = JSON.stringify(payload);
  return `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`;
}

export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError, request, reply) => {
    // Refused before its body was read to the end (a part cut by complete, a file over its
    // limit): the rest is not worth reading, and an unread body would hold the connection
    // open for good. Close it after this answer.
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
      return reply.code(400).send(body('Validation failed', 'VALIDATION_FAILED', message));
    }
    const mapped = err.code ? FASTIFY_CODES[err.code] : undefined;
    if (mapped) return reply.code(mapped[0]).send(body(mapped[2], mapped[1], mapped[3]));
    if (err instanceof SyntaxError && err.statusCode === 400) {
      return reply.code(400).send(body('Invalid JSON', 'INVALID_JSON', 'The body is not valid JSON'));
    }
    if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500) {
      return reply.code(err.statusCode).send(body('Bad request', err.code ?? 'BAD_REQUEST', err.message));
    }
    if (isDiskFull(err)) {
      request.log.warn({ code: (err as { code?: string }).code }, 'disk full');
      const full = errors.insufficientStorage();
      return reply.code(full.status).send(full.toBody());
    }
    if (isUnavailable(err)) {
      request.log.warn({ code: (err as { code?: string }).code }, 'dependency unavailable');
      reply.header('retry-after', '5');
      return reply
        .code(503)
        .send(
          body('Service unavailable', 'SERVICE_UNAVAILABLE', 'A backing service is not answering; try again shortly'),
        );
    }
    request.log.error({ err }, 'unhandled error');
    return reply
      .code(500)
      .send(body('Internal server error', 'INTERNAL_ERROR', 'Something went wrong on our side; it has been logged'));
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
        .code(405)
        .send(body('Method not allowed', 'METHOD_NOT_ALLOWED', `${request.method} is not allowed here; use ${allow}`));
    }
    const shown = path.length > 120 ? `${path.slice(0, 120)}…` : path;
    return reply.code(404).send(body('Not found', 'ROUTE_NOT_FOUND', `No route ${request.method} ${shown}`));
  });
}
