// nginx's proxy_cache in front of Stowage (docs/deploy.md, "Caching delivery in nginx"): real
// nginx started with the block read from the page, a real Stowage on 127.0.0.1, and every check
// from a client's side of nginx, counting what reaches Stowage. Public files and renditions are
// kept and served by nginx; private files, signed URLs, answers that depend on client hints,
// errors and the API never are, and a second client never gets what a first one's credentials
// opened; f_auto keeps one copy per format; a deleted file stays in the proxy until
// deploy/purge-proxy-cache.sh purges it, then nginx answers 404.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import sharp from 'sharp';
import { signDeliveryUrl } from '../sdk/src/sign.ts';
import type { CreatedWorkspace } from '../src/services/workspaces.ts';
import { addFile, type Harness, makeHarness } from './helpers/harness.ts';
import { documentedCachingProxy, type Nginx, nginxFixtures, nginxSkip, startNginx } from './helpers/nginx.ts';

const PURGE = fileURLToPath(new URL('../deploy/purge-proxy-cache.sh', import.meta.url));
const skip = nginxSkip();

/** A browser's Accept for images, and a script's. */
const CHROME = 'image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8';
const SAFARI_OLD = 'image/webp,image/png,image/svg+xml,image/*;q=0.8,*/*;q=0.5';

// nginx and SQLite: what is checked is the proxy and Stowage's headers, the same on every database.
describe('nginx proxy_cache in front of Stowage', { skip }, () => {
  let h: Harness;
  let nginx: Nginx;
  let dir = '';
  let cacheDir = '';
  let photo: Buffer;
  let signedWs: CreatedWorkspace;
  /** Every request that reached Stowage, fast path included (raw URLs). */
  const seen: string[] = [];
  const ws = () => h.ws.workspace_id;
  const reached = (url: string) => seen.filter((u) => u === url).length;
  const viaNginx = async (path: string, headers: Record<string, string> = {}, method = 'GET') => {
    const res = await fetch(`${nginx.base}${path}`, { headers, method });
    return {
      status: res.status,
      headers: res.headers,
      cache: res.headers.get('x-cache-status'),
      body: Buffer.from(await res.arrayBuffer()),
    };
  };
  const pathOf = (url: string) => {
    const u = new URL(url);
    return u.pathname + u.search;
  };
  const purge = (workspace: string, path: string) =>
    promisify(execFile)('bash', [PURGE, cacheDir, workspace, path]).then((r) => r.stdout);

  before(async () => {
    h = await makeHarness('sqlite');
    await h.app.listen({ host: '127.0.0.1', port: 0 });
    h.app.server.prependListener('request', (req) => seen.push(req.url ?? ''));
    const address = h.app.server.address();
    assert.ok(address && typeof address === 'object');
    dir = mkdtempSync(join(tmpdir(), 'stowage-proxy-cache-'));
    cacheDir = join(dir, 'cache');
    mkdirSync(cacheDir);
    nginx = await startNginx(dir, (port) => documentedCachingProxy(port, address.port, cacheDir));
    ({ photo, signedWs } = await nginxFixtures(h));
  });
  after(async () => {
    await nginx?.stop();
    await h?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('a public rendition and original: the second request is a HIT from nginx, Stowage saw one', async () => {
    await addFile(h, 'photo.png', photo);
    for (const path of [`/${ws()}/w_50,f_png/photo.png`, `/${ws()}/photo.png`]) {
      const first = await viaNginx(path);
      assert.equal(first.status, 200, nginx.errors());
      assert.equal(first.cache, 'MISS', path);
      const second = await viaNginx(path);
      assert.equal(second.status, 200);
      assert.equal(second.cache, 'HIT', path);
      assert.ok(second.body.equals(first.body));
      assert.equal(second.headers.get('etag'), first.headers.get('etag'));
      assert.equal(reached(path), 1, `${path}: Stowage answered once`);
      // Conditional and range requests are answered by nginx from its copy.
      const revalidated = await viaNginx(path, { 'if-none-match': first.headers.get('etag')! });
      assert.equal(revalidated.status, 304);
      const part = await viaNginx(path, { range: 'bytes=0-9' });
      assert.equal(part.status, 206);
      assert.ok(part.body.equals(first.body.subarray(0, 10)));
      assert.equal(reached(path), 1);
    }
    assert.equal((await sharp((await viaNginx(`/${ws()}/w_50,f_png/photo.png`)).body).metadata()).width, 50);
  });

  test('f_auto: one copy per format the Accept header picks, never another format', async () => {
    await addFile(h, 'auto.png', photo);
    const path = `/${ws()}/w_60,f_auto/auto.png`;
    const asked = [
      { accept: CHROME, type: 'image/avif', cache: 'MISS' },
      { accept: SAFARI_OLD, type: 'image/webp', cache: 'MISS' },
      { accept: '*/*', type: 'image/png', cache: 'MISS' },
      { accept: 'image/webp,*/*', type: 'image/webp', cache: 'HIT' },
      { accept: CHROME, type: 'image/avif', cache: 'HIT' },
      { accept: '', type: 'image/png', cache: 'HIT' },
    ];
    for (const { accept, type, cache } of asked) {
      const res = await viaNginx(path, accept ? { accept } : {});
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), type, `Accept: ${accept}`);
      assert.equal((await sharp(res.body).metadata()).format, type === 'image/avif' ? 'heif' : type.slice(6));
      assert.equal(res.cache, cache, `Accept: ${accept}`);
      assert.match(res.headers.get('vary') ?? '', /Accept/);
    }
    assert.equal(reached(path), 3, 'one request per format');
  });

  test('a private file: its signed URL is never kept; a client without the signature gets 403, not the copy', async () => {
    const record = await addFile(h, 'secret.png', photo);
    const updated = await h.services.files.update(ws(), record.file_no, { is_private: true });
    const signed = pathOf(updated.url);
    for (let i = 0; i < 2; i++) {
      const res = await viaNginx(signed);
      assert.equal(res.status, 200);
      assert.ok(res.body.equals(photo));
      assert.match(res.headers.get('cache-control') ?? '', /^private/);
      assert.notEqual(res.cache, 'HIT');
    }
    assert.equal(reached(signed), 2, 'both reached Stowage');
    const rendition = pathOf(updated.url.replace('/secret.png', '/w_40/secret.png'));
    // A rendition URL needs its own signature; the file's does not open it, cached or not.
    const unsigned = await viaNginx(`/${ws()}/secret.png`);
    assert.equal(unsigned.status, 403);
    assert.equal(JSON.parse(unsigned.body.toString()).errorCode, 'SIGNED_URL_REQUIRED');
    assert.equal(unsigned.headers.get('cache-control'), 'no-store');
    assert.equal((await viaNginx(rendition)).status, 403);
    assert.equal((await viaNginx(`/${ws()}/w_40/secret.png`)).status, 403);
  });

  test('a file cached while public, then made private, is served by the proxy until purged', async () => {
    const record = await addFile(h, 'turned.png', photo);
    const path = `/${ws()}/turned.png`;
    await viaNginx(path);
    assert.equal((await viaNginx(path)).cache, 'HIT');
    await h.services.files.update(ws(), record.file_no, { is_private: true });
    assert.equal((await viaNginx(path)).status, 200, 'the copy outlives the change (docs/deploy.md says so)');
    assert.match(await purge(ws(), 'turned.png'), /purged 1 entries/);
    const after = await viaNginx(path);
    assert.equal(after.status, 403);
    assert.equal(after.cache, 'MISS');
  });

  test('the API and errors are never kept: a second client without a key gets 401', async () => {
    const key = { 'x-api-key': h.ws.private_key };
    const listed = await viaNginx('/api/v1/files', key);
    assert.equal(listed.status, 200);
    assert.equal(listed.headers.get('cache-control'), 'no-store');
    assert.equal(listed.cache, null, 'outside the cached location');
    const anonymous = await viaNginx('/api/v1/files');
    assert.equal(anonymous.status, 401);
    assert.equal(anonymous.headers.get('cache-control'), 'no-store');
    // A key sent to a delivery path: not served from the cache, not stored.
    await addFile(h, 'keyed.png', photo);
    assert.equal((await viaNginx(`/${ws()}/keyed.png`, key)).cache, 'BYPASS');
    assert.equal((await viaNginx(`/${ws()}/keyed.png`)).cache, 'MISS', 'the keyed answer was not stored');
    // A 404: asked again, asked of Stowage again.
    const missing = `/${ws()}/nothing-here.png`;
    for (let i = 0; i < 2; i++) {
      const res = await viaNginx(missing);
      assert.equal(res.status, 404);
      assert.equal(res.headers.get('cache-control'), 'no-store');
    }
    assert.equal(reached(missing), 2);
  });

  test('answers that depend on client hints are not stored (their Vary is not in the key)', async () => {
    await addFile(h, 'hinted.png', photo);
    // No w_, h_ or ar_: the width comes from Sec-CH-Width, Width, Save-Data or User-Agent.
    const path = `/${ws()}/f_png/hinted.png`;
    const phone = await viaNginx(path, { 'sec-ch-width': '100' });
    const desktop = await viaNginx(path, { 'user-agent': 'curl/8' });
    assert.match(phone.headers.get('vary') ?? '', /Sec-CH-Width/);
    assert.equal((await sharp(phone.body).metadata()).width, 320, 'the smallest width bucket');
    assert.equal((await sharp(desktop.body).metadata()).width, 400, 'a script gets the image at its size');
    assert.equal(phone.cache, 'MISS');
    assert.equal(desktop.cache, 'MISS');
    assert.equal((await viaNginx(path, { 'sec-ch-width': '100' })).cache, 'MISS');
    assert.equal(reached(path), 3);
  });

  test('signed transformations: the signed URL is kept, the unsigned one is still refused', async () => {
    await addFile(h, 'guarded.png', photo, { workspaceId: signedWs.workspace_id });
    const key = await h.services.workspaces.deliveryKey(signedWs.workspace_id);
    const signed = pathOf(await signDeliveryUrl(`${nginx.base}/${signedWs.workspace_id}/w_30/guarded.png`, key));
    assert.equal((await viaNginx(signed)).cache, 'MISS');
    const hit = await viaNginx(signed);
    assert.equal(hit.cache, 'HIT');
    assert.equal((await sharp(hit.body).metadata()).width, 30);
    const unsigned = await viaNginx(`/${signedWs.workspace_id}/w_30/guarded.png`);
    assert.equal(unsigned.status, 403);
    assert.equal(JSON.parse(unsigned.body.toString()).errorCode, 'TRANSFORMATION_SIGNATURE_REQUIRED');
  });

  test('a deleted file: served from the proxy until purged, then 404 for the original and every rendition', async () => {
    const record = await addFile(h, 'gone.png', photo, { folder: ['shop'] });
    const paths = [
      `/${ws()}/shop/gone.png`,
      `/${ws()}/w_20,f_png/shop/gone.png`,
      `/${ws()}/w_20,f_auto/shop/gone.png`,
      `/${ws()}/shop/gone.png?v=${record.hash.slice(0, 10)}`,
    ];
    const other = `/${ws()}/w_20,f_png/photo.png`;
    for (const path of [...paths, other]) {
      await viaNginx(path, { accept: CHROME });
      assert.equal((await viaNginx(path, { accept: CHROME })).cache, 'HIT', path);
    }
    await viaNginx(paths[2], { accept: '*/*' });
    await h.services.files.delete(ws(), record.file_no);
    for (const path of paths)
      assert.equal((await viaNginx(path, { accept: CHROME })).status, 200, `${path}: still cached`);
    assert.match(await purge(ws(), 'shop/gone.png'), /purged 5 entries/);
    for (const path of paths)
      for (const accept of [CHROME, '*/*']) {
        const res = await viaNginx(path, { accept });
        assert.equal(res.status, 404, path);
        assert.equal(JSON.parse(res.body.toString()).errorCode, 'FILE_NOT_FOUND', "Stowage's answer");
        assert.notEqual(res.cache, 'HIT');
      }
    assert.equal((await viaNginx(other, { accept: CHROME })).cache, 'HIT', 'other files stay cached');
  });
});

// Without nginx: what Stowage itself says to any shared cache (src/http/cache-policy.ts).
describe('Cache-Control for shared caches', () => {
  let h: Harness;
  before(async () => {
    h = await makeHarness('sqlite');
  });
  after(async () => {
    await h?.close();
  });

  test('API answers and every error say no-store; delivery and preflights keep their own', async () => {
    const key = { 'x-api-key': h.ws.private_key };
    const at = (url: string, headers: Record<string, string> = {}, method: 'GET' | 'OPTIONS' = 'GET') =>
      h.app.inject({ method, url, headers });
    const cacheControl = async (url: string, headers?: Record<string, string>, method?: 'GET' | 'OPTIONS') => {
      const res = await at(url, headers, method);
      return [res.statusCode, res.headers['cache-control']];
    };
    await addFile(
      h,
      'open.png',
      Buffer.from(
        await sharp({ create: { width: 4, height: 4, channels: 3, background: '#000' } })
          .png()
          .toBuffer(),
      ),
    );
    assert.deepEqual(await cacheControl('/api/v1/files', key), [200, 'no-store']);
    assert.deepEqual(await cacheControl('/api/v1/workspace', key), [200, 'no-store']);
    assert.deepEqual(await cacheControl('/api/v1/files'), [401, 'no-store']);
    assert.deepEqual(await cacheControl('/api/v1/nothing', key), [404, 'no-store']);
    assert.deepEqual(await cacheControl(`/${h.ws.workspace_id}/missing.png`), [404, 'no-store']);
    assert.deepEqual(await cacheControl(`/${h.ws.workspace_id}/w_0/open.png`), [400, 'no-store']);
    assert.deepEqual(await cacheControl(`/${h.ws.workspace_id}/open.png`, { range: 'bytes=999999-' }), [
      416,
      'no-store',
    ]);
    assert.deepEqual(await cacheControl(`/${h.ws.workspace_id}/open.png`), [
      200,
      'public, max-age=300, must-revalidate',
    ]);
    const preflight = await at(
      '/api/v1/files',
      { origin: 'https://app.example', 'access-control-request-method': 'GET' },
      'OPTIONS',
    );
    assert.equal(preflight.statusCode, 204);
    assert.match(String(preflight.headers['cache-control']), /max-age=7200/);
  });
});
