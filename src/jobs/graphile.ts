// The PostgreSQL runner: graphile-worker, in its own schema (graphile_worker, made by its own
// migrations), over one pg pool of its own. Jobs are added with its SQL function add_job, on
// the caller's Kysely transaction when given one, so a job exists if and only if the row that
// causes it was committed. Any number of nodes (or separate worker processes) run the jobs; a
// job is taken by one of them at a time (SKIP LOCKED) and survives restarts.
import { Logger, type Runner, run, runMigrations, runOnce, type TaskList } from 'graphile-worker';
import pg from 'pg';
import type { Db } from '../db/database.ts';
import {
  addGraphileJob,
  addGraphileJobUnlessFull,
  deadGraphileJobKeys,
  GRAPHILE_SCHEMA,
  settledGraphileJobs,
} from '../db/graphile-jobs.ts';
import { withSchemaLock } from '../db/schema-lock.ts';
import type { JobMetrics } from './metrics.ts';
import { BaseJobQueue, type EnqueueOptions } from './queue.ts';
import type { JobLogger, JobName, JobPayloads } from './types.ts';

const SCHEMA = GRAPHILE_SCHEMA;

export interface GraphileSettings {
  databaseUrl: string;
  /** How often idle workers look for jobs that became due (new jobs are announced by NOTIFY). */
  pollMs: number;
  /** Jobs run at once by this node. */
  concurrency: number;
}

/** graphile-worker's log lines go to ours; its per-job "completed" notes are debug. */
function toLogger(log: JobLogger): Logger {
  return new Logger((scope) => (level, message, meta) => {
    const data = { graphile: scope, ...meta };
    if (level === 'error') log.error(data, message);
    else if (level === 'warning') log.warn(data, message);
    else log.debug(data, message);
  });
}

export class GraphileJobQueue extends BaseJobQueue {
  readonly kind = 'graphile-worker';
  readonly durable = true;
  private readonly pool: pg.Pool;
  private readonly logger: Logger;
  private runner?: Runner;
  private closed?: Promise<void>;

  private constructor(
    private readonly db: Db,
    private readonly settings: GraphileSettings,
    log: JobLogger,
    metrics: JobMetrics,
  ) {
    super(log, metrics);
    // Its LISTEN connection plus one per job at work, at most.
    this.pool = new pg.Pool({ connectionString: settings.databaseUrl, max: settings.concurrency + 2 });
    // A dropped connection (idle, or in use: its query fails on its own) is replaced by the
    // pool; it must not crash the process.
    this.pool.on('error', (err) => log.warn({ err }, 'job queue connection lost'));
    this.pool.on('connect', (client) => client.on('error', () => {}));
    this.logger = toLogger(log);
  }

  /** Opens the queue and brings its schema up to date (concurrent nodes are fine: graphile-worker detects it). */
  static async open(
    db: Db,
    settings: GraphileSettings,
    log: JobLogger,
    metrics: JobMetrics,
  ): Promise<GraphileJobQueue> {
    const queue = new GraphileJobQueue(db, settings, log, metrics);
    try {
      // Under the schema lock: another node's Kysely migrator may be listing the tables meanwhile.
      const client = await queue.pool.connect();
      try {
        await withSchemaLock(client, () => runMigrations({ pgPool: queue.pool, logger: queue.logger, schema: SCHEMA }));
      } finally {
        client.release();
      }
    } catch (err) {
      await queue.pool.end();
      throw err;
    }
    return queue;
  }

  protected async enqueue(name: JobName, payload: unknown, opts: EnqueueOptions): Promise<void> {
    await addGraphileJob(opts.trx ?? this.db.kysely, {
      identifier: name,
      payload,
      runAt: opts.runAt ?? null,
      maxAttempts: opts.maxAttempts,
      jobKey: opts.jobKey ?? null,
      jobKeyMode: opts.keepRunAt ? 'preserve_run_at' : 'replace',
    });
  }

  async addUnlessFull<N extends JobName>(
    name: N,
    payload: JobPayloads[N],
    opts: { jobKey?: string; maxLive: number; staleAfterMs: number },
  ): Promise<boolean> {
    return addGraphileJobUnlessFull(
      this.db.kysely,
      {
        identifier: name,
        payload,
        runAt: null,
        maxAttempts: this.attemptsOf(name),
        jobKey: opts.jobKey ?? null,
        jobKeyMode: 'replace',
      },
      opts.maxLive,
      opts.staleAfterMs,
    );
  }

  async missing(keys: string[], staleAfterMs: number): Promise<Set<string>> {
    // Waiting (with tries left), or running and not for too long.
    return deadGraphileJobKeys(this.db.kysely, keys, staleAfterMs);
  }

  /**
   * graphile-worker's runOnce over this one job: it runs what is due until none is left (`limit`
   * is not applied). Settles once the runs are recorded: graphile-worker marks a job done or
   * failed without waiting for it (worker.js calls completeJob unawaited), so runOnce can return
   * while the jobs it ran still look locked; seen in CI as a finished job still listed.
   */
  async runDue(name: JobName, _limit?: number): Promise<number> {
    const ran: string[] = [];
    await runOnce(
      { pgPool: this.pool, logger: this.logger, schema: SCHEMA, noHandleSignals: true },
      {
        [name]: async (payload: unknown, helpers) => {
          ran.push(String(helpers.job.id));
          await this.execute(name, payload);
        },
      },
    );
    await settledGraphileJobs(this.db.kysely, ran);
    return ran.length;
  }

  protected async startRunner(): Promise<void> {
    if (this.runner) return;
    const taskList: TaskList = {};
    for (const [name, def] of this.definitions)
      if (def.enabled) taskList[name] = (payload: unknown) => this.execute(name, payload);
    if (Object.keys(taskList).length === 0) return;
    this.runner = await run({
      pgPool: this.pool,
      logger: this.logger,
      schema: SCHEMA,
      taskList,
      // Schedules are ours (see queue.ts): no crontab file is read.
      parsedCronItems: [],
      concurrency: this.settings.concurrency,
      pollInterval: this.settings.pollMs,
      // The process's own SIGTERM handling stops the runner (main.ts, services.close()).
      noHandleSignals: true,
    });
    this.runner.promise.catch((err) => this.log.error({ err }, 'job runner stopped'));
  }

  protected async stopRunner(): Promise<void> {
    const runner = this.runner;
    this.runner = undefined;
    await runner?.stop();
  }

  async close(): Promise<void> {
    this.closed ??= this.stop().then(() => this.pool.end());
    await this.closed;
  }
}
