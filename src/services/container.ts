// Builds every service from the configuration, once. Tests build their own with a test config.
import type { Config } from '../config.ts';
import { SecretBox } from '../crypto/secret-box.ts';
import { type Db, openDatabase } from '../db/database.ts';
import { migrateToLatest } from '../db/migrations.ts';
import { OutboundGuard, type Resolver } from '../outbound/guard.ts';
import type { StorageDriver } from '../storage/driver.ts';
import { FileHasher } from '../uploads/hashing/file-hasher.ts';
import { openStorage } from '../storage/open.ts';
import { BlobStore } from '../uploads/blob-store.ts';
import { FileRecords, FileService } from './files.ts';
import { FolderService } from './folders.ts';
import { DeliveryService } from './delivery.ts';
import { DeliveryCache } from './delivery-cache.ts';
import { PresetService } from './presets.ts';
import { Redis } from 'ioredis';
import { once } from 'node:events';
import { join } from 'node:path';
import sharp from 'sharp';
import { RenderQueue } from '../media/render-queue.ts';
import pino from 'pino';
import { DomainEvents } from '../events.ts';
import { type JobQueue, openJobQueue } from '../jobs/index.ts';
import { scheduleSweep } from '../jobs/sweep.ts';
import { scheduleRenditionBackfill, scheduleRenditionEviction } from '../jobs/renditions.ts';
import { RenditionCache } from './rendition-cache.ts';
import { RenditionBackfill } from './rendition-backfill.ts';
import type { JobLogger } from '../jobs/types.ts';
import { describePostgres, describeRedis, type Patience, waitFor } from '../startup/patience.ts';
import { waitForRedis, waitForStorage } from '../startup/dependencies.ts';
import { Metrics } from './metrics.ts';
import { WebhookService } from './webhooks.ts';
import { SourceService } from './sources.ts';
import { UploadService } from '../uploads/upload-service.ts';
import { MultipartService } from '../uploads/multipart/service.ts';
import { RemoteUploadService } from '../uploads/remote.ts';
import { PartUrlSigner } from '../crypto/part-url.ts';
import { DeliverySigner } from '../crypto/delivery-url.ts';
import { WorkspaceService } from './workspaces.ts';
import { UploadTokenService } from '../uploads/tokens.ts';
import { locateVideoEngine, type VideoEngine } from '../media/video/engine.ts';
import { VideoRenditions } from './video-renditions.ts';
import { ProbeSlots } from '../uploads/media-probe.ts';

export interface Services {
  config: Config;
  db: Db;
  box: SecretBox;
  guard: OutboundGuard;
  storage: StorageDriver;
  /** ffmpeg and ffprobe, or what is missing of them (media/video/engine.ts). */
  video: VideoEngine;
  /** Video renditions: the `video.transcode` job and what delivery answers while it runs. */
  videoRenditions: VideoRenditions;
  workspaces: WorkspaceService;
  sources: SourceService;
  blobs: BlobStore;
  uploads: UploadService;
  multipart: MultipartService;
  remote: RemoteUploadService;
  tokens: UploadTokenService;
  files: FileService;
  folders: FolderService;
  delivery: DeliveryService;
  /** Transformation presets (`t_{name}`): the API's CRUD and delivery's expansion. */
  presets: PresetService;
  /** Delivery lookups and small files' bytes kept in memory (delivery-cache.ts). */
  deliveryCache: DeliveryCache;
  deliverySigner: DeliverySigner;
  /** The rendition cache's budget and its ledger (rendition-cache.ts). */
  renditions: RenditionCache;
  webhooks: WebhookService;
  /** Background jobs (webhook deliveries, the sweep): main.ts starts them; close() drains them. */
  jobs: JobQueue;
  /** Set when the process is shutting down: readiness answers 503. */
  lifecycle: { draining: boolean };
  /** Domain events (upload.completed, rendition): side effects such as metrics subscribe here. */
  events: DomainEvents;
  metrics: Metrics;
  /** Shared by the nodes for rate limits, when REDIS_URL is set. */
  redis?: Redis;
  close(): Promise<void>;
}

export interface ServiceOptions {
  /** Replaces DNS for outbound checks (tests). */
  resolver?: Resolver;
  /** Receives debug notes such as which configuration field was refused. */
  debug?: (why: string) => void;
  /** Receives operational notes (webhook retries, sweeps, job failures); none when not given. */
  logger?: JobLogger;
  /** Wait for an unreachable database, Redis or storage instead of failing at once (startup/patience.ts). */
  patience?: Patience;
}

/** Jobs one node runs at once (webhook attempts are mostly waiting on a receiver). */
const JOB_CONCURRENCY = 8;

/**
 * sharp's settings are the process's (libvips is one library per process). No operation cache:
 * a delivery node decodes each source once per rendition and keeps the result in storage, so
 * the cache would hold decoded images nobody asks for again (up to 50 MB by default) and keep
 * files open after they are deleted. One libvips thread per render by default: the render queue
 * already runs as many renders as there are cores, and more threads than cores only contend.
 */
function configureSharp(config: Config): void {
  sharp.cache(false);
  sharp.concurrency(config.render.threads);
}

export async function createServices(config: Config, opts: ServiceOptions = {}): Promise<Services> {
  const db = openDatabase({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    sqliteReaders: config.sqliteReaders,
    pgPreparedStatements: config.pgPreparedStatements,
  });
  try {
    const what = config.databaseUrl ? describePostgres(config.databaseUrl) : 'the SQLite database';
    await waitFor(what, () => migrateToLatest(db.kysely), opts.patience);
  } catch (err) {
    await db.close();
    throw err;
  }
  const events = new DomainEvents();
  configureSharp(config);
  const renderQueue = new RenderQueue({ concurrency: config.render.concurrency, maxWaiting: config.render.queue });
  const metrics = new Metrics(db, events, renderQueue, config.metricsLoopResolutionMs);
  const logger = opts.logger ?? pino({ level: 'silent' });
  let jobs: JobQueue;
  try {
    jobs = await openJobQueue(db, {
      databaseUrl: config.databaseUrl,
      // New jobs are seen at once (NOTIFY); jobs that become due (retries, schedules) within this.
      pollMs: Math.min(config.webhookPollMs || 1000, config.sweepIntervalMs || 1000),
      concurrency: JOB_CONCURRENCY,
      log: logger,
      registry: metrics.registry,
    });
  } catch (err) {
    await db.close();
    throw err;
  }
  const box = new SecretBox(config.masterKey, config.previousMasterKeys);
  const guard = new OutboundGuard(config.outboundAllow, opts.resolver);
  // One thread hashes what is written to local disk (see uploads/hashing/file-hasher.ts).
  const hasher = new FileHasher();
  const storage = await openStorage(config, { hasher });
  if (opts.patience) await waitForStorage(storage, opts.patience);
  const workspaces = new WorkspaceService(db, box);
  const sources = new SourceService({
    db,
    box,
    probeDeps: { guard, timeoutMs: config.outboundTimeoutMs, gcsApiEndpoint: config.gcsApiEndpoint },
    debug: opts.debug,
  });
  const presets = new PresetService(db, { events });
  const blobs = new BlobStore(db, storage, config.sweepGraceMs);
  const renditions = new RenditionCache(db, storage, config.renditionCacheBytes, events);
  scheduleRenditionEviction(jobs, renditions, logger);
  const renditionBackfill = new RenditionBackfill(db, storage);
  scheduleRenditionBackfill(jobs, renditionBackfill, logger);
  const deliverySigner = new DeliverySigner(config.masterKey);
  const records = new FileRecords({
    publicUrl: config.publicUrl,
    signer: deliverySigner,
    privateUrlTtl: config.privateUrlTtl,
    transformPolicy: (id) => workspaces.transformPolicy(id),
  });
  const webhooks = new WebhookService(
    db,
    workspaces,
    guard,
    jobs,
    {
      retrySchedule: config.webhookRetrySchedule,
      timeoutMs: config.webhookTimeoutMs,
      deliver: config.webhookPollMs > 0,
      claimMs: Math.max(60_000, config.webhookTimeoutMs * 3),
    },
    logger,
  );
  const video = locateVideoEngine(config.video, { log: logger });
  // Defined on every node: any node may run a transcode job (and a worker process only those).
  const videoRenditions = new VideoRenditions({
    storage,
    jobs,
    engine: video,
    settings: config.transcode,
    tmpDir: join(config.dataDir, 'tmp', 'transcodes'),
    renditions,
    log: logger,
  });
  videoRenditions.define();
  const uploads = new UploadService({
    db,
    blobs,
    records,
    limits: { maxFileSize: config.maxFileSize, maxImagePixels: config.maxImagePixels, render: config.render },
    webhooks,
    guard,
    events,
    media: {
      engine: video,
      storage,
      slots: new ProbeSlots(config.video.probeConcurrency),
      debug: (obj, msg) => logger.debug(obj, msg),
    },
  });
  const multipart = new MultipartService({
    db,
    blobs,
    uploads,
    records,
    signer: new PartUrlSigner(config.masterKey),
    settings: { publicUrl: config.publicUrl, maxTtlSeconds: config.multipartMaxTtl },
    hasher,
  });
  const tokens = new UploadTokenService({
    db,
    uploads,
    workspaces,
    masterKey: config.masterKey,
    settings: { publicUrl: config.publicUrl, maxTtlSeconds: config.multipartMaxTtl, graceMs: config.sweepGraceMs },
  });
  scheduleSweep(jobs, { multipart, tokens }, config.sweepIntervalMs, logger);
  const remote = new RemoteUploadService({
    uploads,
    guard,
    timeouts: { timeoutMs: config.outboundTimeoutMs, bodyTimeoutMs: config.remoteTimeoutMs },
  });
  const redis = config.redisUrl
    ? new Redis(config.redisUrl, {
        lazyConnect: false,
        connectTimeout: 2000,
        maxRetriesPerRequest: 1,
        enableOfflineQueue: false,
      })
    : undefined;
  // Connection trouble is answered per request (503); it must not crash the process.
  redis?.on('error', () => {});
  // Commands are not queued while disconnected, so a node would answer its first requests 503
  // while the connection is still opening: it waits for it. With patience (npm start) until
  // STOWAGE_STARTUP_WAIT_MS; otherwise at most the connect timeout, and requests get 503 until
  // it is back.
  if (redis && config.redisUrl && opts.patience) {
    try {
      await waitForRedis(redis, describeRedis(config.redisUrl), opts.patience);
    } catch (err) {
      redis.disconnect();
      await jobs.close();
      await storage.close?.();
      await hasher.close();
      await db.close();
      throw err;
    }
  } else if (redis)
    await Promise.race([once(redis, 'ready'), new Promise((r) => setTimeout(r, 2000).unref())]).catch(() => {});
  return {
    video,
    videoRenditions,
    lifecycle: { draining: false },
    events,
    metrics,
    redis,
    webhooks,
    jobs,
    files: new FileService({ db, blobs, records, events, presets }),
    folders: new FolderService(db, blobs, events),
    delivery: new DeliveryService({
      db,
      storage,
      maxImagePixels: config.maxImagePixels,
      sources,
      events,
      presets,
      render: config.render,
      queue: renderQueue,
      renditions,
      video,
      videos: videoRenditions,
      tmpDir: join(config.dataDir, 'tmp', 'renders'),
    }),
    deliveryCache: new DeliveryCache({
      hotBytes: config.deliveryHotCacheBytes,
      lookupTtlMs: config.deliveryLookupTtlMs,
      events,
      onRenditionUse: (key) => renditions.used(key),
    }),
    deliverySigner,
    renditions,
    remote,
    tokens,
    multipart,
    config,
    blobs,
    uploads,
    db,
    box,
    guard,
    storage,
    workspaces,
    sources,
    presets,
    async close() {
      renditionBackfill.stop();
      await jobs.close();
      await renditions.flush().catch(() => {});
      redis?.disconnect();
      guard.destroy();
      await storage.close?.();
      await hasher.close();
      await db.close();
    },
  };
}
