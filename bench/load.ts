// bench/load: many clients at once for a while, mixing uploads, listings and delivery, against
// a real server process (SQLite, local disk, rate limits off). Afterwards every acknowledged
// upload is fetched back and compared byte for byte. Prints throughput, latency percentiles,
// status counts and the server's memory over time; exits 1 on any 5xx, lost file or failed
// check, so test/load.test.ts runs a shorter pass of it in CI.
//
//   npm run bench:load                          200 clients for 60 s
//   LOAD_CLIENTS=50 LOAD_SECONDS=10 npm run bench:load
import { createHash, randomBytes } from 'node:crypto';
import { fmt, MiB, percentile, rss, startStowage } from './lib.ts';

const CLIENTS = Number(process.env.LOAD_CLIENTS ?? 200);
const SECONDS = Number(process.env.LOAD_SECONDS ?? 60);
/** Peak server RSS above this fails the run ("bounded memory"). */
const RSS_LIMIT_MB = Number(process.env.LOAD_RSS_LIMIT_MB ?? 1024);

type Kind = 'upload' | 'list' | 'deliver';
interface Acked {
  fileNo: string;
  name: string;
  sha256: string;
}

export async function runLoad(
  opts: { clients: number; seconds: number; log?: (line: string) => void } = { clients: CLIENTS, seconds: SECONDS },
) {
  const log = opts.log ?? console.log;
  const server = await startStowage({
    LOG_LEVEL: 'error',
    STOWAGE_RATE_LIMIT_UPLOAD: 'off',
    STOWAGE_RATE_LIMIT_API: 'off',
    STOWAGE_MAX_CONCURRENT_UPLOADS: '0',
  });
  const { workspace, secret, url: base } = server;
  const pid = server.child.pid!;
  const auth = { 'x-api-key': secret };

  const latencies: Record<Kind, number[]> = { upload: [], list: [], deliver: [] };
  const statuses = new Map<string, number>();
  const failures: string[] = [];
  const acked: Acked[] = [];
  const rssSamples: number[] = [];
  const sampler = setInterval(() => rssSamples.push(rss(pid)), 500);
  const count = (kind: Kind, status: number) =>
    statuses.set(`${kind} ${status}`, (statuses.get(`${kind} ${status}`) ?? 0) + 1);

  const started = performance.now();
  const deadline = started + opts.seconds * 1000;
  await Promise.all(
    Array.from({ length: opts.clients }, async (_, client) => {
      const mine: Acked[] = [];
      for (let n = 0; performance.now() < deadline; n++) {
        const roll = Math.random();
        const kind: Kind = roll < 0.4 || mine.length === 0 ? 'upload' : roll < 0.7 ? 'list' : 'deliver';
        const t = performance.now();
        try {
          if (kind === 'upload') {
            const bytes = randomBytes(1024 + Math.floor(Math.random() * 63 * 1024));
            const name = `c${client}-${n}.bin`;
            const form = new FormData();
            form.append('file_name', name);
            form.append('folder', `load/c${client % 20}`);
            form.append('file', new Blob([new Uint8Array(bytes)]));
            const res = await fetch(`${base}/api/v1/uploads`, { method: 'POST', headers: auth, body: form });
            const body = (await res.json()) as { file_no?: string; hash?: string };
            count(kind, res.status);
            if (res.status === 201) {
              const sha256 = createHash('sha256').update(bytes).digest('hex');
              if (body.hash !== sha256) failures.push(`${name}: acknowledged with hash ${body.hash}, sent ${sha256}`);
              const a = { fileNo: body.file_no!, name, sha256 };
              mine.push(a);
              acked.push(a);
            }
          } else if (kind === 'list') {
            const res = await fetch(`${base}/api/v1/files?limit=20&page=${1 + Math.floor(Math.random() * 5)}`, {
              headers: auth,
            });
            await res.arrayBuffer();
            count(kind, res.status);
          } else {
            const a = mine[Math.floor(Math.random() * mine.length)];
            const res = await fetch(`${base}/${workspace}/load/c${client % 20}/${a.name}`, {});
            const got = Buffer.from(await res.arrayBuffer());
            count(kind, res.status);
            if (res.status === 200 && createHash('sha256').update(got).digest('hex') !== a.sha256)
              failures.push(`${a.name}: delivered bytes differ`);
          }
        } catch (err) {
          count(kind, 0);
          failures.push(`${kind}: ${(err as Error).message}`);
        }
        latencies[kind].push(performance.now() - t);
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  clearInterval(sampler);

  // Nothing lost: every acknowledged upload is there, byte for byte.
  let missing = 0;
  for (let i = 0; i < acked.length; i += 50) {
    await Promise.all(
      acked.slice(i, i + 50).map(async (a) => {
        const res = await fetch(`${base}/api/v1/files/${a.fileNo}`, { headers: auth });
        const body = (await res.json()) as { hash?: string; data?: { hash?: string } };
        const hash = body.hash ?? body.data?.hash;
        if (res.status !== 200 || hash !== a.sha256) {
          missing++;
          failures.push(`${a.name}: ${res.status}, hash ${hash}`);
        }
      }),
    );
  }
  const finalRss = rss(pid);
  await server.stop();

  const all = [...latencies.upload, ...latencies.list, ...latencies.deliver];
  const fiveXx = [...statuses]
    .filter(([k]) => Number(k.split(' ')[1]) >= 500 || k.endsWith(' 0'))
    .reduce((n, [, c]) => n + c, 0);
  log(
    `bench/load — ${opts.clients} clients for ${opts.seconds} s (uploads 1-64 KiB, listings, delivery); node ${process.version}`,
  );
  log(
    `${'action'.padEnd(10)} ${'requests'.padStart(9)} ${'req/s'.padStart(8)} ${'p50 ms'.padStart(8)} ${'p90 ms'.padStart(8)} ${'p99 ms'.padStart(8)} ${'max ms'.padStart(8)}`,
  );
  for (const [kind, l] of [...Object.entries(latencies), ['all', all]] as [string, number[]][]) {
    const s = [...l].sort((a, b) => a - b);
    log(
      `${kind.padEnd(10)} ${String(s.length).padStart(9)} ${fmt(s.length / elapsed, 0).padStart(8)} ${fmt(percentile(s, 50)).padStart(8)} ${fmt(percentile(s, 90)).padStart(8)} ${fmt(percentile(s, 99)).padStart(8)} ${fmt(s[s.length - 1] ?? NaN).padStart(8)}`,
    );
  }
  log(
    `statuses: ${[...statuses]
      .sort()
      .map(([k, c]) => `${k}: ${c}`)
      .join(', ')}`,
  );
  const third = Math.floor(rssSamples.length / 3);
  const peak = Math.max(...rssSamples);
  const mid = Math.max(...rssSamples.slice(third, 2 * third));
  const last = Math.max(...rssSamples.slice(2 * third));
  log(
    `server RSS: peak ${fmt(peak / MiB)} MiB (limit ${RSS_LIMIT_MB}); max in the middle third ${fmt(mid / MiB)}, last third ${fmt(last / MiB)}, after the checks ${fmt(finalRss / MiB)}`,
  );
  log(
    `acknowledged uploads: ${acked.length}, missing or different afterwards: ${missing}; 5xx or failed requests: ${fiveXx}; other failures: ${failures.length}`,
  );
  for (const f of failures.slice(0, 10)) log(`  ${f}`);
  return {
    fiveXx,
    missing,
    failures,
    acked: acked.length,
    requests: all.length,
    peakRss: peak,
    ok: fiveXx === 0 && missing === 0 && failures.length === 0 && peak < RSS_LIMIT_MB * MiB,
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  runLoad().then(
    (r) => process.exit(r.ok ? 0 : 1),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}
