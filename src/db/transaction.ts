// A transaction that spans several repositories (an upload's commit: folders, blob, record,
// quota, webhook): the callers hand `trx` to each repository's `in(trx)` or to services that
// take a transaction.
import type { Kysely } from 'kysely';
import type { Db } from './database.ts';
import type { Database } from './schema.ts';

export function inTransaction<T>(db: Db, fn: (trx: Kysely<Database>) => Promise<T>): Promise<T> {
  return db.kysely.transaction().execute(fn);
}
