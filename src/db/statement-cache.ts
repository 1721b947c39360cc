import type SQLite from 'better-sqlite3';

/**
 * Kysely's SQLite driver prepares every query anew; the same few dozen SQL texts come back on
 * every request, so prepared statements are kept (bounded) and reused. A statement still busy
 * (an open iterator) is never handed out twice: a fresh one is prepared instead. Used on the
 * main connection and in every reader thread (each connection has its own statements).
 */
export function cacheStatements(database: SQLite.Database, max = 500): void {
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
