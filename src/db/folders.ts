// Folders in the database. A folder's path is written into its subfolders' paths (not into its
// files, which point at it by id), so a rename or delete walks the folders below it, never files.
import { type Insertable, type Kysely, sql } from 'kysely';
import { isUniqueViolation } from './database.ts';
import { likeContains, likeEscaped } from './like.ts';
import type { Database, FolderRow, FolderTable } from './schema.ts';

export type NewFolder = Insertable<FolderTable>;

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

/** The ids of folder `id` and of every folder below it (an index walk over parent_id). */
const subtree = (id: string) => sql<string>`(
  with recursive tree(id) as (
    select id from folders where id = ${id}
    union all
    select c.id from folders c join tree on c.parent_id = tree.id
  ) select id from tree)`;

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

  /** How many files are in each folder and below, and their total size: the folders' counters summed. */
  async totalsOf(ids: string[]): Promise<Map<string, { items: number; size: number }>> {
    const totals = new Map<string, { items: number; size: number }>();
    if (ids.length === 0) return totals;
    const { rows } = await sql<{ root: string; items: number; size: number }>`
      with recursive tree(root, id) as (
        select id, id from folders where id in (${sql.join(ids)})
        union all
        select tree.root, c.id from folders c join tree on c.parent_id = tree.id
      )
      select tree.root as root, coalesce(sum(d.file_count), 0) as items, coalesce(sum(d.file_bytes), 0) as size
        from tree join folders d on d.id = tree.id group by tree.root`.execute(this.db);
    for (const r of rows) totals.set(r.root, { items: Number(r.items), size: Number(r.size) });
    return totals;
  }

  async contentTotals(id: string): Promise<{ items: number; size: number }> {
    return (await this.totalsOf([id])).get(id) ?? { items: 0, size: 0 };
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
  async insert(row: NewFolder): Promise<boolean> {
    try {
      await this.db.insertInto('folders').values(row).execute();
      return true;
    } catch (err) {
      if (isUniqueViolation(err)) return false;
      throw err;
    }
  }

  /** Inserts the folder unless one is at its path already (concurrent uploads create the same folders). */
  async insertIfPathFree(row: NewFolder): Promise<void> {
    await this.db
      .insertInto('folders')
      .values(row)
      .onConflict((oc) => oc.columns(['workspace_id', 'path']).doNothing())
      .execute();
  }

  /**
   * Renames the folder `id` (at `oldPath`) to `name` at `newPath`; the paths of the folders below
   * it follow (files hold no path: none is touched). False when a folder is already at the new
   * path: then the transaction must be rolled back (throw).
   */
  async movePath(
    id: string,
    change: { name: string; oldPath: string; newPath: string; at: string; parentId?: string | null },
  ): Promise<boolean> {
    const { name, oldPath, newPath, at, parentId } = change;
    try {
      await this.db
        .updateTable('folders')
        .set({ path: sql<string>`${newPath} || substr(path, ${oldPath.length + 1})` })
        .where('id', 'in', subtree(id))
        .where('id', '<>', id)
        .execute();
      await this.db
        .updateTable('folders')
        .set({ name, path: newPath, updated_at: at, ...(parentId !== undefined ? { parent_id: parentId } : {}) })
        .where('id', '=', id)
        .execute();
      return true;
    } catch (err) {
      if (isUniqueViolation(err)) return false;
      throw err;
    }
  }

  /** Whether the folder holds a subfolder or a file (with no subfolder, its files are all it holds). */
  async hasContents(folder: FolderRow): Promise<boolean> {
    const [file, child] = await Promise.all([
      this.db.selectFrom('files').select('id').where('folder_id', '=', folder.id).limit(1).executeTakeFirst(),
      this.db.selectFrom('folders').select('id').where('parent_id', '=', folder.id).limit(1).executeTakeFirst(),
    ]);
    return Boolean(file || child);
  }

  /** Deletes every file in the folder or below; returns the blobs they used (each once), for the caller to release. */
  async deleteFilesUnder(folder: FolderRow): Promise<string[]> {
    const under = (
      await this.db.selectFrom('folders').select('id').where('id', 'in', subtree(folder.id)).execute()
    ).map((r) => r.id);
    const blobs = new Set<string>();
    // A folder at a time, so no statement carries more ids than SQLite takes.
    for (const folderId of under) {
      const files = await this.db.selectFrom('files').select('blob_id').where('folder_id', '=', folderId).execute();
      for (const f of files) blobs.add(f.blob_id);
      await this.db.deleteFrom('files').where('folder_id', '=', folderId).execute();
    }
    return [...blobs];
  }

  /** Deletes the folder and its subfolders (their files must be gone: `deleteFilesUnder`). */
  async deleteTree(folder: FolderRow): Promise<void> {
    await this.db.deleteFrom('folders').where('id', 'in', subtree(folder.id)).execute();
  }
}
