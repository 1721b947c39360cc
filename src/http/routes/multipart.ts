// Multipart uploads: start, complete, status and abort with a key; part PUTs to local storage
// authorised by their signed URL.
import { Readable } from 'node:stream';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { errorResponses } from '../../contract/errors.ts';
import { Ok } from '../../contract/common.ts';
import { UploadAnswerRef } from '../../contract/files.ts';
import {
  MultipartCompleteBody,
  MultipartSession,
  MultipartStartBody,
  PartAnswer,
  PartParams,
  PartQuery,
  SessionParams,
  SessionStatusAnswer,
} from '../../contract/multipart.ts';
import { applyGrant } from '../../uploads/grants.ts';
import type { MultipartService } from '../../uploads/multipart/service.ts';
import type { WorkspaceService } from '../../services/workspaces.ts';
import { presentedKey, principalOf } from '../auth.ts';
import { uploadAnswer } from './upload-answer.ts';
import { takeRawBodies } from '../raw-body.ts';

const tags = ['multipart'];

export async function multipartRoutes(
  app: FastifyInstance,
  opts: { multipart: MultipartService; workspaces: WorkspaceService },
): Promise<void> {
  const { multipart, workspaces } = opts;
  const api = app.withTypeProvider<TypeBoxTypeProvider>();

  api.post(
    '/api/v1/multipart/start',
    {
      config: { auth: 'any' },
      schema: {
        tags,
        summary: 'Start a multipart upload',
        description:
          'Answers 201 with one presigned PUT URL per part. part_size is at least 8 MiB and grows so that no file needs over 10,000 parts.',
        body: MultipartStartBody,
        response: { 201: MultipartSession, ...errorResponses(400, 401, 402, 413, 429) },
      },
    },
    async (request, reply) => {
      const principal = principalOf(request);
      // A private key is never echoed: callers with one see the hint of the workspace's public key.
      const publicKey =
        principal.keyType === 'public' ? presentedKey(request)! : await workspaces.publicKeyHint(principal.workspaceId);
      const body = request.body;
      const { mayReplace } = applyGrant({ webhookUrl: body.webhook_url ?? null, mayReplace: true }, principal);
      const session = await multipart.start(principal.workspaceId, publicKey, body, mayReplace);
      return reply.code(201).send(session);
    },
  );

  api.post(
    '/api/v1/multipart/complete',
    {
      config: { auth: 'any' },
      schema: {
        tags,
        summary: 'Complete a multipart upload',
        description:
          'Storage is asked which parts it holds, so parts (with ETags) are optional. Completing twice returns the same record.',
        body: MultipartCompleteBody,
        response: { 200: UploadAnswerRef, ...errorResponses(400, 401, 402, 404, 409, 410) },
      },
    },
    async (request) => uploadAnswer(await multipart.complete(principalOf(request).workspaceId, request.body)),
  );

  api.get(
    '/api/v1/multipart/:sessionId',
    {
      config: { auth: 'any' },
      schema: {
        tags,
        summary: 'Session status, for resuming',
        params: SessionParams,
        response: {
          200: SessionStatusAnswer,
          ...errorResponses(401, 404),
        },
      },
    },
    async (request) => ({
      success: true as const,
      data: await multipart.status(principalOf(request).workspaceId, request.params.sessionId),
    }),
  );

  api.delete(
    '/api/v1/multipart/:sessionId',
    {
      config: { auth: 'any' },
      schema: {
        tags,
        summary: 'Abort a multipart upload and free its parts',
        params: SessionParams,
        response: { 200: Ok, ...errorResponses(401, 404, 409) },
      },
    },
    async (request) => {
      await multipart.abort(principalOf(request).workspaceId, request.params.sessionId);
      return { success: true as const };
    },
  );

  // Part uploads to the service itself (local storage). The body is the raw stream, whatever
  // Content-Type says, so that a wrong type is answered 400 as documented, not 415.
  await app.register(async (scope) => {
    takeRawBodies(scope);
    scope.withTypeProvider<TypeBoxTypeProvider>().put(
      '/api/v1/multipart/:sessionId/parts/:partNumber',
      {
        config: { auth: 'none' },
        schema: {
          tags,
          summary: 'Upload one part (local storage)',
          description:
            'The URL from multipart start is the authorisation. Content-Type: application/octet-stream; exactly the part length.',
          params: PartParams,
          querystring: PartQuery,
          response: {
            200: PartAnswer,
            ...errorResponses(400, 403, 404),
          },
        },
      },
      async (request, reply) => {
        const { sessionId, partNumber } = request.params;
        const part = await multipart.putPart(
          sessionId,
          partNumber,
          request.query,
          request.headers['content-type'],
          request.headers['content-length'],
          // The raw-body parser hands the request stream on; no body at all leaves it unread.
          request.body instanceof Readable ? request.body : request.raw,
        );
        reply.header('etag', part.etag);
        return { success: true as const, part_number: part.partNumber, etag: part.etag };
      },
    );
  });
}
