// A real server and a workspace for the client CLI's suites: registers its own before/after hooks
// inside the calling describe, and fills the returned object in before the first test.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { type RunResult, runCli, type ServerProcess, startServer } from './process.ts';

export interface CliServer {
  dir: string;
  dataDir: string;
  /** Where interrupted uploads are remembered (STOWAGE_STATE_FILE). */
  stateFile: string;
  server: ServerProcess;
  ws: { workspace_id: string; public_key: string; private_key: string };
  /** STOWAGE_URL and STOWAGE_STATE_FILE. */
  env: Record<string, string>;
  /** `stowage <args>` with `key` (the private key by default) as STOWAGE_API_KEY. */
  cli(args: string[], key?: string, extra?: Record<string, string>): Promise<RunResult>;
}

export function useCliServer(): CliServer {
  const dir = mkdtempSync(join(tmpdir(), 'stowage-cli-'));
  const s = {
    dir,
    dataDir: join(dir, 'data'),
    stateFile: join(dir, 'state', 'uploads.json'),
    env: {},
    cli: (args: string[], key?: string, extra: Record<string, string> = {}) =>
      runCli(args, { ...s.env, STOWAGE_API_KEY: key ?? s.ws.private_key, ...extra }),
  } as CliServer;
  before(async () => {
    s.ws = JSON.parse(
      (await runCli(['workspace', 'create', '--name', 'CLI', '--json'], { STOWAGE_DATA_DIR: s.dataDir })).stdout,
    );
    let server = await startServer({ STOWAGE_DATA_DIR: s.dataDir, STOWAGE_SWEEP_INTERVAL_MS: '0' });
    // Part URLs carry the public URL: give the server its real address.
    await server.stop();
    const port = new URL(server.url).port;
    server = await startServer({
      STOWAGE_DATA_DIR: s.dataDir,
      PORT: port,
      STOWAGE_PUBLIC_URL: `http://127.0.0.1:${port}`,
      STOWAGE_SWEEP_INTERVAL_MS: '0',
    });
    s.server = server;
    s.env = { STOWAGE_URL: server.url, STOWAGE_STATE_FILE: s.stateFile };
  });
  after(async () => {
    await s.server?.stop('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });
  return s;
}
