// Secrets that travel in URLs never reach a log line. Request URLs carry some by design: the
// signatures of local part URLs and of signed delivery URLs (`?expires=&signature=`, `?tsig=`) and the
// upload token in `POST /api/v1/uploads/stw_ut_<id>.<sig>` (a bearer secret). Outbound URLs
// that may end up in an error message carry others: S3 presigned (`X-Amz-Signature`,
// `X-Amz-Credential`, `X-Amz-Security-Token`), GCS (`X-Goog-Signature`), Azure SAS (`sig`).
//
// Two layers, both installed by buildApp whatever logger options it is given:
// - serializers: `req.url` is written with those query values and the token segment replaced,
//   and error messages and stacks are cleaned the same way;
// - a last pass over every finished line (pino's `streamWrite` hook), for URLs that reach a log
//   line some other way (a message string, a property of a library's error).
// What is left stays useful: the path, every other parameter, and the names of the redacted ones.
import type { FastifyServerOptions } from 'fastify';
import pino from 'pino';

export const REDACTED = '[redacted]';

/** Query parameters whose values are secrets (compared case-insensitively). */
const SECRET_PARAMS = new Set([
  'signature',
  'sig',
  'tsig',
  'x-amz-signature',
  'x-amz-credential',
  'x-amz-security-token',
  'x-goog-signature',
  'x-goog-credential',
  'token',
  'access_token',
  'api_key',
  'x-api-key',
]);

const TOKEN_PREFIX = 'stw_ut_';
/** A token anywhere in free text, also with its underscores percent-encoded. */
const TOKEN_IN_TEXT = /stw(?:_|%5f)ut(?:_|%5f)[^\s"'/?#&\\<>]*/gi;
/** A workspace delivery key (`stw_dk_…`), should one ever be written where a log can see it. */
const DELIVERY_KEY_IN_TEXT = /stw(?:_|%5f)dk(?:_|%5f)[0-9A-Za-z]+/gi;
/** `name=value` of a secret parameter in free text (a URL inside a message or error). */
const PARAM_IN_TEXT =
  /([?&;](?:signature|sig|tsig|x-amz-signature|x-amz-credential|x-amz-security-token|x-goog-signature|x-goog-credential|token|access_token|api_key|x-api-key)=)[^&#\s"'\\<>]*/gi;
/** Cheap pre-check: most lines have none of these and are passed through untouched. */
const MAYBE_SECRET = /stw|sig|token|credential|api_key|x-api-key/i;

function decode(s: string): string {
  if (!s.includes('%') && !s.includes('+')) return s;
  try {
    return decodeURIComponent(s.replace(/\+/g, ' '));
  } catch {
    return s;
  }
}

/** A token, or anything that would decode to one (`stw%5Fut%5F…` reaches the same route). */
function isTokenSegment(segment: string): boolean {
  return decode(segment).trim().toLowerCase().startsWith(TOKEN_PREFIX);
}

/**
 * A URL (a request target such as `/a/b?x=1`, or an absolute URL) with the values of secret
 * query parameters and any upload-token path segment replaced by `[redacted]`.
 */
export function redactUrl(url: string): string {
  // Percent-encoded names (`%73ignature`) escape the quick check: those URLs are looked at whole.
  if (!url.includes('%') && !MAYBE_SECRET.test(url)) return url;
  const hash = url.indexOf('#');
  const fragment = hash === -1 ? '' : url.slice(hash);
  const rest = hash === -1 ? url : url.slice(0, hash);
  const q = rest.indexOf('?');
  const path = q === -1 ? rest : rest.slice(0, q);
  const query = q === -1 ? undefined : rest.slice(q + 1);
  const cleanPath = path
    .split('/')
    .map((segment) => (isTokenSegment(segment) ? `${TOKEN_PREFIX}${REDACTED}` : segment))
    .join('/');
  const cleanQuery =
    query === undefined
      ? ''
      : `?${query
          .split('&')
          .map((pair) => {
            const eq = pair.indexOf('=');
            const name = eq === -1 ? pair : pair.slice(0, eq);
            if (eq === -1) return isTokenSegment(pair) ? REDACTED : pair;
            if (SECRET_PARAMS.has(decode(name).trim().toLowerCase())) return `${name}=${REDACTED}`;
            // A URL carried in another parameter's value can hold secrets of its own.
            const value = decode(pair.slice(eq + 1));
            return redactText(value) === value ? pair : `${name}=${REDACTED}`;
          })
          .join('&')}`;
  return cleanPath + cleanQuery + redactText(fragment);
}

/** Free text (a message, an error, a whole log line) with secrets in URLs it contains redacted. */
export function redactText(text: string): string {
  if (!MAYBE_SECRET.test(text)) return text;
  return text
    .replace(PARAM_IN_TEXT, `$1${REDACTED}`)
    .replace(TOKEN_IN_TEXT, `${TOKEN_PREFIX}${REDACTED}`)
    .replace(DELIVERY_KEY_IN_TEXT, `stw_dk_${REDACTED}`);
}

interface LoggedRequest {
  method?: string;
  url?: string;
  host?: string;
  ip?: string;
  headers?: Record<string, unknown>;
  socket?: { remotePort?: number };
}

/** Fastify's own `req` serializer (the same fields), with the URL redacted. */
export function serializeRequest(req: LoggedRequest): Record<string, unknown> {
  return {
    method: req.method,
    url: typeof req.url === 'string' ? redactUrl(req.url) : req.url,
    version: req.headers?.['accept-version'],
    host: req.host,
    remoteAddress: req.ip,
    remotePort: req.socket?.remotePort,
  };
}

/** pino's `err` serializer (or another one's output), with URLs in the message and stack redacted. */
export function serializeError(err: unknown, base: Serializer = pino.stdSerializers.err): unknown {
  const out = base(err);
  if (!out || typeof out !== 'object') return out;
  const o = out as Record<string, unknown>;
  for (const k of ['message', 'stack']) if (typeof o[k] === 'string') o[k] = redactText(o[k] as string);
  return o;
}

type LoggerOption = FastifyServerOptions['logger'];
/** A pino serializer as a method type: one written for its own value type (a request, an error) fits. */
type Serializer = { serialize(value: unknown): unknown }['serialize'];

/**
 * The logger options buildApp uses: whatever was given (or nothing), plus the redacting `req`
 * and `err` serializers and the final pass over every line. Fastify puts its defaults under
 * the serializers it is given, so these replace its `req` and `err`.
 */
export function withLogRedaction(logger: LoggerOption): LoggerOption {
  if (!logger) return logger;
  const given = (logger === true ? {} : logger) as unknown as {
    serializers?: Record<string, Serializer>;
    hooks?: { streamWrite?: (line: string) => string } & Record<string, unknown>;
  } & Record<string, unknown>;
  const theirs = given.serializers ?? {};
  const theirWrite = given.hooks?.streamWrite;
  return {
    ...given,
    serializers: {
      ...theirs,
      req: (req: LoggedRequest) => {
        const out = theirs.req ? (theirs.req(req) as Record<string, unknown>) : serializeRequest(req);
        if (out && typeof out.url === 'string') out.url = redactUrl(out.url);
        return out;
      },
      err: (err: unknown) => serializeError(err, theirs.err),
    },
    hooks: {
      ...given.hooks,
      streamWrite: (line: string) => redactText(theirWrite ? theirWrite(line) : line),
    },
  } as LoggerOption;
}
