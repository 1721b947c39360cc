// Bulk loading on SQLite, with better-sqlite3 on a connection of its own (the service's is
// closed meanwhile). The plain indexes of files and blobs are set aside and made again from
// their own SQL afterwards; the keys and unique constraints SQLite keeps inside the table
// stay and are filled as rows go in. Journal and syncing are off for the load only (a failed
// seed is simply run again), then the database goes back to WAL, as the service opens it.
import SQLite from 'better-sqlite3';
import type { Log } from './log.ts';
import { BLOB_COLUMNS, type Batch, FILE_COLUMNS, type Row } from './rows.ts';

export interface SqliteLoad {
  folders: Row[];
  folderColumns: readonly string[];
  batches: Iterable<Batch>;
  usage(): Map<string, number>;
}

const insertSql = (table: string, columns: readonly string[]) =>
  `insert into ${table} (${columns.join(', ')}) values (${columns.map(() => '?').join(', ')})`;

export function loadSqlite(path: string, load: SqliteLoad, log: Log): void {
  const db = new SQLite(path);
  try {
    db.pragma('journal_mode = OFF');
    db.pragma('synchronous = OFF');
    db.pragma('cache_size = -1048576');
    db.pragma('temp_store = MEMORY');
    // Every row is made with its folder, blob and workspace; foreign_key_check proves it below.
    db.pragma('foreign_keys = OFF');

    const indexes = db
      .prepare(
        `select name, sql from sqlite_master where type = 'index' and tbl_name in ('files', 'blobs') and sql is not null`,
      )
      .all() as { name: string; sql: string }[];
    for (const i of indexes) db.exec(`drop index "${i.name}"`);
    log(`set aside ${indexes.length} indexes of files and blobs`);

    const folder = db.prepare(insertSql('folders', load.folderColumns));
    db.transaction(() => {
      for (const row of load.folders) folder.run(row);
    })();

    const blob = db.prepare(insertSql('blobs', BLOB_COLUMNS));
    const file = db.prepare(insertSql('files', FILE_COLUMNS));
    const write = db.transaction((batch: Batch) => {
      for (const row of batch.blobs) blob.run(row);
      for (const row of batch.files) file.run(row);
    });
    let n = 0;
    for (const batch of load.batches) {
      write(batch);
      n += batch.files.length;
      if (n % 200_000 < batch.files.length) log(`${n.toLocaleString('en')} files written`);
    }
    log(`${n.toLocaleString('en')} files and their blobs written`);

    const usage = db.prepare('update workspaces set used_bytes = used_bytes + ? where id = ?');
    db.transaction(() => {
      for (const [id, bytes] of load.usage()) usage.run(bytes, id);
    })();

    for (const i of indexes) db.exec(i.sql);
    log('indexes rebuilt');
    const broken = db.pragma('foreign_key_check') as unknown[];
    if (broken.length > 0) throw new Error(`foreign_key_check found ${broken.length} broken references`);
    log('foreign keys checked');
    db.pragma('journal_mode = WAL');
  } finally {
    db.close();
  }
}
