// Prometheus /metrics: requests by route pattern and status with latency, bytes uploaded,
// active multipart sessions, webhook queue depth and failures, rendition cache hits/misses.
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import sharp from 'sharp';
import { type Harness, makeHarness } from './helpers/harness.ts';
import { call } from './helpers/http.ts';

const value = (text: string, series: string): number => {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  const m = line ? /\s([0-9.e+-]+)$/.exec(line) : null;
  return m ? Number(m[1]) : NaN;
};

describe('metrics', () => {
  let h: Harness;
  before(async () => {
    h = await makeHarness('sqlite', { config: { outboundAllow: ['127.0.0.1'] } });
  });
  after(() => h?.close());

  test('what operators watch, in the Prometheus text format', async () => {
    const img = await sharp({ create: { width: 300, height: 200, channels: 3, background: '#123456' } })
      .png()
      .toBuffer();
    const staged = await h.services.uploads.stage(h.ws.workspace_id, Readable.from([img]));
    await h.services.uploads.finish(
      staged,
      {
        name: 'm.png',
        folder: [],
        tags: [],
        metadata: {},
        custom_id: null,
        randomPrefix: false,
        transform: null,
        webhookUrl: 'http://127.0.0.1:9/hook',
      },
      'direct',
    );
    await call(h.app, 'GET', `/${h.ws.workspace_id}/w_50/m.png`);
    await call(h.app, 'GET', `/${h.ws.workspace_id}/w_50/m.png`);
    await call(h.app, 'POST', '/api/v1/multipart/start', {
      body: { file_name: 'open.bin', size: 100, format: 'application/octet-stream' },
      headers: h.auth,
    });
    await call(h.app, 'GET', '/api/v1/sources/00000000-0000-4000-8000-000000000000', { headers: h.auth });

    const res = await h.app.inject({ method: 'GET', url: '/metrics' });
    assert.equal(res.statusCode, 200);
    assert.match(res.headers['content-type'] as string, /^text\/plain/);
    const text = res.body;
    assert.equal(value(text, 'stowage_uploaded_bytes_total{source="direct"}'), img.length);
    assert.equal(value(text, 'stowage_uploads_total{source="direct"}'), 1);
    assert.equal(value(text, 'stowage_rendition_cache_total{result="miss"}'), 1);
    assert.equal(value(text, 'stowage_rendition_cache_total{result="hit"}'), 1);
    assert.equal(value(text, 'stowage_multipart_sessions_active'), 1);
    assert.equal(value(text, 'stowage_webhook_deliveries{status="pending"}'), 1, 'queue depth');
    assert.equal(value(text, 'stowage_webhook_deliveries{status="failed"}'), 0);
    assert.equal(
      value(text, 'stowage_http_requests_total{method="GET",route="/api/v1/sources/:sourceId",status="404"}'),
      1,
      'by route pattern, not raw path',
    );
    assert.equal(
      value(text, 'stowage_http_requests_total{method="POST",route="/api/v1/multipart/start",status="201"}'),
      1,
    );
    assert.ok(
      text.includes(
        'stowage_http_request_duration_seconds_bucket{le="0.005",method="POST",route="/api/v1/multipart/start",status="201"}',
      ),
    );
    assert.ok(!text.includes(h.ws.workspace_id), 'no workspace ids or file paths in label values');
    assert.ok(text.includes('stowage_process_resident_memory_bytes'));
  });
});
