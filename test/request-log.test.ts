// What an operator reads: one line per request with method, route pattern, status, bytes,
// duration and workspace (never a key), as JSON for collectors and as coloured one-liners on a
// terminal.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { logStream } from '../src/log-output.ts';
import { type Harness, makeHarness } from './helpers/harness.ts';
import { startServer } from './helpers/process.ts';

describe('request log lines', () => {
  let h: Harness;
  before(async () => {
    h = await makeHarness('sqlite');
  });
  after(() => h?.close());

  test('one line per request, when it ends, with the route pattern and the workspace but not the key', async () => {
    const before = h.logs.length;
    const res = await h.app.inject({ method: 'GET', url: '/api/v1/files?limit=2', headers: h.auth });
    assert.equal(res.statusCode, 200);
    const lines = h.logs
      .slice(before)
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l));
    const requestLines = lines.filter((l) => 'route' in l);
    assert.equal(requestLines.length, 1, JSON.stringify(lines));
    const [line] = requestLines;
    assert.equal(line.method, 'GET');
    assert.equal(line.route, '/api/v1/files');
    assert.equal(line.url, '/api/v1/files?limit=2');
    assert.equal(line.status, 200);
    assert.equal(line.workspace, h.ws.workspace_id);
    assert.equal(line.bytesOut, Buffer.byteLength(res.body));
    assert.ok(typeof line.durationMs === 'number' && line.durationMs >= 0);
    assert.match(line.msg, /^GET \/api\/v1\/files\?limit=2 200 [\d.]+ ms$/);
    assert.ok(!JSON.stringify(lines).includes(h.ws.private_key));
    assert.ok(!lines.some((l) => l.msg === 'incoming request'), "Fastify's own two lines are off");
  });

  test('a refused request is one line too, at level info, naming no workspace', async () => {
    const before = h.logs.length;
    await h.app.inject({ method: 'GET', url: '/api/v1/files', headers: { authorization: 'Bearer stw_sk_nope' } });
    const line = h.logs
      .slice(before)
      .map((l) => (l.startsWith('{') ? JSON.parse(l) : {}))
      .find((l) => 'route' in l);
    assert.equal(line.status, 401);
    assert.equal(line.workspace, undefined);
    assert.equal(line.level, 30);
  });
});

test('the log format: JSON unless a terminal or STOWAGE_LOG_FORMAT=pretty', async () => {
  assert.equal(logStream('auto', false), undefined);
  assert.equal(logStream('json', true), undefined);
  assert.ok(logStream('auto', true));
  const dataDir = mkdtempSync(join(tmpdir(), 'stowage-log-'));
  try {
    const server = await startServer({ STOWAGE_DATA_DIR: dataDir, STOWAGE_LOG_FORMAT: 'pretty' });
    await fetch(`${server.url}/healthz`);
    await server.stop('SIGTERM');
    const out = server.output();
    const lines = out.split('\n').filter(Boolean);
    assert.ok(!lines.some((l) => l.startsWith('{')), out);
    // Not a terminal here, so no colour codes; one line per request, time first.
    assert.ok(!out.includes('\u001b['), 'no colour codes off a terminal');
    assert.ok(
      lines.some((l) => /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO.*GET \/healthz 200 [\d.]+ ms/.test(l)),
      out,
    );
    const bad = await startServer({ STOWAGE_DATA_DIR: dataDir, STOWAGE_LOG_FORMAT: 'fancy' }).catch((e) => e);
    assert.equal(bad.code, 78);
    assert.match(bad.output, /STOWAGE_LOG_FORMAT must be auto, json or pretty/);
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});
