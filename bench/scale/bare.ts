// The bare baseline's server (bare-server.mjs) in its own process, as measure.ts drives a
// server: started on the seeded database with the driver set up as Stowage's (the pg Pool of
// Stowage's size, or as many SQLite reader threads), given the scripts capture.ts recorded,
// restarted (its PostgreSQL sessions ended, Stowage's left alone) when a run left it busy. It
// runs with the node flags Stowage runs with (`npm start`'s), so the baseline has the same heap.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_SQLITE_READERS } from '../../src/db/database.ts';
import { READER_MMAP_BYTES } from '../../src/db/sqlite-readers.ts';
import type { Script } from './capture.ts';
import type { SeedInfo } from './seed/info.ts';
import { START_NODE_FLAGS } from '../lib.ts';
import { BARE_APPLICATION, endQueries, type Server } from './server.ts';

const SCRIPT = fileURLToPath(new URL('bare-server.mjs', import.meta.url));

/** Stowage's pg Pool size (src/db/database.ts openDatabase). */
export const STOWAGE_PG_POOL = 10;

export class Bare implements Server {
  private child?: ChildProcess;
  private readonly scripts: Record<string, Script> = {};
  base = '';

  constructor(private readonly info: SeedInfo) {}

  get pid(): number {
    return this.child?.pid ?? 0;
  }

  /** What it runs like: the driver and its size. */
  describe(): string {
    return this.info.dialect === 'postgres'
      ? `pg Pool of ${STOWAGE_PG_POOL} connections`
      : `better-sqlite3, ${readers()} reader threads and the main thread's connection`;
  }

  async start(): Promise<void> {
    const child = spawn(process.execPath, [...START_NODE_FLAGS, SCRIPT], {
      env: {
        ...process.env,
        BARE_DIALECT: this.info.dialect,
        BARE_SQLITE: join(this.info.dataDir, 'stowage.db'),
        BARE_PG_URL: this.info.databaseUrl ?? '',
        BARE_POOL: String(STOWAGE_PG_POOL),
        BARE_READERS: String(readers()),
        BARE_MMAP: String(READER_MMAP_BYTES),
        BARE_APPLICATION,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    let output = '';
    child.stderr!.on('data', (d: Buffer) => {
      output = (output + d).slice(-5000);
    });
    const port = await new Promise<number>((resolve, reject) => {
      let text = '';
      child.stdout!.on('data', (d: Buffer) => {
        text += d;
        const m = /listening (\d+)/.exec(text);
        if (m) resolve(Number(m[1]));
      });
      child.once('exit', (code) => reject(new Error(`the bare server exited ${code}: ${output}`)));
    });
    this.base = `http://127.0.0.1:${port}`;
    if (Object.keys(this.scripts).length) await this.send(this.scripts);
  }

  /** Adds the scripts of some paths. */
  async load(scripts: Record<string, Script>): Promise<void> {
    Object.assign(this.scripts, scripts);
    await this.send(scripts);
  }

  private async send(scripts: Record<string, Script>): Promise<void> {
    const r = await fetch(`${this.base}/__scripts`, { method: 'POST', body: JSON.stringify(scripts) });
    if (!r.ok) throw new Error(`the bare server took no scripts: ${r.status} ${await r.text()}`);
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
  }

  async restart(): Promise<void> {
    await this.stop();
    if (this.info.databaseUrl) await endQueries(this.info.databaseUrl, true);
    await this.start();
  }
}

/** Stowage's SQLite reader threads: STOWAGE_SQLITE_READERS as the bench's server sees it, or the default. */
function readers(): number {
  const set = Number(process.env.STOWAGE_SQLITE_READERS);
  return process.env.STOWAGE_SQLITE_READERS && Number.isInteger(set) ? set : DEFAULT_SQLITE_READERS;
}
