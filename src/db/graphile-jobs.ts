// The two statements the PostgreSQL job runner (src/jobs/graphile.ts) makes itself against
// graphile-worker's schema: adding a job through its add_job function (on the caller's
// transaction when there is one) and asking which keyed jobs are no longer alive.
import { type Kysely, sql } from 'kysely';
import type { Database } from './schema.ts';

export const GRAPHILE_SCHEMA = 'graphile_worker';

export interface GraphileJob {
  identifier: string;
  payload: unknown;
  runAt: Date | null;
  maxAttempts: number;
  jobKey: string | null;
  /** preserve_run_at keeps a waiting keyed job's time; replace moves it. */
  jobKeyMode: 'preserve_run_at' | 'replace';
}

export async function addGraphileJob(q: Kysely<Database>, job: GraphileJob): Promise<void> {
  await sql`select ${sql.id(GRAPHILE_SCHEMA)}.add_job(
      identifier => ${job.identifier}::text,
      payload => ${JSON.stringify(job.payload)}::json,
      run_at => ${job.runAt?.toISOString() ?? null}::timestamptz,
      max_attempts => ${job.maxAttempts}::int,
      job_key => ${job.jobKey}::text,
      job_key_mode => ${job.jobKeyMode}::text
    )`.execute(q);
}

/** The keys among `keys` with no job waiting (tries left) or running for less than `staleAfterMs`. */
export async function deadGraphileJobKeys(
  q: Kysely<Database>,
  keys: string[],
  staleAfterMs: number,
): Promise<Set<string>> {
  if (keys.length === 0) return new Set();
  const { rows } = await sql<{ key: string }>`select key from ${sql.id(GRAPHILE_SCHEMA, 'jobs')}
      where key = any(${keys}::text[])
      and ((locked_at is null and attempts < max_attempts)
        or locked_at > now() - make_interval(secs => ${staleAfterMs / 1000}::float8))`.execute(q);
  const live = new Set(rows.map((r) => r.key));
  return new Set(keys.filter((k) => !live.has(k)));
}

/**
 * Waits (up to `timeoutMs`) until none of the jobs `ids` is locked any more: each was completed
 * (its row deleted) or failed (unlocked, to run again later).
 */
export async function settledGraphileJobs(q: Kysely<Database>, ids: string[], timeoutMs = 10_000): Promise<void> {
  if (ids.length === 0) return;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await sql<{ id: string }>`select id from ${sql.id(GRAPHILE_SCHEMA, 'jobs')}
        where id = any(${ids}::bigint[]) and locked_at is not null`.execute(q);
    if (rows.length === 0 || Date.now() > deadline) return;
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * Adds `job` unless `maxLive` jobs of its task are already waiting (with tries left) or running
 * for less than `staleAfterMs`, or a live job has its key (then it is not added but counts as
 * queued: true). The count and the add happen under a transaction-scoped advisory
 * lock of the task's name, so concurrent adds on any node take turns; false when full.
 */
export async function addGraphileJobUnlessFull(
  db: Kysely<Database>,
  job: GraphileJob,
  maxLive: number,
  staleAfterMs: number,
): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    await sql`select pg_advisory_xact_lock(hashtext(${`stowage:job-cap:${job.identifier}`}))`.execute(trx);
    // A live job with this key already does the work: nothing is added (add_job would make a
    // second one beside a job that is running), and the ask counts as queued.
    if (job.jobKey !== null && (await deadGraphileJobKeys(trx, [job.jobKey], staleAfterMs)).size === 0) return true;
    const { rows } = await sql<{ n: string }>`select count(*) as n from ${sql.id(GRAPHILE_SCHEMA, 'jobs')}
        where task_identifier = ${job.identifier}
        and ((locked_at is null and attempts < max_attempts)
          or locked_at > now() - make_interval(secs => ${staleAfterMs / 1000}::float8))`.execute(trx);
    if (Number(rows[0]?.n ?? 0) >= maxLive) return false;
    await addGraphileJob(trx, job);
    return true;
  });
}
