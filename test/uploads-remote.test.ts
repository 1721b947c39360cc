// Remote URL upload (docs/api/uploads.md#remote-url-upload): streamed, bounded, and refused for
// every non-public address on every hop. DNS is injected, so no real resolver is needed.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { ResolvedAddress } from '../src/outbound/guard.ts';
import { type Harness, makeHarness } from './helpers/harness.ts';
import { call } from './helpers/http.ts';
import { localServer } from './helpers/servers.ts';
import { freshS3Storage, UPLOAD_MATRIX } from './helpers/storage.ts';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** Names the tests use, and what they resolve to. */
const DNS: Record<string, string[]> = {
  'files.test': ['127.0.0.1'],
  'ten.test': ['10.1.2.3'],
  'oneseventwo.test': ['172.16.5.4'],
  'home.test': ['192.168.0.10'],
  'metadata.test': ['169.254.169.254'],
  'loop6.test': ['::1'],
  'ula.test': ['fd00::1'],
  'mapped.test': ['::ffff:127.0.0.1'],
  'mixed.test': ['93.184.216.34', '10.0.0.1'],
  'cgnat.test': ['100.64.1.1'],
  'zero.test': ['0.0.0.0'],
  // IPv6 spellings of internal IPv4 addresses, as a resolver would hand them back
  'compat.test': ['::7f00:1'],
  'compat-dotted.test': ['::127.0.0.1'],
  'mapped-hex.test': ['::ffff:a9fe:a9fe'],
  'nat64.test': ['64:ff9b::a9fe:a9fe'],
  'nat64-local.test': ['64:ff9b:1::a00:1'],
  'sixtofour.test': ['2002:7f00:1::1'],
  'teredo.test': ['2001:0:4136:e378:8000:63bf:80ff:fffe'],
  'sitelocal.test': ['fec0::1'],
  'linklocal6.test': ['fe80::1'],
  'doc6.test': ['2001:db8::1'],
  'mixed6.test': ['2606:4700::1111', '64:ff9b::a00:1'],
};
const resolver = async (host: string): Promise<ResolvedAddress[]> => {
  const list = DNS[host];
  if (!list) throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
  return list.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
};

/** Redirect targets: IPv6 spellings of loopback and of the metadata service (issue 15, item 11). */
const REDIRECT_V6 = [
  'http://[::127.0.0.1]:PORT/assets/file.bin',
  'http://[::ffff:7f00:1]:PORT/assets/file.bin',
  'http://[64:ff9b::a9fe:a9fe]/latest/meta-data/',
  'http://[2002:7f00:1::]:PORT/assets/file.bin',
  'http://[2001:0:4136:e378:8000:63bf:80ff:fffe]:PORT/assets/file.bin',
  'http://compat.test:PORT/assets/file.bin',
  'http://0x7f.1:PORT/assets/file.bin',
];

describe('remote URL upload', () => {
  let h: Harness;
  let origin: Awaited<ReturnType<typeof localServer>>;
  const payload = randomBytes(2 * 1024 * 1024 + 99);
  const remote = (body: Record<string, unknown>) =>
    call(h.app, 'POST', '/api/v1/uploads/remote', { body, headers: { 'x-api-key': h.ws.public_key } });

  before(async () => {
    origin = await localServer((req, res) => {
      const url = new URL(req.url!, 'http://x');
      if (url.pathname === '/assets/photo%20one.bin' || url.pathname === '/assets/file.bin')
        res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(payload);
      else if (url.pathname === '/redirect-ok')
        res.writeHead(302, { location: `http://files.test:${origin.port}/assets/file.bin` }).end();
      else if (url.pathname === '/redirect-private')
        res.writeHead(302, { location: `http://127.0.0.1:${origin.port}/assets/file.bin` }).end();
      else if (url.pathname === '/redirect-meta')
        res.writeHead(301, { location: 'http://169.254.169.254/latest/meta-data/' }).end();
      else if (url.pathname.startsWith('/redirect-v6/'))
        res
          .writeHead(302, {
            location: REDIRECT_V6[Number(url.pathname.slice(13))].replace('PORT', String(origin.port)),
          })
          .end();
      else if (url.pathname === '/loop') res.writeHead(302, { location: '/loop' }).end();
      else if (url.pathname === '/slow')
        res.writeHead(200).write('a'); // never ends
      else if (url.pathname === '/huge')
        res.writeHead(200, { 'content-length': String(10 * 1024 * 1024) }).end(Buffer.alloc(10 * 1024 * 1024));
      else res.writeHead(404).end('nope');
    });
    // The operator allows exactly one host name; its address is loopback, which nothing else may reach.
    h = await makeHarness('sqlite', {
      config: { outboundAllow: ['files.test'], remoteTimeoutMs: 1500, outboundTimeoutMs: 1500 },
      services: { resolver },
    });
  });
  after(async () => {
    await h?.close();
    await origin?.close();
  });

  test('fetches, streams and stores the file byte-exact; the name comes from the URL', async () => {
    const res = await remote({
      remote_url: `http://files.test:${origin.port}/assets/photo%20one.bin`,
      folder: 'imports',
      tags: 'a,b',
      metadata: '{"from":"web"}',
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.equal(res.body.hash, sha(payload));
    assert.equal(res.body.size, payload.length);
    assert.equal(res.body.name, 'photo one.bin');
    assert.equal(res.body.upload_source, 'remote');
    assert.equal(res.body.path, '/imports/photo one.bin');
    assert.deepEqual(res.body.tags, ['a', 'b']);
    assert.deepEqual(res.body.metadata, { from: 'web' });
  });

  test('file_name, random_prefix and a redirect between allowed hosts', async () => {
    const res = await remote({
      remote_url: `http://files.test:${origin.port}/redirect-ok`,
      file_name: 'named.bin',
      random_prefix: 'true',
      metadata: { a: 1 },
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.match(res.body.name, /^named_[0-9A-Za-z]{8}\.bin$/);
    assert.equal(res.body.hash, sha(payload));
  });

  const refusedHosts = [
    ['loopback by address', 'http://127.0.0.1:1/x'],
    ['loopback by another address', 'http://127.9.9.9/x'],
    ['localhost', 'http://localhost/x'],
    ['10/8', 'http://ten.test/x'],
    ['172.16/12', 'http://oneseventwo.test/x'],
    ['192.168/16', 'http://home.test/x'],
    ['cloud metadata 169.254.169.254', 'http://metadata.test/latest/meta-data/'],
    ['cloud metadata by address', 'http://169.254.169.254/latest/meta-data/'],
    ['IPv6 loopback by name', 'http://loop6.test/x'],
    ['IPv6 loopback by address', 'http://[::1]/x'],
    ['IPv6 unique local (ULA)', 'http://ula.test/x'],
    ['IPv4-mapped loopback', 'http://mapped.test/x'],
    ['a name with one private address among public ones', 'http://mixed.test/x'],
    ['carrier-grade NAT 100.64/10', 'http://cgnat.test/x'],
    ['0.0.0.0', 'http://zero.test/x'],
    ['IPv4-compatible loopback by address', 'http://[::127.0.0.1]/x'],
    ['IPv4-mapped loopback by address, hex form', 'http://[::ffff:7f00:1]/x'],
    ['NAT64 metadata service by address', 'http://[64:ff9b::a9fe:a9fe]/latest/meta-data/'],
    ['6to4 loopback by address', 'http://[2002:7f00:1::]/x'],
    ['Teredo client loopback by address', 'http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/x'],
    ['IPv4 oddity 0x7f.1', 'http://0x7f.1/x'],
    ['IPv4 oddity 2130706433', 'http://2130706433/x'],
    ['IPv4-compatible loopback by name (hex answer)', 'http://compat.test/x'],
    ['IPv4-compatible loopback by name (dotted answer)', 'http://compat-dotted.test/x'],
    ['IPv4-mapped metadata by name (hex answer)', 'http://mapped-hex.test/x'],
    ['NAT64 metadata service by name', 'http://nat64.test/latest/meta-data/'],
    ['NAT64 local-use prefix by name', 'http://nat64-local.test/x'],
    ['6to4 loopback by name', 'http://sixtofour.test/x'],
    ['Teredo client loopback by name', 'http://teredo.test/x'],
    ['IPv6 site-local by name', 'http://sitelocal.test/x'],
    ['IPv6 link-local by name', 'http://linklocal6.test/x'],
    ['IPv6 documentation range by name', 'http://doc6.test/x'],
    ['a name with one NAT64-of-private address among public ones', 'http://mixed6.test/x'],
  ];
  for (const [label, url] of refusedHosts) {
    test(`refuses ${label}: 400, nothing stored`, async () => {
      const res = await remote({ remote_url: url });
      assert.equal(res.status, 400, JSON.stringify(res.body));
      assert.equal(res.body.errorCode, 'URL_REFUSED');
    });
  }

  test('refuses a redirect from an allowed host to a private address, or to the metadata service', async () => {
    for (const path of ['/redirect-private', '/redirect-meta']) {
      const res = await remote({ remote_url: `http://files.test:${origin.port}${path}` });
      assert.equal(res.status, 400, JSON.stringify(res.body));
      assert.equal(res.body.errorCode, 'URL_REFUSED');
    }
  });

  test('refuses a redirect from an allowed host to an IPv6 spelling of loopback or the metadata service', async () => {
    const wrong: string[] = [];
    for (let i = 0; i < REDIRECT_V6.length; i++) {
      const res = await remote({ remote_url: `http://files.test:${origin.port}/redirect-v6/${i}` });
      if (res.status !== 400 || res.body.errorCode !== 'URL_REFUSED')
        wrong.push(`${REDIRECT_V6[i]}: ${res.status} ${res.body.message}`);
    }
    assert.deepEqual(wrong, []);
  });

  test('bad URLs are 400; failures of the remote side are 502', async () => {
    for (const remote_url of [
      'not a url',
      'ftp://files.test/x',
      'file:///etc/passwd',
      'http://user:pw@files.test/x',
      'javascript:alert(1)',
    ]) {
      const res = await remote({ remote_url });
      assert.equal(res.status, 400, remote_url);
    }
    assert.equal((await remote({})).status, 400);
    for (const [path, why] of [
      ['/missing', /HTTP 404/],
      ['/loop', /redirected too many/],
      ['/slow', /did not answer in time|could not be reached/],
    ] as const) {
      const res = await remote({ remote_url: `http://files.test:${origin.port}${path}`, file_name: 'x.bin' });
      assert.equal(res.status, 502, path);
      assert.equal(res.body.errorCode, 'REMOTE_FAILED');
      assert.match(res.body.message, why);
    }
    assert.equal((await remote({ remote_url: 'http://unknown.test/x' })).status, 502);
  });

  test('size limits apply: a declared or streamed size over the maximum is 413', async () => {
    await h.services.db.kysely
      .updateTable('workspaces')
      .set({ max_file_size: 1024 * 1024 })
      .where('id', '=', h.ws.workspace_id)
      .execute();
    try {
      const res = await remote({ remote_url: `http://files.test:${origin.port}/huge` });
      assert.equal(res.status, 413);
      const streamed = await remote({ remote_url: `http://files.test:${origin.port}/assets/file.bin` });
      assert.equal(streamed.status, 413);
    } finally {
      await h.services.db.kysely
        .updateTable('workspaces')
        .set({ max_file_size: null })
        .where('id', '=', h.ws.workspace_id)
        .execute();
    }
  });

  test('nothing refused left anything behind', async () => {
    const db = h.services.db.kysely;
    const blobs = await db.selectFrom('blobs').selectAll().execute();
    const keys: string[] = [];
    for await (const o of h.services.storage.list('')) keys.push(o.key);
    assert.deepEqual(keys.sort(), blobs.map((b) => b.storage_key).sort());
    assert.deepEqual(await db.selectFrom('storage_intents').selectAll().execute(), []);
    assert.equal(blobs.length, 1, 'the one payload, stored once');
  });
});

describe('remote URL upload into S3 storage', { skip: UPLOAD_MATRIX[2].skip }, () => {
  let h: Harness;
  let origin: Awaited<ReturnType<typeof localServer>>;
  const payload = randomBytes(9 * 1024 * 1024 + 5);
  before(async () => {
    origin = await localServer((_req, res) => res.writeHead(200).end(payload));
    h = await makeHarness('sqlite', {
      config: { outboundAllow: ['files.test'], storage: await freshS3Storage() },
      services: { resolver },
    });
  });
  after(async () => {
    await h?.close();
    await origin?.close();
  });

  test('streams into S3 byte-exact', async () => {
    const res = await call(h.app, 'POST', '/api/v1/uploads/remote', {
      body: { remote_url: `http://files.test:${origin.port}/big.bin` },
      headers: { 'x-api-key': h.ws.public_key },
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.equal(res.body.hash, sha(payload));
    const blob = await h.services.db.kysely.selectFrom('blobs').selectAll().executeTakeFirstOrThrow();
    const stored = createHash('sha256');
    for await (const c of await h.services.storage.get(blob.storage_key)) stored.update(c as Buffer);
    assert.equal(stored.digest('hex'), sha(payload));
  });
});
