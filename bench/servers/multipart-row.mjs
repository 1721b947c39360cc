// Baseline (c) of bench/small-files: a bare Fastify + @fastify/multipart route that streams the
// file part to a file and inserts one database row, the least an upload service does per small
// upload. BENCH_DB=sqlite (better-sqlite3, a file in BENCH_DIR, WAL and synchronous=NORMAL as
// Stowage opens its own) or a postgres:// URL (pg, a pool of 10). With BENCH_FSYNC=1 the file is
// fdatasynced before the row and the answer, as Stowage does by default.
import { randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import multipart from '@fastify/multipart';
import Database from 'better-sqlite3';
import Fastify from 'fastify';
import pg from 'pg';

const dir = process.env.BENCH_DIR;
const flush = process.env.BENCH_FSYNC === '1';
const CREATE =
  'CREATE TABLE files (id TEXT PRIMARY KEY, name TEXT NOT NULL, mime TEXT NOT NULL, size BIGINT NOT NULL, created_at TEXT NOT NULL)';

/** insert(id, name, mime, size): one row, committed. */
let insert;
if (process.env.BENCH_DB === 'sqlite') {
  const db = new Database(join(dir, 'files.db'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.exec(CREATE);
  const statement = db.prepare('INSERT INTO files VALUES (?, ?, ?, ?, ?)');
  insert = async (...row) => statement.run(...row, new Date().toISOString());
} else {
  const pool = new pg.Pool({ connectionString: process.env.BENCH_DB, max: 10 });
  await pool.query(CREATE);
  insert = (...row) => pool.query('INSERT INTO files VALUES ($1, $2, $3, $4, $5)', [...row, new Date().toISOString()]);
}

const app = Fastify({ logger: false });
await app.register(multipart);
app.post('/upload', async (req, reply) => {
  const part = await req.file();
  if (!part) return reply.code(400).send({ error: 'no file', code: 'VALIDATION_ERROR' });
  const id = randomUUID();
  const path = join(dir, id);
  const out = createWriteStream(path);
  await pipeline(part.file, out);
  if (flush) {
    const file = await open(path, 'r+');
    await file.datasync().finally(() => file.close());
  }
  const size = out.bytesWritten;
  await insert(id, part.filename, part.mimetype, size);
  return reply.code(201).send({ id, size });
});
const address = await app.listen({ host: '127.0.0.1', port: 0 });
console.log(`listening ${new URL(address).port}`);
