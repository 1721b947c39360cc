// buildApp: the Fastify application over a set of services. No listening, no process state,
// so tests build as many as they like and drive them with inject() or listen(0).
import http from 'node:http';
import { join } from 'node:path';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import Fastify, { type FastifyInstance, type FastifyServerOptions, LogController } from 'fastify';
import { installAuth } from './http/auth.ts';
import { installCors } from './http/cors.ts';
import { clientErrorHandler, frameworkErrors, installErrorHandling } from './http/errors.ts';
import { DiskSpace, installBodyIdleTimeout, installUploadSlots, UploadSlots } from './http/upload-slots.ts';
import { installValidation } from './http/validation.ts';
import { installCachePolicy } from './http/cache-policy.ts';
import { installRetryHints } from './http/retry-hints.ts';
import { withLogRedaction } from './http/log-redaction.ts';
import { metricsAllowed } from './http/metrics-endpoint.ts';
import { logRequest } from './http/request-log.ts';
import { logStream } from './log-output.ts';
import { installRateLimits } from './http/rate-limit.ts';
import { healthRoutes } from './http/routes/health.ts';
import { keyRoutes } from './http/routes/keys.ts';
import { presetRoutes } from './http/routes/presets.ts';
import { sourceRoutes } from './http/routes/sources.ts';
import { remoteUploadRoute, uploadRoutes } from './http/routes/uploads.ts';
import { multipartRoutes } from './http/routes/multipart.ts';
import { fileRoutes } from './http/routes/files.ts';
import { deliveryFastPath, deliveryRoutes } from './http/routes/delivery.ts';
import { dashboardRoutes } from './http/routes/dashboard.ts';
import { tokenRoutes } from './http/routes/tokens.ts';
import { tusRoutes } from './http/routes/tus.ts';
import { workspaceRoutes } from './http/routes/workspace.ts';
import type { Services } from './services/container.ts';
import { SHARED_SCHEMAS, swaggerOptions } from './contract/openapi.ts';

/** Header and body paths that must never reach a log line. */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers["x-api-key"]',
  'req.headers.cookie',
  'headers.authorization',
  'headers["x-api-key"]',
  // Nested copies of the request headers (multipart parsing logs them at trace level).
  '*.headers.authorization',
  '*.headers["x-api-key"]',
  '*.headers.cookie',
  '*.configuration.access_key',
  '*.configuration.secret_key',
  '*.configuration.connection_string',
  '*.configuration.service_account_json',
];

export interface AppOptions {
  logger?: FastifyServerOptions['logger'];
}

export async function buildApp(services: Services, opts: AppOptions = {}): Promise<FastifyInstance> {
  const { config } = services;
  // Held public files are answered before Fastify (routes/delivery.ts, deliveryFastPath), in the
  // request counters as the route's answers are.
  // Signed transformations are checked on both ways a delivery is answered.
  const transformGate = {
    policy: (id: string) => services.workspaces.transformPolicy(id),
    signer: services.deliverySigner,
  };
  // STOWAGE_ACCEL_REDIRECT: nginx sends files that are on this machine's disk (docs/deploy.md).
  const accel =
    config.accelRedirect && services.storage.localPath
      ? { prefix: config.accelRedirect, root: config.dataDir }
      : undefined;
  const fastPath = deliveryFastPath(
    services.deliveryCache,
    {
      count(method, status, seconds) {
        const labels = { method, route: '/:workspace/*', status: String(status) };
        services.metrics.requests.inc(labels);
        services.metrics.duration.observe(labels, seconds);
      },
    },
    transformGate,
    accel,
  );
  const httpOptions: http.ServerOptions = {
    requestTimeout: 0,
    headersTimeout: config.headersTimeoutMs,
    connectionsCheckingInterval: Math.max(50, Math.min(5000, Math.floor(config.headersTimeoutMs / 4))),
  };
  const app = Fastify({
    // Fastify's own server, with the fast path in front; the timeouts Fastify sets on the
    // server it makes are set here (it leaves a factory's server as it is).
    serverFactory: (handler) => {
      const server = http.createServer(httpOptions, (req, res) => {
        if (!fastPath(req, res, () => handler(req, res))) handler(req, res);
      });
      server.keepAliveTimeout = config.keepAliveTimeoutMs;
      server.requestTimeout = 0;
      server.setTimeout(0);
      return server;
    },
    // Signatures and upload tokens in URLs are redacted whatever logger options are given.
    logger: withLogRedaction(
      opts.logger ?? {
        level: config.logLevel,
        redact: { paths: REDACT_PATHS, censor: '[redacted]' },
        stream: logStream(config.logFormat),
      },
    ),
    // One line per request, written when it ends (logRequest below), instead of Fastify's two.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: config.jsonBodyLimit,
    trustProxy: false,
    routerOptions: { ignoreTrailingSlash: true },
    // Request ids for log correlation; honour an incoming one from a proxy.
    requestIdHeader: 'x-request-id',
    // Fastify types this option generically; the handler needs only the reply.
    frameworkErrors: (err, request, reply) => frameworkErrors(err, request, reply),
    clientErrorHandler,
    // Timeouts for large uploads: no limit on a request's total time (Node's own requestTimeout,
    // 300 s, would cut long uploads; Fastify sets 0 too); headers must arrive within
    // STOWAGE_HEADERS_TIMEOUT_MS (checked every quarter of it, at most every 5 s); a body that
    // stalls is cut by the idle timer (installBodyIdleTimeout); idle keep-alive connections close
    // after STOWAGE_KEEP_ALIVE_TIMEOUT_MS, longer than a proxy's usual 60 s so that the proxy closes first.
    requestTimeout: 0,
    connectionTimeout: 0,
    keepAliveTimeout: config.keepAliveTimeoutMs,
    http: httpOptions,
  });

  // Only JSON bodies are parsed here; anything else is 415 (uploads add their own parsers).
  app.removeContentTypeParser('text/plain');

  // The contract's named schemas: routes refer to them, and /openapi.json lists them as components.
  for (const schema of SHARED_SCHEMAS) app.addSchema(schema);

  await app.register(swagger, {
    ...swaggerOptions(config.publicUrl),
    refResolver: { buildLocalReference: (json, _base, _fragment, i) => String(json.$id ?? `def-${i}`) },
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });

  // Every answer names its request, so a client can quote it in a bug report (logs carry it too).
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });

  installValidation(app);
  installRetryHints(app);
  installCachePolicy(app);
  installErrorHandling(app);
  // Before auth, so that preflights are answered and refusals carry CORS headers.
  await installCors(app, { tokens: services.tokens, publicUrl: config.publicUrl });
  installAuth(app, services.workspaces, config.publicUrl);
  await installRateLimits(app, { upload: config.rateLimitUpload, api: config.rateLimitApi, redis: services.redis });
  // After auth: upload slots are counted per workspace.
  // Stores on a disk of this machine have a free-space floor (STOWAGE_MIN_FREE_BYTES).
  const disk = services.storage.freeSpace
    ? new DiskSpace(join(config.dataDir, 'storage'), config.minFreeBytes)
    : undefined;
  installUploadSlots(app, { slots: new UploadSlots(config.maxConcurrentUploads), db: services.db, disk });
  installBodyIdleTimeout(app, config.bodyIdleTimeoutMs);

  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  // Requests by route pattern (never the raw path, which would make every file a new series).
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unmatched';
    const labels = { method: request.method, route, status: String(reply.statusCode) };
    services.metrics.requests.inc(labels);
    services.metrics.duration.observe(labels, reply.elapsedTime / 1000);
    logRequest(request, reply);
  });
  // Here unless STOWAGE_METRICS_PORT gives it a listener of its own (main.ts).
  if (config.metricsPort === undefined)
    app.get('/metrics', { schema: { hide: true } }, async (request, reply) => {
      if (!metricsAllowed(request.headers.authorization, config.metricsToken))
        return reply.code(401).header('www-authenticate', 'Bearer').type('text/plain').send('Unauthorized\n');
      return reply.type(services.metrics.registry.contentType).send(await services.metrics.registry.metrics());
    });
  await app.register(healthRoutes, { db: services.db, storage: services.storage, lifecycle: services.lifecycle, disk });
  await app.register(sourceRoutes, { sources: services.sources });
  await app.register(uploadRoutes, { uploads: services.uploads });
  await app.register(tokenRoutes, {
    tokens: services.tokens,
    workspaces: services.workspaces,
    publicUrl: config.publicUrl,
  });
  await app.register(workspaceRoutes, { workspaces: services.workspaces });
  await app.register(presetRoutes, { presets: services.presets });
  await app.register(keyRoutes, { workspaces: services.workspaces, webhooks: services.webhooks });
  await app.register(async (scope) => remoteUploadRoute(scope, services.remote));
  await app.register(multipartRoutes, { multipart: services.multipart, workspaces: services.workspaces });
  await app.register(tusRoutes, {
    config,
    multipart: services.multipart,
    uploads: services.uploads,
    tokens: services.tokens,
    workspaces: services.workspaces,
    blobs: services.blobs,
    storage: services.storage,
  });
  await app.register(fileRoutes, { files: services.files, folders: services.folders });
  // Where the dashboard's browser PUTs parts when storage presigns them.
  await app.register(dashboardRoutes, {
    publicUrl: config.publicUrl,
    storageOrigin: services.storage.partUploadOrigin,
  });
  await app.register(deliveryRoutes, {
    delivery: services.delivery,
    signer: services.deliverySigner,
    cache: services.deliveryCache,
    transformGate,
    accel,
  });

  return app;
}
