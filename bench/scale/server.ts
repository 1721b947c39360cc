// Stowage as `npm start` runs it (its node flags, then --import tsx src/main.ts), in a child
// process, on a seeded database: rate limits and the per-workspace upload cap off (the bench is
// the only client), logs at error level (as bench/load), the event loop sampled every
// millisecond (loop.ts), everything else the defaults. `restart` is for after a run that left
// more work in flight than is worth waiting for: the process is killed, on PostgreSQL the
// queries it left running are ended too, and a fresh one starts.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { freePort, ROOT, START_NODE_FLAGS } from '../lib.ts';
import { LOOP_RESOLUTION_MS } from './loop.ts';

export interface Target {
  dataDir: string;
  databaseUrl?: string;
}

/** The environment the bench's Stowage runs with (capture.ts builds its in-process copy from it too). */
export function stowageEnv(db: Target, port: number): NodeJS.ProcessEnv {
  return {
    ...process.env,
    STOWAGE_DATA_DIR: db.dataDir,
    DATABASE_URL: db.databaseUrl ?? '',
    HOST: '127.0.0.1',
    PORT: String(port),
    LOG_LEVEL: 'error',
    STOWAGE_RATE_LIMIT_API: 'off',
    STOWAGE_RATE_LIMIT_UPLOAD: 'off',
    STOWAGE_MAX_CONCURRENT_UPLOADS: '0',
    STOWAGE_METRICS_LOOP_RESOLUTION_MS: String(LOOP_RESOLUTION_MS),
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
  };
}

/** What measure.ts drives: a server at `base` that can be restarted when a run left it busy. */
export interface Server {
  base: string;
  /** The server's process (0 when not running). */
  readonly pid: number;
  restart(): Promise<void>;
}

/** Clock ticks a second in /proc/<pid>/stat (USER_HZ: 100 on every Linux this runs on). */
const USER_HZ = 100;

/**
 * CPU time the process has used so far, in ms, all its threads (garbage collection, libuv's
 * pool, reader threads) and the kernel's work for it; undefined where /proc cannot say (not Linux).
 */
export function processCpuMs(pid: number): number | undefined {
  if (!pid) return undefined;
  try {
    // After "(comm) ": state (field 3 of proc(5)) first, so utime (14) and stime (15) at 11 and 12.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(') ') + 2).split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1000) / USER_HZ;
  } catch {
    return undefined;
  }
}

export class Stowage implements Server {
  private child?: ChildProcess;
  private output = '';
  base = '';

  /**
   * `env`: settings on top of the bench's (bench/delivery sets STOWAGE_ACCEL_REDIRECT); `nodeArgs`:
   * options for node itself (bench/delivery-profile passes --cpu-prof).
   */
  constructor(
    private readonly db: Target,
    private readonly env: Record<string, string> = {},
    private readonly nodeArgs: string[] = [],
  ) {}

  get pid(): number {
    return this.child?.pid ?? 0;
  }

  async start(): Promise<void> {
    const port = await freePort();
    this.output = '';
    const child = spawn(process.execPath, [...START_NODE_FLAGS, ...this.nodeArgs, '--import', 'tsx', 'src/main.ts'], {
      cwd: ROOT,
      env: { ...stowageEnv(this.db, port), ...this.env },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    this.child = child;
    child.stderr!.on('data', (d: Buffer) => {
      this.output = (this.output + d).slice(-20_000);
    });
    this.base = `http://127.0.0.1:${port}`;
    for (let i = 0; i < 1200; i++) {
      if (child.exitCode !== null) throw new Error(`stowage exited ${child.exitCode}: ${this.output}`);
      const up = await fetch(`${this.base}/healthz`).then(
        (r) => r.ok,
        () => false,
      );
      if (up) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    await this.stop();
    throw new Error(`stowage did not answer /healthz within 2 minutes: ${this.output}`);
  }

  /** SIGTERM (a graceful shutdown, as in production); SIGKILL with `now` or after 15 s. */
  async stop(now = false): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill(now ? 'SIGKILL' : 'SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    await exited;
    clearTimeout(timer);
  }

  async restart(): Promise<void> {
    await this.stop(true);
    if (this.db.databaseUrl) await endQueries(this.db.databaseUrl);
    await this.start();
  }
}

/** The application_name of the bare baseline's connections (bare.ts). */
export const BARE_APPLICATION = 'stowage-bench-bare';

/**
 * Ends other sessions on the bench's own database (what a killed server left running): those of
 * the bare baseline alone (`bare`), or every other one but theirs.
 */
export async function endQueries(url: string, bare = false): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(
      'select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()' +
        ` and application_name ${bare ? '=' : 'is distinct from'} $1`,
      [BARE_APPLICATION],
    );
  } finally {
    await client.end();
  }
}
