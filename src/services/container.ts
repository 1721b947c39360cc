// Builds every service from the configuration, once. Tests build their own with a test config.
import type { Config } from '../config.ts';
import { SecretBox } from '../crypto/secret-box.ts';
import { type Db, openDatabase } from '../db/database.ts';
import { migrateToLatest } from '../db/migrations.ts';
import { OutboundGuard, type Resolver } from '../outbound/guard.ts';
import type { StorageDriver } from '../storage/driver.ts';
import { FileHasher } from '../hashing/file-hasher.ts';
import { openStorage } from '../storage/open.ts';
import { BlobStore } from './blobs.ts';
import { FileRecords, FileService } from './files.ts';
import { FolderService } from './folders.ts';
import { DeliveryService } from './delivery.ts';
import { Redis } from 'ioredis';
import { EventEmitter, once } from 'node:events';
import { Metrics } from './metrics.ts';
import { WebhookService } from './webhooks.ts';
import { SourceService } from './sources.ts';
import { UploadService } from './uploads.ts';
import { MultipartService } from './multipart.ts';
import { RemoteUploadService } from './remote.ts';
import { PartUrlSigner } from '../crypto/part-url.ts';
import { DeliverySigner } from '../crypto/delivery-url.ts';
import { WorkspaceService } from './workspaces.ts';
import { UploadTokenService } from './upload-tokens.ts';

export interface Services {
  config: Config;
  db: Db;
  box: SecretBox;
  guard: OutboundGuard;
  storage: StorageDriver;
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
  deliverySigner: DeliverySigner;
  webhooks: WebhookService;
  /** Set when the process is shutting down: readiness answers 503. */
  lifecycle: { draining: boolean };
  /** Domain events (upload.completed, rendition): side effects such as metrics subscribe here. */
  events: EventEmitter;
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
  /** Receives operational notes (webhook retries). */
  log?: (msg: string, data?: Record<string, unknown>) => void;
}

export async function createServices(config: Config, opts: ServiceOptions = {}): Promise<Services> {
  const db = openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  try {
    await migrateToLatest(db.kysely);
  } catch (err) {
    await db.close();
    throw err;
  }
  const box = new SecretBox(config.masterKey, config.previousMasterKeys);
  const guard = new OutboundGuard(config.outboundAllow, opts.resolver);
  // One thread hashes what is written to local disk (see hashing/file-hasher.ts).
  const hasher = new FileHasher();
  const storage = await openStorage(config, { hasher });
  const workspaces = new WorkspaceService(db, box);
  const sources = new SourceService(
    db,
    box,
    { guard, timeoutMs: config.outboundTimeoutMs, gcsApiEndpoint: config.gcsApiEndpoint },
    opts.debug,
  );
  const blobs = new BlobStore(db, storage, config.sweepGraceMs);
  const events = new EventEmitter();
  const metrics = new Metrics(db, events);
  const deliverySigner = new DeliverySigner(config.masterKey);
  const records = new FileRecords(config.publicUrl, deliverySigner, config.privateUrlTtl);
  const webhooks = new WebhookService(
    db,
    workspaces,
    guard,
    {
      retrySchedule: config.webhookRetrySchedule,
      timeoutMs: config.webhookTimeoutMs,
      pollIntervalMs: config.webhookPollMs,
      claimMs: Math.max(60_000, config.webhookTimeoutMs * 3),
    },
    opts.log,
  );
  const uploads = new UploadService(
    db,
    blobs,
    records,
    { maxFileSize: config.maxFileSize, maxImagePixels: config.maxImagePixels },
    webhooks,
    guard,
    events,
  );
  const multipart = new MultipartService(
    db,
    blobs,
    uploads,
    records,
    new PartUrlSigner(config.masterKey),
    {
      publicUrl: config.publicUrl,
      maxTtlSeconds: config.multipartMaxTtl,
    },
    hasher,
  );
  const remote = new RemoteUploadService(uploads, guard, {
    timeoutMs: config.outboundTimeoutMs,
    bodyTimeoutMs: config.remoteTimeoutMs,
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
  // while the connection is still opening: it waits for it, at most the connect timeout. A
  // Redis that is down at start is not waited for; requests get 503 until it is back.
  if (redis)
    await Promise.race([once(redis, 'ready'), new Promise((r) => setTimeout(r, 2000).unref())]).catch(() => {});
  return {
    lifecycle: { draining: false },
    events,
    metrics,
    redis,
    webhooks,
    files: new FileService(db, blobs, records),
    folders: new FolderService(db, blobs),
    delivery: new DeliveryService(db, storage, config.maxImagePixels, sources, events),
    deliverySigner,
    remote,
    tokens: new UploadTokenService(db, uploads, workspaces, config.masterKey, {
      publicUrl: config.publicUrl,
      maxTtlSeconds: config.multipartMaxTtl,
      graceMs: config.sweepGraceMs,
    }),
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
    async close() {
      await webhooks.stop();
      redis?.disconnect();
      guard.destroy();
      await storage.close?.();
      await hasher.close();
      await db.close();
    },
  };
}
