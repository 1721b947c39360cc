// The one step every upload ends in, whatever brought the bytes in (direct stream, multipart
// session, remote fetch, upload token, dashboard): staged bytes plus the caller's options
// become a file record. In order: the webhook target is checked, the name resolved (random
// prefix or suffix), the image transformed if asked (a new extension), the type detected; then
// one transaction creates the folders, commits the blob (dedupe by hash; the quota reservation
// becomes usage), writes the record (replacing a file or taking a free name), releases a
// replaced blob, runs the caller's hook and queues the webhook (a new file under a free name
// with none of those extras is one statement instead: commitAtOnce). After it,
// duplicate bytes and released blobs go and the upload is announced (events.ts). On failure
// nothing is left behind.
import type { DomainEvents } from '../events.ts';
import type { Kysely } from 'kysely';
import { type Db, holdWorkspace, inTransaction } from '../db/database.ts';
import type { Database, FileRow, FolderRow } from '../db/schema.ts';
import { detect, extensionOf } from '../media/detect.ts';
import type { OutboundGuard } from '../outbound/guard.ts';
import type { FileRecord, FileRecords } from '../services/files.ts';
import type { NewFile } from '../services/file-records.ts';
import type { PlacedFile } from '../db/files.ts';
import { FolderRepository } from '../db/folders.ts';
import { ensureFolderPath } from '../services/folders.ts';
import type { WebhookService } from '../services/webhooks.ts';
import type { BlobStore } from './blob-store.ts';
import { announceUpload } from './events.ts';
import { type MediaProbeDeps, probeStored } from './media-probe.ts';
import { checkWebhookTarget } from './grants.ts';
import { withExtension, withRandomPrefix, withRandomSuffix } from './names.ts';
import type { UploadOptions, UploadSource } from './options.ts';
import type { Staged } from './staging.ts';
import { type TransformDeps, transformStaged } from './transform.ts';

export interface CommitDeps {
  db: Db;
  blobs: BlobStore;
  records: FileRecords;
  webhooks?: WebhookService;
  guard?: OutboundGuard;
  events?: DomainEvents;
  transform: TransformDeps;
  /** ffprobe for video and audio uploads; without it their records have no media fields. */
  media?: MediaProbeDeps;
}

export interface CommitHooks {
  /** Runs in the commit transaction, with the new row. */
  inTransaction?: (trx: Kysely<Database>, row: FileRow) => Promise<void>;
  /** Keep the staged bytes when finishing fails (a multipart complete can be retried). */
  keepOnError?: (err: unknown) => boolean;
}

/**
 * Turns staged bytes into a file record. On any failure the staged bytes are dropped (unless
 * `keepOnError` says otherwise) and nothing is left behind.
 */
export async function commitUpload(
  deps: CommitDeps,
  staged: Staged,
  opts: UploadOptions,
  source: UploadSource,
  hooks: CommitHooks = {},
): Promise<FileRecord> {
  const { blobs, records, webhooks } = deps;
  let current = staged;
  try {
    await checkWebhookTarget(deps.guard, opts.webhookUrl);
    // random_prefix: a suffix for direct, remote and token uploads, a prefix for multipart
    // (docs/api/uploads.md#names-and-fields); the same rule gives a public upload a free name.
    const randomize = source === 'multipart' ? withRandomPrefix : withRandomSuffix;
    let name = opts.randomPrefix ? randomize(opts.name) : opts.name;
    if (opts.transform) {
      const result = await transformStaged(deps.transform, current, opts.transform);
      current = result.staged;
      if (result.format) name = withExtension(name, result.format);
    }
    const detected = await detect(current.head, name);
    // Bounded by the probe budget; a failed probe leaves the media fields null, nothing more.
    const probed = deps.media ? await probeStored(deps.media, current.key, detected.mime_type, current.size) : null;
    let released: string | null = null;
    let duplicate = false;
    let folder: FolderRow | null = null;
    let sha256 = current.sha256;
    // Read before the transaction: on SQLite a read outside it would wait for it to end.
    const transformKey = await records.transformKey(current.workspaceId);
    const file: Omit<NewFile, 'folder' | 'blob' | 'duplicate'> = {
      workspaceId: current.workspaceId,
      name,
      mime_type: detected.mime_type,
      extension: extensionOf(name),
      format: detected.format,
      width: probed ? probed.width : detected.width,
      height: probed ? probed.height : detected.height,
      duration: probed?.duration ?? null,
      media: probed?.media ?? null,
      tags: opts.tags,
      metadata: opts.metadata,
      custom_id: opts.custom_id,
      upload_source: source,
      onNameTaken: opts.mayReplace === false ? randomize : 'replace',
    };
    // When the transaction would hold nothing but the blob and the file (no hook, no webhook, the
    // folder there already): one statement on PostgreSQL, one synchronous transaction on SQLite,
    // for the common case of a new file under a free name. When it did nothing (name taken, known
    // bytes, quota), the transaction below.
    const quick =
      !hooks.inTransaction && !(opts.webhookUrl && webhooks)
        ? await commitAtOnce(deps, current, file, opts.folder)
        : null;
    if (quick) folder = quick.folder;
    const row =
      quick?.row ??
      (await inTransaction(deps.db.kysely, async (trx) => {
        await holdWorkspace(trx, current.workspaceId);
        folder = await ensureFolderPath(trx, current.workspaceId, opts.folder);
        const committed = await blobs.commit(trx, current);
        duplicate = committed.duplicate;
        sha256 = committed.blob.sha256;
        const { row, replacedBlobId } = await records.createOrReplace(trx, {
          ...file,
          folder,
          blob: committed.blob,
          duplicate,
        });
        if (replacedBlobId) released = await blobs.releaseIfUnused(trx, replacedBlobId);
        await hooks.inTransaction?.(trx, row);
        // The notification is queued with the record, or not at all.
        if (opts.webhookUrl && webhooks)
          await webhooks.enqueueUpload(
            trx,
            opts.webhookUrl,
            records.view(row, folder?.folder_no ?? null, committed.blob.sha256, transformKey),
          );
        return row;
      }));
    if (duplicate) await blobs.discard(current);
    if (released) await blobs.forget(current.workspaceId, released);
    announceUpload(deps.events, { source, size: current.size, workspaceId: current.workspaceId });
    const record = records.view(row, (folder as FolderRow | null)?.folder_no ?? null, sha256, transformKey);
    // Whether these bytes were already stored is the workspace's business, not a public uploader's.
    if (opts.mayReplace === false) record.is_duplicate = false;
    return record;
  } catch (err) {
    if (!hooks.keepOnError?.(err)) {
      await blobs.discard(current);
      if (current !== staged) await blobs.discard(staged);
    }
    throw err;
  }
}

/**
 * The staged bytes as a new blob and `file` as a new file in `folderPath` (which must exist
 * already), at once (BlobStore.commitWithFile). Null when it did nothing.
 */
async function commitAtOnce(
  deps: CommitDeps,
  staged: Staged,
  file: Omit<NewFile, 'folder' | 'blob' | 'duplicate'>,
  folderPath: string[],
): Promise<{ row: PlacedFile; folder: FolderRow | null } | null> {
  const folder = folderPath.length
    ? ((await new FolderRepository(deps.db.kysely).byPath(staged.workspaceId, folderPath.join('/'))) ?? null)
    : null;
  if (folderPath.length && !folder) return null;
  let row: FileRow | undefined;
  const blob = await deps.blobs.commitWithFile(staged, (blob) => {
    row = deps.records.newRow({ ...file, folder, blob, duplicate: false });
    return row;
  });
  return blob && row ? { row: { ...row, folder_path: folder?.path ?? '' }, folder } : null;
}
