// A workspace's API keys and webhook deliveries over HTTP, for the private key's holder (the
// dashboard's workspace pages): keys are listed by hint only, created or rotated with the new key
// shown once, revoked (never the last private key); deliveries are listed and sent again.
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { errorResponses } from '../../contract/errors.ts';
import {
  ApiKeyAnswer,
  ApiKeyCreateBody,
  ApiKeyCreated,
  ApiKeyList,
  ApiKeyParams,
  ApiKeyRotateBody,
  ApiKeyRotated,
} from '../../contract/keys.ts';
import {
  WebhookDeliveryAnswer,
  WebhookDeliveryList,
  WebhookDeliveryParams,
  WebhookDeliveryQuery,
} from '../../contract/webhooks.ts';
import type { WebhookService } from '../../services/webhooks.ts';
import type { KeyInfo, WorkspaceService } from '../../services/workspaces.ts';
import { principalOf } from '../auth.ts';

/** A key as listed: `active` says whether it works now (a rotation's grace period counts). */
const shown = <K extends KeyInfo>(k: K, now = new Date().toISOString()) => ({
  ...k,
  active: k.revoked_at === null || k.revoked_at > now,
});

export async function keyRoutes(
  app: FastifyInstance,
  opts: { workspaces: WorkspaceService; webhooks: WebhookService },
): Promise<void> {
  const { workspaces, webhooks } = opts;
  const api = app.withTypeProvider<TypeBoxTypeProvider>();
  const ws = (request: Parameters<typeof principalOf>[0]) => principalOf(request).workspaceId;

  api.get(
    '/api/v1/keys',
    {
      config: { auth: 'private' },
      schema: {
        tags: ['keys'],
        summary: "List the workspace's API keys",
        description: 'Each by its hint (prefix and last four characters): the keys themselves are never shown again.',
        response: { 200: ApiKeyList, ...errorResponses(401, 403) },
      },
    },
    async (request) => ({
      success: true as const,
      data: { keys: (await workspaces.listKeys(ws(request))).map((k) => shown(k)) },
    }),
  );

  api.post(
    '/api/v1/keys',
    {
      config: { auth: 'private' },
      schema: {
        tags: ['keys'],
        summary: 'Create an API key',
        description: 'The answer holds the key itself, this once; only its hash is stored.',
        body: ApiKeyCreateBody,
        response: { 201: ApiKeyCreated, ...errorResponses(400, 401, 403) },
      },
    },
    async (request, reply) => {
      const created = await workspaces.createKey(ws(request), request.body.type);
      return reply.code(201).send({ success: true as const, data: shown(created) });
    },
  );

  api.post(
    '/api/v1/keys/:key_id/rotate',
    {
      config: { auth: 'private' },
      schema: {
        tags: ['keys'],
        summary: 'Rotate an API key',
        description:
          'A new key of the same type (shown this once); the old one keeps working for grace_seconds, then stops.',
        params: ApiKeyParams,
        body: ApiKeyRotateBody,
        response: { 200: ApiKeyRotated, ...errorResponses(400, 401, 403, 404) },
      },
    },
    async (request) => {
      const r = await workspaces.rotateWorkspaceKey(
        ws(request),
        request.params.key_id,
        request.body?.grace_seconds ?? 0,
      );
      return { success: true as const, data: { old: shown(r.old), new: shown(r.new) } };
    },
  );

  api.delete(
    '/api/v1/keys/:key_id',
    {
      config: { auth: 'private' },
      schema: {
        tags: ['keys'],
        summary: 'Revoke an API key',
        description:
          'It stops working at once (also during a rotation grace period). The last private key in force is refused with 409 LAST_PRIVATE_KEY.',
        params: ApiKeyParams,
        response: { 200: ApiKeyAnswer, ...errorResponses(400, 401, 403, 404, 409) },
      },
    },
    async (request) => ({
      success: true as const,
      data: shown(await workspaces.revokeWorkspaceKey(ws(request), request.params.key_id)),
    }),
  );

  api.get(
    '/api/v1/webhooks/deliveries',
    {
      config: { auth: 'private' },
      schema: {
        tags: ['webhooks'],
        summary: 'List webhook deliveries',
        description: 'Newest first, with status, attempts and the last outcome; filter by status.',
        querystring: WebhookDeliveryQuery,
        response: { 200: WebhookDeliveryList, ...errorResponses(400, 401, 403) },
      },
    },
    async (request) => ({ success: true as const, data: await webhooks.list(ws(request), request.query) }),
  );

  api.post(
    '/api/v1/webhooks/deliveries/:delivery_id/redeliver',
    {
      config: { auth: 'private' },
      schema: {
        tags: ['webhooks'],
        summary: 'Send a webhook delivery again',
        description:
          'Queued now with the same webhook-id: a pending delivery is tried at once, a delivered or failed one gets one more attempt.',
        params: WebhookDeliveryParams,
        response: { 202: WebhookDeliveryAnswer, ...errorResponses(400, 401, 403, 404) },
      },
    },
    async (request, reply) =>
      reply
        .code(202)
        .send({ success: true as const, data: await webhooks.redeliver(ws(request), request.params.delivery_id) }),
  );
}
