// Where deep pages of a list start, remembered for a minute, so that walking a big list page by
// page (what every hosted SDK's "all files" loop does) costs each page its own rows instead of
// every row before it, as OFFSET does. A page asked for directly walks from the nearest
// boundary remembered before it. Shallow pages are always counted from the start: they are
// cheap, and exactly current.
import type { PageKey } from '../db/files.ts';

/** Pages that start this deep or deeper use remembered boundaries. */
export const SHALLOW_ROWS = 10_000;

interface Boundary {
  key: PageKey;
  at: number;
}

export class PageBoundaries {
  private readonly lists = new Map<string, Map<number, Boundary>>();

  constructor(
    private readonly ttlMs = 60_000,
    private readonly maxLists = 1_000,
    private readonly maxPerList = 2_000,
  ) {}

  /** The deepest boundary remembered at or before `offset` for the list, if any is fresh. */
  nearest(list: string, offset: number): { offset: number; key: PageKey } | undefined {
    const known = this.lists.get(list);
    if (!known || offset < SHALLOW_ROWS) return undefined;
    const now = Date.now();
    let best: { offset: number; key: PageKey } | undefined;
    for (const [at, b] of known) {
      if (now - b.at > this.ttlMs) known.delete(at);
      else if (at <= offset && (!best || at > best.offset)) best = { offset: at, key: b.key };
    }
    return best;
  }

  /** The row before position `offset` of the list has `key`. */
  remember(list: string, offset: number, key: PageKey): void {
    if (offset < SHALLOW_ROWS) return;
    let known = this.lists.get(list);
    if (known) this.lists.delete(list);
    else known = new Map();
    // Most recently used last: the first list is the one to forget.
    this.lists.set(list, known);
    if (this.lists.size > this.maxLists) this.lists.delete(this.lists.keys().next().value as string);
    known.delete(offset);
    known.set(offset, { key, at: Date.now() });
    if (known.size > this.maxPerList) known.delete(known.keys().next().value as number);
  }
}
