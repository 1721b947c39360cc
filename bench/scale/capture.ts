// The bare baseline's script (bare.ts): the SQL Stowage runs for each request of a row, caught
// from Stowage itself. A copy of the service runs in this process on the seeded database (the
// configuration the bench's server gets, no listener, no background jobs) and answers each of
// the row's requests through Fastify's inject(), as the real server would; every statement its
// Kysely sends is recorded on the way (Kysely's DefaultQueryExecutor.executeQuery, which every
// query, raw `sql` included, goes through) with its parameters and, so that the bare server can
// run them with the same overlap, the statements that had finished when it was sent (the ones it
// may depend on). Each request is answered once before the one recorded, so what is recorded
// is the steady state a run sees (the remembered boundaries of deep pages, caches warm).
//
// A request is refused (and the row says so) when it did not answer 200, or sent anything but
// a read (SELECT, WITH or EXPLAIN), or a parameter JSON cannot carry as it is.
import { type CompiledQuery, DefaultQueryExecutor, type QueryResult, SelectQueryNode } from 'kysely';
import { buildApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import { createServices, type Services } from '../../src/services/container.ts';
import type { SeedInfo } from './seed/info.ts';
import { stowageEnv } from './server.ts';

export interface Statement {
  sql: string;
  parameters: unknown[];
  /**
   * Whether Stowage sends it to a SQLite reader thread: a plain SELECT outside a transaction
   * (src/db/sqlite-readers.ts); anything else runs on the main connection, on the event loop.
   */
  reader: boolean;
  /** The statements (indexes) that had finished when this one was sent. */
  after: number[];
}

/** What one request costs in SQL, and what Stowage answered to it. */
export interface Script {
  statements: Statement[];
  /** Bytes of Stowage's answer. */
  bytes: number;
  /** Records in Stowage's answer (`files` or `folders`; 1 for a single file). */
  records: number;
}

export type Captured = { scripts: Record<string, Script> } | { refused: string };

interface Recording {
  statements: Statement[];
  done: number[];
}

let recording: Recording | null = null;
let installed = false;

/** Wraps Kysely's executor once: statements sent while `recording` is set are written down. */
function install(): void {
  if (installed) return;
  installed = true;
  const original = DefaultQueryExecutor.prototype.executeQuery;
  DefaultQueryExecutor.prototype.executeQuery = async function <R>(
    this: DefaultQueryExecutor,
    compiled: CompiledQuery,
  ): Promise<QueryResult<R>> {
    const r = recording;
    if (!r) return (await original.call(this, compiled)) as QueryResult<R>;
    const index = r.statements.length;
    r.statements.push({
      sql: compiled.sql,
      parameters: [...compiled.parameters],
      reader: SelectQueryNode.is(compiled.query),
      after: [...r.done],
    });
    try {
      return (await original.call(this, compiled)) as QueryResult<R>;
    } finally {
      r.done.push(index);
    }
  };
}

const READ = /^\s*(select|with|explain)\b/i;
const plainValue = (v: unknown) => v === null || typeof v === 'string' || (typeof v === 'number' && Number.isFinite(v));

/** Stowage in this process, for capturing; `close` when done. */
export class Capturer {
  private services?: Services;
  private app?: Awaited<ReturnType<typeof buildApp>>;
  /** How many transactions the copy opened (a read that opens one cannot be replayed as plain statements). */
  private transactions = 0;

  constructor(private readonly info: SeedInfo) {}

  async open(): Promise<void> {
    install();
    // The bench's server's configuration; reads on the main connection here (the SQL is the same
    // with reader threads: they only decide where a statement runs, and `reader` records that).
    const config = loadConfig({ ...stowageEnv(this.info, 0), STOWAGE_SQLITE_READERS: '0' });
    this.services = await createServices(config);
    this.app = await buildApp(this.services, { logger: false });
    const kysely = this.services.db.kysely;
    const transaction = kysely.transaction.bind(kysely);
    kysely.transaction = () => {
      if (recording) this.transactions++;
      return transaction();
    };
  }

  async close(): Promise<void> {
    await this.app?.close();
    await this.services?.close();
  }

  /** The script of each request (distinct paths of `paths`), or why the row cannot have one. */
  async capture(paths: string[]): Promise<Captured> {
    const app = this.app;
    if (!app) throw new Error('Capturer.open first');
    const scripts: Record<string, Script> = {};
    for (const path of new Set(paths)) {
      const request = {
        method: 'GET' as const,
        url: path,
        headers: { authorization: `Bearer ${this.info.privateKey}` },
      };
      await app.inject(request);
      const rec: Recording = { statements: [], done: [] };
      const transactions = this.transactions;
      recording = rec;
      let res: Awaited<ReturnType<typeof app.inject>>;
      try {
        res = await app.inject(request);
      } finally {
        recording = null;
      }
      if (res.statusCode !== 200) return { refused: `${path} answered ${res.statusCode}: ${res.body.slice(0, 200)}` };
      if (this.transactions !== transactions) return { refused: `${path} opens a transaction` };
      const write = rec.statements.find((s) => !READ.test(s.sql));
      if (write) return { refused: `${path} sends a statement that is not a read: ${write.sql.slice(0, 80)}` };
      if (rec.statements.some((s) => !s.parameters.every(plainValue)))
        return { refused: `${path} binds a parameter that is not a string, a number or null` };
      scripts[path] = { statements: rec.statements, bytes: res.rawPayload.length, records: recordsIn(res.body) };
    }
    return { scripts };
  }
}

function recordsIn(body: string): number {
  try {
    const answer = JSON.parse(body) as Record<string, unknown>;
    for (const key of ['files', 'folders']) if (Array.isArray(answer[key])) return (answer[key] as unknown[]).length;
    return 1;
  } catch {
    return 0;
  }
}
