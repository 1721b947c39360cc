// Seeds a database for bench/scale: the service's own configuration, database opening and
// migrations make the schema; its WorkspaceService makes the workspaces and their API keys
// (so the keys authenticate like any other); then folders, blobs and files go in bulk
// (sqlite.ts / postgres.ts) with the invariants an upload keeps: usage counted once per blob,
// folder paths copied into files, file_no unique, one name per folder. What the bench needs
// to know is written to DATA_DIR/scale.json.
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { loadConfig } from '../../../src/config.ts';
import { SecretBox } from '../../../src/crypto/secret-box.ts';
import { type Dialect, openDatabase } from '../../../src/db/database.ts';
import { sql } from 'kysely';
import {
  createFileTriggers,
  createOrderTriggers,
  createTagCountTriggers,
  dropFileTriggers,
  rebuildCreatedLag,
  rebuildTagCounts,
  rebuildDerived,
  tuneNameStatistics,
} from '../../../src/db/derived.ts';
import { migrateToLatest } from '../../../src/db/migrations.ts';
import { WorkspaceService } from '../../../src/services/workspaces.ts';
import { checkInvariants } from './check.ts';
import { type SeedInfo, writeInfo } from './info.ts';
import type { Log } from './log.ts';
import { type PlannedWorkspace, filesBelow, folderCount, planFolders, splitFiles } from './plan.ts';
import { loadPostgres } from './postgres.ts';
import { Rng } from './random.ts';
import { FOLDER_COLUMNS, fileBatches, newStats, type SeedStats } from './rows.ts';
import { loadSqlite } from './sqlite.ts';
import { TAGS, WORDS } from './vocab.ts';

export interface SeedOptions {
  dialect: Dialect;
  files: number;
  workspaces: number;
  /** PostgreSQL: the database to seed (made when missing); never the `postgres` database. */
  url?: string;
  dataDir: string;
  /** Share of the files in the big workspace when there are several. */
  bigShare: number;
  /** Folders of the big workspace. */
  folders: number;
  /** Seed of the data's shape (ids are always random). */
  seed: number;
  /** Start from an empty database (drop the PostgreSQL database, delete the SQLite file). */
  reset: boolean;
  /** Check the upload invariants in SQL afterwards (a few full scans). */
  check: boolean;
  log: Log;
}

const TWO_YEARS_MS = 730 * 24 * 3600 * 1000;

export async function seed(o: SeedOptions): Promise<SeedInfo> {
  const started = Date.now();
  mkdirSync(o.dataDir, { recursive: true });
  if (o.dialect === 'postgres') await preparePostgres(o.url!, o.reset, o.log);
  else if (o.reset) for (const f of ['', '-wal', '-shm']) rmSync(join(o.dataDir, `stowage.db${f}`), { force: true });
  // The configuration the server will read: same data directory, same master key.
  const config = loadConfig({
    ...process.env,
    STOWAGE_DATA_DIR: o.dataDir,
    DATABASE_URL: o.dialect === 'postgres' ? o.url : undefined,
  });
  const db = openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  const created: { id: string; key: string }[] = [];
  try {
    await migrateToLatest(db.kysely);
    const held = await db.kysely
      .selectFrom('files')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    if (Number(held.n) > 0) throw new Error('the database already holds files: pass --reset to start again');
    const service = new WorkspaceService(db, new SecretBox(config.masterKey, config.previousMasterKeys));
    for (let k = 0; k < o.workspaces; k++) {
      const ws = await service.create(k === 0 ? 'Scale bench (big)' : `Scale bench ${k}`);
      created.push({ id: ws.workspace_id, key: ws.private_key });
    }
    // The triggers that keep counters, tag rows and the name index would fire per row: set aside
    // for the load, and everything they keep is computed at once afterwards.
    await dropFileTriggers(db.kysely);
    o.log(`${o.workspaces} workspaces made through WorkspaceService, schema migrated`);
  } finally {
    await db.close();
  }

  const rng = new Rng(o.seed);
  const endMs = Date.now();
  const folderDate = new Date(endMs - TWO_YEARS_MS - 86_400_000).toISOString();
  const counts = splitFiles(o.files, o.workspaces, o.bigShare);
  const plan: PlannedWorkspace[] = created.map((ws, i) => ({
    id: ws.id,
    files: counts[i],
    folders: planFolders(rng, ws.id, folderCount(counts[i], counts[0], o.folders), folderDate),
  }));
  const stats = newStats(plan);
  const load = {
    folders: plan.flatMap((ws) => ws.folders.map((f) => FOLDER_COLUMNS.map((c) => f.row[c]))),
    folderColumns: FOLDER_COLUMNS,
    batches: fileBatches(rng, plan, o.files, 5_000, endMs, stats),
    usage: () => new Map(plan.map((ws, i) => [ws.id, stats.usedBytes[i]])),
  };
  o.log(`${load.folders.length} folders planned (${plan[0].folders.length} in the big workspace)`);
  if (o.dialect === 'postgres') await loadPostgres(o.url!, load, o.log);
  else loadSqlite(join(o.dataDir, 'stowage.db'), load, o.log);
  const derived = openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  try {
    const at = Date.now();
    await rebuildDerived(derived.kysely);
    await createFileTriggers(derived.kysely);
    await rebuildCreatedLag(derived.kysely);
    await createOrderTriggers(derived.kysely);
    await rebuildTagCounts(derived.kysely);
    await createTagCountTriggers(derived.kysely);
    // As autovacuum would before long: statistics, and a visibility map for index-only scans.
    if (o.dialect === 'postgres') {
      // The name index was rebuilt from its definition, without its statistics target.
      await tuneNameStatistics(derived.kysely);
      await sql`vacuum (analyze) file_tags, workspaces, folders`.execute(derived.kysely);
      await sql`analyze files`.execute(derived.kysely);
    }
    o.log(`counters, tag rows and name index built in ${((Date.now() - at) / 1000).toFixed(0)} s`);
  } finally {
    await derived.close();
  }

  if (o.check) {
    const checked = openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
    try {
      const broken = await checkInvariants(checked, o.log);
      if (broken.length > 0) throw new Error(`seeded data breaks: ${broken.join('; ')}`);
    } finally {
      await checked.close();
    }
  }

  const info = describe(o, plan[0], created[0].key, stats, rng);
  info.seconds = Math.round((Date.now() - started) / 1000);
  writeInfo(info);
  return info;
}

/** The bench's view of the big workspace. */
function describe(o: SeedOptions, big: PlannedWorkspace, key: string, stats: SeedStats, rng: Rng): SeedInfo {
  const below = filesBelow(big.folders, stats.direct);
  // Rename targets: the depth whose folders hold closest to 10,000 files below, closest first.
  const distance = (n: number) => Math.abs(Math.log((n + 1) / 10_000));
  let bestDepth = 0;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (let depth = 0; depth < 4; depth++) {
    const at = big.folders.map((f, i) => (f.depth === depth ? below[i] : -1)).filter((n) => n >= 0);
    if (at.length === 0) continue;
    const d = distance(at.reduce((a, b) => a + b, 0) / at.length);
    if (d < bestDistance) [bestDepth, bestDistance] = [depth, d];
  }
  const renameFolders = big.folders
    .map((f, i) => ({
      folder_no: f.row.folder_no,
      name: f.row.name,
      path: f.row.path,
      files: below[i],
      depth: f.depth,
    }))
    .filter((f) => f.depth === bestDepth)
    .sort((a, b) => distance(a.files) - distance(b.files))
    .slice(0, 64)
    .map(({ depth: _, ...f }) => f);
  const listFolders = Array.from(
    { length: Math.min(100, big.folders.length) },
    () => rng.pick(big.folders).row.folder_no,
  );
  const top = big.folders[0]?.row;
  const share = (n: number) => Math.abs(n / Math.max(1, stats.bigFiles) - 0.02);
  const tags = TAGS.map((t, i) => ({ t, n: stats.tagCounts[i] }))
    .filter((x) => x.n > 0)
    .sort((a, b) => share(a.n) - share(b.n))
    .slice(0, 6)
    .map((x) => x.t);
  return {
    dialect: o.dialect,
    databaseUrl: o.dialect === 'postgres' ? o.url : undefined,
    dataDir: o.dataDir,
    files: o.files,
    workspaces: o.workspaces,
    workspaceId: big.id,
    privateKey: key,
    workspaceFiles: stats.bigFiles,
    workspaceFolders: big.folders.length,
    fileNos: stats.fileNos,
    listFolders,
    renameFolders,
    uploadParent: top ? { folder_no: top.folder_no, path: top.path } : { folder_no: '', path: '' },
    searchWords: [0, 1, 2, 3, 4, 5, 6, 7].map((i) => WORDS[i * 12 + 3]),
    tags,
    seededAt: new Date().toISOString(),
    seconds: 0,
  };
}

/** Makes the PostgreSQL database (dropping it first with `reset`), through the server's `postgres` database. */
export async function preparePostgres(url: string, reset: boolean, log: Log): Promise<void> {
  const target = new URL(url);
  const name = decodeURIComponent(target.pathname.slice(1));
  if (!name || name === 'postgres' || name.startsWith('template'))
    throw new Error(`refusing to seed the database "${name}": name one of your own (e.g. …/stowage_scale)`);
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    if (reset) {
      await client.query(`drop database if exists ${pg.escapeIdentifier(name)} with (force)`);
      log(`dropped database ${name}`);
    }
    const exists = await client.query('select 1 from pg_database where datname = $1', [name]);
    if (exists.rowCount === 0) await client.query(`create database ${pg.escapeIdentifier(name)}`);
  } finally {
    await client.end();
  }
}

/** Drops a database made by `preparePostgres`. */
export async function dropPostgres(url: string): Promise<void> {
  const name = decodeURIComponent(new URL(url).pathname.slice(1));
  if (!name || name === 'postgres' || name.startsWith('template')) return;
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    await client.query(`drop database if exists ${pg.escapeIdentifier(name)} with (force)`);
  } finally {
    await client.end();
  }
}
