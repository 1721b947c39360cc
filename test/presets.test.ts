// Transformation presets (issue 20 item 2, docs/api/presets.md), on both databases: the API
// (CRUD under the private key, validation when written, the cap), delivery of `t_{name}` (the
// same rendition as the tokens it stands for, per workspace, forgotten when the preset changes)
// and, from the attacker's side, what presets open and do not open when a workspace requires
// signed transformations.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import sharp from 'sharp';
import { signTransformUrl } from '../src/crypto/transform-url.ts';
import type { ResolvedAddress } from '../src/outbound/guard.ts';
import { PresetService } from '../src/services/presets.ts';
import type { CreatedWorkspace } from '../src/services/workspaces.ts';
import { addFile, DIALECTS, type Harness, makeHarness } from './helpers/harness.ts';
import { call } from './helpers/http.ts';
import { localServer } from './helpers/servers.ts';

const resolver = async (host: string): Promise<ResolvedAddress[]> => {
  if (host === 'origin.test') return [{ address: '127.0.0.1', family: 4 }];
  throw Object.assign(new Error('nx'), { code: 'ENOTFOUND' });
};

for (const dialect of DIALECTS) {
  describe(`presets on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    let base: string;
    let other: CreatedWorkspace;
    let photo: Buffer;
    let origin: Awaited<ReturnType<typeof localServer>>;
    const ws = () => h.ws.workspace_id;
    const priv = () => h.auth;
    const otherPriv = () => ({ authorization: `Bearer ${other.private_key}` });
    const put = (name: string, transformation: unknown, headers = priv()) =>
      call(h.app, 'PUT', `/api/v1/presets/${name}`, { body: { transformation }, headers });
    const get = async (path: string) => {
      const res = await fetch(`${base}${path}`);
      const body = Buffer.from(await res.arrayBuffer());
      let json: { errorCode?: string; message?: string } | undefined;
      try {
        json = JSON.parse(body.toString());
      } catch {}
      return { status: res.status, body, code: json?.errorCode, message: json?.message, text: body.toString() };
    };
    const width = async (body: Buffer) => (await sharp(body).metadata()).width;
    const made = () => h.services.delivery.stats.renditionsMade;

    before(async () => {
      h = await makeHarness(dialect.name, { config: { outboundAllow: ['origin.test'] }, services: { resolver } });
      base = await h.app.listen({ host: '127.0.0.1', port: 0 });
      other = await h.services.workspaces.create('Other');
      photo = await sharp({ create: { width: 400, height: 300, channels: 3, background: '#2a7f4f' } })
        .jpeg()
        .toBuffer();
      await addFile(h, 'photo.jpg', photo, { folder: ['shop'] });
      await addFile(h, 'photo.jpg', photo, { folder: ['shop'], workspaceId: other.workspace_id });
      origin = await localServer((req, res) => {
        if (req.url === '/img/photo.jpg') res.writeHead(200, { 'content-type': 'image/jpeg' }).end(photo);
        else res.writeHead(404).end();
      });
      const src = await call(h.app, 'POST', '/api/v1/sources', {
        body: {
          name: 'web',
          type: 'image_source',
          configuration: { base_url: `http://origin.test:${origin.port}/img` },
        },
        headers: priv(),
      });
      assert.equal(src.status, 201, src.raw);
    });
    after(async () => {
      await h?.close();
      await origin?.close();
    });

    test('create, read, list, replace (idempotent), delete', async () => {
      const created = await put('thumb', ' c_fill , w_120,h_80');
      assert.equal(created.status, 201, created.raw);
      assert.equal(created.body.data.name, 'thumb');
      assert.equal(created.body.data.transformation, 'c_fill,w_120,h_80', 'tokens trimmed');
      assert.equal(created.body.data.created_at, created.body.data.updated_at);
      const again = await put('thumb', 'c_fill,w_120,h_80');
      assert.equal(again.status, 200, 'the same PUT again replaces');
      assert.equal(again.body.data.created_at, created.body.data.created_at);
      assert.equal((await put('a-first_1', 'q_80')).status, 201);

      const one = await call(h.app, 'GET', '/api/v1/presets/thumb', { headers: priv() });
      assert.equal(one.status, 200);
      assert.deepEqual(one.body.data, again.body.data);
      const list = await call(h.app, 'GET', '/api/v1/presets', { headers: priv() });
      assert.equal(list.status, 200);
      assert.deepEqual(
        list.body.data.presets.map((p: { name: string }) => p.name),
        ['a-first_1', 'thumb'],
      );
      assert.equal(list.body.data.max_presets, 100);

      assert.equal((await call(h.app, 'DELETE', '/api/v1/presets/a-first_1', { headers: priv() })).status, 200);
      const gone = await call(h.app, 'GET', '/api/v1/presets/a-first_1', { headers: priv() });
      assert.equal(gone.status, 404);
      assert.equal(gone.body.errorCode, 'PRESET_NOT_FOUND');
      assert.equal(gone.body.success, false);
      const twice = await call(h.app, 'DELETE', '/api/v1/presets/a-first_1', { headers: priv() });
      assert.equal(twice.status, 404);
      assert.equal(twice.body.errorCode, 'PRESET_NOT_FOUND');
    });

    test('a broken preset is 400 when written, naming what is wrong; nothing is stored', async () => {
      const cases: [string, unknown, RegExp][] = [
        ['bad1', 'w_100,zz_1', /zz_1/],
        ['bad2', 'w_abc', /w_abc/],
        ['bad3', 'w_100,t_thumb', /cannot contain another/],
        ['bad4', 'w_100,,h_10', /empty token/],
        ['bad5', '', /transformation/],
        ['bad6', Array.from({ length: 400 }, () => 'w_1').join(','), /1024|4096/],
        ['bad7', 42, /transformation/],
      ];
      for (const [name, text, why] of cases) {
        const res = await put(name, text);
        assert.equal(res.status, 400, `${name}: ${res.raw}`);
        assert.equal(res.body.errorCode, 'VALIDATION_FAILED', name);
        assert.match(res.body.message, why, name);
      }
      for (const name of ['Thumb', '-x', '_x', 'a.b', `a${'b'.repeat(64)}`, 'a%20b']) {
        const res = await put(name, 'w_10');
        assert.equal(res.status, 400, `${name}: ${res.raw}`);
        assert.equal(res.body.errorCode, 'VALIDATION_FAILED');
      }
      const extra = await call(h.app, 'PUT', '/api/v1/presets/okname', {
        body: { transformation: 'w_10', other: 1 },
        headers: priv(),
      });
      assert.equal(extra.status, 400);
      const list = await call(h.app, 'GET', '/api/v1/presets', { headers: priv() });
      assert.deepEqual(
        list.body.data.presets.map((p: { name: string }) => p.name),
        ['thumb'],
      );
    });

    test('only the private key of the workspace: not the public key, an upload token, or another workspace', async () => {
      const token = await call(h.app, 'POST', '/api/v1/generate-token', {
        body: { file_name: 'x.jpg' },
        headers: priv(),
      });
      assert.equal(token.status, 201, token.raw);
      const denied: [Record<string, string>, number][] = [
        [{}, 401],
        [{ authorization: `Bearer ${h.ws.public_key}` }, 403],
        [{ 'x-api-key': h.ws.public_key }, 403],
        [{ authorization: `Bearer ${token.body.token}` }, 401],
      ];
      for (const [headers, status] of denied) {
        for (const [method, url, body] of [
          ['PUT', '/api/v1/presets/evil', { transformation: 'w_4000,h_4000' }],
          ['GET', '/api/v1/presets', undefined],
          ['GET', '/api/v1/presets/thumb', undefined],
          ['DELETE', '/api/v1/presets/thumb', undefined],
        ] as const) {
          const res = await call(h.app, method, url, { body, headers });
          assert.equal(res.status, status, `${method} ${url} with ${JSON.stringify(headers).slice(0, 30)}`);
          assert.ok(!res.raw.includes('c_fill'), 'no preset text in a refusal');
        }
      }
      assert.equal((await call(h.app, 'GET', '/api/v1/presets/evil', { headers: priv() })).status, 404);
      // Another workspace's private key sees its own (empty) list, and none of A's presets.
      const theirs = await call(h.app, 'GET', '/api/v1/presets', { headers: otherPriv() });
      assert.deepEqual(theirs.body.data.presets, []);
      assert.equal((await call(h.app, 'GET', '/api/v1/presets/thumb', { headers: otherPriv() })).status, 404);
      assert.equal((await call(h.app, 'DELETE', '/api/v1/presets/thumb', { headers: otherPriv() })).status, 404);
      assert.equal((await call(h.app, 'GET', '/api/v1/presets/thumb', { headers: priv() })).status, 200);
    });

    test('t_{name} delivers the very rendition its tokens do; more tokens add to it, later ones win', async () => {
      const before = made();
      const viaPreset = await get(`/${ws()}/t_thumb/shop/photo.jpg`);
      assert.equal(viaPreset.status, 200, viaPreset.text);
      assert.equal(made(), before + 1);
      const spelled = await get(`/${ws()}/c_fill,w_120,h_80/shop/photo.jpg`);
      assert.equal(spelled.status, 200);
      assert.ok(viaPreset.body.equals(spelled.body), 'same bytes');
      assert.equal(made(), before + 1, 'one rendition for both spellings');
      const meta = await sharp(viaPreset.body).metadata();
      assert.deepEqual([meta.width, meta.height], [120, 80]);

      const gray = await get(`/${ws()}/t_thumb,e_grayscale/shop/photo.jpg`);
      assert.equal(gray.status, 200, gray.text);
      assert.equal((await sharp(gray.body).metadata()).width, 120);
      assert.ok(!gray.body.equals(viaPreset.body));
      const wider = await get(`/${ws()}/t_thumb,w_60/shop/photo.jpg`);
      assert.equal(wider.status, 200, wider.text);
      assert.equal(await width(wider.body), 60, 'the later w_ wins');
      const webp = await get(`/${ws()}/t_thumb,f_webp/shop/photo.jpg`);
      assert.equal((await sharp(webp.body).metadata()).format, 'webp');
    });

    test("presets are per workspace: A's name does not resolve for B", async () => {
      const res = await get(`/${other.workspace_id}/t_thumb/shop/photo.jpg`);
      assert.equal(res.status, 400);
      assert.equal(res.code, 'TRANSFORM_PRESET_NOT_FOUND');
      assert.ok(!res.text.includes('c_fill'));
      assert.equal((await put('thumb', 'w_33', otherPriv())).status, 201);
      const theirs = await get(`/${other.workspace_id}/t_thumb/shop/photo.jpg`);
      assert.equal(theirs.status, 200);
      assert.equal(await width(theirs.body), 33);
      const ours = await get(`/${ws()}/t_thumb/shop/photo.jpg`);
      assert.equal(await width(ours.body), 120, "B's preset changes nothing for A");
    });

    test('an unknown preset is one 400, whether the file, the workspace or the name exists or not', async () => {
      const answers = await Promise.all([
        get(`/${ws()}/t_nope/shop/photo.jpg`),
        get(`/${ws()}/t_nope/shop/missing.jpg`),
        get(`/${ws()}/t_nope,w_10/shop/photo.jpg`),
        get('/ZZZZZZZZZZZZ/t_nope/shop/photo.jpg'),
      ]);
      for (const a of answers) {
        assert.equal(a.status, 400, a.text);
        assert.equal(a.code, 'TRANSFORM_PRESET_NOT_FOUND');
        assert.equal(a.message, 'transform: "t_nope" is not a preset of this workspace');
      }
      const odd = await get(`/${ws()}/t_${'x'.repeat(300)}/shop/photo.jpg`);
      assert.equal(odd.status, 400);
      assert.ok(odd.text.length < 400);
    });

    test('a change is seen at once on this node, remembered lookups included; other nodes within the TTL', async () => {
      const first = await get(`/${ws()}/t_thumb/shop/photo.jpg`);
      assert.equal(await width(first.body), 120);
      // Remembered now (lookup and bytes): the next answer could come from memory.
      assert.equal(await width((await get(`/${ws()}/t_thumb/shop/photo.jpg`)).body), 120);
      const node2 = new PresetService(h.services.db, { ttlMs: 300 });
      assert.equal(await node2.expand(ws(), 't_thumb'), 'c_fill,w_120,h_80');
      assert.equal((await put('thumb', 'c_fill,w_90,h_90')).status, 200);
      const changed = await get(`/${ws()}/t_thumb/shop/photo.jpg`);
      const meta = await sharp(changed.body).metadata();
      assert.deepEqual([meta.width, meta.height], [90, 90]);
      assert.equal(await node2.expand(ws(), 't_thumb'), 'c_fill,w_120,h_80', 'node 2 still has its copy');
      const loads = node2.stats.loads;
      await new Promise((r) => setTimeout(r, 350));
      assert.equal(await node2.expand(ws(), 't_thumb'), 'c_fill,w_90,h_90');
      assert.equal(await node2.expand(ws(), 't_thumb,q_50'), 'c_fill,w_90,h_90,q_50');
      assert.equal(node2.stats.loads, loads + 1, 'one read per TTL');
      assert.equal(await node2.expand(ws(), 'w_10'), 'w_10');
      assert.equal(node2.stats.loads, loads + 1, 'no read without t_');

      assert.equal((await call(h.app, 'DELETE', '/api/v1/presets/thumb', { headers: priv() })).status, 200);
      const deleted = await get(`/${ws()}/t_thumb/shop/photo.jpg`);
      assert.equal(deleted.status, 400);
      assert.equal(deleted.code, 'TRANSFORM_PRESET_NOT_FOUND');
      assert.equal((await put('thumb', 'c_fill,w_120,h_80')).status, 201);
    });

    test('at most 100 presets a workspace; replacing one at the cap works; parallel creates cannot pass it', async () => {
      const fresh = await h.services.workspaces.create('Cap');
      const headers = { authorization: `Bearer ${fresh.private_key}` };
      for (let i = 0; i < 97; i++) assert.equal((await put(`p${i}`, `w_${i + 1}`, headers)).status, 201);
      const racing = await Promise.all(Array.from({ length: 8 }, (_, i) => put(`race${i}`, 'w_5', headers)));
      assert.deepEqual(racing.map((r) => r.status).sort(), [201, 201, 201, 409, 409, 409, 409, 409]);
      const over = racing.find((r) => r.status === 409)!;
      assert.equal(over.body.errorCode, 'PRESET_LIMIT_REACHED');
      assert.match(over.body.message, /100 presets/);
      const list = await call(h.app, 'GET', '/api/v1/presets', { headers });
      assert.equal(list.body.data.presets.length, 100);
      assert.equal((await put('p0', 'w_7', headers)).status, 200, 'a replacement is not a new preset');
      assert.equal((await call(h.app, 'DELETE', '/api/v1/presets/p1', { headers })).status, 200);
      assert.equal((await put('another', 'w_8', headers)).status, 201);
      assert.equal((await put('one-more', 'w_8', headers)).status, 409);
    });

    test('a folder named like a preset reference stays a folder in record URLs', async () => {
      const inFolder = await addFile(h, 'photo.jpg', photo.subarray(0, photo.length - 1), { folder: ['t_thumb'] });
      await addFile(h, 'photo.jpg', photo);
      const url = new URL(inFolder.url);
      assert.match(url.pathname, /\/t%5Fthumb\/photo\.jpg$/);
      const res = await get(url.pathname);
      assert.equal(res.status, 200);
      assert.equal(res.body.length, photo.length - 1, "the folder's file, as stored");
      // Written by hand, the same segment is the preset, applied to the file at the root.
      assert.equal(await width((await get(`/${ws()}/t_thumb/photo.jpg`)).body), 120);
    });

    test('signed URLs of private files may name presets; an unknown one is refused when signing', async () => {
      const file = await addFile(h, 'secret.jpg', photo, { folder: ['private'] });
      const patch = await call(h.app, 'PATCH', `/api/v1/files/${file.file_no}`, {
        body: { is_private: true },
        headers: priv(),
      });
      assert.equal(patch.status, 200, patch.raw);
      const signed = await call(h.app, 'POST', `/api/v1/files/${file.file_no}/signed-url`, {
        body: { transform: 't_thumb,f_png', expires_in: 60 },
        headers: priv(),
      });
      assert.equal(signed.status, 200, signed.raw);
      const u = new URL(signed.body.data?.url ?? signed.body.url);
      assert.match(u.pathname, /\/t_thumb,f_png\/private\/secret\.jpg$/);
      const res = await get(`${u.pathname}${u.search}`);
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(
        [(await sharp(res.body).metadata()).width, (await sharp(res.body).metadata()).format],
        [120, 'png'],
      );
      assert.equal((await get(u.pathname)).status, 403, 'unsigned: the file is private');
      const unknown = await call(h.app, 'POST', `/api/v1/files/${file.file_no}/signed-url`, {
        body: { transform: 't_nope' },
        headers: priv(),
      });
      assert.equal(unknown.status, 400);
      assert.equal(unknown.body.errorCode, 'TRANSFORM_PRESET_NOT_FOUND');
    });

    test('t_ works on a source too', async () => {
      const res = await get(`/${ws()}-web/t_thumb,f_png/photo.jpg`);
      assert.equal(res.status, 200, res.text);
      const meta = await sharp(res.body).metadata();
      assert.deepEqual([meta.width, meta.height, meta.format], [120, 80, 'png']);
      const unknown = await get(`/${ws()}-web/t_nope/photo.jpg`);
      assert.equal(unknown.status, 400);
      assert.equal(unknown.code, 'TRANSFORM_PRESET_NOT_FOUND');
    });

    describe('with signed transformations required', () => {
      before(async () => {
        const res = await call(h.app, 'PATCH', '/api/v1/workspace', {
          body: { signed_transformations: true },
          headers: priv(),
        });
        assert.equal(res.status, 200, res.raw);
        assert.equal((await put('gray', 'e_grayscale')).status, 201);
      });

      test('URLs of presets alone are served unsigned', async () => {
        const one = await get(`/${ws()}/t_thumb/shop/photo.jpg`);
        assert.equal(one.status, 200, one.text);
        assert.equal(await width(one.body), 120);
        const two = await get(`/${ws()}/t_thumb,t_gray/shop/photo.jpg`);
        assert.equal(two.status, 200, two.text);
        const split = await get(`/${ws()}/t_thumb/t_gray/shop/photo.jpg`);
        assert.equal(split.status, 200, `two presets in two segments: ${split.text}`);
        assert.equal(await width(split.body), 120);
        // A stray tsig on such a URL changes nothing.
        assert.equal((await get(`/${ws()}/t_gray/shop/photo.jpg?tsig=forged`)).status, 200);
        assert.equal((await get(`/${ws()}-web/t_thumb/photo.jpg`)).status, 200, 'from a source too');
        assert.equal((await get(`/${ws()}-web/t_thumb,w_5/photo.jpg`)).status, 403);
      });

      test('a preset mixed with a raw token, or a name spelled as no preset can be, needs a signature; nothing is rendered', async () => {
        const before = made();
        for (const path of [
          `/${ws()}/t_thumb,w_4000/shop/photo.jpg`,
          `/${ws()}/w_4000,t_thumb/shop/photo.jpg`,
          `/${ws()}/w_4000/shop/photo.jpg`,
          `/${ws()}/t_Thumb/shop/photo.jpg`,
          `/${ws()}/t_thumb,t_/shop/photo.jpg`,
          // Three presets or more: a stranger could combine them into too many renditions.
          `/${ws()}/t_thumb,t_gray,t_thumb/shop/photo.jpg`,
          `/${ws()}/${Array.from({ length: 9 }, () => 't_gray').join(',')}/shop/photo.jpg`,
          // Token segments are one list: a raw token in a later segment is a raw token all the same.
          `/${ws()}/t_thumb/w_4000/shop/photo.jpg`,
          `/${ws()}/t_thumb/t_gray/t_thumb/shop/photo.jpg`,
        ]) {
          const res = await get(path);
          assert.equal(res.status, 403, `${path}: ${res.text}`);
          assert.equal(res.code, 'TRANSFORMATION_SIGNATURE_REQUIRED', path);
        }
        // Signed with the delivery key, any combination is served.
        const key = (await call(h.app, 'GET', '/api/v1/workspace/delivery-key', { headers: priv() })).body.data
          .delivery_key;
        const signed = new URL(signTransformUrl(key, `${base}/${ws()}/t_thumb,t_gray,w_50/shop/photo.jpg`));
        const res = await get(`${signed.pathname}${signed.search}`);
        assert.equal(res.status, 200, res.text);
        assert.equal(await width(res.body), 50);
        assert.equal(made(), before + 1);
        // Not shaped like tokens at all: a folder of that name, which does not exist.
        assert.equal((await get(`/${ws()}/t_thumb,/shop/photo.jpg`)).status, 404);
        assert.equal(made(), before + 1);
      });

      test('an unknown preset says nothing about files, other presets or the setting', async () => {
        const before = made();
        const answers = await Promise.all([
          get(`/${ws()}/t_secret/shop/photo.jpg`),
          get(`/${ws()}/t_secret/shop/missing.jpg`),
          get(`/${other.workspace_id}/t_secret/shop/photo.jpg`),
        ]);
        for (const a of answers) {
          assert.equal(a.status, 400, a.text);
          assert.equal(a.code, 'TRANSFORM_PRESET_NOT_FOUND');
          assert.ok(!/thumb|gray|c_fill|grayscale/.test(a.text), a.text);
        }
        assert.deepEqual(
          answers.map((a) => a.text),
          [answers[0].text, answers[0].text, answers[0].text],
        );
        assert.equal(made(), before);
      });
    });

    test('the routes are in /openapi.json', async () => {
      const doc = (await call(h.app, 'GET', '/openapi.json')).body;
      assert.ok(doc.paths['/api/v1/presets']?.get);
      const one = doc.paths['/api/v1/presets/{name}'];
      assert.ok(one?.get && one.put && one.delete);
      assert.ok(JSON.stringify(one.put).includes('"201"'));
    });
  });
}
