// Transformation presets: list, get, create or replace (PUT by name), delete. Private key only:
// a preset decides what anyone may render from the workspace's public URLs.
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { Ok } from '../../contract/common.ts';
import { errorResponses } from '../../contract/errors.ts';
import { PresetAnswer, PresetList, PresetParams, PresetPutBody } from '../../contract/presets.ts';
import type { PresetService } from '../../services/presets.ts';
import { principalOf } from '../auth.ts';

const tags = ['presets'];

export async function presetRoutes(app: FastifyInstance, opts: { presets: PresetService }): Promise<void> {
  const { presets } = opts;
  const api = app.withTypeProvider<TypeBoxTypeProvider>();

  api.get(
    '/api/v1/presets',
    {
      config: { auth: 'private' },
      schema: {
        tags,
        summary: 'List presets',
        description: 'Every preset of the workspace, by name.',
        response: { 200: PresetList, ...errorResponses(401, 403) },
      },
    },
    async (request) => ({
      success: true as const,
      data: { presets: await presets.list(principalOf(request).workspaceId), max_presets: presets.maxPresets },
    }),
  );

  api.get(
    '/api/v1/presets/:name',
    {
      config: { auth: 'private' },
      schema: {
        tags,
        summary: 'Get a preset',
        params: PresetParams,
        response: { 200: PresetAnswer, ...errorResponses(400, 401, 403, 404) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await presets.get(principalOf(request).workspaceId, request.params.name),
    }),
  );

  api.put(
    '/api/v1/presets/:name',
    {
      config: { auth: 'private' },
      schema: {
        tags,
        summary: 'Create or replace a preset',
        description:
          'Delivery URLs name it as t_{name}, alone or with other tokens (t_thumb,f_webp). The transformation is checked as delivery reads tokens: an invalid one is 400 here, never at delivery. 201 when created, 200 when replaced; delivery on this node uses the new text at once, other nodes within 5 seconds.',
        params: PresetParams,
        body: PresetPutBody,
        response: { 200: PresetAnswer, 201: PresetAnswer, ...errorResponses(400, 401, 403, 409) },
      },
    },
    async (request, reply) => {
      const { preset, created } = await presets.put(
        principalOf(request).workspaceId,
        request.params.name,
        request.body.transformation,
      );
      return reply.code(created ? 201 : 200).send({ success: true as const, data: preset });
    },
  );

  api.delete(
    '/api/v1/presets/:name',
    {
      config: { auth: 'private' },
      schema: {
        tags,
        summary: 'Delete a preset',
        description: 'URLs that name it then answer 400 TRANSFORM_PRESET_NOT_FOUND.',
        params: PresetParams,
        response: { 200: Ok, ...errorResponses(400, 401, 403, 404) },
      },
    },
    async (request) => {
      await presets.delete(principalOf(request).workspaceId, request.params.name);
      return { success: true as const };
    },
  );
}
