// The event-loop side of issue 18's targets ("no request blocks the event loop for more than
// 20 ms"), measured by the server itself: its /metrics (prom-client's default metrics, no auth)
// exports the max of a monitorEventLoopDelay histogram that prom-client resets at each scrape,
// so a scrape just before a run and one once the server is idle again bound the run's window.
//
// What the figure is: monitorEventLoopDelay records the time between two of its timer ticks, so
// an idle server shows about its resolution and a stall of B ms shows as between B and B + the
// resolution. At prom-client's default of 10 ms an idle server read 10 to 14 ms and a max of
// 22 ms could be a stall of 12; the bench's server samples every millisecond instead
// (STOWAGE_METRICS_LOOP_RESOLUTION_MS=1, about 2% of a core while idle), so its max is the
// longest stall plus the timer's jitter (an idle server read 3 to 4 ms on a busy 2-core VM).
// Node also drops the first tick after a reset, so each window starts a little after the
// scrape that opened it (the bench waits).
const METRIC = 'stowage_nodejs_eventloop_lag_max_seconds';

/** monitorEventLoopDelay's resolution in the bench's server (server.ts sets it). */
export const LOOP_RESOLUTION_MS = 1;

/** The max event-loop delay since the last scrape, in ms; undefined when /metrics did not answer. */
export async function scrapeLoopMax(base: string, timeoutMs = 30_000): Promise<number | undefined> {
  try {
    const r = await fetch(`${base}/metrics`, { signal: AbortSignal.timeout(timeoutMs) });
    if (!r.ok) return undefined;
    const text = await r.text();
    const line = text.split('\n').find((l) => l.startsWith(`${METRIC} `) || l.startsWith(`${METRIC}{`));
    const value = line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : Number.NaN;
    return Number.isFinite(value) ? value * 1000 : undefined;
  } catch {
    return undefined;
  }
}

/** Opens a window: the scrape resets the histogram, then the tick Node drops after it passes. */
export async function resetLoopWindow(base: string): Promise<void> {
  await scrapeLoopMax(base);
  await new Promise((r) => setTimeout(r, 2 * LOOP_RESOLUTION_MS + 5));
}
