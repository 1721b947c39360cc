// The in-process runner, for the embedded default (SQLite, one process): jobs wait in memory
// and one timer wakes the runner at the next due time. Nothing here survives a restart: each
// job's owner queues again at start what its tables say is still to do (webhooks do).
import { afterCommit } from '../db/database.ts';
import type { JobMetrics } from './metrics.ts';
import { BaseJobQueue, type EnqueueOptions } from './queue.ts';
import type { JobLogger, JobName, JobPayloads } from './types.ts';

interface Queued {
  seq: number;
  name: JobName;
  payload: unknown;
  runAt: number;
  key?: string;
  /** Runs so far that threw. */
  failures: number;
  maxAttempts: number;
}

/** Longest single timer; a later job is looked at again then. */
const MAX_SLEEP_MS = 3_600_000;

export class InProcessJobQueue extends BaseJobQueue {
  readonly kind = 'in-process';
  readonly durable = false;
  private readonly waiting = new Map<number, Queued>();
  private readonly waitingByKey = new Map<string, Queued>();
  private readonly running = new Map<number, { job: Queued; startedAt: number; done: Promise<void> }>();
  private seq = 0;
  private started = false;
  private timer?: NodeJS.Timeout;

  constructor(
    log: JobLogger,
    metrics: JobMetrics,
    private readonly concurrency = 8,
  ) {
    super(log, metrics);
  }

  protected async enqueue(name: JobName, payload: unknown, opts: EnqueueOptions): Promise<void> {
    // A job added in a transaction waits for its commit (and is dropped with a rollback), as the
    // PostgreSQL queue's row does: a handler that ran before the commit would not find its data,
    // since plain reads may run on another connection (the SQLite reader threads).
    if (opts.trx?.isTransaction) {
      const { trx, ...rest } = opts;
      if (afterCommit(trx, () => void this.enqueue(name, payload, rest))) return;
      this.log.warn({ job: name }, 'job added in a transaction not opened by inTransaction; queued before its commit');
    }
    const runAt = opts.runAt?.getTime() ?? Date.now();
    const same = opts.jobKey ? this.waitingByKey.get(opts.jobKey) : undefined;
    if (same) {
      // As graphile-worker's job keys: the waiting job is replaced (its time kept if asked).
      Object.assign(same, { name, payload, failures: 0, maxAttempts: opts.maxAttempts });
      if (!opts.keepRunAt) same.runAt = runAt;
    } else
      this.put({ seq: ++this.seq, name, payload, runAt, key: opts.jobKey, failures: 0, maxAttempts: opts.maxAttempts });
    this.wake();
  }

  async missing(keys: string[], staleAfterMs: number): Promise<Set<string>> {
    const live = new Set(this.waitingByKey.keys());
    const now = Date.now();
    for (const r of this.running.values()) if (r.job.key && now - r.startedAt <= staleAfterMs) live.add(r.job.key);
    return new Set(keys.filter((k) => !live.has(k)));
  }

  async addUnlessFull<N extends JobName>(
    name: N,
    payload: JobPayloads[N],
    opts: { jobKey?: string; maxLive: number; staleAfterMs: number },
  ): Promise<boolean> {
    // Counted and queued with no await in between: one process, so no other add comes between.
    const now = Date.now();
    let live = 0;
    for (const j of this.waiting.values()) if (j.name === name) live++;
    for (const r of this.running.values()) if (r.job.name === name && now - r.startedAt <= opts.staleAfterMs) live++;
    if (live >= opts.maxLive) return false;
    void this.enqueue(name, payload, { jobKey: opts.jobKey, maxAttempts: this.attemptsOf(name) });
    return true;
  }

  async runDue(name: JobName, limit = Number.POSITIVE_INFINITY): Promise<number> {
    const now = Date.now();
    const due = [...this.waiting.values()].filter((j) => j.name === name && j.runAt <= now).slice(0, limit);
    await Promise.all(due.map((j) => this.run(j)));
    return due.length;
  }

  protected async startRunner(): Promise<void> {
    this.started = true;
    this.wake();
  }

  protected async stopRunner(): Promise<void> {
    this.started = false;
    clearTimeout(this.timer);
    this.timer = undefined;
    await Promise.all([...this.running.values()].map((r) => r.done));
  }

  async close(): Promise<void> {
    await this.stop();
  }

  private put(job: Queued): void {
    this.waiting.set(job.seq, job);
    if (job.key) this.waitingByKey.set(job.key, job);
  }

  /** Starts what is due (within the concurrency) and sets the timer for the next due job. */
  private wake(): void {
    if (!this.started) return;
    clearTimeout(this.timer);
    this.timer = undefined;
    const now = Date.now();
    let next = Number.POSITIVE_INFINITY;
    const due = [...this.waiting.values()]
      .filter((j) => this.definitions.get(j.name)?.enabled)
      .sort((a, b) => a.runAt - b.runAt || a.seq - b.seq);
    const busy = new Map<JobName, number>();
    for (const r of this.running.values()) busy.set(r.job.name, (busy.get(r.job.name) ?? 0) + 1);
    for (const j of due) {
      if (j.runAt > now) {
        next = j.runAt;
        break;
      }
      if (this.running.size >= this.concurrency) break;
      // A name at its own limit waits for one of its runs to end (which wakes the runner again).
      const limit = this.definitions.get(j.name)?.concurrency ?? Number.POSITIVE_INFINITY;
      if ((busy.get(j.name) ?? 0) >= limit) continue;
      busy.set(j.name, (busy.get(j.name) ?? 0) + 1);
      void this.run(j);
    }
    if (next !== Number.POSITIVE_INFINITY) {
      this.timer = setTimeout(() => this.wake(), Math.min(Math.max(0, next - now), MAX_SLEEP_MS));
      this.timer.unref();
    }
  }

  private run(job: Queued): Promise<void> {
    // A job a handler's add() already started (wake() inside a run) is not run twice.
    const already = this.running.get(job.seq);
    if (already) return already.done;
    if (!this.waiting.has(job.seq)) return Promise.resolve();
    this.waiting.delete(job.seq);
    if (job.key && this.waitingByKey.get(job.key) === job) this.waitingByKey.delete(job.key);
    const entry = { job, startedAt: Date.now(), done: Promise.resolve() };
    this.running.set(job.seq, entry);
    entry.done = (async () => {
      try {
        await this.execute(job.name, job.payload);
      } catch {
        this.retry(job);
      } finally {
        this.running.delete(job.seq);
        this.wake();
      }
    })();
    return entry.done;
  }

  /** A run that threw (already logged and counted) is tried again after the job's backoff. */
  private retry(job: Queued): void {
    job.failures++;
    // A job added again with the same key while this one ran supersedes it.
    if (job.failures >= job.maxAttempts || (job.key && this.waitingByKey.has(job.key))) return;
    const backoff = this.definitions.get(job.name)?.backoffMs(job.failures) ?? 1000;
    this.put({ ...job, seq: ++this.seq, runAt: Date.now() + backoff });
  }
}
