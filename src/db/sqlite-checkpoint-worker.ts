// The SQLite checkpointer thread (see sqlite-checkpointer.ts). It owns one read-write connection
// that never writes a row: every `everyMs` it copies the WAL's committed pages back into the
// database file (a PASSIVE checkpoint, which neither waits for nor blocks the writer or the
// readers) and says how far it got.
import { parentPort, workerData } from 'node:worker_threads';
import SQLite from 'better-sqlite3';

export interface CheckpointData {
  path: string;
  busyTimeoutMs: number;
  everyMs: number;
}

/** `log`: frames in the WAL; `checkpointed`: how many of them are in the database file now. */
export type CheckpointReply = { ready: true } | { log: number; checkpointed: number };

const port = parentPort;
if (!port) throw new Error('sqlite-checkpoint-worker runs as a worker thread');
const { path, busyTimeoutMs, everyMs } = workerData as CheckpointData;

const database = new SQLite(path, { fileMustExist: true });
database.pragma(`busy_timeout = ${busyTimeoutMs}`);

let last = { log: -1, checkpointed: -1 };
setInterval(() => {
  const [r] = database.pragma('wal_checkpoint(PASSIVE)') as { busy: number; log: number; checkpointed: number }[];
  if (r.log === last.log && r.checkpointed === last.checkpointed) return;
  last = { log: r.log, checkpointed: r.checkpointed };
  port.postMessage(last satisfies CheckpointReply);
}, everyMs);

port.postMessage({ ready: true } satisfies CheckpointReply);
