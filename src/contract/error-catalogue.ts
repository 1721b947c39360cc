// The error catalogue: every error code the API answers with, its HTTP status, the `error` text,
// the default message and whether a client should send the same request again (x-should-retry).
// The one table behind the error constructors (src/errors.ts), the framework errors
// (src/http/errors.ts), the retry hints, the OpenAPI error responses, docs/errors.md and the
// SDK's ErrorCode union. `{...}` in a message stands for the part that varies.

export interface ErrorEntry {
  status: number;
  /** The body's `error` member: short, and for documented cases the exact text. */
  error: string;
  message: string;
  /** Sent as `x-should-retry` where it differs from what the status says (see retryHint). */
  retry?: boolean;
}

/** 4xx that are about time, not about the request: left to the client's own rules. */
const WORTH_RETRYING = new Set([408, 425, 429]);

/**
 * `x-should-retry` as answers carry it by status: false on a 4xx that sending the same request
 * again cannot fix; nothing (the client's own rules: the hosted SDKs retry 408, 409, 429, 5xx) otherwise.
 */
export function retryHint(status: number): boolean | undefined {
  return status >= 400 && status < 500 && !WORTH_RETRYING.has(status) ? false : undefined;
}

const VALIDATION = 'Validation failed';
const FORBIDDEN = 'Forbidden';
const BAD_REQUEST = 'Bad request';

export const ERROR_CATALOGUE = {
  // Requests as sent
  VALIDATION_FAILED: { status: 400, error: VALIDATION, message: '{the field, and what is wrong with it}' },
  INVALID_JSON: { status: 400, error: 'Invalid JSON', message: 'The body is not valid JSON' },
  INVALID_CONTENT_LENGTH: { status: 400, error: BAD_REQUEST, message: 'Content-Length does not match the body' },
  INVALID_CONTENT_TYPE: {
    status: 400,
    error: 'Content-Type must be application/octet-stream',
    message: 'Send the part with Content-Type: application/octet-stream',
  },
  BAD_URL: { status: 400, error: BAD_REQUEST, message: 'The request URL is malformed' },
  BAD_REQUEST: { status: 400, error: BAD_REQUEST, message: 'The request could not be routed' },
  PAYLOAD_TOO_LARGE: {
    status: 413,
    error: 'Payload too large',
    message: 'The request body is larger than this endpoint accepts',
  },
  UNSUPPORTED_MEDIA_TYPE: {
    status: 415,
    error: 'Unsupported media type',
    message: 'Send the body as application/json',
  },
  URI_TOO_LONG: { status: 414, error: 'URI too long', message: 'A path segment is longer than any valid id' },
  HEADERS_TOO_LARGE: {
    status: 431,
    error: 'Request header fields too large',
    message: 'The request headers are larger than the server accepts',
  },
  REQUEST_TIMEOUT: { status: 408, error: 'Request timeout', message: 'The request headers did not arrive in time' },
  BODY_TIMEOUT: {
    status: 408,
    error: 'Request timeout',
    message: 'No byte of the request body arrived for {ms} ms; the connection is closed. Send the request again',
  },
  METHOD_NOT_ALLOWED: {
    status: 405,
    error: 'Method not allowed',
    message: '{method} is not allowed here; use {methods}',
  },
  ROUTE_NOT_FOUND: { status: 404, error: 'Not found', message: 'No route {method} {path}' },

  // Keys, tokens and browsers
  UNAUTHORIZED: { status: 401, error: 'Unauthorized', message: 'Invalid or missing API key' },
  INVALID_API_KEY: {
    status: 401,
    error: 'Invalid API key.',
    message: 'The provided API key is invalid, inactive, or has been deleted',
  },
  PRIVATE_KEY_REQUIRED: {
    status: 403,
    error: FORBIDDEN,
    message: 'This endpoint requires a private API key; public keys may only upload',
  },
  TOKEN_INVALID: { status: 401, error: 'Unauthorized', message: 'Invalid or expired token' },
  TOKEN_EXPIRED: { status: 401, error: 'Unauthorized', message: 'Invalid or expired token' },
  TOKEN_USED: { status: 401, error: 'Unauthorized', message: 'Invalid or expired token' },
  OVERRIDE_NOT_ALLOWED: {
    status: 403,
    error: FORBIDDEN,
    message: 'This upload token does not allow the uploader to choose {field}',
  },
  CORS_NOT_ALLOWED: {
    status: 403,
    error: FORBIDDEN,
    message: 'Cross-origin requests to this address are not allowed from this origin',
  },
  ORIGIN_NOT_ALLOWED: {
    status: 403,
    error: FORBIDDEN,
    message:
      "This workspace's public key and upload tokens may not be used from pages on {origin}; add it to allowed_origins (PATCH /api/v1/workspace) with the private key",
  },
  WEBHOOK_NOT_ALLOWED: {
    status: 403,
    error: FORBIDDEN,
    message:
      "A public key or upload token may send webhook_url only to an origin listed in the workspace's webhook_origins; set it with the private key",
  },
  WORKSPACE_NOT_FOUND: { status: 404, error: 'Workspace not found', message: 'No workspace {id}' },
  KEY_NOT_FOUND: { status: 404, error: 'Key not found', message: 'No API key {id}' },
  LAST_PRIVATE_KEY: {
    status: 409,
    error: 'Last private key',
    message: 'A workspace keeps at least one private key in force; create or rotate to a new one first',
  },
  DELIVERY_NOT_FOUND: { status: 404, error: 'Delivery not found', message: 'No webhook delivery {id}' },

  // Uploads
  FILE_REQUIRED: { status: 400, error: 'File is required', message: 'Send the file in the "file" form field' },
  FILE_NAME_REQUIRED: { status: 400, error: 'File name is required', message: 'Send the "file_name" form field' },
  FIELD_TOO_LARGE: { status: 413, error: 'Form field too large', message: 'The form field "{field}" is too large' },
  FILE_TOO_LARGE: {
    status: 413,
    error: 'File too large',
    message: 'The file is larger than the maximum of {max} bytes allowed for this upload',
  },
  STORAGE_LIMIT_EXCEEDED: {
    status: 402,
    error: 'Storage limit exceeded',
    message: 'This upload would take the workspace over its storage quota',
  },
  INSUFFICIENT_STORAGE: {
    status: 507,
    error: 'Insufficient storage',
    message: 'The server has no room left to store this; nothing was stored. Try again later or with a smaller file',
  },
  TOO_MANY_UPLOADS: {
    status: 429,
    error: 'Too many requests',
    message: 'This workspace already has {max} uploads in progress; retry when one has finished',
  },
  RATE_LIMITED: {
    status: 429,
    error: 'Too many requests',
    message: 'Rate limit of {max} requests per {window} reached; retry in {seconds} s',
  },
  TRANSFORM_NOT_APPLICABLE: {
    status: 400,
    error: VALIDATION,
    message: 'transform applies to images that can be decoded',
  },
  TRANSFORM_FAILED: { status: 400, error: VALIDATION, message: 'the image could not be decoded for transform' },
  IMAGE_TOO_LARGE: { status: 400, error: VALIDATION, message: 'the image is larger than the pixel limit' },
  RENDITION_TOO_LARGE: {
    status: 400,
    error: VALIDATION,
    message: 'the rendition would be {w}x{h} px; the limit is {megapixels} megapixels and {side} px per side',
  },
  EFFECT_TOO_STRONG: {
    status: 400,
    error: VALIDATION,
    message: '{effect} is stronger than a {w}x{h} rendition can show; at most {max} at that size',
  },
  UNSAFE_SVG: {
    status: 400,
    error: VALIDATION,
    message: 'the SVG is not rendered: {why (a reference outside the SVG, a DOCTYPE, a script, its size)}',
  },
  URL_REFUSED: { status: 400, error: VALIDATION, message: 'remote_url is not allowed: {why}' },
  REMOTE_FAILED: { status: 502, error: 'Remote fetch failed', message: '{why the download failed}' },

  // Multipart sessions
  SESSION_NOT_FOUND: {
    status: 404,
    error: 'Session not found',
    message: 'No active multipart session with this id in this workspace',
  },
  SESSION_EXPIRED: {
    status: 410,
    error: 'Session expired',
    message: 'This multipart session has expired; start a new one',
  },
  SESSION_COMPLETING: {
    status: 409,
    error: 'Session is being completed',
    message: 'This upload is being completed or aborted; its parts can no longer change',
  },
  SESSION_COMPLETED: {
    status: 409,
    error: 'Session completed',
    message: 'A completed upload cannot be aborted; delete the file instead',
  },
  COMPLETE_IN_PROGRESS: {
    status: 409,
    error: 'Complete in progress',
    message: 'This session is being completed; retry in a moment',
    retry: true,
  },
  UPLOAD_INCOMPLETE: { status: 409, error: 'Upload incomplete', message: 'Missing parts: {part numbers}' },
  PART_MISMATCH: {
    status: 409,
    error: 'Part mismatch',
    message: 'Part {n} in storage does not match the etag sent',
  },
  PART_SIZE_MISMATCH: {
    status: 400,
    error: 'Part {n} must be exactly {bytes} bytes',
    message: 'Part {n} must be exactly {bytes} bytes; Content-Length says {length}',
  },

  // Files, folders, sources
  FILE_NOT_FOUND: { status: 404, error: 'File not found', message: 'No file with this file_no in this workspace' },
  FOLDER_NOT_FOUND: {
    status: 404,
    error: 'Folder not found',
    message: 'No folder with this folder_no in this workspace',
  },
  FILE_NAME_TAKEN: {
    status: 409,
    error: 'File name already exists in this folder',
    message: 'Choose another name, or move the file elsewhere',
  },
  FOLDER_NOT_EMPTY: {
    status: 409,
    error: 'Folder is not empty',
    message: 'The folder holds files or folders; delete them first, or send ?recursive=true to delete everything in it',
  },
  FOLDER_INTO_ITSELF: {
    status: 409,
    error: 'A folder cannot move into itself',
    message: 'The new parent is this folder or a folder inside it; choose a folder outside it, or the root',
  },
  FOLDER_EXISTS: {
    status: 409,
    error: 'Folder already exists',
    message: 'The parent folder already holds a folder with this name',
  },
  SOURCE_NOT_FOUND: {
    status: 404,
    error: 'Source not found',
    message: 'No source with this id exists in this workspace',
  },
  SOURCE_NAME_TAKEN: {
    status: 409,
    error: 'Origin name already exists in this workspace',
    message: 'Choose another name for this source',
  },
  PRESET_NOT_FOUND: { status: 404, error: 'Preset not found', message: 'No preset named {name} in this workspace' },
  PRESET_LIMIT_REACHED: {
    status: 409,
    error: 'Preset limit reached',
    message: 'This workspace already has {max} presets; delete one before adding another',
  },
  SOURCE_INACTIVE: { status: 410, error: 'Source inactive', message: 'This source is switched off' },
  ORIGIN_FAILED: { status: 502, error: 'Origin failed', message: '{why the origin did not answer}' },

  // Delivery
  SIGNED_URL_REQUIRED: { status: 403, error: FORBIDDEN, message: 'This file is private: use a signed URL' },
  INVALID_SIGNATURE: { status: 403, error: FORBIDDEN, message: 'The URL signature is not valid' },
  URL_EXPIRED: { status: 403, error: FORBIDDEN, message: 'The signed URL has expired' },
  TRANSFORMATION_SIGNATURE_REQUIRED: {
    status: 403,
    error: FORBIDDEN,
    message: 'This workspace serves transformations only from signed URLs',
  },
  TRANSFORM_PRESET_NOT_FOUND: {
    status: 400,
    error: VALIDATION,
    message: 'transform: "t_{name}" is not a preset of this workspace',
  },
  RANGE_NOT_SATISFIABLE: { status: 416, error: 'Range not satisfiable', message: 'The file is {size} bytes long' },

  // The service itself
  INTERNAL_ERROR: {
    status: 500,
    error: 'Internal server error',
    message: 'Something went wrong on our side; it has been logged',
  },
  VIDEO_ENGINE_MISSING: {
    status: 501,
    error: 'Not implemented',
    message:
      'Video and audio processing needs ffmpeg and ffprobe, which this server does not have (install the ffmpeg package, or set STOWAGE_FFMPEG_PATH and STOWAGE_FFPROBE_PATH)',
    retry: false,
  },
  VIDEO_REFUSED: {
    status: 400,
    error: VALIDATION,
    message: 'The media file cannot be processed: {reason}',
  },
  TRANSCODE_FAILED: {
    status: 422,
    error: 'Unprocessable content',
    message:
      'This video rendition could not be made: {reason}. The answer stays the same for an hour, then the next request tries again',
  },
  RENDER_TIMEOUT: {
    status: 503,
    error: 'Service unavailable',
    message:
      'The rendition took longer than {ms} ms to make and was abandoned; try again later, or ask for a smaller one',
  },
  TRANSCODE_BUSY: {
    status: 503,
    error: 'Service unavailable',
    message: 'Too many video renditions are waiting to be made; retry in {seconds} s',
  },
  RENDER_BUSY: {
    status: 503,
    error: 'Service unavailable',
    message: 'Too many renditions are being made; retry in {seconds} s',
  },
  SERVICE_UNAVAILABLE: {
    status: 503,
    error: 'Service unavailable',
    message: 'A backing service is not answering; try again shortly',
  },
} as const satisfies Record<string, ErrorEntry>;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;
/** The one status an error code is answered with. */
export type StatusOf<C extends ErrorCode> = (typeof ERROR_CATALOGUE)[C]['status'];

export const ERROR_CODES = Object.keys(ERROR_CATALOGUE) as ErrorCode[];

/** The x-should-retry an answer with this code carries: the entry's own word, else its status's. */
export function shouldRetry(code: ErrorCode): boolean | undefined {
  const entry: ErrorEntry = ERROR_CATALOGUE[code];
  return entry.retry ?? retryHint(entry.status);
}
