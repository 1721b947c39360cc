// Waiting for PostgreSQL, Redis and object storage at start. In a compose file or a cluster they
// often come up after Stowage; exiting at once makes the orchestrator restart it in a loop and
// buries the one useful line. Instead each dependency is retried with capped exponential backoff,
// one log line per failed attempt, until STOWAGE_STARTUP_WAIT_MS has passed. Only "cannot reach it"
// is waited for: a wrong password or a missing database fails the start at once.
import type { Logger } from 'pino';

export interface Patience {
  /** How long, in all, to keep trying one dependency; 0 = one attempt. */
  totalMs: number;
  log: Pick<Logger, 'warn' | 'info'>;
}

const FIRST_DELAY_MS = 250;
const MAX_DELAY_MS = 5000;

/** Socket-level failures and PostgreSQL's "starting up"/"too many connections": worth another try. */
const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
  'ECONNABORTED',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_SOCKET',
  '57P03',
  '53300',
]);

/** Whether `err`, or an error it wraps, says the other side could not be reached (yet). */
export function isUnreachable(err: unknown, depth = 0): boolean {
  if (!err || typeof err !== 'object' || depth > 4) return false;
  const e = err as { code?: unknown; cause?: unknown; errors?: unknown; name?: unknown; message?: unknown };
  if (typeof e.code === 'string' && UNREACHABLE.has(e.code)) return true;
  // The AWS SDK names a connection timeout instead of giving it a code.
  if (e.name === 'TimeoutError' || e.name === 'TimeoutErr') return true;
  // pg ends a connection the server closed while starting with this message and no code.
  if (
    typeof e.message === 'string' &&
    /Connection terminated unexpectedly|the database system is starting up/.test(e.message)
  )
    return true;
  if (Array.isArray(e.errors) && e.errors.some((x) => isUnreachable(x, depth + 1))) return true;
  return isUnreachable(e.cause, depth + 1);
}

/** The first line of an error's message, for a log line (never a URL's credentials: callers pass none). */
export function reason(err: unknown): string {
  if (err instanceof AggregateError && !err.message && err.errors[0]) return reason(err.errors[0]);
  if (err instanceof Error && err.message) return err.message.split('\n')[0].slice(0, 200);
  const code = (err as { code?: unknown })?.code;
  if (typeof code === 'string') return code;
  return err instanceof Error ? err.name : String(err).slice(0, 200);
}

export class StartupTimeoutError extends Error {
  constructor(what: string, totalMs: number, last: unknown) {
    super(
      `${what} could not be reached within ${Math.round(totalMs / 1000)} s (STOWAGE_STARTUP_WAIT_MS): ${reason(last)}`,
    );
    this.name = 'StartupTimeoutError';
  }
}

/**
 * Runs `attempt` until it succeeds. While it fails with an unreachable error and time is left, it
 * logs and waits 250 ms, 500 ms, 1 s… (at most 5 s) before the next try; afterwards it throws
 * StartupTimeoutError. Any other error is thrown at once. Without `patience`, one attempt.
 */
export async function waitFor<T>(what: string, attempt: () => Promise<T>, patience?: Patience): Promise<T> {
  const started = Date.now();
  let delay = FIRST_DELAY_MS;
  for (let n = 1; ; n++) {
    try {
      const result = await attempt();
      if (n > 1) patience?.log.info({ dependency: what, attempts: n }, `${what} is reachable`);
      return result;
    } catch (err) {
      if (!patience || !isUnreachable(err)) throw err;
      const left = patience.totalMs - (Date.now() - started);
      if (left <= 0) throw new StartupTimeoutError(what, patience.totalMs, err);
      const wait = Math.min(delay, left);
      patience.log.warn(
        { dependency: what, attempt: n, retryInMs: wait, error: reason(err) },
        `waiting for ${what}: ${reason(err)}`,
      );
      await new Promise((r) => setTimeout(r, wait));
      delay = Math.min(delay * 2, MAX_DELAY_MS);
    }
  }
}

/** "PostgreSQL at host:port/db", without the user or password of the URL. */
export function describePostgres(databaseUrl: string): string {
  try {
    const u = new URL(databaseUrl);
    return `PostgreSQL at ${u.hostname}:${u.port || '5432'}${u.pathname}`;
  } catch {
    return 'PostgreSQL';
  }
}

/** "Redis at host:port", without credentials. */
export function describeRedis(redisUrl: string): string {
  try {
    const u = new URL(redisUrl);
    return `Redis at ${u.hostname}:${u.port || '6379'}`;
  } catch {
    return 'Redis';
  }
}
