// Builds a complete app over a fresh database (SQLite file or a new PostgreSQL database) with
// a test configuration, a first workspace, and every log line captured.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import { buildApp, REDACT_PATHS } from '../../src/app.ts';
import { type Config, renderDefaults } from '../../src/config.ts';
import { videoDefaults } from '../../src/media/video/engine.ts';
import { transcodeDefaults } from '../../src/media/video/transcode.ts';
import { createServices, type ServiceOptions, type Services } from '../../src/services/container.ts';
import type { CreatedWorkspace } from '../../src/services/workspaces.ts';
import { externalService } from './services.ts';

export type DialectName = 'sqlite' | 'postgres';

const pgGate = externalService('STOWAGE_TEST_DATABASE_URL', 'PostgreSQL');

/** The dialects a data-layer suite runs on: SQLite always, PostgreSQL when configured. */
export const DIALECTS: { name: DialectName; skip: string | false }[] = [
  { name: 'sqlite', skip: false },
  { name: 'postgres', skip: pgGate.skip },
];

/** Creates an empty PostgreSQL database (for one suite, or a bench run); returns its URL and a drop function. */
export async function freshPostgres(
  admin = pgGate.value!,
  prefix = 'stowage_test',
): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  const client = new pg.Client({ connectionString: admin });
  try {
    await client.connect();
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end().catch(() => {});
  }
  const url = new URL(admin);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const c = new pg.Client({ connectionString: admin });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

export function testConfig(dataDir: string, overrides: Partial<Config> = {}): Config {
  return {
    host: '127.0.0.1',
    port: 0,
    publicUrl: 'http://127.0.0.1:3000',
    dataDir,
    databaseUrl: undefined,
    pgPreparedStatements: true,
    masterKey: randomBytes(32),
    previousMasterKeys: [],
    logLevel: 'debug',
    logFormat: 'json',
    jsonBodyLimit: 1024 * 1024,
    outboundAllow: [],
    outboundTimeoutMs: 5000,
    storage: { driver: 'local', fsync: true },
    maxFileSize: 5 * 1024 ** 4,
    maxImagePixels: 100_000_000,
    deliveryHotCacheBytes: 64 * 1024 * 1024,
    deliveryLookupTtlMs: 1000,
    renditionCacheBytes: 10 * 1024 ** 3,
    multipartMaxTtl: 7 * 24 * 3600,
    sweepIntervalMs: 0,
    sweepGraceMs: 15 * 60 * 1000,
    remoteTimeoutMs: 5000,
    privateUrlTtl: 3600,
    webhookRetrySchedule: [1, 1, 1],
    webhookTimeoutMs: 2000,
    webhookPollMs: 0,
    rateLimitUpload: null,
    rateLimitApi: null,
    startupWaitMs: 0,
    metricsLoopResolutionMs: 10,
    shutdownDelayMs: 0,
    shutdownTimeoutMs: 30_000,
    runJobs: true,
    // No free-space floor: a test machine's disk is whatever it is (test/disk-full.test.ts sets one).
    minFreeBytes: 0,
    bodyIdleTimeoutMs: 60_000,
    headersTimeoutMs: 30_000,
    keepAliveTimeoutMs: 72_000,
    maxConcurrentUploads: 32,
    render: renderDefaults(),
    video: { ...videoDefaults(), searchPath: process.env.PATH },
    // The encoders' quickest settings: the test machine's cores are shared.
    transcode: { ...transcodeDefaults(), speed: 'fastest' },
    // Reader threads as in production, so every suite on SQLite reads through them.
    sqliteReaders: 2,
    ...overrides,
  };
}

export interface Harness {
  app: FastifyInstance;
  services: Services;
  config: Config;
  /** Every log line the app wrote, raw. */
  logs: string[];
  ws: CreatedWorkspace;
  /** Headers with the first workspace's private key. */
  auth: Record<string, string>;
  close(): Promise<void>;
}

export async function makeHarness(
  dialect: DialectName,
  opts: { config?: Partial<Config>; services?: ServiceOptions } = {},
): Promise<Harness> {
  const dataDir = mkdtempSync(join(tmpdir(), 'stowage-test-'));
  const pgDb = dialect === 'postgres' ? await freshPostgres() : undefined;
  const config = testConfig(dataDir, { databaseUrl: pgDb?.url, ...opts.config });
  const logs: string[] = [];
  const services = await createServices(config, { ...opts.services, debug: (why) => logs.push(`debug: ${why}`) });
  const app = await buildApp(services, {
    logger: {
      level: 'trace',
      stream: { write: (line: string) => logs.push(line) },
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    },
  });
  await app.ready();
  const ws = await services.workspaces.create('Test workspace');
  return {
    app,
    services,
    config,
    logs,
    ws,
    auth: { authorization: `Bearer ${ws.private_key}` },
    async close() {
      await app.close();
      await services.close();
      await pgDb?.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Stores `body` as `name` through the upload service, as a direct upload would (the harness's workspace unless told). */
export async function addFile(
  h: Harness,
  name: string,
  body: Buffer,
  opts: { folder?: string[]; tags?: string[]; workspaceId?: string } = {},
) {
  const staged = await h.services.uploads.stage(opts.workspaceId ?? h.ws.workspace_id, Readable.from([body]));
  return h.services.uploads.finish(
    staged,
    {
      name,
      folder: opts.folder ?? [],
      tags: opts.tags ?? [],
      metadata: {},
      custom_id: null,
      randomPrefix: false,
      transform: null,
      webhookUrl: null,
    },
    'direct',
  );
}
