// Queries about stored bytes: blob rows, storage intents, and the quota counters they move
// (workspaces.used_bytes and reserved_bytes). The rules that use them live in src/uploads/.
// A repository runs its queries on the Kysely instance it was made with: the database, or a
// caller's transaction (`in(trx)`), so that an upload's commit stays one transaction.
import { type Insertable, type Kysely, type RawBuilder, sql } from 'kysely';
import type SQLite from 'better-sqlite3';
import { nowIso, sqliteHandle } from './database.ts';
import { flavourOf } from './derived.ts';
import { prepared } from './pg-prepared.ts';
import { commitGroupOf } from './sqlite-commit-group.ts';
import type { BlobRow, Database, FileTable } from './schema.ts';

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

/** Thrown inside `adoptWithFile`'s SQLite transaction to roll it back: the caller takes the long way. */
class NothingDone extends Error {}

/** SQLite: `adoptWithFile`'s steps, in the caller's transaction; throws NothingDone to undo them. */
function adoptWithFileSqlite(
  db: SQLite.Database,
  blob: BlobRow,
  file: Insertable<FileTable>,
  columns: (keyof FileTable)[],
): void {
  const ws = blob.workspace_id;
  const taken = db
    .prepare("select 1 from files where workspace_id = ? and coalesce(folder_id, '') = ? and name = ?")
    .get(file.workspace_id, file.folder_id ?? '', file.name);
  if (taken || db.prepare('select 1 from blobs where workspace_id = ? and sha256 = ?').get(ws, blob.sha256))
    throw new NothingDone();
  const gone = db
    .prepare('delete from storage_intents where storage_key = ? returning reserved_bytes')
    .get(blob.storage_key) as { reserved_bytes: number } | undefined;
  const held = Number(gone?.reserved_bytes ?? 0);
  const charged = db
    .prepare(
      `update workspaces set used_bytes = used_bytes + ?, reserved_bytes = reserved_bytes - ?
        where id = ? and (quota_bytes is null or used_bytes + reserved_bytes - ? + ? <= quota_bytes)`,
    )
    .run(blob.size, held, ws, held, blob.size);
  if (charged.changes !== 1) throw new NothingDone();
  db.prepare(
    'insert into blobs (id, workspace_id, sha256, size, storage_key, created_at) values (?, ?, ?, ?, ?, ?)',
  ).run(blob.id, ws, blob.sha256, blob.size, blob.storage_key, blob.created_at);
  const added = db
    .prepare(
      `insert into files (${columns.map((c) => `"${c}"`).join(', ')}) values (${columns.map(() => '?').join(', ')}) on conflict do nothing`,
    )
    .run(...columns.map((c) => file[c] as unknown));
  if (added.changes !== 1) throw new NothingDone();
}

const orNull = (v: number | string | null): number | null => (v === null ? null : Number(v));

/** A workspace row's quota columns (bigints may arrive as strings) as numbers. */
export function quotaOf(ws: {
  quota_bytes: number | string | null;
  max_file_size: number | string | null;
  used_bytes: number | string;
  reserved_bytes: number | string;
}): WorkspaceQuota {
  return {
    quotaBytes: orNull(ws.quota_bytes),
    maxFileSize: orNull(ws.max_file_size),
    usedBytes: Number(ws.used_bytes),
    reservedBytes: Number(ws.reserved_bytes),
  };
}

/** The SQLSTATE of `stowage_undo()` (migration 0013, PostgreSQL): the statement undid itself. */
export const UNDO_SQLSTATE = 'SWUND';

const blobValues = (b: BlobRow) => sql.join([b.id, b.workspace_id, b.sha256, b.size, b.storage_key, b.created_at]);

/**
 * PostgreSQL: the CTEs that make a staged object the blob `blob` (see `adopt`), as `hold` (the
 * workspace's row, before anything else: holdWorkspace in database.ts), `ins` (the blob row,
 * when no blob of these bytes exists and `condition` holds), then `gone` and `held` (the intent
 * and what it reserved) and `charged` (the usage, within the quota). Without `hold` first, the
 * statement took the blob's key before the workspace's row, and an upload's transaction, which
 * holds the workspace first, bringing the same bytes at once deadlocked with it.
 */
function adoptSteps(blob: BlobRow, condition?: RawBuilder<unknown>) {
  return sql`with hold as (
        select 1 from workspaces where id = ${blob.workspace_id} for no key update
      ), ins as (
        insert into blobs (id, workspace_id, sha256, size, storage_key, created_at)
        select ${blobValues(blob)} where exists (select 1 from hold) ${condition ? sql`and ${condition}` : sql``}
        on conflict (workspace_id, sha256) do nothing
        returning id
      ), gone as (
        delete from storage_intents
         where storage_key = ${blob.storage_key} and exists (select 1 from ins)
        returning reserved_bytes
      ), held as (
        select coalesce((select reserved_bytes from gone), 0) as bytes
      ), charged as (
        update workspaces
           set used_bytes = used_bytes + ${blob.size}::bigint,
               reserved_bytes = reserved_bytes - (select bytes from held)
         where id = ${blob.workspace_id}
           and exists (select 1 from ins)
           and (quota_bytes is null
                or used_bytes + reserved_bytes - (select bytes from held) + ${blob.size}::bigint <= quota_bytes)
        returning id
      )`;
}

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
    return quotaOf(ws);
  }

  async recordIntent(workspaceId: string, key: string, reason: string): Promise<void> {
    const insert = this.q
      .insertInto('storage_intents')
      .values({ storage_key: key, workspace_id: workspaceId, reason, reserved_bytes: 0, created_at: nowIso() })
      .compile();
    await this.q.executeQuery(prepared(insert));
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
   * Adds `bytes` to the workspace's usage if used + reserved + bytes stays within the workspace's
   * quota as it stands now (always, without a quota). False when it does not fit.
   */
  async chargeUsage(workspaceId: string, bytes: number): Promise<boolean> {
    const charged = await this.q
      .updateTable('workspaces')
      .set((eb) => ({ used_bytes: eb('used_bytes', '+', bytes) }))
      .where('id', '=', workspaceId)
      .where(sql<boolean>`(quota_bytes is null or used_bytes + reserved_bytes + ${bytes} <= quota_bytes)`)
      .executeTakeFirst();
    return Number(charged.numUpdatedRows) > 0;
  }

  /**
   * Makes the staged object under `blob.storage_key` the blob `blob`, unless the workspace already
   * has a blob of these bytes ('exists': nothing changed; the caller takes that blob instead). The
   * intent goes, the quota it held is given back and the blob's size charged instead (checked
   * against the workspace's quota as it is now, counting every other upload's reservation), and
   * the row is written. 'over-quota' when the bytes do not fit: the caller then throws, and its
   * transaction's rollback undoes the rest. Run it in a transaction.
   *
   * PostgreSQL does it in one statement (each one is a round trip there), the insert first: a blob
   * of the same bytes committed at the same moment by another upload makes it do nothing instead
   * of failing the transaction on blobs_workspace_sha_uq. SQLite runs one writer at a time, so a
   * lookup first and three plain statements in the caller's transaction do the same.
   */
  async adopt(blob: BlobRow): Promise<'adopted' | 'over-quota' | 'exists'> {
    if (flavourOf(this.q) === 'sqlite') {
      if (await this.findBySha256(blob.workspace_id, blob.sha256)) return 'exists';
      await this.dropIntent(blob.storage_key);
      if (!(await this.chargeUsage(blob.workspace_id, Number(blob.size)))) return 'over-quota';
      await this.insert(blob);
      return 'adopted';
    }
    const { rows } = await sql<{ inserted: number | string; charged: number | string }>`
      ${adoptSteps(blob)}
      select (select count(*) from ins) as inserted, (select count(*) from charged) as charged`.execute(this.q);
    if (Number(rows[0]?.inserted) === 0) return 'exists';
    return Number(rows[0]?.charged) === 1 ? 'adopted' : 'over-quota';
  }

  /**
   * Outside any transaction: `adopt(blob)` and the insert of `file` (a new file of these bytes)
   * at once. On PostgreSQL as one statement, so the workspace row (usage, and the counters the
   * file's triggers keep) is held for the statement alone instead of across round trips to Node;
   * on SQLite as one synchronous transaction of prepared statements. All of
   * it is done (true), or none of it (false): when the name is taken, the workspace already has
   * these bytes, they do not fit the quota, or any of that changed while the statement ran. The
   * caller then takes the transaction path, which sorts each case out.
   */
  async adoptWithFile(blob: BlobRow, file: Insertable<FileTable>): Promise<boolean> {
    const columns = Object.keys(file) as (keyof FileTable)[];
    if (flavourOf(this.q) === 'sqlite') {
      // SQLite runs in-process: the same steps as prepared statements, synchronous, without a
      // builder per statement; outside a caller's transaction they share a COMMIT with the other
      // uploads committing in the same turn of the event loop (sqlite-commit-group.ts).
      const database = sqliteHandle(this.q);
      if (!database) return false;
      try {
        await commitGroupOf(this.q, database).run((db) => adoptWithFileSqlite(db, blob, file, columns));
        return true;
      } catch (err) {
        if (err instanceof NothingDone || (err as { code?: unknown }).code === 'SQLITE_CONSTRAINT_FOREIGNKEY')
          return false;
        throw err;
      }
    }
    const nameFree = sql`not exists (select 1 from files
       where workspace_id = ${file.workspace_id} and coalesce(folder_id, '') = ${file.folder_id ?? ''} and name = ${file.name})`;
    try {
      const statement = sql<{ outcome: string }>`
        ${adoptSteps(blob, nameFree)}, filed as (
          insert into files (${sql.join(columns.map((c) => sql.ref(c)))})
          select ${sql.join(columns.map((c) => file[c]))} where exists (select 1 from charged)
          on conflict do nothing
          returning id
        )
        select case
          when exists (select 1 from filed) then 'filed'
          when not exists (select 1 from ins) then 'untouched'
          else stowage_undo('the name or the quota changed while the file was added')
        end as outcome`.compile(this.q);
      const { rows } = await this.q.executeQuery(prepared(statement));
      return rows[0]?.outcome === 'filed';
    } catch (err) {
      // stowage_undo rolled the statement back; or the folder went meanwhile (foreign key).
      const code = (err as { code?: unknown }).code;
      if (code === UNDO_SQLSTATE || code === '23503') return false;
      throw err;
    }
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
