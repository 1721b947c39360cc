// Every way a file gets in ends here: staged bytes plus the caller's fields become a file
// record in one transaction (folders, blob, record, quota), with compensation on failure.
import { PassThrough, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Db } from '../db/database.ts';
import type { Kysely } from 'kysely';
import type { Database, FileRow, FolderRow } from '../db/schema.ts';
import { AppError, errors } from '../errors.ts';
import { detect, extensionOf } from '../media/detect.ts';
import { buildPipeline, parseTransform, type TransformSpec } from '../media/transform.ts';
import type { BlobStore, StageLimits, Staged } from './blob-store.ts';
import type { FileRecord, FileRecords } from '../services/files.ts';
import { ensureFolderPath } from '../services/folders.ts';
import { OutboundBlockedError, type OutboundGuard } from '../outbound/guard.ts';
import type { WebhookService } from '../services/webhooks.ts';
import { originAllowed } from '../services/origins.ts';
import type { Principal } from '../services/workspaces.ts';
import type { EventEmitter } from 'node:events';
import {
  checkName,
  parseBooleanFlag,
  parseCustomId,
  parseFolderPath,
  parseMetadata,
  parseTags,
  withExtension,
  withRandomPrefix,
  withRandomSuffix,
} from './names.ts';

/** Upload options as they arrive: form fields (strings) or JSON values. */
export interface UploadFields {
  file_name?: unknown;
  folder?: unknown;
  tags?: unknown;
  transform?: unknown;
  metadata?: unknown;
  custom_id?: unknown;
  random_prefix?: unknown;
  webhook_url?: unknown;
}

export interface UploadOptions {
  /**
   * Whether a file of the same name in the folder may be replaced: private keys only. A public
   * key or an upload token (which sit in web pages) adds a file under a new unique name instead,
   * and is never shown whether the bytes were already stored (no record of another upload, no
   * signed URL of a private file, no `is_duplicate` oracle).
   */
  mayReplace?: boolean;
  name: string;
  folder: string[];
  tags: string[];
  metadata: Record<string, unknown>;
  custom_id: string | null;
  randomPrefix: boolean;
  transform: TransformSpec | null;
  webhookUrl: string | null;
}

export type UploadSource = 'direct' | 'multipart' | 'remote' | 'token' | 'dashboard';

const str = (v: unknown, field: string): string | undefined => {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw errors.validation(`${field} must be a string`);
  return v;
};

/** Checks every field that is present; `file_name` must be (or come from `defaultName`). */
export function parseUploadFields(fields: UploadFields, defaultName?: string): UploadOptions {
  const rawName = str(fields.file_name, 'file_name') || defaultName;
  if (!rawName) throw errors.fileNameRequired();
  const transformText = str(fields.transform, 'transform');
  const webhook = str(fields.webhook_url, 'webhook_url');
  if (webhook) {
    let u: URL | undefined;
    try {
      u = new URL(webhook);
    } catch {
      u = undefined;
    }
    if (!u || (u.protocol !== 'http:' && u.protocol !== 'https:') || webhook.length > 2048)
      throw errors.validation('webhook_url must be an http(s) URL');
  }
  return {
    name: checkName(rawName, 'file_name'),
    folder: parseFolderPath(str(fields.folder, 'folder')),
    tags: parseTags(fields.tags),
    metadata: parseMetadata(fields.metadata),
    custom_id: parseCustomId(fields.custom_id),
    randomPrefix: parseBooleanFlag(fields.random_prefix, 'random_prefix'),
    transform: transformText ? parseTransform(transformText) : null,
    webhookUrl: webhook || null,
  };
}

/**
 * What the caller's key lets an upload do. A public key may add files, never replace them, and
 * may name a webhook_url only at an origin the workspace listed in `webhook_origins`, so a key
 * copied from a web page cannot make the service send signed requests to strangers.
 */
export function applyGrant<T extends UploadOptions | { webhookUrl: string | null; mayReplace?: boolean }>(
  opts: T,
  principal: Principal,
): T {
  const trusted = principal.keyType === 'private';
  if (!trusted && opts.webhookUrl && !originAllowed(principal.webhookOrigins, opts.webhookUrl))
    throw errors.webhookNotAllowed();
  opts.mayReplace = trusted;
  return opts;
}

export interface UploadSettings {
  maxFileSize: number;
  maxImagePixels: number;
}

export class UploadService {
  constructor(
    private readonly db: Db,
    private readonly blobs: BlobStore,
    private readonly records: FileRecords,
    private readonly settings: UploadSettings,
    private readonly webhooks?: WebhookService,
    private readonly guard?: OutboundGuard,
    private readonly events?: EventEmitter,
  ) {}

  /**
   * A webhook target is checked like a remote URL, when the upload is accepted (and again on
   * every delivery). A name that does not resolve yet is let through: delivery retries.
   */
  async checkWebhookTarget(url: string | null): Promise<void> {
    if (!url || !this.guard) return;
    try {
      await this.guard.checkUrl(url);
    } catch (err) {
      if (err instanceof OutboundBlockedError) throw errors.urlRefused(err.message).withField('webhook_url');
    }
  }

  /** The limits for the next upload to this workspace; 402 at once when it is already full. */
  async limits(workspaceId: string): Promise<StageLimits & { quotaBytes: number | null }> {
    const ws = await this.db.kysely
      .selectFrom('workspaces')
      .select(['quota_bytes', 'max_file_size', 'used_bytes', 'reserved_bytes'])
      .where('id', '=', workspaceId)
      .executeTakeFirstOrThrow();
    const quotaBytes = ws.quota_bytes === null ? null : Number(ws.quota_bytes);
    // Bytes promised to uploads in progress count as taken.
    if (quotaBytes !== null && Number(ws.used_bytes) + Number(ws.reserved_bytes) >= quotaBytes)
      throw errors.storageLimitExceeded();
    return {
      maxFileSize: ws.max_file_size === null ? this.settings.maxFileSize : Number(ws.max_file_size),
      quotaBytes,
    };
  }

  private async quotaOf(workspaceId: string): Promise<number | null> {
    const ws = await this.db.kysely
      .selectFrom('workspaces')
      .select('quota_bytes')
      .where('id', '=', workspaceId)
      .executeTakeFirstOrThrow();
    return ws.quota_bytes === null ? null : Number(ws.quota_bytes);
  }

  /**
   * `maxFileSize` lowers the workspace's limit for this upload (an upload token's own limit);
   * `expectedBytes` (a Content-Length) lets a quota be reserved whole up front.
   */
  async stage(
    workspaceId: string,
    body: Readable,
    opts: { signal?: AbortSignal; maxFileSize?: number; expectedBytes?: number } = {},
  ): Promise<Staged> {
    const limits = await this.limits(workspaceId);
    if (opts.maxFileSize !== undefined) limits.maxFileSize = Math.min(limits.maxFileSize, opts.maxFileSize);
    return this.blobs.stage(workspaceId, body, { ...limits, expectedBytes: opts.expectedBytes }, opts.signal);
  }

  discard(staged: Staged): Promise<void> {
    return this.blobs.discard(staged);
  }

  /**
   * Turns staged bytes into a file record. On any failure the staged bytes are dropped and
   * nothing is left behind.
   */
  async finish(
    staged: Staged,
    opts: UploadOptions,
    source: UploadSource,
    hooks: {
      /** Runs in the commit transaction, with the new row. */
      inTransaction?: (trx: Kysely<Database>, row: FileRow) => Promise<void>;
      /** Keep the staged bytes when finishing fails (a multipart complete can be retried). */
      keepOnError?: (err: unknown) => boolean;
    } = {},
  ): Promise<FileRecord> {
    let current = staged;
    try {
      await this.checkWebhookTarget(opts.webhookUrl);
      // random_prefix: a suffix for direct, remote and token uploads (INTERFACE.md 4.3), a
      // prefix for multipart (4.1); the same rule gives a public upload a free name.
      const randomize = source === 'multipart' ? withRandomPrefix : withRandomSuffix;
      let name = opts.randomPrefix ? randomize(opts.name) : opts.name;
      if (opts.transform) {
        const result = await this.transform(current, opts.transform);
        current = result.staged;
        if (result.format) name = withExtension(name, result.format);
      }
      const detected = await detect(current.head, name);
      const quotaBytes = await this.quotaOf(current.workspaceId);
      let released: string | null = null;
      let duplicate = false;
      let folder: FolderRow | null = null;
      let sha256 = current.sha256;
      const row = await this.db.kysely.transaction().execute(async (trx) => {
        folder = await ensureFolderPath(trx, current.workspaceId, opts.folder);
        const committed = await this.blobs.commit(trx, current, quotaBytes);
        duplicate = committed.duplicate;
        sha256 = committed.blob.sha256;
        const { row, replacedBlobId } = await this.records.createOrReplace(trx, {
          workspaceId: current.workspaceId,
          folder,
          name,
          blob: committed.blob,
          duplicate,
          mime_type: detected.mime_type,
          extension: extensionOf(name),
          format: detected.format,
          width: detected.width,
          height: detected.height,
          tags: opts.tags,
          metadata: opts.metadata,
          custom_id: opts.custom_id,
          upload_source: source,
          onNameTaken: opts.mayReplace === false ? randomize : 'replace',
        });
        if (replacedBlobId) released = await this.blobs.releaseIfUnused(trx, replacedBlobId);
        await hooks.inTransaction?.(trx, row);
        // The notification is queued with the record, or not at all.
        if (opts.webhookUrl && this.webhooks)
          await this.webhooks.enqueueUpload(
            trx,
            opts.webhookUrl,
            this.records.view(row, folder?.folder_no ?? null, committed.blob.sha256),
          );
        return row;
      });
      if (duplicate) await this.blobs.discard(current);
      if (released) await this.blobs.forget(current.workspaceId, released);
      this.events?.emit('upload.completed', { source, size: current.size, workspaceId: current.workspaceId });
      const record = this.records.view(row, (folder as FolderRow | null)?.folder_no ?? null, sha256);
      // Whether these bytes were already stored is the workspace's business, not a public uploader's.
      if (opts.mayReplace === false) record.is_duplicate = false;
      return record;
    } catch (err) {
      if (!hooks.keepOnError?.(err)) {
        await this.blobs.discard(current);
        if (current !== staged) await this.blobs.discard(staged);
      }
      throw err;
    }
  }

  /** Applies an upload `transform`: the stored file is the transformed image. */
  private async transform(staged: Staged, spec: TransformSpec): Promise<{ staged: Staged; format: string | null }> {
    const detected = await detect(staged.head, 'upload');
    if (!detected.mime_type.startsWith('image/') || detected.mime_type === 'image/svg+xml') throw errors.notAnImage();
    const { pipeline: img, format } = buildPipeline(spec, {
      autoFormat: 'webp',
      maxPixels: this.settings.maxImagePixels,
    });
    const source = await this.blobs.storage.get(staged.key);
    const out = new PassThrough();
    const running = pipeline(source, img, out).catch((err) => {
      out.destroy(err);
    });
    let result: Staged;
    try {
      result = await this.blobs.stage(staged.workspaceId, out, await this.limits(staged.workspaceId));
      await running;
    } catch (err) {
      if (err instanceof AppError) throw err;
      throw new AppError(
        400,
        'TRANSFORM_FAILED',
        'Validation failed',
        /pixel limit/i.test(String((err as Error).message))
          ? 'the image is larger than the pixel limit'
          : 'the image could not be decoded for transform',
      );
    }
    await this.blobs.discard(staged);
    return { staged: result, format };
  }
}
