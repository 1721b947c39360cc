// The caller's workspace: the browser settings a private key manages (allowed origins for the
// public key and upload tokens, webhook origins for public-key uploads) and its usage.
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { errorResponses } from '../../contract/errors.ts';
import { WorkspaceAnswer, WorkspacePatchBody } from '../../contract/workspace.ts';
import type { WorkspaceService } from '../../services/workspaces.ts';
import { principalOf } from '../auth.ts';

export async function workspaceRoutes(app: FastifyInstance, opts: { workspaces: WorkspaceService }): Promise<void> {
  const { workspaces } = opts;
  const tags = ['workspace'];
  const api = app.withTypeProvider<TypeBoxTypeProvider>();
  api.get(
    '/api/v1/workspace',
    {
      config: { auth: 'private' },
      schema: {
        tags,
        summary: "The key's workspace: browser settings and usage",
        response: { 200: WorkspaceAnswer, ...errorResponses(401, 403) },
      },
    },
    async (request) => ({ success: true as const, data: await workspaces.settings(principalOf(request).workspaceId) }),
  );
  api.patch(
    '/api/v1/workspace',
    {
      config: { auth: 'private' },
      schema: {
        tags,
        summary: 'Change the browser settings',
        description:
          'Origins are `https://app.example.com`, `http://localhost:5173` or `https://*.example.com` (any subdomain). A list replaces the stored one; null or [] clears it. allowed_origins stops other websites from embedding your public key; it cannot stop a client that is not a browser.',
        body: WorkspacePatchBody,
        response: { 200: WorkspaceAnswer, ...errorResponses(400, 401, 403) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await workspaces.updateSettings(principalOf(request).workspaceId, request.body),
    }),
  );
}
