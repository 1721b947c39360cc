// WAL checkpoints off the event loop. SQLite copies the WAL back into the database file when a
// commit finds it past `wal_autocheckpoint` pages (1,000 by default), and it does so inside that
// commit: on the main connection, synchronously, with an fsync of the database file. On a
// library of a million files that is a 40 ms stall of the whole process every thousand pages
// written, and hundreds of ms after a burst (measured in issue 18). Here a thread of its own
// checkpoints every `everyMs` instead, and the main connection's automatic checkpoint is raised
// to a safety net (SAFETY_NET_PAGES) that only a checkpointer that cannot keep up ever reaches.
//
// Copying the WAL back is not enough to keep it small: SQLite starts writing it again from its
// first page only when a write transaction begins with every frame already copied. Under steady
// writes (uploads every few ms) that moment never comes, because each checkpoint ends with newer
// frames behind it, and the WAL grew to the safety net (400 MB): every commit then appends to a
// growing file, and the main connection's checkpoint at the net stalled the event loop for 230 ms
// on a library of a million files (issue 18's bench). So once the WAL passes RESTART_PAGES, the
// writer is held back (the main connection taken, as a transaction takes it: requests wait, the
// event loop does not) while the thread checkpoints the few frames left, and the next write
// starts the WAL over. Held for one short checkpoint; readers go on.
import type { Worker } from 'node:worker_threads';
import type SQLite from 'better-sqlite3';
import type { CheckpointData, CheckpointReply, CheckpointRequest } from './sqlite-checkpoint-worker.ts';
import { startDbThread } from './sqlite-readers.ts';

/** About 400 MB of WAL at 4 KiB pages: the main connection checkpoints only past this. */
export const SAFETY_NET_PAGES = 100_000;
/** About 16 MB of WAL at 4 KiB pages: past this the writer is held back once so that the WAL starts over. */
export const RESTART_PAGES = 4096;
const RESTART_MS = 1000;
/** The longest the writer is held back waiting for the thread's checkpoint. */
const HOLD_LIMIT_MS = 5000;

/** Takes the main connection (the one writer) and gives back what releases it. */
export type WriterHold = () => Promise<() => Promise<void>>;

export class SqliteCheckpointer {
  private worker?: Worker;
  private timer?: NodeJS.Timeout;
  private closed = false;
  private holdWriter?: WriterHold;
  private restarting = false;
  private asked = 0;
  private answer?: { now: number; done: () => void };
  /**
   * What the thread reported last; how often it was started; how often the writer was held back
   * for a WAL restart, and for how long the last time (ms).
   */
  readonly stats = { log: 0, checkpointed: 0, starts: 0, holds: 0, lastHoldMs: 0 };

  constructor(
    private readonly main: SQLite.Database,
    private readonly data: CheckpointData,
    private readonly restartPages = RESTART_PAGES,
  ) {}

  /** How to hold the writer back (the driver's main connection); without it the WAL is never restarted. */
  holdWriterWith(hold: WriterHold): void {
    this.holdWriter = hold;
  }

  start(): void {
    if (this.closed || this.worker) return;
    this.main.pragma(`wal_autocheckpoint = ${SAFETY_NET_PAGES}`);
    this.spawn();
  }

  /** The live thread (a test terminates it to see it come back). */
  thread(): Worker | undefined {
    return this.worker;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.timer);
    const worker = this.worker;
    this.worker = undefined;
    await worker?.terminate();
    // Back to SQLite's default, so the last connection's close checkpoints as usual.
    if (this.main.open) this.main.pragma('wal_autocheckpoint = 1000');
  }

  /**
   * Holds the writer back while the thread checkpoints what is left, so that the next write
   * transaction finds every frame copied and starts the WAL from its first page. A reader still
   * inside an older snapshot can keep it from starting over; the next report tries again.
   */
  private restart(worker: Worker): void {
    if (!this.holdWriter || this.restarting || this.closed) return;
    this.restarting = true;
    const hold = this.holdWriter;
    void (async () => {
      const release = await hold();
      const started = performance.now();
      try {
        if (this.worker !== worker || this.closed) return;
        const now = ++this.asked;
        await new Promise<void>((resolve) => {
          const limit = setTimeout(resolve, HOLD_LIMIT_MS);
          this.answer = {
            now,
            done: () => {
              clearTimeout(limit);
              resolve();
            },
          };
          worker.postMessage({ now } satisfies CheckpointRequest);
        });
        this.stats.holds++;
        this.stats.lastHoldMs = performance.now() - started;
      } finally {
        this.answer = undefined;
        await release();
      }
    })()
      .catch(() => {})
      .finally(() => {
        this.restarting = false;
      });
  }

  private spawn(): void {
    this.stats.starts++;
    const worker = startDbThread('sqlite-checkpoint-worker', this.data);
    worker.unref();
    this.worker = worker;
    worker.on('message', (m: CheckpointReply) => {
      if ('ready' in m) return;
      this.stats.log = m.log;
      this.stats.checkpointed = m.checkpointed;
      if (m.now !== undefined) {
        if (m.now === this.answer?.now) this.answer.done();
      } else if (m.log >= this.restartPages) this.restart(worker);
    });
    // Its errors end it; the exit below starts another.
    worker.on('error', () => {});
    worker.on('exit', () => {
      this.answer?.done();
      if (this.worker !== worker || this.closed) return;
      this.worker = undefined;
      this.timer = setTimeout(() => this.spawn(), RESTART_MS);
      this.timer.unref();
    });
  }
}
