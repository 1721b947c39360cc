// The rendition cache's eviction, a recurring job (src/services/rendition-cache.ts). One run at a
// time across nodes (a keyed job on PostgreSQL); a run beside another would still be safe.
import type { BackfillResult } from '../services/rendition-backfill.ts';
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

/** How soon a backfill that failed or was stopped is tried again; once done, a run is one read. */
export const BACKFILL_EVERY_MS = 10 * 60_000;

/**
 * The one-time backfill of renditions made before the ledger: at start, then again until it
 * has recorded its completion (a crash or a failure resumes from the last workspace done).
 */
export function scheduleRenditionBackfill(
  jobs: JobQueue,
  backfill: { run(): Promise<BackfillResult> },
  log: JobLogger,
  everyMs = BACKFILL_EVERY_MS,
): void {
  jobs.every(
    'renditions.backfill',
    everyMs,
    async () => {
      const r = await backfill.run();
      if (r.walked) log.info(r, 'renditions backfilled');
    },
    { atStart: true },
  );
}
