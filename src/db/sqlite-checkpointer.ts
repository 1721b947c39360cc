// WAL checkpoints off the event loop. SQLite copies the WAL back into the database file when a
// commit finds it past `wal_autocheckpoint` pages (1,000 by default), and it does so inside that
// commit: on the main connection, synchronously, with an fsync of the database file. On a
// library of a million files that is a 40 ms stall of the whole process every thousand pages
// written, and hundreds of ms after a burst (measured in issue 18). Here a thread of its own
// checkpoints every `everyMs` instead, and the main connection's automatic checkpoint is raised
// to a safety net (SAFETY_NET_PAGES) that only a checkpointer that cannot keep up ever reaches.
import type { Worker } from 'node:worker_threads';
import type SQLite from 'better-sqlite3';
import type { CheckpointData, CheckpointReply } from './sqlite-checkpoint-worker.ts';
import { startDbThread } from './sqlite-readers.ts';

/** About 400 MB of WAL at 4 KiB pages: the main connection checkpoints only past this. */
export const SAFETY_NET_PAGES = 100_000;
const RESTART_MS = 1000;

export class SqliteCheckpointer {
  private worker?: Worker;
  private timer?: NodeJS.Timeout;
  private closed = false;
  /** What the thread reported last, and how often it was started. */
  readonly stats = { log: 0, checkpointed: 0, starts: 0 };

  constructor(
    private readonly main: SQLite.Database,
    private readonly data: CheckpointData,
  ) {}

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

  private spawn(): void {
    this.stats.starts++;
    const worker = startDbThread('sqlite-checkpoint-worker', this.data);
    worker.unref();
    this.worker = worker;
    worker.on('message', (m: CheckpointReply) => {
      if ('ready' in m) return;
      this.stats.log = m.log;
      this.stats.checkpointed = m.checkpointed;
    });
    // Its errors end it; the exit below starts another.
    worker.on('error', () => {});
    worker.on('exit', () => {
      if (this.worker !== worker || this.closed) return;
      this.worker = undefined;
      this.timer = setTimeout(() => this.spawn(), RESTART_MS);
      this.timer.unref();
    });
  }
}
