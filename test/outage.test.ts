// A dependency goes away mid-run and comes back: PostgreSQL, Redis and the S3 server, each
// behind a TCP proxy the test can cut (connections dropped, new ones refused) and restore, as a
// stopped and restarted server would look to the service. While it is gone: 503 in the
// documented error shape, with Retry-After, and nothing half-done stored. Once it is back: the
// same process serves again, without a restart.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, describe, test } from 'node:test';
import { DIALECTS, freshPostgres, type Harness, makeHarness } from './helpers/harness.ts';
import { externalService } from './helpers/services.ts';
import { freshS3Storage } from './helpers/storage.ts';

const redisGate = externalService('STOWAGE_TEST_REDIS_URL', 'Redis');
const s3Gate = externalService('STOWAGE_TEST_S3_ENDPOINT', 'an S3-compatible server (scripts/start-swift.sh)');

/** A TCP proxy to host:port that can be cut and restored on the same local port. */
async function proxy(target: URL) {
  const sockets = new Set<net.Socket>();
  let server: net.Server | null = null;
  let port = 0;
  const listen = () =>
    new Promise<void>((resolve) => {
      server = net.createServer((client) => {
        const upstream = net.connect(Number(target.port), target.hostname);
        for (const s of [client, upstream]) {
          sockets.add(s);
          s.on('close', () => sockets.delete(s));
          s.on('error', () => {});
        }
        client.pipe(upstream).pipe(client);
        client.on('close', () => upstream.destroy());
        upstream.on('close', () => client.destroy());
      });
      server.listen(port, '127.0.0.1', () => {
        port = (server!.address() as net.AddressInfo).port;
        resolve();
      });
    });
  await listen();
  return {
    url(original: URL): string {
      const u = new URL(original);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    async cut() {
      await new Promise<void>((resolve) => {
        server!.close(() => resolve());
        for (const s of sockets) s.destroy();
      });
    },
    restore: listen,
    close() {
      for (const s of sockets) s.destroy();
      server?.close();
    },
  };
}

async function eventually(what: string, fn: () => Promise<boolean>, ms = 15_000) {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (await fn().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.fail(`${what} did not recover within ${ms} ms`);
}

describe('dependencies going away and coming back', () => {
  let h: Harness | undefined;
  let p: Awaited<ReturnType<typeof proxy>> | undefined;
  let dropDb: (() => Promise<void>) | undefined;
  after(async () => {
    p?.close();
    await h?.close();
    await dropDb?.();
  });

  const form = (name: string, text = `bytes of ${name}`) => {
    const f = new FormData();
    f.append('file_name', name);
    f.append('file', new Blob([text]));
    return f;
  };
  const assertUnavailable = async (res: Response, what: string) => {
    const body = (await res.json()) as any;
    assert.equal(res.status, 503, `${what}: ${res.status} ${JSON.stringify(body)}`);
    assert.equal(body.success, false);
    assert.equal(body.errorCode, 'SERVICE_UNAVAILABLE');
    assert.ok(res.headers.get('retry-after'), 'Retry-After');
  };

  test('PostgreSQL: 503 while it is gone, served again once it is back', { skip: DIALECTS[1].skip }, async () => {
    // A real PostgreSQL database, reached through the proxy.
    const db = await freshPostgres();
    dropDb = db.drop;
    const dbUrl = new URL(db.url);
    p = await proxy(dbUrl);
    h = await makeHarness('sqlite', { config: { databaseUrl: p.url(dbUrl) } });
    const base = await h.app.listen({ host: '127.0.0.1', port: 0 });
    const auth = h.auth;
    assert.equal((await fetch(`${base}/api/v1/files`, { headers: auth })).status, 200);
    assert.equal(
      (await fetch(`${base}/api/v1/uploads`, { method: 'POST', headers: auth, body: form('before.txt') })).status,
      201,
    );

    await p.cut();
    await assertUnavailable(await fetch(`${base}/api/v1/files`, { headers: auth }), 'list files');
    await assertUnavailable(
      await fetch(`${base}/api/v1/uploads`, { method: 'POST', headers: auth, body: form('during.txt') }),
      'upload',
    );
    assert.equal((await fetch(`${base}/readyz`)).status, 503);
    assert.equal((await fetch(`${base}/healthz`)).status, 200, 'alive, only not ready');

    await p.restore();
    await eventually('list files', async () => (await fetch(`${base}/api/v1/files`, { headers: auth })).status === 200);
    assert.equal((await fetch(`${base}/readyz`)).status, 200);
    const files = (await (await fetch(`${base}/api/v1/files`, { headers: auth })).json()) as any;
    const names = JSON.stringify(files);
    assert.ok(names.includes('before.txt') && !names.includes('during.txt'), 'the refused upload left no file');
    assert.equal(
      (await fetch(`${base}/api/v1/uploads`, { method: 'POST', headers: auth, body: form('after.txt') })).status,
      201,
    );
    p.close();
    p = undefined;
  });

  test('Redis (shared rate limits): 503 while it is gone, served again once it is back', {
    skip: redisGate.skip,
  }, async () => {
    await h?.close();
    p?.close(); // a proxy left by a test that failed half way
    const redisUrl = new URL(redisGate.value!);
    p = await proxy(redisUrl);
    h = await makeHarness('sqlite', {
      config: {
        redisUrl: p.url(redisUrl),
        rateLimitApi: { max: 1000, windowMs: 60_000 },
        rateLimitUpload: { max: 1000, windowMs: 60_000 },
      },
    });
    const base = await h.app.listen({ host: '127.0.0.1', port: 0 });
    assert.equal((await fetch(`${base}/api/v1/files`, { headers: h.auth })).status, 200);
    await p.cut();
    await assertUnavailable(await fetch(`${base}/api/v1/files`, { headers: h.auth }), 'list files without Redis');
    await p.restore();
    await eventually(
      'list files',
      async () => (await fetch(`${base}/api/v1/files`, { headers: h!.auth })).status === 200,
    );
    p.close();
    p = undefined;
  });

  test('S3: 503 while it is gone, nothing half-stored, served again once it is back', {
    skip: s3Gate.skip,
  }, async () => {
    await h?.close();
    p?.close(); // a proxy left by a test that failed half way
    const storage = await freshS3Storage();
    if (storage.driver !== 's3') throw new Error('expected s3');
    const endpoint = new URL(storage.s3.endpoint!);
    p = await proxy(endpoint);
    h = await makeHarness('sqlite', {
      config: { storage: { ...storage, s3: { ...storage.s3, endpoint: p.url(endpoint).replace(/\/$/, '') } } },
    });
    const base = await h.app.listen({ host: '127.0.0.1', port: 0 });
    const kept = (await (
      await fetch(`${base}/api/v1/uploads`, { method: 'POST', headers: h.auth, body: form('kept.txt', 'kept bytes') })
    ).json()) as any;
    assert.ok(kept.file_no, JSON.stringify(kept));

    await p.cut();
    await assertUnavailable(
      await fetch(`${base}/api/v1/uploads`, { method: 'POST', headers: h.auth, body: form('lost.txt') }),
      'upload',
    );
    await assertUnavailable(await fetch(`${base}/${h.ws.workspace_id}/kept.txt`), 'delivery');
    assert.equal(
      (await h.services.db.kysely.selectFrom('files').selectAll().execute()).length,
      1,
      'no record for the refused upload',
    );

    await p.restore();
    await eventually('delivery', async () => (await fetch(`${base}/${h!.ws.workspace_id}/kept.txt`)).status === 200);
    assert.equal(await (await fetch(`${base}/${h.ws.workspace_id}/kept.txt`)).text(), 'kept bytes');
    assert.equal(
      (await fetch(`${base}/api/v1/uploads`, { method: 'POST', headers: h.auth, body: form('after.txt') })).status,
      201,
    );
    // What the refused upload left (an intent, maybe a partial object) one sweep removes.
    await h.services.multipart.sweep(0);
    assert.equal((await h.services.db.kysely.selectFrom('storage_intents').selectAll().execute()).length, 0);
  });
});
