// What both runners share: job definitions, running one job with its metrics and log lines,
// and recurring schedules built on keyed jobs (each run queues the next; every node checks
// now and then that the schedule still has a job, in case the node running it died).
import type { JobMetrics } from './metrics.ts';
import type {
  AddOptions,
  JobHandler,
  JobLogger,
  JobName,
  JobOptions,
  JobPayloads,
  JobQueue,
  RecurringJobName,
} from './types.ts';

export interface Definition {
  run: (payload: unknown) => Promise<void>;
  enabled: boolean;
  maxAttempts: number;
  backoffMs: (attempt: number) => number;
  concurrency: number;
}

/** What a runner is told when a job is added; `keepRunAt` keeps a waiting keyed job's time. */
export interface EnqueueOptions extends AddOptions {
  maxAttempts: number;
  keepRunAt?: boolean;
}

const DEFAULT_ATTEMPTS = 25;
/** The same curve as graphile-worker's: e^n seconds, at most e^10 (~6 h). */
const defaultBackoff = (attempt: number) => Math.round(Math.exp(Math.min(attempt, 10)) * 1000);

export const recurringKey = (name: JobName) => `recurring:${name}`;

export abstract class BaseJobQueue implements JobQueue {
  abstract readonly kind: JobQueue['kind'];
  abstract readonly durable: boolean;
  protected readonly definitions = new Map<JobName, Definition>();
  private readonly schedules = new Map<RecurringJobName, { everyMs: number; atStart: boolean }>();
  private ensureTimers: NodeJS.Timeout[] = [];

  constructor(
    protected readonly log: JobLogger,
    private readonly metrics: JobMetrics,
  ) {}

  protected abstract enqueue(name: JobName, payload: unknown, opts: EnqueueOptions): Promise<void>;
  abstract addUnlessFull<N extends JobName>(
    name: N,
    payload: JobPayloads[N],
    opts: { jobKey?: string; maxLive: number; staleAfterMs: number },
  ): Promise<boolean>;
  protected abstract startRunner(): Promise<void>;
  protected abstract stopRunner(): Promise<void>;
  abstract missing(keys: string[], staleAfterMs: number): Promise<Set<string>>;
  abstract runDue(name: JobName, limit?: number): Promise<number>;
  abstract close(): Promise<void>;

  define<N extends JobName>(name: N, run: JobHandler<N>, opts: JobOptions = {}): void {
    this.definitions.set(name, {
      // Payloads are this program's own JSON, written by add() with the same type.
      run: (payload) => run(payload as JobPayloads[N]),
      enabled: opts.enabled ?? true,
      maxAttempts: opts.maxAttempts ?? DEFAULT_ATTEMPTS,
      backoffMs: opts.backoffMs ?? defaultBackoff,
      concurrency: opts.concurrency ?? Number.POSITIVE_INFINITY,
    });
  }

  every(name: RecurringJobName, everyMs: number, run: () => Promise<void>, opts: { atStart?: boolean } = {}): void {
    if (everyMs > 0) this.schedules.set(name, { everyMs, atStart: opts.atStart ?? false });
    this.define(
      name,
      async () => {
        try {
          await run();
        } catch (err) {
          // Not retried: the next run comes anyway. Counted and logged here.
          this.metrics.failures.inc({ job: name });
          this.log.warn({ err, job: name }, 'job failed');
        } finally {
          if (everyMs > 0) await this.queueNext(name, everyMs, false);
        }
      },
      { enabled: everyMs > 0, maxAttempts: 1 },
    );
  }

  async add<N extends JobName>(name: N, payload: JobPayloads[N], opts: AddOptions = {}): Promise<void> {
    await this.enqueue(name, payload, {
      ...opts,
      maxAttempts: this.attemptsOf(name),
    });
  }

  /** Runs a job of `name` gets in all (its definition's, or the default). */
  protected attemptsOf(name: JobName): number {
    return this.definitions.get(name)?.maxAttempts ?? DEFAULT_ATTEMPTS;
  }

  async start(): Promise<void> {
    await this.startRunner();
    for (const [name, { everyMs, atStart }] of this.schedules) {
      const ensure = (now: boolean) =>
        this.ensureScheduled(name, everyMs, now).catch((err) =>
          this.log.warn({ err, job: name }, 'job schedule check failed'),
        );
      await ensure(atStart);
      const timer = setInterval(() => ensure(false), Math.max(everyMs, 30_000));
      timer.unref();
      this.ensureTimers.push(timer);
    }
  }

  async stop(): Promise<void> {
    for (const t of this.ensureTimers) clearInterval(t);
    this.ensureTimers = [];
    await this.stopRunner();
  }

  /** Runs one job with metrics and log lines; throws what the handler threw (the runner retries). */
  protected async execute(name: JobName, payload: unknown): Promise<void> {
    const def = this.definitions.get(name);
    if (!def) throw new Error(`no job named ${name}`);
    const end = this.metrics.duration.startTimer({ job: name });
    this.metrics.runs.inc({ job: name });
    try {
      await def.run(payload);
    } catch (err) {
      this.metrics.failures.inc({ job: name });
      this.log.warn({ err, job: name }, 'job failed; it will be retried');
      throw err;
    } finally {
      end();
    }
  }

  /** The schedule's job is there, or is added (a lost one after a day-long run is no longer trusted). */
  private async ensureScheduled(name: RecurringJobName, everyMs: number, now: boolean): Promise<void> {
    const staleAfterMs = Math.max(3_600_000, 2 * everyMs);
    if ((await this.missing([recurringKey(name)], staleAfterMs)).size > 0)
      await this.queueNext(name, now ? 0 : everyMs, true);
  }

  private async queueNext(name: RecurringJobName, inMs: number, keepRunAt: boolean): Promise<void> {
    await this.enqueue(
      name,
      {},
      { jobKey: recurringKey(name), runAt: new Date(Date.now() + inMs), maxAttempts: 1, keepRunAt },
    );
  }
}
