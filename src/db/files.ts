// File records in the database: lookups by number, by name in a folder and by delivery path,
// filtered and sorted pages, and the writes an upload or the Files API makes.
import type { Insertable, Kysely, Updateable } from 'kysely';
import { isUniqueViolation } from './database.ts';
import { escapeLike, likeBelow, likeContains, likeEscaped } from './like.ts';
import type { Database, FileRow, FileTable } from './schema.ts';

/** A file row with its blob's SHA-256 and its folder's number (null at the root). */
export type FileWithRefs = FileRow & { sha256: string; folder_no: string | null };

export interface FileFilter {
  /** Only the files directly in this folder. */
  folderId?: string;
  /** Only the files in this folder path or below it. */
  under?: string;
  /** Case-insensitive substrings the name must all contain (give them NFC). */
  nameContains?: string[];
  /** Only files created at or before this ISO instant. */
  createdAtMost?: string;
  /** Tags the file must all carry. */
  tags?: string[];
}

export type FileSortColumn = 'created_at' | 'updated_at' | 'name' | 'size';

export interface FilePage {
  sort: FileSortColumn;
  direction: 'asc' | 'desc';
  page: number;
  limit: number;
}

/** What delivery needs of a file: its type, dates, privacy and its blob. */
export interface DeliverableFile {
  mime_type: string;
  updated_at: string;
  is_private: number;
  sha256: string;
  size: number;
  storage_key: string;
}

export type FileChanges = Omit<Updateable<FileTable>, 'id' | 'file_no' | 'workspace_id' | 'created_at'>;

export class FileRepository {
  /** `db` may be a transaction: then every method takes part in it. */
  constructor(private readonly db: Kysely<Database>) {}

  private withRefs() {
    return this.db
      .selectFrom('files')
      .innerJoin('blobs', 'blobs.id', 'files.blob_id')
      .leftJoin('folders', 'folders.id', 'files.folder_id')
      .selectAll('files')
      .select(['blobs.sha256 as sha256', 'folders.folder_no as folder_no']);
  }

  async byFileNo(workspaceId: string, fileNo: string): Promise<FileWithRefs | undefined> {
    return this.withRefs()
      .where('files.workspace_id', '=', workspaceId)
      .where('files.file_no', '=', fileNo)
      .executeTakeFirst();
  }

  /** The file of that name directly in the folder at `folderPath` ("" for the root). */
  async byName(workspaceId: string, folderPath: string, name: string): Promise<FileRow | undefined> {
    return this.db
      .selectFrom('files')
      .selectAll()
      .where('workspace_id', '=', workspaceId)
      .where('folder_path', '=', folderPath)
      .where('name', '=', name)
      .executeTakeFirst();
  }

  /** The same lookup as `byName`, with the blob delivery reads. */
  async deliverable(workspaceId: string, folderPath: string, name: string): Promise<DeliverableFile | undefined> {
    return this.db
      .selectFrom('files')
      .innerJoin('blobs', 'blobs.id', 'files.blob_id')
      .select([
        'files.mime_type',
        'files.updated_at',
        'files.is_private',
        'blobs.sha256',
        'blobs.size',
        'blobs.storage_key',
      ])
      .where('files.workspace_id', '=', workspaceId)
      .where('files.folder_path', '=', folderPath)
      .where('files.name', '=', name)
      .executeTakeFirst();
  }

  /** A page of the workspace's files matching `f`, and how many match in all. Ties are ordered by id. */
  async page(workspaceId: string, f: FileFilter, p: FilePage): Promise<{ rows: FileWithRefs[]; total: number }> {
    let base = this.withRefs().where('files.workspace_id', '=', workspaceId);
    if (f.folderId !== undefined) base = base.where('files.folder_id', '=', f.folderId);
    const under = f.under;
    if (under)
      base = base.where((eb) =>
        eb.or([eb('files.folder_path', '=', under), likeEscaped('files.folder_path', likeBelow(under), true)]),
      );
    for (const text of f.nameContains ?? []) base = base.where(likeEscaped('files.name', likeContains(text)));
    if (f.createdAtMost !== undefined) base = base.where('files.created_at', '<=', f.createdAtMost);
    // Tags are stored as a JSON array: an element is its JSON string, quotes included.
    for (const tag of f.tags ?? [])
      base = base.where(likeEscaped('files.tags', `%${escapeLike(JSON.stringify(tag))}%`, true));
    const [{ total }, rows] = await Promise.all([
      base
        .clearSelect()
        .select((eb) => eb.fn.countAll<number>().as('total'))
        .executeTakeFirstOrThrow(),
      base
        .orderBy(`files.${p.sort}`, p.direction)
        .orderBy('files.id', p.direction)
        .limit(p.limit)
        .offset((p.page - 1) * p.limit)
        .execute(),
    ]);
    return { rows, total: Number(total) };
  }

  /** Inserts the file unless its folder already holds that name; returns whether it did. */
  async insertIfNameFree(row: Insertable<FileTable>): Promise<boolean> {
    // ON CONFLICT DO NOTHING on both dialects: a name taken at the same moment is no error.
    const res = await this.db
      .insertInto('files')
      .values(row)
      .onConflict((oc) => oc.doNothing())
      .executeTakeFirst();
    return Number(res.numInsertedOrUpdatedRows ?? 0) === 1;
  }

  /**
   * Changes the file; false when the change would give it a name its (new) folder already
   * holds. An unknown id changes nothing.
   */
  async update(id: string, changes: FileChanges): Promise<boolean> {
    try {
      await this.db.updateTable('files').set(changes).where('id', '=', id).execute();
      return true;
    } catch (err) {
      if (isUniqueViolation(err)) return false;
      throw err;
    }
  }

  async delete(id: string): Promise<void> {
    await this.db.deleteFrom('files').where('id', '=', id).execute();
  }
}
