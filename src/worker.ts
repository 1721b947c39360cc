// `stowage worker` (or `stowage-server worker`): a process that runs background jobs and serves
// no HTTP API, so the heavy jobs (transcodes, webhook bursts, sweeps) scale apart from the API
// nodes. It needs PostgreSQL: the job queue is graphile-worker's, shared by every node and
// worker, and each job is taken by one of them at a time. API nodes started with
// STOWAGE_JOBS=off leave all jobs to the workers.
import type { Server } from 'node:http';
import type { Logger } from 'pino';
import type { Config } from './config.ts';
import { closeMetricsServer, startConfiguredMetrics } from './http/metrics-endpoint.ts';
import { createServices } from './services/container.ts';

/** Exit code of a worker started without PostgreSQL (sysexits' EX_CONFIG, as for other bad settings). */
export const WORKER_NEEDS_POSTGRES = 78;

export async function runWorker(config: Config, log: Logger): Promise<void> {
  if (!config.databaseUrl) {
    process.stderr.write(
      'stowage: a worker needs PostgreSQL (DATABASE_URL): on the embedded SQLite the server runs every job itself\n',
    );
    process.exit(WORKER_NEEDS_POSTGRES);
  }
  const services = await createServices(config, {
    logger: log,
    patience: { totalMs: config.startupWaitMs, log },
  });

  // Armed before the jobs start, for the reason main.ts gives: a SIGTERM during the start must
  // drain, not kill. close() lets the jobs in flight finish (graphile-worker's graceful stop);
  // past STOWAGE_SHUTDOWN_TIMEOUT_MS the process exits anyway and their jobs are taken up again
  // by another worker once their lock expires.
  let closing = false;
  let metricsServer: Server | undefined;
  const shutdown = (signal: string) => {
    if (closing) return;
    closing = true;
    log.info({ signal, timeoutMs: config.shutdownTimeoutMs }, 'worker shutting down');
    setTimeout(() => {
      log.warn('worker shutdown deadline reached; exiting with jobs still running');
      process.exit(1);
    }, config.shutdownTimeoutMs).unref();
    closeMetricsServer(metricsServer)
      .then(() => services.close())
      .then(
        () => process.exit(0),
        (err) => {
          log.error({ err }, 'worker shutdown failed');
          process.exit(1);
        },
      );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));

  await services.jobs.start();
  metricsServer = await startConfiguredMetrics(config, services.metrics.registry, log);
  log.info({ runner: services.jobs.kind }, 'worker started: running background jobs, serving no API');
}
