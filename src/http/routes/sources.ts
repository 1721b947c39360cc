import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { errors, INVALID_CONFIGURATION_MESSAGE } from '../../errors.ts';
import type { SourceService } from '../../services/sources.ts';
import { principalOf } from '../auth.ts';
import { ConfigurationInput, errorResponses, SourceTypeSchema } from '../schemas.ts';

const tags = ['sources'];

const SourceRef = Type.Ref('Source');
const Envelope = Type.Object({ success: Type.Literal(true), data: SourceRef });
const Params = Type.Object({ sourceId: Type.String({ description: 'Source UUID' }) });

const NAME = Type.String({
  pattern: '^[A-Za-z0-9_-]{1,64}$',
  description: 'Letters, digits, underscores, hyphens; unique per workspace',
});

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

  app.post(
    '/api/v1/sources',
    {
      config: { auth: 'private' },
      attachValidation: true,
      schema: {
        tags,
        summary: 'Create a source',
        description: `Validates the configuration against the type. Invalid: 400 "Validation failed" / "${INVALID_CONFIGURATION_MESSAGE}".`,
        body: Type.Object({ name: NAME, type: SourceTypeSchema, configuration: ConfigurationInput }),
        response: { 201: Envelope, ...errorResponses(400, 401, 403, 409) },
      },
    },
    async (request, reply) => {
      rethrowValidation(request);
      const data = await sources.create(principalOf(request).workspaceId, request.body as any);
      return reply.code(201).send({ success: true, data });
    },
  );

  app.get(
    '/api/v1/sources',
    {
      config: { auth: 'private', authErrorStyle: 'list-sources' },
      schema: {
        tags,
        summary: 'List sources',
        description: 'Newest first (created_at descending, ties by id).',
        querystring: Type.Object({
          page: Type.Integer({ minimum: 1, maximum: 10_000_000, default: 1 }),
          limit: Type.Integer({ minimum: 1, maximum: 100, default: 10 }),
          search: Type.Optional(Type.String({ maxLength: 256, description: 'Case-insensitive substring of the name' })),
          type: Type.Optional(SourceTypeSchema),
        }),
        response: {
          200: Type.Object({
            sources: Type.Array(SourceRef),
            meta: Type.Object({
              page: Type.Integer(),
              limit: Type.Integer(),
              total: Type.Integer(),
              hasMore: Type.Boolean(),
            }),
          }),
          ...errorResponses(400, 401, 403),
        },
      },
    },
    async (request) => {
      const q = request.query as { page: number; limit: number; search?: string; type?: string };
      return sources.list(principalOf(request).workspaceId, q);
    },
  );

  app.get(
    '/api/v1/sources/:sourceId',
    {
      config: { auth: 'private' },
      schema: {
        tags,
        summary: 'Get a source',
        params: Params,
        response: { 200: Envelope, ...errorResponses(401, 403, 404) },
      },
    },
    async (request) => {
      const { sourceId } = request.params as { sourceId: string };
      return { success: true, data: await sources.get(principalOf(request).workspaceId, sourceId) };
    },
  );

  app.patch(
    '/api/v1/sources/:sourceId',
    {
      config: { auth: 'private' },
      schema: {
        tags,
        summary: 'Update a source',
        description:
          'configuration is merged into the stored one; a secret sent back as "********" keeps its stored value; null removes an optional field.',
        params: Params,
        body: Type.Object({
          name: Type.Optional(NAME),
          configuration: Type.Optional(ConfigurationInput),
          is_active: Type.Optional(Type.Boolean()),
        }),
        response: { 200: Envelope, ...errorResponses(400, 401, 403, 404, 409) },
      },
    },
    async (request) => {
      const { sourceId } = request.params as { sourceId: string };
      return {
        success: true,
        data: await sources.update(principalOf(request).workspaceId, sourceId, request.body as any),
      };
    },
  );

  app.delete(
    '/api/v1/sources/:sourceId',
    {
      config: { auth: 'private' },
      schema: {
        tags,
        summary: 'Delete a source',
        params: Params,
        response: { 200: Type.Object({ success: Type.Literal(true) }), ...errorResponses(401, 403, 404) },
      },
    },
    async (request) => {
      const { sourceId } = request.params as { sourceId: string };
      await sources.delete(principalOf(request).workspaceId, sourceId);
      return { success: true };
    },
  );

  app.post(
    '/api/v1/sources/:sourceId/test',
    {
      config: { auth: 'private' },
      schema: {
        tags,
        summary: 'Test a source',
        description: 'Tries to reach the origin with the stored credentials.',
        params: Params,
        response: {
          200: Type.Object({
            success: Type.Literal(true),
            data: Type.Object({ ok: Type.Boolean(), latency_ms: Type.Integer(), error: Type.Optional(Type.String()) }),
          }),
          ...errorResponses(401, 403, 404),
        },
      },
    },
    async (request) => {
      const { sourceId } = request.params as { sourceId: string };
      return { success: true, data: await sources.test(principalOf(request).workspaceId, sourceId) };
    },
  );
}
