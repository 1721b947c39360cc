// Stowage as `npm start` runs it (node --import tsx src/main.ts), in a child process, on a
// seeded database: rate limits and the per-workspace upload cap off (the bench is the only
// client), logs at error level (as bench/load), everything else the defaults.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { freePort, ROOT } from '../lib.ts';

export interface Server {
  base: string;
  pid: number;
  stop(): Promise<void>;
}

export async function startStowage(db: { dataDir: string; databaseUrl?: string }): Promise<Server> {
  const port = await freePort();
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: ROOT,
    env: {
      ...process.env,
      STOWAGE_DATA_DIR: db.dataDir,
      DATABASE_URL: db.databaseUrl ?? '',
      HOST: '127.0.0.1',
      PORT: String(port),
      LOG_LEVEL: 'error',
      STOWAGE_RATE_LIMIT_API: 'off',
      STOWAGE_RATE_LIMIT_UPLOAD: 'off',
      STOWAGE_MAX_CONCURRENT_UPLOADS: '0',
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let output = '';
  child.stderr!.on('data', (d: Buffer) => {
    output = (output + d).slice(-20_000);
  });
  const base = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    await exited;
    clearTimeout(timer);
  };
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null) throw new Error(`stowage exited ${child.exitCode}: ${output}`);
    const up = await fetch(`${base}/healthz`).then(
      (r) => r.ok,
      () => false,
    );
    if (up) return { base, pid: child.pid!, stop };
    await new Promise((r) => setTimeout(r, 100));
  }
  await stop();
  throw new Error(`stowage did not answer /healthz within 60 s: ${output}`);
}
