// The cursor that reaches the deep page: keyset pagination is walked, not jumped to, so the
// bench follows `meta.nextCursor` page after page from the first (one client, untimed), up to
// the page the OFFSET row lists or until the time allowed runs out, and the row then measures
// the request for the page reached.
import { auth } from './measure.ts';
import type { Log } from './seed/log.ts';

/** `timedOut`: the walk stopped for lack of time, not at the wanted page or the last one. */
export type Walk = { cursor: string; page: number; seconds: number; timedOut: boolean } | { skip: string };

interface ListAnswer {
  meta?: { nextCursor?: string | null };
  next_cursor?: string | null;
}

/** `path` is the first page's request; the cursor is added to it with `&cursor=`. */
export async function walkCursor(
  base: string,
  key: string,
  path: string,
  page: number,
  seconds: number,
  log: Log,
): Promise<Walk> {
  const started = performance.now();
  const deadline = started + seconds * 1000;
  let cursor: string | undefined;
  let reached = 1;
  let lastLog = started;
  let last = false;
  if (page <= 1) return { skip: 'the deep page is the first page (the workspace is too small)' };
  while (reached < page && performance.now() < deadline) {
    const url = `${base}${path}${cursor === undefined ? '' : `&cursor=${encodeURIComponent(cursor)}`}`;
    const r = await fetch(url, { headers: auth(key) });
    const text = await r.text();
    if (!r.ok) {
      if (cursor === undefined) return { skip: `the first page answered ${r.status}: ${text.slice(0, 200)}` };
      throw new Error(`page ${reached + 1} by cursor answered ${r.status}: ${text.slice(0, 500)}`);
    }
    const answer = JSON.parse(text) as ListAnswer;
    const next = answer.meta?.nextCursor !== undefined ? answer.meta.nextCursor : answer.next_cursor;
    if (next === undefined) return { skip: 'cursor paging not supported by this server (no meta.nextCursor)' };
    if (next === null) {
      last = true;
      break;
    }
    cursor = next;
    reached++;
    if (performance.now() - lastLog > 10_000) {
      lastLog = performance.now();
      log(`walking by cursor: page ${reached.toLocaleString('en')} of ${page.toLocaleString('en')}`);
    }
  }
  const took = (performance.now() - started) / 1000;
  // A workspace of one page has no cursor past the first: nothing deeper to measure.
  if (cursor === undefined) return { skip: 'the workspace has a single page' };
  return { cursor, page: reached, seconds: took, timedOut: !last && reached < page };
}
