// The sweep, a recurring job: frees the bytes of expired or aborted multipart sessions and of
// uploads a crash interrupted, and forgets upload tokens a day past expiry. Every step is
// conditional, so a run that overlaps another (two nodes, a slow run) does nothing twice.
import type { JobLogger, JobQueue } from './types.ts';

export interface Sweepers {
  multipart: { sweep(): Promise<{ expired: number; intents: number; finished: number }> };
  tokens: { sweep(): Promise<number> };
}

/** Schedules the sweep every `everyMs` (0: never on this node). */
export function scheduleSweep(jobs: JobQueue, sweepers: Sweepers, everyMs: number, log: JobLogger): void {
  jobs.every('sweep', everyMs, async () => {
    const [r, tokens] = await Promise.all([sweepers.multipart.sweep(), sweepers.tokens.sweep()]);
    if (r.expired || r.intents || r.finished || tokens) log.info({ ...r, tokens }, 'sweep');
  });
}
