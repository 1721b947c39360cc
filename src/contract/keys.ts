// A workspace's API keys over HTTP (/api/v1/keys), for the private key's holder: list them (never
// the keys themselves, only a hint), create one, rotate one with a grace period, revoke one.
import { type Static, Type } from 'typebox';
import { nullable } from './common.ts';
import { EXAMPLE_KEY } from './examples.ts';

const KeyType = Type.Union([Type.Literal('public'), Type.Literal('private')]);

export const ApiKeyInfo = Type.Object(
  {
    id: Type.String(),
    workspace_id: Type.String(),
    type: KeyType,
    hint: Type.String({
      description: 'The prefix and the last four characters (stw_pk_…a1B2); the key itself is never shown again',
    }),
    created_at: Type.String({ format: 'date-time' }),
    revoked_at: nullable(
      Type.String({
        format: 'date-time',
        description: 'When it stopped (or, in a rotation grace period, will stop) working; null while in force',
      }),
    ),
    active: Type.Boolean({ description: 'Whether the key works now' }),
  },
  { examples: [EXAMPLE_KEY] },
);
export type ApiKeyInfo = Static<typeof ApiKeyInfo>;

export const ApiKeyListData = Type.Object({
  keys: Type.Array(ApiKeyInfo, { description: 'Oldest first, revoked ones too' }),
});
export const ApiKeyList = Type.Object({ success: Type.Literal(true), data: ApiKeyListData });

export const NewApiKey = Type.Object({
  ...ApiKeyInfo.properties,
  key: Type.String({ description: 'The key, shown this once: only its hash is stored' }),
});
export type NewApiKey = Static<typeof NewApiKey>;

export const ApiKeyCreated = Type.Object({ success: Type.Literal(true), data: NewApiKey });

export const ApiKeyCreateBody = Type.Object(
  { type: KeyType },
  { additionalProperties: false, examples: [{ type: 'public' }] },
);
export type ApiKeyCreateBody = Static<typeof ApiKeyCreateBody>;

export const ApiKeyParams = Type.Object({ key_id: Type.String({ minLength: 1, maxLength: 64 }) });

export const ApiKeyRotateBody = Type.Object(
  {
    grace_seconds: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 7 * 24 * 3600,
        default: 0,
        description: 'How long the old key keeps working, so clients can switch over (0: it stops at once)',
      }),
    ),
  },
  { additionalProperties: false, examples: [{ grace_seconds: 3600 }] },
);
export type ApiKeyRotateBody = Static<typeof ApiKeyRotateBody>;

export const ApiKeyRotation = Type.Object({ old: ApiKeyInfo, new: NewApiKey });
export type ApiKeyRotation = Static<typeof ApiKeyRotation>;
export const ApiKeyRotated = Type.Object({ success: Type.Literal(true), data: ApiKeyRotation });

export const ApiKeyAnswer = Type.Object({ success: Type.Literal(true), data: ApiKeyInfo });
