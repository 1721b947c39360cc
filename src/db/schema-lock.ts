// Schema changes on one PostgreSQL database, one Stowage process at a time. Each process brings
// two schemas up to date at start: its own (Kysely's migrator) and graphile-worker's job queue.
// Kysely's migrator first lists every table and column of the database, and PostgreSQL can fail
// that read while another process is altering a table ("column "job_count" of relation
// "job_queues" does not exist", seen when two nodes started together on an empty database). So
// both run under one session-level advisory lock; a process that dies releases it with its
// connection.
import { CompiledQuery, type Kysely } from 'kysely';

/** The advisory lock's key, hashed by PostgreSQL (`hashtext`). */
export const SCHEMA_LOCK = 'stowage:schema-changes';

/** A connection to hold the lock on: pg's client, or anything with its `query`. */
export interface LockConnection {
  query(text: string, values?: unknown[]): Promise<unknown>;
}

/** Runs `change` while `connection` holds the schema lock, waiting for it first. */
export async function withSchemaLock<T>(connection: LockConnection, change: () => Promise<T>): Promise<T> {
  await connection.query('select pg_advisory_lock(hashtext($1))', [SCHEMA_LOCK]);
  try {
    return await change();
  } finally {
    await connection.query('select pg_advisory_unlock(hashtext($1))', [SCHEMA_LOCK]);
  }
}

/** The same for a Kysely instance: one of its connections holds the lock while `change` runs. */
export async function withKyselySchemaLock<DB, T>(db: Kysely<DB>, change: () => Promise<T>): Promise<T> {
  return db
    .connection()
    .execute((conn) =>
      withSchemaLock({ query: (text, values) => conn.executeQuery(CompiledQuery.raw(text, values ?? [])) }, change),
    );
}
