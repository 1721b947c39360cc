// Transformation presets in the database: a workspace's named transformation texts, keyed by
// (workspace_id, name).
import type { Kysely } from 'kysely';
import { isUniqueViolation } from './database.ts';
import type { Database, PresetRow } from './schema.ts';

export class PresetRepository {
  /** `db` may be a transaction: then every method takes part in it. */
  constructor(private readonly db: Kysely<Database>) {}

  /** Every preset of the workspace, by name. */
  async list(workspaceId: string): Promise<PresetRow[]> {
    return this.db
      .selectFrom('transformation_presets')
      .selectAll()
      .where('workspace_id', '=', workspaceId)
      .orderBy('name')
      .execute();
  }

  /** Name → transformation, for delivery (no timestamps). */
  async texts(workspaceId: string): Promise<Map<string, string>> {
    const rows = await this.db
      .selectFrom('transformation_presets')
      .select(['name', 'transformation'])
      .where('workspace_id', '=', workspaceId)
      .execute();
    return new Map(rows.map((r) => [r.name, r.transformation]));
  }

  async byName(workspaceId: string, name: string): Promise<PresetRow | undefined> {
    return this.db
      .selectFrom('transformation_presets')
      .selectAll()
      .where('workspace_id', '=', workspaceId)
      .where('name', '=', name)
      .executeTakeFirst();
  }

  async count(workspaceId: string): Promise<number> {
    const { n } = await this.db
      .selectFrom('transformation_presets')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('workspace_id', '=', workspaceId)
      .executeTakeFirstOrThrow();
    return Number(n);
  }

  /** Inserts the preset; false when the workspace already has one of that name. */
  async insert(row: PresetRow): Promise<boolean> {
    try {
      await this.db.insertInto('transformation_presets').values(row).execute();
      return true;
    } catch (err) {
      if (isUniqueViolation(err)) return false;
      throw err;
    }
  }

  /** Replaces the preset's text; false when there is none of that name. */
  async update(workspaceId: string, name: string, transformation: string, updatedAt: string): Promise<boolean> {
    const res = await this.db
      .updateTable('transformation_presets')
      .set({ transformation, updated_at: updatedAt })
      .where('workspace_id', '=', workspaceId)
      .where('name', '=', name)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  }

  /** Deletes the preset; returns whether there was one. */
  async delete(workspaceId: string, name: string): Promise<boolean> {
    const res = await this.db
      .deleteFrom('transformation_presets')
      .where('workspace_id', '=', workspaceId)
      .where('name', '=', name)
      .executeTakeFirst();
    return Number(res.numDeletedRows) > 0;
  }
}
