// Rate limits (docs/api.md#limits): per key, 429 with retryAfterSeconds, Retry-After and
// RateLimit-* headers; in memory on one node, shared through Redis by several.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Harness, makeHarness } from './helpers/harness.ts';
import { call } from './helpers/http.ts';
import { externalService } from './helpers/services.ts';

const redis = externalService('STOWAGE_TEST_REDIS_URL', 'Redis');

describe('rate limits in memory', () => {
  let h: Harness;
  before(async () => {
    h = await makeHarness('sqlite', {
      config: { rateLimitApi: { max: 3, windowMs: 60_000 }, rateLimitUpload: { max: 2, windowMs: 60_000 } },
    });
  });
  after(() => h?.close());

  test('the fourth request in the window is 429 in the documented shape; headers tell the budget', async () => {
    const get = () => call(h.app, 'GET', '/api/v1/sources', { headers: h.auth });
    const first = await get();
    assert.equal(first.status, 200);
    assert.equal(first.headers['ratelimit-limit'], '3');
    assert.equal(first.headers['ratelimit-remaining'], '2');
    assert.ok(Number(first.headers['ratelimit-reset']) > 0);
    await get();
    await get();
    const limited = await get();
    assert.equal(limited.status, 429);
    assert.equal(limited.body.success, false);
    assert.equal(limited.body.error, 'Too many requests');
    assert.equal(limited.body.errorCode, 'RATE_LIMITED');
    assert.equal(typeof limited.body.message, 'string');
    assert.equal(typeof limited.body.retryAfterSeconds, 'number');
    assert.ok(limited.body.retryAfterSeconds > 0 && limited.body.retryAfterSeconds <= 60);
    assert.equal(limited.headers['retry-after'], String(limited.body.retryAfterSeconds));
  });

  test('budgets are per key, and upload endpoints have their own', async () => {
    const other = await h.services.workspaces.create('Other');
    assert.equal(
      (await call(h.app, 'GET', '/api/v1/sources', { headers: { 'x-api-key': other.private_key } })).status,
      200,
      'another key is not affected',
    );
    const start = () =>
      call(h.app, 'POST', '/api/v1/multipart/start', {
        body: { file_name: 'x.bin', size: 10, format: 'application/octet-stream' },
        headers: { 'x-api-key': other.public_key },
      });
    assert.equal((await start()).status, 201);
    assert.equal((await start()).status, 201);
    const third = await start();
    assert.equal(third.status, 429, 'the upload budget is 2');
    assert.equal(third.headers['ratelimit-limit'], '2');
    assert.equal(
      (await call(h.app, 'GET', '/api/v1/sources', { headers: { 'x-api-key': other.private_key } })).status,
      200,
      'the other budget is separate',
    );
  });

  test('routes without a key are not limited here', async () => {
    for (let i = 0; i < 6; i++) assert.equal((await call(h.app, 'GET', '/healthz')).status, 200);
  });
});

describe('rate limits shared through Redis', { skip: redis.skip }, () => {
  let a: Harness;
  let b: Harness;
  before(async () => {
    const limits = { rateLimitApi: { max: 5, windowMs: 60_000 }, rateLimitUpload: null, redisUrl: redis.value };
    a = await makeHarness('sqlite', { config: limits });
    b = await makeHarness('sqlite', { config: limits });
  });
  after(async () => {
    await a?.close();
    await b?.close();
  });

  test('two nodes share one budget: the sixth request across them is 429', async () => {
    // The same key on both nodes (each harness has its own database, so copy the key over).
    const ws = a.ws;
    await b.services.db.kysely
      .insertInto('workspaces')
      .values(
        await a.services.db.kysely
          .selectFrom('workspaces')
          .selectAll()
          .where('id', '=', ws.workspace_id)
          .executeTakeFirstOrThrow(),
      )
      .execute();
    await b.services.db.kysely
      .insertInto('api_keys')
      .values(
        await a.services.db.kysely
          .selectFrom('api_keys')
          .selectAll()
          .where('workspace_id', '=', ws.workspace_id)
          .execute(),
      )
      .execute();
    const headers = { authorization: `Bearer ${ws.private_key}` };
    const statuses: number[] = [];
    for (const node of [a, b, a, b, a, b])
      statuses.push((await call(node.app, 'GET', '/api/v1/sources', { headers })).status);
    assert.deepEqual(statuses, [200, 200, 200, 200, 200, 429]);
    const limited = await call(a.app, 'GET', '/api/v1/sources', { headers });
    assert.equal(limited.status, 429);
    assert.ok(limited.body.retryAfterSeconds > 0);
  });
});
