// The caller's workspace: the browser settings a private key manages (allowed origins for the
// public key and upload tokens, webhook origins for public-key uploads) and its usage.
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { errorResponses } from '../../contract/errors.ts';
import { DeliveryKeyAnswer, WorkspaceAnswer, WorkspacePatchBody } from '../../contract/workspace.ts';
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
          'signed_transformations: true makes delivery URLs with transformation tokens work only when signed with the delivery key (GET /api/v1/workspace/delivery-key), or by the service (record thumbnails, signed-url). Origins are `https://app.example.com`, `http://localhost:5173` or `https://*.example.com` (any subdomain). A list replaces the stored one; null or [] clears it. allowed_origins stops other websites from embedding your public key; it cannot stop a client that is not a browser.',
        body: WorkspacePatchBody,
        response: { 200: WorkspaceAnswer, ...errorResponses(400, 401, 403) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await workspaces.updateSettings(principalOf(request).workspaceId, request.body),
    }),
  );
  // The key signs delivery URLs in the customer's own backend; it is answered here and nowhere else.
  api.get(
    '/api/v1/workspace/delivery-key',
    {
      config: { auth: 'private' },
      schema: {
        tags,
        summary: 'The delivery key that signs transformation URLs',
        description:
          'Made on first request. Sign with HMAC-SHA256 as docs/api/delivery.md#signed-transformations describes, or with the SDK (signDeliveryUrl) or the CLI (stowage url sign). Keep it on servers: anyone holding it can make renditions.',
        response: { 200: DeliveryKeyAnswer, ...errorResponses(401, 403) },
      },
    },
    async (request) => ({
      success: true as const,
      data: { delivery_key: await workspaces.deliveryKey(principalOf(request).workspaceId) },
    }),
  );
  api.post(
    '/api/v1/workspace/delivery-key/rotate',
    {
      config: { auth: 'private' },
      schema: {
        tags,
        summary: 'Replace the delivery key',
        description:
          'URLs signed with the old key stop working (on other nodes within 5 seconds); URLs the service signed itself keep working.',
        response: { 200: DeliveryKeyAnswer, ...errorResponses(401, 403) },
      },
    },
    async (request) => ({
      success: true as const,
      data: { delivery_key: await workspaces.rotateDeliveryKey(principalOf(request).workspaceId) },
    }),
  );
}
