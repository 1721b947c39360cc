// The multipart sweeper (run periodically by src/main.ts): finishes completes whose completer
// died, expires active sessions past their time and frees their parts, and then has the blob
// store drop the bytes crashed uploads left behind.
import type { Completer } from './complete.ts';
import { STALE_COMPLETE_MS } from './complete.ts';
import { type MultipartContext, nowSeconds } from './context.ts';
import type { Sessions } from './sessions.ts';

export interface SweepResult {
  expired: number;
  intents: number;
  finished: number;
}

export async function sweepMultipart(
  ctx: MultipartContext,
  sessions: Sessions,
  completer: Completer,
  graceMs?: number,
): Promise<SweepResult> {
  ctx.hashes.prune(nowSeconds());
  // Completes whose completer died (a crash between assembling the file and writing its
  // record) are finished here, so their bytes become the file the client asked for instead
  // of staying behind unowned. Before the intents sweep, which leaves them alone.
  const staleBefore = new Date(Date.now() - Math.min(STALE_COMPLETE_MS, graceMs ?? ctx.blobs.graceMs)).toISOString();
  const stuck = await ctx.sessions.stuckCompleting(staleBefore, 100);
  let finished = 0;
  for (const s of stuck) {
    if (
      await completer.finishStale(s).then(
        () => true,
        () => false,
      )
    )
      finished++;
  }
  const due = await ctx.sessions.expiredActive(nowSeconds(), 500);
  let expired = 0;
  for (const s of due) {
    if (!(await ctx.sessions.move(s.id, 'active', 'expired'))) continue;
    await sessions.release(s).catch(() => {});
    expired++;
  }
  const intents = await ctx.blobs.sweepIntents(graceMs, (ctx.settings.maxTtlSeconds + 24 * 3600) * 1000);
  return { expired, intents, finished };
}
