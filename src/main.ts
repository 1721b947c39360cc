// `npm start`: read the configuration, prepare the database, create the first workspace on an
// empty database, listen, and shut down cleanly on SIGTERM/SIGINT.
import { chmodSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { buildApp } from './app.ts';
import { ConfigError, loadConfig } from './config.ts';
import { redactText } from './http/log-redaction.ts';
import { tuneHeapForStreaming } from './heap.ts';
import { createServices } from './services/container.ts';
import type { CreatedWorkspace } from './services/workspaces.ts';
import { logCorsCheck } from './storage/s3-cors.ts';

async function main(): Promise<void> {
  tuneHeapForStreaming();
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`stowage: ${err.message}\n`);
      process.exit(78);
    }
    throw err;
  }
  const services = await createServices(config, {
    log: (msg, data) => process.stderr.write(`${redactText(JSON.stringify({ level: 40, msg, ...data }))}\n`),
  });
  const created = await services.workspaces.bootstrapIfEmpty();

  if (created) announceFirstWorkspace(created, config.dataDir);

  const app = await buildApp(services);
  await app.listen({ host: config.host, port: config.port });

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

  // The sweeper: frees the bytes of expired or aborted multipart sessions and of uploads a
  // crash interrupted, and forgets upload tokens a day past expiry. Safe on several nodes at
  // once (every step is conditional).
  let sweeping = false;
  const sweeper =
    config.sweepIntervalMs > 0
      ? setInterval(() => {
          // One sweep at a time on this node: a slow one (a large file to finish) is not joined by the next.
          if (sweeping) return;
          sweeping = true;
          Promise.all([services.multipart.sweep(), services.tokens.sweep()])
            .then(
              ([r, tokens]) =>
                r.expired || r.intents || r.finished || tokens ? app.log.info({ ...r, tokens }, 'sweep') : undefined,
              (err) => app.log.warn({ err }, 'sweep failed'),
            )
            .finally(() => {
              sweeping = false;
            });
        }, config.sweepIntervalMs).unref()
      : undefined;

  if (config.webhookPollMs > 0) services.webhooks.start();

  // Graceful shutdown: readiness turns false at once; after STOWAGE_SHUTDOWN_DELAY_MS the
  // listener closes (no new connections) while requests in flight, uploads included, finish;
  // after STOWAGE_SHUTDOWN_TIMEOUT_MS whatever is left is cut and the process exits.
  let closing = false;
  const shutdown = (signal: string) => {
    if (closing) return;
    closing = true;
    services.lifecycle.draining = true;
    app.log.info({ signal, delayMs: config.shutdownDelayMs, timeoutMs: config.shutdownTimeoutMs }, 'shutting down');
    if (sweeper) clearInterval(sweeper);
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
}

/**
 * The first workspace's keys exist once, in clear, right here: only their hashes are stored.
 * They go to DATA_DIR/first-workspace.json, readable by the owner only, and only its path is
 * printed, since stdout usually ends up in a log collector that keeps everything. The keys
 * themselves are printed too when stdout is a terminal, where a person reads them.
 */
function announceFirstWorkspace(created: CreatedWorkspace, dataDir: string): void {
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
    process.stderr.write(
      `stowage: could not write ${file} (${err instanceof Error ? err.message : String(err)}); ` +
        `make new keys with: npx stowage key create --workspace ${created.workspace_id} --type private\n`,
    );
  }
  const lines = ['', `Stowage created your first workspace.`, `  workspace_id:   ${created.workspace_id}`];
  if (written)
    lines.push(
      `  Its public key, private key and webhook secret are in ${file} (readable by you only).`,
      '  Copy them somewhere safe, then delete that file: only hashes of the keys are stored.',
    );
  if (process.stdout.isTTY) {
    lines.push(
      `  public_key:     ${created.public_key}`,
      `  private_key:    ${created.private_key}`,
      `  webhook_secret: ${created.webhook_secret}`,
    );
  }
  process.stdout.write(`${lines.join('\n')}\n\n`);
}

main().catch((err) => {
  process.stderr.write(`stowage: failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
