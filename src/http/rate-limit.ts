// Rate limits per API key (docs/api.md#limits): upload endpoints have their own budget,
// everything else with a key shares another; routes without a key (delivery, part uploads,
// health) are not limited here. In memory by default; in Redis when REDIS_URL is set, so the
// budget is shared by every node.
import { createHash } from 'node:crypto';
import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import type { RateLimit } from '../config.ts';
import { appError } from '../errors.ts';
import { presentedKey } from './auth.ts';

const UPLOAD_ROUTES = new Set([
  'POST /api/v1/uploads',
  'POST /api/v1/uploads/remote',
  'POST /api/v1/multipart/start',
  'POST /api/v1/multipart/complete',
]);

/** Who is counted: the key (hashed: raw keys never reach Redis), or the address when none is sent. */
function keyOf(request: FastifyRequest): string {
  const key = presentedKey(request);
  return key ? createHash('sha256').update(key).digest('base64url').slice(0, 24) : `ip:${request.ip}`;
}

export async function installRateLimits(
  app: FastifyInstance,
  opts: { upload: RateLimit | null; api: RateLimit | null; redis?: Redis },
): Promise<void> {
  if (!opts.upload && !opts.api) return;
  // Runs before the plugin's own onRoute hook (hooks run in the order they are added).
  app.addHook('onRoute', (route) => {
    const auth = route.config?.auth;
    if (!auth || auth === 'none') return;
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    const limit = methods.some((m) => UPLOAD_ROUTES.has(`${m} ${route.url}`)) ? opts.upload : opts.api;
    if (!limit) return;
    route.config = {
      ...route.config,
      rateLimit: { max: limit.max, timeWindow: limit.windowMs, groupId: limit === opts.upload ? 'upload' : 'api' },
    } as typeof route.config;
  });
  await app.register(rateLimit, {
    global: false,
    redis: opts.redis,
    nameSpace: 'stowage-rl:',
    keyGenerator: keyOf,
    enableDraftSpec: true,
    skipOnError: false,
    errorResponseBuilder: (_request, context) => {
      const seconds = Math.max(1, Math.ceil(context.ttl / 1000));
      return appError(
        'RATE_LIMITED',
        `Rate limit of ${context.max} requests per ${context.after} reached; retry in ${seconds} s`,
        {
          body: { retryAfterSeconds: seconds },
        },
      );
    },
  });
}
