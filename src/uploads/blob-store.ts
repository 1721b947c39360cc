// Bytes in storage. An upload is first *staged*: streamed to a new object while hashing
// (SHA-256), counting and keeping its first bytes for type detection, with a storage intent
// recorded before the first byte is written. Then it is *committed* in the caller's
// transaction (a blob row owns the object, or an identical blob already exists and the new
// object is dropped) or *discarded*. A crash at any point leaves at most an intent, which the
// sweeper turns into a deletion: no visible half-written file, no row pointing at nothing.
import { createHash } from 'node:crypto';
import { type Readable, Transform } from 'node:stream';
import { type Kysely, sql } from 'kysely';
import { newUuid } from '../crypto/ids.ts';
import { type Db, nowIso } from '../db/database.ts';
import type { BlobRow, Database } from '../db/schema.ts';
import { errors } from '../errors.ts';
import { HEAD_BYTES } from '../media/detect.ts';
import type { StorageDriver } from '../storage/driver.ts';

/** The body stopped before its end (the client went away, or the form ended inside the file). */
export class IncompleteBodyError extends Error {
  readonly code = 'EINCOMPLETE';
  constructor() {
    super('the body ended before the whole file arrived');
    this.name = 'IncompleteBodyError';
  }
}

export interface Staged {
  workspaceId: string;
  key: string;
  size: number;
  sha256: string;
  /** The first bytes, for type detection and image headers. */
  head: Buffer;
}

export interface StageLimits {
  /** Largest size allowed for this file (413 above). */
  maxFileSize: number;
  /** The workspace's quota in bytes, when it has one: bytes are reserved against it as they stream (402 when they do not fit). */
  quotaBytes?: number | null;
  /**
   * What the body will hold at most, when known (a request's Content-Length): reserved whole
   * before the first byte, so parallel uploads near the quota are served first come, first
   * served instead of all growing into it and all failing.
   */
  expectedBytes?: number;
}

/** Quota is reserved in steps this large as a body streams (one database update per step). */
const RESERVE_STEP = 8 * 1024 * 1024;

export class BlobStore {
  constructor(
    private readonly db: Db,
    readonly storage: StorageDriver,
    /** Intents untouched this long belong to nobody alive; live uploads touch theirs more often. */
    readonly graceMs = 15 * 60 * 1000,
  ) {}

  newKey(workspaceId: string): string {
    return `${workspaceId}/blobs/${newUuid()}`;
  }

  async recordIntent(workspaceId: string, key: string, reason: string): Promise<void> {
    await this.db.kysely
      .insertInto('storage_intents')
      .values({ storage_key: key, workspace_id: workspaceId, reason, reserved_bytes: 0, created_at: nowIso() })
      .execute();
  }

  /**
   * Promises `bytes` more of the workspace's quota to the upload whose intent is `key`, if
   * used + reserved + bytes stays within `quotaBytes`: one conditional update, so uploads in
   * parallel can never together pass the quota. False when they do not fit.
   */
  async reserve(workspaceId: string, key: string, bytes: number, quotaBytes: number): Promise<boolean> {
    return this.db.kysely.transaction().execute(async (trx) => {
      const fits = await trx
        .updateTable('workspaces')
        .set((eb) => ({ reserved_bytes: eb('reserved_bytes', '+', bytes) }))
        .where('id', '=', workspaceId)
        .where(sql<boolean>`used_bytes + reserved_bytes + ${bytes} <= ${quotaBytes}`)
        .executeTakeFirst();
      if (Number(fits.numUpdatedRows) === 0) return false;
      const held = await trx
        .updateTable('storage_intents')
        .set((eb) => ({ reserved_bytes: eb('reserved_bytes', '+', bytes) }))
        .where('storage_key', '=', key)
        .executeTakeFirst();
      // The intent is gone (the upload was given up meanwhile): nothing to hold the bytes for.
      if (Number(held.numUpdatedRows) === 0) throw errors.storageLimitExceeded();
      return true;
    });
  }

  /** Removes an intent and gives back the quota it held; the one place intents go. Returns what it held. */
  private async dropIntent(trx: Kysely<Database>, key: string): Promise<number> {
    // DELETE … RETURNING: of two droppers of one intent, only the one that deleted it gives back.
    const gone = await trx
      .deleteFrom('storage_intents')
      .where('storage_key', '=', key)
      .returning(['workspace_id', 'reserved_bytes'])
      .executeTakeFirst();
    const held = Number(gone?.reserved_bytes ?? 0);
    if (gone) await giveBack(trx, gone.workspace_id, held);
    return held;
  }

  async stage(workspaceId: string, body: Readable, limits: StageLimits, signal?: AbortSignal): Promise<Staged> {
    // Already given up on (the form was parsed to its broken end before we got here).
    if (body.destroyed && !body.readableEnded) throw new IncompleteBodyError();
    const key = this.newKey(workspaceId);
    await this.recordIntent(workspaceId, key, 'upload');
    // Local disk hashes on its own thread as it writes; otherwise the bytes are hashed here.
    const offload = this.storage.hashesOnPut === true;
    const hash = offload ? undefined : createHash('sha256');
    const headChunks: Buffer[] = [];
    let headLength = 0;
    let size = 0;
    // With a quota, the bytes are reserved ahead of the stream, a step at a time; near the
    // quota, just what is needed. Without one, nothing is written per chunk.
    let reserved = 0;
    const quota = limits.quotaBytes ?? null;
    // Steps are at most a sixteenth of the quota, so a small quota is not held in big lumps
    // by uploads that turn out small.
    const stepSize =
      quota === null ? RESERVE_STEP : Math.max(64 * 1024, Math.min(RESERVE_STEP, Math.floor(quota / 16)));
    const reserveUpTo = async (need: number) => {
      const step = Math.max(need - reserved, Math.min(stepSize, limits.maxFileSize - reserved));
      if (await this.reserve(workspaceId, key, step, quota!)) reserved += step;
      else if (step > need - reserved && (await this.reserve(workspaceId, key, need - reserved, quota!)))
        reserved = need;
      else throw errors.storageLimitExceeded();
    };
    if (
      quota !== null &&
      limits.expectedBytes !== undefined &&
      Number.isSafeInteger(limits.expectedBytes) &&
      limits.expectedBytes > 0
    ) {
      const expected = Math.min(limits.expectedBytes, limits.maxFileSize);
      if (!(await this.reserve(workspaceId, key, expected, quota))) {
        await this.forget(workspaceId, key);
        throw errors.storageLimitExceeded();
      }
      reserved = expected;
    }
    const meter = new Transform({
      transform(chunk: Buffer, _enc, cb) {
        size += chunk.length;
        if (size > limits.maxFileSize) return cb(errors.fileTooLarge(limits.maxFileSize));
        hash?.update(chunk);
        if (headLength < HEAD_BYTES) {
          headChunks.push(chunk.subarray(0, HEAD_BYTES - headLength));
          headLength += Math.min(chunk.length, HEAD_BYTES - headLength);
        }
        if (quota !== null && size > reserved) {
          reserveUpTo(size).then(() => cb(null, chunk), cb);
          return;
        }
        cb(null, chunk);
      },
    });
    // Errors travel both ways: a failing client fails the write; a failing write (or a limit)
    // stops reading the client.
    // A limit can trip before the driver attaches to the meter (it may open a file first): the
    // error is kept on the stream, where the driver's pipeline finds it, never thrown unheard.
    meter.on('error', () => {});
    const onBodyError = (err: Error) => meter.destroy(err);
    body.once('error', onBodyError);
    // A body destroyed without an error (a multipart parser giving up on a form that ends inside
    // the file) neither ends nor fails: without this the upload would wait forever.
    const onBodyClose = () => {
      if (!body.readableEnded) meter.destroy(new IncompleteBodyError());
    };
    body.once('close', onBodyClose);
    body.pipe(meter);
    // However long the upload takes, its intent stays fresh, so no sweeper takes it for dead.
    const heartbeat = setInterval(
      () => {
        this.db.kysely
          .updateTable('storage_intents')
          .set({ created_at: nowIso() })
          .where('storage_key', '=', key)
          .execute()
          .catch(() => {});
      },
      Math.max(1000, Math.floor(this.graceMs / 3)),
    );
    heartbeat.unref();
    let sha256: string | undefined;
    try {
      ({ sha256 } = await this.storage.put(key, meter, { signal, hash: offload }));
    } catch (err) {
      body.unpipe(meter);
      body.off('error', onBodyError);
      body.off('close', onBodyClose);
      await this.forget(workspaceId, key);
      throw err;
    } finally {
      clearInterval(heartbeat);
    }
    body.off('error', onBodyError);
    body.off('close', onBodyClose);
    sha256 ??= hash?.digest('hex');
    if (!sha256) throw new Error('storage stored the bytes without their hash');
    return { workspaceId, key, size, sha256, head: Buffer.concat(headChunks) };
  }

  /**
   * In the caller's transaction: the blob that now holds these bytes. When the workspace
   * already had them, that blob is returned and `duplicate` is true; the caller then
   * discards the staged object after the transaction commits.
   */
  async commit(
    trx: Kysely<Database>,
    staged: Staged,
    quotaBytes: number | null,
  ): Promise<{ blob: BlobRow; duplicate: boolean }> {
    const existing = await trx
      .selectFrom('blobs')
      .selectAll()
      .where('workspace_id', '=', staged.workspaceId)
      .where('sha256', '=', staged.sha256)
      .executeTakeFirst();
    // A duplicate keeps its intent (and reservation) until the caller discards the new object.
    if (existing) return { blob: existing, duplicate: true };
    // The reservation becomes usage; the quota is checked again here, atomically with the
    // accounting, counting every other upload's reservation.
    await this.dropIntent(trx, staged.key);
    const charged = await trx
      .updateTable('workspaces')
      .set((eb) => ({ used_bytes: eb('used_bytes', '+', staged.size) }))
      .where('id', '=', staged.workspaceId)
      .where(
        quotaBytes === null
          ? sql<boolean>`1 = 1`
          : sql<boolean>`used_bytes + reserved_bytes + ${staged.size} <= ${quotaBytes}`,
      )
      .executeTakeFirst();
    if (Number(charged.numUpdatedRows) === 0) throw errors.storageLimitExceeded();
    const blob: BlobRow = {
      id: newUuid(),
      workspace_id: staged.workspaceId,
      sha256: staged.sha256,
      size: staged.size,
      storage_key: staged.key,
      created_at: nowIso(),
    };
    await trx.insertInto('blobs').values(blob).execute();
    return { blob, duplicate: false };
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
    const inUse = await trx.selectFrom('files').select('id').where('blob_id', '=', blobId).limit(1).executeTakeFirst();
    if (inUse) return null;
    const blob = await trx.selectFrom('blobs').selectAll().where('id', '=', blobId).executeTakeFirst();
    if (!blob) return null;
    await trx.deleteFrom('blobs').where('id', '=', blobId).execute();
    await trx
      .updateTable('workspaces')
      .set((eb) => ({ used_bytes: eb('used_bytes', '-', blob.size) }))
      .where('id', '=', blob.workspace_id)
      .execute();
    await trx
      .insertInto('storage_intents')
      .values({
        storage_key: blob.storage_key,
        workspace_id: blob.workspace_id,
        reason: 'delete',
        reserved_bytes: 0,
        created_at: nowIso(),
      })
      .onConflict((oc) => oc.column('storage_key').doNothing())
      .execute();
    return blob.storage_key;
  }

  /**
   * Deletes an object, its cached renditions, and then its intent; safe to repeat. The quota
   * it held is given back first, so a storage that is slow to delete holds none of it.
   */
  async forget(_workspaceId: string, key: string): Promise<void> {
    try {
      await this.releaseReservation(key);
      for await (const o of this.storage.list(renditionPrefix(key))) await this.storage.delete(o.key);
      await this.storage.delete(key);
      await this.db.kysely.transaction().execute((trx) => this.dropIntent(trx, key));
    } catch {
      // Left for the sweeper: the intent is still there.
    }
  }

  /** Gives back the quota an intent holds and keeps the intent (its bytes still have to go). */
  private async releaseReservation(key: string): Promise<void> {
    await this.db.kysely.transaction().execute(async (trx) => {
      const intent = await trx
        .selectFrom('storage_intents')
        .select(['workspace_id', 'reserved_bytes'])
        .where('storage_key', '=', key)
        .executeTakeFirst();
      const held = Number(intent?.reserved_bytes ?? 0);
      if (!intent || held === 0) return;
      // Conditional on the amount read, so two releases of one intent give back once.
      const zeroed = await trx
        .updateTable('storage_intents')
        .set({ reserved_bytes: 0 })
        .where('storage_key', '=', key)
        .where('reserved_bytes', '=', held)
        .executeTakeFirst();
      if (Number(zeroed.numUpdatedRows) === 0) return;
      await giveBack(trx, intent.workspace_id, held);
    });
  }

  /**
   * The sweeper's part for loose bytes. Intents untouched for the grace period are dead:
   * upload and delete intents are carried out; a multipart intent is carried out only when no
   * live session holds its key (a crash inside multipart start). On local disk, temporary
   * files and multipart folders left by a crash go too.
   */
  async sweepIntents(graceMs = this.graceMs, multipartMaxAgeMs = 8 * 24 * 3600 * 1000): Promise<number> {
    const cutoff = new Date(Date.now() - graceMs).toISOString();
    const stale = await this.db.kysely
      .selectFrom('storage_intents')
      .selectAll()
      .where('created_at', '<', cutoff)
      .limit(1000)
      .execute();
    let done = 0;
    for (const intent of stale) {
      // A blob owns the key when a crash came after commit but before the intent went:
      // then only the intent is stale.
      const owned = await this.db.kysely
        .selectFrom('blobs')
        .select('id')
        .where('storage_key', '=', intent.storage_key)
        .executeTakeFirst();
      if (owned) {
        await this.db.kysely.transaction().execute((trx) => this.dropIntent(trx, intent.storage_key));
        continue;
      }
      if (intent.reason === 'multipart') {
        const live = await this.db.kysely
          .selectFrom('multipart_sessions')
          .select('id')
          .where('storage_key', '=', intent.storage_key)
          .where('status', 'in', ['active', 'completing'])
          .executeTakeFirst();
        if (live) continue;
      }
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

/** Returns reserved quota to the workspace (in the transaction that took it off an intent). */
async function giveBack(trx: Kysely<Database>, workspaceId: string, bytes: number): Promise<void> {
  if (bytes <= 0) return;
  await trx
    .updateTable('workspaces')
    .set((eb) => ({ reserved_bytes: eb('reserved_bytes', '-', bytes) }))
    .where('id', '=', workspaceId)
    .execute();
}

/** Renditions of a blob are cached beside it, so they go when it goes. */
export const renditionPrefix = (blobKey: string) => `${blobKey}.renditions/`;
