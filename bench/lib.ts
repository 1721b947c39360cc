// Shared pieces of the benchmarks: servers as child processes, streamed request bodies that
// are generated (never held whole in memory), and peak RSS from /proc.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('..', import.meta.url));

/**
 * The node flags `npm start` runs the server with (package.json's start script, the Dockerfile's
 * CMD too), so benches measure the server as it is run.
 */
export const START_NODE_FLAGS: string[] = (() => {
  const words = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).scripts.start as string).split(/\s+/);
  // node, its own flags, then the script.
  const script = words.findIndex((word, i) => i > 0 && !word.startsWith('-'));
  return words.slice(1, script);
})();

export const MiB = 1024 * 1024;
export const GiB = 1024 * MiB;

export interface Proc {
  child: ChildProcess;
  output: string;
  stop(): Promise<void>;
}

export function startProcess(
  args: string[],
  env: Record<string, string>,
  ready: RegExp,
): Promise<Proc & { match: RegExpExecArray }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const proc = {
      child,
      output: '',
      stop: () =>
        new Promise<void>((r) => {
          if (child.exitCode !== null) return r();
          child.once('exit', () => r());
          child.kill('SIGKILL');
        }),
    };
    const timer = setTimeout(() => reject(new Error(`did not start: ${proc.output}`)), 30_000);
    const onData = (d: Buffer) => {
      proc.output += d;
      if (proc.output.length > 1_000_000) proc.output = proc.output.slice(-100_000);
      const m = ready.exec(proc.output);
      if (m) {
        clearTimeout(timer);
        resolve({ ...proc, match: m });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`exited ${code}: ${proc.output}`)));
  });
}

/** A memory figure of a process from /proc, in bytes: VmHWM (peak so far) or VmRSS (now). */
function procStatus(pid: number, field: 'VmHWM' | 'VmRSS'): number {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : NaN;
}

/** CPU time a process (all its threads) has used so far, user + system, in seconds. */
export function cpuSeconds(pid: number): number {
  // /proc/<pid>/stat: the fields after the command name; utime and stime are the 12th and 13th, in clock ticks (100/s).
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/**
 * CPU seconds of every process named `comm` (e.g. postgres: its backends, WAL writer and
 * checkpointer), by pid. The difference of two readings (see cpuSince) is what they used in
 * between; a process that exited meanwhile is not counted.
 */
export function cpuByProcess(comm: string): Map<number, number> {
  const seconds = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')) === comm)
        seconds.set(Number(entry), cpuSeconds(Number(entry)));
    } catch {
      // Gone between the listing and the read.
    }
  }
  return seconds;
}

/** CPU seconds the processes of `before` (and any started since) used from then to now. */
export function cpuSince(before: Map<number, number>, comm: string): number {
  let total = 0;
  for (const [pid, s] of cpuByProcess(comm)) total += s - (before.get(pid) ?? 0);
  return total;
}

/** Peak resident set size of a process so far, in bytes. */
export const peakRss = (pid: number) => procStatus(pid, 'VmHWM');
/** Resident set size of a process now, in bytes. */
export const rss = (pid: number) => procStatus(pid, 'VmRSS');

/** A port nothing listens on right now, on loopback. */
export const freePort = () =>
  new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });

/** A source of `total` bytes: a random MiB repeated with a counter, so no two MiB are equal. */
export function* chunks(total: number, chunkSize = MiB): Generator<Buffer> {
  const base = randomBytes(chunkSize);
  for (let sent = 0, i = 0; sent < total; i++) {
    const n = Math.min(chunkSize, total - sent);
    const c = Buffer.from(base.subarray(0, n));
    c.writeUInt32LE(i, 0);
    sent += n;
    yield c;
  }
}

export interface SendResult {
  status: number;
  body: string;
  ms: number;
  headers: http.IncomingHttpHeaders;
}

/** Streams a request body made of `prefix`, `total` generated bytes and `suffix`. */
export function send(
  url: string,
  opts: { method: string; headers: Record<string, string | number>; total: number; prefix?: Buffer; suffix?: Buffer },
): Promise<SendResult> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const req = http.request(url, { method: opts.method, headers: opts.headers, agent: false });
    req.on('error', reject);
    req.on('response', (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, body, ms: performance.now() - started, headers: res.headers }),
      );
    });
    if (opts.prefix) req.write(opts.prefix);
    const source = chunks(opts.total);
    const pump = () => {
      for (let next = source.next(); !next.done; next = source.next()) {
        if (!req.write(next.value)) return void req.once('drain', pump);
      }
      if (opts.suffix) req.write(opts.suffix);
      req.end();
    };
    pump();
  });
}

/** A direct upload (`POST /api/v1/uploads`) of `total` generated bytes named `name`, streamed. */
export function sendDirectUpload(baseUrl: string, key: string, name: string, total: number): Promise<SendResult> {
  const boundary = '----stowagebench';
  const prefix = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="file_name"\r\n\r\n${name}\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${name}"\r\nContent-Type: application/octet-stream\r\n\r\n`,
  );
  const suffix = Buffer.from(`\r\n--${boundary}--\r\n`);
  return send(`${baseUrl}/api/v1/uploads`, {
    method: 'POST',
    headers: {
      'x-api-key': key,
      'content-type': `multipart/form-data; boundary=${boundary}`,
      'content-length': prefix.length + total + suffix.length,
    },
    total,
    prefix,
    suffix,
  });
}

export const mbps = (bytes: number, ms: number) => bytes / MiB / (ms / 1000);
export const fmt = (n: number, digits = 1) => n.toFixed(digits);

/** The middle value (the mean of the two middle ones for an even count). */
export function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/** The p-th percentile of already sorted values (nearest rank). */
export const percentile = (sorted: number[], p: number) =>
  sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] : NaN;

export interface Stowage extends Proc {
  url: string;
  /** The first workspace's id. */
  workspace: string;
  /** The first workspace's public and private keys. */
  key: string;
  secret: string;
  dir: string;
}

/**
 * The real server (`src/main.ts`, with `npm start`'s node flags) in a child process on a free
 * port, with a fresh data directory under `tmp`; its first workspace's keys are read from
 * DATA_DIR/first-workspace.json (written there because stdout is not a terminal). Stopping it
 * removes the data directory.
 */
export async function startStowage(env: Record<string, string> = {}, tmp = tmpdir()): Promise<Stowage> {
  const dir = mkdtempSync(join(tmp, 'bench-stowage-'));
  const port = await freePort();
  const proc = await startProcess(
    [...START_NODE_FLAGS, '--import', 'tsx', 'src/main.ts'],
    {
      STOWAGE_DATA_DIR: dir,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      ...env,
    },
    /first-workspace\.json/,
  );
  const first = JSON.parse(readFileSync(join(dir, 'first-workspace.json'), 'utf8'));
  for (let i = 0; i < 100; i++) {
    if (
      await fetch(`http://127.0.0.1:${port}/healthz`).then(
        (r) => r.ok,
        () => false,
      )
    )
      break;
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    ...proc,
    url: `http://127.0.0.1:${port}`,
    workspace: first.workspace_id,
    key: first.public_key,
    secret: first.private_key,
    dir,
    stop: async () => {
      await proc.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * A multipart upload through Stowage's API: start, the parts PUT to the URLs start handed out
 * (Stowage's own, or presigned straight to S3), `concurrency` at a time, then complete. The file
 * is deleted afterwards unless `keep`. `ms` is the whole; `completeMs` the complete call alone.
 */
export async function sendMultipart(
  s: Stowage,
  size: number,
  name: string,
  concurrency: number,
  keep = false,
): Promise<{ ms: number; completeMs: number; record: { file_no: number } }> {
  const started = performance.now();
  const startRes = await fetch(`${s.url}/api/v1/multipart/start`, {
    method: 'POST',
    headers: { 'x-api-key': s.key, 'content-type': 'application/json' },
    body: JSON.stringify({ file_name: name, size, format: 'application/octet-stream' }),
  });
  const session = (await startRes.json()) as { session_id: string; part_size: number; parts: string[] };
  const queue = session.parts.map((url, i) => ({ url, n: i + 1 }));
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let job = queue.shift(); job; job = queue.shift()) {
        const length = Math.min(session.part_size, size - (job.n - 1) * session.part_size);
        // Streamed from the same generator as every other body, never assembled in memory.
        const res = await send(job.url, {
          method: 'PUT',
          headers: { 'content-type': 'application/octet-stream', 'content-length': length },
          total: length,
        });
        if (res.status !== 200) throw new Error(`part ${job.n}: ${res.status} ${res.body}`);
      }
    }),
  );
  const completeStarted = performance.now();
  const done = await fetch(`${s.url}/api/v1/multipart/complete`, {
    method: 'POST',
    headers: { 'x-api-key': s.key, 'content-type': 'application/json' },
    body: JSON.stringify({ session_id: session.session_id }),
  });
  if (done.status !== 200) throw new Error(`complete: ${done.status} ${await done.text()}`);
  const completeMs = performance.now() - completeStarted;
  const ms = performance.now() - started;
  const record = await done.json();
  if (!keep) await removeFile(s, record);
  return { ms, completeMs, record };
}

/** Deletes a file Stowage recorded (after it was measured, so that a run of many GiB fits in BENCH_TMP). */
export async function removeFile(
  s: Stowage,
  record: { file_no?: number | string; data?: { file_no: number } },
): Promise<void> {
  const fileNo = record.file_no ?? record.data?.file_no;
  const res = await fetch(`${s.url}/api/v1/files/${fileNo}`, { method: 'DELETE', headers: { 'x-api-key': s.secret } });
  if (!res.ok) throw new Error(`delete: ${res.status} ${await res.text()}`);
}
