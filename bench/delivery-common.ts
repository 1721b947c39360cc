// What bench/delivery and bench/delivery-profile share: wrk as the client (C, its own process),
// the photo both serve, uploading it, and the CPU time of a process from /proc.
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';

export const DURATION = Number(process.env.BENCH_DURATION_S ?? 10);
export const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
/** About 50 KB from the 3 MB photo. */
export const TOKENS = 'w_640,f_webp';
const SCRIPT = fileURLToPath(new URL('delivery-wrk.lua', import.meta.url));

export interface Load {
  rps: number;
  p99: number;
  /** Bytes per second read by the client (headers included). */
  bps: number;
  errors: number;
}

/** wrk -t2 against `url`; `running` is called once wrk has started, with its pid. */
export async function wrk(url: string, running?: (pid: number) => void): Promise<Load> {
  const args = ['-t2', `-c${CONNECTIONS}`, `-d${DURATION}s`, `--timeout=${DURATION + 30}s`, '-s', SCRIPT, url];
  const child = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  if (child.pid) running?.(child.pid);
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d));
  child.stderr.on('data', (d: Buffer) => (out += d));
  const [code] = (await once(child, 'exit')) as [number];
  const m = /WRK_RESULT (\{.*\})/.exec(out);
  if (code !== 0 || !m) throw new Error(`wrk failed (${code}): ${out}`);
  const r = JSON.parse(m[1]) as Record<string, number>;
  const s = r.duration_us / 1e6;
  return {
    rps: r.requests / s,
    p99: r.p99 / 1000,
    bps: r.bytes / s,
    errors: r.status_errors + r.socket_errors,
  };
}

/** A photo-like JPEG of about 3 MB: noise compresses (and decodes) like a real photo, not like a flat fill. */
export function makePhoto(): Promise<Buffer> {
  return sharp({
    create: {
      width: 2600,
      height: 1950,
      channels: 3,
      background: '#808080',
      noise: { type: 'gaussian', mean: 128, sigma: 40 },
    },
  })
    .jpeg({ quality: 88 })
    .toBuffer();
}

export async function upload(base: string, key: string, name: string, bytes: Buffer): Promise<void> {
  const form = new FormData();
  form.set('file_name', name);
  form.set('file', new Blob([new Uint8Array(bytes)], { type: 'image/jpeg' }), name);
  const res = await fetch(`${base}/api/v1/uploads`, { method: 'POST', headers: { 'x-api-key': key }, body: form });
  if (res.status !== 201 && res.status !== 200) throw new Error(`upload ${name}: ${res.status} ${await res.text()}`);
}

export async function bytesOf(url: string, headers?: Record<string, string>): Promise<Buffer> {
  const res = await fetch(url, { headers });
  if (res.status !== 200) throw new Error(`${url}: ${res.status}`);
  return Buffer.from(await res.arrayBuffer());
}

let ticks: number | undefined;

/** CPU seconds (user + system) a process has used so far, from /proc/<pid>/stat. */
export function cpuSeconds(pid: number): number {
  ticks ??= Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name, which is in parentheses and may hold spaces.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / ticks;
}
