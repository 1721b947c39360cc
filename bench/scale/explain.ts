// `--verbose`: the query plans behind the table. The repositories of src/db (FileRepository,
// FolderRepository) run their own queries on a Kysely that logs each compiled statement, so
// the SQL explained is exactly the SQL the service sends; then each one is explained:
// EXPLAIN (ANALYZE, BUFFERS) on PostgreSQL (inside a transaction that is rolled back, as the
// rename's UPDATEs really run), EXPLAIN QUERY PLAN on SQLite with the time the statement took.
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, type LogEvent, PostgresDialect, SqliteDialect } from 'kysely';
import pg from 'pg';
import { FileRepository, type FilePage } from '../../src/db/files.ts';
import { FolderRepository } from '../../src/db/folders.ts';
import type { Database } from '../../src/db/schema.ts';
import { deepPage } from './operations.ts';
import type { SeedInfo } from './seed/info.ts';

interface Captured {
  label: string;
  sql: string;
  parameters: readonly unknown[];
  ms: number;
}

class Rollback extends Error {}

/** Runs the repository calls behind the table's reads and the rename, capturing their SQL. */
async function capture(info: SeedInfo): Promise<Captured[]> {
  const captured: Captured[] = [];
  let label = '';
  const log = (e: LogEvent) => {
    const part = /count\(\*\)/i.test(e.query.sql) ? ' · count' : /^update/i.test(e.query.sql) ? ' · update' : '';
    captured.push({ label: label + part, sql: e.query.sql, parameters: e.query.parameters, ms: e.queryDurationMillis });
  };
  const sqlite = info.dialect === 'sqlite' ? new SQLite(join(info.dataDir, 'stowage.db')) : undefined;
  const kysely = new Kysely<Database>({
    dialect: sqlite
      ? new SqliteDialect({ database: sqlite })
      : new PostgresDialect({ pool: new pg.Pool({ connectionString: info.databaseUrl, max: 2 }) }),
    log,
  });
  try {
    const ws = info.workspaceId;
    const files = new FileRepository(kysely);
    const folders = new FolderRepository(kysely);
    const first: FilePage = { sort: 'created_at', direction: 'desc', limit: 100 };
    const as = async <T>(name: string, fn: () => Promise<T>): Promise<T> => {
      label = name;
      try {
        return await fn();
      } finally {
        label = '';
      }
    };
    await as('first page', () => files.page(ws, {}, first));
    await as(`page ${deepPage(info)}`, () => files.page(ws, {}, { ...first, offset: (deepPage(info) - 1) * 100 }));
    await as(`search "${info.searchWords[0]}"`, () => files.page(ws, { nameContains: [info.searchWords[0]] }, first));
    await as(`tag "${info.tags[0]}"`, () => files.page(ws, { tags: [info.tags[0]] }, first));
    const folder = await folders.byNo(ws, info.listFolders[0]);
    if (folder) await as(`files of folder ${folder.path}`, () => files.page(ws, { folderId: folder.id }, first));
    const top = await as('folders at root', () =>
      folders.page(ws, { parentId: null }, { sort: 'name', direction: 'asc', page: 1, limit: 1000 }),
    );
    if (top.rows[0]) await as(`totals of "${top.rows[0].path}"`, () => folders.totalsOf(top.rows.map((r) => r.id)));
    await as('file by file_no', () => files.byFileNo(ws, info.fileNos[0]));
    const target = info.renameFolders[0] ? await folders.byNo(ws, info.renameFolders[0].folder_no) : undefined;
    if (target) {
      label = `rename "${target.path}" (${info.renameFolders[0].files} files below)`;
      const slash = target.path.lastIndexOf('/');
      const newPath = `${slash >= 0 ? `${target.path.slice(0, slash)}/` : ''}${target.name} explained`;
      await kysely
        .transaction()
        .execute(async (trx) => {
          await new FolderRepository(trx).movePath(target.id, {
            name: `${target.name} explained`,
            oldPath: target.path,
            newPath,
            at: new Date().toISOString(),
          });
          throw new Rollback();
        })
        .catch((err) => {
          if (!(err instanceof Rollback)) throw err;
        });
    }
  } finally {
    await kysely.destroy();
  }
  // The lookups by folder number are not part of the story; each statement once.
  const seen = new Set<string>();
  return captured.filter((c) => {
    const key = c.sql + JSON.stringify(c.parameters);
    if (!c.label || seen.has(key) || /^(begin|commit|rollback|savepoint)/i.test(c.sql)) return false;
    seen.add(key);
    return true;
  });
}

/** Prints each captured statement with its plan. */
export async function explain(info: SeedInfo, print: (text: string) => void): Promise<void> {
  const statements = await capture(info);
  if (info.dialect === 'sqlite') {
    const db = new SQLite(join(info.dataDir, 'stowage.db'), { readonly: true });
    try {
      for (const s of statements) {
        const plan = db.prepare(`explain query plan ${s.sql}`).all(...s.parameters) as {
          id: number;
          parent: number;
          detail: string;
        }[];
        const depth = new Map<number, number>([[0, 0]]);
        const lines = plan.map((row) => {
          const d = (depth.get(row.parent) ?? 0) + 1;
          depth.set(row.id, d);
          return `${'  '.repeat(d)}${row.detail}`;
        });
        print(section(s, lines.join('\n')));
      }
    } finally {
      db.close();
    }
    return;
  }
  const client = new pg.Client({ connectionString: info.databaseUrl });
  await client.connect();
  try {
    for (const s of statements) {
      await client.query('begin');
      try {
        const { rows } = await client.query<{ 'QUERY PLAN': string }>(
          `explain (analyze, buffers) ${s.sql}`,
          s.parameters as unknown[],
        );
        print(section(s, rows.map((r) => r['QUERY PLAN']).join('\n')));
      } finally {
        await client.query('rollback');
      }
    }
  } finally {
    await client.end();
  }
}

function section(s: Captured, plan: string): string {
  const params = s.parameters.map((p) => JSON.stringify(p)).join(', ');
  return `\n── ${s.label} (${s.ms.toFixed(1)} ms through the repository) ──\n${s.sql}\n  parameters: [${params}]\n${plan}\n`;
}
