// image_source as the hosted service documents it (integrations/web-server.mdx and shopify.mdx of
// the hosted docs): the delivery URL's query reaches the web origin (Shopify's `?v=…&width=…`),
// `canonical_header` names the request header whose host is passed to the origin (default
// `x-forwarded-host`), and `forward_header` may name the headers to pass on. The booleans
// Stowage documented before keep their meaning. Everything is checked at a real origin server
// on 127.0.0.1: what reaches it (path, query, headers) and what the client gets.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import sharp from 'sharp';
import type { ResolvedAddress } from '../src/outbound/guard.ts';
import { type Harness, makeHarness } from './helpers/harness.ts';
import { call } from './helpers/http.ts';
import { localServer } from './helpers/servers.ts';

const resolver = async (host: string): Promise<ResolvedAddress[]> => {
  if (host === 'origin.test') return [{ address: '127.0.0.1', family: 4 }];
  throw Object.assign(new Error('nx'), { code: 'ENOTFOUND' });
};

interface Hit {
  url: string;
  headers: http.IncomingHttpHeaders;
}

const INVALID = { error: 'Validation failed', message: 'Configuration is invalid for the specified type' };

/** Header names no configuration may name: Stowage's credentials, cookies, host, hop-by-hop, what Stowage answers itself. */
const REFUSED_NAMES = [
  'authorization',
  'Authorization',
  'proxy-authorization',
  'Proxy-Anything',
  'x-api-key',
  'X-API-KEY',
  'cookie',
  'Cookie2',
  'set-cookie',
  'host',
  'Host',
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'content-length',
  'expect',
  'range',
  'if-range',
  'if-none-match',
  'if-modified-since',
  'accept-encoding',
];
/** Not RFC 7230 tokens. */
const NOT_TOKENS = [
  '',
  ' ',
  'bad header',
  'x-a:1',
  'x-a\r\nx-evil: 1',
  'x\u0000y',
  'x-é',
  'x-a,x-b',
  '(comment)',
  'a/b',
  'x'.repeat(101),
];

describe('image_source as the hosted docs describe it', () => {
  let h: Harness;
  let base: string;
  let origin: Awaited<ReturnType<typeof localServer>>;
  let hostPort: string;
  const hits: Hit[] = [];
  const hitsAt = (prefix: string) => hits.filter((x) => x.url.startsWith(prefix));

  const get = async (path: string, headers: Record<string, string> = {}) => {
    const res = await fetch(`${base}${path}`, { headers });
    return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) };
  };
  /** A request sent byte for byte as written (fetch would encode the query itself). */
  const rawGet = (path: string) =>
    new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
      const u = new URL(base);
      const req = http.request({ host: u.hostname, port: u.port, path, method: 'GET' }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
      });
      req.on('error', reject);
      req.end();
    });
  const create = (name: string, configuration: Record<string, unknown>) =>
    call(h.app, 'POST', '/api/v1/sources', { body: { name, type: 'image_source', configuration }, headers: h.auth });
  const source = async (name: string, configuration: Record<string, unknown>) => {
    const res = await create(name, configuration);
    assert.equal(res.status, 201, res.raw);
    return res.body.data;
  };
  const at = (name: string, path: string) => `/${h.ws.workspace_id}-${name}/${path}`;
  /** The source with a named canonical header and a forward list, made by the first test that needs it. */
  let namedMade: Promise<unknown> | undefined;
  const named = (path: string) => {
    namedMade ??= source('named', {
      base_url: `http://${hostPort}/named`,
      canonical_header: 'X-Original-Host',
      forward_header: ['X-Shop-Token', 'Accept-Language'],
    });
    return namedMade.then(() => at('named', path));
  };

  before(async () => {
    // Shopify-like: `width` sizes the image, `v` picks its colour, so answers to different
    // queries differ and a shared cache entry would show.
    origin = await localServer(async (req, res) => {
      hits.push({ url: req.url!, headers: req.headers });
      const url = new URL(req.url!, 'http://origin.test');
      if (!url.pathname.endsWith('.jpg')) return void res.writeHead(404).end();
      const width = Number(url.searchParams.get('width') ?? 400);
      const colour = url.searchParams.get('v') === '2' ? '#2050c0' : '#c05020';
      const body = await sharp({
        create: { width, height: Math.round((width * 3) / 4), channels: 3, background: colour },
      })
        .jpeg()
        .toBuffer();
      res.writeHead(200, { 'content-type': 'image/jpeg' }).end(body);
    });
    hostPort = `origin.test:${origin.port}`;
    h = await makeHarness('sqlite', {
      config: { outboundAllow: ['origin.test', '127.0.0.1'] },
      services: { resolver },
    });
    base = await h.app.listen({ host: '127.0.0.1', port: 0 });
    await source('shop', { base_url: `http://${hostPort}/store` });
    await source('linked', { base_url: `http://${hostPort}/linked`, canonical_header: true, forward_header: true });
    await source('off', { base_url: `http://${hostPort}/off`, canonical_header: false, forward_header: false });
  });
  after(async () => {
    await h?.close();
    await origin?.close();
  });

  describe('the query string', () => {
    test('reaches the origin as sent (Shopify: ?v=…&width=…), for originals and renditions', async () => {
      const res = await get(at('shop', 'cdn/shop/files/product.jpg?v=1776855235&width=360'));
      assert.equal(res.status, 200, res.body.toString());
      assert.equal(res.headers.get('content-type'), 'image/jpeg');
      assert.equal((await sharp(res.body).metadata()).width, 360, 'the origin sized the image by the query');
      assert.equal(hits.at(-1)!.url, '/store/cdn/shop/files/product.jpg?v=1776855235&width=360');

      const small = await get(at('shop', 'w_100/cdn/shop/files/product.jpg?v=123&width=360'));
      assert.equal(small.status, 200);
      assert.equal((await sharp(small.body).metadata()).width, 100);
      assert.equal(
        hits.at(-1)!.url,
        '/store/cdn/shop/files/product.jpg?v=123&width=360',
        "the transform is Stowage's, the query the origin's",
      );
    });

    test('is part of the rendition cache key: two query strings, two origin fetches; the same one, one', async () => {
      const path = 'w_60,f_png/cdn/shop/files/keyed.jpg';
      const before = hitsAt('/store/cdn/shop/files/keyed.jpg').length;
      const v1 = await get(at('shop', `${path}?v=1`));
      const v2 = await get(at('shop', `${path}?v=2`));
      const none = await get(at('shop', path));
      assert.deepEqual([v1.status, v2.status, none.status], [200, 200, 200]);
      assert.equal(hitsAt('/store/cdn/shop/files/keyed.jpg').length, before + 3, 'each query string fetched once');
      assert.notDeepEqual(v1.body, v2.body, '?v=2 is not answered from the ?v=1 rendition');
      const [c1, c2] = await Promise.all(
        [v1, v2].map(async (r) => (await sharp(r.body).stats()).channels.map((c) => Math.round(c.mean))),
      );
      assert.ok(c1[0] > c1[2] && c2[2] > c2[0], 'each rendition is of its own origin answer');
      assert.notEqual(v1.headers.get('etag'), v2.headers.get('etag'));

      const again = await get(at('shop', `${path}?v=1`));
      assert.deepEqual(again.body, v1.body);
      assert.equal(await get(at('shop', `${path}?v=2`)).then((r) => r.status), 200);
      assert.equal(
        hitsAt('/store/cdn/shop/files/keyed.jpg').length,
        before + 3,
        'the same query strings were served from the cache',
      );
    });

    test('characters a URL query may not hold are percent-encoded, the rest passes untouched', async () => {
      const res = await rawGet(at('linked', 'odd.jpg?a="<b>"|^`{}&c=%20d&e=%zz&f=x/y?z'));
      assert.equal(res.status, 200, res.body.toString());
      assert.equal(hits.at(-1)!.url, '/linked/odd.jpg?a=%22%3Cb%3E%22%7C%5E%60%7B%7D&c=%20d&e=%25zz&f=x/y?z');
      // The canonical link carries the same text: nothing can close its <…>.
      assert.equal(
        res.headers.link,
        `<http://${hostPort}/linked/odd.jpg?a=%22%3Cb%3E%22%7C%5E%60%7B%7D&c=%20d&e=%25zz&f=x/y?z>; rel="canonical"`,
      );
    });

    test("a source URL has no Stowage parameters: expires and signature are the origin's, never checked or dropped", async () => {
      const res = await get(at('shop', 'signed.jpg?expires=1&signature=abc&width=80'));
      assert.equal(res.status, 200, 'no signature check on a source URL');
      assert.equal(hits.at(-1)!.url, '/store/signed.jpg?expires=1&signature=abc&width=80');
      // A bare "?" is no query.
      await get(at('shop', 'bare.jpg?'));
      assert.equal(hits.at(-1)!.url, '/store/bare.jpg');
    });
  });

  describe('canonical_header', () => {
    test("default (x-forwarded-host): the client's forwarded host is passed to the origin, lower-cased, the first of a list", async () => {
      const res = await get(at('shop', 'host.jpg'), { 'x-forwarded-host': 'Shop.Example.COM:8443, proxy.internal' });
      assert.equal(res.status, 200);
      assert.equal(hits.at(-1)!.headers['x-forwarded-host'], 'shop.example.com:8443');
      assert.equal(res.headers.get('link'), null, 'a header name is not the Link header');
      assert.match(res.headers.get('vary') ?? '', /x-forwarded-host/);
      await get(at('shop', 'host.jpg'));
      assert.equal(hits.at(-1)!.headers['x-forwarded-host'], undefined, 'nothing sent when the client sent nothing');
      for (const bad of ['evil.example.com/path', 'a b', 'user@host', '"quoted"', '[zz::1', 'x'.repeat(300)]) {
        await get(at('shop', 'host.jpg'), { 'x-forwarded-host': bad });
        assert.equal(
          hits.at(-1)!.headers['x-forwarded-host'],
          undefined,
          `a value that is not a host is not passed on: ${bad.slice(0, 30)}`,
        );
      }
      await get(at('shop', 'host.jpg'), { 'x-forwarded-host': '[2001:db8::1]:443' });
      assert.equal(hits.at(-1)!.headers['x-forwarded-host'], '[2001:db8::1]:443');
    });

    test('a named header: that header (not x-forwarded-host) reaches the origin; the host is part of the rendition cache key', async () => {
      const res = await get(await named('n.jpg'), {
        'x-original-host': 'cdn.example.com',
        'x-forwarded-host': 'other.example.com',
      });
      assert.equal(res.status, 200);
      const hit = hits.at(-1)!;
      assert.equal(hit.url, '/named/n.jpg');
      assert.equal(hit.headers['x-original-host'], 'cdn.example.com');
      assert.equal(hit.headers['x-forwarded-host'], undefined, 'only the configured header');

      const before = hitsAt('/named/k.jpg').length;
      for (const host of ['a.example.com', 'b.example.com', 'a.example.com', 'A.EXAMPLE.COM']) {
        assert.equal((await get(await named('w_40/k.jpg'), { 'x-original-host': host })).status, 200);
      }
      assert.equal(hitsAt('/named/k.jpg').length, before + 2, 'one fetch per canonical host');
    });

    test('true keeps its meaning (Link: <origin URL>; rel="canonical", nothing sent); false is off', async () => {
      const linked = await get(at('linked', 'l.jpg?width=50'), { 'x-forwarded-host': 'shop.example.com' });
      assert.equal(linked.headers.get('link'), `<http://${hostPort}/linked/l.jpg?width=50>; rel="canonical"`);
      assert.equal(hits.at(-1)!.headers['x-forwarded-host'], undefined);
      const off = await get(at('off', 'o.jpg'), { 'x-forwarded-host': 'shop.example.com' });
      assert.equal(off.status, 200);
      assert.equal(off.headers.get('link'), null);
      assert.doesNotMatch(off.headers.get('vary') ?? '', /x-forwarded-host/i);
      assert.equal(hits.at(-1)!.headers['x-forwarded-host'], undefined);
    });
  });

  describe('forward_header', () => {
    const credentials = {
      authorization: 'Bearer stw_sk_secret',
      'x-api-key': 'stw_sk_secret',
      cookie: 'session=1',
      'proxy-authorization': 'Basic eA==',
    };

    test('a list: exactly the named headers reach the origin, never credentials; the answer varies on them', async () => {
      const res = await get(await named('f.jpg'), {
        'x-shop-token': 'tok-1',
        'accept-language': 'de',
        'user-agent': 'client-ua',
        referer: 'https://x.example/',
        ...credentials,
      });
      assert.equal(res.status, 200);
      const sent = hits.at(-1)!.headers;
      assert.equal(sent['x-shop-token'], 'tok-1');
      assert.equal(sent['accept-language'], 'de');
      assert.equal(sent['user-agent'], 'Stowage/1', 'an unnamed header is not passed on');
      assert.equal(sent.referer, undefined);
      for (const name of Object.keys(credentials)) assert.equal(sent[name], undefined, name);
      const vary = (res.headers.get('vary') ?? '').split(',').map((v) => v.trim());
      for (const name of ['x-shop-token', 'accept-language', 'x-original-host'])
        assert.ok(vary.includes(name), `Vary: ${name}`);
    });

    test("the forwarded values are part of the rendition cache key: one token's answer is never served for another", async () => {
      const before = hitsAt('/named/t.jpg').length;
      const a = await get(await named('w_30/t.jpg'), { 'x-shop-token': 'tok-a' });
      const b = await get(await named('w_30/t.jpg'), { 'x-shop-token': 'tok-b' });
      const none = await get(await named('w_30/t.jpg'));
      assert.deepEqual([a.status, b.status, none.status], [200, 200, 200]);
      assert.equal(hitsAt('/named/t.jpg').length, before + 3);
      await get(await named('w_30/t.jpg'), { 'x-shop-token': 'tok-a' });
      assert.equal(hitsAt('/named/t.jpg').length, before + 3, 'the same token hit the cache');
      assert.equal(
        hitsAt('/named/t.jpg').at(-1)!.headers['x-shop-token'],
        undefined,
        'the last fetch was the one without a token',
      );
    });

    test('true keeps its meaning (Accept, Accept-Language, User-Agent, Referer); false passes nothing', async () => {
      await get(at('linked', 'b.jpg'), {
        accept: 'image/webp',
        'accept-language': 'fr',
        'user-agent': 'client-ua',
        referer: 'https://x.example/',
        'x-shop-token': 't',
        ...credentials,
      });
      const sent = hits.at(-1)!.headers;
      assert.deepEqual(
        [sent.accept, sent['accept-language'], sent['user-agent'], sent.referer],
        ['image/webp', 'fr', 'client-ua', 'https://x.example/'],
      );
      assert.equal(sent['x-shop-token'], undefined);
      for (const name of Object.keys(credentials)) assert.equal(sent[name], undefined, name);
      await get(at('off', 'b.jpg'), { 'accept-language': 'fr', 'user-agent': 'client-ua', ...credentials });
      const none = hits.at(-1)!.headers;
      assert.equal(none['accept-language'], undefined);
      assert.equal(none['user-agent'], 'Stowage/1');
    });

    test('a stored name that may not be forwarded is still never sent (rows written by hand or by an older version)', async () => {
      const created = await source('legacy-row', { base_url: `http://${hostPort}/legacy` });
      const row = await h.services.db.kysely
        .selectFrom('sources')
        .select('configuration')
        .where('id', '=', created.id)
        .executeTakeFirstOrThrow();
      const config = {
        ...JSON.parse(row.configuration),
        forward_header: ['authorization', 'cookie', 'x-ok'],
        canonical_header: 'host',
      };
      await h.services.db.kysely
        .updateTable('sources')
        .set({ configuration: JSON.stringify(config) })
        .where('id', '=', created.id)
        .execute();
      await get(at('legacy-row', 'x.jpg'), { ...credentials, 'x-ok': 'yes' });
      const sent = hits.at(-1)!.headers;
      assert.equal(sent['x-ok'], 'yes');
      assert.equal(sent.authorization, undefined);
      assert.equal(sent.cookie, undefined);
      assert.equal(sent.host, hostPort, 'the origin is addressed by base_url');
    });
  });

  describe('configuration', () => {
    test('header names are stored lower-cased; a list is de-duplicated; the booleans are still accepted; GET shows what is stored', async () => {
      const res = await create('shapes', {
        base_url: 'https://images.example.com',
        canonical_header: 'X-Forwarded-Host',
        forward_header: ['X-Shop-Token', 'x-shop-token', 'Accept'],
      });
      assert.equal(res.status, 201, res.raw);
      assert.equal(res.body.data.configuration.canonical_header, 'x-forwarded-host');
      assert.deepEqual(res.body.data.configuration.forward_header, ['x-shop-token', 'accept']);
      const got = await call(h.app, 'GET', `/api/v1/sources/${res.body.data.id}`, { headers: h.auth });
      assert.equal(got.status, 200, got.raw);
      assert.deepEqual(got.body.data.configuration.forward_header, ['x-shop-token', 'accept']);
      const listed = await call(h.app, 'GET', '/api/v1/sources?search=shapes', { headers: h.auth });
      assert.deepEqual(listed.body.sources[0].configuration.forward_header, ['x-shop-token', 'accept']);

      for (const [canonical_header, forward_header] of [
        [true, false],
        [false, true],
        ['x-a', []],
      ] as const) {
        const ok = await create(`shapes-${String(canonical_header)}`, {
          base_url: 'https://images.example.com',
          canonical_header,
          forward_header,
        });
        assert.equal(ok.status, 201, ok.raw);
        assert.deepEqual(
          [ok.body.data.configuration.canonical_header, ok.body.data.configuration.forward_header],
          [canonical_header, forward_header],
        );
      }
    });

    test('PATCH: a name or list replaces a boolean and back; null removes it (the default applies again)', async () => {
      const { id } = await source('patchable', {
        base_url: 'https://images.example.com',
        canonical_header: true,
        forward_header: true,
      });
      const patch = (configuration: Record<string, unknown>) =>
        call(h.app, 'PATCH', `/api/v1/sources/${id}`, { body: { configuration }, headers: h.auth });
      let res = await patch({ canonical_header: 'X-Site', forward_header: ['X-Shop-Token'] });
      assert.equal(res.status, 200, res.raw);
      assert.deepEqual(
        [res.body.data.configuration.canonical_header, res.body.data.configuration.forward_header],
        ['x-site', ['x-shop-token']],
      );
      res = await patch({ forward_header: false });
      assert.equal(res.body.data.configuration.forward_header, false);
      res = await patch({ canonical_header: null, forward_header: null });
      assert.deepEqual(res.body.data.configuration, { base_url: 'https://images.example.com' });
    });

    test('refused on create and on PATCH with the documented texts, nothing stored: credentials, hop-by-hop and non-token names, wrong shapes', async () => {
      const { id } = await source('target', { base_url: 'https://images.example.com' });
      const before = (await call(h.app, 'GET', `/api/v1/sources/${id}`, { headers: h.auth })).body.data;
      const total = async () => (await h.services.sources.list(h.ws.workspace_id, { page: 1, limit: 100 })).meta.total;
      const count = await total();
      const cases: [string, Record<string, unknown>][] = [];
      for (const name of [...REFUSED_NAMES, ...NOT_TOKENS]) {
        cases.push([`canonical_header ${JSON.stringify(name)}`, { canonical_header: name }]);
        cases.push([`forward_header [${JSON.stringify(name)}]`, { forward_header: ['x-fine', name] }]);
      }
      cases.push(
        ['forward_header as text', { forward_header: 'x-shop-token' }],
        ['forward_header as a number', { forward_header: 1 }],
        ['forward_header as an object', { forward_header: { 'x-a': true } }],
        ['forward_header with a nested list', { forward_header: [['x-a']] }],
        ['forward_header with a non-string item', { forward_header: ['x-a', 5] }],
        ['forward_header with a null item', { forward_header: [null] }],
        ['forward_header with 21 names', { forward_header: Array.from({ length: 21 }, (_, i) => `x-h${i}`) }],
        ['canonical_header as a list', { canonical_header: ['x-forwarded-host'] }],
        ['canonical_header as a number', { canonical_header: 0 }],
      );
      for (const [label, extra] of cases) {
        const created = await create('refused', { base_url: 'https://images.example.com', ...extra });
        assert.equal(created.status, 400, `create, ${label}: ${created.raw}`);
        assert.deepEqual(
          [created.body.error, created.body.message],
          [INVALID.error, INVALID.message],
          `create, ${label}`,
        );
        const patched = await call(h.app, 'PATCH', `/api/v1/sources/${id}`, {
          body: { configuration: extra },
          headers: h.auth,
        });
        assert.equal(patched.status, 400, `PATCH, ${label}: ${patched.raw}`);
        assert.deepEqual(
          [patched.body.error, patched.body.message],
          [INVALID.error, INVALID.message],
          `PATCH, ${label}`,
        );
      }
      assert.equal(await total(), count, 'nothing created');
      assert.deepEqual(
        (await call(h.app, 'GET', `/api/v1/sources/${id}`, { headers: h.auth })).body.data,
        before,
        'nothing changed',
      );
      assert.ok(!h.logs.join('\n').includes('x-evil'), 'refused values are never logged');
    });

    test('the published OpenAPI document describes the new shapes', async () => {
      const doc = (await call(h.app, 'GET', '/openapi.json')).body;
      const text = JSON.stringify(doc.paths['/api/v1/sources']) + JSON.stringify(doc.components.schemas.Source);
      assert.match(text, /x-forwarded-host/);
      assert.match(text, /forward_header/);
      const data =
        doc.paths['/api/v1/sources/{sourceId}'].get.responses['200'].content['application/json'].schema.properties.data;
      const source = data.$ref ? doc.components.schemas[data.$ref.split('/').pop()] : data;
      const shown = source.properties.configuration;
      assert.ok(JSON.stringify(shown).includes('"array"'), 'configuration values may be lists');
    });
  });
});
