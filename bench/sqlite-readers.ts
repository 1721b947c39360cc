// bench/sqlite-readers: what a SQLite read costs on the main connection and through a reader
// thread (src/db/sqlite-readers.ts). Prints; asserts nothing.
//
//   node --import tsx bench/sqlite-readers.ts        (BENCH_READS=10000, BENCH_FILES=10000)
//
// 1. Sequential point reads (`select * from files where id = ?`, one await each): the per-query
//    cost of the thread hop (postMessage there and back, structured clone of the row).
// 2. The same reads 8 at a time: what two threads give when requests overlap.
// 3. A slow read (a recursive CTE) while a 1 ms timer runs: the event loop's longest stall.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { newShortId, newUuid } from '../src/crypto/ids.ts';
import { type Db, openDatabase } from '../src/db/database.ts';
import { migrateToLatest } from '../src/db/migrations.ts';

const READS = Number(process.env.BENCH_READS ?? 10_000);
const FILES = Number(process.env.BENCH_FILES ?? 10_000);
const at = new Date(0).toISOString();

async function seed(db: Db): Promise<string[]> {
  await migrateToLatest(db.kysely);
  const workspace = newShortId();
  const blob = newUuid();
  await db.kysely
    .insertInto('workspaces')
    .values({
      id: workspace,
      name: 'bench',
      webhook_secret: 'x',
      quota_bytes: null,
      max_file_size: null,
      used_bytes: 0,
      reserved_bytes: 0,
      allowed_origins: null,
      webhook_origins: null,
      created_at: at,
      updated_at: at,
    })
    .execute();
  await db.kysely
    .insertInto('blobs')
    .values({ id: blob, workspace_id: workspace, sha256: '0'.repeat(64), size: 10, storage_key: 'k', created_at: at })
    .execute();
  const ids: string[] = [];
  await db.kysely.transaction().execute(async (trx) => {
    for (let i = 0; i < FILES; i++) {
      const id = newUuid();
      ids.push(id);
      await trx
        .insertInto('files')
        .values({
          id,
          file_no: newShortId(),
          workspace_id: workspace,
          folder_id: null,
          name: `f${i}.png`,
          blob_id: blob,
          size: 10,
          mime_type: 'image/png',
          extension: 'png',
          format: 'png',
          width: 1,
          height: 1,
          tags: '[]',
          metadata: '{}',
          custom_id: null,
          is_private: 0,
          is_duplicate: 0,
          upload_source: 'direct',
          created_at: at,
          updated_at: at,
        })
        .execute();
    }
  });
  return ids;
}

const pointRead = (db: Db, id: string) => db.kysely.selectFrom('files').selectAll().where('id', '=', id).execute();

async function measure(label: string, db: Db, ids: string[]): Promise<void> {
  for (let i = 0; i < 500; i++) await pointRead(db, ids[i % ids.length]); // warm statements and JIT
  let t0 = performance.now();
  for (let i = 0; i < READS; i++) await pointRead(db, ids[(i * 7919) % ids.length]);
  const seq = performance.now() - t0;
  t0 = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < READS) await pointRead(db, ids[(next++ * 7919) % ids.length]);
    }),
  );
  const par = performance.now() - t0;

  let last = performance.now();
  let stall = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    stall = Math.max(stall, now - last - 1);
    last = now;
  }, 1);
  t0 = performance.now();
  await db.kysely
    .withRecursive('c(n)', (qb) =>
      qb
        .selectNoFrom(sql<number>`1`.as('n'))
        .unionAll((q) => q.selectFrom('c').select(sql<number>`n + 1`.as('n')).where('n', '<', 2_000_000)),
    )
    .selectFrom('c')
    .select((eb) => eb.fn.countAll<number>().as('total'))
    .execute();
  const slow = performance.now() - t0;
  await new Promise((r) => setTimeout(r, 5));
  clearInterval(timer);
  console.log(
    `${label.padEnd(12)} sequential ${((seq * 1000) / READS).toFixed(1).padStart(6)} µs/read` +
      `   8 at a time ${((READS * 1000) / par).toFixed(0).padStart(6)} reads/s` +
      `   slow read ${slow.toFixed(0)} ms, loop stalled ${stall.toFixed(0)} ms`,
  );
}

const dir = mkdtempSync(join(tmpdir(), 'stowage-bench-readers-'));
try {
  const writer = openDatabase({ dataDir: dir, sqliteReaders: 0 });
  const ids = await seed(writer);
  await measure('main thread', writer, ids);
  await writer.close();
  for (const n of [1, 2]) {
    const db = openDatabase({ dataDir: dir, sqliteReaders: n });
    await db.readers?.ready();
    await measure(`${n} reader${n > 1 ? 's' : ''}`, db, ids);
    await db.close();
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
