// Queries about multipart upload sessions (the multipart_sessions table). Status changes are
// conditional on the status the caller expects, so of two nodes racing for a session exactly
// one wins; the rules that use them live in src/uploads/multipart/.
import type { Kysely } from 'kysely';
import { nowIso } from './database.ts';
import type { Database, FileRow, MultipartSessionRow } from './schema.ts';

export type SessionState = MultipartSessionRow['status'];

export class UploadSessionRepository {
  constructor(private readonly q: Kysely<Database>) {}

  /** The same queries inside the caller's transaction. */
  in(trx: Kysely<Database>): UploadSessionRepository {
    return new UploadSessionRepository(trx);
  }

  async insert(session: MultipartSessionRow): Promise<void> {
    await this.q.insertInto('multipart_sessions').values(session).execute();
  }

  byId(id: string): Promise<MultipartSessionRow | undefined> {
    return this.q.selectFrom('multipart_sessions').selectAll().where('id', '=', id).executeTakeFirst();
  }

  inWorkspace(workspaceId: string, id: string): Promise<MultipartSessionRow | undefined> {
    return this.q
      .selectFrom('multipart_sessions')
      .selectAll()
      .where('id', '=', id)
      .where('workspace_id', '=', workspaceId)
      .executeTakeFirst();
  }

  /** Moves the session from `from` to `to` (touching updated_at); false when it was not in `from`. */
  async move(id: string, from: SessionState, to: SessionState): Promise<boolean> {
    const res = await this.q
      .updateTable('multipart_sessions')
      .set({ status: to, updated_at: nowIso() })
      .where('id', '=', id)
      .where('status', '=', from)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  }

  /**
   * Takes over a 'completing' session last touched at `seenUpdatedAt`, setting updated_at to
   * `now`; false when someone else touched it since (one taker wins).
   */
  async takeOver(id: string, seenUpdatedAt: string, now: string): Promise<boolean> {
    const res = await this.q
      .updateTable('multipart_sessions')
      .set({ updated_at: now })
      .where('id', '=', id)
      .where('status', '=', 'completing')
      .where('updated_at', '=', seenUpdatedAt)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  }

  /** A 'completing' session becomes 'completed' with its file; false when it was not completing. */
  async markCompleted(id: string, fileId: string): Promise<boolean> {
    const res = await this.q
      .updateTable('multipart_sessions')
      .set({ status: 'completed', file_id: fileId, updated_at: nowIso() })
      .where('id', '=', id)
      .where('status', '=', 'completing')
      .executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  }

  /** Sessions 'completing' and untouched since `before`, at most `limit`. */
  stuckCompleting(before: string, limit: number): Promise<MultipartSessionRow[]> {
    return this.q
      .selectFrom('multipart_sessions')
      .selectAll()
      .where('status', '=', 'completing')
      .where('updated_at', '<=', before)
      .limit(limit)
      .execute();
  }

  /** Active sessions that expired before `nowSeconds`, at most `limit`. */
  expiredActive(nowSeconds: number, limit: number): Promise<MultipartSessionRow[]> {
    return this.q
      .selectFrom('multipart_sessions')
      .selectAll()
      .where('status', '=', 'active')
      .where('expire_at', '<', nowSeconds)
      .limit(limit)
      .execute();
  }

  /** A completed session's file row, with its blob's hash and its folder's number. */
  async completedFile(
    fileId: string,
  ): Promise<{ file: FileRow & { folder_path: string }; sha256: string; folder_no: string | null } | undefined> {
    const row = await this.q
      .selectFrom('files')
      .innerJoin('blobs', 'blobs.id', 'files.blob_id')
      .leftJoin('folders', 'folders.id', 'files.folder_id')
      .selectAll('files')
      .select((eb) => [
        'blobs.sha256 as sha256',
        'folders.folder_no as folder_no',
        eb.fn.coalesce('folders.path', eb.val('')).as('folder_path'),
      ])
      .where('files.id', '=', fileId)
      .executeTakeFirst();
    if (!row) return undefined;
    const { sha256, folder_no, ...file } = row;
    return { file, sha256, folder_no };
  }

  /** The workspace of a multipart session still open for parts; undefined for any other id. */
  async activeSessionWorkspace(sessionId: string): Promise<string | undefined> {
    const row = await this.q
      .selectFrom('multipart_sessions')
      .select('workspace_id')
      .where('id', '=', sessionId)
      .where('status', '=', 'active')
      .executeTakeFirst();
    return row?.workspace_id;
  }

  /** How many multipart sessions are open for parts. */
  async activeSessionCount(): Promise<number> {
    const row = await this.q
      .selectFrom('multipart_sessions')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('status', '=', 'active')
      .executeTakeFirst();
    return Number(row?.n ?? 0);
  }
}
