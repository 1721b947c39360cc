// The upload pipeline as the routes and the other intakes (multipart, remote, tokens) use it:
// the limits of the next upload to a workspace, staging a body (staging.ts), and finishing it
// into a file record (commit.ts).
import type { DomainEvents } from '../events.ts';
import type { Readable } from 'node:stream';
import { BlobRepository, type WorkspaceQuota } from '../db/blobs.ts';
import type { Db } from '../db/database.ts';
import { errors } from '../errors.ts';
import type { OutboundGuard } from '../outbound/guard.ts';
import type { FileRecord, FileRecords } from '../services/files.ts';
import type { WebhookService } from '../services/webhooks.ts';
import type { BlobStore } from './blob-store.ts';
import { type CommitDeps, type CommitHooks, commitUpload } from './commit.ts';
import { checkWebhookTarget } from './grants.ts';
import type { MediaProbeDeps } from './media-probe.ts';
import type { UploadOptions, UploadSource } from './options.ts';
import type { StageLimits, Staged } from './staging.ts';
import type { RenderSettings } from '../config.ts';

/** The service's limits, for workspaces that set none of their own. */
export interface UploadLimits {
  maxFileSize: number;
  maxImagePixels: number;
  /** Bounds on a `transform` (as on delivery renders). */
  render?: RenderSettings;
}

export interface UploadDeps {
  db: Db;
  blobs: BlobStore;
  records: FileRecords;
  limits: UploadLimits;
  webhooks?: WebhookService;
  guard?: OutboundGuard;
  events?: DomainEvents;
  /** Probing of video and audio uploads (media-probe.ts). */
  media?: MediaProbeDeps;
}

export class UploadService {
  private readonly repo: BlobRepository;
  private readonly commitDeps: CommitDeps;

  constructor(private readonly deps: UploadDeps) {
    this.repo = new BlobRepository(deps.db.kysely);
    const { db, blobs, records, webhooks, guard, events, media } = deps;
    this.commitDeps = {
      db,
      blobs,
      records,
      webhooks,
      guard,
      events,
      media,
      transform: {
        blobs,
        maxImagePixels: deps.limits.maxImagePixels,
        render: deps.limits.render,
        limits: (id) => this.limits(id),
      },
    };
  }

  /** See grants.ts. */
  checkWebhookTarget(url: string | null): Promise<void> {
    return checkWebhookTarget(this.deps.guard, url);
  }

  /**
   * The limits for the next upload to this workspace; 402 at once when it is already full.
   * `known`: the workspace's figures read moments ago in this request (with its key), not read again.
   */
  async limits(workspaceId: string, known?: WorkspaceQuota): Promise<StageLimits & { quotaBytes: number | null }> {
    const ws = known ?? (await this.repo.workspaceQuota(workspaceId));
    // Bytes promised to uploads in progress count as taken.
    if (ws.quotaBytes !== null && ws.usedBytes + ws.reservedBytes >= ws.quotaBytes) throw errors.storageLimitExceeded();
    return { maxFileSize: ws.maxFileSize ?? this.deps.limits.maxFileSize, quotaBytes: ws.quotaBytes };
  }

  /**
   * `maxFileSize` lowers the workspace's limit for this upload (an upload token's own limit);
   * `expectedBytes` (a Content-Length) lets a quota be reserved whole up front.
   */
  async stage(
    workspaceId: string,
    body: Readable,
    opts: { signal?: AbortSignal; maxFileSize?: number; expectedBytes?: number; known?: WorkspaceQuota } = {},
  ): Promise<Staged> {
    const limits = await this.limits(workspaceId, opts.known);
    if (opts.maxFileSize !== undefined) limits.maxFileSize = Math.min(limits.maxFileSize, opts.maxFileSize);
    return this.deps.blobs.stage(workspaceId, body, { ...limits, expectedBytes: opts.expectedBytes }, opts.signal);
  }

  discard(staged: Staged): Promise<void> {
    return this.deps.blobs.discard(staged);
  }

  /** Turns staged bytes into a file record (commit.ts); on failure nothing is left behind. */
  finish(staged: Staged, opts: UploadOptions, source: UploadSource, hooks: CommitHooks = {}): Promise<FileRecord> {
    return commitUpload(this.commitDeps, staged, opts, source, hooks);
  }
}
