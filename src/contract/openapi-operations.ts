// What /openapi.json says of each route beyond the schema the route validates with: its
// operationId, and what only the document needs (the bodies a route reads as a stream, the
// probes' answers). Keyed by method and route pattern, so the ids do not depend on the order
// routes are registered in; test/openapi-lint.test.ts checks every operation has one, once.
import { type TSchema, Type } from 'typebox';
import { errorResponses } from './errors.ts';
import type { UPLOAD_FORM_FIELDS } from './uploads.ts';

/** How a route is named here: its method and its Fastify pattern (`GET /api/v1/files/:file_no`). */
export type RouteKey = `${'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'} /${string}`;

const binary = (description: string) => Type.String({ format: 'binary', description });

/** The direct upload's form fields, each described; typed by UPLOAD_FORM_FIELDS so that a new field needs its entry. */
const FORM_FIELDS: Record<(typeof UPLOAD_FORM_FIELDS)[number], TSchema> = {
  file_name: Type.String({ description: 'The name to store the file under (required)' }),
  folder: Type.String({ description: 'Folder path such as products/shoes; missing folders are created' }),
  tags: Type.String({ description: 'Comma-separated tags' }),
  transform: Type.String({ description: 'Transformation tokens applied before storing (w_1200,f_webp)' }),
  metadata: Type.String({ description: 'A JSON object, as JSON text' }),
  custom_id: Type.String({ description: 'Your own reference, at most 255 characters' }),
  random_prefix: Type.String({ enum: ['true', 'false'], description: 'true adds 8 random characters to the name' }),
  webhook_url: Type.String({ description: 'http(s) URL told when the upload is stored (docs/api/webhooks.md)' }),
};

/** POST /api/v1/uploads: multipart/form-data, parsed as a stream by the route (so not validated by a schema). */
export const UploadForm = Type.Object(
  {
    file: binary('The file: exactly one part named file, streamed to storage'),
    file_name: FORM_FIELDS.file_name,
    ...Object.fromEntries(
      Object.entries(FORM_FIELDS)
        .filter(([name]) => name !== 'file_name')
        .map(([name, schema]) => [name, Type.Optional(schema)]),
    ),
  },
  {
    description: 'Fields may come in any order; those before the file are checked before any byte is stored.',
    examples: [
      {
        file: '(the bytes of shoe.jpg)',
        file_name: 'shoe.jpg',
        folder: 'products/shoes',
        tags: 'summer,sale',
        metadata: '{"sku":"SH-1042"}',
        custom_id: 'sku-SH-1042',
        random_prefix: 'false',
      },
    ],
  },
);

const textHeader = (description: string) => Type.Optional(Type.String({ description }));

/** The token upload's headers: the file's name and the policy overrides the token allows. */
const TokenUploadHeaders = Type.Object({
  'x-file-name': textHeader("The file's name, percent-encoded UTF-8 (else Content-Disposition's filename)"),
  'x-folder': textHeader('Folder path, percent-encoded UTF-8, where the token allows overriding it'),
  'x-tags': textHeader('Comma-separated tags, percent-encoded UTF-8, where the token allows overriding them'),
  'x-transform': textHeader('Transformation tokens, where the token allows overriding them'),
});

const Health = Type.Object(
  { status: Type.Literal('ok') },
  { description: 'The process is up', examples: [{ status: 'ok' }] },
);

const Check = Type.Union([Type.Literal('ok'), Type.Literal('unavailable'), Type.Literal('low')]);
const Readiness = (status: 'ready' | 'not ready' | 'draining', description: string, example: object) =>
  Type.Object(
    {
      status: Type.Union([Type.Literal('ready'), Type.Literal('not ready'), Type.Literal('draining')]),
      checks: Type.Object({ database: Type.Optional(Check), storage: Type.Optional(Check) }),
    },
    { description, examples: [{ status, ...example }] },
  );

/** Fastify's own 431 for headers too large: answered on any path, the probes' too. */
const probeErrors = () => errorResponses(431);

export interface OperationDoc {
  operationId: string;
  /** Schema keys merged into the route's schema for the document only (never used to validate). */
  extra?: Record<string, unknown>;
}

export const OPERATIONS: Record<RouteKey, OperationDoc> = {
  'GET /healthz': {
    operationId: 'getHealth',
    extra: { response: { 200: Health, ...probeErrors() } },
  },
  'GET /readyz': {
    operationId: 'getReadiness',
    extra: {
      response: {
        200: Readiness('ready', 'Database and storage answer', { checks: { database: 'ok', storage: 'ok' } }),
        503: Readiness(
          'not ready',
          'Not ready (a check failed: unavailable, or low on local disk) or draining (shutting down, checks {}): the readiness report, not the error body',
          { checks: { database: 'ok', storage: 'unavailable' } },
        ),
        ...probeErrors(),
      },
    },
  },

  'POST /api/v1/sources': { operationId: 'createSource' },
  'GET /api/v1/sources': { operationId: 'listSources' },
  'GET /api/v1/sources/:sourceId': { operationId: 'getSource' },
  'PATCH /api/v1/sources/:sourceId': { operationId: 'updateSource' },
  'DELETE /api/v1/sources/:sourceId': { operationId: 'deleteSource' },
  'POST /api/v1/sources/:sourceId/test': { operationId: 'testSource' },

  'POST /api/v1/uploads': { operationId: 'uploadFile', extra: { body: UploadForm } },
  'POST /api/v1/uploads/remote': { operationId: 'uploadFromUrl' },
  'POST /api/v1/generate-token': { operationId: 'createUploadToken' },
  'POST /api/v1/uploads/:token': {
    operationId: 'uploadWithToken',
    extra: {
      consumes: ['*/*'],
      headers: TokenUploadHeaders,
      body: binary("The raw file; Content-Type: the file's type"),
    },
  },

  'POST /api/v1/multipart/start': { operationId: 'startMultipartUpload' },
  'PUT /api/v1/multipart/:sessionId/parts/:partNumber': {
    operationId: 'uploadMultipartPart',
    extra: {
      consumes: ['application/octet-stream'],
      body: binary('Exactly the part length bytes of the file, from offset (partNumber - 1) x part_size'),
    },
  },
  'POST /api/v1/multipart/complete': { operationId: 'completeMultipartUpload' },
  'GET /api/v1/multipart/:sessionId': { operationId: 'getMultipartUpload' },
  'DELETE /api/v1/multipart/:sessionId': { operationId: 'abortMultipartUpload' },

  'GET /api/v1/files': { operationId: 'listFiles' },
  'GET /api/v1/files/:file_no': { operationId: 'getFile' },
  'PATCH /api/v1/files/:file_no': { operationId: 'updateFile' },
  'DELETE /api/v1/files/:file_no': { operationId: 'deleteFile' },
  'PATCH /api/v1/files/:file_no/rename': { operationId: 'renameFile' },
  'POST /api/v1/files/:file_no/signed-url': { operationId: 'createSignedUrl' },

  'GET /api/v1/folders': { operationId: 'listFolders' },
  'POST /api/v1/folders': { operationId: 'createFolder' },
  'POST /api/v1/folders/rename/:folder_no': { operationId: 'renameFolder' },
  'POST /api/v1/folders/move/:folder_no': { operationId: 'moveFolder' },
  'DELETE /api/v1/folders/:folder_no': { operationId: 'deleteFolder' },

  'GET /api/v1/workspace': { operationId: 'getWorkspace' },
  'PATCH /api/v1/workspace': { operationId: 'updateWorkspace' },
  'GET /api/v1/workspace/delivery-key': { operationId: 'getDeliveryKey' },
  'POST /api/v1/workspace/delivery-key/rotate': { operationId: 'rotateDeliveryKey' },

  'GET /api/v1/presets': { operationId: 'listPresets' },
  'GET /api/v1/presets/:name': { operationId: 'getPreset' },
  'PUT /api/v1/presets/:name': { operationId: 'putPreset' },
  'DELETE /api/v1/presets/:name': { operationId: 'deletePreset' },
  'GET /api/v1/keys': { operationId: 'listKeys' },
  'POST /api/v1/keys': { operationId: 'createKey' },
  'POST /api/v1/keys/:key_id/rotate': { operationId: 'rotateKey' },
  'DELETE /api/v1/keys/:key_id': { operationId: 'revokeKey' },
  'GET /api/v1/webhooks/deliveries': { operationId: 'listWebhookDeliveries' },
  'POST /api/v1/webhooks/deliveries/:delivery_id/redeliver': { operationId: 'redeliverWebhook' },
};
