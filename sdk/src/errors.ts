/** An error answer from the service, in its documented shape. */
export class StowageError extends Error {
  constructor(
    readonly status: number,
    readonly error: string,
    readonly errorCode: string | undefined,
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
