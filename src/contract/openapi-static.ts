// Paths of /openapi.json that no documented route gives: delivery URLs (answered by the fast
// path and a hidden catch-all route, docs/api/delivery.md) and /metrics (docs/api/health.md).
// Written as OpenAPI here and added to the generated document (openapi.ts).
import { codesWithStatus } from './errors.ts';
import { EXAMPLE_FILE, EXAMPLE_WORKSPACE_ID } from './examples.ts';

const ERROR_BODY = { $ref: '#/components/schemas/ErrorBody' };

/** An error answer in the shared error body, naming the catalogue's codes of its status (as errorResponses does). */
function errorResponse(status: number, when: string, example?: { errorCode: string; error: string; message: string }) {
  const media: Record<string, unknown> = { schema: ERROR_BODY };
  if (example) media.example = { success: false, ...example, code: example.errorCode };
  return {
    description: `${when}. Every error (docs/api.md#errors). The codes the API answers ${status} with: ${codesWithStatus(status).join(', ')} (docs/errors.md)`,
    content: { 'application/json': media },
  };
}

const header = (description: string, example?: string) => ({
  description,
  schema: { type: 'string', ...(example ? { example } : {}) },
});

const query = (name: string, description: string, example: string) => ({
  name,
  in: 'query',
  required: false,
  description,
  schema: { type: 'string', example },
});

const requestHeader = (name: string, description: string, example: string) => ({
  name,
  in: 'header',
  required: false,
  description,
  schema: { type: 'string', example },
});

const FILE_BYTES = { schema: { type: 'string', format: 'binary' } };

const DELIVERY_HEADERS = {
  ETag: header(
    'Originals: the SHA-256 of the bytes, quoted; renditions: derived from the file and the tokens',
    `"${EXAMPLE_FILE.hash}"`,
  ),
  'Last-Modified': header('When the file last changed', 'Sat, 14 Mar 2026 09:26:53 GMT'),
  'Cache-Control': header(
    'Originals public, max-age=300, must-revalidate; renditions public, max-age=86400, stale-while-revalidate=604800; private files private, max-age=300; versioned URLs public, max-age=31536000, immutable',
    'public, max-age=300, must-revalidate',
  ),
  'Accept-Ranges': header('bytes (none for the untransformed objects of a source)', 'bytes'),
};

const delivery = {
  get: {
    operationId: 'deliverFile',
    tags: ['delivery'],
    summary: 'A stored file, or a rendition of it',
    description: [
      'Public and anonymous: the `url` and `thumbnail` of every file record are such addresses (docs/api/delivery.md). `HEAD` answers the same without the body.',
      '',
      '- `/{workspace_id}/{path}`: the file as stored; `/{workspace_id}/{tokens}/{path}`: a rendition, where `{tokens}` is one segment of comma-separated transformation tokens (`w_400,h_300,c_fill,f_auto`; `t_{name}` for a preset).',
      "- `/{workspace_id}-{source_name}/{path}` (and with tokens): an object of the workspace's source of that name, fetched from its origin.",
      '- Private files need a signed URL (`expires`, `signature`); a workspace with signed transformations needs `tsig` (and optionally `texp`) on URLs with tokens.',
      '- `Range` (one range) gets 206; `If-None-Match` or `If-Modified-Since` get 304 when nothing changed.',
      '- A video with tokens (docs/video.md) is transcoded by a background job: 202 `{"status":"triggered"}` on the first request, `{"status":"processing"}` while the job waits or runs, then the video (or GIF) as any rendition; 422 `TRANSCODE_FAILED` when it cannot be made.',
    ].join('\n'),
    security: [],
    parameters: [
      {
        name: 'workspace_id',
        in: 'path',
        required: true,
        description: "The workspace's id, or `{workspace_id}-{source_name}` for a source's objects",
        schema: { type: 'string', example: EXAMPLE_WORKSPACE_ID },
      },
      {
        name: 'path',
        in: 'path',
        required: true,
        description:
          'Optional transformation tokens as the first segment, then the folder path and name, each segment percent-encoded (it spans several segments)',
        schema: { type: 'string', example: 'w_400,f_auto/products/shoes/shoe.jpg' },
      },
      query(
        'v',
        'The first 8 to 64 hex digits of the file hash: the answer is cached as immutable while the file has it',
        EXAMPLE_FILE.hash.slice(0, 12),
      ),
      query('expires', "A signed URL's expiry (Unix seconds)", '1773484313'),
      query(
        'signature',
        "A signed URL's signature (from signed-url, or a private file's record)",
        'Jx0m8d2bqkO7cV4rS1yT6uW9zA3eF5gH7iK9lM1nP2Q',
      ),
      query('texp', 'Expiry (Unix seconds) of a URL signed with the delivery key', '1773484313'),
      query(
        'tsig',
        'HMAC-SHA256 of the path (and texp) under the delivery key, base64url',
        'n4bQgYhMWDsT2QGxq7xVYkpEYXP3yYqWHc7xR0cmB9s',
      ),
      requestHeader('Range', 'One byte range', 'bytes=0-1023'),
      requestHeader('If-Range', 'Send the range only when this ETag or date is current', `"${EXAMPLE_FILE.hash}"`),
      requestHeader('If-None-Match', 'ETags the client holds (weak comparison, * allowed)', `"${EXAMPLE_FILE.hash}"`),
      requestHeader('If-Modified-Since', 'A date; used without If-None-Match', 'Sat, 14 Mar 2026 09:26:53 GMT'),
      requestHeader('Accept', 'With f_auto: picks AVIF, WebP, else PNG, GIF or JPEG', 'image/avif,image/webp,*/*'),
    ],
    responses: {
      200: {
        description: 'The file or rendition, with the content type of its bytes',
        headers: DELIVERY_HEADERS,
        content: { '*/*': FILE_BYTES },
      },
      206: {
        description: 'One range of the file',
        headers: { ...DELIVERY_HEADERS, 'Content-Range': header('The range sent', 'bytes 0-1023/184322') },
        content: { '*/*': FILE_BYTES },
      },
      202: {
        description:
          'A video rendition is being made (docs/video.md): `triggered` when this request queued its job, `processing` while it waits or runs (with `progress` from 0 to 1 when the node answering runs it). Ask again after Retry-After',
        headers: {
          'Retry-After': header('Seconds to wait before asking again', '2'),
          'Cache-Control': header('Never cached', 'no-store'),
        },
        content: {
          'application/json': {
            schema: {
              type: 'object',
              required: ['status'],
              properties: {
                status: { type: 'string', enum: ['triggered', 'processing'] },
                progress: { type: 'number', minimum: 0, maximum: 1 },
              },
            },
            example: { status: 'processing', progress: 0.4 },
          },
        },
      },
      304: { description: 'Not modified: the client’s copy is current', headers: { ETag: DELIVERY_HEADERS.ETag } },
      400: errorResponse(
        400,
        'A transformation token that is unknown, malformed or out of range, a rendition or effect too large, a file that cannot be transformed, or a path that is not valid percent-encoding',
        {
          errorCode: 'VALIDATION_FAILED',
          error: 'Validation failed',
          message: 'transform: "w_20000" needs a whole number from 1 to 10000',
        },
      ),
      403: errorResponse(
        403,
        'A private file without a valid signed URL, a signature that does not match, an expired URL, or tokens without the signature the workspace requires',
        {
          errorCode: 'SIGNED_URL_REQUIRED',
          error: 'Forbidden',
          message: 'This file is private: use a signed URL',
        },
      ),
      404: errorResponse(
        404,
        'Nothing at the address, an unknown workspace or source, or a path with . or .. segments',
        {
          errorCode: 'FILE_NOT_FOUND',
          error: 'Not found',
          message: 'No file with this file_no in this workspace',
        },
      ),
      410: errorResponse(410, 'The source is switched off'),
      416: errorResponse(416, 'The range is outside the file'),
      422: errorResponse(422, 'A video rendition whose transcode failed (the same answer for an hour)', {
        errorCode: 'TRANSCODE_FAILED',
        error: 'Unprocessable content',
        message: 'This video rendition could not be made: not a readable mov video, or it has no picture',
      }),
      502: errorResponse(502, "The source's origin failed or refused"),
      503: errorResponse(503, 'Every render slot is busy, or the render took too long: retry after Retry-After'),
    },
  },
};

const METRICS_EXAMPLE = [
  '# HELP stowage_http_requests_total HTTP requests, by route pattern',
  '# TYPE stowage_http_requests_total counter',
  'stowage_http_requests_total{method="GET",route="/api/v1/files",status="200"} 1027',
  '# HELP stowage_uploads_total Finished uploads',
  '# TYPE stowage_uploads_total counter',
  'stowage_uploads_total{source="direct"} 412',
  '',
].join('\n');

const metrics = {
  get: {
    operationId: 'getMetrics',
    tags: ['health'],
    summary: 'Prometheus metrics',
    description:
      'The text exposition format (docs/api/health.md#get-metrics). Served on this port unless STOWAGE_METRICS_PORT gives it a listener of its own; with STOWAGE_METRICS_TOKEN set, only to `Authorization: Bearer <token>`.',
    security: [{}, { metricsToken: [] }],
    responses: {
      200: {
        description: 'The metrics',
        content: { 'text/plain': { schema: { type: 'string' }, example: METRICS_EXAMPLE } },
      },
      401: {
        description:
          'STOWAGE_METRICS_TOKEN is set and the request does not carry it: a plain-text answer for scrapers, with WWW-Authenticate: Bearer (not the error body)',
        headers: { 'WWW-Authenticate': header('The scheme to use', 'Bearer') },
        content: { 'text/plain': { schema: { type: 'string' }, example: 'Unauthorized\n' } },
      },
    },
  },
};

/** Paths added to the generated document, in the order they are listed. */
export const STATIC_PATHS: Record<string, Record<string, unknown>> = {
  '/metrics': metrics,
  '/{workspace_id}/{path}': delivery,
};

/** Security schemes only the static paths use. */
export const STATIC_SECURITY_SCHEMES = {
  metricsToken: { type: 'http', scheme: 'bearer', description: 'STOWAGE_METRICS_TOKEN, when it is set' },
} as const;
