// SHA-256 off the main thread. Uploads to local disk are hashed by reading back each range of
// the file right after it was written (it is still in the page cache), on one worker thread:
// the event loop only moves bytes from sockets to files, and on a machine with more than one
// core the hash costs no request any time. Jobs are opened, fed ranges in file order, then
// digested; ranges of one job are read in the order they were fed.
import { Worker } from 'node:worker_threads';

export interface HashJob {
  /** Hash bytes [start, end) of `path`; they must already be written. */
  feed(path: string, start: number, end: number): void;
  /** The SHA-256 of everything fed, in hex. Ends the job. */
  digest(): Promise<string>;
  /** Ends the job without a result. */
  drop(): void;
}

export class FileHasher {
  private worker: Worker | null = null;
  private nextId = 1;
  private nextSeq = 1;
  private readonly waiting = new Map<number, { resolve(hex: string): void; reject(err: Error): void }>();
  private open = 0;

  private thread(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(new URL('./hash-thread.mjs', import.meta.url));
    worker.on('message', (msg: { seq: number; hex?: string; error?: string }) => {
      const w = this.waiting.get(msg.seq);
      this.waiting.delete(msg.seq);
      if (msg.hex) w?.resolve(msg.hex);
      else w?.reject(new Error(`hashing failed: ${msg.error}`));
      this.idle();
    });
    const fail = (err: Error) => {
      for (const w of this.waiting.values()) w.reject(err);
      this.waiting.clear();
      this.worker = null;
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`hashing thread exited with code ${code}`)));
    this.worker = worker;
    return worker;
  }

  /** The thread does not hold the process open while no job is open. */
  private idle(): void {
    if (this.open === 0 && this.waiting.size === 0) this.worker?.unref();
  }

  start(): HashJob {
    const worker = this.thread();
    worker.ref();
    const id = this.nextId++;
    this.open++;
    worker.postMessage({ op: 'open', id });
    let ended = false;
    const end = () => {
      if (ended) return false;
      ended = true;
      this.open--;
      return true;
    };
    return {
      feed: (path, start, endAt) => {
        if (!ended && endAt > start) worker.postMessage({ op: 'feed', id, path, start, end: endAt });
      },
      digest: () => {
        if (!end()) return Promise.reject(new Error('hash job already ended'));
        const seq = this.nextSeq++;
        return new Promise<string>((resolve, reject) => {
          this.waiting.set(seq, { resolve, reject });
          worker.postMessage({ op: 'digest', id, seq });
        });
      },
      drop: () => {
        if (!end()) return;
        worker.postMessage({ op: 'drop', id });
        this.idle();
      },
    };
  }

  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = null;
    await worker?.terminate();
  }
}
