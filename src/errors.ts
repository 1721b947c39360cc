// Domain errors with stable codes. Services throw these; one error handler (http/errors.ts)
// turns them into `{success:false, error, errorCode, message}` with the given status. Codes,
// statuses and default texts come from the error catalogue (contract/error-catalogue.ts).
import {
  ERROR_CATALOGUE,
  type ErrorCode,
  type ErrorEntry,
  retryHint,
  type StatusOf,
} from './contract/error-catalogue.ts';

type Extra = { body?: Record<string, unknown>; headers?: Record<string, string> };

export class AppError<C extends ErrorCode = ErrorCode> extends Error {
  constructor(
    /** The catalogue's status for the code (checked when compiling). */
    public readonly status: StatusOf<C>,
    public readonly errorCode: C,
    /** The `error` member of the body: short, and for documented cases the exact text. */
    public readonly error: string,
    message?: string,
    /** Extra members of the body (e.g. retryAfterSeconds), and headers to send. */
    public readonly extra: Extra = {},
  ) {
    super(message ?? error);
    this.name = 'AppError';
  }

  /** The same error, its message naming the field it is about. */
  withField(field: string): AppError<C> {
    return new AppError(
      this.status,
      this.errorCode,
      this.error,
      this.message.replace(/^remote_url/, field),
      this.extra,
    );
  }

  toBody(): Record<string, unknown> {
    // `code` too: the hosted API's error schema names it so.
    return {
      success: false,
      error: this.error,
      errorCode: this.errorCode,
      code: this.errorCode,
      message: this.message,
      ...this.extra.body,
    };
  }
}

/**
 * The catalogue's error for `code`: its status and `error` text, the given message (default:
 * the catalogue's), and `x-should-retry` when the catalogue says otherwise than the status.
 */
export function appError<C extends ErrorCode>(code: C, message?: string, extra: Extra = {}): AppError<C> {
  const entry = ERROR_CATALOGUE[code];
  const { retry }: ErrorEntry = entry;
  const headers =
    retry !== undefined && retry !== retryHint(entry.status)
      ? { ...extra.headers, 'x-should-retry': String(retry) }
      : extra.headers;
  return new AppError(
    entry.status,
    code,
    entry.error,
    message ?? entry.message,
    headers ? { ...extra, headers } : extra,
  );
}

export const INVALID_CONFIGURATION_MESSAGE = 'Configuration is invalid for the specified type';

export const errors = {
  validation: (message: string) => appError('VALIDATION_FAILED', message),
  invalidConfiguration: () => appError('VALIDATION_FAILED', INVALID_CONFIGURATION_MESSAGE),
  unauthorized: () => appError('UNAUTHORIZED'),
  /** The texts list sources answers with (docs/api/sources.md#list-sources). */
  invalidApiKey: () => appError('INVALID_API_KEY'),
  privateKeyRequired: () => appError('PRIVATE_KEY_REQUIRED'),
  sourceNotFound: () => appError('SOURCE_NOT_FOUND'),
  sourceNameTaken: () => appError('SOURCE_NAME_TAKEN'),
  workspaceNotFound: (id: string) => appError('WORKSPACE_NOT_FOUND', `No workspace ${id}`),
  keyNotFound: (id: string) => appError('KEY_NOT_FOUND', `No API key ${id}`),
  lastPrivateKey: () => appError('LAST_PRIVATE_KEY'),
  deliveryNotFound: (id: string) => appError('DELIVERY_NOT_FOUND', `No webhook delivery ${id}`),
  fileRequired: () => appError('FILE_REQUIRED'),
  fileNameRequired: () => appError('FILE_NAME_REQUIRED'),
  fileTooLarge: (max: number) =>
    appError('FILE_TOO_LARGE', `The file is larger than the maximum of ${max} bytes allowed for this upload`),
  storageLimitExceeded: () => appError('STORAGE_LIMIT_EXCEEDED'),
  fieldTooLarge: (field: string) => appError('FIELD_TOO_LARGE', `The form field "${field.slice(0, 64)}" is too large`),
  notAnImage: () => appError('TRANSFORM_NOT_APPLICABLE'),
  sessionNotFound: () => appError('SESSION_NOT_FOUND'),
  sessionExpired: () => appError('SESSION_EXPIRED'),
  uploadIncomplete: (missing: number[]) =>
    appError(
      'UPLOAD_INCOMPLETE',
      `Missing parts: ${missing.slice(0, 50).join(', ')}${missing.length > 50 ? `, and ${missing.length - 50} more` : ''}`,
    ),
  partMismatch: (part: number) => appError('PART_MISMATCH', `Part ${part} in storage does not match the etag sent`),
  /** `x-should-retry: true` (from the catalogue): the same complete succeeds once the other one ends. */
  completeInProgress: () => appError('COMPLETE_IN_PROGRESS', undefined, { headers: { 'retry-after': '5' } }),
  urlRefused: (why: string) => appError('URL_REFUSED', `remote_url is not allowed: ${why}`),
  remoteFailed: (why: string) => appError('REMOTE_FAILED', why),
  /** Delivery: no file (or origin object) at the address. */
  nothingStored: (message = 'Nothing is stored at this address') =>
    new AppError(404, 'FILE_NOT_FOUND', 'Not found', message),
  fileNotFound: () => appError('FILE_NOT_FOUND'),
  folderNotFound: () => appError('FOLDER_NOT_FOUND'),
  fileNameTaken: () => appError('FILE_NAME_TAKEN'),
  folderNotEmpty: () => appError('FOLDER_NOT_EMPTY'),
  folderExists: () => appError('FOLDER_EXISTS'),
  folderIntoItself: () => appError('FOLDER_INTO_ITSELF'),
  /** A CORS preflight the service does not allow (an origin a workspace refuses, or a path that is not cross-origin). */
  preflightRefused: () => appError('CORS_NOT_ALLOWED'),
  originNotAllowed: (origin: string) =>
    appError(
      'ORIGIN_NOT_ALLOWED',
      `This workspace's public key and upload tokens may not be used from pages on ${origin.slice(0, 200)}; add it to allowed_origins (PATCH /api/v1/workspace) with the private key`,
    ),
  webhookNotAllowed: () => appError('WEBHOOK_NOT_ALLOWED'),
  /** Upload tokens (POST /api/v1/uploads/{token}): the documented 401 text, with why in errorCode. */
  invalidToken: (why: 'TOKEN_INVALID' | 'TOKEN_EXPIRED' | 'TOKEN_USED') => appError(why),
  overrideNotAllowed: (field: string) =>
    appError('OVERRIDE_NOT_ALLOWED', `This upload token does not allow the uploader to choose ${field}`),
  /** The disk (or the user's disk quota) holding local storage is full, or below the free-space floor. */
  insufficientStorage: () => appError('INSUFFICIENT_STORAGE'),
  /** STOWAGE_MAX_CONCURRENT_UPLOADS: the workspace already has that many uploads in progress on this node. */
  tooManyUploads: (max: number, retryAfterSeconds = 5) =>
    appError('TOO_MANY_UPLOADS', `This workspace already has ${max} uploads in progress; retry when one has finished`, {
      body: { retryAfterSeconds },
      headers: { 'retry-after': String(retryAfterSeconds) },
    }),
  /** STOWAGE_BODY_IDLE_TIMEOUT_MS: no byte of the request body arrived for that long; the connection is closed. */
  bodyIdle: (ms: number) =>
    appError(
      'BODY_TIMEOUT',
      `No byte of the request body arrived for ${ms} ms; the connection is closed. Send the request again`,
    ),
  /** A rendition over STOWAGE_RENDER_MAX_MEGAPIXELS or STOWAGE_RENDER_MAX_SIDE. */
  renditionTooLarge: (w: number, h: number, megapixels: number, side: number) =>
    appError(
      'RENDITION_TOO_LARGE',
      `the rendition would be ${w}x${h} px; the limit is ${megapixels} megapixels and ${side} px per side`,
    ),
  /** e_blur / e_sharpen above what the rendition's size allows. */
  effectTooStrong: (effect: string, w: number, h: number, max: string) =>
    appError(
      'EFFECT_TOO_STRONG',
      `${effect} is stronger than a ${w}x${h} rendition can show; at most ${max} at that size`,
    ),
  /** STOWAGE_RENDER_TIMEOUT_MS ran out: the render was abandoned. */
  renderTimeout: (ms: number, retryAfterSeconds: number) =>
    appError(
      'RENDER_TIMEOUT',
      `The rendition took longer than ${ms} ms to make and was abandoned; try again later, or ask for a smaller one`,
      { headers: { 'retry-after': String(retryAfterSeconds) } },
    ),
  /** Every render slot is busy and STOWAGE_RENDER_QUEUE requests already wait. */
  renderBusy: (retryAfterSeconds: number) =>
    appError('RENDER_BUSY', `Too many renditions are being made; retry in ${retryAfterSeconds} s`, {
      headers: { 'retry-after': String(retryAfterSeconds) },
    }),
  /** STOWAGE_TRANSCODE_QUEUE transcodes already wait or run. */
  transcodeBusy: (retryAfterSeconds: number) =>
    appError('TRANSCODE_BUSY', `Too many video renditions are waiting to be made; retry in ${retryAfterSeconds} s`, {
      headers: { 'retry-after': String(retryAfterSeconds) },
    }),
  serviceUnavailable: (what: string) =>
    appError('SERVICE_UNAVAILABLE', `${what} is not answering; try again shortly`, {
      headers: { 'retry-after': '5' },
    }),
};
