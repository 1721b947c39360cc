// bench/upload: upload throughput and memory, against baselines measured in the same run.
//
//   npm run bench:upload                      1 GiB runs, 4 GiB memory/complete runs
//   BENCH_SIZE_MB=256 BENCH_BIG_MB=1024 npm run bench:upload      a quicker pass
//
// Prints figures and ratios; asserts nothing. Targets (issue 3): direct >= 0.8x the bare
// pipe; multipart (4 parts in flight) >= 1.0x the bare pipe's single stream; both faster than
// @tus/server; peak RSS for 4 GiB within 10% of the peak for 64 MiB; completing 4 GiB of
// in-order parts under 0.5 s.
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chunks, fmt, GiB, MiB, mbps, peakRss, type Proc, send, startProcess } from './lib.ts';

const SIZE = Number(process.env.BENCH_SIZE_MB ?? 1024) * MiB;
const BIG = Number(process.env.BENCH_BIG_MB ?? 4096) * MiB;
const SMALL = 64 * MiB;
const REPS = Number(process.env.BENCH_REPS ?? 2);

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });

interface Stowage extends Proc {
  url: string;
  key: string;
  dir: string;
}

async function startStowage(): Promise<Stowage> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-stowage-'));
  const port = await freePort();
  const proc = await startProcess(['--import', 'tsx', 'src/main.ts'], { STOWAGE_DATA_DIR: dir, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn', AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' }, /public_key:\s+(stw_pk_\S+)/);
  // The keys are printed just before listening.
  for (let i = 0; i < 100; i++) {
    if (await fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.ok, () => false)) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  return { ...proc, url: `http://127.0.0.1:${port}`, key: proc.match[1], dir, stop: async () => { await proc.stop(); rmSync(dir, { recursive: true, force: true }); } };
}

async function startBaseline(script: string): Promise<Proc & { url: string; dir: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-baseline-'));
  const proc = await startProcess([script], { BENCH_DIR: dir }, /listening (\d+)/);
  return { ...proc, url: `http://127.0.0.1:${proc.match[1]}`, dir, stop: async () => { await proc.stop(); rmSync(dir, { recursive: true, force: true }); } };
}

async function direct(s: Stowage, size: number, name: string): Promise<number> {
  const boundary = '----stowagebench';
  const prefix = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file_name"\r\n\r\n${name}\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${name}"\r\nContent-Type: application/octet-stream\r\n\r\n`);
  const suffix = Buffer.from(`\r\n--${boundary}--\r\n`);
  const res = await send(`${s.url}/api/v1/uploads`, {
    method: 'POST',
    headers: { 'x-api-key': s.key, 'content-type': `multipart/form-data; boundary=${boundary}`, 'content-length': prefix.length + size + suffix.length },
    total: size,
    prefix,
    suffix,
  });
  if (res.status !== 201) throw new Error(`direct upload: ${res.status} ${res.body}`);
  return res.ms;
}

async function multipart(s: Stowage, size: number, name: string, concurrency: number): Promise<{ ms: number; completeMs: number }> {
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
        const body = Buffer.concat([...chunks(length)]);
        const res = await send(job.url, { method: 'PUT', headers: { 'content-type': 'application/octet-stream', 'content-length': length }, total: length, body });
        if (res.status !== 200) throw new Error(`part ${job.n}: ${res.status} ${res.body}`);
      }
    }),
  );
  const completeStarted = performance.now();
  const done = await fetch(`${s.url}/api/v1/multipart/complete`, { method: 'POST', headers: { 'x-api-key': s.key, 'content-type': 'application/json' }, body: JSON.stringify({ session_id: session.session_id }) });
  if (done.status !== 200) throw new Error(`complete: ${done.status} ${await done.text()}`);
  const completeMs = performance.now() - completeStarted;
  return { ms: performance.now() - started, completeMs };
}

async function bare(b: { url: string }, size: number): Promise<number> {
  const res = await send(`${b.url}/upload`, { method: 'POST', headers: { 'content-type': 'application/octet-stream', 'content-length': size }, total: size });
  if (res.status !== 201) throw new Error(`bare: ${res.status}`);
  return res.ms;
}

async function tus(t: { url: string }, size: number): Promise<number> {
  const started = performance.now();
  const created = await fetch(`${t.url}/files`, { method: 'POST', headers: { 'tus-resumable': '1.0.0', 'upload-length': String(size) } });
  const location = new URL(created.headers.get('location')!, t.url).toString();
  const res = await send(location, {
    method: 'PATCH',
    headers: { 'tus-resumable': '1.0.0', 'upload-offset': '0', 'content-type': 'application/offset+octet-stream', 'content-length': size },
    total: size,
  });
  if (res.status !== 204) throw new Error(`tus: ${res.status} ${res.body}`);
  return performance.now() - started;
}

const best = async (fn: () => Promise<number>) => {
  let min = Infinity;
  for (let i = 0; i < REPS; i++) min = Math.min(min, await fn());
  return min;
};

async function main() {
  console.log(`bench/upload — ${SIZE / MiB} MiB per throughput run (best of ${REPS}), ${BIG / MiB} MiB for memory and complete; node ${process.version}\n`);

  const b = await startBaseline('bench/servers/bare-pipe.mjs');
  const bareMs = await best(() => bare(b, SIZE));
  await b.stop();

  const t = await startBaseline('bench/servers/tus.mjs');
  const tusMs = await best(() => tus(t, SIZE));
  await t.stop();

  const s = await startStowage();
  let n = 0;
  const directMs = await best(() => direct(s, SIZE, `direct-${n++}.bin`));
  const multipartMs = await best(async () => (await multipart(s, SIZE, `multipart-${n++}.bin`, 4)).ms);
  await s.stop();

  const bareRate = mbps(SIZE, bareMs);
  const rows: [string, number, string][] = [
    ['bare node:http pipe to a file', bareRate, ''],
    ['@tus/server + FileStore (1 PATCH)', mbps(SIZE, tusMs), ''],
    ['stowage direct upload', mbps(SIZE, directMs), 'target >= 0.80'],
    ['stowage multipart, 4 parts in flight', mbps(SIZE, multipartMs), 'target >= 1.00'],
  ];
  console.log('throughput'.padEnd(40), 'MiB/s'.padStart(8), 'x bare'.padStart(8));
  for (const [label, rate, note] of rows) console.log(label.padEnd(40), fmt(rate).padStart(8), fmt(rate / bareRate, 2).padStart(8), ` ${note}`);
  const tusRate = mbps(SIZE, tusMs);
  console.log(`\nx @tus/server: direct ${fmt(mbps(SIZE, directMs) / tusRate, 2)}, multipart ${fmt(mbps(SIZE, multipartMs) / tusRate, 2)} (target > 1.00 each)`);

  // Memory: a fresh server per size, peak RSS over its whole life.
  const small = await startStowage();
  await direct(small, SMALL, 'small.bin');
  const smallPeak = peakRss(small.child.pid!);
  await small.stop();
  const big = await startStowage();
  await direct(big, BIG, 'big.bin');
  const bigPeak = peakRss(big.child.pid!);
  await big.stop();
  console.log(`\npeak RSS: ${fmt(smallPeak / MiB)} MiB after ${SMALL / MiB} MiB, ${fmt(bigPeak / MiB)} MiB after ${BIG / MiB} MiB direct upload: ratio ${fmt(bigPeak / smallPeak, 3)} (target <= 1.10)`);

  // Complete: parts sent in order, one at a time; then 4 at a time.
  const c = await startStowage();
  const sequential = await multipart(c, BIG, 'complete-seq.bin', 1);
  const parallel = await multipart(c, BIG, 'complete-par.bin', 4);
  const cPeak = peakRss(c.child.pid!);
  await c.stop();
  console.log(`complete of ${BIG / GiB} GiB multipart: ${fmt(sequential.completeMs, 0)} ms with parts in order (target < 500 ms), ${fmt(parallel.completeMs, 0)} ms with 4 parts in flight; peak RSS ${fmt(cPeak / MiB)} MiB`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
