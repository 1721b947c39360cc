// Renditions made before the rendition cache's ledger (migration 0009) have no row, so the
// budget neither counted nor evicted them. This one-time walk of storage gives each a row, last
// used when it was written (the oldest are evicted first; never later than the walk). It runs as the `renditions.backfill`
// job (src/jobs/renditions.ts): one run at a time across nodes, again after a crash, and a no-op
// once the `settings` row says it is done.
//
// One listing per workspace (`{ws}/`), not one per blob: on S3-like stores a listing costs one
// call per 1,000 objects, so a workspace of B blobs and R renditions takes ⌈(B + R) / 1000⌉ calls
// instead of B (most blobs have no rendition, and each would still cost a call); and origin
// renditions (`{ws}/origins/…`) are named by a hash the database does not hold, so only a
// listing finds them. Local disk walks the workspace's folder once either way.
//
// Safe to repeat and beside live requests: rows are inserted only where none exists, with the
// counter raised in the same transaction (RenditionRepository.recordFound). The workspaces done
// so far are recorded, so a restarted run walks at most the one it was in again.
// What a walk cannot rule out: a rendition listed just before its file is deleted (or before an
// eviction deletes it) and recorded just after its row went. Its row then names no object; it is
// among the oldest, so eviction removes it first when the budget is reached.
import type { Db } from '../db/database.ts';
import { RenditionRepository } from '../db/renditions.ts';
import type { StorageDriver } from '../storage/driver.ts';

/** The `settings` row: `after:{workspace id}` while walking (that one and those before are done), then `done`. */
export const BACKFILL_SETTING = 'rendition_backfill';
const DONE = 'done';
/** Renditions recorded per transaction; between two batches the event loop serves others. */
const BATCH = 500;
/** Workspaces read per query. */
const WORKSPACES_PER_QUERY = 100;

/** `{ws}/blobs/{uuid}.renditions/{name}` or `{ws}/origins/{source}/{hash}.renditions/{name}`. */
const RENDITION_KEY = /^[^/]+\/(?:blobs|origins\/[^/]+)\/[^/]+\.renditions\/[^/]+$/;

export interface BackfillResult {
  /** False when an earlier run had finished: nothing was walked. */
  walked: boolean;
  workspaces: number;
  /** Renditions listed in storage. */
  found: number;
  /** Of those, the ones that had no row. */
  added: number;
  bytes: number;
}

const pause = () => new Promise<void>((resolve) => setImmediate(resolve));

export class RenditionBackfill {
  private readonly repo: RenditionRepository;
  private stopping = false;

  constructor(
    private readonly db: Db,
    private readonly storage: StorageDriver,
  ) {
    this.repo = new RenditionRepository(db.kysely);
  }

  /** Ends a run at its next batch (shutdown); the next run resumes from the last workspace recorded. */
  stop(): void {
    this.stopping = true;
  }

  private async state(): Promise<string | undefined> {
    const row = await this.db.kysely
      .selectFrom('settings')
      .select('value')
      .where('key', '=', BACKFILL_SETTING)
      .executeTakeFirst();
    return row?.value;
  }

  /** Never moves `done` back: a slower run beside a finished one changes nothing. */
  private async record(value: string): Promise<void> {
    await this.db.kysely
      .insertInto('settings')
      .values({ key: BACKFILL_SETTING, value })
      .onConflict((oc) => oc.column('key').doUpdateSet({ value }).where('settings.value', '<>', DONE))
      .execute();
  }

  async run(): Promise<BackfillResult> {
    const result: BackfillResult = { walked: false, workspaces: 0, found: 0, added: 0, bytes: 0 };
    const state = await this.state();
    if (state === DONE) return result;
    result.walked = true;
    let after = state?.startsWith('after:') ? state.slice('after:'.length) : '';
    for (;;) {
      const page = await this.db.kysely
        .selectFrom('workspaces')
        .select('id')
        .where('id', '>', after)
        .orderBy('id')
        .limit(WORKSPACES_PER_QUERY)
        .execute();
      for (const { id } of page) {
        if (this.stopping) return result;
        await this.workspace(id, result);
        if (this.stopping) return result;
        await this.record(`after:${id}`);
        result.workspaces++;
        after = id;
      }
      if (page.length < WORKSPACES_PER_QUERY) break;
    }
    await this.record(DONE);
    return result;
  }

  private async workspace(id: string, result: BackfillResult): Promise<void> {
    let batch: { key: string; bytes: number; modified: string }[] = [];
    const flush = async () => {
      const r = await this.repo.recordFound(batch);
      result.added += r.added;
      result.bytes += r.bytes;
      batch = [];
      await pause();
    };
    // A storage whose clock is ahead (or that rounds times up to the second, as Swift does)
    // would make a rendition written before the run look newer than one used since.
    const started = Date.now();
    for await (const o of this.storage.list(`${id}/`)) {
      if (!RENDITION_KEY.test(o.key)) continue;
      result.found++;
      const modified = new Date(Math.min(o.lastModified.getTime(), started)).toISOString();
      batch.push({ key: o.key, bytes: o.size, modified });
      if (batch.length >= BATCH) {
        await flush();
        if (this.stopping) return;
      }
    }
    await flush();
  }
}
