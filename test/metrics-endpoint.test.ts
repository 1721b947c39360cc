// /metrics kept off the public side: a token, or a listener of its own.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { loadConfig } from '../src/config.ts';
import { type Harness, makeHarness } from './helpers/harness.ts';
import { startServer } from './helpers/process.ts';
import { closedPort } from './helpers/servers.ts';

const TOKEN = 'metrics-token-0123456789';

describe('STOWAGE_METRICS_TOKEN', () => {
  let h: Harness;
  before(async () => {
    h = await makeHarness('sqlite', { config: { metricsToken: TOKEN } });
  });
  after(() => h?.close());

  test('without the token, or with another one, 401; with it, the Prometheus text', async () => {
    for (const authorization of [
      undefined,
      'Bearer wrong',
      `Bearer ${TOKEN}x`,
      `Basic ${TOKEN}`,
      h.auth.authorization,
    ]) {
      const res = await h.app.inject({
        method: 'GET',
        url: '/metrics',
        headers: authorization ? { authorization } : {},
      });
      assert.equal(res.statusCode, 401, String(authorization));
      assert.doesNotMatch(res.body, /process_cpu|http_request/);
    }
    const ok = await h.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(ok.statusCode, 200);
    assert.match(ok.body, /^# HELP /m);
  });
});

test('STOWAGE_METRICS_PORT: /metrics only on its own listener, which serves nothing else', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'stowage-metrics-'));
  const metricsPort = await closedPort();
  try {
    const server = await startServer({ STOWAGE_DATA_DIR: dataDir, STOWAGE_METRICS_PORT: String(metricsPort) });
    try {
      assert.equal((await fetch(`${server.url}/metrics`)).status, 404, 'not on the service port');
      const metrics = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
      assert.equal(metrics.status, 200);
      assert.match(await metrics.text(), /^# HELP /m);
      assert.equal((await fetch(`http://127.0.0.1:${metricsPort}/healthz`)).status, 404);
      assert.equal((await fetch(`http://127.0.0.1:${metricsPort}/api/v1/files`)).status, 404);
    } finally {
      assert.equal(await server.stop('SIGTERM'), 0, 'both listeners close on SIGTERM');
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('metrics settings are checked at start', () => {
  assert.throws(
    () => loadConfig({ PORT: '3000', STOWAGE_METRICS_PORT: '3000' }),
    /STOWAGE_METRICS_PORT must differ from PORT/,
  );
  assert.throws(() => loadConfig({ STOWAGE_METRICS_TOKEN: 'short' }), /at least 16 characters/);
  assert.equal(loadConfig({ STOWAGE_METRICS_PORT: '9464' }).metricsPort, 9464);
  assert.throws(() => loadConfig({ STOWAGE_METRICS_LOOP_RESOLUTION_MS: '0' }), /from 1 to 1000 \(got "0"\)/);
  assert.equal(loadConfig({}).metricsLoopResolutionMs, 10);
  assert.equal(loadConfig({ STOWAGE_METRICS_LOOP_RESOLUTION_MS: '1' }).metricsLoopResolutionMs, 1);
});

/** The event-loop delay gauges of one scrape, in ms (each scrape starts a new window). */
async function loopWindow(h: Harness): Promise<{ min: number; mean: number; max: number }> {
  const res = await h.app.inject({ method: 'GET', url: '/metrics' });
  const read = (name: string): number => {
    const line = res.body.split('\n').find((l) => l.startsWith(`stowage_nodejs_eventloop_lag_${name}_seconds `));
    return Number(line?.split(' ')[1]) * 1000;
  };
  return { min: read('min'), mean: read('mean'), max: read('max') };
}

test('STOWAGE_METRICS_LOOP_RESOLUTION_MS: the loop is sampled that often, so a stall reads close to its length', async () => {
  for (const resolution of [10, 1]) {
    const h = await makeHarness('sqlite', { config: { metricsLoopResolutionMs: resolution } });
    try {
      await loopWindow(h);
      await new Promise((r) => setTimeout(r, 300));
      const idle = await loopWindow(h);
      // Samples come one resolution apart, later when the loop is busy: at 10 ms none averages
      // under it, at 1 ms the shortest gaps are near 1 ms.
      if (resolution === 10) assert.ok(idle.mean >= 9, `idle mean ${idle.mean} ms at 10 ms`);
      else assert.ok(idle.min < 5, `idle min ${idle.min} ms at 1 ms`);
      await new Promise((r) => setTimeout(r, 50));
      const until = performance.now() + 40;
      while (performance.now() < until); // a 40 ms stall of the loop
      await new Promise((r) => setTimeout(r, 50));
      const stalled = await loopWindow(h);
      assert.ok(stalled.max >= 40, `a 40 ms stall read ${stalled.max} ms`);
    } finally {
      await h.close();
    }
  }
});
