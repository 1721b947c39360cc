// Baseline (d) of bench/small-files: the work Stowage's direct upload does, without Stowage's code.
// A bare Fastify + @fastify/multipart route on a database with Stowage's schema (migrated by the
// bench before this process starts: every index, trigger and name index a file row maintains),
// sending the statements Stowage sends for an upload of a new file under a free name, as plain
// SQL through the driver: the API-key lookup, the storage intent, then on PostgreSQL the one
// statement that adds the blob and the file row, on SQLite one transaction of its six.
// The file is hashed (SHA-256) as it streams, flushed (fdatasync) and renamed into place, and its
// folder flushed, as Stowage's local storage does. What is left out is Stowage itself: its hooks,
// its query builder, its staging and type detection, and its answer (this one answers the row).
//
// BENCH_DIR (files, and the SQLite database stowage.db), BENCH_DB (sqlite or a postgres:// URL),
// BENCH_FSYNC=1 to flush as Stowage does by default.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, open, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import multipart from '@fastify/multipart';
import Database from 'better-sqlite3';
import Fastify from 'fastify';
import pg from 'pg';

const dir = process.env.BENCH_DIR;
const flush = process.env.BENCH_FSYNC === '1';
const sqlite = process.env.BENCH_DB === 'sqlite';

const KEY_SQL = (p) =>
  `select "api_keys"."id", "api_keys"."workspace_id", "api_keys"."type", "workspaces"."allowed_origins", "workspaces"."webhook_origins", "workspaces"."quota_bytes", "workspaces"."max_file_size", "workspaces"."used_bytes", "workspaces"."reserved_bytes" from "api_keys" inner join "workspaces" on "workspaces"."id" = "api_keys"."workspace_id" where ("api_keys"."revoked_at" is null or "api_keys"."revoked_at" > ${p(1)}) and "api_keys"."key_hash" = ${p(2)}`;
const INTENT_SQL = (p) =>
  `insert into "storage_intents" ("storage_key", "workspace_id", "reason", "reserved_bytes", "created_at") values (${p(1)}, ${p(2)}, ${p(3)}, ${p(4)}, ${p(5)})`;
const FILE_COLUMNS = [
  'id',
  'file_no',
  'workspace_id',
  'folder_id',
  'name',
  'is_private',
  'created_at',
  'blob_id',
  'size',
  'mime_type',
  'extension',
  'format',
  'width',
  'height',
  'duration',
  'media',
  'tags',
  'metadata',
  'custom_id',
  'is_duplicate',
  'upload_source',
  'updated_at',
];
const FILE_SQL = (p) =>
  `insert into "files" (${FILE_COLUMNS.map((c) => `"${c}"`).join(', ')}) values (${FILE_COLUMNS.map((_, i) => p(i + 1)).join(', ')}) on conflict do nothing`;
/**
 * PostgreSQL: Stowage's one statement for new bytes under a free name (BlobRepository.adoptWithFile),
 * its text and its parameters; each use of a value is a parameter of its own, as Kysely sends it.
 */
function pgCommit(blob, file) {
  const values = [];
  const p = (v) => `$${values.push(v)}`;
  const text = `
      with ins as (
        insert into blobs (id, workspace_id, sha256, size, storage_key, created_at)
        select ${[blob.id, blob.workspace_id, blob.sha256, blob.size, blob.storage_key, blob.created_at].map(p).join(', ')}
         where not exists (select 1 from files
           where workspace_id = ${p(file.workspace_id)} and coalesce(folder_id, '') = ${p('')} and name = ${p(file.name)})
        on conflict (workspace_id, sha256) do nothing
        returning id
      ), gone as (
        delete from storage_intents
         where storage_key = ${p(blob.storage_key)} and exists (select 1 from ins)
        returning reserved_bytes
      ), held as (
        select coalesce((select reserved_bytes from gone), 0) as bytes
      ), charged as (
        update workspaces
           set used_bytes = used_bytes + ${p(blob.size)}::bigint,
               reserved_bytes = reserved_bytes - (select bytes from held)
         where id = ${p(blob.workspace_id)}
           and exists (select 1 from ins)
           and (quota_bytes is null
                or used_bytes + reserved_bytes - (select bytes from held) + ${p(blob.size)}::bigint <= quota_bytes)
        returning id
      ), filed as (
        insert into files (${FILE_COLUMNS.map((c) => `"${c}"`).join(', ')})
        select ${FILE_COLUMNS.map((c) => p(file[c])).join(', ')} where exists (select 1 from charged)
        on conflict do nothing
        returning id
      )
      select case
        when exists (select 1 from filed) then 'filed'
        when not exists (select 1 from ins) then 'untouched'
        else stowage_undo('changed meanwhile')
      end as outcome`;
  return [text, values];
}

/** lookup(hash, now), intent(key, ws, now), commit(blob, file): the statements, committed as Stowage commits them. */
let lookup;
let intent;
let commit;
if (sqlite) {
  const db = new Database(join(dir, 'stowage.db'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('foreign_keys = ON');
  db.pragma('temp_store = MEMORY');
  const q = () => '?';
  const key = db.prepare(KEY_SQL(q));
  const addIntent = db.prepare(INTENT_SQL(q));
  // Stowage's steps for a new file under a free name (BlobRepository.adoptWithFile on SQLite).
  const nameTaken = db.prepare(
    "select 1 from files where workspace_id = ? and coalesce(folder_id, '') = ? and name = ?",
  );
  const bySha = db.prepare('select 1 from blobs where workspace_id = ? and sha256 = ?');
  const dropIntent = db.prepare('delete from storage_intents where storage_key = ? returning reserved_bytes');
  const charge = db.prepare(
    `update workspaces set used_bytes = used_bytes + ?, reserved_bytes = reserved_bytes - ?
      where id = ? and (quota_bytes is null or used_bytes + reserved_bytes - ? + ? <= quota_bytes)`,
  );
  const addBlob = db.prepare(
    'insert into "blobs" ("id", "workspace_id", "sha256", "size", "storage_key", "created_at") values (?, ?, ?, ?, ?, ?)',
  );
  const addFile = db.prepare(FILE_SQL(q));
  lookup = async (hash, now) => key.get(now, hash);
  intent = async (k, ws, now) => addIntent.run(k, ws, 'upload', 0, now);
  commit = db.transaction((blob, file) => {
    if (nameTaken.get(file.workspace_id, file.folder_id ?? '', file.name)) throw new Error('name taken');
    if (bySha.get(blob.workspace_id, blob.sha256)) throw new Error('duplicate bytes');
    const held = Number(dropIntent.get(blob.storage_key)?.reserved_bytes ?? 0);
    if (charge.run(blob.size, held, blob.workspace_id, held, blob.size).changes !== 1) throw new Error('over quota');
    addBlob.run(blob.id, blob.workspace_id, blob.sha256, blob.size, blob.storage_key, blob.created_at);
    if (addFile.run(...FILE_COLUMNS.map((c) => file[c])).changes !== 1) throw new Error('name taken');
  });
  const run = commit;
  commit = async (blob, file) => run(blob, file);
} else {
  const pool = new pg.Pool({ connectionString: process.env.BENCH_DB, max: 10 });
  const d = (i) => `$${i}`;
  const keySql = KEY_SQL(d);
  const intentSql = INTENT_SQL(d);
  lookup = async (hash, now) => (await pool.query(keySql, [now, hash])).rows[0];
  intent = (k, ws, now) => pool.query(intentSql, [k, ws, 'upload', 0, now]);
  commit = async (blob, file) => {
    const { rows } = await pool.query(...pgCommit(blob, file));
    if (rows[0].outcome !== 'filed') throw new Error('duplicate bytes, taken name or over quota');
  };
}

const objects = join(dir, 'objects');
const tmp = join(dir, 'tmp');
await mkdir(tmp, { recursive: true });

/** fsync of a file or folder by path. */
async function sync(path, data) {
  const fh = await open(path, 'r');
  try {
    await (data ? fh.datasync() : fh.sync());
  } finally {
    await fh.close();
  }
}

const app = Fastify({ logger: false });
await app.register(multipart);
app.post('/upload', async (req, reply) => {
  const now = new Date().toISOString();
  const apiKey = req.headers['x-api-key'];
  const principal =
    typeof apiKey === 'string' ? await lookup(createHash('sha256').update(apiKey).digest('hex'), now) : undefined;
  if (!principal) return reply.code(401).send({ error: 'unauthorized', code: 'UNAUTHORIZED' });
  const ws = principal.workspace_id;
  const part = await req.file();
  if (!part) return reply.code(400).send({ error: 'no file', code: 'VALIDATION_ERROR' });
  const blobId = randomUUID();
  const storageKey = `${ws}/blobs/${blobId}`;
  await intent(storageKey, ws, now);
  const temp = join(tmp, randomUUID());
  const hash = createHash('sha256');
  let size = 0;
  const meter = new Transform({
    transform(chunk, _enc, cb) {
      size += chunk.length;
      hash.update(chunk);
      cb(null, chunk);
    },
  });
  await pipeline(part.file, meter, createWriteStream(temp));
  if (flush) await sync(temp, true);
  const folder = join(objects, ws, 'blobs');
  await mkdir(folder, { recursive: true });
  await rename(temp, join(folder, blobId));
  if (flush) await sync(folder, false);
  const blob = {
    id: randomUUID(),
    workspace_id: ws,
    sha256: hash.digest('hex'),
    size,
    storage_key: storageKey,
    created_at: now,
  };
  const file = {
    id: randomUUID(),
    file_no: randomBytes(9).toString('base64url'),
    workspace_id: ws,
    folder_id: null,
    name: `${part.filename}-${blobId.slice(0, 8)}`,
    is_private: 0,
    created_at: now,
    blob_id: blob.id,
    size,
    mime_type: part.mimetype,
    extension: null,
    format: null,
    width: null,
    height: null,
    duration: null,
    media: null,
    tags: '[]',
    metadata: '{}',
    custom_id: null,
    is_duplicate: 0,
    upload_source: 'direct',
    updated_at: now,
  };
  await commit(blob, file);
  return reply.code(201).send(file);
});
const address = await app.listen({ host: '127.0.0.1', port: 0 });
console.log(`listening ${new URL(address).port}`);
