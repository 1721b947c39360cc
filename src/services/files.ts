// File records: the flat shape of INTERFACE.md 2.2, and the create-or-replace an upload
// commits. Listing, renaming, moving and deleting arrive with the Files API.
import type { Kysely } from 'kysely';
import { newShortId, newUuid } from '../crypto/ids.ts';
import { nowIso } from '../db/database.ts';
import type { BlobRow, Database, FileRow, FolderRow } from '../db/schema.ts';

export interface FileRecord {
  id: string;
  file_no: string;
  workspace_id: string;
  name: string;
  path: string;
  url: string;
  width: number | null;
  height: number | null;
  size: number;
  mime_type: string;
  tags: string[];
  metadata: Record<string, unknown>;
  custom_id: string | null;
  folder_no: string | null;
  is_duplicate: boolean;
  created_at: string;
  upload_source: FileRow['upload_source'];
  thumbnail: string | null;
  extension: string | null;
  format: string | null;
  hash: string;
  is_private: boolean;
}

export interface NewFile {
  workspaceId: string;
  folder: FolderRow | null;
  name: string;
  blob: BlobRow;
  duplicate: boolean;
  mime_type: string;
  extension: string | null;
  format: string | null;
  width: number | null;
  height: number | null;
  tags: string[];
  metadata: Record<string, unknown>;
  custom_id: string | null;
  upload_source: FileRow['upload_source'];
}

/** The delivery path of a file: folder path and name, each segment URL-encoded. */
export function deliveryPath(folderPath: string, name: string): string {
  return [...(folderPath ? folderPath.split('/') : []), name].map(encodeURIComponent).join('/');
}

export class FileRecords {
  constructor(private readonly publicUrl: string) {}

  /**
   * Inserts the file, or, when the folder already holds that name, gives the existing record
   * the new content (it keeps its id and file_no). Returns the row and the blob the old
   * content used, for the caller to release.
   */
  async createOrReplace(trx: Kysely<Database>, f: NewFile): Promise<{ row: FileRow; replacedBlobId: string | null }> {
    const folderPath = f.folder?.path ?? '';
    const now = nowIso();
    const content = {
      blob_id: f.blob.id,
      size: f.blob.size,
      mime_type: f.mime_type,
      extension: f.extension,
      format: f.format,
      width: f.width,
      height: f.height,
      tags: JSON.stringify(f.tags),
      metadata: JSON.stringify(f.metadata),
      custom_id: f.custom_id,
      is_duplicate: f.duplicate ? 1 : 0,
      upload_source: f.upload_source,
      updated_at: now,
    };
    const existing = await trx
      .selectFrom('files')
      .selectAll()
      .where('workspace_id', '=', f.workspaceId)
      .where('folder_path', '=', folderPath)
      .where('name', '=', f.name)
      .executeTakeFirst();
    if (existing) {
      await trx.updateTable('files').set(content).where('id', '=', existing.id).execute();
      return { row: { ...existing, ...content }, replacedBlobId: existing.blob_id === f.blob.id ? null : existing.blob_id };
    }
    const row: FileRow = {
      id: newUuid(),
      file_no: newShortId(),
      workspace_id: f.workspaceId,
      folder_id: f.folder?.id ?? null,
      folder_path: folderPath,
      name: f.name,
      is_private: 0,
      created_at: now,
      ...content,
    };
    await trx.insertInto('files').values(row).execute();
    return { row, replacedBlobId: null };
  }

  view(row: FileRow, folderNo: string | null, sha256: string): FileRecord {
    const path = deliveryPath(row.folder_path, row.name);
    const isImage = row.mime_type.startsWith('image/');
    return {
      id: row.id,
      file_no: row.file_no,
      workspace_id: row.workspace_id,
      name: row.name,
      path: `/${row.folder_path ? `${row.folder_path}/` : ''}${row.name}`,
      url: `${this.publicUrl}/${row.workspace_id}/${path}`,
      width: row.width,
      height: row.height,
      size: Number(row.size),
      mime_type: row.mime_type,
      tags: JSON.parse(row.tags) as string[],
      metadata: JSON.parse(row.metadata) as Record<string, unknown>,
      custom_id: row.custom_id,
      folder_no: folderNo,
      is_duplicate: Boolean(row.is_duplicate),
      created_at: row.created_at,
      upload_source: row.upload_source,
      thumbnail: isImage ? `${this.publicUrl}/${row.workspace_id}/w_200,h_200,c_fit/${path}` : null,
      extension: row.extension,
      format: row.format,
      hash: sha256,
      is_private: Boolean(row.is_private),
    };
  }
}
