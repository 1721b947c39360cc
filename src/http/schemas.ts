// JSON Schemas shared by routes; they validate requests and generate /openapi.json.
import { Type } from 'typebox';

export const ErrorBody = Type.Object(
  {
    success: Type.Literal(false),
    error: Type.String(),
    errorCode: Type.Optional(Type.String()),
    code: Type.Optional(Type.String({ description: 'The same as errorCode (the hosted API names it code)' })),
    message: Type.Optional(Type.String()),
    retryAfterSeconds: Type.Optional(Type.Number()),
  },
  { $id: 'ErrorBody', description: 'Every error: docs/api.md#errors' },
);

export const errorResponses = (...statuses: number[]) =>
  Object.fromEntries(statuses.map((s) => [s, Type.Ref('ErrorBody')]));

export const SourceTypeSchema = Type.Union(
  [Type.Literal('s3'), Type.Literal('azure'), Type.Literal('google_cloud'), Type.Literal('image_source')],
  { description: 'One of s3, azure, google_cloud, image_source' },
);

const CONFIGURATION_FIELDS =
  'Type-specific. s3: access_key*, secret_key*, region, bucket, endpoint; azure: connection_string*, container_name; ' +
  'google_cloud: service_account_json*, bucket_name; image_source: base_url, canonical_header, forward_header. ' +
  '* secret: shown as "********". image_source canonical_header: a request header name (default x-forwarded-host: ' +
  'its host value is passed to the origin under that name), or true (Link: <origin URL>; rel="canonical" on delivery) ' +
  'or false (off). forward_header: true (Accept, Accept-Language, User-Agent, Referer), false, or an array of request ' +
  'header names to pass on. Header names are RFC 7230 tokens; credentials, cookies, host, proxy-*, hop-by-hop, range, ' +
  'conditional and accept-encoding headers are refused.';

/** Configuration values are text, booleans or lists of header names (forward_header). */
export const ConfigurationSchema = Type.Record(
  Type.String(),
  Type.Union([Type.String(), Type.Boolean(), Type.Array(Type.String())]),
  { description: CONFIGURATION_FIELDS },
);

/** What requests may send: the service checks the fields per type (and null removes one in PATCH). */
export const ConfigurationInput = Type.Object(
  {},
  { additionalProperties: true, description: (ConfigurationSchema as { description?: string }).description },
);

export const Source = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    name: Type.String(),
    type: SourceTypeSchema,
    configuration: ConfigurationSchema,
    is_active: Type.Boolean(),
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
  },
  { $id: 'Source' },
);

const nullable = <T extends ReturnType<typeof Type.String>>(t: T) => Type.Union([t, Type.Null()]);

/** docs/api/uploads.md#the-file-record: every field present, null where unknown. */
export const FileRecord = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    file_no: Type.String(),
    workspace_id: Type.String(),
    name: Type.String(),
    path: Type.String(),
    url: Type.String(),
    width: Type.Union([Type.Integer(), Type.Null()]),
    height: Type.Union([Type.Integer(), Type.Null()]),
    size: Type.Integer(),
    mime_type: Type.String(),
    tags: Type.Array(Type.String()),
    metadata: Type.Object({}, { additionalProperties: true }),
    custom_id: nullable(Type.String()),
    folder_no: nullable(Type.String()),
    is_duplicate: Type.Boolean(),
    created_at: Type.String({ format: 'date-time' }),
    upload_source: Type.String(),
    thumbnail: nullable(Type.String()),
    extension: nullable(Type.String()),
    format: nullable(Type.String()),
    hash: Type.String(),
    is_private: Type.Boolean(),
    file_size: Type.Integer({ description: 'The same as size (the hosted SDKs read this name)' }),
    workspace_no: Type.String({ description: 'The same as workspace_id' }),
    source: Type.String({ description: 'The same as upload_source' }),
    folder_name: nullable(Type.String()),
    updated_at: Type.String({ format: 'date-time' }),
    thumbanil: nullable(Type.String({ description: 'The same as thumbnail (the hosted docs spell it so)' })),
    meta_data: Type.Object({}, { additionalProperties: true, description: 'The same as metadata' }),
    folder_id: nullable(Type.String({ description: "The folder's id; null at the root" })),
  },
  { $id: 'FileRecord' },
);

/** GET /api/v1/files/{file_no}: the record plus the details the hosted docs list. */
export const FileDetails = Type.Object(
  {
    ...FileRecord.properties,
    dimensions: Type.Object({
      width: Type.Union([Type.Integer(), Type.Null()]),
      height: Type.Union([Type.Integer(), Type.Null()]),
    }),
    workspace: Type.Object({ name: Type.String(), workspace_no: Type.String() }),
    folder: Type.Union([
      Type.Object({ folder_no: Type.String(), name: Type.String(), path: Type.String() }),
      Type.Null(),
    ]),
    uploaded_by: Type.Null({ description: 'Stowage does not record who uploaded: always null' }),
    uploaded_at: Type.String({ format: 'date-time' }),
    asset_key: Type.String({ description: 'The file_no' }),
    asset_url: Type.String({ description: 'The same as url' }),
  },
  { $id: 'FileDetails' },
);

/** A file record as upload answers give it: both documented shapes at once (docs/api/uploads.md#answer-shapes). */
const recordWithAliases = FileRecord.properties;
export const UploadAnswer = Type.Object(
  {
    success: Type.Literal(true),
    ...recordWithAliases,
    data: Type.Object(recordWithAliases),
  },
  {
    $id: 'UploadAnswer',
    description:
      'The flat file record, plus success and data (the record again), so readers of either documented shape work.',
  },
);
