// STOWAGE_ACCEL_REDIRECT (docs/deploy.md, "Serving files through nginx"): real nginx, started
// with the server block of docs/deploy.md read from the page, in front of a real Stowage on
// 127.0.0.1, and every check from the client's side of nginx: bytes, Range and If-Range,
// Stowage's validators and 304s, private files and signed transformations refused before nginx
// sends anything, renditions, awkward names, SVG's sandboxing headers, and the internal
// location out of a client's reach. Without the setting nothing changes.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import sharp from 'sharp';
import { signDeliveryUrl } from '../sdk/src/sign.ts';
import type { CreatedWorkspace } from '../src/services/workspaces.ts';
import { addFile, DIALECTS, type Harness, makeHarness } from './helpers/harness.ts';
import { documentedStowageServer, type Nginx, nginxFixtures, nginxSkip, startNginx } from './helpers/nginx.ts';

const PREFIX = '/_stowage_internal/';
const skip = nginxSkip();

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

for (const dialect of DIALECTS) {
  describe(`nginx X-Accel-Redirect in front of Stowage (${dialect.name})`, { skip: dialect.skip || skip }, () => {
    let h: Harness;
    let plain: Harness;
    let nginx: Nginx;
    let stowage = '';
    let dir = '';
    let photo: Buffer;
    let other: CreatedWorkspace;
    const ws = () => h.ws.workspace_id;
    const get = async (base: string, path: string, headers: Record<string, string> = {}, method = 'GET') => {
      const res = await fetch(`${base}${path}`, { headers, method });
      return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) };
    };
    const viaNginx = (path: string, headers?: Record<string, string>, method?: string) =>
      get(nginx.base, path, headers, method);
    const direct = (path: string, headers?: Record<string, string>) => get(stowage, path, headers);
    const pathOf = (url: string) => {
      const u = new URL(url);
      return u.pathname + u.search;
    };

    before(async () => {
      h = await makeHarness(dialect.name, { config: { accelRedirect: PREFIX } });
      plain = await makeHarness(dialect.name);
      await h.app.listen({ host: '127.0.0.1', port: 0 });
      const address = h.app.server.address();
      assert.ok(address && typeof address === 'object');
      stowage = `http://127.0.0.1:${address.port}`;
      dir = mkdtempSync(join(tmpdir(), 'stowage-nginx-'));
      const server = (port: number) => documentedStowageServer(port, address.port, h.config.dataDir);
      assert.ok(server(1).includes(`location ${PREFIX}`), 'the documented prefix is the one tested');
      nginx = await startNginx(dir, server);
      ({ photo, signedWs: other } = await nginxFixtures(h));
    });
    after(async () => {
      await nginx?.stop();
      await h?.close();
      await plain?.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    test('an original: byte-exact through nginx, with every header Stowage gives it; Stowage sent no body', async () => {
      const record = await addFile(h, 'photo.png', photo);
      const res = await viaNginx(`/${ws()}/photo.png`);
      assert.equal(res.status, 200, nginx.errors());
      assert.equal(sha(res.body), sha(photo));
      assert.equal(res.headers.get('content-length'), String(photo.length));
      assert.equal(res.headers.get('content-type'), 'image/png');
      assert.equal(res.headers.get('etag'), `"${record.hash}"`, "Stowage's ETag, not nginx's");
      assert.equal(res.headers.get('last-modified'), new Date(record.updated_at).toUTCString());
      assert.equal(res.headers.get('cache-control'), 'public, max-age=300, must-revalidate');
      assert.equal(res.headers.get('accept-ranges'), 'bytes');
      assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
      assert.match(res.headers.get('content-security-policy') ?? '', /sandbox/);
      assert.equal(res.headers.get('access-control-allow-origin'), '*');
      assert.ok(res.headers.get('x-request-id'), 'the request id of Stowage');
      assert.equal(res.headers.get('x-accel-redirect'), null, 'nginx never shows the internal path');

      // What nginx got: headers, no body, and the object's path under the internal location.
      for (let i = 0; i < 2; i++) {
        const raw = await direct(`/${ws()}/photo.png`);
        assert.equal(raw.status, 200);
        assert.equal(raw.body.length, 0);
        assert.equal(raw.headers.get('content-length'), '0');
        const target = raw.headers.get('x-accel-redirect') ?? '';
        assert.match(target, /^\/_stowage_internal\/storage\/objects\/[A-Za-z0-9]+\/blobs\/[^/]+$/);
        assert.equal(sha(readFileSync(join(h.config.dataDir, target.slice(PREFIX.length)))), sha(photo));
        assert.equal(raw.headers.get('etag'), `"${record.hash}"`);
        for (const name of ['vary', 'cache-control', 'content-type', 'content-security-policy', 'last-modified'])
          assert.equal(res.headers.get(name), raw.headers.get(name), `${name} as Stowage gave it`);
        // The second is answered from memory before Fastify (deliveryFastPath), redirected all the same.
        if (i === 1) assert.match(raw.headers.get('x-request-id') ?? '', /^dfp-/);
      }
      // HEAD is Stowage's own answer, as without the setting.
      const head = await viaNginx(`/${ws()}/photo.png`, {}, 'HEAD');
      assert.equal(head.status, 200);
      assert.equal(head.headers.get('content-length'), String(photo.length));
      const rawHead = await get(stowage, `/${ws()}/photo.png`, {}, 'HEAD');
      assert.equal(rawHead.headers.get('x-accel-redirect'), null);
      assert.equal(rawHead.headers.get('content-length'), String(photo.length));
    });

    test("Range and If-Range through nginx, against Stowage's ETag and date", async () => {
      const record = await addFile(h, 'ranged.png', photo);
      const path = `/${ws()}/ranged.png`;
      const part = await viaNginx(path, { range: 'bytes=100-1099' });
      assert.equal(part.status, 206);
      assert.equal(part.headers.get('content-range'), `bytes 100-1099/${photo.length}`);
      assert.ok(part.body.equals(photo.subarray(100, 1100)));
      const tail = await viaNginx(path, { range: 'bytes=-10' });
      assert.equal(tail.status, 206);
      assert.ok(tail.body.equals(photo.subarray(photo.length - 10)));
      const same = await viaNginx(path, { range: 'bytes=0-9', 'if-range': `"${record.hash}"` });
      assert.equal(same.status, 206, "If-Range holding (Stowage's ETag): the range");
      assert.ok(same.body.equals(photo.subarray(0, 10)));
      const changed = await viaNginx(path, { range: 'bytes=0-9', 'if-range': '"another"' });
      assert.equal(changed.status, 200, 'If-Range failing: the whole file');
      assert.equal(sha(changed.body), sha(photo));
      const dated = await viaNginx(path, { range: 'bytes=0-9', 'if-range': new Date(record.updated_at).toUTCString() });
      assert.equal(dated.status, 206, "If-Range with Stowage's Last-Modified");
      const unsatisfiable = await viaNginx(path, { range: `bytes=${photo.length + 10}-` });
      assert.equal(unsatisfiable.status, 416, 'answered by Stowage');
      assert.equal(JSON.parse(unsatisfiable.body.toString()).errorCode, 'RANGE_NOT_SATISFIABLE');
    });

    test("conditional requests: Stowage's 304s; stale validators get the file, nginx adds no 304 of its own", async () => {
      const record = await addFile(h, 'cond.png', photo);
      const path = `/${ws()}/cond.png`;
      const fresh = await viaNginx(path, { 'if-none-match': `"${record.hash}"` });
      assert.equal(fresh.status, 304);
      assert.equal(fresh.body.length, 0);
      assert.equal(fresh.headers.get('etag'), `"${record.hash}"`);
      assert.equal((await viaNginx(path, { 'if-none-match': '"stale", W/"other"' })).status, 200);
      // The one difference docs/deploy.md names: nginx judges If-Match by validators of its own.
      assert.equal((await viaNginx(path, { 'if-match': `"${record.hash}"` })).status, 412);
      assert.equal((await viaNginx(path, { 'if-match': '*' })).status, 200);
      const lastModified = new Date(record.updated_at).toUTCString();
      assert.equal((await viaNginx(path, { 'if-modified-since': lastModified })).status, 304);
      // A date after the object file was written but before the record's: Stowage says modified,
      // and nginx (if_modified_since off) must not answer 304 from the file's own time.
      await new Promise((r) => setTimeout(r, 1100));
      const between = new Date().toUTCString();
      await new Promise((r) => setTimeout(r, 1100));
      const changed = await h.services.files.update(ws(), record.file_no, { metadata: { edited: true } });
      assert.notEqual(changed.updated_at, record.updated_at);
      const later = await viaNginx(path, { 'if-modified-since': between });
      assert.equal(later.status, 200, 'modified since, by the record');
      assert.equal(sha(later.body), sha(photo));
      assert.equal(later.headers.get('last-modified'), new Date(changed.updated_at).toUTCString());
    });

    test('a private file: refused unsigned, served signed; nothing under the prefix reachable from outside', async () => {
      const record = await addFile(h, 'secret.png', photo);
      const updated = await h.services.files.update(ws(), record.file_no, { is_private: true });
      const refused = await viaNginx(`/${ws()}/secret.png`);
      assert.equal(refused.status, 403);
      assert.equal(JSON.parse(refused.body.toString()).errorCode, 'SIGNED_URL_REQUIRED');
      const forged = new URL(updated.url);
      forged.searchParams.set('expires', String(Number(forged.searchParams.get('expires')) + 1));
      assert.equal((await viaNginx(pathOf(forged.toString()))).status, 403);
      const ok = await viaNginx(pathOf(updated.url));
      assert.equal(ok.status, 200);
      assert.equal(sha(ok.body), sha(photo));
      assert.match(ok.headers.get('cache-control') ?? '', /^private/);

      // The object's own internal path, and other files of the data dir, asked for directly.
      const target = (await direct(pathOf(updated.url))).headers.get('x-accel-redirect') ?? '';
      assert.ok(target.startsWith(PREFIX));
      for (const p of [target, `${PREFIX}master.key`, `${PREFIX}storage/objects/`]) {
        const res = await viaNginx(p);
        assert.equal(res.status, 404, p);
        assert.match(res.body.toString(), /nginx/, `${p}: answered by nginx, not Stowage`);
        assert.equal(res.headers.get('x-request-id'), null, p);
      }
    });

    test('renditions: made, then served from the cache through the redirect; signed transformations refused unsigned', async () => {
      await addFile(h, 'photo-r.png', photo);
      const path = `/${ws()}/w_50,f_png/photo-r.png`;
      const first = await viaNginx(path);
      assert.equal(first.status, 200);
      const meta = await sharp(first.body).metadata();
      assert.equal(meta.width, 50);
      const made = h.services.delivery.stats.renditionsMade;
      const again = await viaNginx(path);
      assert.ok(again.body.equals(first.body));
      assert.equal(h.services.delivery.stats.renditionsMade, made, 'from the cache');
      assert.match(again.headers.get('etag') ?? '', /-w_50[.,]f_png"$/);
      assert.equal(again.headers.get('content-type'), 'image/png');
      const target = (await direct(path)).headers.get('x-accel-redirect') ?? '';
      assert.match(target, /\.renditions\/w_50\.f_png\.png$/);
      assert.ok(readFileSync(join(h.config.dataDir, target.slice(PREFIX.length))).equals(first.body));
      const part = await viaNginx(path, { range: 'bytes=0-7' });
      assert.equal(part.status, 206);
      assert.ok(part.body.equals(first.body.subarray(0, 8)));

      await addFile(h, 'guarded.png', photo, { workspaceId: other.workspace_id });
      const unsigned = await viaNginx(`/${other.workspace_id}/w_60/guarded.png`);
      assert.equal(unsigned.status, 403);
      assert.equal(JSON.parse(unsigned.body.toString()).errorCode, 'TRANSFORMATION_SIGNATURE_REQUIRED');
      const key = await h.services.workspaces.deliveryKey(other.workspace_id);
      const signed = await signDeliveryUrl(`${nginx.base}/${other.workspace_id}/w_60/guarded.png`, key);
      const res = await viaNginx(pathOf(signed));
      assert.equal(res.status, 200);
      assert.equal((await sharp(res.body).metadata()).width, 60);
      assert.equal((await viaNginx(`/${other.workspace_id}/guarded.png`)).status, 200, 'originals need no signature');
    });

    test('awkward names (spaces, unicode, a literal %2F) and SVG keep their bytes and sandboxing headers', async () => {
      const name = 'a b ü 日本 %2F x.png';
      const record = await addFile(h, name, photo, { folder: ['dossier été', 'x%2Fy'] });
      const res = await viaNginx(pathOf(record.url));
      assert.equal(res.status, 200, record.url);
      assert.equal(sha(res.body), sha(photo));

      const svg = Buffer.from(
        '<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"><rect width="4" height="4"/></svg>',
      );
      await addFile(h, 'icon.svg', svg);
      const icon = await viaNginx(`/${ws()}/icon.svg`);
      assert.equal(icon.status, 200);
      assert.ok(icon.body.equals(svg));
      assert.equal(icon.headers.get('content-type'), 'image/svg+xml');
      assert.equal(icon.headers.get('x-content-type-options'), 'nosniff');
      assert.match(icon.headers.get('content-security-policy') ?? '', /default-src 'none'.*sandbox/);
    });

    test('a deleted file is 404 from Stowage, not a redirect to nothing', async () => {
      const record = await addFile(h, 'gone.png', photo);
      assert.equal((await viaNginx(`/${ws()}/gone.png`)).status, 200);
      await h.services.files.delete(ws(), record.file_no);
      const res = await viaNginx(`/${ws()}/gone.png`);
      assert.equal(res.status, 404);
      assert.ok(JSON.parse(res.body.toString()).errorCode, "Stowage's error shape");
    });

    test('without the setting nothing changes: Stowage sends the bytes, no X-Accel-Redirect', async () => {
      await addFile(plain, 'photo.png', photo);
      await plain.app.listen({ host: '127.0.0.1', port: 0 });
      const address = plain.app.server.address();
      assert.ok(address && typeof address === 'object');
      // The route, then the fast path (from memory).
      for (let i = 0; i < 2; i++) {
        const res = await get(`http://127.0.0.1:${address.port}`, `/${plain.ws.workspace_id}/photo.png`);
        assert.equal(res.status, 200);
        assert.equal(res.headers.get('x-accel-redirect'), null);
        assert.equal(sha(res.body), sha(photo));
        if (i === 1) assert.match(res.headers.get('x-request-id') ?? '', /^dfp-/);
      }
    });
  });
}
