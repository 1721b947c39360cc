// Sources in the database: a workspace's named origins, by id or by name, paged lists, and
// the sealed secrets re-sealed under a new master key.
import type { Kysely, Updateable } from 'kysely';
import { isUniqueViolation } from './database.ts';
import { flavourOf } from './derived.ts';
import { likeContains, likeEscaped } from './like.ts';
import type { Database, SourceRow, SourceTable } from './schema.ts';

export interface SourceFilter {
  type?: string;
  /** Case-insensitive substring of the name. */
  nameContains?: string;
  page: number;
  limit: number;
}

export type SourceChanges = Omit<Updateable<SourceTable>, 'id' | 'workspace_id' | 'created_at'>;

export class SourceRepository {
  /** `db` may be a transaction: then every method takes part in it. */
  constructor(private readonly db: Kysely<Database>) {}

  /** Inserts the source; false when the workspace already has a source of that name. */
  async insert(row: SourceRow): Promise<boolean> {
    return unlessNameTaken(() => this.db.insertInto('sources').values(row).execute());
  }

  /** A page of the workspace's sources, newest first, and how many match in all. */
  async list(workspaceId: string, f: SourceFilter): Promise<{ rows: SourceRow[]; total: number }> {
    let base = this.db.selectFrom('sources').where('workspace_id', '=', workspaceId);
    if (f.type !== undefined) base = base.where('type', '=', f.type);
    if (f.nameContains) base = base.where(likeEscaped('name', likeContains(f.nameContains)));
    const [{ total }, rows] = await Promise.all([
      base.select((eb) => eb.fn.countAll<number>().as('total')).executeTakeFirstOrThrow(),
      base
        .selectAll()
        .orderBy('created_at', 'desc')
        .orderBy('id', 'desc')
        .limit(f.limit)
        .offset((f.page - 1) * f.limit)
        .execute(),
    ]);
    return { rows, total: Number(total) };
  }

  /** `id` as stored: a lower-case UUID. */
  /** `lock`: PostgreSQL locks the row for the rest of the transaction (SQLite's one writer needs none). */
  async byId(workspaceId: string, id: string, lock = false): Promise<SourceRow | undefined> {
    return this.db
      .selectFrom('sources')
      .selectAll()
      .where('id', '=', id)
      .where('workspace_id', '=', workspaceId)
      .$if(lock && flavourOf(this.db) === 'postgres', (qb) => qb.forUpdate())
      .executeTakeFirst();
  }

  async byName(workspaceId: string, name: string): Promise<SourceRow | undefined> {
    return this.db
      .selectFrom('sources')
      .selectAll()
      .where('workspace_id', '=', workspaceId)
      .where('name', '=', name)
      .executeTakeFirst();
  }

  /** Changes the source; false when the new name is another source's. */
  async update(workspaceId: string, id: string, changes: SourceChanges): Promise<boolean> {
    return unlessNameTaken(() =>
      this.db
        .updateTable('sources')
        .set(changes)
        .where('id', '=', id)
        .where('workspace_id', '=', workspaceId)
        .execute(),
    );
  }

  /** Deletes the source; returns whether there was one. */
  async delete(workspaceId: string, id: string): Promise<boolean> {
    const res = await this.db
      .deleteFrom('sources')
      .where('id', '=', id)
      .where('workspace_id', '=', workspaceId)
      .executeTakeFirst();
    return Number(res.numDeletedRows) > 0;
  }

  /** Every source that has sealed secrets, in every workspace. */
  async sealedSecrets(): Promise<{ id: string; secrets: string | null }[]> {
    return this.db.selectFrom('sources').select(['id', 'secrets']).where('secrets', 'is not', null).execute();
  }

  /** Replaces the sealed secrets only if they are still `old`; returns whether it did. */
  async replaceSecrets(id: string, old: string, sealed: string): Promise<boolean> {
    const res = await this.db
      .updateTable('sources')
      .set({ secrets: sealed })
      .where('id', '=', id)
      .where('secrets', '=', old)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  }
}

/** Runs the write; false instead of the unique violation of (workspace_id, name). */
async function unlessNameTaken(write: () => Promise<unknown>): Promise<boolean> {
  try {
    await write();
    return true;
  } catch (err) {
    if (isUniqueViolation(err)) return false;
    throw err;
  }
}
