// Transformations through HTTP (a real socket, the fast path included): token chains across
// segments, which segments are tokens as requested (percent-escapes), folders that look like
// tokens, and the client hints' default width and dpr_auto with their Vary and cache keys.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import sharp from 'sharp';
import { deliveryPath } from '../src/services/file-records.ts';
import { addFile, DIALECTS, type Harness, makeHarness } from './helpers/harness.ts';

for (const dialect of DIALECTS) {
  describe(`transformations over HTTP on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    let base: string;
    const get = async (path: string, headers: Record<string, string> = {}) => {
      const res = await fetch(`${base}/${h.ws.workspace_id}/${path}`, { headers });
      const body = Buffer.from(await res.arrayBuffer());
      const json = (res.headers.get('content-type') ?? '').includes('json') ? JSON.parse(body.toString()) : undefined;
      return { status: res.status, headers: res.headers, body, json };
    };
    const size = async (path: string, headers: Record<string, string> = {}) => {
      const res = await get(path, headers);
      assert.equal(res.status, 200, `${path}: ${res.body.toString().slice(0, 200)}`);
      const meta = await sharp(res.body).metadata();
      return [meta.width, meta.height];
    };

    before(async () => {
      h = await makeHarness(dialect.name);
      base = await h.app.listen({ host: '127.0.0.1', port: 0 });
      const photo = await sharp({ create: { width: 2000, height: 1500, channels: 3, background: '#3060a0' } })
        .jpeg()
        .toBuffer();
      await addFile(h, 'photo.jpg', photo);
      await addFile(h, 'in-folder.jpg', photo, { folder: ['w_100'] });
      await addFile(h, 'nested.jpg', photo, { folder: ['gallery', 'r_90'] });
    });
    after(async () => h?.close());

    test('a chain across segments is one transformation, in order', async () => {
      assert.deepEqual(await size('w_400/r_90/photo.jpg'), [300, 400]);
      assert.deepEqual(await size('w_400,r_90/photo.jpg'), [300, 400]);
      assert.deepEqual(await size('w_800/w_400/photo.jpg'), [400, 300], 'the later duplicate wins');
    });

    test('percent-escapes: a value escaped outside a layer names a folder; a layer text keeps its escapes', async () => {
      assert.equal((await get('w_200%2Ch_100/photo.jpg')).status, 404, 'the folder "w_200,h_100" (none here)');
      assert.deepEqual(await size('w_200,h_100/photo.jpg'), [200, 100]);
      const open = await get('l_text:Arial_20:a%2Cb%20c,w_100/photo.jpg');
      assert.equal(open.status, 400);
      assert.match(open.json.message, /"l_text:Arial_20:a%2Cb%20c" opens a layer that no fl_layer_apply closes/);
      const refused = await get('w_200,zz_1/photo.jpg');
      assert.equal(refused.status, 400);
      assert.match(refused.json.message, /"zz_1" is not a known transformation/);
    });

    test('folders that look like tokens stay reachable', async () => {
      // The record URL escapes the first folder's underscore.
      assert.equal(deliveryPath('w_100', 'in-folder.jpg'), 'w%5F100/in-folder.jpg');
      assert.deepEqual(await size('w%5F100/in-folder.jpg'), [2000, 1500]);
      assert.deepEqual(await size('w_100/in-folder.jpg'), [2000, 1500], 'no root file: the folder');
      // Tokens, then a folder that reads as tokens: the longest reading names no file, a shorter one does.
      assert.deepEqual(await size('w_200/w_100/in-folder.jpg'), [200, 150]);
      assert.deepEqual(await size('w_300/gallery/r_90/nested.jpg'), [300, 225]);
      assert.equal((await get('w_200/r_90/missing.jpg')).status, 404);
    });

    test('no w_, h_ or ar_: the default width from the client hints, with Vary and its own cache key', async () => {
      const hinted = await get('f_png/photo.jpg', { 'sec-ch-width': '300' });
      assert.equal(hinted.status, 200);
      assert.equal((await sharp(hinted.body).metadata()).width, 320, 'rounded up to a width bucket');
      assert.equal(hinted.headers.get('vary'), 'Sec-CH-Width, Width, Save-Data, User-Agent');
      const iphone = 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X)';
      for (let i = 0; i < 2; i++) {
        // Twice each: the second answers come from memory (the fast path), keyed by the hints too.
        assert.deepEqual(await size('f_png/photo.jpg', { 'user-agent': iphone }), [1080, 810]);
        assert.deepEqual(await size('f_png/photo.jpg', { 'user-agent': iphone, 'save-data': 'on' }), [480, 360]);
        assert.deepEqual(await size('f_png/photo.jpg', { width: '1300' }), [1440, 1080]);
        assert.deepEqual(await size('f_png/photo.jpg'), [2000, 1500], 'a script gets the image at its size');
      }
      const explicit = await get('w_300,f_png/photo.jpg', { 'sec-ch-width': '1000' });
      assert.equal(explicit.headers.get('vary'), 'Origin', 'w_ given: no hint was used');
      assert.equal((await sharp(explicit.body).metadata()).width, 300);
      const original = await get('photo.jpg', { 'user-agent': iphone });
      assert.deepEqual(await size('photo.jpg', { 'user-agent': iphone }), [2000, 1500], 'an original is never resized');
      assert.equal(original.headers.get('vary'), 'Origin');
    });

    test('dpr_auto takes Sec-CH-DPR (or DPR) and varies on it', async () => {
      const two = await get('w_100,dpr_auto/photo.jpg', { 'sec-ch-dpr': '2' });
      assert.equal((await sharp(two.body).metadata()).width, 200);
      assert.equal(two.headers.get('vary'), 'Sec-CH-DPR, DPR');
      assert.deepEqual(await size('w_100,dpr_auto/photo.jpg', { dpr: '3' }), [300, 225]);
      assert.deepEqual(await size('w_100,dpr_auto/photo.jpg'), [100, 75]);
      assert.deepEqual(await size('w_100,dpr_2/photo.jpg'), [200, 150]);
    });
  });
}
