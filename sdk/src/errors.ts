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
