// Bulk loading on PostgreSQL. The tables the migrations made are empty; their keys, unique
// constraints, foreign keys and indexes are read from the catalog and set aside, the rows go in
// with COPY (blobs and files at once, on two connections, FREEZE so no vacuum must rewrite
// them), and then every constraint and index is made again from its own definition: the
// schema ends exactly as the migrations left it, built in one sorted pass per index instead
// of ten million random inserts.
import pg from 'pg';
import type { Log } from './log.ts';
import { CopyIn } from './pg-copy.ts';
import { BLOB_COLUMNS, type Batch, FILE_COLUMNS, type Row } from './rows.ts';

interface Definition {
  table: string;
  name: string;
  /** 'p' primary key, 'u' unique, 'f' foreign key, 'i' a plain index. */
  kind: 'p' | 'u' | 'f' | 'i';
  def: string;
}

const TABLES = ['files', 'blobs'];

/** The constraints and indexes of files and blobs, and the foreign keys that point at them. */
async function definitions(client: pg.Client): Promise<Definition[]> {
  const constraints = await client.query<Definition>(
    `select conrelid::regclass::text as table, conname as name, contype as kind, pg_get_constraintdef(oid) as def
       from pg_constraint
      where contype in ('p', 'u', 'f')
        and (conrelid = any($1::regclass[]) or confrelid = any($1::regclass[]))`,
    [TABLES],
  );
  const indexes = await client.query<Definition>(
    `select i.indrelid::regclass::text as table, i.indexrelid::regclass::text as name, 'i' as kind,
            pg_get_indexdef(i.indexrelid) as def
       from pg_index i
      where i.indrelid = any($1::regclass[])
        and not exists (select 1 from pg_constraint c where c.conindid = i.indexrelid and c.conrelid = i.indrelid)`,
    [TABLES],
  );
  return [...constraints.rows, ...indexes.rows];
}

const ident = (name: string) => pg.escapeIdentifier(name);

export interface PgLoad {
  folders: Row[];
  folderColumns: readonly string[];
  batches: Iterable<Batch>;
  /** Called once every file is in: bytes used per workspace id. */
  usage(): Map<string, number>;
}

export async function loadPostgres(url: string, load: PgLoad, log: Log): Promise<void> {
  const main = new pg.Client({ connectionString: url });
  const blobsClient = new pg.Client({ connectionString: url });
  const filesClient = new pg.Client({ connectionString: url });
  await Promise.all([main.connect(), blobsClient.connect(), filesClient.connect()]);
  try {
    const defs = await definitions(main);
    const order = { f: 0, p: 1, u: 1, i: 2 } as const;
    for (const d of [...defs].sort((a, b) => order[a.kind] - order[b.kind])) {
      if (d.kind === 'i') await main.query(`drop index ${d.name}`);
      else await main.query(`alter table ${d.table} drop constraint ${ident(d.name)}`);
    }
    log(`set aside ${defs.length} constraints and indexes of files and blobs`);

    const folders = await CopyIn.start(main, 'folders', load.folderColumns);
    await folders.write(load.folders);
    await folders.end();

    // Truncated in the copying transaction, so COPY may write the rows frozen and all-visible.
    for (const [client, table] of [
      [blobsClient, 'blobs'],
      [filesClient, 'files'],
    ] as const)
      await client.query(`begin; truncate ${table}`);
    const blobs = await CopyIn.start(blobsClient, 'blobs', BLOB_COLUMNS, 'with (freeze)');
    const files = await CopyIn.start(filesClient, 'files', FILE_COLUMNS, 'with (freeze)');
    let n = 0;
    try {
      for (const batch of load.batches) {
        await Promise.all([blobs.write(batch.blobs), files.write(batch.files)]);
        n += batch.files.length;
        if (n % 500_000 < batch.files.length) log(`${n.toLocaleString('en')} files sent`);
      }
    } catch (err) {
      await Promise.all([blobs.fail('seeding stopped'), files.fail('seeding stopped')]);
      throw err;
    }
    await Promise.all([blobs.end(), files.end()]);
    await Promise.all([blobsClient.query('commit'), filesClient.query('commit')]);
    log(`${n.toLocaleString('en')} files and their blobs copied`);

    for (const [id, bytes] of load.usage())
      await main.query('update workspaces set used_bytes = used_bytes + $1 where id = $2', [bytes, id]);

    await rebuild([main, blobsClient, filesClient], defs, log);
    await main.query('vacuum (analyze) workspaces, folders, blobs, files');
    log('vacuumed and analyzed (what autovacuum does to a long-lived database)');
  } finally {
    await Promise.all([main.end(), blobsClient.end(), filesClient.end()]);
  }
}

/** Makes keys and indexes again (files' on one connection, blobs' on another), then the foreign keys. */
async function rebuild(clients: pg.Client[], defs: Definition[], log: Log): Promise<void> {
  const started = Date.now();
  for (const c of clients) await c.query(`set maintenance_work_mem = '512MB'`);
  const make = (c: pg.Client, d: Definition) =>
    c.query(d.kind === 'i' ? d.def : `alter table ${d.table} add constraint ${ident(d.name)} ${d.def}`);
  const lanes = TABLES.map((table, i) => ({ client: clients[i + 1], defs: defs.filter((d) => d.table === table) }));
  await Promise.all(
    lanes.map(async ({ client, defs: own }) => {
      for (const d of own.filter((x) => x.kind !== 'f')) await make(client, d);
    }),
  );
  log(`keys and indexes rebuilt in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  for (const d of defs.filter((x) => x.kind === 'f')) await make(clients[0], d);
  log(`foreign keys checked and restored in ${((Date.now() - started) / 1000).toFixed(0)} s`);
}
