// PostgreSQL: the few statements every upload sends (the API-key check, the storage intent, the
// one-statement commit) go as named prepared statements, so each connection parses and analyses
// their text once instead of on every upload. Kysely sends every query unnamed; here a pool's
// clients send the texts registered with `prepared` by name (pg parses a name once per
// connection). The commit's text is long (five CTEs and a file row of 22 columns): parsing it was
// about a sixth of PostgreSQL's CPU per upload.
//
// Their plans are left to PostgreSQL's plan cache (plan_cache_mode as the server sets it, auto by
// default): after five runs a statement keeps a generic plan when it looks no dearer than
// planning for each run's values. For these statements, every lookup by a unique key, the plans
// are the same either way, and planning is what costs: the commit reads its tables' indexes
// (files has ten) each time it is planned. (A generic plan made while a table has no statistics
// yet scans it, a few pages; autovacuum's first analyze invalidates the plan.) Measured sequentially on a workspace of 200,000
// files, key check + intent + commit, PostgreSQL CPU per upload: 1.05 ms unnamed; 0.9 ms named
// and planned per run (plan_cache_mode = force_custom_plan, what these sessions set before);
// 0.55 ms named on generic plans. 32 clients, 5,000 uploads of 100 KB: 1.4 -> 1.0 ms. Unnamed statements (every other
// query) are planned for their values whatever the setting.
//
// Off with STOWAGE_PG_PREPARED_STATEMENTS=false, for a pooler in front of PostgreSQL that does not
// keep prepared statements per client (PgBouncer in transaction mode before 1.21, or without
// max_prepared_statements). Should PostgreSQL refuse a named statement all the same (it does not
// exist or already exists on the server connection, or its plan would change its result type
// after another node's migration), the process stops naming at once: that one query fails, the
// next ones go unnamed.
import type { CompiledQuery } from 'kysely';
import type pg from 'pg';

/** Registered texts are few (one per call site and column set); past this, new ones go unnamed. */
const MAX_NAMED = 64;
const names = new Map<string, string>();

/** Sends `query`'s text as a named prepared statement where the pool prepares; returns `query`. */
export function prepared<Q extends CompiledQuery<unknown>>(query: Q): Q {
  if (!names.has(query.sql) && names.size < MAX_NAMED) names.set(query.sql, `stowage_${names.size + 1}`);
  return query;
}

/**
 * What PostgreSQL answers when a named statement cannot be used: it does not exist or already
 * exists on the server connection (a pooler that hands out server connections per transaction),
 * or its cached plan would change its result's type (another node altered a column it reads).
 */
const UNUSABLE = new Set(['26000', '42P05', '0A000']);

/** Turned off for the process at the first such answer: from then on every text goes unnamed. */
let naming = true;

/** Whether this process still sends registered texts by name (for tests). */
export const preparedNaming = (): boolean => naming;

/** A new client of a pool that prepares: registered texts go by name. */
export function prepareOn(client: pg.PoolClient): void {
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  client.query = ((text: unknown, values?: unknown, callback?: unknown) => {
    if (typeof values === 'function') [values, callback] = [undefined, values];
    const name = naming && typeof text === 'string' ? names.get(text) : undefined;
    if (name === undefined) return query(text, values, callback);
    const off = (err: unknown) => {
      if (UNUSABLE.has((err as { code?: string }).code ?? '')) naming = false;
    };
    if (typeof callback === 'function')
      return query({ name, text, values }, (err: unknown, result: unknown) => {
        if (err) off(err);
        callback(err, result);
      });
    return (query({ name, text, values }) as Promise<unknown>).catch((err) => {
      off(err);
      throw err;
    });
  }) as typeof client.query;
}
