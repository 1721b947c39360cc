// The render queue of one node: at most `concurrency` renders at once, at most `maxWaiting`
// waiting for a slot (one more is refused 503 at once, so a burst of distinct delivery URLs costs
// a bounded amount of CPU and memory), and one render per rendition key at a time (single
// flight): identical requests that arrive while their rendition is being made wait for that
// render instead of making it again.
import { AppError, errors } from '../errors.ts';

export interface RenderQueueOptions {
  concurrency: number;
  maxWaiting: number;
  /** Sent as retry-after when the queue is full. */
  retryAfterSeconds?: number;
}

export interface RenderQueueObserver {
  /** A render left its slot after `seconds`: `outcome` is "ok" or the error code it ended with. */
  finished?(seconds: number, outcome: string): void;
  /** A request was refused (`queue_full`) or a render abandoned (`timeout`). */
  rejected?(reason: 'queue_full' | 'timeout'): void;
}

/**
 * What a task may do with its slot: `hold` keeps the slot until `work` settles, for work that
 * outlives the answer (a render abandoned at its time budget keeps running inside libvips until
 * sharp's own timeout stops it, and its slot is not free before then).
 */
export interface Slot {
  hold(work: Promise<unknown>): void;
}

export class RenderQueue {
  private running = 0;
  private readonly waiting: Array<() => void> = [];
  private readonly inFlight = new Map<string, Promise<unknown>>();
  private readonly observers: RenderQueueObserver[] = [];

  constructor(private readonly opts: RenderQueueOptions) {}

  /** Requests waiting for a slot. */
  get depth(): number {
    return this.waiting.length;
  }

  /** Renders running now. */
  get active(): number {
    return this.running;
  }

  observe(observer: RenderQueueObserver): void {
    this.observers.push(observer);
  }

  /** Tells the observers that a render was abandoned at its time budget. */
  timedOut(): void {
    for (const o of this.observers) o.rejected?.('timeout');
  }

  /**
   * Runs `task` in a slot, or joins the run already under way for `key` (its result or error
   * is this call's). Throws RENDER_BUSY when every slot is taken and the queue is full.
   */
  run<T>(key: string, task: (slot: Slot) => Promise<T>): Promise<T> {
    const joined = this.inFlight.get(key);
    if (joined) return joined as Promise<T>;
    if (this.running >= this.opts.concurrency && this.waiting.length >= this.opts.maxWaiting) {
      for (const o of this.observers) o.rejected?.('queue_full');
      return Promise.reject(errors.renderBusy(this.opts.retryAfterSeconds ?? 2));
    }
    const run = this.inSlot(task).finally(() => this.inFlight.delete(key));
    this.inFlight.set(key, run);
    return run;
  }

  private async inSlot<T>(task: (slot: Slot) => Promise<T>): Promise<T> {
    // Taken here, before any await, so that the checks in run() see it at once.
    if (this.running < this.opts.concurrency) this.running++;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    const held: Promise<unknown>[] = [];
    const started = performance.now();
    let outcome = 'ok';
    try {
      return await task({ hold: (work) => held.push(work) });
    } catch (err) {
      outcome = err instanceof AppError ? err.errorCode : 'error';
      throw err;
    } finally {
      void Promise.allSettled(held).then(() => {
        const seconds = (performance.now() - started) / 1000;
        for (const o of this.observers) o.finished?.(seconds, outcome);
        this.release();
      });
    }
  }

  /** The slot goes straight to the next waiter, if any, so `running` never dips below the load. */
  private release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.running--;
  }
}
