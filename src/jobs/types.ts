// The job interface: named jobs with typed payloads, added now or for later (optionally in the
// caller's transaction), recurring schedules, and start/stop. Two runners implement it: an
// in-process one for the embedded default (SQLite, one process) and graphile-worker for
// PostgreSQL deployments (several nodes, separate worker processes).
import type { Kysely } from 'kysely';
import type { BaseLogger } from 'pino';
import type { Database } from '../db/schema.ts';
import type { VideoStreamJob, VideoTranscodeJob } from '../services/video-renditions.ts';

/** Every job there is, by name, with its payload (plain JSON: it is stored on PostgreSQL). */
export interface JobPayloads {
  /** One attempt at one webhook delivery (a `webhook_deliveries` row). */
  'webhook.deliver': { id: string; attempt: number };
  /** Recurring: queues again deliveries whose job was lost (a restart on SQLite, a killed node on PostgreSQL). */
  'webhook.requeue': Record<string, never>;
  /** Recurring: expired multipart sessions, abandoned bytes, old upload tokens. */
  sweep: Record<string, never>;
  /** Recurring: least recently used renditions past STOWAGE_RENDITION_CACHE_BYTES go. */
  'renditions.evict': Record<string, never>;
  /** Recurring until done once: rows for renditions made before the ledger (src/services/rendition-backfill.ts). */
  'renditions.backfill': Record<string, never>;
  /** One video rendition (src/services/video-renditions.ts), keyed by its storage key: identical asks coalesce. */
  'video.transcode': VideoTranscodeJob;
  /** One adaptive-streaming package, its whole ladder in one run, keyed by its master playlist's key. */
  'video.stream': VideoStreamJob;
}

export type JobName = keyof JobPayloads;

/** Jobs that run on a schedule (payload-less). */
export type RecurringJobName = { [N in JobName]: JobPayloads[N] extends Record<string, never> ? N : never }[JobName];

export type JobLogger = Pick<BaseLogger, 'debug' | 'info' | 'warn' | 'error'>;

export interface AddOptions {
  /** Not before then (default: now). */
  runAt?: Date;
  /**
   * At most one waiting job per key: adding again replaces the waiting one. A job with this key
   * that is already running is left to finish and the new one waits behind it.
   */
  jobKey?: string;
  /**
   * Queue the job in this transaction. On PostgreSQL the job exists if and only if the
   * transaction commits. On SQLite the in-process queue cannot see the commit: the job is queued
   * at once and runs after the transaction ends (one connection), so its handler must find the
   * state it acts on and do nothing when it is not there (a rollback).
   */
  trx?: Kysely<Database>;
}

export interface JobOptions {
  /** Whether this node runs it (it can be added anywhere). Default true. */
  enabled?: boolean;
  /** Runs of a job that throws, in all (default 25). */
  maxAttempts?: number;
  /**
   * Wait before run n+1 of a job whose run n threw (in-process runner). graphile-worker uses
   * its own exponential backoff (e^min(n,10) seconds).
   */
  backoffMs?: (attempt: number) => number;
  /**
   * Jobs of this name running at once on this node (in-process runner; default: no limit but the
   * runner's own). The others stay queued, so long jobs (transcodes) never hold every runner slot
   * that webhooks and the sweep need. graphile-worker has no such setting: there the handler's
   * own slots bound the work, and its waiting runs hold worker slots.
   */
  concurrency?: number;
}

export type JobHandler<N extends JobName> = (payload: JobPayloads[N]) => Promise<void>;

export interface JobQueue {
  readonly kind: 'in-process' | 'graphile-worker';
  /** Whether queued jobs survive a restart (PostgreSQL). */
  readonly durable: boolean;
  /** How this node runs jobs of `name`. Define every job before start(). */
  define<N extends JobName>(name: N, run: JobHandler<N>, opts?: JobOptions): void;
  /**
   * A recurring job: one run at a time, the next `everyMs` after the last ended (0: this node
   * never runs it). Across nodes on PostgreSQL, one schedule is shared: each run is done once.
   * The first run is `everyMs` after start, or at start with `atStart` when no run is waiting.
   */
  every(name: RecurringJobName, everyMs: number, run: () => Promise<void>, opts?: { atStart?: boolean }): void;
  add<N extends JobName>(name: N, payload: JobPayloads[N], opts?: AddOptions): Promise<void>;
  /**
   * Adds the job only while fewer than `maxLive` jobs of `name` are waiting or running (one
   * running for longer than `staleAfterMs` counts as lost); false, and nothing added, when full.
   * When a live job already has `jobKey`, nothing is added and the answer is true (coalesced).
   * The count and the add are one step across every node, so parallel adds cannot pass the cap.
   */
  addUnlessFull<N extends JobName>(
    name: N,
    payload: JobPayloads[N],
    opts: { jobKey?: string; maxLive: number; staleAfterMs: number },
  ): Promise<boolean>;
  /**
   * Of these job keys, the ones with no job waiting or running; a job running for longer than
   * `staleAfterMs` counts as lost (its node died) and its key is returned too.
   */
  missing(keys: string[], staleAfterMs: number): Promise<Set<string>>;
  /** Runs jobs of `name` that are due, now, on this node, whether or not it was started; returns how many ran. */
  runDue(name: JobName, limit?: number): Promise<number>;
  /** Starts running the enabled jobs and the recurring schedules. */
  start(): Promise<void>;
  /** Stops taking jobs and waits for the running ones to end. */
  stop(): Promise<void>;
  /** stop(), then releases connections. */
  close(): Promise<void>;
}
