// Uploads: the direct upload's form, the remote upload's body, and upload tokens (mint and spend).
import { type Static, Type } from 'typebox';
import { AnyObject, TagsInput } from './common.ts';
import { EXAMPLE_UPLOAD_TOKEN } from './examples.ts';

/** The form fields of a direct upload (multipart/form-data), besides `file`. */
export const UPLOAD_FORM_FIELDS = [
  'file_name',
  'folder',
  'tags',
  'transform',
  'metadata',
  'custom_id',
  'random_prefix',
  'webhook_url',
] as const;

const flag = Type.Union([Type.Boolean(), Type.String()]);

export const RemoteUploadBody = Type.Object(
  {
    remote_url: Type.String({ minLength: 1, maxLength: 4096 }),
    file_name: Type.Optional(Type.String()),
    folder: Type.Optional(Type.String()),
    tags: Type.Optional(TagsInput()),
    metadata: Type.Optional(Type.Union([AnyObject(), Type.String()])),
    custom_id: Type.Optional(Type.String()),
    random_prefix: Type.Optional(flag),
    transform: Type.Optional(Type.String()),
    webhook_url: Type.Optional(Type.String()),
  },
  {
    examples: [
      {
        remote_url: 'https://images.example.com/products/shoe.jpg',
        folder: 'products/shoes',
        tags: ['summer', 'sale'],
        metadata: { sku: 'SH-1042' },
        custom_id: 'sku-SH-1042',
      },
    ],
  },
);
export type RemoteUploadBody = Static<typeof RemoteUploadBody>;

const flags = Type.Object({
  folder: Type.Optional(Type.Boolean()),
  tags: Type.Optional(Type.Boolean()),
  transform: Type.Optional(Type.Boolean()),
});

export const TokenMintBody = Type.Object(
  {
    file_name: Type.String({ minLength: 1 }),
    folder: Type.Optional(Type.String({ maxLength: 4096 })),
    tags: Type.Optional(TagsInput()),
    transform: Type.Optional(Type.String({ maxLength: 1024 })),
    max_file_size: Type.Optional(Type.Integer({ minimum: 1 })),
    ttl_seconds: Type.Optional(Type.Integer({ minimum: 1 })),
    metadata: Type.Optional(AnyObject()),
    custom_id: Type.Optional(Type.String()),
    random_prefix: Type.Optional(Type.Boolean()),
    allow_override: Type.Optional(flags),
  },
  {
    examples: [
      {
        file_name: 'avatar.png',
        folder: 'avatars',
        tags: ['profile'],
        transform: 'w_512,h_512,c_fill',
        max_file_size: 5_242_880,
        ttl_seconds: 600,
        allow_override: { tags: true },
      },
    ],
  },
);
export type TokenMintBody = Static<typeof TokenMintBody>;

export const TokenPolicy = Type.Object({
  file_name: Type.String(),
  folder: Type.String(),
  tags: Type.Array(Type.String()),
  max_file_size: Type.Integer(),
  transform: Type.Union([Type.String(), Type.Null()]),
  allow_override: Type.Object({ folder: Type.Boolean(), tags: Type.Boolean(), transform: Type.Boolean() }),
});
export type TokenPolicy = Static<typeof TokenPolicy>;

export const UploadToken = Type.Object(
  {
    token: Type.String(),
    signature: Type.String(),
    expire_at: Type.Integer(),
    public_key: Type.String(),
    workspace_id: Type.String(),
    upload_url: Type.String(),
    policy: TokenPolicy,
  },
  { examples: [EXAMPLE_UPLOAD_TOKEN] },
);
export type UploadToken = Static<typeof UploadToken>;

export const TokenParams = Type.Object({ token: Type.String({ maxLength: 100 }) });
