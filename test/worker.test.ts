// `stowage worker`: processes that run background jobs and serve no API. An API node started with
// STOWAGE_JOBS=off only queues jobs; two workers on one PostgreSQL share the queue and each job
// is done once (webhook deliveries and video transcodes). Without PostgreSQL, both settings are
// refused at start with a clear message.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { freshPostgres } from './helpers/harness.ts';
import { readFirstWorkspace, runCli, type ServerProcess, startServer } from './helpers/process.ts';
import { externalService } from './helpers/services.ts';
import { clipFolder, ffmpegSkip } from './helpers/video.ts';

const pgGate = externalService('STOWAGE_TEST_DATABASE_URL', 'PostgreSQL');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('worker settings without PostgreSQL', () => {
  test('`stowage worker` on the embedded SQLite exits 78 and says why', async () => {
    const dataDir = `/tmp/stowage-worker-${randomBytes(4).toString('hex')}`;
    try {
      const r = await runCli(['worker'], { STOWAGE_DATA_DIR: dataDir });
      assert.equal(r.code, 78, r.stderr);
      assert.match(r.stderr, /a worker needs PostgreSQL \(DATABASE_URL\)/);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  test('a server with STOWAGE_JOBS=off on SQLite refuses to start (its jobs would never run)', async () => {
    const dataDir = `/tmp/stowage-worker-${randomBytes(4).toString('hex')}`;
    try {
      await assert.rejects(
        startServer({ STOWAGE_DATA_DIR: dataDir, STOWAGE_JOBS: 'off' }),
        (err: Error & { code?: number }) => {
          assert.equal(err.code, 78);
          assert.match(err.message, /STOWAGE_JOBS=off needs PostgreSQL/);
          return true;
        },
      );
      await assert.rejects(
        startServer({ STOWAGE_DATA_DIR: dataDir, STOWAGE_JOBS: 'maybe' }),
        /STOWAGE_JOBS must be on or off/,
      );
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('two workers beside an API node that runs no jobs', { skip: pgGate.skip }, () => {
  let db: { url: string; drop(): Promise<void> };
  let api: ServerProcess;
  const workers: ServerProcess[] = [];
  const metricsPorts: number[] = [];
  let ws: { private_key: string };
  const delivered: string[] = [];
  let receiver: http.Server;
  let hookUrl: string;
  let env: Record<string, string>;

  const startWorker = async (via: 'cli' | 'server') => {
    // A free port for this worker's /metrics (a worker has no API port of its own).
    const probe = http.createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const port = (probe.address() as AddressInfo).port;
    await new Promise((r) => probe.close(r));
    const w = await startServer(
      { ...env, STOWAGE_METRICS_PORT: String(port) },
      via === 'cli'
        ? { script: 'bin/stowage.js', args: ['worker'], ready: /worker started/ }
        : { args: ['worker'], ready: /worker started/ },
    );
    workers.push(w);
    metricsPorts.push(port);
    return w;
  };

  const upload = async (name: string) => {
    const form = new FormData();
    form.append('file', new Blob([randomBytes(64)]), name);
    form.append('file_name', name);
    form.append('webhook_url', hookUrl);
    const res = await fetch(`${api.url}/api/v1/uploads`, {
      method: 'POST',
      headers: { 'x-api-key': ws.private_key },
      body: form,
    });
    assert.equal(res.status, 201, await res.text());
  };

  /** How many runs of `job` a worker made, from its own /metrics. */
  const jobRuns = async (port: number, job: string) => {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith(`stowage_job_runs_total{job="${job}"} `));
    return line ? Number(line.split(' ').at(-1)) : 0;
  };
  const deliveredRuns = (port: number) => jobRuns(port, 'webhook.deliver');

  before(async () => {
    db = await freshPostgres();
    receiver = http.createServer((req, res) => {
      delivered.push(String(req.headers['webhook-id']));
      req.resume();
      req.on('end', () => res.writeHead(204).end());
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
    const dataDir = `/tmp/stowage-worker-${randomBytes(4).toString('hex')}`;
    env = {
      DATABASE_URL: db.url,
      STOWAGE_MASTER_KEY: randomBytes(32).toString('base64'),
      STOWAGE_DATA_DIR: dataDir,
      STOWAGE_OUTBOUND_ALLOW: '127.0.0.1',
      STOWAGE_WEBHOOK_POLL_MS: '50',
      STOWAGE_SWEEP_INTERVAL_MS: '0',
    };
    api = await startServer({ ...env, STOWAGE_JOBS: 'off' });
    ws = readFirstWorkspace(dataDir)!;
    assert.ok(ws, 'the API node created the first workspace');
    assert.match(api.output(), /background jobs left to workers/);
  });
  after(async () => {
    for (const w of workers) await w.stop('SIGKILL');
    await api?.stop('SIGKILL');
    await new Promise((r) => receiver?.close(r));
    await db?.drop();
    rmSync(env.STOWAGE_DATA_DIR, { recursive: true, force: true });
  });

  test('the API node queues but does not deliver; two workers deliver every webhook exactly once', async () => {
    for (let i = 0; i < 3; i++) await upload(`early-${i}.bin`);
    // Workers down: nothing may be sent (the API node runs no jobs), however long we wait.
    await sleep(1500);
    assert.deepEqual(delivered, [], 'the API node with STOWAGE_JOBS=off sent a webhook');

    // One worker through the CLI, one through the server's entry point.
    await Promise.all([startWorker('cli'), startWorker('server')]);
    for (let i = 0; i < 17; i++) await upload(`late-${i}.bin`);
    const deadline = Date.now() + 30_000;
    while (delivered.length < 20 && Date.now() < deadline) await sleep(100);
    await sleep(1000); // room for a duplicate to show up
    assert.equal(delivered.length, 20, `deliveries: ${delivered.length}`);
    assert.equal(new Set(delivered).size, 20, 'a webhook was delivered twice');

    // The workers' own counters agree that every delivery ran: none lost between them. A run
    // may come twice (a worker starting up queues again a pending delivery whose job the other
    // has just finished); the second finds its attempt made and sends nothing, as the receiver's
    // 20 distinct deliveries above show.
    const runs = await Promise.all(metricsPorts.map(deliveredRuns));
    const total = runs.reduce((a, b) => a + b, 0);
    assert.ok(total >= 20 && total <= 23, `runs per worker: ${runs.join(', ')}`);
  });

  test('video transcodes asked of the API node are made by the workers, each once, though asked twice at once', {
    skip: ffmpegSkip,
  }, async () => {
    const clips = clipFolder('stowage-worker-clips-');
    clips.ffmpeg(
      '-f',
      'lavfi',
      '-i',
      'testsrc=size=96x64:rate=10:duration=1',
      '-pix_fmt',
      'yuv420p',
      clips.at('w.mp4'),
    );
    const form = new FormData();
    form.append('file', new Blob([readFileSync(clips.at('w.mp4'))]), 'w.mp4');
    form.append('file_name', 'w.mp4');
    const up = await fetch(`${api.url}/api/v1/uploads`, {
      method: 'POST',
      headers: { 'x-api-key': ws.private_key },
      body: form,
    });
    const record = (await up.json()) as { workspace_id: string };
    assert.equal(up.status, 201, JSON.stringify(record));
    const wsId = record.workspace_id;
    const widths = [32, 48, 64, 80];
    const urls = widths.map((w) => `${api.url}/${wsId}/w_${w},f_webm/w.mp4`);
    // Every rendition asked twice at once: the job key makes one job of each pair.
    const firsts = await Promise.all([...urls, ...urls].map((u) => fetch(u).then((r) => r.status)));
    assert.ok(
      firsts.every((st) => st === 202),
      `first answers: ${firsts.join(', ')}`,
    );
    const deadline = Date.now() + 90_000;
    const done = new Set<string>();
    while (done.size < urls.length && Date.now() < deadline) {
      for (const u of urls) if (!done.has(u) && (await fetch(u, { method: 'HEAD' })).status === 200) done.add(u);
      await sleep(200);
    }
    assert.equal(done.size, urls.length, 'every rendition was made (by the workers: the API node runs no jobs)');
    const runs = await Promise.all(metricsPorts.map((port) => jobRuns(port, 'video.transcode')));
    assert.equal(
      runs.reduce((a, b) => a + b, 0),
      urls.length,
      `transcodes per worker: ${runs.join(', ')}`,
    );
  });

  test('a worker stops cleanly on SIGTERM (exit 0), and the other keeps the queue going', async () => {
    assert.equal(workers.length, 2);
    const [first, second] = workers;
    assert.equal(await first!.stop('SIGTERM'), 0, first!.output());
    const before = delivered.length;
    await upload('after-stop.bin');
    const deadline = Date.now() + 15_000;
    while (delivered.length === before && Date.now() < deadline) await sleep(100);
    assert.equal(delivered.length, before + 1);
    assert.equal(second!.child.exitCode, null, 'the second worker is still running');
  });
});
