// The SQLite checkpointer thread (see sqlite-checkpointer.ts). It owns one read-write connection
// that never writes a row: every `everyMs` it copies the WAL's committed pages back into the
// database file (a PASSIVE checkpoint, which neither waits for nor blocks the writer or the
// readers) and says how far it got. Asked with `{ now }` (while the main thread holds the writer
// back), it checkpoints at once and answers with the same `now`.
import { parentPort, workerData } from 'node:worker_threads';
import SQLite from 'better-sqlite3';

export interface CheckpointData {
  path: string;
  busyTimeoutMs: number;
  everyMs: number;
}

/**
 * `log`: frames in the WAL; `checkpointed`: how many of them are in the database file now; `now`:
 * the request this answers, when it was asked for.
 */
export type CheckpointReply = { ready: true } | { log: number; checkpointed: number; now?: number };

/** A checkpoint asked for at once (`now` comes back in the answer). */
export interface CheckpointRequest {
  now: number;
}

const port = parentPort;
if (!port) throw new Error('sqlite-checkpoint-worker runs as a worker thread');
const { path, busyTimeoutMs, everyMs } = workerData as CheckpointData;

const database = new SQLite(path, { fileMustExist: true });
database.pragma(`busy_timeout = ${busyTimeoutMs}`);

const checkpoint = () => {
  const [r] = database.pragma('wal_checkpoint(PASSIVE)') as { busy: number; log: number; checkpointed: number }[];
  return { log: r.log, checkpointed: r.checkpointed };
};

let last = { log: -1, checkpointed: -1 };
setInterval(() => {
  const r = checkpoint();
  if (r.log === last.log && r.checkpointed === last.checkpointed) return;
  last = r;
  port.postMessage(last satisfies CheckpointReply);
}, everyMs);

/** Tries again this often, this many times, while a reader in an older snapshot keeps frames from being copied. */
const RETRY_MS = 2;
const RETRIES = 50;
const pause = new Int32Array(new SharedArrayBuffer(4));

// Asked while the writer is held back: no frame is added meanwhile, so once the readers that
// started before the hold are done, every frame can be copied (which lets the next write start
// the WAL over).
port.on('message', (m: CheckpointRequest) => {
  last = checkpoint();
  for (let i = 0; i < RETRIES && last.checkpointed < last.log; i++) {
    Atomics.wait(pause, 0, 0, RETRY_MS);
    last = checkpoint();
  }
  port.postMessage({ ...last, now: m.now } satisfies CheckpointReply);
});

port.postMessage({ ready: true } satisfies CheckpointReply);
