// Multipart uploads: start, part PUTs (local storage), status, complete, abort.
import { type Static, Type } from 'typebox';
import { AnyObject, TagsInput } from './common.ts';
import { EXAMPLE_MULTIPART_SESSION, EXAMPLE_SESSION_STATUS } from './examples.ts';

const MAX_SAFE = 9007199254740991;

export const MultipartStartBody = Type.Object(
  {
    file_name: Type.String({ minLength: 1 }),
    size: Type.Integer({ minimum: 1, maximum: MAX_SAFE }),
    format: Type.String({ minLength: 1, maxLength: 255, description: 'MIME type' }),
    folder: Type.Optional(Type.String({ maxLength: 4096 })),
    tags: Type.Optional(TagsInput()),
    metadata: Type.Optional(AnyObject()),
    custom_id: Type.Optional(Type.String()),
    random_prefix: Type.Optional(Type.Boolean()),
    ttl_seconds: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_SAFE })),
    webhook_url: Type.Optional(Type.String({ maxLength: 2048 })),
  },
  {
    examples: [
      {
        file_name: 'launch.mp4',
        size: 20_971_520,
        format: 'video/mp4',
        folder: 'videos',
        tags: ['launch'],
        webhook_url: 'https://shop.example.com/hooks/stowage',
      },
    ],
  },
);
export type MultipartStartBody = Static<typeof MultipartStartBody>;

/** A started session: one presigned PUT URL per part. Keep it to resume. */
export const MultipartSession = Type.Object(
  {
    session_id: Type.String(),
    uuid: Type.String(),
    part_size: Type.Integer(),
    min_part_size: Type.Integer(),
    parts: Type.Array(Type.String()),
    expire_at: Type.Integer(),
    public_key: Type.String(),
    workspace_id: Type.String(),
    policy: Type.Object({
      folder: Type.String(),
      tags: Type.Array(Type.String()),
      size: Type.Integer(),
      format: Type.String(),
    }),
  },
  { examples: [EXAMPLE_MULTIPART_SESSION] },
);
export type MultipartSession = Static<typeof MultipartSession>;

export const SessionParams = Type.Object({ sessionId: Type.String({ maxLength: 64 }) });

export const MultipartCompleteBody = Type.Object(
  {
    session_id: Type.String({ minLength: 1, maxLength: 64 }),
    uuid: Type.Optional(Type.String()),
    parts: Type.Optional(
      Type.Array(Type.Object({ part_number: Type.Integer({ minimum: 1, maximum: 10000 }), etag: Type.String() }), {
        maxItems: 10000,
      }),
    ),
  },
  {
    examples: [
      {
        session_id: EXAMPLE_MULTIPART_SESSION.session_id,
        uuid: EXAMPLE_MULTIPART_SESSION.uuid,
        parts: [
          { part_number: 1, etag: '"78af5f94892f3950"' },
          { part_number: 2, etag: '"0c41d9e7a2b36f18"' },
          { part_number: 3, etag: '"5e2d7b9a1f04c863"' },
        ],
      },
    ],
  },
);
export type MultipartCompleteBody = Static<typeof MultipartCompleteBody>;

export const SessionStatus = Type.Object(
  {
    session_id: Type.String(),
    status: Type.Union([
      Type.Literal('active'),
      Type.Literal('completed'),
      Type.Literal('aborted'),
      Type.Literal('expired'),
    ]),
    part_size: Type.Integer(),
    size: Type.Integer(),
    expire_at: Type.Integer(),
    uploaded_parts: Type.Array(Type.Object({ part_number: Type.Integer(), size: Type.Integer(), etag: Type.String() })),
  },
  { examples: [EXAMPLE_SESSION_STATUS] },
);
export type SessionStatus = Static<typeof SessionStatus>;
export const SessionStatusAnswer = Type.Object({ success: Type.Literal(true), data: SessionStatus });

export const PartParams = Type.Object({
  sessionId: Type.String({ maxLength: 64 }),
  partNumber: Type.Integer({ minimum: 1, maximum: 10000 }),
});

/** The part URL's signature, as multipart start wrote it. */
export const PartQuery = Type.Object({
  length: Type.Optional(Type.String()),
  expires: Type.Optional(Type.String()),
  signature: Type.Optional(Type.String()),
});

export const PartAnswer = Type.Object(
  {
    success: Type.Literal(true),
    part_number: Type.Integer(),
    etag: Type.String(),
  },
  { examples: [{ success: true, part_number: 1, etag: '"78af5f94892f3950"' }] },
);
export type PartAnswer = Static<typeof PartAnswer>;
