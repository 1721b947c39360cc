// CORS and per-workspace allowed origins, as a browser and as a page on a website the workspace
// does not trust would see them. (test/browser-uploads.test.ts does the same in Chromium.)
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { EXPOSED_HEADERS, PREFLIGHT_MAX_AGE_S } from '../src/http/cors.ts';
import { originAllowed, parseOriginPattern } from '../src/services/origins.ts';
import { DIALECTS, type Harness, makeHarness } from './helpers/harness.ts';
import { call } from './helpers/http.ts';

const PAGE = 'https://shop.example.com';

test('origin patterns: written one way, matched exactly; a wildcard covers subdomains only', () => {
  assert.equal(parseOriginPattern('HTTPS://Shop.Example.COM/', 'o'), 'https://shop.example.com');
  assert.equal(parseOriginPattern('https://shop.example.com:443', 'o'), 'https://shop.example.com');
  assert.equal(parseOriginPattern('http://localhost:5173', 'o'), 'http://localhost:5173');
  assert.equal(parseOriginPattern('https://*.Example.com', 'o'), 'https://*.example.com');
  for (const bad of [
    'example.com',
    'ftp://example.com',
    'https://example.com/path',
    'https://example.com?q',
    'https://*',
    'https://*.com',
    'https://a.*.example.com',
    'https://user:pw@example.com',
    'javascript:alert(1)',
    '*',
    '',
    'https://exa mple.com',
    'null',
  ]) {
    assert.throws(() => parseOriginPattern(bad, 'allowed_origins'), /allowed_origins/, bad);
  }
  const list = ['https://shop.example.com', 'https://*.example.org', 'http://localhost:5173'];
  for (const ok of [
    'https://shop.example.com',
    'https://SHOP.example.com:443',
    'https://a.example.org',
    'https://a.b.example.org',
    'http://localhost:5173',
  ])
    assert.ok(originAllowed(list, ok), ok);
  for (const no of [
    'http://shop.example.com',
    'https://shop.example.com:8443',
    'https://example.org',
    'https://evilexample.org',
    'https://example.org.evil.com',
    'https://shop.example.com.evil.com',
    'http://localhost:5174',
    'null',
    '',
    'not a url',
    'file:///etc/passwd',
  ]) {
    assert.ok(!originAllowed(list, no), no);
  }
});

for (const dialect of DIALECTS) {
  describe(`CORS and allowed origins on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    let token: string;
    let partUrl: string;

    before(async () => {
      h = await makeHarness(dialect.name, { config: { publicUrl: 'https://media.example.net' } });
      const minted = await call(h.app, 'POST', '/api/v1/generate-token', {
        headers: h.auth,
        body: { file_name: 't.txt' },
      });
      token = minted.body.token;
      const started = await call(h.app, 'POST', '/api/v1/multipart/start', {
        headers: { 'x-api-key': h.ws.public_key },
        body: { file_name: 'p.bin', size: 10, format: 'application/octet-stream' },
      });
      partUrl = new URL(started.body.parts[0]).pathname + new URL(started.body.parts[0]).search;
    });
    after(() => h?.close());

    const preflight = (url: string, method: string, headers = 'x-api-key,content-type', origin = PAGE) =>
      call(h.app, 'OPTIONS', url, {
        headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': headers },
      });
    const settings = (body: unknown) => call(h.app, 'PATCH', '/api/v1/workspace', { headers: h.auth, body });

    test('every endpoint a page calls answers its preflight: any origin, the methods, the asked headers, cached two hours', async () => {
      const endpoints: [string, string][] = [
        ['/api/v1/uploads', 'POST'],
        ['/api/v1/uploads/remote', 'POST'],
        ['/api/v1/multipart/start', 'POST'],
        ['/api/v1/multipart/complete', 'POST'],
        ['/api/v1/multipart/abcdefghijklmnopqrstuvwx', 'GET'],
        ['/api/v1/multipart/abcdefghijklmnopqrstuvwx', 'DELETE'],
        [partUrl, 'PUT'],
        [`/api/v1/uploads/${token}`, 'POST'],
        ['/api/v1/generate-token', 'POST'],
        ['/api/v1/files', 'GET'],
      ];
      for (const [url, method] of endpoints) {
        const res = await preflight(url, method, 'x-api-key,content-type,x-file-name');
        assert.equal(res.status, 204, `${method} ${url}: ${res.raw}`);
        assert.equal(res.headers['access-control-allow-origin'], '*', url);
        assert.ok(
          String(res.headers['access-control-allow-methods']).split(/,\s*/).includes(method),
          `${url}: ${res.headers['access-control-allow-methods']}`,
        );
        assert.equal(
          String(res.headers['access-control-allow-headers']).replace(/\s/g, ''),
          'x-api-key,content-type,x-file-name',
        );
        assert.equal(res.headers['access-control-max-age'], String(PREFLIGHT_MAX_AGE_S));
        assert.equal(res.headers['access-control-allow-credentials'], undefined, 'no credentials mode');
      }
    });

    test('answers, refusals included, carry Access-Control-Allow-Origin and expose what clients read', async () => {
      const denied = await call(h.app, 'POST', '/api/v1/multipart/start', {
        headers: { origin: PAGE, 'x-api-key': 'stw_pk_nope' },
        body: {},
      });
      assert.equal(denied.status, 401);
      assert.equal(denied.headers['access-control-allow-origin'], '*');
      const ok = await call(h.app, 'POST', '/api/v1/multipart/start', {
        headers: { origin: PAGE, 'x-api-key': h.ws.public_key },
        body: { file_name: 'q.bin', size: 5, format: 'application/octet-stream' },
      });
      assert.equal(ok.status, 201);
      assert.equal(ok.headers['access-control-allow-origin'], '*');
      const exposed = String(ok.headers['access-control-expose-headers']).split(/,\s*/);
      for (const hname of [
        'etag',
        'location',
        'retry-after',
        'ratelimit-limit',
        'ratelimit-remaining',
        'ratelimit-reset',
        'x-request-id',
      ])
        assert.ok(exposed.includes(hname), hname);
      assert.deepEqual(exposed, EXPOSED_HEADERS);
      assert.ok(ok.headers['x-request-id'], 'the request id is sent');
      // A local part URL: the page reads its ETag.
      const url = new URL(ok.body.parts[0]);
      const put = await h.app.inject({
        method: 'PUT',
        url: url.pathname + url.search,
        headers: { origin: PAGE, 'content-type': 'application/octet-stream' },
        payload: Buffer.from('12345'),
      });
      assert.equal(put.statusCode, 200, put.body);
      assert.equal(put.headers['access-control-allow-origin'], '*');
      assert.ok(put.headers.etag);
      assert.ok(String(put.headers['access-control-expose-headers']).split(/,\s*/).includes('etag'));
    });

    test('the dashboard, docs and metrics are not cross-origin resources; the SDK build is', async () => {
      for (const url of ['/dashboard/', '/dashboard/app.js', '/docs', '/metrics']) {
        const res = await call(h.app, 'GET', url, { headers: { origin: PAGE } });
        assert.equal(res.headers['access-control-allow-origin'], undefined, url);
        const pre = await preflight(url, 'GET');
        assert.equal(pre.headers['access-control-allow-origin'], undefined, url);
        assert.notEqual(pre.status, 204, url);
      }
      const sdk = await call(h.app, 'GET', '/dashboard/sdk.js', { headers: { origin: PAGE } });
      assert.equal(sdk.status, 200);
      assert.equal(sdk.headers['access-control-allow-origin'], '*');
    });

    test('wrong methods are still 405 and unknown routes 404 (the preflight route does not make every path known)', async () => {
      assert.equal((await call(h.app, 'GET', '/api/v1/uploads', { headers: h.auth })).status, 405);
      assert.equal((await call(h.app, 'GET', '/api/v1/nothing-here', { headers: h.auth })).status, 404);
      assert.equal((await call(h.app, 'DELETE', '/api/v1/generate-token', { headers: h.auth })).status, 405);
    });

    test('settings: a private key reads and sets origins, written canonically; bad lists change nothing; a public key may not', async () => {
      const got = await call(h.app, 'GET', '/api/v1/workspace', { headers: h.auth });
      assert.equal(got.status, 200);
      assert.deepEqual(got.body.data.allowed_origins, []);
      assert.deepEqual(got.body.data.webhook_origins, []);
      assert.equal(got.body.data.workspace_id, h.ws.workspace_id);
      for (const bad of [
        { allowed_origins: ['example.com'] },
        { allowed_origins: 'https://a.com' },
        { allowed_origins: [PAGE, 'https://*'] },
        { webhook_origins: ['ftp://x.com'] },
        { other: 1 },
        { allowed_origins: Array.from({ length: 101 }, (_, i) => `https://a${i}.com`) },
      ]) {
        const res = await settings(bad);
        assert.equal(res.status, 400, JSON.stringify(bad));
        assert.equal(res.body.success, false);
      }
      assert.deepEqual(
        (await call(h.app, 'GET', '/api/v1/workspace', { headers: h.auth })).body.data.allowed_origins,
        [],
      );
      const set = await settings({
        allowed_origins: ['HTTPS://Shop.Example.com/', 'https://*.example.org', 'https://shop.example.com'],
      });
      assert.equal(set.status, 200, set.raw);
      assert.deepEqual(set.body.data.allowed_origins, ['https://shop.example.com', 'https://*.example.org']);
      assert.equal(
        (await call(h.app, 'GET', '/api/v1/workspace', { headers: { 'x-api-key': h.ws.public_key } })).status,
        403,
      );
      assert.equal(
        (
          await call(h.app, 'PATCH', '/api/v1/workspace', {
            headers: { 'x-api-key': h.ws.public_key },
            body: { allowed_origins: null },
          })
        ).status,
        403,
      );
      assert.deepEqual((await settings({ allowed_origins: null })).body.data.allowed_origins, []);
    });

    test('allowed_origins: a page elsewhere is refused 403 ORIGIN_NOT_ALLOWED (readable), listed pages, non-browsers and private keys are not', async () => {
      await settings({ allowed_origins: [PAGE, 'https://*.example.org'] });
      try {
        const start = (origin: string | undefined, key = h.ws.public_key) =>
          call(h.app, 'POST', '/api/v1/multipart/start', {
            headers: { ...(origin ? { origin } : {}), 'x-api-key': key },
            body: { file_name: 'o.bin', size: 5, format: 'application/octet-stream' },
          });
        for (const evil of [
          'https://evil.example',
          'http://shop.example.com',
          'https://shop.example.com:8443',
          'https://example.org',
          'null',
        ]) {
          const res = await start(evil);
          assert.equal(res.status, 403, evil);
          assert.equal(res.body.errorCode, 'ORIGIN_NOT_ALLOWED');
          assert.equal(res.headers['access-control-allow-origin'], '*', 'the page can read why');
        }
        const sessions = async () =>
          (await h.services.db.kysely.selectFrom('multipart_sessions').select('id').execute()).length;
        const n = await sessions();
        await start('https://evil.example');
        assert.equal(await sessions(), n, 'a refusal creates nothing');
        for (const good of [
          PAGE,
          'https://cdn.example.org',
          'https://a.b.example.org',
          undefined,
          'https://media.example.net',
        ])
          assert.equal((await start(good)).status, 201, String(good));
        assert.equal(
          (await start('https://evil.example', h.ws.private_key)).status,
          201,
          'a private key is not limited by origin',
        );
        // Every public-key upload endpoint checks it.
        const direct = await call(h.app, 'POST', '/api/v1/uploads', {
          headers: {
            origin: 'https://evil.example',
            'x-api-key': h.ws.public_key,
            'content-type': 'multipart/form-data; boundary=x',
          },
          rawBody: '--x--',
        });
        assert.equal(direct.status, 403);
        const remote = await call(h.app, 'POST', '/api/v1/uploads/remote', {
          headers: { origin: 'https://evil.example', 'x-api-key': h.ws.public_key },
          body: { remote_url: 'https://example.com/a.png' },
        });
        assert.equal(remote.status, 403);
        const complete = await call(h.app, 'POST', '/api/v1/multipart/complete', {
          headers: { origin: 'https://evil.example', 'x-api-key': h.ws.public_key },
          body: { session_id: 'abcdefghijklmnopqrstuvwx' },
        });
        assert.equal(complete.status, 403);

        // Tokens: the token names its workspace, so even the preflight is refused.
        const t = (
          await call(h.app, 'POST', '/api/v1/generate-token', { headers: h.auth, body: { file_name: 'o.txt' } })
        ).body.token;
        const pre = await preflight(`/api/v1/uploads/${t}`, 'POST', 'content-type,x-file-name', 'https://evil.example');
        assert.equal(pre.headers['access-control-allow-origin'], undefined);
        assert.notEqual(pre.status, 204);
        assert.equal((await preflight(`/api/v1/uploads/${t}`, 'POST', 'content-type', PAGE)).status, 204);
        const up = await call(h.app, 'POST', `/api/v1/uploads/${t}`, {
          headers: { origin: 'https://evil.example', 'content-type': 'text/plain' },
          rawBody: 'hello',
        });
        assert.equal(up.status, 403);
        assert.equal(up.body.errorCode, 'ORIGIN_NOT_ALLOWED');
        const row = await h.services.db.kysely
          .selectFrom('upload_tokens')
          .select('state')
          .where('id', '=', t.slice(7, 29))
          .executeTakeFirstOrThrow();
        assert.equal(row.state, 'unused', 'a refused page does not spend the token');
        assert.equal(
          (
            await call(h.app, 'POST', `/api/v1/uploads/${t}`, {
              headers: { origin: PAGE, 'content-type': 'text/plain' },
              rawBody: 'hello',
            })
          ).status,
          201,
        );
      } finally {
        await settings({ allowed_origins: null });
      }
    });
  });
}
