// Runs the `wrk` load generator (its own process, C, so the load client never competes with
// the server's event loop for a JavaScript thread) with request.lua, and reads its result.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const SCRIPT = fileURLToPath(new URL('request.lua', import.meta.url));

export interface WrkRun {
  base: string;
  kind: 'get' | 'rename' | 'upload';
  /** Paths (get), "folder_no\tname" (rename) or folder paths (upload), taken in turn. */
  lines: string[];
  key: string;
  clients: number;
  seconds: number;
  /** Makes upload and rename names unique across runs. */
  run: string;
}

export interface WrkResult {
  requests: number;
  /** Milliseconds. */
  p50: number;
  p99: number;
  max: number;
  errors: number;
  seconds: number;
}

export async function wrk(o: WrkRun): Promise<WrkResult> {
  const dir = mkdtempSync(join(tmpdir(), 'scale-wrk-'));
  const paths = join(dir, 'lines.txt');
  writeFileSync(paths, `${o.lines.join('\n')}\n`);
  const args = [
    `-t${Math.min(o.clients, 2)}`,
    `-c${o.clients}`,
    `-d${Math.ceil(o.seconds)}s`,
    `--timeout=${Math.ceil(o.seconds) + 60}s`,
    '-s',
    SCRIPT,
    o.base,
  ];
  try {
    const out = await new Promise<string>((resolve, reject) => {
      const child = spawn('wrk', args, {
        env: { ...process.env, SCALE_KIND: o.kind, SCALE_PATHS: paths, SCALE_KEY: o.key, SCALE_RUN: o.run },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let text = '';
      child.stdout.on('data', (d: Buffer) => (text += d));
      child.stderr.on('data', (d: Buffer) => (text += d));
      child.once('error', (err: NodeJS.ErrnoException) =>
        reject(err.code === 'ENOENT' ? new Error('wrk is not installed (Debian: apt-get install wrk)') : err),
      );
      child.once('exit', (code) => (code === 0 ? resolve(text) : reject(new Error(`wrk exited ${code}: ${text}`))));
    });
    const line = /SCALE_RESULT (\{.*\})/.exec(out);
    if (!line) throw new Error(`wrk printed no result: ${out}`);
    const r = JSON.parse(line[1]) as Record<string, number>;
    return {
      requests: r.requests,
      p50: r.p50 / 1000,
      p99: r.p99 / 1000,
      max: r.max / 1000,
      errors: r.status_errors + r.socket_errors,
      seconds: r.duration_us / 1e6,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
