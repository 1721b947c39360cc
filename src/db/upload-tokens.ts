// Queries about upload tokens (the upload_tokens table). A token moves unused → uploading →
// used with conditional updates, so of two uploads at once exactly one holds it; the rules
// that use them live in src/uploads/tokens.ts.
import type { Kysely } from 'kysely';
import { nowIso } from './database.ts';
import type { Database, UploadTokenRow } from './schema.ts';

export class UploadTokenRepository {
  constructor(private readonly q: Kysely<Database>) {}

  /** The same queries inside the caller's transaction. */
  in(trx: Kysely<Database>): UploadTokenRepository {
    return new UploadTokenRepository(trx);
  }

  async insert(row: UploadTokenRow): Promise<void> {
    await this.q.insertInto('upload_tokens').values(row).execute();
  }

  byId(id: string): Promise<UploadTokenRow | undefined> {
    return this.q.selectFrom('upload_tokens').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /** unused → uploading, if the token has not expired by `nowSeconds`; false when another upload holds it. */
  async claim(id: string, nowSeconds: number): Promise<boolean> {
    const claimed = await this.q
      .updateTable('upload_tokens')
      .set({ state: 'uploading', used_at: nowIso() })
      .where('id', '=', id)
      .where('state', '=', 'unused')
      .where('expire_at', '>=', nowSeconds)
      .executeTakeFirst();
    return Number(claimed.numUpdatedRows) > 0;
  }

  /** The upload holding the token is alive (see `reviveStale`). */
  async touch(id: string): Promise<void> {
    await this.q
      .updateTable('upload_tokens')
      .set({ used_at: nowIso() })
      .where('id', '=', id)
      .where('state', '=', 'uploading')
      .execute();
  }

  async markUsed(id: string, fileId: string): Promise<void> {
    await this.q.updateTable('upload_tokens').set({ state: 'used', file_id: fileId }).where('id', '=', id).execute();
  }

  /** uploading → used before its file exists (a tus upload holds the token for good). */
  async markUsedPending(id: string): Promise<void> {
    await this.q.updateTable('upload_tokens').set({ state: 'used' }).where('id', '=', id).execute();
  }

  /** used (with no file yet) → unused: a tus upload that could not start gives its token back. */
  async putBackUsed(id: string): Promise<void> {
    await this.q
      .updateTable('upload_tokens')
      .set({ state: 'unused', used_at: null })
      .where('id', '=', id)
      .where('state', '=', 'used')
      .where('file_id', 'is', null)
      .execute();
  }

  /** uploading → unused: the upload failed, the token may be used again. */
  async putBack(id: string): Promise<void> {
    await this.q
      .updateTable('upload_tokens')
      .set({ state: 'unused', used_at: null })
      .where('id', '=', id)
      .where('state', '=', 'uploading')
      .execute();
  }

  /** uploading → unused for every token whose upload showed no sign of life since `before`. */
  async reviveStale(before: string): Promise<void> {
    await this.q
      .updateTable('upload_tokens')
      .set({ state: 'unused', used_at: null })
      .where('state', '=', 'uploading')
      .where('used_at', '<', before)
      .execute();
  }

  /** Deletes tokens that expired before `expireBefore` (seconds); returns how many. */
  async deleteExpired(expireBefore: number): Promise<number> {
    const res = await this.q.deleteFrom('upload_tokens').where('expire_at', '<', expireBefore).executeTakeFirst();
    return Number(res.numDeletedRows);
  }
}
