// What a shared cache (a CDN, nginx's proxy_cache: docs/deploy.md, "Caching delivery in nginx")
// may keep. Delivery heads the files it serves itself (`answer()` in routes/delivery.ts: public,
// or private for a private file). Everything else is said here, once: an API answer is for the
// caller whose key or token made it, and an error says nothing worth keeping, so both are
// `no-store`. Without it a cache that stores answers lacking Cache-Control (Fastly does for an
// hour; nginx when `proxy_cache_valid` is set) could hand one caller's file list, with its
// signed URLs, to another: nginx's proxy_cache does not refuse to store answers to requests
// carrying `Authorization`, and knows nothing of `x-api-key`. An answer that set its own
// Cache-Control keeps it (CORS preflights, tus).
import type { FastifyInstance } from 'fastify';

export const NO_STORE = 'no-store';

export function installCachePolicy(app: FastifyInstance): void {
  app.addHook('onSend', async (request, reply, payload) => {
    if (reply.statusCode >= 400) reply.header('cache-control', NO_STORE);
    else if (request.url.startsWith('/api/') && !reply.hasHeader('cache-control'))
      reply.header('cache-control', NO_STORE);
    return payload;
  });
}
