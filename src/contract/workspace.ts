// The caller's workspace: its browser settings and usage (/api/v1/workspace).
import { type Static, Type } from 'typebox';

export const WorkspaceSettings = Type.Object({
  workspace_id: Type.String(),
  name: Type.String(),
  allowed_origins: Type.Array(Type.String(), {
    description: 'Web origins whose pages may use the public key and upload tokens; empty: any origin',
  }),
  webhook_origins: Type.Array(Type.String(), {
    description: 'Origins a public-key upload may send webhook_url to; empty: none',
  }),
  quota_bytes: Type.Union([Type.Integer(), Type.Null()]),
  max_file_size: Type.Union([Type.Integer(), Type.Null()]),
  used_bytes: Type.Integer(),
  reserved_bytes: Type.Integer({
    description:
      'Bytes promised to uploads in progress (multipart sessions by their declared size, streaming uploads as they arrive); quota decisions count used + reserved',
  }),
});
export type WorkspaceSettings = Static<typeof WorkspaceSettings>;

export const WorkspaceAnswer = Type.Object({ success: Type.Literal(true), data: WorkspaceSettings });

const Origins = Type.Union([Type.Array(Type.String(), { maxItems: 100 }), Type.Null()]);

export const WorkspacePatchBody = Type.Object(
  { allowed_origins: Type.Optional(Origins), webhook_origins: Type.Optional(Origins) },
  { additionalProperties: false },
);
export type WorkspacePatchBody = Static<typeof WorkspacePatchBody>;
