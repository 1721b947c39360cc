// The SQLite checkpointer thread (see sqlite-checkpointer.ts). It owns one read-write connection
// that never writes a row: every `everyMs` it copies the WAL's committed pages back into the
// database file (a PASSIVE checkpoint, which neither waits for nor blocks the writer or the
// readers) and says how far it got. Asked with `{ now }` while the main thread holds the writer
// back, it does the writer's deferred work and answers with the same `now`:
// - `merge`: merges the full-text indexes' segments (FTS5 'merge'), for at most MERGE_BUDGET_MS.
//   Their automatic merging, which ran inside a commit on the main thread (up to 64 pages per
//   level every 64 pages written: 150 ms and more on a million names), is turned off here;
// - `checkpoint`: copies every frame back, so that the next write starts the WAL over.
import { parentPort, workerData } from 'node:worker_threads';
import SQLite from 'better-sqlite3';

export interface CheckpointData {
  path: string;
  busyTimeoutMs: number;
  everyMs: number;
  /** FTS5 tables whose segments this thread merges (absent ones are skipped until they exist). */
  ftsTables: string[];
}

/**
 * `log`: frames in the WAL; `checkpointed`: how many of them are in the database file now; `now`:
 * the request this answers, when it was asked for; `merged`: whether a merge did any work.
 */
export type CheckpointReply =
  | { ready: true }
  | { log: number; checkpointed: number; now?: number; merged?: boolean; more?: boolean; mergeError?: string };

/** Work asked for at once, with the writer held back (`now` comes back in the answer). */
export interface CheckpointRequest {
  now: number;
  merge: boolean;
  checkpoint: boolean;
}

/** Pages of merged index written per FTS5 'merge' statement, and the time given to merging per request. */
const MERGE_PAGES = 64;
const MERGE_BUDGET_MS = 10;
/** Tries again this often, this many times, while a reader in an older snapshot keeps frames from being copied. */
const RETRY_MS = 2;
const RETRIES = 50;

const port = parentPort;
if (!port) throw new Error('sqlite-checkpoint-worker runs as a worker thread');
const { path, busyTimeoutMs, everyMs, ftsTables } = workerData as CheckpointData;

const database = new SQLite(path, { fileMustExist: true });
database.pragma(`busy_timeout = ${busyTimeoutMs}`);
const pause = new Int32Array(new SharedArrayBuffer(4));

const checkpoint = () => {
  const [r] = database.pragma('wal_checkpoint(PASSIVE)') as { busy: number; log: number; checkpointed: number }[];
  return { log: r.log, checkpointed: r.checkpointed };
};

const quote = (name: string) => `"${name.replaceAll('"', '""')}"`;
const tableExists = database.prepare("select 1 from sqlite_master where type = 'table' and name = ?");
/**
 * Each table's merge step, prepared once its table exists; its automatic merging is turned off
 * then (once per thread: the setting is kept in the database).
 */
const steps = new Map<string, SQLite.Statement>();
function mergeStep(table: string): SQLite.Statement | undefined {
  let step = steps.get(table);
  if (step) return step;
  if (!tableExists.get(table)) return undefined;
  const t = quote(table);
  database.prepare(`insert into ${t}(${t}, rank) values('automerge', 0)`).run();
  step = database.prepare(`insert into ${t}(${t}, rank) values('merge', ${MERGE_PAGES})`);
  steps.set(table, step);
  return step;
}

const totalChanges = database.prepare('select total_changes() as n').pluck();

/** Merges segments of each FTS5 table for up to MERGE_BUDGET_MS: whether any work was done, and whether work is left. */
function merge(): { merged: boolean; more: boolean } {
  const started = performance.now();
  let merged = false;
  let more = false;
  for (const table of ftsTables) {
    const step = mergeStep(table);
    if (!step) continue;
    for (;;) {
      if (performance.now() - started >= MERGE_BUDGET_MS) {
        more = true;
        break;
      }
      // FTS5: a rise of the connection's total changes under 2 means the step found nothing to merge.
      const before = totalChanges.get() as number;
      step.run();
      if ((totalChanges.get() as number) - before < 2) break;
      merged = true;
    }
  }
  return { merged, more };
}

let last = { log: -1, checkpointed: -1 };
setInterval(() => {
  const r = checkpoint();
  if (r.log === last.log && r.checkpointed === last.checkpointed) return;
  last = r;
  port.postMessage(last satisfies CheckpointReply);
}, everyMs);

// No frame is added while the writer is held back: once the readers that started before the
// hold are done, every frame can be copied (which lets the next write start the WAL over).
port.on('message', (m: CheckpointRequest) => {
  let merged = false;
  let more = false;
  let mergeError: string | undefined;
  if (m.merge) {
    try {
      ({ merged, more } = merge());
    } catch (err) {
      mergeError = (err as Error).message;
      // Prepared again (and automerge turned off again) next time, should a migration have rebuilt a table.
      steps.clear();
    }
  }
  last = checkpoint();
  for (let i = 0; m.checkpoint && i < RETRIES && last.checkpointed < last.log; i++) {
    Atomics.wait(pause, 0, 0, RETRY_MS);
    last = checkpoint();
  }
  port.postMessage({ ...last, now: m.now, merged, more, mergeError } satisfies CheckpointReply);
});

port.postMessage({ ready: true } satisfies CheckpointReply);
