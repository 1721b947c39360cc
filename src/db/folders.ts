// Folders in the database. A folder's path is also written into its files (`folder_path`) and
// its subfolders' paths, so a rename or delete here covers the whole tree below it.
import { type ExpressionBuilder, type Kysely, sql } from 'kysely';
import { isUniqueViolation } from './database.ts';
import { likeBelow, likeContains, likeEscaped } from './like.ts';
import type { Database, FolderRow } from './schema.ts';

export interface FolderFilter {
  /** The folders directly in this one; null for the top level. */
  parentId: string | null;
  /** Case-insensitive substring of the name (give it NFC). */
  nameContains?: string;
}

export interface FolderPage {
  sort: 'name' | 'created_at';
  direction: 'asc' | 'desc';
  page: number;
  limit: number;
}

/** Files whose folder path is `path` or below it. */
const filesUnder = (path: string) => (eb: ExpressionBuilder<Database, 'files'>) =>
  eb.or([eb('folder_path', '=', path), likeEscaped('folder_path', likeBelow(path), true)]);

export class FolderRepository {
  /** `db` may be a transaction: then every method takes part in it (`movePath` and `deleteTree` should). */
  constructor(private readonly db: Kysely<Database>) {}

  async byNo(workspaceId: string, folderNo: string): Promise<FolderRow | undefined> {
    return this.db
      .selectFrom('folders')
      .selectAll()
      .where('workspace_id', '=', workspaceId)
      .where('folder_no', '=', folderNo)
      .executeTakeFirst();
  }

  async byPath(workspaceId: string, path: string): Promise<FolderRow | undefined> {
    return this.db
      .selectFrom('folders')
      .selectAll()
      .where('workspace_id', '=', workspaceId)
      .where('path', '=', path)
      .executeTakeFirst();
  }

  /** The number of the folder with this id, if there is one. */
  async folderNoOf(id: string): Promise<string | undefined> {
    const row = await this.db.selectFrom('folders').select('folder_no').where('id', '=', id).executeTakeFirst();
    return row?.folder_no;
  }

  /** How many files are in the folder at `path` and below, and their total size. */
  async contentTotals(workspaceId: string, path: string): Promise<{ items: number; size: number }> {
    const row = await this.db
      .selectFrom('files')
      .select((eb) => [
        eb.fn.countAll<number>().as('items'),
        eb.fn.coalesce(eb.fn.sum<number>('size'), eb.lit(0)).as('size'),
      ])
      .where('workspace_id', '=', workspaceId)
      .where(filesUnder(path))
      .executeTakeFirstOrThrow();
    return { items: Number(row.items), size: Number(row.size) };
  }

  /** A page of folders matching `f`, and how many match in all. Ties are ordered by id. */
  async page(workspaceId: string, f: FolderFilter, p: FolderPage): Promise<{ rows: FolderRow[]; total: number }> {
    let base = this.db.selectFrom('folders').where('workspace_id', '=', workspaceId);
    base = f.parentId === null ? base.where('parent_id', 'is', null) : base.where('parent_id', '=', f.parentId);
    if (f.nameContains) base = base.where(likeEscaped('name', likeContains(f.nameContains)));
    const [{ total }, rows] = await Promise.all([
      base.select((eb) => eb.fn.countAll<number>().as('total')).executeTakeFirstOrThrow(),
      base
        .selectAll()
        .orderBy(p.sort, p.direction)
        .orderBy('id', p.direction)
        .limit(p.limit)
        .offset((p.page - 1) * p.limit)
        .execute(),
    ]);
    return { rows, total: Number(total) };
  }

  /** Inserts the folder; false when the workspace already has a folder at its path. */
  async insert(row: FolderRow): Promise<boolean> {
    try {
      await this.db.insertInto('folders').values(row).execute();
      return true;
    } catch (err) {
      if (isUniqueViolation(err)) return false;
      throw err;
    }
  }

  /** Inserts the folder unless one is at its path already (concurrent uploads create the same folders). */
  async insertIfPathFree(row: FolderRow): Promise<void> {
    await this.db
      .insertInto('folders')
      .values(row)
      .onConflict((oc) => oc.columns(['workspace_id', 'path']).doNothing())
      .execute();
  }

  /**
   * Renames the folder `id` (at `oldPath`) to `name` at `newPath`; the paths of its subfolders
   * and of every file in it or below follow. False when a folder is already at one of the new
   * paths: then the transaction must be rolled back (throw), as some rows may have moved.
   */
  async movePath(
    workspaceId: string,
    id: string,
    change: { name: string; oldPath: string; newPath: string; at: string },
  ): Promise<boolean> {
    const { name, oldPath, newPath, at } = change;
    const moved = (column: 'path' | 'folder_path') =>
      sql<string>`${newPath} || substr(${sql.ref(column)}, ${oldPath.length + 1})`;
    try {
      await this.db.updateTable('folders').set({ name, path: newPath, updated_at: at }).where('id', '=', id).execute();
      await this.db
        .updateTable('folders')
        .set({ path: moved('path') })
        .where('workspace_id', '=', workspaceId)
        .where(likeEscaped('path', likeBelow(oldPath), true))
        .execute();
      await this.db
        .updateTable('files')
        .set({ folder_path: moved('folder_path') })
        .where('workspace_id', '=', workspaceId)
        .where(filesUnder(oldPath))
        .execute();
      return true;
    } catch (err) {
      if (isUniqueViolation(err)) return false;
      throw err;
    }
  }

  /** Whether the folder holds a subfolder, or a file in it or below. */
  async hasContents(workspaceId: string, folder: FolderRow): Promise<boolean> {
    const [file, child] = await Promise.all([
      this.db
        .selectFrom('files')
        .select('id')
        .where('workspace_id', '=', workspaceId)
        .where(filesUnder(folder.path))
        .limit(1)
        .executeTakeFirst(),
      this.db.selectFrom('folders').select('id').where('parent_id', '=', folder.id).limit(1).executeTakeFirst(),
    ]);
    return Boolean(file || child);
  }

  /** Deletes every file in the folder or below; returns the blobs they used (each once), for the caller to release. */
  async deleteFilesUnder(workspaceId: string, folder: FolderRow): Promise<string[]> {
    const files = await this.db
      .selectFrom('files')
      .select('blob_id')
      .where('workspace_id', '=', workspaceId)
      .where(filesUnder(folder.path))
      .execute();
    await this.db.deleteFrom('files').where('workspace_id', '=', workspaceId).where(filesUnder(folder.path)).execute();
    return [...new Set(files.map((f) => f.blob_id))];
  }

  /** Deletes the folder and its subfolders (their files must be gone: `deleteFilesUnder`). */
  async deleteTree(workspaceId: string, folder: FolderRow): Promise<void> {
    await this.db
      .deleteFrom('folders')
      .where('workspace_id', '=', workspaceId)
      .where((eb) => eb.or([eb('id', '=', folder.id), likeEscaped('path', likeBelow(folder.path), true)]))
      .execute();
  }
}
