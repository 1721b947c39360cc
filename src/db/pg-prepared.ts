// PostgreSQL: the few statements every upload sends (the API-key check, the storage intent, the
// one-statement commit) go as named prepared statements, so each connection parses and analyses
// their text once instead of on every upload. Kysely sends every query unnamed; here a pool's
// clients send the texts registered with `prepared` by name (pg parses a name once per
// connection). The commit's text is long (five CTEs and a file row of 22 columns): parsing it was
// about a sixth of PostgreSQL's CPU per upload.
//
// Those sessions plan with plan_cache_mode = force_custom_plan: a prepared statement is still
// planned for its values each time, as an unnamed one is. With PostgreSQL's default (a generic
// plan after five runs when it looks no dearer), the commit ran on a generic plan that cost more
// than parsing saved. Measured sequentially, intent + commit, PostgreSQL CPU per upload: 0.66 ms
// unnamed; 0.72 named with the default; 0.58 named with custom plans.
//
// Off with STOWAGE_PG_PREPARED_STATEMENTS=false, for a pooler in front of PostgreSQL that does not
// keep prepared statements per client (PgBouncer in transaction mode before 1.21, or without
// max_prepared_statements).
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

/** The name `text` is sent under, if it is registered (for tests). */
export const preparedName = (text: string): string | undefined => names.get(text);

/** A new client of a pool that prepares: custom plans for its session, and registered texts by name. */
export function prepareOn(client: pg.PoolClient): void {
  client.query('set plan_cache_mode = force_custom_plan').catch(() => {});
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  client.query = ((text: unknown, values?: unknown, callback?: unknown) => {
    const name = typeof text === 'string' ? names.get(text) : undefined;
    if (name !== undefined) return query({ name, text, values }, callback);
    return query(text, values, callback);
  }) as typeof client.query;
}
