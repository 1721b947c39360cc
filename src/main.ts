// `npm start`: read the configuration, prepare the database, create the first workspace on an
// empty database, listen, and shut down cleanly on SIGTERM/SIGINT. With the argument `worker`
// (`stowage-server worker`, or `stowage worker`, which loads this module) it runs background jobs
// only (worker.ts).
import { chmodSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import pino, { type Logger, type LoggerOptions } from 'pino';
import { buildApp, REDACT_PATHS } from './app.ts';
import { type Config, ConfigError, loadConfig } from './config.ts';
import { withLogRedaction } from './http/log-redaction.ts';
import { tuneHeapForStreaming, tunePretenuring } from './heap.ts';
import { createServices } from './services/container.ts';
import type { CreatedWorkspace } from './services/workspaces.ts';
import type { Server } from 'node:http';
import { closeMetricsServer, startConfiguredMetrics } from './http/metrics-endpoint.ts';
import { logStream } from './log-output.ts';
import { logCorsCheck } from './storage/s3-cors.ts';
import { runWorker } from './worker.ts';

/** The process's own lines (start, jobs, shutdown) go through pino with the options the app's logger gets. */
function processLogger(config: Config): Logger {
  const options = withLogRedaction({
    level: config.logLevel,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
  }) as LoggerOptions;
  const stream = logStream(config.logFormat);
  return stream ? pino(options, stream) : pino(options);
}

async function main(): Promise<void> {
  tuneHeapForStreaming();
  tunePretenuring();
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    // No logger yet: its level is part of the configuration that just failed.
    if (err instanceof ConfigError) {
      process.stderr.write(`stowage: ${err.message}\n`);
      process.exit(78);
    }
    throw err;
  }
  const log = processLogger(config);
  try {
    if (process.argv[2] === 'worker') await runWorker(config, log);
    else await serve(config, log);
  } catch (err) {
    log.fatal({ err }, 'failed to start');
    process.exit(1);
  }
}

async function serve(config: Config, log: Logger): Promise<void> {
  const services = await createServices(config, {
    logger: log,
    patience: { totalMs: config.startupWaitMs, log },
  });
  const created = await services.workspaces.bootstrapIfEmpty();

  if (created) announceFirstWorkspace(created, config.dataDir, log);

  const app = await buildApp(services);
  // Background jobs: the sweep every STOWAGE_SWEEP_INTERVAL_MS and webhook deliveries (unless
  // turned off on this node with 0), on this node's runner (docs/deploy.md, "Background jobs").
  // They start before the listener opens, so nothing is half up once it listens.
  // With STOWAGE_JOBS=off this node only adds jobs; `stowage worker` processes run them.
  if (config.runJobs) {
    await services.jobs.start();
    log.info({ runner: services.jobs.kind }, 'background jobs started');
  } else log.info({ runner: services.jobs.kind }, 'background jobs left to workers (STOWAGE_JOBS=off)');

  // Graceful shutdown, armed before the listener opens: a SIGTERM that arrives right after
  // "Server listening" must drain, not kill the process by the signal's default action.
  // Readiness turns false at once; after STOWAGE_SHUTDOWN_DELAY_MS the listener closes (no new
  // connections) while requests in flight, uploads included, finish; after
  // STOWAGE_SHUTDOWN_TIMEOUT_MS whatever is left is cut and the process exits.
  let closing = false;
  let metricsServer: Server | undefined;
  const shutdown = (signal: string) => {
    if (closing) return;
    closing = true;
    services.lifecycle.draining = true;
    app.log.info({ signal, delayMs: config.shutdownDelayMs, timeoutMs: config.shutdownTimeoutMs }, 'shutting down');
    let cut = false;
    const deadline = setTimeout(() => {
      cut = true;
      app.log.warn('shutdown deadline reached; closing the connections still open');
      app.server.closeAllConnections();
      setTimeout(() => process.exit(1), 1000).unref();
    }, config.shutdownDelayMs + config.shutdownTimeoutMs);
    deadline.unref();
    setTimeout(() => {
      app
        .close()
        .then(() => closeMetricsServer(metricsServer))
        .then(() => services.close())
        .then(
          () => process.exit(cut ? 1 : 0),
          (err) => {
            app.log.error({ err }, 'shutdown failed');
            process.exit(1);
          },
        );
    }, config.shutdownDelayMs);
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  await app.listen({ host: config.host, port: config.port });
  metricsServer = await startConfiguredMetrics(config, services.metrics.registry, log);

  // Browsers PUT multipart parts straight to the bucket, which only works if its CORS allows
  // them: say so once at start instead of letting the first browser upload fail. Not awaited
  // and time-limited, so a slow or odd storage server never holds up or fails the start.
  const bucketCors = services.storage.bucketCors;
  if (bucketCors) {
    bucketCors.check({ timeoutMs: 5000 }).then(
      (check) => logCorsCheck(app.log, check),
      (err) =>
        app.log.warn(
          { err: { message: err instanceof Error ? err.message : String(err) } },
          'S3 bucket CORS could not be checked',
        ),
    );
  }
}

/**
 * The first workspace's keys exist once, in clear, right here: only their hashes are stored.
 * They go to DATA_DIR/first-workspace.json, readable by the owner only, and only its path is
 * logged, since logs usually end up in a collector that keeps everything. When stdout is a
 * terminal, a person reads it: the keys are shown there too, as plain text, never through the
 * logger.
 */
function announceFirstWorkspace(created: CreatedWorkspace, dataDir: string, log: Logger): void {
  const file = resolve(dataDir, 'first-workspace.json');
  let written = false;
  try {
    mkdirSync(dataDir, { recursive: true });
    const temp = `${file}.${process.pid}-${Date.now()}.tmp`;
    try {
      writeFileSync(temp, `${JSON.stringify({ ...created, created_at: new Date().toISOString() }, null, 2)}\n`, {
        mode: 0o600,
        flag: 'wx',
      });
      chmodSync(temp, 0o600);
      renameSync(temp, file);
    } catch (err) {
      rmSync(temp, { force: true });
      throw err;
    }
    written = true;
  } catch (err) {
    log.error(
      { err: { message: err instanceof Error ? err.message : String(err) }, file },
      `could not write ${file}; make new keys with: npx stowage key create --workspace ${created.workspace_id} --type private`,
    );
  }
  // Said whatever LOG_LEVEL is (as the old stdout notice was): an operator must learn where
  // the keys are even with the level at error.
  const notice = log.child({}, { level: 'info' });
  if (written)
    notice.warn(
      { workspace_id: created.workspace_id, file },
      `Stowage created your first workspace. Its public key, private key and webhook secret are in ${file} ` +
        '(readable by you only). Copy them somewhere safe, then delete that file: only hashes of the keys are stored.',
    );
  else notice.warn({ workspace_id: created.workspace_id }, 'Stowage created your first workspace');
  if (process.stdout.isTTY) {
    const lines = ['', `Stowage created your first workspace.`, `  workspace_id:   ${created.workspace_id}`];
    if (written)
      lines.push(
        `  Its public key, private key and webhook secret are in ${file} (readable by you only).`,
        '  Copy them somewhere safe, then delete that file: only hashes of the keys are stored.',
      );
    lines.push(
      `  public_key:     ${created.public_key}`,
      `  private_key:    ${created.private_key}`,
      `  webhook_secret: ${created.webhook_secret}`,
    );
    process.stdout.write(`${lines.join('\n')}\n\n`);
  }
}

main().catch((err) => {
  // Only reached when the logger itself could not be made.
  process.stderr.write(`stowage: failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
