// The rendition cache's eviction, a recurring job (src/services/rendition-cache.ts). One run at a
// time across nodes (a keyed job on PostgreSQL); a run beside another would still be safe.
import type { JobLogger, JobQueue } from './types.ts';

/** How often the total is checked against the budget. */
export const EVICT_EVERY_MS = 60_000;

export function scheduleRenditionEviction(
  jobs: JobQueue,
  cache: { budgetBytes: number; evict(): Promise<{ evicted: number; bytes: number; total: number }> },
  log: JobLogger,
  everyMs = EVICT_EVERY_MS,
): void {
  jobs.every('renditions.evict', cache.budgetBytes > 0 ? everyMs : 0, async () => {
    const r = await cache.evict();
    if (r.evicted) log.info(r, 'renditions evicted');
  });
}
