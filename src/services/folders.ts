// Folders by path. Uploads with a `folder` create what is missing; the Folders API lists,
// creates, renames (paths below follow) and deletes (with everything inside).
import type { Kysely } from 'kysely';
import type { Folder, FolderCreateBody, FolderListQuery } from '../contract/folders.ts';
import { newShortId, newUuid } from '../crypto/ids.ts';
import { type Db, holdWorkspace, inTransaction, nowIso } from '../db/database.ts';
import { FolderRepository, type NewFolder } from '../db/folders.ts';
import type { Database, FolderRow } from '../db/schema.ts';
import { errors } from '../errors.ts';
import type { DomainEvents } from '../events.ts';
import type { BlobStore } from '../uploads/blob-store.ts';
import { checkName, parseFolderPath } from '../uploads/names.ts';

/** The folder at `segments`, creating it and its parents as needed; null for the root. */
export async function ensureFolderPath(
  db: Kysely<Database>,
  workspaceId: string,
  segments: string[],
): Promise<FolderRow | null> {
  const folders = new FolderRepository(db);
  let parent: FolderRow | null = null;
  for (let i = 0; i < segments.length; i++) {
    const path = segments.slice(0, i + 1).join('/');
    const now = nowIso();
    // Concurrent uploads may create the same folder: insert-or-ignore, then read.
    await folders.insertIfPathFree({
      id: newUuid(),
      folder_no: newShortId(),
      workspace_id: workspaceId,
      parent_id: parent?.id ?? null,
      name: segments[i],
      path,
      created_at: now,
      updated_at: now,
    });
    parent = (await folders.byPath(workspaceId, path)) ?? null;
    if (!parent) throw new Error(`folder ${path} vanished after it was created`);
  }
  return parent;
}

/** A folder list without `limit` returns every child folder, up to this many (the hosted API pages nothing). */
export const FOLDER_LIST_CAP = 1000;

/** Folders API (docs/api/files-folders.md#folders): list, create, rename, delete (with everything inside only when asked). */
export class FolderService {
  private readonly repo: FolderRepository;

  constructor(
    private readonly db: Db,
    private readonly blobs: BlobStore,
    /** `files.changed` after a rename or delete: the paths of the files inside changed. */
    private readonly events?: DomainEvents,
  ) {
    this.repo = new FolderRepository(db.kysely);
  }

  private async byNo(workspaceId: string, folderNo: unknown, repo = this.repo): Promise<FolderRow> {
    if (typeof folderNo !== 'string' || !/^[0-9A-Za-z]{10,16}$/.test(folderNo)) throw errors.folderNotFound();
    const row = await repo.byNo(workspaceId, folderNo);
    if (!row) throw errors.folderNotFound();
    return row;
  }

  /** The folder as the API shows it, with the files anywhere below it and their total size. */
  private async view(row: FolderRow): Promise<Folder> {
    const [totals, parentNo] = await Promise.all([
      this.repo.contentTotals(row.id),
      row.parent_id ? this.repo.folderNoOf(row.parent_id) : undefined,
    ]);
    return shape(row, totals, parentNo ?? null);
  }

  /** Without `limit`: every child, up to FOLDER_LIST_CAP (`meta.limit` says the cap, `hasMore` whether it cut). */
  async list(workspaceId: string, query: FolderListQuery) {
    const q = { ...query, page: query.page ?? 1, limit: query.limit ?? FOLDER_LIST_CAP };
    const parent = q.parent_folder_no !== undefined ? await this.byNo(workspaceId, q.parent_folder_no) : null;
    const parentId = parent?.id ?? null;
    const { rows, total: count } = await this.repo.page(
      workspaceId,
      { parentId, nameContains: q.search?.normalize('NFC') },
      {
        sort: q.sort?.startsWith('created_at') ? 'created_at' : 'name',
        direction: q.sort?.endsWith('_desc') ? 'desc' : 'asc',
        page: q.page,
        limit: q.limit,
      },
    );
    // One query for every listed folder's totals (a walk over the folders below them, not their files).
    const totals = await this.repo.totalsOf(rows.map((r) => r.id));
    return {
      folders: rows.map((r) => shape(r, totals.get(r.id) ?? { items: 0, size: 0 }, parent?.folder_no ?? null)),
      meta: { page: q.page, limit: q.limit, total: count, hasMore: q.page * q.limit < count },
    };
  }

  /** `folder_name` and `path` (the parent's path) are the older hosted SDKs' way to say `name` and the parent. */
  async create(workspaceId: string, input: FolderCreateBody): Promise<Folder> {
    const rawName = input.name ?? input.folder_name;
    if (typeof rawName !== 'string') throw errors.validation('name is required');
    const name = checkName(rawName, 'name');
    const path = typeof input.path === 'string' ? parseFolderPath(input.path).join('/') : '';
    const byParentNo = input.parent_folder_no !== undefined && input.parent_folder_no !== null;
    // The parent is read inside the transaction that inserts below it, behind the workspace's row
    // (as renames, moves and deletes of folders): a rename cannot leave the new folder at the
    // parent's old path, nor a delete leave it without its parent.
    const fresh = await inTransaction(this.db.kysely, async (trx) => {
      await holdWorkspace(trx, workspaceId);
      const repo = new FolderRepository(trx);
      let parent: FolderRow | null = null;
      if (byParentNo) parent = await this.byNo(workspaceId, input.parent_folder_no, repo);
      else if (path) {
        parent = (await repo.byPath(workspaceId, path)) ?? null;
        if (!parent) throw errors.folderNotFound();
      }
      const now = nowIso();
      const row: NewFolder = {
        id: newUuid(),
        folder_no: newShortId(),
        workspace_id: workspaceId,
        parent_id: parent?.id ?? null,
        name,
        path: parent ? `${parent.path}/${name}` : name,
        created_at: now,
        updated_at: now,
      };
      if (!(await repo.insert(row))) throw errors.folderExists();
      return row;
    });
    return this.view({ ...fresh, parent_id: fresh.parent_id ?? null, file_count: 0, file_bytes: 0 });
  }

  /** Renames a folder; the paths of everything below it follow, in one transaction. */
  async rename(workspaceId: string, folderNo: string, rawName: unknown): Promise<Folder> {
    if (typeof rawName !== 'string') throw errors.validation('name is required');
    const name = checkName(rawName, 'name');
    const renamed = await inTransaction(this.db.kysely, async (trx) => {
      // Behind the workspace's row, as uploads (which may create folders below) and deletes.
      await holdWorkspace(trx, workspaceId);
      const repo = new FolderRepository(trx);
      const row = await this.byNo(workspaceId, folderNo, repo);
      const oldPath = row.path;
      const newPath = oldPath.includes('/') ? `${oldPath.slice(0, oldPath.lastIndexOf('/'))}/${name}` : name;
      if (newPath === oldPath) return row;
      const now = nowIso();
      if (!(await repo.movePath(row.id, { name, oldPath, newPath, at: now }))) throw errors.folderExists();
      return { ...row, name, path: newPath, updated_at: now };
    });
    this.events?.emit('files.changed', { workspaceId });
    return this.view(renamed);
  }

  /**
   * Moves a folder, with everything in it, under another parent (null: the root). A folder cannot
   * go into itself or a folder inside it (409 FOLDER_INTO_ITSELF); the new parent holding a folder
   * of the same name is 409 FOLDER_EXISTS.
   */
  async move(workspaceId: string, folderNo: string, parentNo: string | null): Promise<Folder> {
    const moved = await inTransaction(this.db.kysely, async (trx) => {
      await holdWorkspace(trx, workspaceId);
      const repo = new FolderRepository(trx);
      const row = await this.byNo(workspaceId, folderNo, repo);
      const parent = parentNo === null ? null : await this.byNo(workspaceId, parentNo, repo);
      if (parent && (parent.id === row.id || parent.path.startsWith(`${row.path}/`))) throw errors.folderIntoItself();
      const newPath = parent ? `${parent.path}/${row.name}` : row.name;
      if (newPath === row.path) return row;
      const now = nowIso();
      const change = { name: row.name, oldPath: row.path, newPath, at: now, parentId: parent?.id ?? null };
      if (!(await repo.movePath(row.id, change))) throw errors.folderExists();
      return { ...row, path: newPath, parent_id: parent?.id ?? null, updated_at: now };
    });
    this.events?.emit('files.changed', { workspaceId });
    return this.view(moved);
  }

  /**
   * Deletes an empty folder; with `recursive`, also its subfolders and every file in them
   * (bytes no other file uses go). A non-empty folder without `recursive` is 409: nothing is
   * lost by surprise.
   */
  async delete(workspaceId: string, folderNo: string, opts: { recursive?: boolean } = {}): Promise<void> {
    const released = await inTransaction(this.db.kysely, async (trx) => {
      await holdWorkspace(trx, workspaceId);
      const repo = new FolderRepository(trx);
      const row = await this.byNo(workspaceId, folderNo, repo);
      if (!opts.recursive && (await repo.hasContents(row))) throw errors.folderNotEmpty();
      const keys: string[] = [];
      for (const blobId of await repo.deleteFilesUnder(row)) {
        const key = await this.blobs.releaseIfUnused(trx, blobId);
        if (key) keys.push(key);
      }
      await repo.deleteTree(row);
      return keys;
    });
    this.events?.emit('files.changed', { workspaceId });
    for (const key of released) await this.blobs.forget(workspaceId, key);
  }
}

function shape(row: FolderRow, totals: { items: number; size: number }, parentNo: string | null): Folder {
  return {
    id: row.id,
    folder_no: row.folder_no,
    name: row.name,
    parent_folder_no: parentNo,
    parent_folder: row.parent_id,
    workspace_id: row.workspace_id,
    workspace_no: row.workspace_id,
    workspace: { workspace_no: row.workspace_id },
    is_active: true,
    is_delete: false,
    path: row.path,
    total_items: totals.items,
    total_size: totals.size,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}
