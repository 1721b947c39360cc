// Errors the client throws: the service's refusals (with their catalogue code) and cancellation.
import type { ErrorCode } from './types.gen.ts';

/** A code of the error catalogue (docs/errors.md), or another a framework error carries (`FST_...`). */
export type AnyErrorCode = ErrorCode | (string & Record<never, never>);

/** An error answer from the service, in its documented shape. */
export class StowageError extends Error {
  constructor(
    readonly status: number,
    readonly error: string,
    readonly errorCode: AnyErrorCode | undefined,
    message: string,
    /** Seconds to wait before retrying (429, 503), when the service said. */
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
    this.name = 'StowageError';
  }
}

/** The request was cancelled through its AbortSignal. */
export class StowageAbortError extends Error {
  constructor() {
    super('cancelled');
    this.name = 'AbortError';
  }
}

const REASONS: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'name lookup failed (temporary)',
  ETIMEDOUT: 'timed out',
  UND_ERR_CONNECT_TIMEOUT: 'connect timed out',
  UND_ERR_SOCKET: 'connection closed',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  EPIPE: 'connection closed while sending',
  DEPTH_ZERO_SELF_SIGNED_CERT: 'TLS: self-signed certificate',
  SELF_SIGNED_CERT_IN_CHAIN: 'TLS: self-signed certificate in the chain',
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: 'TLS: certificate cannot be verified',
  CERT_HAS_EXPIRED: 'TLS: certificate expired',
  ERR_TLS_CERT_ALTNAME_INVALID: 'TLS: certificate does not match the host name',
};

/** The first `code` on an error or its causes (fetch wraps the socket's error as `cause`). */
function codeOf(err: unknown, depth = 0): string | undefined {
  if (!err || typeof err !== 'object' || depth > 4) return undefined;
  const e = err as { code?: unknown; cause?: unknown; errors?: unknown[] };
  if (typeof e.code === 'string') return e.code;
  if (Array.isArray(e.errors)) for (const x of e.errors) if (codeOf(x, depth + 1)) return codeOf(x, depth + 1);
  return codeOf(e.cause, depth + 1);
}

/** The message of the deepest cause ("bad port" under fetch's "fetch failed"). */
function innermostMessage(err: unknown): string {
  let e = err;
  while (e instanceof Error && e.cause instanceof Error) e = e.cause;
  return e instanceof Error ? e.message : String(err);
}

/**
 * The service (or the storage a part goes to) could not be reached: no answer at all. The message
 * says what failed and where, `cannot reach http://127.0.0.1:3000: connection refused`. Only the
 * origin is named: part and delivery URLs carry signatures.
 */
export class StowageNetworkError extends Error {
  /** The origin that could not be reached. */
  readonly origin: string;
  /** The socket's error code (`ECONNREFUSED`, …), when there was one. */
  readonly code: string | undefined;
  constructor(url: string | URL, cause: unknown) {
    const code = codeOf(cause);
    let origin: string;
    try {
      origin = new URL(url).origin;
    } catch {
      origin = 'the service';
    }
    const why = code ? (REASONS[code] ?? code) : innermostMessage(cause);
    super(`cannot reach ${origin}: ${why}`, { cause });
    this.name = 'StowageNetworkError';
    this.origin = origin;
    this.code = code;
  }
}
