// Bytes in storage, from staging to deletion. An upload is first *staged* (staging.ts), then
// *committed* in the caller's transaction (a blob row owns the object, or an identical blob
// already exists and the new object is dropped) or *discarded*. A blob no file uses any more
// is *released*, and its bytes *forgotten*. A crash at any point leaves at most a storage
// intent, which the sweeper turns into a deletion: no visible half-written file, no row
// pointing at nothing. The queries are in src/db/blobs.ts.
import type { Readable } from 'node:stream';
import type { Kysely } from 'kysely';
import { newUuid } from '../crypto/ids.ts';
import { BlobRepository } from '../db/blobs.ts';
import { type Db, nowIso } from '../db/database.ts';
import { RenditionRepository } from '../db/renditions.ts';
import type { BlobRow, Database, FileRow } from '../db/schema.ts';
import { errors } from '../errors.ts';
import type { StorageDriver } from '../storage/driver.ts';
import { type StageLimits, type Staged, stageBody } from './staging.ts';

export class BlobStore {
  private readonly repo: BlobRepository;
  private readonly renditions: RenditionRepository;

  constructor(
    db: Db,
    readonly storage: StorageDriver,
    /** Intents untouched this long belong to nobody alive; live uploads touch theirs more often. */
    readonly graceMs = 15 * 60 * 1000,
  ) {
    this.repo = new BlobRepository(db.kysely);
    this.renditions = new RenditionRepository(db.kysely);
  }

  newKey(workspaceId: string): string {
    return `${workspaceId}/blobs/${newUuid()}`;
  }

  recordIntent(workspaceId: string, key: string, reason: string): Promise<void> {
    return this.repo.recordIntent(workspaceId, key, reason);
  }

  /** The upload behind an intent is still alive (the sweep spares it for another grace period). */
  touchIntent(key: string): Promise<void> {
    return this.repo.touchIntent(key);
  }

  /**
   * Promises `bytes` more of the workspace's quota to the upload whose intent is `key`, if
   * used + reserved + bytes stays within `quotaBytes`: one conditional update, so uploads in
   * parallel can never together pass the quota. False when they do not fit.
   */
  async reserve(workspaceId: string, key: string, bytes: number, quotaBytes: number): Promise<boolean> {
    const outcome = await this.repo.reserve(workspaceId, key, bytes, quotaBytes);
    // The intent is gone (the upload was given up meanwhile): nothing to hold the bytes for.
    if (outcome === 'no-intent') throw errors.storageLimitExceeded();
    return outcome === 'reserved';
  }

  stage(workspaceId: string, body: Readable, limits: StageLimits, signal?: AbortSignal): Promise<Staged> {
    return stageBody(
      { storage: this.storage, graceMs: this.graceMs, blobs: this, repo: this.repo },
      workspaceId,
      body,
      limits,
      signal,
    );
  }

  /**
   * In the caller's transaction: the blob that now holds these bytes. When the workspace
   * already had them, that blob is returned and `duplicate` is true; the caller then
   * discards the staged object after the transaction commits.
   */
  async commit(trx: Kysely<Database>, staged: Staged): Promise<{ blob: BlobRow; duplicate: boolean }> {
    const blobs = this.repo.in(trx);
    // A blob of these bytes can go between 'exists' and the lookup (its last file deleted): then
    // these bytes are adopted after all, on the next round.
    for (let round = 0; round < 3; round++) {
      const blob = this.newBlob(staged);
      // The reservation becomes usage; the quota is checked again here, atomically with the
      // accounting, against the workspace's quota as it is now and every other upload's reservation.
      const outcome = await blobs.adopt(blob);
      if (outcome === 'over-quota') throw errors.storageLimitExceeded();
      if (outcome === 'adopted') return { blob, duplicate: false };
      const existing = await blobs.findBySha256(staged.workspaceId, staged.sha256);
      // A duplicate keeps its intent (and reservation) until the caller discards the new object.
      if (existing) return { blob: existing, duplicate: true };
    }
    throw new Error('the blob of these bytes kept appearing and going');
  }

  /**
   * Outside a transaction: the staged bytes become a new blob and `file(blob)` its file, at once
   * (BlobRepository.adoptWithFile). Null when nothing was done: the caller then commits in a
   * transaction, where a taken name, known bytes or a full quota are handled.
   */
  async commitWithFile(staged: Staged, file: (blob: BlobRow) => FileRow): Promise<BlobRow | null> {
    const blob = this.newBlob(staged);
    return (await this.repo.adoptWithFile(blob, file(blob))) ? blob : null;
  }

  private newBlob(staged: Staged): BlobRow {
    return {
      id: newUuid(),
      workspace_id: staged.workspaceId,
      sha256: staged.sha256,
      size: staged.size,
      storage_key: staged.key,
      created_at: nowIso(),
    };
  }

  /** Drops a staged object that no blob owns (refused upload, or a duplicate). */
  async discard(staged: Staged): Promise<void> {
    await this.forget(staged.workspaceId, staged.key);
  }

  /**
   * In the caller's transaction: when no file uses the blob any more, the row goes, the quota
   * is credited and an intent makes sure the bytes follow. Returns the key to delete after
   * commit, or null when the blob is still in use.
   */
  async releaseIfUnused(trx: Kysely<Database>, blobId: string): Promise<string | null> {
    const blobs = this.repo.in(trx);
    if (await blobs.inUse(blobId)) return null;
    const blob = await blobs.byId(blobId);
    if (!blob) return null;
    await blobs.delete(blobId);
    await blobs.creditUsage(blob.workspace_id, blob.size);
    await blobs.recordDeleteIntent(blob.workspace_id, blob.storage_key);
    return blob.storage_key;
  }

  /**
   * Deletes an object, its cached renditions (objects, then their rows in the rendition
   * cache's ledger), and then its intent; safe to repeat. The quota it held is given back
   * first, so a storage that is slow to delete holds none of it. A render of this blob that
   * ends after this finds the blob gone and removes what it made (DeliveryService).
   */
  async forget(_workspaceId: string, key: string): Promise<void> {
    try {
      await this.repo.releaseReservation(key);
      for await (const o of this.storage.list(renditionPrefix(key))) await this.storage.delete(o.key);
      await this.renditions.removeOwner(key);
      await this.storage.delete(key);
      await this.repo.transaction((blobs) => blobs.dropIntent(key));
    } catch {
      // Left for the sweeper: the intent is still there.
    }
  }

  /**
   * The sweeper's part for loose bytes. Intents untouched for the grace period are dead:
   * upload and delete intents are carried out; a multipart intent is carried out only when no
   * live session holds its key (a crash inside multipart start). On local disk, temporary
   * files and multipart folders left by a crash go too.
   */
  async sweepIntents(graceMs = this.graceMs, multipartMaxAgeMs = 8 * 24 * 3600 * 1000): Promise<number> {
    const cutoff = new Date(Date.now() - graceMs).toISOString();
    const stale = await this.repo.staleIntents(cutoff, 1000);
    let done = 0;
    for (const intent of stale) {
      // A blob owns the key when a crash came after commit but before the intent went:
      // then only the intent is stale.
      if (await this.repo.ownsKey(intent.storage_key)) {
        await this.repo.transaction((blobs) => blobs.dropIntent(intent.storage_key));
        continue;
      }
      if (intent.reason === 'multipart' && (await this.repo.liveSessionHolds(intent.storage_key))) continue;
      // Bytes a tus upload keeps beside its session (src/uploads/tus/store.ts) live as long as it
      // does, however long its client pauses: resuming after hours is what tus is for.
      if (intent.reason === TUS_SIDE_REASON && (await this.repo.liveSessionHolds(tusSessionKey(intent.storage_key))))
        continue;
      await this.forget(intent.workspace_id, intent.storage_key);
      done++;
    }
    const local = this.storage as {
      sweepTemp?: (olderThanMs: number, multipartOlderThanMs: number) => Promise<number>;
    };
    if (local.sweepTemp) done += await local.sweepTemp(graceMs, multipartMaxAgeMs);
    return done;
  }
}

/** The intent reason of objects a tus upload keeps beside its session's key (`<key>.tus-<suffix>`). */
export const TUS_SIDE_REASON = 'tus-side';
/** The session key such an object hangs off. */
export const tusSessionKey = (sideKey: string) => sideKey.replace(/\.tus-[a-z0-9]+$/, '');

/** Renditions of a blob are cached beside it, so they go when it goes. */
export const renditionPrefix = (blobKey: string) => `${blobKey}.renditions/`;
