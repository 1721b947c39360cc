// The caller's workspace: its browser settings and usage (/api/v1/workspace).
import { type Static, Type } from 'typebox';
import { EXAMPLE_DELIVERY_KEY, EXAMPLE_WORKSPACE } from './examples.ts';

export const WorkspaceSettings = Type.Object(
  {
    workspace_id: Type.String(),
    name: Type.String(),
    allowed_origins: Type.Array(Type.String(), {
      description: 'Web origins whose pages may use the public key and upload tokens; empty: any origin',
    }),
    webhook_origins: Type.Array(Type.String(), {
      description: 'Origins a public-key upload may send webhook_url to; empty: none',
    }),
    signed_transformations: Type.Boolean({
      description:
        'Delivery URLs with transformation tokens are served only when signed with the delivery key (or signed by the service); originals are not affected',
    }),
    quota_bytes: Type.Union([Type.Integer(), Type.Null()]),
    max_file_size: Type.Union([Type.Integer(), Type.Null()]),
    used_bytes: Type.Integer(),
    reserved_bytes: Type.Integer({
      description:
        'Bytes promised to uploads in progress (multipart sessions by their declared size, streaming uploads as they arrive); quota decisions count used + reserved',
    }),
  },
  { examples: [EXAMPLE_WORKSPACE] },
);
export type WorkspaceSettings = Static<typeof WorkspaceSettings>;

export const WorkspaceAnswer = Type.Object({ success: Type.Literal(true), data: WorkspaceSettings });

const Origins = Type.Union([Type.Array(Type.String(), { maxItems: 100 }), Type.Null()]);

export const WorkspacePatchBody = Type.Object(
  {
    allowed_origins: Type.Optional(Origins),
    webhook_origins: Type.Optional(Origins),
    signed_transformations: Type.Optional(Type.Boolean()),
  },
  {
    additionalProperties: false,
    examples: [{ allowed_origins: ['https://shop.example.com'], signed_transformations: true }],
  },
);
export type WorkspacePatchBody = Static<typeof WorkspacePatchBody>;

/** The workspace's delivery key: signs delivery URLs offline (docs/api/delivery.md#signed-transformations). */
export const DeliveryKey = Type.Object(
  {
    delivery_key: Type.String({ description: 'stw_dk_ and 43 base62 characters; the HMAC-SHA256 key, as UTF-8' }),
  },
  { examples: [EXAMPLE_DELIVERY_KEY] },
);
export type DeliveryKey = Static<typeof DeliveryKey>;

export const DeliveryKeyAnswer = Type.Object({ success: Type.Literal(true), data: DeliveryKey });
