import type { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { MultipartService, StartInput } from '../../uploads/multipart/service.ts';
import { applyGrant } from '../../uploads/grants.ts';
import type { WorkspaceService } from '../../services/workspaces.ts';
import { presentedKey, principalOf } from '../auth.ts';
import { errorResponses } from '../schemas.ts';
import { uploadAnswer } from './upload-answer.ts';
import { takeRawBodies } from '../raw-body.ts';

const tags = ['multipart'];
const MAX_SAFE = 9007199254740991;

const StartBody = Type.Object({
  file_name: Type.String({ minLength: 1 }),
  size: Type.Integer({ minimum: 1, maximum: MAX_SAFE }),
  format: Type.String({ minLength: 1, maxLength: 255, description: 'MIME type' }),
  folder: Type.Optional(Type.String({ maxLength: 4096 })),
  tags: Type.Optional(Type.Union([Type.Array(Type.String()), Type.String()])),
  metadata: Type.Optional(Type.Object({}, { additionalProperties: true })),
  custom_id: Type.Optional(Type.String()),
  random_prefix: Type.Optional(Type.Boolean()),
  ttl_seconds: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_SAFE })),
  webhook_url: Type.Optional(Type.String({ maxLength: 2048 })),
});

const Session = Type.Object({
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
});

const SessionParams = Type.Object({ sessionId: Type.String({ maxLength: 64 }) });

export async function multipartRoutes(
  app: FastifyInstance,
  opts: { multipart: MultipartService; workspaces: WorkspaceService },
): Promise<void> {
  const { multipart, workspaces } = opts;

  app.post(
    '/api/v1/multipart/start',
    {
      config: { auth: 'any' },
      schema: {
        tags,
        summary: 'Start a multipart upload',
        description:
          'Answers 201 with one presigned PUT URL per part. part_size is at least 8 MiB and grows so that no file needs over 10,000 parts.',
        body: StartBody,
        response: { 201: Session, ...errorResponses(400, 401, 402, 413, 429) },
      },
    },
    async (request, reply) => {
      const principal = principalOf(request);
      // A private key is never echoed: callers with one see the hint of the workspace's public key.
      const publicKey =
        principal.keyType === 'public' ? presentedKey(request)! : await workspaces.publicKeyHint(principal.workspaceId);
      const body = request.body as StartInput;
      const { mayReplace } = applyGrant({ webhookUrl: body.webhook_url ?? null, mayReplace: true }, principal);
      const session = await multipart.start(principal.workspaceId, publicKey, body, mayReplace);
      return reply.code(201).send(session);
    },
  );

  app.post(
    '/api/v1/multipart/complete',
    {
      config: { auth: 'any' },
      schema: {
        tags,
        summary: 'Complete a multipart upload',
        description:
          'Storage is asked which parts it holds, so parts (with ETags) are optional. Completing twice returns the same record.',
        body: Type.Object({
          session_id: Type.String({ minLength: 1, maxLength: 64 }),
          uuid: Type.Optional(Type.String()),
          parts: Type.Optional(
            Type.Array(
              Type.Object({ part_number: Type.Integer({ minimum: 1, maximum: 10000 }), etag: Type.String() }),
              { maxItems: 10000 },
            ),
          ),
        }),
        response: { 200: Type.Ref('UploadAnswer'), ...errorResponses(400, 401, 402, 404, 409, 410) },
      },
    },
    async (request) =>
      uploadAnswer(
        await multipart.complete(
          principalOf(request).workspaceId,
          request.body as { session_id: string; uuid?: string; parts?: { part_number: number; etag: string }[] },
        ),
      ),
  );

  app.get(
    '/api/v1/multipart/:sessionId',
    {
      config: { auth: 'any' },
      schema: {
        tags,
        summary: 'Session status, for resuming',
        params: SessionParams,
        response: {
          200: Type.Object({
            success: Type.Literal(true),
            data: Type.Object({
              session_id: Type.String(),
              status: Type.String(),
              part_size: Type.Integer(),
              size: Type.Integer(),
              expire_at: Type.Integer(),
              uploaded_parts: Type.Array(
                Type.Object({ part_number: Type.Integer(), size: Type.Integer(), etag: Type.String() }),
              ),
            }),
          }),
          ...errorResponses(401, 404),
        },
      },
    },
    async (request) => ({
      success: true,
      data: await multipart.status(
        principalOf(request).workspaceId,
        (request.params as { sessionId: string }).sessionId,
      ),
    }),
  );

  app.delete(
    '/api/v1/multipart/:sessionId',
    {
      config: { auth: 'any' },
      schema: {
        tags,
        summary: 'Abort a multipart upload and free its parts',
        params: SessionParams,
        response: { 200: Type.Object({ success: Type.Literal(true) }), ...errorResponses(401, 404, 409) },
      },
    },
    async (request) => {
      await multipart.abort(principalOf(request).workspaceId, (request.params as { sessionId: string }).sessionId);
      return { success: true };
    },
  );

  // Part uploads to the service itself (local storage). The body is the raw stream, whatever
  // Content-Type says, so that a wrong type is answered 400 as documented, not 415.
  await app.register(async (scope) => {
    takeRawBodies(scope);
    scope.put(
      '/api/v1/multipart/:sessionId/parts/:partNumber',
      {
        config: { auth: 'none' },
        schema: {
          tags,
          summary: 'Upload one part (local storage)',
          description:
            'The URL from multipart start is the authorisation. Content-Type: application/octet-stream; exactly the part length.',
          params: Type.Object({
            sessionId: Type.String({ maxLength: 64 }),
            partNumber: Type.Integer({ minimum: 1, maximum: 10000 }),
          }),
          querystring: Type.Object({
            length: Type.Optional(Type.String()),
            expires: Type.Optional(Type.String()),
            signature: Type.Optional(Type.String()),
          }),
          response: {
            200: Type.Object({ success: Type.Literal(true), part_number: Type.Integer(), etag: Type.String() }),
            ...errorResponses(400, 403, 404),
          },
        },
      },
      async (request, reply) => {
        const { sessionId, partNumber } = request.params as { sessionId: string; partNumber: number };
        const part = await multipart.putPart(
          sessionId,
          partNumber,
          request.query as Record<string, string>,
          request.headers['content-type'],
          request.headers['content-length'],
          (request.body as Readable | undefined) ?? request.raw,
        );
        reply.header('etag', part.etag);
        return { success: true, part_number: part.partNumber, etag: part.etag };
      },
    );
  });
}
