// /metrics, kept off the public internet. By default it is on the service's own port (as before);
// STOWAGE_METRICS_PORT moves it to a listener of its own (the port a Prometheus scrapes inside the
// network, never routed by the public proxy), and STOWAGE_METRICS_TOKEN requires
// `Authorization: Bearer <token>` wherever it is served.
import { timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { Config } from '../config.ts';

/** Whether a request with this Authorization header may read the metrics. */
export function metricsAllowed(authorization: string | undefined, token: string | undefined): boolean {
  if (!token) return true;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
  if (!m) return false;
  const given = Buffer.from(m[1]);
  const wanted = Buffer.from(token);
  return given.length === wanted.length && timingSafeEqual(given, wanted);
}

/** A listener that serves GET /metrics and nothing else. */
export async function startMetricsServer(
  registry: Registry,
  opts: { host: string; port: number; token?: string },
): Promise<{ server: http.Server; url: string }> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('Not found\n');
      return;
    }
    if (!metricsAllowed(req.headers.authorization, opts.token)) {
      res.writeHead(401, { 'content-type': 'text/plain', 'www-authenticate': 'Bearer' }).end('Unauthorized\n');
      return;
    }
    registry.metrics().then(
      (text) => {
        res.writeHead(200, { 'content-type': registry.contentType });
        res.end(req.method === 'HEAD' ? undefined : text);
      },
      () => res.writeHead(500).end(),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => resolve());
  });
  const { address, port } = server.address() as AddressInfo;
  return { server, url: `http://${address.includes(':') ? `[${address}]` : address}:${port}` };
}

/**
 * STOWAGE_METRICS_PORT's listener, on an API node and a worker alike, its address logged;
 * undefined when the setting is absent (/metrics is then on the API's own port, or on none).
 */
export async function startConfiguredMetrics(
  config: Pick<Config, 'host' | 'metricsPort' | 'metricsToken'>,
  registry: Registry,
  log: Pick<Logger, 'info'>,
): Promise<http.Server | undefined> {
  if (config.metricsPort === undefined) return undefined;
  const metrics = await startMetricsServer(registry, {
    host: config.host,
    port: config.metricsPort,
    token: config.metricsToken,
  });
  log.info({ url: `${metrics.url}/metrics` }, `metrics at ${metrics.url}/metrics`);
  return metrics.server;
}

/** Closes that listener, when there is one (at shutdown); resolves once it is closed. */
export function closeMetricsServer(server: http.Server | undefined): Promise<void> {
  return new Promise((resolve) => (server ? server.close(() => resolve()) : resolve()));
}
