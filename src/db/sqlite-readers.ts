// SQLite reads off the event loop. better-sqlite3 is synchronous, so a long SELECT on the one
// connection stalls every request of the process while it runs. This dialect sends plain reads
// (a SelectQueryNode outside a transaction) to a few worker threads, each with its own read-only
// connection on the same WAL file; WAL lets them read while the main connection writes, and a
// read started after a commit sees it. Everything else (writes, DDL, raw `sql`, every query of a
// transaction) runs on the main connection through Kysely's own SqliteDriver, with its mutex:
// a transaction still holds that connection exclusively from `begin` to its end.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import SQLite from 'better-sqlite3';
import {
  type CompiledQuery,
  type DatabaseConnection,
  type Driver,
  type QueryCompiler,
  type QueryResult,
  SelectQueryNode,
  SqliteDialect,
  type SqliteDialectConfig,
  SqliteDriver,
  type TransactionSettings,
} from 'kysely';
import type { ReaderData, ReaderReply, ReaderRequest, WireError } from './sqlite-reader-worker.ts';

export interface ReaderPoolOptions {
  /** The database file (absolute, or as the main connection opened it). */
  path: string;
  /** Threads (each one connection). */
  size: number;
  busyTimeoutMs?: number;
}

/**
 * Reads of one row by a unique key (the API-key check every request makes): a thread costs them
 * more than it saves. Handing a read to a thread and taking its rows back costs the main thread
 * about 0.1 ms of messaging, where such a read on the main connection takes a few microseconds,
 * so these stay there (queued behind a transaction in progress, like writes).
 */
const pointReads = new WeakSet<object>();

/** Marks a compiled query as a point read (see `pointReads`); returns it. */
export function asPointRead<T extends CompiledQuery>(query: T): T {
  pointReads.add(query.query);
  return query;
}

/** No thread can take reads now (none started yet, or all gone): the caller reads on the main connection. */
class ReadersUnavailable extends Error {}

interface Job {
  request: ReaderRequest;
  resolve(rows: unknown[]): void;
  reject(err: Error): void;
  /** Threads this job was sent to; a thread that dies under a job gets it retried once elsewhere. */
  tries: number;
}

interface Slot {
  worker: Worker;
  ready: boolean;
  job: Job | null;
  /** Why the thread died, when it said (an uncaught error). */
  failure?: Error;
}

/**
 * Reader connections read the database file through a memory map of up to this many bytes
 * (SQLite caps it at its build's maximum, 2 GB for better-sqlite3's), instead of a `pread` and a
 * copy into the connection's own page cache for each page. A page of a folder's files reads 100
 * rows spread over the table: at 1M files (a 1.9 GB file) 1.35 against 0.86 ms per page, and
 * 456 against 597 pages a second with 32 clients. The mapped pages are the kernel's page cache,
 * shared with every process and counted in RSS once touched. A read-only connection never writes
 * through the map; SQLite sizes the map to the file at the start of each read.
 */
export const READER_MMAP_BYTES = 2 ** 31;

/** A thread that dies before opening its connection is restarted after this (doubling, at most 30 s). */
const RESTART_BASE_MS = 500;
const RESTART_MAX_MS = 30_000;

export class SqliteReaderPool {
  readonly size: number;
  private readonly data: ReaderData;
  private readonly slots: (Slot | null)[];
  /** Consecutive start failures per slot (the restart backoff). */
  private readonly startFailures: number[];
  private readonly restartTimers = new Set<NodeJS.Timeout>();
  private readonly queue: Job[] = [];
  private readyWaiters: Array<{ resolve(): void; reject(err: Error): void }> = [];
  private started = false;
  private closed = false;
  private served = 0;

  constructor(opts: ReaderPoolOptions) {
    this.size = opts.size;
    this.data = { path: opts.path, busyTimeoutMs: opts.busyTimeoutMs ?? 5000, mmapBytes: READER_MMAP_BYTES };
    this.slots = Array.from({ length: opts.size }, () => null);
    this.startFailures = Array.from({ length: opts.size }, () => 0);
  }

  /** Starts the threads (once). They open their connections in the background; until one is ready, reads stay on the main connection. */
  start(): void {
    if (this.started || this.closed) return;
    this.started = true;
    for (let i = 0; i < this.size; i++) this.spawn(i);
  }

  /** Resolves once every thread has its connection open (tests and benchmarks wait for it). */
  ready(): Promise<void> {
    this.start();
    if (this.closed) return Promise.reject(new Error('SQLite readers are closed'));
    if (this.readyCount() === this.size) return Promise.resolve();
    return new Promise((resolve, reject) => this.readyWaiters.push({ resolve, reject }));
  }

  /** True when a thread can take a read now. */
  get available(): boolean {
    return !this.closed && this.readyCount() > 0;
  }

  /** The live threads (a test terminates one to check that the pool recovers). */
  threads(): Worker[] {
    return this.slots.flatMap((s) => (s ? [s.worker] : []));
  }

  stats(): { ready: number; busy: number; queued: number; served: number } {
    return {
      ready: this.readyCount(),
      busy: this.slots.filter((s) => s?.job).length,
      queued: this.queue.length,
      served: this.served,
    };
  }

  /** Runs one SELECT on a thread. Rejects with ReadersUnavailable when no thread is ready. */
  run(sql: string, parameters: readonly unknown[]): Promise<unknown[]> {
    if (this.closed) return Promise.reject(new Error('SQLite readers are closed'));
    if (!this.available) return Promise.reject(new ReadersUnavailable());
    return new Promise((resolve, reject) => {
      this.queue.push({ request: { sql, parameters }, resolve, reject, tries: 0 });
      this.dispatch();
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const t of this.restartTimers) clearTimeout(t);
    this.restartTimers.clear();
    const closedError = new Error('SQLite readers are closed');
    for (const job of this.queue.splice(0)) job.reject(closedError);
    for (const w of this.readyWaiters.splice(0)) w.reject(closedError);
    const workers = this.threads();
    for (const slot of this.slots) {
      slot?.job?.reject(closedError);
      if (slot) slot.job = null;
    }
    this.slots.fill(null);
    await Promise.all(workers.map((w) => w.terminate()));
  }

  private readyCount(): number {
    let n = 0;
    for (const s of this.slots) if (s?.ready) n++;
    return n;
  }

  private spawn(index: number): void {
    const worker = startReaderThread(this.data);
    // An idle thread never holds the process open; one with a job in flight does (see assign).
    worker.unref();
    const slot: Slot = { worker, ready: false, job: null };
    this.slots[index] = slot;
    worker.on('message', (reply: ReaderReply) => this.onReply(slot, reply));
    worker.on('error', (err) => {
      slot.failure = err;
    });
    worker.on('exit', (code) => this.onExit(index, slot, code));
  }

  private onReply(slot: Slot, reply: ReaderReply): void {
    if ('ready' in reply) {
      slot.ready = true;
      this.startFailures[this.slots.indexOf(slot)] = 0;
      if (this.readyCount() === this.size) for (const w of this.readyWaiters.splice(0)) w.resolve();
      this.dispatch();
      return;
    }
    const job = slot.job;
    slot.job = null;
    slot.worker.unref();
    this.served++;
    if (job) {
      if ('error' in reply) job.reject(toError(reply.error));
      else job.resolve(asObjects(reply.columns, reply.rows, reply.blobs));
    }
    this.dispatch();
  }

  private onExit(index: number, slot: Slot, code: number): void {
    if (this.slots[index] !== slot) return; // closed, or already replaced
    this.slots[index] = null;
    const job = slot.job;
    if (job) {
      // A read changes nothing, so it can run again; twice dead is the query's own doing.
      if (job.tries < 2) this.queue.unshift(job);
      else {
        const err = new Error(
          `SQLite reader thread exited (code ${code}) while running this query${slot.failure ? `: ${slot.failure.message}` : ''}`,
        );
        Object.assign(err, { code: 'SQLITE_READER_EXITED' });
        job.reject(err);
      }
    }
    if (slot.ready) this.spawn(index);
    else {
      const failures = ++this.startFailures[index];
      const timer = setTimeout(
        () => {
          this.restartTimers.delete(timer);
          if (!this.closed) this.spawn(index);
        },
        Math.min(RESTART_MAX_MS, RESTART_BASE_MS * 2 ** (failures - 1)),
      );
      timer.unref();
      this.restartTimers.add(timer);
    }
    // With no thread left, queued reads go back to the main connection instead of waiting for a restart.
    if (!this.available) for (const j of this.queue.splice(0)) j.reject(new ReadersUnavailable());
    else this.dispatch();
  }

  private dispatch(): void {
    for (const slot of this.slots) {
      if (this.queue.length === 0) return;
      if (!slot?.ready || slot.job) continue;
      const job = this.queue.shift()!;
      job.tries++;
      try {
        slot.worker.postMessage(job.request);
      } catch (err) {
        // Parameters that cannot be cloned (better-sqlite3 would refuse them as well).
        job.reject(err as Error);
        continue;
      }
      slot.job = job;
      slot.worker.ref();
    }
  }
}

function startReaderThread(data: ReaderData): Worker {
  return startDbThread('sqlite-reader-worker', data);
}

/** Starts `./{module}` of this folder as a worker thread with `data` as its workerData. */
export function startDbThread(module: 'sqlite-reader-worker' | 'sqlite-checkpoint-worker', data: unknown): Worker {
  // Built (dist/*.js): the .js sibling. From source: the .ts file, through tsx. Node 20 does not
  // apply `--import tsx` from a Worker's execArgv to the worker's entry file, so a tiny eval'd
  // entry registers tsx and then imports the worker module.
  const jsUrl = new URL(`./${module}.js`, import.meta.url);
  const tsUrl = new URL(`./${module}.ts`, import.meta.url);
  const preferJs = import.meta.url.endsWith('.js');
  const useJs = preferJs ? existsSync(fileURLToPath(jsUrl)) : !existsSync(fileURLToPath(tsUrl));
  if (useJs) return new Worker(jsUrl, { workerData: data });
  const tsx = import.meta.resolve('tsx/esm/api');
  const entry = `import(${JSON.stringify(tsx)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(tsUrl.href)}); });`;
  return new Worker(entry, { eval: true, workerData: data, execArgv: [] });
}

/** A worker's error as the main-thread driver would have thrown it: same class, message and `code`. */
function toError(e: WireError): Error {
  let err: Error;
  if (e.name === 'SqliteError' && e.code) return new SQLite.SqliteError(e.message, e.code);
  if (e.name === 'TypeError') err = new TypeError(e.message);
  else if (e.name === 'RangeError') err = new RangeError(e.message);
  else {
    err = new Error(e.message);
    err.name = e.name;
  }
  if (e.code) Object.assign(err, { code: e.code });
  return err;
}

/**
 * Makers of a row's object, one per column list: an object literal of the columns in order (a
 * later column of the same name overwriting an earlier one, as better-sqlite3 does). Objects
 * filled key by key past V8's limit of fast properties turn into slow dictionaries (100 file rows of 26
 * columns: 120 µs to make, and twice as slow to read and encode, against 4 µs for the literal).
 * The names come from the SQL the application sends; each is quoted as a JSON string.
 */
const makers = new Map<string, (row: unknown[]) => Record<string, unknown>>();
const MAKERS_MAX = 500;

function makerOf(columns: string[]): (row: unknown[]) => Record<string, unknown> {
  // JSON: no two different lists share a key, whatever characters their names hold.
  const key = JSON.stringify(columns);
  let make = makers.get(key);
  if (!make) {
    // A literal's `"__proto__": x` would set the prototype; as a computed key it is a column.
    const fields = columns
      .map((name, i) => `${name === '__proto__' ? '["__proto__"]' : JSON.stringify(name)}: row[${i}]`)
      .join(', ');
    make = new Function('row', `return { ${fields} };`) as (row: unknown[]) => Record<string, unknown>;
    if (makers.size >= MAKERS_MAX) makers.delete(makers.keys().next().value!);
    makers.set(key, make);
  }
  return make;
}

/**
 * A reader's rows (arrays) as the main connection gives them: one object per row. Structured
 * cloning turns a row's Buffers into Uint8Arrays; better-sqlite3 gives Buffers, so they are turned back.
 */
function asObjects(columns: string[], rows: unknown[][], blobs: boolean): Record<string, unknown>[] {
  const make = makerOf(columns);
  const out = new Array<Record<string, unknown>>(rows.length);
  for (let r = 0; r < rows.length; r++) {
    const o = make(rows[r]);
    if (blobs)
      for (const [k, v] of Object.entries(o))
        if (v instanceof Uint8Array && !Buffer.isBuffer(v)) o[k] = Buffer.from(v.buffer, v.byteOffset, v.byteLength);
    out[r] = o;
  }
  return out;
}

/**
 * A connection as Kysely sees it. Nothing is held until needed: a plain read goes to the readers;
 * anything else takes the main connection for that one query; `beginTransaction` takes it until
 * `releaseConnection`, and every query in between (reads too) runs on it.
 */
class RoutedConnection implements DatabaseConnection {
  private held: DatabaseConnection | null = null;

  constructor(
    private readonly main: SqliteDriver,
    private readonly readers: SqliteReaderPool | null,
  ) {}

  async holdMain(): Promise<DatabaseConnection> {
    this.held ??= await this.main.acquireConnection();
    return this.held;
  }

  async releaseMain(): Promise<void> {
    const held = this.held;
    this.held = null;
    if (held) await this.main.releaseConnection();
  }

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    if (this.held) return this.held.executeQuery<R>(query);
    if (this.readers?.available && SelectQueryNode.is(query.query) && !pointReads.has(query.query)) {
      try {
        return { rows: (await this.readers.run(query.sql, query.parameters)) as R[] };
      } catch (err) {
        if (!(err instanceof ReadersUnavailable)) throw err;
      }
    }
    const conn = await this.main.acquireConnection();
    try {
      return await conn.executeQuery<R>(query);
    } finally {
      await this.main.releaseConnection();
    }
  }

  // Streams are rare and hold a statement open across awaits: they stay on the main connection.
  async *streamQuery<R>(query: CompiledQuery, chunkSize?: number): AsyncIterableIterator<QueryResult<R>> {
    if (this.held) {
      yield* this.held.streamQuery<R>(query, chunkSize);
      return;
    }
    const conn = await this.main.acquireConnection();
    try {
      yield* conn.streamQuery<R>(query, chunkSize);
    } finally {
      await this.main.releaseConnection();
    }
  }
}

class ReadRoutingDriver implements Driver {
  private readonly main: SqliteDriver;

  constructor(
    config: SqliteDialectConfig,
    private readonly readers: SqliteReaderPool | null,
  ) {
    this.main = new SqliteDriver(config);
  }

  async init(): Promise<void> {
    await this.main.init();
    this.readers?.start();
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    return new RoutedConnection(this.main, this.readers);
  }

  /** Takes the main connection (the one writer) as a transaction would, until the returned function. */
  async holdWriter(): Promise<() => Promise<void>> {
    await this.main.acquireConnection();
    return () => this.main.releaseConnection();
  }

  // SQLite has no isolation levels or access modes to set (Kysely's driver ignores them as well).
  async beginTransaction(connection: DatabaseConnection, _settings: TransactionSettings): Promise<void> {
    // Held until releaseConnection, which Kysely calls whether begin, commit or rollback failed.
    await this.main.beginTransaction(await routed(connection).holdMain());
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await this.main.commitTransaction(await routed(connection).holdMain());
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    await this.main.rollbackTransaction(await routed(connection).holdMain());
  }

  async savepoint(connection: DatabaseConnection, name: string, compile: QueryCompiler['compileQuery']): Promise<void> {
    await this.main.savepoint(await routed(connection).holdMain(), name, compile);
  }

  async rollbackToSavepoint(
    connection: DatabaseConnection,
    name: string,
    compile: QueryCompiler['compileQuery'],
  ): Promise<void> {
    await this.main.rollbackToSavepoint(await routed(connection).holdMain(), name, compile);
  }

  async releaseSavepoint(
    connection: DatabaseConnection,
    name: string,
    compile: QueryCompiler['compileQuery'],
  ): Promise<void> {
    await this.main.releaseSavepoint(await routed(connection).holdMain(), name, compile);
  }

  async releaseConnection(connection: DatabaseConnection): Promise<void> {
    await routed(connection).releaseMain();
  }

  async destroy(): Promise<void> {
    await this.readers?.close();
    await this.main.destroy();
  }
}

function routed(connection: DatabaseConnection): RoutedConnection {
  if (!(connection instanceof RoutedConnection)) throw new Error('not a connection of this driver');
  return connection;
}

/** Kysely's SQLite dialect (compiler, adapter, introspector) with reads routed to `readers` when given. */
export class SqliteReadersDialect extends SqliteDialect {
  private driver?: ReadRoutingDriver;

  constructor(
    private readonly dialectConfig: SqliteDialectConfig,
    private readonly readers: SqliteReaderPool | null,
  ) {
    super(dialectConfig);
  }

  override createDriver(): Driver {
    this.driver = new ReadRoutingDriver(this.dialectConfig, this.readers);
    return this.driver;
  }

  /** Holds the writer back (see ReadRoutingDriver.holdWriter); for the WAL checkpointer. */
  holdWriter(): Promise<() => Promise<void>> {
    if (!this.driver) throw new Error('the dialect has no driver yet');
    return this.driver.holdWriter();
  }
}
