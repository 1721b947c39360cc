// The caller's workspace: the browser settings a private key manages (allowed origins for the
// public key and upload tokens, webhook origins for public-key uploads) and its usage.
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { WorkspaceService } from '../../services/workspaces.ts';
import { principalOf } from '../auth.ts';
import { errorResponses } from '../schemas.ts';

const Origins = Type.Union([Type.Array(Type.String(), { maxItems: 100 }), Type.Null()]);
const Settings = Type.Object({
  success: Type.Literal(true),
  data: Type.Object({
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
  }),
});

export async function workspaceRoutes(app: FastifyInstance, opts: { workspaces: WorkspaceService }): Promise<void> {
  const { workspaces } = opts;
  const tags = ['workspace'];
  app.get(
    '/api/v1/workspace',
    {
      config: { auth: 'private' },
      schema: {
        tags,
        summary: "The key's workspace: browser settings and usage",
        response: { 200: Settings, ...errorResponses(401, 403) },
      },
    },
    async (request) => ({ success: true, data: await workspaces.settings(principalOf(request).workspaceId) }),
  );
  app.patch(
    '/api/v1/workspace',
    {
      config: { auth: 'private' },
      schema: {
        tags,
        summary: 'Change the browser settings',
        description:
          'Origins are `https://app.example.com`, `http://localhost:5173` or `https://*.example.com` (any subdomain). A list replaces the stored one; null or [] clears it. allowed_origins stops other websites from embedding your public key; it cannot stop a client that is not a browser.',
        body: Type.Object(
          { allowed_origins: Type.Optional(Origins), webhook_origins: Type.Optional(Origins) },
          { additionalProperties: false },
        ),
        response: { 200: Settings, ...errorResponses(400, 401, 403) },
      },
    },
    async (request) => ({
      success: true,
      data: await workspaces.updateSettings(
        principalOf(request).workspaceId,
        request.body as { allowed_origins?: unknown; webhook_origins?: unknown },
      ),
    }),
  );
}
