import type { FastifyInstance } from 'fastify';
import { type Db, ping } from '../../db/database.ts';
import type { StorageDriver } from '../../storage/driver.ts';

/** Local storage's free space and its floor (STOWAGE_MIN_FREE_BYTES). */
export interface FreeSpace {
  minFreeBytes: number;
  free(): Promise<number>;
}

export async function healthRoutes(
  app: FastifyInstance,
  opts: { db: Db; storage: StorageDriver; lifecycle: { draining: boolean }; disk?: FreeSpace },
): Promise<void> {
  app.get('/healthz', { schema: { tags: ['health'], summary: 'The process is up' } }, async () => ({ status: 'ok' }));

  app.get(
    '/readyz',
    { schema: { tags: ['health'], summary: 'Database and storage answer, and local storage has room' } },
    async (_request, reply) => {
      if (opts.lifecycle.draining) return reply.code(503).send({ status: 'draining', checks: {} });
      const checks: Record<string, string> = {};
      const run = async (name: string, fn: () => Promise<void>) => {
        try {
          await Promise.race([
            fn(),
            new Promise((_, reject) => setTimeout(() => reject(new Error('timeout')), 3000).unref()),
          ]);
          checks[name] = 'ok';
        } catch (err) {
          checks[name] = err instanceof LowDiskError ? 'low' : 'unavailable';
        }
      };
      const disk = opts.disk;
      await Promise.all([
        run('database', () => ping(opts.db)),
        run('storage', async () => {
          await opts.storage.check();
          // Below the floor (STOWAGE_MIN_FREE_BYTES) the node takes no uploads (507), so it is not
          // ready for them: 'low'. Reads and deletes still work, and /healthz stays 200: nothing a
          // restart would fix.
          if (disk && (await disk.free()) < disk.minFreeBytes) throw new LowDiskError();
        }),
      ]);
      const ready = Object.values(checks).every((v) => v === 'ok');
      return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not ready', checks });
    },
  );
}

class LowDiskError extends Error {}
