// What delivery remembers between requests, so that a busy URL costs no database round trip,
// no stat and no file read (issue 19, "served like static files"):
//
// - Lookups: what `DeliveryService.resolve` answered for (workspace, raw path, Accept), kept
//   for `lookupTtlMs`. This node forgets a workspace's lookups the moment one of its files or
//   folders changes (the `upload.completed` and `files.changed` events, emitted after the
//   change commits and before the API answers); other nodes, which get no event, serve what
//   they remembered for at most `lookupTtlMs` more. Source paths (`{ws}-{source}/…`) are never
//   remembered: an origin can change at any time.
// - Bytes: small files and renditions in memory, least recently used first out, at most
//   `hotBytes` in all. Keyed by ETag, which for a workspace's files is derived from the SHA-256
//   of the stored bytes (and the tokens): a key never names two different contents, so these
//   entries need no invalidation; they are reached only through a lookup.
//
// Private files are remembered like the others: the route verifies their signature on every
// request, cached or not.
import type { Readable } from 'node:stream';
import { LRUCache } from 'lru-cache';
import type { DomainEvents } from '../events.ts';
import type { Delivered, DeliveryTarget } from './delivery.ts';

export interface DeliveryCacheOptions {
  /** Bytes of file contents held in memory at most; 0 keeps none. */
  hotBytes: number;
  /** How long a resolved lookup is served without asking the database again; 0 asks every time. */
  lookupTtlMs: number;
  events?: DomainEvents;
  /**
   * A rendition answered from memory (a remembered lookup): reported to the rendition cache's
   * ledger, which writes such hits in batches, so that what is hot here is never evicted as unused.
   */
  onRenditionUse?: (storageKey: string) => void;
}

/** A lookup as remembered: what resolve() said, and the bytes when they are small enough to hold. */
export interface CachedDelivery {
  delivered: Delivered;
  /** The whole file, when it is held in memory. */
  body?: Buffer;
}

interface LookupEntry {
  delivered: Delivered;
  generation: number;
}

/** Memory for remembered lookups at most (about 40,000 of usual length). */
const LOOKUP_BYTES = 32 * 1024 * 1024;
/** An Accept header longer than this is not worth a cache key (browsers send under 200). */
const MAX_ACCEPT = 256;

export class DeliveryCache {
  private readonly lookups?: LRUCache<string, LookupEntry>;
  private readonly bytes?: LRUCache<string, Buffer>;
  /** Files larger than this are streamed from storage, never held. */
  readonly maxEntryBytes: number;
  /** Bumped per workspace when anything there changes: older lookups are then not used. */
  private readonly generations = new Map<string, number>();
  /** Reads of the same bytes in progress, so that a cold rush reads a file once. */
  private readonly reading = new Map<string, Promise<Buffer | undefined>>();
  readonly stats = { lookupHits: 0, lookupMisses: 0, byteHits: 0, byteMisses: 0, fastHits: 0 };
  private readonly events?: DomainEvents;
  private readonly onRenditionUse?: (storageKey: string) => void;

  constructor(opts: DeliveryCacheOptions) {
    if (opts.lookupTtlMs > 0)
      this.lookups = new LRUCache<string, LookupEntry>({
        maxSize: LOOKUP_BYTES,
        // The key (a path may be spelled in many escaped ways, each its own entry) plus the entry.
        sizeCalculation: (_v, key) => key.length * 2 + 600,
        ttl: opts.lookupTtlMs,
      });
    // A single entry may take a sixteenth of the budget, up to 1 MiB: small renditions and
    // thumbnails, not the originals a few requests would churn the whole cache with.
    this.maxEntryBytes = Math.min(1024 * 1024, Math.floor(opts.hotBytes / 16));
    if (opts.hotBytes > 0 && this.maxEntryBytes > 0)
      this.bytes = new LRUCache<string, Buffer>({
        maxSize: opts.hotBytes,
        maxEntrySize: this.maxEntryBytes,
        sizeCalculation: (b) => Math.max(1, b.length),
      });
    this.events = opts.events;
    this.onRenditionUse = opts.onRenditionUse;
    const forget = (workspaceId: string) => this.invalidate(workspaceId);
    opts.events?.on('upload.completed', (e) => forget(e.workspaceId));
    opts.events?.on('files.changed', (e) => forget(e.workspaceId));
    // A remembered `t_{name}` lookup names the rendition of what the preset said then.
    opts.events?.on('presets.changed', (e) => forget(e.workspaceId));
  }

  /** Forgets every lookup of the workspace (its files' bytes stay: they are keyed by content). */
  invalidate(workspaceId: string): void {
    this.generations.set(workspaceId, (this.generations.get(workspaceId) ?? 0) + 1);
  }

  private generation(workspaceId: string): number {
    return this.generations.get(workspaceId) ?? 0;
  }

  /** The lookup key of a request, or undefined when its answer must not be remembered. */
  private keyOf(target: DeliveryTarget): string | undefined {
    if (!this.lookups || target.workspaceId.includes('-')) return undefined;
    const accept = target.accept ?? '';
    if (accept.length > MAX_ACCEPT) return undefined;
    // The client hints decide a rendition's default width and dpr_auto: requests that differ in
    // them may get different answers (the hints' key is the width and ratio they come to).
    return `${target.workspaceId}\u0000${target.path}\u0000${accept}\u0000${target.hints?.key ?? ''}`;
  }

  /**
   * A remembered answer, with its bytes when they are held, or undefined: no I/O at all (the
   * fast path). Only files whose size is known and whose bytes are held or too large to hold:
   * a small file not yet held is read in by `get`.
   */
  peek(target: DeliveryTarget): CachedDelivery | undefined {
    const key = this.keyOf(target);
    if (key === undefined) return undefined;
    const entry = this.lookups?.get(key);
    if (!entry || entry.generation !== this.generation(target.workspaceId)) return undefined;
    const d = entry.delivered;
    const body = this.bytes?.get(d.etag);
    if (!body && (d.size === undefined || (this.bytes && d.size <= this.maxEntryBytes))) return undefined;
    this.stats.fastHits++;
    // Counted as resolve() counts a rendition it found made (stowage_renditions_total).
    if (d.isRendition) this.renditionHit(d);
    return { delivered: d, body };
  }

  /**
   * What `resolve` answers for the target, from memory when it can be. The bytes come along
   * when the file is small enough to hold (read once and kept); larger ones are opened by the caller.
   */
  async get(target: DeliveryTarget, resolve: (t: DeliveryTarget) => Promise<Delivered>): Promise<CachedDelivery> {
    const key = this.keyOf(target);
    let delivered: Delivered | undefined;
    if (key !== undefined) {
      const entry = this.lookups?.get(key);
      if (entry && entry.generation === this.generation(target.workspaceId)) {
        delivered = entry.delivered;
        this.stats.lookupHits++;
        if (delivered.isRendition) this.renditionHit(delivered);
      }
    }
    if (!delivered) {
      // Taken before the database is asked: a change committed while resolve() runs bumps it,
      // and the answer (which may predate the change) is then not remembered.
      const generation = this.generation(target.workspaceId);
      delivered = await resolve(target);
      if (key !== undefined) {
        this.stats.lookupMisses++;
        if (this.generation(target.workspaceId) === generation) this.lookups?.set(key, { delivered, generation });
      }
    }
    if (key === undefined) return { delivered };
    return { delivered, body: await this.bodyOf(delivered) };
  }

  private async bodyOf(d: Delivered): Promise<Buffer | undefined> {
    if (!this.bytes || d.size === undefined || d.size > this.maxEntryBytes) return undefined;
    const held = this.bytes.get(d.etag);
    if (held) {
      this.stats.byteHits++;
      return held;
    }
    this.stats.byteMisses++;
    let pending = this.reading.get(d.etag);
    if (!pending) {
      pending = readAll(await d.open(), d.size)
        .then((body) => {
          // A file that is not the length the lookup said has changed under it: not kept.
          if (body.length !== d.size) return undefined;
          this.bytes?.set(d.etag, body);
          return body;
        })
        .finally(() => this.reading.delete(d.etag));
      this.reading.set(d.etag, pending);
    }
    return pending;
  }

  private renditionHit(d: Delivered): void {
    this.events?.emit('rendition', true);
    if (d.renditionKey) this.onRenditionUse?.(d.renditionKey);
  }

  /** Drops a lookup whose bytes turned out to be gone (deleted by another node). */
  drop(target: DeliveryTarget): void {
    const key = this.keyOf(target);
    if (key !== undefined) this.lookups?.delete(key);
  }
}

async function readAll(stream: Readable, size: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of stream) {
    chunks.push(chunk as Buffer);
    length += (chunk as Buffer).length;
    if (length > size) {
      stream.destroy();
      break;
    }
  }
  return chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, length);
}
