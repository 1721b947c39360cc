// The rendition cache's budget (issue 19 item 4): renditions in storage are counted in the
// database (src/db/renditions.ts), shared by every node, and the least recently used go when
// their bytes pass STOWAGE_RENDITION_CACHE_BYTES. Works the same on every storage driver: it
// needs only put, stat, delete and list.
//
// - Made: a row before the render starts (0 bytes), its size once stored. A crash in between
//   leaves a row, which eviction collects; never an object no row names.
// - Used: a hit is remembered in memory and written in batches (at most every FLUSH_MS per
//   node, and only for rows not marked within TOUCH_SLACK_MS), never a write per request.
//   Hits answered by delivery's in-memory caches (DeliveryCache, the fast path) are reported
//   the same way, so a rendition hot in memory is also recent in the ledger.
// - Evicted: the `renditions.evict` job, one run at a time across nodes. When the total passes
//   the budget it deletes the least recently used down to LOW_WATER of it: the object first,
//   then the row only if it is unchanged since read (a request that made it again or used it
//   meanwhile keeps its row). A crash between leaves a row without an object, evicted again
//   next time; a request that finds the object gone makes it again.
// - Deleted with their file: BlobStore.forget deletes the objects, then the rows.
import { nowIso, type Db } from '../db/database.ts';
import { RenditionRepository } from '../db/renditions.ts';
import type { DomainEvents } from '../events.ts';
import type { StorageDriver } from '../storage/driver.ts';

/** Hits are written at most this often per node. */
const FLUSH_MS = 30_000;
/** A row marked used this recently is not written again. */
const TOUCH_SLACK_MS = 60_000;
/** Hits remembered before a write regardless of FLUSH_MS (bounds this node's memory). */
const MAX_PENDING = 50_000;
/** Eviction stops at this share of the budget, so that it does not run again at the next render. */
export const LOW_WATER = 0.9;
/** Rows read per eviction query. */
const BATCH = 200;

export interface EvictionResult {
  evicted: number;
  bytes: number;
  /** The total after the run. */
  total: number;
}

export class RenditionCache {
  readonly repo: RenditionRepository;
  private pending = new Set<string>();
  private lastFlush = Date.now();
  private flushing?: Promise<void>;

  constructor(
    db: Db,
    private readonly storage: StorageDriver,
    /** Bytes of renditions kept in storage; 0: no limit (nothing is evicted). */
    readonly budgetBytes: number,
    private readonly events?: DomainEvents,
  ) {
    this.repo = new RenditionRepository(db.kysely);
  }

  /** A rendition was served from the cache (storage or memory): counted for LRU in a later batch. */
  used(key: string): void {
    this.pending.add(key);
    if (this.pending.size >= MAX_PENDING || Date.now() - this.lastFlush >= FLUSH_MS)
      this.flush().catch(() => {
        // A database hiccup costs recency only; the keys are tried again with the next batch.
      });
  }

  /** Writes the hits remembered so far (the eviction job runs it first on its node). */
  async flush(): Promise<void> {
    if (this.flushing) return this.flushing;
    if (this.pending.size === 0) return;
    const keys = [...this.pending];
    this.pending = new Set();
    this.lastFlush = Date.now();
    const now = new Date();
    this.flushing = this.repo
      .touch(keys, now.toISOString(), new Date(now.getTime() - TOUCH_SLACK_MS).toISOString())
      .catch((err) => {
        for (const k of keys) if (this.pending.size < MAX_PENDING) this.pending.add(k);
        throw err;
      })
      .finally(() => {
        this.flushing = undefined;
      });
    return this.flushing;
  }

  /** Before a render: the row that makes the object findable even if this node dies. */
  reserve(key: string): Promise<void> {
    return this.repo.reserve(key, nowIso());
  }

  stored(key: string, bytes: number): Promise<void> {
    return this.repo.stored(key, bytes, nowIso());
  }

  /** A render failed: nothing was stored, the reserved row goes. */
  async abandon(key: string): Promise<void> {
    await this.repo.abandon(key).catch(() => {});
  }

  async totalBytes(): Promise<number> {
    return (await this.repo.total()).bytes;
  }

  /**
   * Deletes least recently used renditions until the total is at most LOW_WATER of the budget,
   * when it is over the budget. Safe beside requests and beside another node's run: a row is
   * removed only as it was read, and the total is read again whenever a removal finds it changed.
   */
  async evict(): Promise<EvictionResult> {
    await this.flush().catch(() => {});
    let total = await this.totalBytes();
    const result: EvictionResult = { evicted: 0, bytes: 0, total };
    if (this.budgetBytes <= 0 || total <= this.budgetBytes) return result;
    const target = Math.floor(this.budgetBytes * LOW_WATER);
    // Each pass removes rows or finds them changed (newer), so the oldest rows move on; the
    // bound only stops a run that other nodes keep outpacing.
    for (let pass = 0; pass < 1000 && total > target; pass++) {
      const batch = await this.repo.oldest(BATCH);
      if (batch.length === 0) break;
      for (const entry of batch) {
        if (total <= target) break;
        await this.storage.delete(entry.key);
        const freed = await this.repo.removeIfUnchanged(entry);
        if (freed === null) {
          total = await this.totalBytes();
          continue;
        }
        total -= freed;
        result.evicted++;
        result.bytes += freed;
      }
    }
    result.total = await this.totalBytes();
    if (result.evicted > 0) this.events?.emit('renditions.evicted', result.evicted, result.bytes);
    return result;
  }
}
