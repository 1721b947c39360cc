// Opens the job queue a deployment uses: graphile-worker when the database is PostgreSQL (the
// case whenever Stowage runs on several nodes), the in-process runner on the embedded SQLite.
import type { Registry } from 'prom-client';
import type { Db } from '../db/database.ts';
import { GraphileJobQueue } from './graphile.ts';
import { InProcessJobQueue } from './in-process.ts';
import { JobMetrics } from './metrics.ts';
import type { JobLogger, JobQueue } from './types.ts';

export type { AddOptions, JobName, JobPayloads, JobQueue, RecurringJobName } from './types.ts';

export interface JobQueueOptions {
  databaseUrl?: string;
  /** PostgreSQL: how often idle workers look for jobs that became due. */
  pollMs: number;
  /** Jobs run at once by one node. */
  concurrency: number;
  log: JobLogger;
  /** Where the per-job metrics are registered (the service's Prometheus registry). */
  registry?: Registry;
}

export async function openJobQueue(db: Db, opts: JobQueueOptions): Promise<JobQueue> {
  const metrics = new JobMetrics(opts.registry);
  if (db.dialect === 'postgres' && opts.databaseUrl)
    return GraphileJobQueue.open(
      db,
      { databaseUrl: opts.databaseUrl, pollMs: opts.pollMs, concurrency: opts.concurrency },
      opts.log,
      metrics,
    );
  return new InProcessJobQueue(opts.log, metrics, opts.concurrency);
}
