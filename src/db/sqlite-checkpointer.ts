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
//
// The same hold serves the full-text index (the name search's FTS5 table): its segments used to be
// merged inside commits on the main thread, 64 pages per level every 64 pages written (150 ms and
// more at a time on a million names). The thread turns that off and merges instead, a bounded
// step at a time with the writer held back, whenever writes happened since its last report.
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
/** With merging left over, writes go on this long before the next hold. */
const MERGE_AGAIN_MS = 40;

/** Takes the main connection (the one writer) and gives back what releases it. */
export type WriterHold = () => Promise<() => Promise<void>>;

/** The thread's answer to a hold's request. */
type HoldReply = Extract<CheckpointReply, { log: number }>;

export class SqliteCheckpointer {
  private worker?: Worker;
  private timer?: NodeJS.Timeout;
  private closed = false;
  private holdWriter?: WriterHold;
  private holding = false;
  private asked = 0;
  private answer?: { now: number; done: (reply?: HoldReply) => void };
  private lastLog = -1;
  private markReady!: () => void;
  private readonly started = new Promise<void>((resolve) => {
    this.markReady = resolve;
  });
  private again?: NodeJS.Timeout;
  /**
   * What the thread reported last; how often it was started; how often the writer was held back
   * (to merge the full-text index, and to restart the WAL), for how long the last time (ms); how
   * many of those holds were for a restart (the WAL past restartPages) and were answered; how
   * many holds merged something, and the last merge error.
   */
  readonly stats = {
    log: 0,
    checkpointed: 0,
    starts: 0,
    holds: 0,
    restartHolds: 0,
    lastHoldMs: 0,
    merges: 0,
    mergeError: '',
  };

  constructor(
    private readonly main: SQLite.Database,
    private readonly data: CheckpointData,
    private readonly restartPages = RESTART_PAGES,
  ) {}

  /** Resolves once the thread has opened its connection (tests wait for it before they write). */
  ready(): Promise<void> {
    return this.started;
  }

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
    clearTimeout(this.again);
    const worker = this.worker;
    this.worker = undefined;
    await worker?.terminate();
    // Back to SQLite's default, so the last connection's close checkpoints as usual.
    if (this.main.open) this.main.pragma('wal_autocheckpoint = 1000');
  }

  /**
   * Holds the writer back while the thread merges the full-text index a step and, with
   * `checkpoint`, copies every frame back, so that the next write transaction starts the WAL from
   * its first page. A reader still inside an older snapshot can keep it from starting over; the
   * next report tries again. When merging is left over, another hold follows shortly, with writes
   * let through in between.
   */
  private hold(worker: Worker, checkpoint: boolean): void {
    if (!this.holdWriter || this.holding || this.closed) return;
    this.holding = true;
    clearTimeout(this.again);
    const holdWriter = this.holdWriter;
    let more = false;
    void (async () => {
      const release = await holdWriter();
      const started = performance.now();
      try {
        if (this.worker !== worker || this.closed) return;
        const now = ++this.asked;
        const reply = await new Promise<HoldReply | undefined>((resolve) => {
          const limit = setTimeout(resolve, HOLD_LIMIT_MS);
          this.answer = {
            now,
            done: (r) => {
              clearTimeout(limit);
              resolve(r);
            },
          };
          worker.postMessage({ now, merge: true, checkpoint } satisfies CheckpointRequest);
        });
        this.stats.holds++;
        if (checkpoint && reply) this.stats.restartHolds++;
        this.stats.lastHoldMs = performance.now() - started;
        if (reply?.merged) this.stats.merges++;
        if (reply?.mergeError) this.stats.mergeError = reply.mergeError;
        more = reply?.more === true;
      } finally {
        this.answer = undefined;
        await release();
      }
    })()
      .catch(() => {})
      .finally(() => {
        this.holding = false;
        if (more && !this.closed) {
          this.again = setTimeout(() => this.hold(worker, false), MERGE_AGAIN_MS);
          this.again.unref();
        }
      });
  }

  private spawn(): void {
    this.stats.starts++;
    const worker = startDbThread('sqlite-checkpoint-worker', this.data);
    worker.unref();
    this.worker = worker;
    worker.on('message', (m: CheckpointReply) => {
      if ('ready' in m) {
        this.markReady();
        return;
      }
      this.stats.log = m.log;
      this.stats.checkpointed = m.checkpointed;
      if (m.now !== undefined) {
        if (m.now === this.answer?.now) this.answer.done(m);
        return;
      }
      // Writes happened since the last report: merge what they added to the full-text index; past
      // restartPages, checkpoint everything too so that the WAL starts over.
      const wrote = m.log !== this.lastLog;
      this.lastLog = m.log;
      if (m.log >= this.restartPages) this.hold(worker, true);
      else if (wrote) this.hold(worker, false);
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
