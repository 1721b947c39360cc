// bench/rendition-cache: what the rendition cache's ledger (src/services/rendition-cache.ts) costs
// at scale. Fills `renditions` with N rows on SQLite (and PostgreSQL when
// STOWAGE_TEST_DATABASE_URL is set), then times: reading the total (the counter row, what the
// job and the metrics gauge do), the SUM over the table it replaces (for comparison), one batch
// of 500 use marks, and one eviction run (a tenth of the rows) (storage deletes on local disk of
// objects that are not there, so the figure is the database's share). Prints; asserts nothing.
//
//   npm run bench:rendition-cache            N=200000 by default; ROWS=1000000 for more
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { openDatabase } from '../src/db/database.ts';
import { migrateToLatest } from '../src/db/migrations.ts';
import { openStorage } from '../src/storage/open.ts';
import { RenditionCache } from '../src/services/rendition-cache.ts';
import { freshPostgres } from '../test/helpers/harness.ts';

const N = Number(process.env.ROWS ?? 200_000);

async function ms<T>(fn: () => Promise<T>): Promise<[number, T]> {
  const t = process.hrtime.bigint();
  const r = await fn();
  return [Number(process.hrtime.bigint() - t) / 1e6, r];
}

async function run(name: string, databaseUrl?: string): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'stowage-bench-rc-'));
  const db = openDatabase({ databaseUrl, dataDir: dir });
  try {
    await migrateToLatest(db.kysely);
    const storage = await openStorage({ dataDir: dir, storage: { driver: 'local', fsync: false } });
    const ws = 'benchws0001';
    const at = (i: number) => new Date(Date.UTC(2025, 0, 1) + i * 1000).toISOString();
    for (let i = 0; i < N; i += 1000) {
      const rows = [];
      for (let j = i; j < Math.min(N, i + 1000); j++)
        rows.push({
          key: `${ws}/blobs/${String(j % 5000).padStart(8, '0')}.renditions/w_${j}.f_webp.webp`,
          workspace_id: ws,
          owner: `${ws}/blobs/${String(j % 5000).padStart(8, '0')}`,
          bytes: 20_000,
          created_at: at(j),
          last_used_at: at(j),
        });
      await db.kysely.insertInto('renditions').values(rows).execute();
    }
    await db.kysely
      .updateTable('rendition_totals')
      .set({ bytes: N * 20_000, count: N })
      .where('id', '=', 1)
      .execute();
    if (databaseUrl) await sql`analyze renditions`.execute(db.kysely);
    // Just over the budget: a run goes down to 90% of it, a tenth of the rows.
    const cache = new RenditionCache(db, storage, (N - 1) * 20_000);
    const [counter] = await ms(() => cache.repo.total());
    const [sum] = await ms(() =>
      db.kysely
        .selectFrom('renditions')
        .select((eb) => eb.fn.sum('bytes').as('s'))
        .execute(),
    );
    const keys = Array.from(
      { length: 500 },
      (_, k) => `${ws}/blobs/${String(k).padStart(8, '0')}.renditions/w_${k}.f_webp.webp`,
    );
    const [touch] = await ms(() =>
      cache.repo.touch(keys, new Date().toISOString(), new Date(Date.now() - 60_000).toISOString()),
    );
    const [evict, r] = await ms(() => cache.evict());
    console.log(
      `${name.padEnd(10)} ${N.toLocaleString()} rows: total (counter) ${counter.toFixed(2)} ms, SUM(bytes) ${sum.toFixed(1)} ms, ` +
        `500 use marks ${touch.toFixed(1)} ms, eviction of ${r.evicted} ${evict.toFixed(0)} ms (${((evict / Math.max(1, r.evicted)) * 1000).toFixed(0)} µs each)`,
    );
    await storage.close?.();
  } finally {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await run('sqlite');
if (process.env.STOWAGE_TEST_DATABASE_URL) {
  const pg = await freshPostgres(process.env.STOWAGE_TEST_DATABASE_URL, 'stowage_bench');
  try {
    await run('postgres', pg.url);
  } finally {
    await pg.drop();
  }
}
