// Domain errors with stable codes. Services throw these; one error handler (http/errors.ts)
// turns them into `{success:false, error, errorCode, message}` with the given status.
export class AppError extends Error {
  constructor(
    public readonly status: number,
    public readonly errorCode: string,
    /** The `error` member of the body: short, and for documented cases the exact text. */
    public readonly error: string,
    message?: string,
    /** Extra members of the body (e.g. retryAfterSeconds), and headers to send. */
    public readonly extra: { body?: Record<string, unknown>; headers?: Record<string, string> } = {},
  ) {
    super(message ?? error);
    this.name = 'AppError';
  }

  /** The same error, its message naming the field it is about. */
  withField(field: string): AppError {
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

export const INVALID_CONFIGURATION_MESSAGE = 'Configuration is invalid for the specified type';

export const errors = {
  validation: (message: string) => new AppError(400, 'VALIDATION_FAILED', 'Validation failed', message),
  invalidConfiguration: () =>
    new AppError(400, 'VALIDATION_FAILED', 'Validation failed', INVALID_CONFIGURATION_MESSAGE),
  unauthorized: () => new AppError(401, 'UNAUTHORIZED', 'Unauthorized', 'Invalid or missing API key'),
  /** The texts list sources answers with (docs/api/sources.md#list-sources). */
  invalidApiKey: () =>
    new AppError(
      401,
      'INVALID_API_KEY',
      'Invalid API key.',
      'The provided API key is invalid, inactive, or has been deleted',
    ),
  privateKeyRequired: () =>
    new AppError(
      403,
      'PRIVATE_KEY_REQUIRED',
      'Forbidden',
      'This endpoint requires a private API key; public keys may only upload',
    ),
  sourceNotFound: () =>
    new AppError(404, 'SOURCE_NOT_FOUND', 'Source not found', 'No source with this id exists in this workspace'),
  sourceNameTaken: () =>
    new AppError(
      409,
      'SOURCE_NAME_TAKEN',
      'Origin name already exists in this workspace',
      'Choose another name for this source',
    ),
  workspaceNotFound: (id: string) =>
    new AppError(404, 'WORKSPACE_NOT_FOUND', 'Workspace not found', `No workspace ${id}`),
  keyNotFound: (id: string) => new AppError(404, 'KEY_NOT_FOUND', 'Key not found', `No API key ${id}`),
  fileRequired: () => new AppError(400, 'FILE_REQUIRED', 'File is required', 'Send the file in the "file" form field'),
  fileNameRequired: () =>
    new AppError(400, 'FILE_NAME_REQUIRED', 'File name is required', 'Send the "file_name" form field'),
  fileTooLarge: (max: number) =>
    new AppError(
      413,
      'FILE_TOO_LARGE',
      'File too large',
      `The file is larger than the maximum of ${max} bytes allowed for this upload`,
    ),
  storageLimitExceeded: () =>
    new AppError(
      402,
      'STORAGE_LIMIT_EXCEEDED',
      'Storage limit exceeded',
      'This upload would take the workspace over its storage quota',
    ),
  fieldTooLarge: (field: string) =>
    new AppError(413, 'FIELD_TOO_LARGE', 'Form field too large', `The form field "${field.slice(0, 64)}" is too large`),
  notAnImage: () =>
    new AppError(
      400,
      'TRANSFORM_NOT_APPLICABLE',
      'Validation failed',
      'transform applies to images that can be decoded',
    ),
  sessionNotFound: () =>
    new AppError(
      404,
      'SESSION_NOT_FOUND',
      'Session not found',
      'No active multipart session with this id in this workspace',
    ),
  sessionExpired: () =>
    new AppError(410, 'SESSION_EXPIRED', 'Session expired', 'This multipart session has expired; start a new one'),
  uploadIncomplete: (missing: number[]) =>
    new AppError(
      409,
      'UPLOAD_INCOMPLETE',
      'Upload incomplete',
      `Missing parts: ${missing.slice(0, 50).join(', ')}${missing.length > 50 ? `, and ${missing.length - 50} more` : ''}`,
    ),
  partMismatch: (part: number) =>
    new AppError(409, 'PART_MISMATCH', 'Part mismatch', `Part ${part} in storage does not match the etag sent`),
  completeInProgress: () =>
    new AppError(
      409,
      'COMPLETE_IN_PROGRESS',
      'Complete in progress',
      'This session is being completed; retry in a moment',
      { headers: { 'retry-after': '5', 'x-should-retry': 'true' } },
    ),
  urlRefused: (why: string) =>
    new AppError(400, 'URL_REFUSED', 'Validation failed', `remote_url is not allowed: ${why}`),
  remoteFailed: (why: string) => new AppError(502, 'REMOTE_FAILED', 'Remote fetch failed', why),
  /** Delivery: no file (or origin object) at the address. */
  nothingStored: (message = 'Nothing is stored at this address') =>
    new AppError(404, 'FILE_NOT_FOUND', 'Not found', message),
  fileNotFound: () =>
    new AppError(404, 'FILE_NOT_FOUND', 'File not found', 'No file with this file_no in this workspace'),
  folderNotFound: () =>
    new AppError(404, 'FOLDER_NOT_FOUND', 'Folder not found', 'No folder with this folder_no in this workspace'),
  fileNameTaken: () =>
    new AppError(
      409,
      'FILE_NAME_TAKEN',
      'File name already exists in this folder',
      'Choose another name, or move the file elsewhere',
    ),
  folderNotEmpty: () =>
    new AppError(
      409,
      'FOLDER_NOT_EMPTY',
      'Folder is not empty',
      'The folder holds files or folders; delete them first, or send ?recursive=true to delete everything in it',
    ),
  folderExists: () =>
    new AppError(
      409,
      'FOLDER_EXISTS',
      'Folder already exists',
      'The parent folder already holds a folder with this name',
    ),
  /** A CORS preflight the service does not allow (an origin a workspace refuses, or a path that is not cross-origin). */
  preflightRefused: () =>
    new AppError(
      403,
      'CORS_NOT_ALLOWED',
      'Forbidden',
      'Cross-origin requests to this address are not allowed from this origin',
    ),
  originNotAllowed: (origin: string) =>
    new AppError(
      403,
      'ORIGIN_NOT_ALLOWED',
      'Forbidden',
      `This workspace's public key and upload tokens may not be used from pages on ${origin.slice(0, 200)}; add it to allowed_origins (PATCH /api/v1/workspace) with the private key`,
    ),
  webhookNotAllowed: () =>
    new AppError(
      403,
      'WEBHOOK_NOT_ALLOWED',
      'Forbidden',
      "A public key or upload token may send webhook_url only to an origin listed in the workspace's webhook_origins; set it with the private key",
    ),
  /** Upload tokens (POST /api/v1/uploads/{token}): the documented 401 text, with why in errorCode. */
  invalidToken: (why: 'TOKEN_INVALID' | 'TOKEN_EXPIRED' | 'TOKEN_USED') =>
    new AppError(401, why, 'Unauthorized', 'Invalid or expired token'),
  overrideNotAllowed: (field: string) =>
    new AppError(
      403,
      'OVERRIDE_NOT_ALLOWED',
      'Forbidden',
      `This upload token does not allow the uploader to choose ${field}`,
    ),
  /** The disk (or the user's disk quota) holding local storage is full, or below the free-space floor. */
  insufficientStorage: () =>
    new AppError(
      507,
      'INSUFFICIENT_STORAGE',
      'Insufficient storage',
      'The server has no room left to store this; nothing was stored. Try again later or with a smaller file',
    ),
  /** STOWAGE_MAX_CONCURRENT_UPLOADS: the workspace already has that many uploads in progress on this node. */
  tooManyUploads: (max: number, retryAfterSeconds = 5) =>
    new AppError(
      429,
      'TOO_MANY_UPLOADS',
      'Too many requests',
      `This workspace already has ${max} uploads in progress; retry when one has finished`,
      {
        body: { retryAfterSeconds },
        headers: { 'retry-after': String(retryAfterSeconds) },
      },
    ),
  /** STOWAGE_BODY_IDLE_TIMEOUT_MS: no byte of the request body arrived for that long; the connection is closed. */
  bodyIdle: (ms: number) =>
    new AppError(
      408,
      'BODY_TIMEOUT',
      'Request timeout',
      `No byte of the request body arrived for ${ms} ms; the connection is closed. Send the request again`,
    ),
  serviceUnavailable: (what: string) =>
    new AppError(503, 'SERVICE_UNAVAILABLE', 'Service unavailable', `${what} is not answering; try again shortly`, {
      headers: { 'retry-after': '5' },
    }),
};
