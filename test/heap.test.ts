// The V8 heap tuning of src/heap.ts: a large upload after a quiet spell must not set off one full
// collection of the heap after another. Two servers run as `npm start` runs them, with
// --trace-gc: one as shipped, and a control held at `--heap-growing-percent=10`, the factor V8
// picks by itself after a quiet spell (its trace says "factor 1.1"). Left to its own choice
// the control only sometimes lands there, which made the check flaky under load. Both sit idle
// for 12 s, then every Mark-Compact printed while a 256 MiB upload streams in is counted. The
// control shows the problem is there to be solved.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, describe, test } from 'node:test';
import { MiB, ROOT, sendDirectUpload, START_NODE_FLAGS } from '../bench/lib.ts';
import { HEAP_GROWING_PERCENT, tuneHeapForStreaming, tunePretenuring } from '../src/heap.ts';
import { runCli, type ServerProcess, startServer } from './helpers/process.ts';

/** Full collections the server printed while `during` ran. */
async function markCompactsDuring(server: ServerProcess, during: () => Promise<void>): Promise<number> {
  const before = server.output().length;
  await during();
  return (
    server
      .output()
      .slice(before)
      .match(/Mark-Compact/g) ?? []
  ).length;
}

describe('heap tuning for streamed uploads', () => {
  const dir = mkdtempSync(join(tmpdir(), 'stowage-heap-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('a growth factor given on the command line is left alone', () => {
    assert.equal(tuneHeapForStreaming(['--heap-growing-percent=30']), false);
    assert.equal(tuneHeapForStreaming(['--heap_growing_percent=30']), false);
    assert.equal(tuneHeapForStreaming(['--max-old-space-size=512']), true);
  });

  test(`after a quiet spell, a 256 MiB upload runs no full collection after another (${HEAP_GROWING_PERCENT}% growth), unlike V8's quiet-spell 10%`, async () => {
    const servers: Record<string, { server: ServerProcess; key: string }> = {};
    try {
      for (const [name, nodeArgs] of [
        ['tuned', ['--trace-gc']],
        ['control', ['--trace-gc', '--heap-growing-percent=10']],
      ] as const) {
        const env = { STOWAGE_DATA_DIR: join(dir, name), STOWAGE_FSYNC: 'false' };
        const ws = JSON.parse((await runCli(['workspace', 'create', '--name', name, '--json'], env)).stdout);
        servers[name] = { server: await startServer(env, { nodeArgs: [...nodeArgs] }), key: ws.public_key };
      }
      // V8 sizes the heap by the recent allocation rate: after this, as low as it gets.
      await new Promise((r) => setTimeout(r, 12_000));
      const counts: Record<string, number> = {};
      for (const [name, { server, key }] of Object.entries(servers)) {
        counts[name] = await markCompactsDuring(server, async () =>
          assert.equal((await sendDirectUpload(server.url, key, 'big.bin', 256 * MiB)).status, 201),
        );
      }
      console.log(`full collections during a 256 MiB upload after 12 s idle: ${JSON.stringify(counts)}`);
      assert.ok(
        counts.control >= 4,
        `V8 at its quiet-spell growth collects again and again (${counts.control}): the upload exercises the problem`,
      );
      // Quiet, the tuned server runs 0 to 2. Beside other test files on a loaded 2-core machine
      // both run more (3 against 11, 6 against 19 seen in CI runs): judged against the control.
      assert.ok(
        counts.tuned * 3 <= counts.control,
        `the tuned server ran ${counts.tuned} full collections, the control ${counts.control}`,
      );
    } finally {
      for (const { server } of Object.values(servers)) await server.stop('SIGKILL');
    }
  });
});

// Pretenuring: one allocation site first makes 3M objects that all survive (as a page's rows
// can at an unlucky scavenge), then 3M that die at once. Left to V8, the site is tenured by then
// and every one of the later objects is born in the old generation; with src/heap.ts's tuning
// applied at startup, as main.ts does, they stay young. Each run is a process of its own.
const PROBE = `
  import { getHeapSpaceStatistics } from 'node:v8';
  const { tunePretenuring } = await import(process.env.HEAP_TS);
  if (process.env.TUNED === '1') tunePretenuring([]);
  const make = (i) => ({ a: i, b: i + 1, c: null });
  const old = () => getHeapSpaceStatistics().find((s) => s.space_name === 'old_space').space_used_size;
  let keep = [];
  for (let i = 0; i < 3e6; i++) keep.push(make(i));
  keep = null;
  const ring = new Array(1000).fill(null);
  const before = old();
  for (let i = 0; i < 3e6; i++) ring[i % 1000] = make(i);
  console.log(JSON.stringify({ oldGrowthMB: (old() - before) / 1e6, held: ring.length }));
`;

describe('heap tuning for short-lived rows', () => {
  test('a pretenuring choice given on the command line is left alone', () => {
    assert.equal(tunePretenuring(['--allocation-site-pretenuring']), false);
    assert.equal(tunePretenuring(['--no-allocation_site_pretenuring']), false);
    assert.equal(tunePretenuring(['--max-semi-space-size=64']), true);
  });

  test('objects of a site V8 would tenure stay in the young generation once tuned', () => {
    const run = (tuned: boolean) =>
      JSON.parse(
        execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', PROBE], {
          env: {
            ...process.env,
            HEAP_TS: pathToFileURL(join(import.meta.dirname, '../src/heap.ts')).href,
            TUNED: tuned ? '1' : '0',
          },
          encoding: 'utf8',
        }),
      ).oldGrowthMB as number;
    const control = run(false);
    const tuned = run(true);
    console.log(
      `old generation growth over 3M short-lived objects: ${control.toFixed(0)} MB as V8 chose, ${tuned.toFixed(0)} MB tuned`,
    );
    assert.ok(
      control >= 100,
      `V8 tenures the site by itself (${control} MB went old): the probe exercises the problem`,
    );
    assert.ok(tuned <= control / 4, `tuned, ${tuned} MB went old (against ${control})`);
  });
});

// The young generation: `npm start` and the image pass --max-semi-space-size (V8 reads it only
// when the process starts, so src/heap.ts cannot set it). The flag must be the same in both
// places, and must do on this Node what the docs say: let the young generation grow past V8's
// default while many short-lived objects are alive at once.
describe('young generation size', () => {
  const SEMI_SPACE = /--max-semi-space-size=(\d+)/;

  test('npm start and the container image run node with the same --max-semi-space-size', () => {
    const start = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).scripts.start as string;
    const cmd = readFileSync(join(ROOT, 'Dockerfile'), 'utf8')
      .split('\n')
      .filter((line) => line.startsWith('CMD '))
      .at(-1);
    const npmFlag = SEMI_SPACE.exec(start)?.[1];
    assert.ok(npmFlag, `npm start passes the flag: ${start}`);
    assert.deepEqual(JSON.parse(cmd!.slice(4)), ['node', `--max-semi-space-size=${npmFlag}`, 'bin/stowage-server.js']);
    assert.deepEqual(START_NODE_FLAGS, [`--max-semi-space-size=${npmFlag}`], 'the benches run the server with it');
  });

  test('with the flag the young generation grows past what V8 allows by default', () => {
    // 300,000 small objects alive at any time, 3 million made: the young generation grows to its cap.
    const probe =
      "const v8=require('node:v8');let keep=[];for(let i=0;i<3e6;i++){keep.push({i,s:'x'+i});if(keep.length>3e5)keep=[];}" +
      "process.stdout.write(String(v8.getHeapSpaceStatistics().find((s)=>s.space_name==='new_space').space_size))";
    const newSpace = (flags: string[]) =>
      Number(execFileSync(process.execPath, [...flags, '-e', probe], { encoding: 'utf8' }));
    const plain = newSpace([]);
    const flagged = newSpace(START_NODE_FLAGS);
    const cap = Number(SEMI_SPACE.exec(START_NODE_FLAGS.join(' '))?.[1]) * 1024 * 1024;
    console.log(
      `new space after the probe: ${(plain / 2 ** 20).toFixed(0)} MiB by default, ${(flagged / 2 ** 20).toFixed(0)} MiB with ${START_NODE_FLAGS.join(' ')}`,
    );
    // The new space's size counts both halves: V8's default stops them at 16 MiB each here.
    assert.ok(plain < cap, `by default the new space (both halves) stays under ${cap} bytes (${plain})`);
    assert.ok(flagged >= cap, `with the flag the new space (both halves) reaches ${cap} bytes or more (${flagged})`);
  });
});
