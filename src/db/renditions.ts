// The rendition cache's ledger: a row per rendition in storage and one counter of their bytes
// (`rendition_totals`, id 1), changed in the same transaction as the rows, so the total is a
// primary-key read. Every change of `bytes` is conditional on the value read (or on the row
// being absent), so two nodes changing one row never count it twice. The rules are in
// src/services/rendition-cache.ts.
import { type Kysely, sql } from 'kysely';
import type { Database } from './schema.ts';

export interface RenditionEntry {
  key: string;
  bytes: number;
  last_used_at: string;
}

/** The blob key or origin prefix a rendition key is made from (everything before `.renditions/`). */
export function ownerOf(key: string): string {
  const at = key.lastIndexOf('.renditions/');
  return at === -1 ? key : key.slice(0, at);
}

export class RenditionRepository {
  constructor(private readonly q: Kysely<Database>) {}

  private async addToTotal(trx: Kysely<Database>, bytes: number, count: number): Promise<void> {
    if (bytes === 0 && count === 0) return;
    await trx
      .updateTable('rendition_totals')
      .set((eb) => ({ bytes: eb('bytes', '+', bytes), count: eb('count', '+', count) }))
      .where('id', '=', 1)
      .execute();
  }

  /**
   * Before a rendition is made: its row, so that a crash between the write and the bookkeeping
   * leaves something to evict. An existing row (a rendition made again) is marked used now.
   */
  async reserve(key: string, now: string): Promise<void> {
    // A row of 0 bytes is not counted (`count` counts renditions stored).
    await this.q
      .insertInto('renditions')
      .values({
        key,
        workspace_id: key.slice(0, key.indexOf('/')),
        owner: ownerOf(key),
        bytes: 0,
        created_at: now,
        last_used_at: now,
      })
      .onConflict((oc) => oc.column('key').doUpdateSet({ last_used_at: now }))
      .execute();
  }

  /** The rendition is in storage with `bytes` bytes. */
  async stored(key: string, bytes: number, now: string): Promise<void> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const done = await this.q.transaction().execute(async (trx) => {
        const row = await trx.selectFrom('renditions').select('bytes').where('key', '=', key).executeTakeFirst();
        if (!row) {
          const added = await trx
            .insertInto('renditions')
            .values({
              key,
              workspace_id: key.slice(0, key.indexOf('/')),
              owner: ownerOf(key),
              bytes,
              created_at: now,
              last_used_at: now,
            })
            .onConflict((oc) => oc.column('key').doNothing())
            .returning('key')
            .executeTakeFirst();
          if (!added) return false;
          await this.addToTotal(trx, bytes, bytes > 0 ? 1 : 0);
          return true;
        }
        const old = Number(row.bytes);
        const changed = await trx
          .updateTable('renditions')
          .set({ bytes, created_at: now, last_used_at: now })
          .where('key', '=', key)
          .where('bytes', '=', old)
          .executeTakeFirst();
        if (Number(changed.numUpdatedRows) === 0) return false;
        await this.addToTotal(trx, bytes - old, (bytes > 0 ? 1 : 0) - (old > 0 ? 1 : 0));
        return true;
      });
      if (done) return;
    }
  }

  /**
   * Renditions found in storage (the backfill of those made before the ledger): a row for each
   * that has none, last used when it was written, so the oldest go first. Insert-if-absent, with
   * the counter raised by what was inserted in the same transaction: a row written meanwhile by
   * a render, or by an earlier run of the backfill, is left as it is and not counted twice.
   * Returns how many rows and bytes were added.
   */
  async recordFound(
    found: { key: string; bytes: number; modified: string }[],
  ): Promise<{ added: number; bytes: number }> {
    if (found.length === 0) return { added: 0, bytes: 0 };
    return this.q.transaction().execute(async (trx) => {
      const added = await trx
        .insertInto('renditions')
        .values(
          found.map((f) => ({
            key: f.key,
            workspace_id: f.key.slice(0, f.key.indexOf('/')),
            owner: ownerOf(f.key),
            bytes: f.bytes,
            created_at: f.modified,
            last_used_at: f.modified,
          })),
        )
        .onConflict((oc) => oc.column('key').doNothing())
        .returning('bytes')
        .execute();
      const bytes = added.reduce((n, r) => n + Number(r.bytes), 0);
      await this.addToTotal(trx, bytes, added.filter((r) => Number(r.bytes) > 0).length);
      return { added: added.length, bytes };
    });
  }

  /** A render that failed: its reserved row goes, unless something was stored under it meanwhile. */
  async abandon(key: string): Promise<void> {
    await this.q.deleteFrom('renditions').where('key', '=', key).where('bytes', '=', 0).execute();
  }

  /** Marks renditions used now, leaving rows marked within `since` alone (no write per hit). */
  async touch(keys: string[], now: string, since: string): Promise<void> {
    for (let i = 0; i < keys.length; i += 500)
      await this.q
        .updateTable('renditions')
        .set({ last_used_at: now })
        .where('key', 'in', keys.slice(i, i + 500))
        .where('last_used_at', '<', since)
        .execute();
  }

  async total(): Promise<{ bytes: number; count: number }> {
    const row = await this.q
      .selectFrom('rendition_totals')
      .select(['bytes', 'count'])
      .where('id', '=', 1)
      .executeTakeFirst();
    return { bytes: Number(row?.bytes ?? 0), count: Number(row?.count ?? 0) };
  }

  /** The least recently used renditions first. */
  async oldest(limit: number): Promise<RenditionEntry[]> {
    const rows = await this.q
      .selectFrom('renditions')
      .select(['key', 'bytes', 'last_used_at'])
      .orderBy('last_used_at')
      .orderBy('key')
      .limit(limit)
      .execute();
    return rows.map((r) => ({ key: r.key, bytes: Number(r.bytes), last_used_at: r.last_used_at }));
  }

  /**
   * Removes the row if it is still as `entry` read it (not used or made again since); returns
   * the bytes it held, or null when it changed or another node removed it first.
   */
  async removeIfUnchanged(entry: RenditionEntry): Promise<number | null> {
    return this.q.transaction().execute(async (trx) => {
      const gone = await trx
        .deleteFrom('renditions')
        .where('key', '=', entry.key)
        .where('last_used_at', '=', entry.last_used_at)
        .returning('bytes')
        .executeTakeFirst();
      if (!gone) return null;
      const bytes = Number(gone.bytes);
      await this.addToTotal(trx, -bytes, bytes > 0 ? -1 : 0);
      return bytes;
    });
  }

  /** The rows of every rendition of `owner` (a blob that went); returns their keys. */
  async removeOwner(owner: string): Promise<string[]> {
    return this.q.transaction().execute(async (trx) => {
      const gone = await trx.deleteFrom('renditions').where('owner', '=', owner).returning(['key', 'bytes']).execute();
      const bytes = gone.reduce((n, r) => n + Number(r.bytes), 0);
      const count = gone.filter((r) => Number(r.bytes) > 0).length;
      await this.addToTotal(trx, -bytes, -count);
      return gone.map((r) => r.key);
    });
  }

  /** Whether the blob `owner` still exists (a render that finished after its file went must not stay). */
  async blobExists(workspaceId: string, sha256: string, owner: string): Promise<boolean> {
    const row = await this.q
      .selectFrom('blobs')
      .select(sql<number>`1`.as('one'))
      .where('workspace_id', '=', workspaceId)
      .where('sha256', '=', sha256)
      .where('storage_key', '=', owner)
      .executeTakeFirst();
    return row !== undefined;
  }
}
