// Sources (origins delivery reads through): the source as shown, and the requests of /api/v1/sources.
import { type Static, Type } from 'typebox';
import { PAGE } from './common.ts';
import { EXAMPLE_SOURCE } from './examples.ts';

export const SourceType = Type.Union(
  [Type.Literal('s3'), Type.Literal('azure'), Type.Literal('google_cloud'), Type.Literal('image_source')],
  {
    description: 'One of s3, azure, google_cloud, image_source',
  },
);
export type SourceType = Static<typeof SourceType>;

const CONFIGURATION_FIELDS =
  'Type-specific. s3: access_key*, secret_key*, region, bucket, endpoint; azure: connection_string*, container_name; ' +
  'google_cloud: service_account_json*, bucket_name; image_source: base_url, canonical_header, forward_header. ' +
  '* secret: shown as "********". image_source canonical_header: a request header name (default x-forwarded-host: ' +
  'its host value is passed to the origin under that name), or true (Link: <origin URL>; rel="canonical" on delivery) ' +
  'or false (off). forward_header: true (Accept, Accept-Language, User-Agent, Referer), false, or an array of request ' +
  'header names to pass on. Header names are RFC 7230 tokens; credentials, cookies, host, proxy-*, hop-by-hop, range, ' +
  'conditional and accept-encoding headers are refused.';

/** Configuration values are text, booleans or lists of header names (forward_header). */
export const Configuration = Type.Record(
  Type.String(),
  Type.Union([Type.String(), Type.Boolean(), Type.Array(Type.String())]),
  { description: CONFIGURATION_FIELDS },
);
export type Configuration = Static<typeof Configuration>;

/** What requests may send: the service checks the fields per type (and null removes one in PATCH). */
export const ConfigurationInput = Type.Object({}, { additionalProperties: true, description: CONFIGURATION_FIELDS });

export const Source = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    name: Type.String(),
    type: SourceType,
    configuration: Configuration,
    is_active: Type.Boolean(),
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
  },
  { $id: 'Source', examples: [EXAMPLE_SOURCE] },
);
export type Source = Static<typeof Source>;

export const SourceAnswer = Type.Object({ success: Type.Literal(true), data: Type.Ref('Source') });
export const SourceParams = Type.Object({ sourceId: Type.String({ description: 'Source UUID' }) });

const NAME = Type.String({
  pattern: '^[A-Za-z0-9_-]{1,64}$',
  description: 'Letters, digits, underscores, hyphens; unique per workspace',
});

export const SourceCreateBody = Type.Object(
  { name: NAME, type: SourceType, configuration: ConfigurationInput },
  {
    examples: [
      { name: 'catalogue', type: 'image_source', configuration: { base_url: 'https://images.example.com' } },
      {
        name: 'archive',
        type: 's3',
        configuration: {
          access_key: 'AKIAIOSFODNN7EXAMPLE',
          secret_key: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
          region: 'eu-west-1',
          bucket: 'shop-archive',
        },
      },
    ],
  },
);
export type SourceCreateBody = Static<typeof SourceCreateBody>;

export const SourceUpdateBody = Type.Object(
  {
    name: Type.Optional(NAME),
    configuration: Type.Optional(ConfigurationInput),
    is_active: Type.Optional(Type.Boolean()),
  },
  { examples: [{ is_active: false }] },
);
export type SourceUpdateBody = Static<typeof SourceUpdateBody>;

export const SourceListQuery = Type.Object({
  page: PAGE(),
  limit: Type.Integer({ minimum: 1, maximum: 100, default: 10 }),
  search: Type.Optional(Type.String({ maxLength: 256, description: 'Case-insensitive substring of the name' })),
  type: Type.Optional(SourceType),
});
export type SourceListQuery = Static<typeof SourceListQuery>;

export const SourcePage = Type.Object({
  sources: Type.Array(Type.Ref('Source')),
  meta: Type.Object(
    {
      page: Type.Integer(),
      limit: Type.Integer(),
      total: Type.Integer(),
      hasMore: Type.Boolean(),
    },
    { examples: [{ page: 1, limit: 10, total: 1, hasMore: false }] },
  ),
});

export const SourceTest = Type.Object(
  {
    ok: Type.Boolean(),
    latency_ms: Type.Integer(),
    error: Type.Optional(Type.String()),
  },
  { examples: [{ ok: true, latency_ms: 84 }] },
);
export type SourceTest = Static<typeof SourceTest>;
export const SourceTestAnswer = Type.Object({ success: Type.Literal(true), data: SourceTest });
