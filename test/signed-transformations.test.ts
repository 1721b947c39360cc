// Signed transformations (issue 19 item 5, docs/api/delivery.md#signed-transformations), from
// the attacker's side: with the setting on, no URL a stranger can write makes a rendition;
// signed URLs (the workspace's delivery key, or the service's own) do; originals and workspaces
// with the setting off behave as before; the key is read at one endpoint only, never logged.
import assert from 'node:assert/strict';
import { createHmac, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import sharp from 'sharp';
import { signDeliveryUrl } from '../sdk/src/sign.ts';
import { newShortId } from '../src/crypto/ids.ts';
import { SecretBox } from '../src/crypto/secret-box.ts';
import { signTransformUrl } from '../src/crypto/transform-url.ts';
import { openDatabase } from '../src/db/database.ts';
import { migrateTo, migrateToLatest } from '../src/db/migrations.ts';
import type { ResolvedAddress } from '../src/outbound/guard.ts';
import { type CreatedWorkspace, WorkspaceService } from '../src/services/workspaces.ts';
import { addFile, DIALECTS, freshPostgres, type Harness, makeHarness } from './helpers/harness.ts';
import { call } from './helpers/http.ts';
import { localServer } from './helpers/servers.ts';

const resolver = async (host: string): Promise<ResolvedAddress[]> => {
  if (host === 'origin.test') return [{ address: '127.0.0.1', family: 4 }];
  throw Object.assign(new Error('nx'), { code: 'ENOTFOUND' });
};

describe('signed transformations', () => {
  let h: Harness;
  let base: string;
  let photo: Buffer;
  let other: CreatedWorkspace;
  let origin: Awaited<ReturnType<typeof localServer>>;
  const originQueries: string[] = [];
  let key = '';
  const ws = () => h.ws.workspace_id;
  const priv = () => h.auth;
  const pub = () => ({ authorization: `Bearer ${h.ws.public_key}` });
  const add = (workspaceId: string, name: string, folder: string[] = []) =>
    addFile(h, name, photo, { folder, workspaceId });
  const get = async (path: string, init: RequestInit = {}) => {
    // Record URLs name the configured public URL: sent here, to the test server, path and query as they are.
    const u = path.startsWith('http') ? new URL(path) : undefined;
    const res = await fetch(u ? `${base}${u.pathname}${u.search}` : `${base}${path}`, init);
    const body = Buffer.from(await res.arrayBuffer());
    let code: string | undefined;
    try {
      code = JSON.parse(body.toString()).errorCode;
    } catch {}
    return { status: res.status, headers: res.headers, body, code };
  };
  const made = () => h.services.delivery.stats.renditionsMade;
  const setting = async (on: boolean) => {
    const res = await call(h.app, 'PATCH', '/api/v1/workspace', {
      body: { signed_transformations: on },
      headers: priv(),
    });
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.data.signed_transformations, on);
  };

  before(async () => {
    photo = await sharp({ create: { width: 600, height: 400, channels: 3, background: '#3060a0' } })
      .jpeg()
      .toBuffer();
    origin = await localServer((req, res) => {
      const [pathname, query] = req.url!.split('?');
      originQueries.push(query ?? '');
      if (pathname === '/img/photo.jpg') res.writeHead(200, { 'content-type': 'image/jpeg' }).end(photo);
      else res.writeHead(404).end();
    });
    h = await makeHarness('sqlite', {
      config: { outboundAllow: ['origin.test'] },
      services: { resolver },
    });
    base = await h.app.listen({ host: '127.0.0.1', port: 0 });
    other = await h.services.workspaces.create('Other');
    await add(ws(), 'photo.jpg', ['gallery']);
    await add(other.workspace_id, 'photo.jpg', ['gallery']);
    const src = await call(h.app, 'POST', '/api/v1/sources', {
      body: { name: 'web', type: 'image_source', configuration: { base_url: `http://origin.test:${origin.port}/img` } },
      headers: priv(),
    });
    assert.equal(src.status, 201, src.raw);
  });
  after(async () => {
    await h?.close();
    await origin?.close();
  });

  test('off by default: transformations are served unsigned and thumbnails carry no signature', async () => {
    const settings = await call(h.app, 'GET', '/api/v1/workspace', { headers: priv() });
    assert.equal(settings.body.data.signed_transformations, false);
    const before = made();
    assert.equal((await get(`/${ws()}/w_30/gallery/photo.jpg`)).status, 200);
    assert.equal(made(), before + 1);
    const list = await call(h.app, 'GET', '/api/v1/files', { headers: priv() });
    assert.ok(list.body.files.every((f: { thumbnail: string }) => !f.thumbnail.includes('?')));
  });

  test('the public key (or none) cannot switch the setting, nor read or rotate the key', async () => {
    for (const headers of [pub(), {}]) {
      const patch = await call(h.app, 'PATCH', '/api/v1/workspace', {
        body: { signed_transformations: true },
        headers,
      });
      assert.ok([401, 403].includes(patch.status), patch.raw);
      const read = await call(h.app, 'GET', '/api/v1/workspace/delivery-key', { headers });
      assert.ok([401, 403].includes(read.status), read.raw);
      assert.ok(!read.raw.includes('stw_dk_'));
      const rotate = await call(h.app, 'POST', '/api/v1/workspace/delivery-key/rotate', { headers });
      assert.ok([401, 403].includes(rotate.status), rotate.raw);
    }
    const settings = await call(h.app, 'GET', '/api/v1/workspace', { headers: priv() });
    assert.equal(settings.body.data.signed_transformations, false, 'unchanged');
    // Not a boolean: refused, nothing changed.
    const bad = await call(h.app, 'PATCH', '/api/v1/workspace', {
      body: { signed_transformations: 'yes' },
      headers: priv(),
    });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.errorCode, 'VALIDATION_FAILED');
  });

  test('turned on by the private key; the key is answered by its own endpoint only', async () => {
    await setting(true);
    const res = await call(h.app, 'GET', '/api/v1/workspace/delivery-key', { headers: priv() });
    assert.equal(res.status, 200);
    key = res.body.data.delivery_key;
    assert.match(key, /^stw_dk_[0-9A-Za-z]{43}$/);
    const again = await call(h.app, 'GET', '/api/v1/workspace/delivery-key', { headers: priv() });
    assert.equal(again.body.data.delivery_key, key, 'one key, not one per request');
    const settings = await call(h.app, 'GET', '/api/v1/workspace', { headers: priv() });
    assert.ok(!settings.raw.includes(key));
  });

  test('unsigned, forged, misplaced, foreign, expired and tampered URLs are refused; nothing is rendered', async () => {
    const now = Math.floor(Date.now() / 1000);
    const url = (p: string) => `${base}/${ws()}/${p}`;
    const pathAndQuery = (u: string) => {
      const x = new URL(u);
      return x.pathname + x.search;
    };
    await h.services.workspaces.updateSettings(other.workspace_id, { signed_transformations: true });
    const otherKey = await h.services.workspaces.deliveryKey(other.workspace_id);
    const signedW42 = new URL(await signDeliveryUrl(url('w_42/gallery/photo.jpg'), key));
    const expiring = new URL(await signDeliveryUrl(url('w_46/gallery/photo.jpg'), key, { expiresIn: 600 }));
    const tamperedExp = new URL(expiring);
    tamperedExp.searchParams.set('texp', String(now + 99_999));
    const noExp = new URL(expiring);
    noExp.searchParams.delete('texp');
    const forgedPrivate = h.services.deliverySigner
      .sign(url('w_47/gallery/photo.jpg'), now + 600)
      .replace(/signature=[^&]+/, `signature=${randomBytes(32).toString('base64url')}`);
    const attempts: [string, string][] = [
      [`/${ws()}/w_41/gallery/photo.jpg`, 'TRANSFORMATION_SIGNATURE_REQUIRED'],
      [`/${ws()}//w_41//gallery/photo.jpg`, 'TRANSFORMATION_SIGNATURE_REQUIRED'],
      [`/${ws()}/w_41,h_41,c_fill/gallery/photo.jpg?v=1`, 'TRANSFORMATION_SIGNATURE_REQUIRED'],
      [`/${ws()}/zz_1/gallery/photo.jpg`, 'TRANSFORMATION_SIGNATURE_REQUIRED'],
      // The workspace id spelled with a percent-escape reaches the same workspace.
      [
        `/%${ws().charCodeAt(0).toString(16)}${ws().slice(1)}/w_41/gallery/photo.jpg`,
        'TRANSFORMATION_SIGNATURE_REQUIRED',
      ],
      [`/${ws()}-%77eb/w_41/photo.jpg`, 'TRANSFORMATION_SIGNATURE_REQUIRED'],
      [`/${ws()}-web/w_41/photo.jpg`, 'TRANSFORMATION_SIGNATURE_REQUIRED'],
      [`/${ws()}/w_41/gallery/photo.jpg?tsig=${randomBytes(32).toString('base64url')}`, 'INVALID_SIGNATURE'],
      [`/${ws()}/w_41/gallery/photo.jpg?tsig=short`, 'INVALID_SIGNATURE'],
      [`/${ws()}/w_41/gallery/photo.jpg?texp=${now + 60}`, 'INVALID_SIGNATURE'],
      // Signed for another path: the signature of w_42 on w_43, and on another file.
      [`/${ws()}/w_43/gallery/photo.jpg${signedW42.search}`, 'INVALID_SIGNATURE'],
      [`/${ws()}/w_42/gallery/other.jpg${signedW42.search}`, 'INVALID_SIGNATURE'],
      // Tampered tokens: one more digit.
      [`/${ws()}/w_420/gallery/photo.jpg${signedW42.search}`, 'INVALID_SIGNATURE'],
      // Another workspace's key, and this workspace's signature on another workspace's file.
      [pathAndQuery(await signDeliveryUrl(url('w_44/gallery/photo.jpg'), otherKey)), 'INVALID_SIGNATURE'],
      [`/${other.workspace_id}/w_42/gallery/photo.jpg${signedW42.search}`, 'INVALID_SIGNATURE'],
      // A made-up key of the right shape.
      [
        pathAndQuery(await signDeliveryUrl(url('w_44/gallery/photo.jpg'), `stw_dk_${'A'.repeat(43)}`)),
        'INVALID_SIGNATURE',
      ],
      [pathAndQuery(await signDeliveryUrl(url('w_45/gallery/photo.jpg'), key, { expiresAt: now - 5 })), 'URL_EXPIRED'],
      [tamperedExp.pathname + tamperedExp.search, 'INVALID_SIGNATURE'],
      [noExp.pathname + noExp.search, 'INVALID_SIGNATURE'],
      // Repeated parameters read differently by different parsers: never verified.
      [`${signedW42.pathname}${signedW42.search}&tsig=${signedW42.searchParams.get('tsig')}`, 'INVALID_SIGNATURE'],
      [pathAndQuery(forgedPrivate), 'INVALID_SIGNATURE'],
      [pathAndQuery(h.services.deliverySigner.sign(url('w_48/gallery/photo.jpg'), now - 5)), 'URL_EXPIRED'],
    ];
    const before = made();
    const hitsBefore = originQueries.length;
    // All at once: the check holds under parallel requests as it does one by one.
    const results = await Promise.all(attempts.map(([p]) => get(p)));
    results.forEach((r, i) => {
      assert.equal(r.status, 403, `${attempts[i][0]}: ${r.body.toString().slice(0, 200)}`);
      assert.equal(r.code, attempts[i][1], attempts[i][0]);
    });
    const head = await get(`/${ws()}/w_41/gallery/photo.jpg`, { method: 'HEAD' });
    assert.equal(head.status, 403);
    assert.equal(made(), before, 'nothing was rendered');
    assert.equal(originQueries.length, hitsBefore, 'no origin was asked');
  });

  test('signed URLs render: without expiry, with one, and URLs the service signed', async () => {
    const before = made();
    const forever = await signDeliveryUrl(`${base}/${ws()}/w_50,h_40,c_fill/gallery/photo.jpg`, key);
    const res = await get(forever);
    assert.equal(res.status, 200, res.body.toString().slice(0, 200));
    const meta = await sharp(res.body).metadata();
    assert.deepEqual([meta.width, meta.height], [50, 40]);
    const soon = await signDeliveryUrl(`${base}/${ws()}/w_51/gallery/photo.jpg`, key, { expiresIn: 300 });
    assert.equal((await get(soon)).status, 200);
    // The server's signer and the SDK's agree, byte for byte, and both follow the recipe in
    // docs/api/delivery.md, written out here by hand.
    assert.equal(signTransformUrl(key, `${base}/${ws()}/w_50,h_40,c_fill/gallery/photo.jpg`), forever);
    const path = `/${ws()}/w_53/gallery/photo.jpg`;
    const texp = Math.floor(Date.now() / 1000) + 3600;
    const tsig = createHmac('sha256', key).update(`${path}\n${texp}`).digest('base64url');
    assert.equal(
      await signDeliveryUrl(`${base}${path}`, key, { expiresAt: texp }),
      `${base}${path}?texp=${texp}&tsig=${tsig}`,
    );
    const srcPath = `/${ws()}-web/w_53/photo.jpg`;
    const srcSig = createHmac('sha256', key).update(`${srcPath}?a=1&b=2`).digest('base64url');
    assert.equal(await signDeliveryUrl(`${base}${srcPath}?a=1&b=2`, key), `${base}${srcPath}?a=1&b=2&tsig=${srcSig}`);
    assert.equal(signTransformUrl(key, `${base}${srcPath}?a=1&b=2`), `${base}${srcPath}?a=1&b=2&tsig=${srcSig}`);
    // A URL from signed-url (the service's own signature) opens the rendition of a public file.
    const record = (await call(h.app, 'GET', '/api/v1/files', { headers: priv() })).body.files[0];
    const minted = await call(h.app, 'POST', `/api/v1/files/${record.file_no}/signed-url`, {
      body: { expires_in: 60, transform: 'w_52' },
      headers: priv(),
    });
    assert.equal(minted.status, 200, minted.raw);
    const small = await get(minted.body.data.url);
    assert.equal(small.status, 200);
    assert.equal((await sharp(small.body).metadata()).width, 52);
    assert.equal(made(), before + 3, 'only the three URLs fetched were rendered');
  });

  test('a rendition held in memory after a signed request is still refused without its signature', async () => {
    const path = `/${ws()}/w_57/gallery/photo.jpg`;
    const signed = await signDeliveryUrl(`${base}${path}`, key);
    // Twice signed: the second answer comes from the delivery fast path (the lookup is held).
    assert.equal((await get(signed)).status, 200);
    const fast = h.services.deliveryCache.stats.fastHits;
    assert.equal((await get(signed)).status, 200);
    assert.equal(h.services.deliveryCache.stats.fastHits, fast + 1, 'the signed request was answered from memory');
    const attempts = await Promise.all([
      get(path),
      get(`${path}?tsig=AAAA`),
      get(path, { method: 'HEAD' }),
      get(path, { headers: { range: 'bytes=0-10' } }),
      get(path, { headers: { 'if-none-match': '*' } }),
    ]);
    for (const res of attempts) assert.equal(res.status, 403);
    assert.equal(attempts[0].code, 'TRANSFORMATION_SIGNATURE_REQUIRED');
    assert.equal(attempts[1].code, 'INVALID_SIGNATURE');
    assert.equal((await get(signed)).status, 200);
  });

  test('originals are still served unsigned, and a folder named like tokens through its record URL', async () => {
    assert.equal((await get(`/${ws()}/gallery/photo.jpg`)).status, 200);
    const rec = await add(ws(), 'odd.jpg', ['w_200']);
    assert.match(rec.url, /w%5F200/);
    assert.equal((await get(rec.url)).status, 200);
    // Shaped like tokens without being any ("my_photos"): the gate reads shapes, so the URL escapes it too.
    const shaped = await add(ws(), 'shaped.jpg', ['my_photos']);
    assert.match(shaped.url, /my%5Fphotos\/shaped\.jpg$/);
    assert.equal((await get(shaped.url)).status, 200);
    assert.equal((await get(`/${ws()}-web/photo.jpg`)).status, 200, "a source's original");
  });

  test("a source's query is signed with its path, and neither signature parameter reaches the origin", async () => {
    const signed = await signDeliveryUrl(`${base}/${ws()}-web/w_60/photo.jpg?v=1`, key);
    originQueries.length = 0;
    const res = await get(signed);
    assert.equal(res.status, 200, res.body.toString().slice(0, 200));
    assert.deepEqual(originQueries, ['v=1']);
    const changed = new URL(signed);
    changed.searchParams.set('v', '2');
    const refused = await get(changed.href);
    assert.equal(refused.code, 'INVALID_SIGNATURE', 'another query is another origin answer');
    assert.deepEqual(originQueries, ['v=1']);
  });

  test('record thumbnails are signed and open, for public and private files, uploads and lists', async () => {
    const form = new FormData();
    form.append('file', new Blob([new Uint8Array(photo)], { type: 'image/jpeg' }), 'up.jpg');
    form.append('file_name', 'up.jpg');
    const up = await fetch(`${base}/api/v1/uploads`, { method: 'POST', body: form, headers: pub() });
    assert.equal(up.status, 201);
    const uploaded = (await up.json()) as { thumbnail: string; file_no: string };
    assert.match(uploaded.thumbnail, /[?&]tsig=/);
    assert.equal((await get(uploaded.thumbnail)).status, 200, 'the upload answer');
    const one = await call(h.app, 'GET', `/api/v1/files/${uploaded.file_no}`, { headers: priv() });
    assert.equal((await get(one.body.data.thumbnail)).status, 200, 'get a file');
    const priv2 = await add(ws(), 'private.jpg');
    const made2 = await call(h.app, 'PATCH', `/api/v1/files/${priv2.file_no}`, {
      body: { is_private: true },
      headers: priv(),
    });
    assert.equal(made2.status, 200, made2.raw);
    const list = await call(h.app, 'GET', '/api/v1/files?limit=100', { headers: priv() });
    const thumbs = list.body.files.map((f: { thumbnail: string }) => f.thumbnail);
    assert.ok(thumbs.length >= 4);
    for (const t of thumbs) {
      const res = await get(t);
      assert.equal(res.status, 200, `${t}: ${res.body.toString().slice(0, 200)}`);
    }
    // The thumbnail of a public file is one stable URL (no expiry): caches keep it.
    const again = await call(h.app, 'GET', `/api/v1/files/${uploaded.file_no}`, { headers: priv() });
    assert.equal(again.body.data.thumbnail, one.body.data.thumbnail);
    assert.ok(!new URL(one.body.data.thumbnail).searchParams.has('texp'));
  });

  test('rotation: URLs signed with the old key stop working; thumbnails follow the new key', async () => {
    const old = await signDeliveryUrl(`${base}/${ws()}/w_70/gallery/photo.jpg`, key);
    const rotated = await call(h.app, 'POST', '/api/v1/workspace/delivery-key/rotate', { headers: priv() });
    assert.equal(rotated.status, 200);
    const fresh = rotated.body.data.delivery_key as string;
    assert.notEqual(fresh, key);
    assert.equal((await get(old)).code, 'INVALID_SIGNATURE');
    assert.equal((await get(await signDeliveryUrl(old, fresh))).status, 200);
    const list = await call(h.app, 'GET', '/api/v1/files', { headers: priv() });
    const thumb = list.body.files.find((f: { is_private: boolean }) => !f.is_private).thumbnail;
    assert.equal((await get(thumb)).status, 200);
    key = fresh;
  });

  test('the key never appears in another answer or in any log line', async () => {
    // Someone pasting the key into a URL: still kept out of the logs.
    await get(`/${ws()}/gallery/photo.jpg?key=${key}`);
    const answers = await Promise.all([
      call(h.app, 'GET', '/api/v1/workspace', { headers: priv() }),
      call(h.app, 'PATCH', '/api/v1/workspace', { body: { signed_transformations: true }, headers: priv() }),
      call(h.app, 'GET', '/api/v1/files?limit=100', { headers: priv() }),
      call(h.app, 'GET', '/openapi.json'),
    ]);
    for (const a of answers) assert.ok(!a.raw.includes(key), a.raw.slice(0, 200));
    const tsig = new URL(await signDeliveryUrl(`${base}/${ws()}/w_71/gallery/photo.jpg`, key)).searchParams.get(
      'tsig',
    )!;
    assert.equal((await get(`/${ws()}/w_71/gallery/photo.jpg?tsig=${tsig}`)).status, 200);
    const all = h.logs.join('\n');
    assert.ok(h.logs.length > 50);
    assert.ok(!all.includes(key), 'the delivery key is in a log line');
    assert.ok(!all.includes(key.slice(7)), 'the delivery key (without its prefix) is in a log line');
    assert.ok(!all.includes(tsig), 'a tsig value is in a log line');
    assert.match(all, /w_71\/gallery\/photo\.jpg\?tsig=\[redacted\]/, 'the path stays in the log');
  });

  test('turned off: unsigned transformations work again and thumbnails are plain', async () => {
    await setting(false);
    assert.equal((await get(`/${ws()}/w_80/gallery/photo.jpg`)).status, 200);
    const list = await call(h.app, 'GET', '/api/v1/files', { headers: priv() });
    const pub1 = list.body.files.find((f: { is_private: boolean }) => !f.is_private);
    assert.ok(!pub1.thumbnail.includes('tsig'));
  });
});

for (const dialect of DIALECTS) {
  describe(`migration 0008 and the delivery key on ${dialect.name}`, { skip: dialect.skip }, () => {
    test('an existing workspace starts with the setting off; the first key is made once under a race', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'stowage-sig-'));
      const pg = dialect.name === 'postgres' ? await freshPostgres() : undefined;
      const db = openDatabase({ databaseUrl: pg?.url, dataDir: dir });
      try {
        await migrateTo(db.kysely, '0007_scale');
        const id = newShortId();
        const at = new Date().toISOString();
        await sql`insert into workspaces (id, name, webhook_secret, quota_bytes, max_file_size, created_at, updated_at, used_bytes, reserved_bytes)
                  values (${id}, 'old', 'x', null, null, ${at}, ${at}, 0, 0)`.execute(db.kysely);
        await migrateToLatest(db.kysely);
        const box = new SecretBox(randomBytes(32), []);
        const a = new WorkspaceService(db, box);
        const b = new WorkspaceService(db, box);
        assert.equal((await a.settings(id)).signed_transformations, false);
        assert.deepEqual(await a.transformPolicy(id), { required: false, key: null });
        // Two nodes asking for the first key at once agree on one.
        const keys = await Promise.all(Array.from({ length: 8 }, (_, i) => (i % 2 ? a : b).deliveryKey(id)));
        assert.equal(new Set(keys).size, 1);
        const raw = await sql<{ delivery_key: string }>`select delivery_key from workspaces where id = ${id}`.execute(
          db.kysely,
        );
        assert.ok(!raw.rows[0].delivery_key.includes(keys[0].slice(7)), 'stored sealed, not in plain text');
        await a.updateSettings(id, { signed_transformations: true });
        assert.deepEqual(await a.transformPolicy(id), { required: true, key: keys[0] });
      } finally {
        await db.close();
        await pg?.drop();
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
}
