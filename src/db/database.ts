import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import type { Database } from './schema.ts';
import { flavourOf, NAME_FTS } from './derived.ts';
import { prepareOn, recheckPlanMode } from './pg-prepared.ts';
import { SqliteCheckpointer } from './sqlite-checkpointer.ts';
import { SqliteReaderPool, SqliteReadersDialect } from './sqlite-readers.ts';
import { cacheStatements } from './statement-cache.ts';

export type Dialect = 'sqlite' | 'postgres';

export interface Db {
  kysely: Kysely<Database>;
  dialect: Dialect;
  /** SQLite only: the threads plain reads run on, when there are any. */
  readers?: SqliteReaderPool;
  /** SQLite only, with the readers: the thread that checkpoints the WAL. */
  checkpointer?: SqliteCheckpointer;
  close(): Promise<void>;
}

/** Reader threads on SQLite unless told otherwise (STOWAGE_SQLITE_READERS). */
export const DEFAULT_SQLITE_READERS = 2;
const BUSY_TIMEOUT_MS = 5000;
/** How often the checkpointer thread copies the WAL back into the database file. */
const CHECKPOINT_EVERY_MS = 500;

/** int8 (bigint) columns hold byte counts below 2^53: read them as numbers, not strings. */
const pgTypes: pg.CustomTypesConfig = {
  getTypeParser: (oid, format) =>
    oid === pg.types.builtins.INT8 ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format),
};

const sqliteHandles = new WeakMap<Kysely<Database>, SQLite.Database>();

/**
 * SQLite: the main connection behind a Kysely instance made by openDatabase (not a transaction's),
 * for a hot path that runs prepared statements synchronously inside a Kysely transaction, which
 * holds the connection for it. Undefined on PostgreSQL.
 */
export function sqliteHandle<T>(kysely: Kysely<T>): SQLite.Database | undefined {
  return sqliteHandles.get(kysely as unknown as Kysely<Database>);
}

export interface OpenOptions {
  databaseUrl?: string;
  dataDir: string;
  sqlitePath?: string;
  /** SQLite: threads for plain reads (0 = every query on the main connection, as before). */
  sqliteReaders?: number;
  /** SQLite with readers: WAL pages past which the writer is held back once so the WAL starts over (tests lower it). */
  sqliteWalRestartPages?: number;
  /** PostgreSQL: the upload path's statements as named prepared statements (pg-prepared.ts); on unless false. */
  pgPreparedStatements?: boolean;
}

export function openDatabase(opts: OpenOptions): Db {
  if (opts.databaseUrl) {
    const pool = new pg.Pool({ connectionString: opts.databaseUrl, max: 10, types: pgTypes });
    // An idle client's error (the server restarted) must not crash the process.
    pool.on('error', () => {});
    // Nor a checked-out client's (the connection dropped between two queries of a transaction):
    // its query fails on its own, and the pool replaces the client.
    pool.on('connect', (client) => client.on('error', () => {}));
    if (opts.pgPreparedStatements !== false) {
      pool.on('connect', prepareOn);
      pool.on('acquire', (client) => recheckPlanMode(client));
    }
    const kysely = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
    return { kysely, dialect: 'postgres', close: () => kysely.destroy() };
  }
  let path = opts.sqlitePath;
  if (!path) {
    mkdirSync(opts.dataDir, { recursive: true });
    path = join(opts.dataDir, 'stowage.db');
  }
  const database = new SQLite(path);
  const journal = database.pragma('journal_mode = WAL', { simple: true });
  database.pragma('synchronous = NORMAL');
  database.pragma('foreign_keys = ON');
  // A statement that changes many pages (a file insert with its triggers and its FTS5 row) spills
  // its statement journal past 64 KiB into a temporary file: an open, writes and an unlink on the
  // main thread for about every other upload. In memory it stays a few pages. Migrations, whose
  // sorts can be large, switch it back to files while they run (migrateToLatest).
  database.pragma('temp_store = MEMORY');
  database.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
  cacheStatements(database);
  // Readers need a file they can open themselves (not an in-memory or temporary database) in WAL
  // mode, where they neither block nor wait for the writer and see each commit at once.
  const size = opts.sqliteReaders ?? DEFAULT_SQLITE_READERS;
  const shared = !database.memory && journal === 'wal' && !/^file:.*[?&]mode=memory/.test(database.name);
  const readers =
    size > 0 && shared
      ? new SqliteReaderPool({
          path: database.name.startsWith('file:') ? database.name : resolve(database.name),
          size,
          busyTimeoutMs: BUSY_TIMEOUT_MS,
        })
      : undefined;
  // With readers, WAL checkpoints leave the main connection too (sqlite-checkpointer.ts).
  const checkpointer = readers
    ? new SqliteCheckpointer(
        database,
        {
          path: database.name.startsWith('file:') ? database.name : resolve(database.name),
          busyTimeoutMs: BUSY_TIMEOUT_MS,
          everyMs: CHECKPOINT_EVERY_MS,
          ftsTables: [NAME_FTS],
        },
        opts.sqliteWalRestartPages,
      )
    : undefined;
  // Without the thread nothing would merge the name index's segments in the background: back to
  // FTS5's own merging in commits, where a thread had turned it off (sqlite-checkpoint-worker.ts).
  if (!checkpointer) restoreAutomerge(database, NAME_FTS);
  const dialect = new SqliteReadersDialect({ database }, readers ?? null);
  const kysely = new Kysely<Database>({ dialect });
  // Past RESTART_PAGES of WAL the checkpointer holds the writer back once, so the WAL starts over.
  checkpointer?.holdWriterWith(() => dialect.holdWriter());
  checkpointer?.start();
  sqliteHandles.set(kysely, database);
  return {
    kysely,
    dialect: 'sqlite',
    readers,
    checkpointer,
    close: async () => {
      await checkpointer?.close();
      await kysely.destroy();
    },
  };
}

/**
 * PostgreSQL: holds the workspace's row until the transaction ends, before any of its files.
 * The files trigger (derived.ts) updates that row after locking the file row it fires for,
 * while an upload that replaces a file updates it first (the bytes' usage) and the file after:
 * run at once, a move of that file and that upload deadlocked, and one of them failed with 500.
 * So every transaction that writes a workspace's files (an upload's, a file's change or delete,
 * a folder's delete) takes this first, and they queue on the workspace in one order. SQLite
 * writes one transaction at a time: nothing to do.
 */
export async function holdWorkspace(trx: Kysely<Database>, workspaceId: string): Promise<void> {
  if (flavourOf(trx) !== 'postgres') return;
  await sql`select 1 from workspaces where id = ${workspaceId} for no key update`.execute(trx);
}

/**
 * Runs `fn` in one transaction. Repositories built on `trx` take part in it, so a service can
 * make several of their changes atomically without writing a query itself.
 */
/** Work to do once a transaction opened by inTransaction has committed (dropped if it rolls back). */
const commitHooks = new WeakMap<Kysely<Database>, Array<() => void>>();

export async function inTransaction<T>(
  kysely: Kysely<Database>,
  fn: (trx: Kysely<Database>) => Promise<T>,
): Promise<T> {
  let hooks: Array<() => void> = [];
  const result = await kysely.transaction().execute((trx) => {
    commitHooks.set(trx, hooks);
    return fn(trx);
  });
  for (const hook of hooks) hook();
  hooks = [];
  return result;
}

/**
 * Runs `hook` after `trx` commits, or now when `trx` is not a transaction; false (and nothing
 * done) when `trx` is a transaction that inTransaction did not open.
 */
export function afterCommit(trx: Kysely<Database>, hook: () => void): boolean {
  if (!trx.isTransaction) {
    hook();
    return true;
  }
  const hooks = commitHooks.get(trx);
  if (!hooks) return false;
  hooks.push(hook);
  return true;
}

export async function ping(db: Db): Promise<void> {
  await sql`select 1`.execute(db.kysely);
}

/** True for a unique-constraint violation on either dialect. */
export function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: string } | undefined;
  return e?.code === '23505' || e?.code === 'SQLITE_CONSTRAINT_UNIQUE' || e?.code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}

export const nowIso = (): string => new Date().toISOString();

/** FTS5's automatic merging back on for `table` if a checkpointer thread turned it off (a missing table is left alone). */
function restoreAutomerge(database: SQLite.Database, table: string): void {
  const config = database
    .prepare("select 1 from sqlite_master where type = 'table' and name = ?")
    .get(`${table}_config`);
  if (!config) return;
  const off = database.prepare(`select 1 from "${table}_config" where k = 'automerge' and v = 0`).get();
  if (off) database.prepare(`insert into "${table}"("${table}", rank) values('automerge', 4)`).run();
}
