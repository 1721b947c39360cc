// Sources: create, list, get, update, delete and test the origins delivery reads through.
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Ok } from '../../contract/common.ts';
import { errorResponses } from '../../contract/errors.ts';
import {
  SourceAnswer,
  SourceCreateBody,
  SourceListQuery,
  SourcePage,
  SourceParams,
  SourceTestAnswer,
  SourceUpdateBody,
} from '../../contract/sources.ts';
import { errors, INVALID_CONFIGURATION_MESSAGE } from '../../errors.ts';
import type { SourceService } from '../../services/sources.ts';
import { principalOf } from '../auth.ts';

const tags = ['sources'];

/**
 * Create source validates in the service, so that every configuration problem (including a
 * missing or unknown type) gets the documented message; the schema here documents the shape.
 */
function rethrowValidation(request: FastifyRequest): void {
  const err = request.validationError as
    | (Error & { validation?: { instancePath: string; message?: string }[] })
    | undefined;
  if (!err) return;
  const first = err.validation?.[0];
  if (first && /^\/(configuration|type)(\/|$)/.test(first.instancePath)) throw errors.invalidConfiguration();
  if (first && first.instancePath === '' && /configuration|type/.test(first.message ?? ''))
    throw errors.invalidConfiguration();
  throw errors.validation(first ? `body${first.instancePath.replace(/\//g, '.')} ${first.message}` : err.message);
}

export async function sourceRoutes(app: FastifyInstance, opts: { sources: SourceService }): Promise<void> {
  const { sources } = opts;
  const api = app.withTypeProvider<TypeBoxTypeProvider>();

  api.post(
    '/api/v1/sources',
    {
      config: { auth: 'private' },
      attachValidation: true,
      schema: {
        tags,
        summary: 'Create a source',
        description: `Validates the configuration against the type. Invalid: 400 "Validation failed" / "${INVALID_CONFIGURATION_MESSAGE}".`,
        body: SourceCreateBody,
        response: { 201: SourceAnswer, ...errorResponses(400, 401, 403, 409) },
      },
    },
    async (request, reply) => {
      rethrowValidation(request);
      const data = await sources.create(principalOf(request).workspaceId, request.body);
      return reply.code(201).send({ success: true as const, data });
    },
  );

  api.get(
    '/api/v1/sources',
    {
      config: { auth: 'private', authErrorStyle: 'list-sources' },
      schema: {
        tags,
        summary: 'List sources',
        description: 'Newest first (created_at descending, ties by id).',
        querystring: SourceListQuery,
        response: {
          200: SourcePage,
          ...errorResponses(400, 401, 403),
        },
      },
    },
    async (request) => {
      return sources.list(principalOf(request).workspaceId, request.query);
    },
  );

  api.get(
    '/api/v1/sources/:sourceId',
    {
      config: { auth: 'private' },
      schema: {
        tags,
        summary: 'Get a source',
        params: SourceParams,
        response: { 200: SourceAnswer, ...errorResponses(401, 403, 404) },
      },
    },
    async (request) => {
      const { sourceId } = request.params;
      return { success: true as const, data: await sources.get(principalOf(request).workspaceId, sourceId) };
    },
  );

  api.patch(
    '/api/v1/sources/:sourceId',
    {
      config: { auth: 'private' },
      schema: {
        tags,
        summary: 'Update a source',
        description:
          'configuration is merged into the stored one; a secret sent back as "********" keeps its stored value; null removes an optional field.',
        params: SourceParams,
        body: SourceUpdateBody,
        response: { 200: SourceAnswer, ...errorResponses(400, 401, 403, 404, 409) },
      },
    },
    async (request) => {
      const { sourceId } = request.params;
      return {
        success: true as const,
        data: await sources.update(principalOf(request).workspaceId, sourceId, request.body),
      };
    },
  );

  api.delete(
    '/api/v1/sources/:sourceId',
    {
      config: { auth: 'private' },
      schema: {
        tags,
        summary: 'Delete a source',
        params: SourceParams,
        response: { 200: Ok, ...errorResponses(401, 403, 404) },
      },
    },
    async (request) => {
      const { sourceId } = request.params;
      await sources.delete(principalOf(request).workspaceId, sourceId);
      return { success: true as const };
    },
  );

  api.post(
    '/api/v1/sources/:sourceId/test',
    {
      config: { auth: 'private' },
      schema: {
        tags,
        summary: 'Test a source',
        description: 'Tries to reach the origin with the stored credentials.',
        params: SourceParams,
        response: {
          200: SourceTestAnswer,
          ...errorResponses(401, 403, 404),
        },
      },
    },
    async (request) => {
      const { sourceId } = request.params;
      return { success: true as const, data: await sources.test(principalOf(request).workspaceId, sourceId) };
    },
  );
}
