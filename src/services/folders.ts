// Folders by path. Uploads with a `folder` create what is missing; the Folders API lists,
// creates, renames (paths below follow) and deletes (with everything inside).
import { type Kysely, sql } from 'kysely';
import { newShortId, newUuid } from '../crypto/ids.ts';
import { type Db, isUniqueViolation, nowIso } from '../db/database.ts';
import { likeBelow, likeContains, likeEscaped } from '../db/like.ts';
import type { Database, FolderRow } from '../db/schema.ts';
import { errors } from '../errors.ts';
import type { BlobStore } from '../uploads/blob-store.ts';
import { checkName, parseFolderPath } from '../uploads/names.ts';

/** The folder at `segments`, creating it and its parents as needed; null for the root. */
export async function ensureFolderPath(
  db: Kysely<Database>,
  workspaceId: string,
  segments: string[],
): Promise<FolderRow | null> {
  let parent: FolderRow | null = null;
  for (let i = 0; i < segments.length; i++) {
    const path = segments.slice(0, i + 1).join('/');
    const now = nowIso();
    // Concurrent uploads may create the same folder: insert-or-ignore, then read.
    await db
      .insertInto('folders')
      .values({
        id: newUuid(),
        folder_no: newShortId(),
        workspace_id: workspaceId,
        parent_id: parent?.id ?? null,
        name: segments[i],
        path,
        created_at: now,
        updated_at: now,
      })
      .onConflict((oc) => oc.columns(['workspace_id', 'path']).doNothing())
      .execute();
    parent = await db
      .selectFrom('folders')
      .selectAll()
      .where('workspace_id', '=', workspaceId)
      .where('path', '=', path)
      .executeTakeFirstOrThrow();
  }
  return parent;
}

export interface FolderView {
  id: string;
  folder_no: string;
  name: string;
  parent_folder_no: string | null;
  /** The hosted API's names: parent_folder is the parent's id (a UUID), null at the root. */
  parent_folder: string | null;
  workspace_id: string;
  workspace_no: string;
  workspace: { workspace_no: string };
  is_active: boolean;
  is_delete: boolean;
  path: string;
  total_items: number;
  total_size: number;
  created_at: string;
  updated_at: string;
}

/** A folder list without `limit` returns every child folder, up to this many (the hosted API pages nothing). */
export const FOLDER_LIST_CAP = 1000;

/** Folders API (docs/api/files-folders.md#folders): list, create, rename, delete (with everything inside only when asked). */
export class FolderService {
  constructor(
    private readonly db: Db,
    private readonly blobs: BlobStore,
  ) {}

  private async byNo(
    workspaceId: string,
    folderNo: unknown,
    trx: Kysely<Database> = this.db.kysely,
  ): Promise<FolderRow> {
    if (typeof folderNo !== 'string' || !/^[0-9A-Za-z]{10,16}$/.test(folderNo)) throw errors.folderNotFound();
    const row = await trx
      .selectFrom('folders')
      .selectAll()
      .where('workspace_id', '=', workspaceId)
      .where('folder_no', '=', folderNo)
      .executeTakeFirst();
    if (!row) throw errors.folderNotFound();
    return row;
  }

  /** Files anywhere below the folder, and their total size. */
  private async view(row: FolderRow): Promise<FolderView> {
    const [totals, parent] = await Promise.all([
      this.db.kysely
        .selectFrom('files')
        .select((eb) => [
          eb.fn.countAll<number>().as('items'),
          eb.fn.coalesce(eb.fn.sum<number>('size'), eb.lit(0)).as('size'),
        ])
        .where('workspace_id', '=', row.workspace_id)
        .where((eb) => eb.or([eb('folder_path', '=', row.path), likeEscaped('folder_path', likeBelow(row.path), true)]))
        .executeTakeFirstOrThrow(),
      row.parent_id
        ? this.db.kysely.selectFrom('folders').select('folder_no').where('id', '=', row.parent_id).executeTakeFirst()
        : undefined,
    ]);
    return {
      id: row.id,
      folder_no: row.folder_no,
      name: row.name,
      parent_folder_no: parent?.folder_no ?? null,
      parent_folder: row.parent_id,
      workspace_id: row.workspace_id,
      workspace_no: row.workspace_id,
      workspace: { workspace_no: row.workspace_id },
      is_active: true,
      is_delete: false,
      path: row.path,
      total_items: Number(totals.items),
      total_size: Number(totals.size),
      created_at: row.created_at,
      updated_at: row.updated_at,
    };
  }

  /** Without `limit`: every child, up to FOLDER_LIST_CAP (`meta.limit` says the cap, `hasMore` whether it cut). */
  async list(
    workspaceId: string,
    query: {
      parent_folder_no?: string;
      search?: string;
      page?: number;
      limit?: number;
      sort?: 'name_asc' | 'name_desc' | 'created_at_asc' | 'created_at_desc';
    },
  ) {
    const q = { ...query, page: query.page ?? 1, limit: query.limit ?? FOLDER_LIST_CAP };
    let base = this.db.kysely.selectFrom('folders').where('workspace_id', '=', workspaceId);
    if (q.parent_folder_no !== undefined) {
      const parent = await this.byNo(workspaceId, q.parent_folder_no);
      base = base.where('parent_id', '=', parent.id);
    } else {
      base = base.where('parent_id', 'is', null);
    }
    if (q.search) base = base.where(likeEscaped('name', likeContains(q.search.normalize('NFC'))));
    const [{ total }, rows] = await Promise.all([
      base.select((eb) => eb.fn.countAll<number>().as('total')).executeTakeFirstOrThrow(),
      base
        .selectAll()
        .orderBy(q.sort?.startsWith('created_at') ? 'created_at' : 'name', q.sort?.endsWith('_desc') ? 'desc' : 'asc')
        .orderBy('id', q.sort?.endsWith('_desc') ? 'desc' : 'asc')
        .limit(q.limit)
        .offset((q.page - 1) * q.limit)
        .execute(),
    ]);
    const count = Number(total);
    return {
      folders: await Promise.all(rows.map((r) => this.view(r))),
      meta: { page: q.page, limit: q.limit, total: count, hasMore: q.page * q.limit < count },
    };
  }

  /** `folder_name` and `path` (the parent's path) are the older hosted SDKs' way to say `name` and the parent. */
  async create(
    workspaceId: string,
    input: { name?: unknown; folder_name?: unknown; parent_folder_no?: unknown; path?: unknown },
  ): Promise<FolderView> {
    const rawName = input.name ?? input.folder_name;
    if (typeof rawName !== 'string') throw errors.validation('name is required');
    const name = checkName(rawName, 'name');
    let parent: FolderRow | null = null;
    if (input.parent_folder_no !== undefined && input.parent_folder_no !== null)
      parent = await this.byNo(workspaceId, input.parent_folder_no);
    else if (typeof input.path === 'string' && parseFolderPath(input.path).length > 0) {
      const path = parseFolderPath(input.path).join('/');
      parent =
        (await this.db.kysely
          .selectFrom('folders')
          .selectAll()
          .where('workspace_id', '=', workspaceId)
          .where('path', '=', path)
          .executeTakeFirst()) ?? null;
      if (!parent) throw errors.folderNotFound();
    }
    const now = nowIso();
    const row: FolderRow = {
      id: newUuid(),
      folder_no: newShortId(),
      workspace_id: workspaceId,
      parent_id: parent?.id ?? null,
      name,
      path: parent ? `${parent.path}/${name}` : name,
      created_at: now,
      updated_at: now,
    };
    try {
      await this.db.kysely.insertInto('folders').values(row).execute();
    } catch (err) {
      if (isUniqueViolation(err)) throw errors.folderExists();
      throw err;
    }
    return this.view(row);
  }

  /** Renames a folder; the paths of everything below it follow, in one transaction. */
  async rename(workspaceId: string, folderNo: string, rawName: unknown): Promise<FolderView> {
    if (typeof rawName !== 'string') throw errors.validation('name is required');
    const name = checkName(rawName, 'name');
    const renamed = await this.db.kysely.transaction().execute(async (trx) => {
      const row = await this.byNo(workspaceId, folderNo, trx);
      const oldPath = row.path;
      const newPath = oldPath.includes('/') ? `${oldPath.slice(0, oldPath.lastIndexOf('/'))}/${name}` : name;
      if (newPath === oldPath) return row;
      const now = nowIso();
      const moved = sql<string>`${newPath} || substr(${sql.ref('path')}, ${oldPath.length + 1})`;
      try {
        await trx
          .updateTable('folders')
          .set({ name, path: newPath, updated_at: now })
          .where('id', '=', row.id)
          .execute();
        await trx
          .updateTable('folders')
          .set({ path: moved })
          .where('workspace_id', '=', workspaceId)
          .where(likeEscaped('path', likeBelow(oldPath), true))
          .execute();
        await trx
          .updateTable('files')
          .set({ folder_path: sql<string>`${newPath} || substr(${sql.ref('folder_path')}, ${oldPath.length + 1})` })
          .where('workspace_id', '=', workspaceId)
          .where((eb) => eb.or([eb('folder_path', '=', oldPath), likeEscaped('folder_path', likeBelow(oldPath), true)]))
          .execute();
      } catch (err) {
        if (isUniqueViolation(err)) throw errors.folderExists();
        throw err;
      }
      return { ...row, name, path: newPath, updated_at: now };
    });
    return this.view(renamed);
  }

  /**
   * Deletes an empty folder; with `recursive`, also its subfolders and every file in them
   * (bytes no other file uses go). A non-empty folder without `recursive` is 409: nothing is
   * lost by surprise.
   */
  async delete(workspaceId: string, folderNo: string, opts: { recursive?: boolean } = {}): Promise<void> {
    const released = await this.db.kysely.transaction().execute(async (trx) => {
      const row = await this.byNo(workspaceId, folderNo, trx);
      const inside = (eb: any) =>
        eb.or([eb('folder_path', '=', row.path), likeEscaped('folder_path', likeBelow(row.path), true)]);
      if (!opts.recursive) {
        const [file, child] = await Promise.all([
          trx
            .selectFrom('files')
            .select('id')
            .where('workspace_id', '=', workspaceId)
            .where(inside)
            .limit(1)
            .executeTakeFirst(),
          trx.selectFrom('folders').select('id').where('parent_id', '=', row.id).limit(1).executeTakeFirst(),
        ]);
        if (file || child) throw errors.folderNotEmpty();
      }
      const files = await trx
        .selectFrom('files')
        .select(['id', 'blob_id'])
        .where('workspace_id', '=', workspaceId)
        .where(inside)
        .execute();
      await trx.deleteFrom('files').where('workspace_id', '=', workspaceId).where(inside).execute();
      const keys: string[] = [];
      for (const blobId of new Set(files.map((f) => f.blob_id))) {
        const key = await this.blobs.releaseIfUnused(trx, blobId);
        if (key) keys.push(key);
      }
      await trx
        .deleteFrom('folders')
        .where('workspace_id', '=', workspaceId)
        .where((eb) => eb.or([eb('id', '=', row.id), likeEscaped('path', likeBelow(row.path), true)]))
        .execute();
      return keys;
    });
    for (const key of released) await this.blobs.forget(workspaceId, key);
  }
}
