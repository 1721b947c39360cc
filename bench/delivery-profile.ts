// bench/delivery-profile: where Stowage's time goes while it serves a cached 50 KB rendition
// (the row of bench/delivery that nginx outruns). Stowage runs as bench/delivery runs it, under
// `node --cpu-prof`; wrk loads the rendition for BENCH_DURATION_S; the profile's samples taken
// while wrk ran are summed by self time, per function and per kind of work, with the CPU each
// process used meanwhile. Prints two tables (the summary in docs/deploy.md comes from them).
//
//   npm run bench:delivery-profile      (BENCH_DURATION_S=10, BENCH_CONNECTIONS=50)
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { bytesOf, CONNECTIONS, cpuSeconds, DURATION, makePhoto, TOKENS, upload, wrk } from './delivery-common.ts';
import { fmt } from './lib.ts';
import { Stowage } from './scale/server.ts';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface Profile {
  nodes: { id: number; callFrame: CallFrame }[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** The kinds of work a function's self time is counted under, first match wins. */
const KINDS: [string, (f: CallFrame) => boolean][] = [
  ['idle (waiting in epoll)', (f) => f.functionName === '(idle)'],
  ['garbage collection', (f) => f.functionName === '(garbage collector)'],
  [
    'socket writes (writev/write, native)',
    (f) =>
      /^(writev|writeBuffer|writeUtf8String|writeLatin1String|writeAsciiString|writeUcs2String)$/.test(f.functionName),
  ],
  [
    'HTTP parsing (llhttp and its callbacks)',
    (f) => f.url.endsWith('_http_common') || (f.url === '' && /^(execute|finish|consume)$/.test(f.functionName)),
  ],
  [
    "HTTP answers (Node's ServerResponse, headers)",
    (f) => /(^node:)?_http_(outgoing|server|incoming)$/.test(f.url) || f.url.includes('internal/http'),
  ],
  [
    'sockets and streams (net, stream)',
    (f) => /^node:(net|stream|internal\/(streams|stream_base_commons|net))/.test(f.url),
  ],
  [
    'event loop (timers, ticks, microtasks)',
    (f) => /^node:internal\/(timers|process\/task_queues|async_hooks)/.test(f.url) || f.url === 'node:timers',
  ],
  ['Stowage (fast path, answer(), cache lookup, metrics)', (f) => f.url.includes('/src/')],
  ['libraries (Fastify, prom-client, ...)', (f) => f.url.includes('node_modules')],
  ['V8 and native, not attributed ((program))', (f) => f.functionName === '(program)'],
  ['other native', (f) => f.url === ''],
  ['other Node.js internals', () => true],
];

const kindOf = (f: CallFrame) => KINDS.find(([, test]) => test(f))![0];
const where = (f: CallFrame) => {
  if (!f.url) return '(native)';
  const short = f.url.replace(/^file:\/\/.*?\/(src|node_modules)\//, '$1/').replace(/^node:/, 'node:');
  // tsx hands V8 each of Stowage's files as one transpiled line: the file is what is known.
  return f.lineNumber > 0 ? `${short}:${f.lineNumber + 1}` : short;
};

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'bench-delivery-profile-'));
  const profDir = join(dir, 'profile');
  const stowage = new Stowage({ dataDir: join(dir, 'data') }, {}, ['--cpu-prof', `--cpu-prof-dir=${profDir}`]);
  try {
    const photo = await makePhoto();
    await stowage.start();
    const first = JSON.parse(readFileSync(join(dir, 'data', 'first-workspace.json'), 'utf8')) as {
      workspace_id: string;
      private_key: string;
    };
    await upload(stowage.base, first.private_key, 'photo.jpg', photo);
    const url = `${stowage.base}/${first.workspace_id}/${TOKENS}/photo.jpg`;
    const rendition = await bytesOf(url);
    // Made, then remembered: from here on the fast path answers it from memory.
    for (let i = 0; i < 3; i++) await bytesOf(url);

    // The window, on the clock V8 stamps samples with (CLOCK_MONOTONIC, microseconds).
    const from = Number(process.hrtime.bigint() / 1000n);
    const stowageCpu = cpuSeconds(stowage.pid);
    let wrkCpu = 0;
    let timer: NodeJS.Timeout | undefined;
    const load = await wrk(url, (pid) => {
      // wrk's own CPU, read from its 1st second to just before its end.
      const start = setTimeout(() => {
        const at = cpuSeconds(pid);
        timer = setTimeout(
          () => {
            wrkCpu = (cpuSeconds(pid) - at) / (DURATION - 1.5);
          },
          (DURATION - 1.5) * 1000,
        );
      }, 1000);
      timer = start;
    });
    clearTimeout(timer);
    const to = Number(process.hrtime.bigint() / 1000n);
    const stowageShare = (cpuSeconds(stowage.pid) - stowageCpu) / ((to - from) / 1e6);
    await stowage.stop();

    const file = readdirSync(profDir).find((f) => f.endsWith('.cpuprofile'));
    if (!file) throw new Error('node wrote no profile');
    const profile = JSON.parse(readFileSync(join(profDir, file), 'utf8')) as Profile;
    const frames = new Map(profile.nodes.map((n) => [n.id, n.callFrame]));
    const self = new Map<string, { frame: CallFrame; us: number }>();
    const kinds = new Map<string, number>();
    let at = profile.startTime;
    let total = 0;
    for (let i = 0; i < profile.samples.length; i++) {
      at += profile.timeDeltas[i];
      if (at < from || at > to) continue;
      const frame = frames.get(profile.samples[i])!;
      const us = profile.timeDeltas[i + 1] ?? 0;
      total += us;
      const key = `${frame.functionName}|${frame.url}|${frame.lineNumber}`;
      const entry = self.get(key) ?? { frame, us: 0 };
      entry.us += us;
      self.set(key, entry);
      const kind = kindOf(frame);
      kinds.set(kind, (kinds.get(kind) ?? 0) + us);
    }
    if (total === 0) throw new Error('no sample fell in the load window');
    const pct = (us: number) => `${fmt((100 * us) / total, 1).padStart(5)}%`;

    const out: string[] = [
      `bench/delivery-profile: cached rendition (${TOKENS}, ${fmt(rendition.length / 1024, 1)} KiB) from Stowage under node --cpu-prof; wrk -t2 -c${CONNECTIONS} -d${DURATION}s; node ${process.version}; ${cpus().length} cores`,
      `${fmt(load.rps, 0)} req/s, p99 ${fmt(load.p99, 1)} ms; CPU while loaded: Stowage ${fmt(stowageShare * 100, 0)}% of a core, wrk ${fmt(wrkCpu * 100, 0)}%`,
      '',
      'self time by kind of work',
      ...[...kinds.entries()].sort((a, b) => b[1] - a[1]).map(([kind, us]) => `  ${pct(us)}  ${kind}`),
      '',
      'top functions by self time',
      ...[...self.values()]
        .sort((a, b) => b.us - a.us)
        .slice(0, 25)
        .map(({ frame, us }) => `  ${pct(us)}  ${(frame.functionName || '(anonymous)').padEnd(28)} ${where(frame)}`),
    ];
    console.log(['```', ...out, '```'].join('\n'));
  } finally {
    await stowage.stop(true);
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
