// PostgreSQL: the few statements every upload sends (the API-key check, the storage intent, the
// one-statement commit) go as named prepared statements, so each connection parses and analyses
// their text once instead of on every upload. Kysely sends every query unnamed; here a pool's
// clients send the texts registered with `prepared` by name (pg parses a name once per
// connection). The commit's text is long (five CTEs and a file row of 22 columns): parsing it was
// about a sixth of PostgreSQL's CPU per upload.
//
// How they are planned depends on how large `files` was when the connection opened.
// PostgreSQL's default keeps a generic plan after five runs, and that plan is made once, for the
// tables as they are then, and kept until an analyze of one of them invalidates it. On a new
// database it is made while `files` holds a handful of rows, so it checks whether a name is free
// by scanning the table, and keeps doing so as the table grows until autovacuum gets to analyze
// it: 32 clients on a fresh database, PostgreSQL CPU per upload rose from 1.3 ms to 3.6 ms over
// the first 8,000 uploads (with custom plans it fell from 1.9 to 1.6 ms). Once the table is
// large, its generic plan looks the name up in an index, and growth only makes that more so; the
// statements' other lookups are by unique key in small tables (workspaces, api_keys,
// storage_intents), a scan of a few pages at worst until their next analyze. So a connection that
// opens while `files` holds fewer than GENERIC_FROM rows by the planner's statistics (reltuples,
// -1 before the first analyze) plans every run (plan_cache_mode = force_custom_plan); one that
// opens later keeps the server's setting, so its statements go generic and skip the planning:
// 32 clients on a workspace of 200,000 files, PostgreSQL CPU per upload 1.44 to 1.9 ms planned
// per run, 1.07 to 1.37 ms generic (sequentially 0.9 against 0.55 ms). Unnamed statements, every
// other query, are planned for their values whatever the setting.
//
// A pool keeps its connections for as long as work keeps them busy, so a connection opened on a
// new database would plan every run for good, however large `files` grows. A connection that
// plans per run therefore asks again when it is checked out and PLAN_RECHECK_MS have passed
// since it last asked (one catalog read, sent ahead of the checkout's first statement, never
// inside a transaction), and goes over to the server's setting (what RESET would give, not the
// session's own) once the table is large.
//
// Off with STOWAGE_PG_PREPARED_STATEMENTS=false, for a pooler in front of PostgreSQL that does not
// keep prepared statements per client (PgBouncer in transaction mode before 1.21, or without
// max_prepared_statements). Should PostgreSQL refuse a named statement all the same (it does not
// exist or already exists on the server connection, or its plan would change its result type
// after another node's migration), the process stops naming at once: that one query fails, the
// next ones go unnamed.
import type { CompiledQuery } from 'kysely';
import type pg from 'pg';

/** Rows of `files` (by the planner's statistics) from which a new connection keeps generic plans. */
export const GENERIC_FROM = 10_000;

/**
 * A connection's first statement: custom plans while `files` is small or never analyzed, else the
 * server's own plan_cache_mode (see above).
 */
const PLAN_MODE_SQL = `select set_config('plan_cache_mode',
  case when coalesce((select reltuples from pg_class where oid = to_regclass('files')), -1) >= ${GENERIC_FROM}
    then (select reset_val from pg_settings where name = 'plan_cache_mode') else 'force_custom_plan' end,
  false) as mode`;

/** How long a connection that plans every run goes before it asks again whether `files` is large. */
export const PLAN_RECHECK_MS = 30_000;

/** Per connection: whether it plans every run, and when it last asked. */
const planModes = new WeakMap<pg.PoolClient, { custom: boolean; askedAt: number }>();

/** Sets the connection's plan cache mode for `files` as it is now (see above). */
function choosePlanMode(client: pg.PoolClient): void {
  const state = planModes.get(client) ?? { custom: true, askedAt: 0 };
  planModes.set(client, state);
  state.askedAt = Date.now();
  client.query(PLAN_MODE_SQL).then(
    (result: pg.QueryResult<{ mode: string }>) => {
      state.custom = result.rows[0]?.mode === 'force_custom_plan';
    },
    () => {},
  );
}

/**
 * A checked-out client of a pool that prepares (the pool's 'acquire' event, so nothing of the
 * checkout has been sent yet): one that plans every run asks again once `every` ms have passed.
 */
export function recheckPlanMode(client: pg.PoolClient, every = PLAN_RECHECK_MS): void {
  const state = planModes.get(client);
  if (state?.custom && Date.now() - state.askedAt >= every) choosePlanMode(client);
}

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

/** A new client of a pool that prepares: its plan cache mode (see above), and registered texts by name. */
export function prepareOn(client: pg.PoolClient): void {
  choosePlanMode(client);
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
