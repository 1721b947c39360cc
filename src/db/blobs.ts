// Queries about stored bytes: blob rows, storage intents, and the quota counters they move
// (workspaces.used_bytes and reserved_bytes). The rules that use them live in src/uploads/.
// A repository runs its queries on the Kysely instance it was made with: the database, or a
// caller's transaction (`in(trx)`), so that an upload's commit stays one transaction.
import { type Kysely, sql } from 'kysely';
import { nowIso } from './database.ts';
import type { BlobRow, Database } from './schema.ts';

/** The quota settings and counters of a workspace, as numbers. */
export interface WorkspaceQuota {
  quotaBytes: number | null;
  maxFileSize: number | null;
  usedBytes: number;
  reservedBytes: number;
}

export interface StorageIntent {
  storage_key: string;
  workspace_id: string;
  reason: string;
  reserved_bytes: number;
  created_at: string;
}

/** Thrown inside `reserve`'s transaction to roll it back when the intent is gone. */
class NoIntent extends Error {}

const orNull = (v: number | null): number | null => (v === null ? null : Number(v));

export class BlobRepository {
  constructor(private readonly q: Kysely<Database>) {}

  /** The same queries inside the caller's transaction. */
  in(trx: Kysely<Database>): BlobRepository {
    return new BlobRepository(trx);
  }

  /** Runs `fn` in a new transaction (only on a repository made with the database itself). */
  transaction<T>(fn: (repo: BlobRepository) => Promise<T>): Promise<T> {
    return this.q.transaction().execute((trx) => fn(new BlobRepository(trx)));
  }

  async workspaceQuota(workspaceId: string): Promise<WorkspaceQuota> {
    const ws = await this.q
      .selectFrom('workspaces')
      .select(['quota_bytes', 'max_file_size', 'used_bytes', 'reserved_bytes'])
      .where('id', '=', workspaceId)
      .executeTakeFirstOrThrow();
    return {
      quotaBytes: orNull(ws.quota_bytes),
      maxFileSize: orNull(ws.max_file_size),
      usedBytes: Number(ws.used_bytes),
      reservedBytes: Number(ws.reserved_bytes),
    };
  }

  async quotaBytes(workspaceId: string): Promise<number | null> {
    const ws = await this.q
      .selectFrom('workspaces')
      .select('quota_bytes')
      .where('id', '=', workspaceId)
      .executeTakeFirstOrThrow();
    return orNull(ws.quota_bytes);
  }

  async recordIntent(workspaceId: string, key: string, reason: string): Promise<void> {
    await this.q
      .insertInto('storage_intents')
      .values({ storage_key: key, workspace_id: workspaceId, reason, reserved_bytes: 0, created_at: nowIso() })
      .execute();
  }

  /** A 'delete' intent for a key, unless the key already has an intent. */
  async recordDeleteIntent(workspaceId: string, key: string): Promise<void> {
    await this.q
      .insertInto('storage_intents')
      .values({
        storage_key: key,
        workspace_id: workspaceId,
        reason: 'delete',
        reserved_bytes: 0,
        created_at: nowIso(),
      })
      .onConflict((oc) => oc.column('storage_key').doNothing())
      .execute();
  }

  /** Marks an intent as alive now (see the sweep's grace period). */
  async touchIntent(key: string): Promise<void> {
    await this.q.updateTable('storage_intents').set({ created_at: nowIso() }).where('storage_key', '=', key).execute();
  }

  /**
   * Adds `bytes` to the workspace's reservation and to the intent's, if used + reserved + bytes
   * stays within `quotaBytes`: one conditional update, in one transaction with the intent's.
   * 'over-quota' when they do not fit; 'no-intent' (nothing changed) when the intent is gone.
   */
  async reserve(
    workspaceId: string,
    key: string,
    bytes: number,
    quotaBytes: number,
  ): Promise<'reserved' | 'over-quota' | 'no-intent'> {
    try {
      return await this.q.transaction().execute(async (trx) => {
        const fits = await trx
          .updateTable('workspaces')
          .set((eb) => ({ reserved_bytes: eb('reserved_bytes', '+', bytes) }))
          .where('id', '=', workspaceId)
          .where(sql<boolean>`used_bytes + reserved_bytes + ${bytes} <= ${quotaBytes}`)
          .executeTakeFirst();
        if (Number(fits.numUpdatedRows) === 0) return 'over-quota';
        const held = await trx
          .updateTable('storage_intents')
          .set((eb) => ({ reserved_bytes: eb('reserved_bytes', '+', bytes) }))
          .where('storage_key', '=', key)
          .executeTakeFirst();
        if (Number(held.numUpdatedRows) === 0) throw new NoIntent();
        return 'reserved';
      });
    } catch (err) {
      if (err instanceof NoIntent) return 'no-intent';
      throw err;
    }
  }

  /**
   * Removes an intent and gives back the quota it held; returns what it held. Run it in a
   * transaction. DELETE … RETURNING: of two droppers of one intent, only the one that deleted
   * it gives back.
   */
  async dropIntent(key: string): Promise<number> {
    const gone = await this.q
      .deleteFrom('storage_intents')
      .where('storage_key', '=', key)
      .returning(['workspace_id', 'reserved_bytes'])
      .executeTakeFirst();
    const held = Number(gone?.reserved_bytes ?? 0);
    if (gone) await this.giveBack(gone.workspace_id, held);
    return held;
  }

  /** Gives back the quota an intent holds and keeps the intent, in a transaction of its own. */
  async releaseReservation(key: string): Promise<void> {
    await this.q.transaction().execute(async (trx) => {
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
      await new BlobRepository(trx).giveBack(intent.workspace_id, held);
    });
  }

  /** Returns reserved quota to the workspace (in the transaction that took it off an intent). */
  private async giveBack(workspaceId: string, bytes: number): Promise<void> {
    if (bytes <= 0) return;
    await this.q
      .updateTable('workspaces')
      .set((eb) => ({ reserved_bytes: eb('reserved_bytes', '-', bytes) }))
      .where('id', '=', workspaceId)
      .execute();
  }

  findBySha256(workspaceId: string, sha256: string): Promise<BlobRow | undefined> {
    return this.q
      .selectFrom('blobs')
      .selectAll()
      .where('workspace_id', '=', workspaceId)
      .where('sha256', '=', sha256)
      .executeTakeFirst();
  }

  byId(blobId: string): Promise<BlobRow | undefined> {
    return this.q.selectFrom('blobs').selectAll().where('id', '=', blobId).executeTakeFirst();
  }

  /**
   * Adds `bytes` to the workspace's usage if used + reserved + bytes stays within `quotaBytes`
   * (always, without a quota). False when it does not fit.
   */
  async chargeUsage(workspaceId: string, bytes: number, quotaBytes: number | null): Promise<boolean> {
    const charged = await this.q
      .updateTable('workspaces')
      .set((eb) => ({ used_bytes: eb('used_bytes', '+', bytes) }))
      .where('id', '=', workspaceId)
      .where(
        quotaBytes === null
          ? sql<boolean>`1 = 1`
          : sql<boolean>`used_bytes + reserved_bytes + ${bytes} <= ${quotaBytes}`,
      )
      .executeTakeFirst();
    return Number(charged.numUpdatedRows) > 0;
  }

  async creditUsage(workspaceId: string, bytes: number): Promise<void> {
    await this.q
      .updateTable('workspaces')
      .set((eb) => ({ used_bytes: eb('used_bytes', '-', bytes) }))
      .where('id', '=', workspaceId)
      .execute();
  }

  async insert(blob: BlobRow): Promise<void> {
    await this.q.insertInto('blobs').values(blob).execute();
  }

  async delete(blobId: string): Promise<void> {
    await this.q.deleteFrom('blobs').where('id', '=', blobId).execute();
  }

  /** Whether any file still points at the blob. */
  async inUse(blobId: string): Promise<boolean> {
    const file = await this.q
      .selectFrom('files')
      .select('id')
      .where('blob_id', '=', blobId)
      .limit(1)
      .executeTakeFirst();
    return file !== undefined;
  }

  /** Intents untouched since `cutoff`, at most `limit`. */
  staleIntents(cutoff: string, limit: number): Promise<StorageIntent[]> {
    return this.q.selectFrom('storage_intents').selectAll().where('created_at', '<', cutoff).limit(limit).execute();
  }

  /** Whether a blob row owns the key. */
  async ownsKey(key: string): Promise<boolean> {
    const owned = await this.q.selectFrom('blobs').select('id').where('storage_key', '=', key).executeTakeFirst();
    return owned !== undefined;
  }

  /** Whether a multipart session that is still active or completing holds the key. */
  async liveSessionHolds(key: string): Promise<boolean> {
    const live = await this.q
      .selectFrom('multipart_sessions')
      .select('id')
      .where('storage_key', '=', key)
      .where('status', 'in', ['active', 'completing'])
      .executeTakeFirst();
    return live !== undefined;
  }
}
