// The waits of startup/patience.ts for the dependencies that are not reached through a call that
// can simply be retried: storage is asked whether it answers, Redis reconnects by itself.
import { once } from 'node:events';
import type { Redis } from 'ioredis';
import type { StorageDriver } from '../storage/driver.ts';
import { type Patience, reason, waitFor } from './patience.ts';

/**
 * Waits while the storage cannot be reached. A storage that answers with a refusal (credentials
 * without HeadBucket rights, say) is only logged: uploads and reads may still be allowed.
 */
export async function waitForStorage(storage: StorageDriver, patience: Patience): Promise<void> {
  try {
    await waitFor(`storage (${storage.description})`, () => storage.check(), patience);
  } catch (err) {
    if (err instanceof Error && err.name === 'StartupTimeoutError') throw err;
    patience.log.warn({ error: reason(err) }, `storage answered its start check with an error: ${reason(err)}`);
  }
}

/**
 * Waits until the client is ready. ioredis reconnects on its own; each attempt waits for its next
 * outcome (`once` rejects on an 'error' event before 'ready').
 */
export async function waitForRedis(redis: Redis, what: string, patience: Patience): Promise<void> {
  await waitFor(
    what,
    async () => {
      if (redis.status !== 'ready') await once(redis, 'ready');
    },
    patience,
  );
}
