// DNS rebinding against every feature that reaches out: remote upload, webhook delivery and
// source origins. Each host name resolves to a public address the first time it is asked and
// to loopback (where a server is listening) every time after, as a rebinding attacker's DNS
// would. Whatever the service resolves, the loopback server must never see a request.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { ResolvedAddress } from '../src/outbound/guard.ts';
import { type Harness, makeHarness } from './helpers/harness.ts';
import { call } from './helpers/http.ts';
import { localServer } from './helpers/servers.ts';

describe('DNS rebinding: remote upload, webhooks and origins', () => {
  let h: Harness;
  let internal: Awaited<ReturnType<typeof localServer>>;
  const hits: string[] = [];
  const asked = new Map<string, number>();
  const resolver = async (host: string): Promise<ResolvedAddress[]> => {
    const n = (asked.get(host) ?? 0) + 1;
    asked.set(host, n);
    if (!host.endsWith('.rebind.test')) throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
    return [{ address: n === 1 ? '93.184.216.34' : '127.0.0.1', family: 4 }];
  };

  before(async () => {
    internal = await localServer((req, res) => {
      hits.push(`${req.method} ${req.url}`);
      res.writeHead(200, { 'content-type': 'image/png' }).end('internal secret');
    });
    h = await makeHarness('sqlite', {
      config: { outboundTimeoutMs: 1500, remoteTimeoutMs: 1500, webhookTimeoutMs: 1500 },
      services: { resolver },
    });
  });
  after(async () => {
    await h?.close();
    await internal?.close();
  });

  test('remote upload: refused, nothing fetched from loopback, nothing stored', async () => {
    const res = await call(h.app, 'POST', '/api/v1/uploads/remote', {
      headers: h.auth,
      body: { remote_url: `http://files.rebind.test:${internal.port}/secret.png` },
    });
    assert.ok(res.status === 400 || res.status === 502, `${res.status} ${res.raw}`);
    assert.equal(res.body.success, false);
    assert.ok((asked.get('files.rebind.test') ?? 0) >= 2, 'the connection asked again and got loopback');
    assert.deepEqual(hits, []);
    assert.equal((await h.services.db.kysely.selectFrom('files').selectAll().execute()).length, 0);
  });

  test('webhook: accepted at upload (public then), never delivered to loopback', async () => {
    const form = `--b\r\nContent-Disposition: form-data; name="file_name"\r\n\r\nw.txt\r\n--b\r\nContent-Disposition: form-data; name="webhook_url"\r\n\r\nhttp://hook.rebind.test:${internal.port}/hook\r\n--b\r\nContent-Disposition: form-data; name="file"; filename="w.txt"\r\n\r\nhello\r\n--b--\r\n`;
    const up = await call(h.app, 'POST', '/api/v1/uploads', {
      headers: { ...h.auth, 'content-type': 'multipart/form-data; boundary=b' },
      rawBody: form,
    });
    assert.equal(up.status, 201, up.raw);
    await h.services.webhooks.runOnce();
    assert.deepEqual(hits, [], 'the delivery did not reach loopback');
    assert.ok((asked.get('hook.rebind.test') ?? 0) >= 2, 'the delivery asked again and got loopback');
    const rows = await h.services.db.kysely.selectFrom('webhook_deliveries').selectAll().execute();
    assert.equal(rows.length, 1);
    assert.notEqual(rows[0].status, 'delivered');
  });

  test('origin: an image_source whose host rebinds answers 502, loopback untouched', async () => {
    const created = await call(h.app, 'POST', '/api/v1/sources', {
      headers: h.auth,
      body: {
        name: 'rb',
        type: 'image_source',
        configuration: { base_url: `http://img.rebind.test:${internal.port}/img` },
      },
    });
    assert.equal(created.status, 201, created.raw);
    for (let i = 0; i < 3; i++) {
      const res = await h.app.inject({ method: 'GET', url: `/${h.ws.workspace_id}-rb/photo${i}.png` });
      assert.equal(res.statusCode, 502, res.body);
    }
    assert.ok((asked.get('img.rebind.test') ?? 0) >= 2, 'the fetches asked again and got loopback');
    assert.deepEqual(hits, []);
  });
});

// The same attack with the second answer spelled in IPv6 (issue 15, item 11): an IPv4-compatible,
// NAT64, 6to4 or Teredo address carrying 127.0.0.1, or a hex IPv4-mapped one. Each must be
// refused by the connect-time lookup as not public, not merely fail to connect.
describe('DNS rebinding to IPv6 spellings of loopback', () => {
  let h: Harness;
  let internal: Awaited<ReturnType<typeof localServer>>;
  const hits: string[] = [];
  const asked = new Map<string, number>();
  const SECOND: Record<string, string> = {
    compat: '::7f00:1',
    dotted: '::127.0.0.1',
    mapped: '::ffff:7f00:1',
    nat64: '64:ff9b::7f00:1',
    sixtofour: '2002:7f00:1::1',
    teredo: '2001:0:4136:e378:8000:63bf:80ff:fffe',
  };
  const resolver = async (host: string): Promise<ResolvedAddress[]> => {
    const n = (asked.get(host) ?? 0) + 1;
    asked.set(host, n);
    const second = SECOND[host.split('.')[0]];
    if (!host.endsWith('.rebind6.test') || !second) throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
    return n === 1 ? [{ address: '93.184.216.34', family: 4 }] : [{ address: second, family: 6 }];
  };

  before(async () => {
    internal = await localServer((req, res) => {
      hits.push(`${req.method} ${req.url}`);
      res.writeHead(200, { 'content-type': 'image/png' }).end('internal secret');
    });
    h = await makeHarness('sqlite', {
      config: { outboundTimeoutMs: 1500, remoteTimeoutMs: 1500, webhookTimeoutMs: 1500 },
      services: { resolver },
    });
  });
  after(async () => {
    await h?.close();
    await internal?.close();
  });

  for (const kind of Object.keys(SECOND)) {
    test(`remote upload rebinding to ${SECOND[kind]}: refused as not public, nothing fetched`, async () => {
      const host = `${kind}.rebind6.test`;
      const res = await call(h.app, 'POST', '/api/v1/uploads/remote', {
        headers: h.auth,
        body: { remote_url: `http://${host}:${internal.port}/secret.png` },
      });
      assert.equal(res.status, 400, `${res.status} ${res.raw}`);
      assert.equal(res.body.errorCode, 'URL_REFUSED');
      assert.ok((asked.get(host) ?? 0) >= 2, 'the connection asked again');
      assert.deepEqual(hits, []);
    });
  }

  test('webhook rebinding to an IPv4-compatible loopback: the delivery is refused, not attempted', async () => {
    const form = `--b\r\nContent-Disposition: form-data; name="file_name"\r\n\r\nw.txt\r\n--b\r\nContent-Disposition: form-data; name="webhook_url"\r\n\r\nhttp://compat.rebind6.test:${internal.port}/hook\r\n--b\r\nContent-Disposition: form-data; name="file"; filename="w.txt"\r\n\r\nhello\r\n--b--\r\n`;
    asked.delete('compat.rebind6.test');
    const up = await call(h.app, 'POST', '/api/v1/uploads', {
      headers: { ...h.auth, 'content-type': 'multipart/form-data; boundary=b' },
      rawBody: form,
    });
    assert.equal(up.status, 201, up.raw);
    await h.services.webhooks.runOnce();
    assert.deepEqual(hits, []);
    const rows = await h.services.db.kysely.selectFrom('webhook_deliveries').selectAll().execute();
    assert.equal(rows.length, 1);
    assert.notEqual(rows[0].status, 'delivered');
    assert.match(String(rows[0].last_error), /address refused/);
  });

  test('origin rebinding to a NAT64 loopback: 502 saying the address is refused', async () => {
    const created = await call(h.app, 'POST', '/api/v1/sources', {
      headers: h.auth,
      body: {
        name: 'rb6',
        type: 'image_source',
        configuration: { base_url: `http://nat64.rebind6.test:${internal.port}/img` },
      },
    });
    assert.equal(created.status, 201, created.raw);
    asked.delete('nat64.rebind6.test');
    const res = await h.app.inject({ method: 'GET', url: `/${h.ws.workspace_id}-rb6/photo.png` });
    assert.equal(res.statusCode, 502, res.body);
    assert.match(res.body, /address is refused/);
    assert.deepEqual(hits, []);
  });
});
