// Runs the real server and CLI as a user would: separate processes, configured by environment.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { closedPort } from './servers.ts';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `bin/stowage.js` with args and env; resolves when it exits. `onSpawn` gets the child (to signal it). */
export function runCli(
  args: string[],
  env: Record<string, string | undefined>,
  onSpawn?: (child: ChildProcess) => void,
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['bin/stowage.js', ...args], {
      cwd: ROOT,
      env: { ...cleanEnv(), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    onSpawn?.(child);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Where the first start on an empty database writes the first workspace's keys (mode 0600). */
export function firstWorkspaceFile(dataDir: string): string {
  return resolve(ROOT, dataDir, 'first-workspace.json');
}

/** The first workspace's keys as the first start wrote them, or undefined when it wrote none. */
export function readFirstWorkspace(
  dataDir: string,
): { workspace_id: string; public_key: string; private_key: string; webhook_secret: string } | undefined {
  const file = firstWorkspaceFile(dataDir);
  return existsSync(file) ? JSON.parse(readFileSync(file, 'utf8')) : undefined;
}

export interface ServerProcess {
  child: ChildProcess;
  url: string;
  output(): string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export interface StartOptions {
  /** Node options before the script. */
  nodeArgs?: string[];
  /** Sees everything printed so far each time more arrives, while the server starts. */
  onOutput?: (out: string) => void;
  /** What to run instead of the sources through tsx: a script path (relative to `cwd`). */
  script?: string;
  /** Where to run it (the repository by default). */
  cwd?: string;
  /** Arguments after the script (e.g. `worker`). */
  args?: string[];
  /** What in the output says it is up, instead of "Server listening at <url>" (a worker serves no URL: `url` is ''). */
  ready?: RegExp;
}

/** Starts the server (by default `src/main.ts` through tsx) with PORT=0 and waits until it listens. */
export function startServer(env: Record<string, string | undefined>, opts: StartOptions = {}): Promise<ServerProcess> {
  const { nodeArgs = [], onOutput, script, cwd = ROOT, args = [], ready } = opts;
  return new Promise((resolve, reject) => {
    const entry = script ? [script] : ['--import', 'tsx', 'src/main.ts'];
    const child = spawn(process.execPath, [...nodeArgs, ...entry, ...args], {
      cwd,
      env: { ...cleanEnv(), HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${out}`)), 60_000);
    const onData = (d: Buffer) => {
      out += d;
      onOutput?.(out);
      const m = (ready ?? /Server listening at (http:\/\/127\.0\.0\.1:\d+)/).exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({
          child,
          url: m[1] ?? '',
          output: () => out,
          async stop(signal = 'SIGTERM') {
            if (child.exitCode === null) child.kill(signal);
            return exited;
          },
        });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(Object.assign(new Error(`server exited with ${code}:\n${out}`), { code, output: out }));
    });
  });
}

/**
 * Starts the server on a port known beforehand, with STOWAGE_PUBLIC_URL naming it: delivery and
 * part URLs are made from the public URL. Should the port be taken in between, once more.
 */
export async function startServerAtPublicUrl(
  env: Record<string, string | undefined>,
  opts: StartOptions = {},
): Promise<ServerProcess> {
  for (let attempt = 1; ; attempt++) {
    const port = await closedPort();
    try {
      return await startServer({ ...env, PORT: String(port), STOWAGE_PUBLIC_URL: `http://127.0.0.1:${port}` }, opts);
    } catch (err) {
      if (attempt >= 2 || !/EADDRINUSE/.test(String((err as { output?: string }).output))) throw err;
    }
  }
}

/** The parent's environment without anything that would change the server's configuration. */
function cleanEnv(): Record<string, string | undefined> {
  const env = { ...process.env };
  for (const k of Object.keys(env)) {
    if (/^(STOWAGE_|DATABASE_URL|PORT|HOST|LOG_LEVEL|S3_|REDIS_URL)/.test(k)) delete env[k];
  }
  return env;
}
