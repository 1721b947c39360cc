import type { FastifyInstance } from 'fastify';
import { type Db, ping } from '../../db/database.ts';
import type { StorageDriver } from '../../storage/driver.ts';

export async function healthRoutes(app: FastifyInstance, opts: { db: Db; storage: StorageDriver; lifecycle: { draining: boolean } }): Promise<void> {
  app.get('/healthz', { schema: { tags: ['health'], summary: 'The process is up' } }, async () => ({ status: 'ok' }));

  app.get('/readyz', { schema: { tags: ['health'], summary: 'Database and storage answer' } }, async (_request, reply) => {
    if (opts.lifecycle.draining) return reply.code(503).send({ status: 'draining', checks: {} });
    const checks: Record<string, string> = {};
    const run = async (name: string, fn: () => Promise<void>) => {
      try {
        await Promise.race([fn(), new Promise((_, reject) => setTimeout(() => reject(new Error('timeout')), 3000).unref())]);
        checks[name] = 'ok';
      } catch {
        checks[name] = 'unavailable';
      }
    };
    await Promise.all([run('database', () => ping(opts.db)), run('storage', () => opts.storage.check())]);
    const ready = Object.values(checks).every((v) => v === 'ok');
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not ready', checks });
  });
}
