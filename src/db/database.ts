import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, PostgresDialect, SqliteDialect, sql } from 'kysely';
import pg from 'pg';
import type { Database } from './schema.ts';

export type Dialect = 'sqlite' | 'postgres';

export interface Db {
  kysely: Kysely<Database>;
  dialect: Dialect;
  close(): Promise<void>;
}

/** int8 (bigint) columns hold byte counts below 2^53: read them as numbers, not strings. */
const pgTypes: pg.CustomTypesConfig = {
  getTypeParser: (oid, format) =>
    oid === pg.types.builtins.INT8 ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format),
};

export function openDatabase(opts: { databaseUrl?: string; dataDir: string; sqlitePath?: string }): Db {
  if (opts.databaseUrl) {
    const pool = new pg.Pool({ connectionString: opts.databaseUrl, max: 10, types: pgTypes });
    // An idle client's error (the server restarted) must not crash the process.
    pool.on('error', () => {});
    // Nor a checked-out client's (the connection dropped between two queries of a transaction):
    // its query fails on its own, and the pool replaces the client.
    pool.on('connect', (client) => client.on('error', () => {}));
    const kysely = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
    return { kysely, dialect: 'postgres', close: () => kysely.destroy() };
  }
  let path = opts.sqlitePath;
  if (!path) {
    mkdirSync(opts.dataDir, { recursive: true });
    path = join(opts.dataDir, 'stowage.db');
  }
  const database = new SQLite(path);
  database.pragma('journal_mode = WAL');
  database.pragma('synchronous = NORMAL');
  database.pragma('foreign_keys = ON');
  database.pragma('busy_timeout = 5000');
  cacheStatements(database);
  const kysely = new Kysely<Database>({ dialect: new SqliteDialect({ database }) });
  return { kysely, dialect: 'sqlite', close: () => kysely.destroy() };
}

/**
 * Kysely's SQLite driver prepares every query anew; the same few dozen SQL texts come back on
 * every request, so prepared statements are kept (bounded) and reused. A statement still busy
 * (an open iterator) is never handed out twice: a fresh one is prepared instead.
 */
function cacheStatements(database: SQLite.Database, max = 500): void {
  const prepare = database.prepare.bind(database);
  const cache = new Map<string, SQLite.Statement>();
  database.prepare = ((source: string) => {
    const known = cache.get(source);
    if (known && !known.busy) return known;
    const stmt = prepare(source);
    if (!known) {
      if (cache.size >= max) cache.delete(cache.keys().next().value!);
      cache.set(source, stmt);
    }
    return stmt;
  }) as typeof database.prepare;
}

/**
 * Runs `fn` in one transaction. Repositories built on `trx` take part in it, so a service can
 * make several of their changes atomically without writing a query itself.
 */
export function inTransaction<T>(kysely: Kysely<Database>, fn: (trx: Kysely<Database>) => Promise<T>): Promise<T> {
  return kysely.transaction().execute(fn);
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
