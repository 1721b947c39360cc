// Upload tokens (POST /api/v1/generate-token, POST /api/v1/uploads/{token}) as the hosted docs
// define them, and the decisions they leave open: single use (atomic under parallel use), a
// failed upload gives the token back, revocation with the minting key, forgery and expiry.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { DIALECTS, type Harness, makeHarness } from './helpers/harness.ts';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

for (const dialect of DIALECTS) {
  describe(`upload tokens on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    let base: string;

    before(async () => {
      h = await makeHarness(dialect.name, { config: { publicUrl: 'https://media.example.com' } });
      base = await h.app.listen({ host: '127.0.0.1', port: 0 });
    });
    after(() => h?.close());

    const mint = async (body: Record<string, unknown>, key = h.ws.private_key) => {
      const res = await fetch(`${base}/api/v1/generate-token`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as any };
    };
    const send = async (token: string, data: BodyInit | null, headers: Record<string, string> = {}) => {
      const res = await fetch(`${base}/api/v1/uploads/${token}`, {
        method: 'POST',
        body: data,
        headers: { 'content-type': 'application/octet-stream', ...headers },
        duplex: 'half',
      } as RequestInit);
      return { status: res.status, body: (await res.json()) as any, headers: res.headers };
    };
    const bytesOf = async (fileNo: string) => {
      const row = await h.services.db.kysely
        .selectFrom('files')
        .innerJoin('blobs', 'blobs.id', 'files.blob_id')
        .select('blobs.storage_key')
        .where('files.file_no', '=', fileNo)
        .executeTakeFirstOrThrow();
      const chunks: Buffer[] = [];
      for await (const c of await h.services.storage.get(row.storage_key)) chunks.push(c as Buffer);
      return Buffer.concat(chunks);
    };
    const tokenRow = async (token: string) =>
      h.services.db.kysely
        .selectFrom('upload_tokens')
        .selectAll()
        .where('id', '=', token.slice(7, 29))
        .executeTakeFirstOrThrow();

    test('generate-token: 201 with the documented fields; the policy echoes the request; defaults 5 MiB and 300 s', async () => {
      const before = Math.floor(Date.now() / 1000);
      const res = await mint({
        file_name: 'avatar.jpg',
        folder: 'user-uploads/avatars/',
        tags: ['user-upload', 'avatar'],
        allow_override: { tags: true },
      });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      const t = res.body;
      assert.deepEqual(Object.keys(t).sort(), [
        'expire_at',
        'policy',
        'public_key',
        'signature',
        'token',
        'upload_url',
        'workspace_id',
      ]);
      assert.match(t.token, /^stw_ut_[0-9A-Za-z]{22}\.[A-Za-z0-9_-]{43}$/);
      assert.ok(t.token.endsWith(`.${t.signature}`));
      assert.equal(t.workspace_id, h.ws.workspace_id);
      assert.equal(t.upload_url, `https://media.example.com/api/v1/uploads/${t.token}`);
      assert.ok(t.expire_at >= before + 300 && t.expire_at <= before + 302);
      assert.match(t.public_key, /^stw_pk_…/, 'a hint of the public key, never a key');
      assert.ok(!JSON.stringify(t).includes(h.ws.private_key) && !JSON.stringify(t).includes(h.ws.public_key));
      assert.deepEqual(t.policy, {
        file_name: 'avatar.jpg',
        folder: 'user-uploads/avatars',
        tags: ['user-upload', 'avatar'],
        max_file_size: 5 * 1024 * 1024,
        transform: null,
        allow_override: { folder: false, tags: true, transform: false },
      });
    });

    test('generate-token refuses a public key (403), no key (401) and a bad policy (400), minting nothing', async () => {
      const count = async () => (await h.services.db.kysely.selectFrom('upload_tokens').select('id').execute()).length;
      const n = await count();
      assert.equal((await mint({ file_name: 'x.txt' }, h.ws.public_key)).status, 403);
      const none = await fetch(`${base}/api/v1/generate-token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"file_name":"x"}',
      });
      assert.equal(none.status, 401);
      for (const bad of [
        {},
        { file_name: '' },
        { file_name: '../etc/passwd' },
        { file_name: 'a.txt', transform: 'w_nope' },
        { file_name: 'a.txt', max_file_size: 0 },
        { file_name: 'a.txt', ttl_seconds: -5 },
        { file_name: 'a.txt', folder: 'a//b' },
        { file_name: 'a.txt', metadata: 'x' },
        { file_name: 'a.txt', allow_override: { folder: 'yes' } },
      ]) {
        const res = await mint(bad);
        assert.equal(res.status, 400, `${JSON.stringify(bad)} → ${JSON.stringify(res.body)}`);
        assert.equal(res.body.success, false);
      }
      assert.equal(await count(), n);
    });

    test('the raw body is stored byte-exact under the policy; the answer has both documented shapes', async () => {
      const t = (
        await mint({
          file_name: 'default.bin',
          folder: 'tokens',
          tags: ['t1'],
          metadata: { user: 42 },
          custom_id: 'u-42',
        })
      ).body;
      const data = randomBytes(300_000);
      const res = await send(t.token, data, { 'content-length': String(data.length) });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      assert.equal(res.body.success, true);
      for (const r of [res.body, res.body.data]) {
        assert.equal(r.name, 'default.bin', "the token's file_name when none is sent");
        assert.equal(r.path, '/tokens/default.bin');
        assert.equal(r.file_size, data.length);
        assert.equal(r.size, data.length);
        assert.equal(r.workspace_no, h.ws.workspace_id);
        assert.equal(r.hash, sha(data));
        assert.deepEqual(r.tags, ['t1']);
        assert.deepEqual(r.metadata, { user: 42 });
        assert.equal(r.custom_id, 'u-42');
        assert.equal(r.upload_source, 'token');
      }
      assert.deepEqual(await bytesOf(res.body.file_no), data);
      const row = await tokenRow(t.token);
      assert.equal(row.state, 'used');
      assert.ok(row.file_id);
    });

    test('the name comes from X-File-Name (percent-encoded UTF-8), else Content-Disposition, and is checked', async () => {
      const a = await send((await mint({ file_name: 'x.txt' })).body.token, 'a', {
        'x-file-name': encodeURIComponent('café ☕ 50% off.txt'),
      });
      assert.equal(a.status, 201, JSON.stringify(a.body));
      assert.equal(a.body.data.name, 'café ☕ 50% off.txt');
      const b = await send((await mint({ file_name: 'x.txt' })).body.token, 'b', {
        'content-disposition': "attachment; filename*=UTF-8''r%C3%A9sum%C3%A9.pdf",
      });
      assert.equal(b.body.data.name, 'résumé.pdf');
      const raw = await send((await mint({ file_name: 'x.txt' })).body.token, 'c', { 'x-file-name': '100% real.txt' });
      assert.equal(raw.body.data.name, '100% real.txt', 'not valid percent-encoding: taken as sent');
      const t = (await mint({ file_name: 'x.txt' })).body.token;
      for (const name of [
        encodeURIComponent('../../etc/passwd'),
        encodeURIComponent('a/b.txt'),
        encodeURIComponent('bad\u0000.txt'),
        encodeURIComponent('x'.repeat(300)),
      ]) {
        const res = await send(t, 'x', { 'x-file-name': name });
        assert.equal(res.status, 400, `${name}: ${JSON.stringify(res.body)}`);
      }
      assert.equal((await tokenRow(t)).state, 'unused', 'refusals leave the token usable');
    });

    test('overrides: refused (403) unless allow_override says so, then applied', async () => {
      const strict = (await mint({ file_name: 'o.txt', folder: 'fixed', tags: ['fixed'] })).body.token;
      for (const [h1, v] of [
        ['x-folder', 'elsewhere'],
        ['x-tags', 'mine'],
        ['x-transform', 'w_10'],
      ]) {
        const res = await send(strict, 'o', { [h1]: v });
        assert.equal(res.status, 403, `${h1}: ${JSON.stringify(res.body)}`);
        assert.equal(res.body.errorCode, 'OVERRIDE_NOT_ALLOWED');
      }
      const ok = await send(strict, 'o');
      assert.equal(ok.body.data.path, '/fixed/o.txt');
      const open = (
        await mint({
          file_name: 'o.txt',
          folder: 'fixed',
          tags: ['fixed'],
          allow_override: { folder: true, tags: true },
        })
      ).body.token;
      const res = await send(open, 'o2', { 'x-folder': 'chosen/sub', 'x-tags': 'a, b' });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      assert.equal(res.body.data.path, '/chosen/sub/o.txt');
      assert.deepEqual(res.body.data.tags, ['a', 'b']);
    });

    test('max_file_size holds whether or not Content-Length is sent; a refused upload stores nothing and gives the token back', async () => {
      const t = (await mint({ file_name: 'big.bin', max_file_size: 1000 })).body.token;
      const declared = await send(t, Buffer.alloc(1001), { 'content-length': '1001' });
      assert.equal(declared.status, 413);
      assert.equal(declared.body.errorCode, 'FILE_TOO_LARGE');
      // Streamed without a length: cut while streaming.
      const stream = new ReadableStream({
        start(c) {
          for (let i = 0; i < 20; i++) c.enqueue(new Uint8Array(100));
          c.close();
        },
      });
      const streamed = await send(t, stream);
      assert.equal(streamed.status, 413, JSON.stringify(streamed.body));
      assert.equal((await tokenRow(t)).state, 'unused');
      assert.deepEqual(await h.services.db.kysely.selectFrom('storage_intents').selectAll().execute(), []);
      const ok = await send(t, Buffer.alloc(1000, 7));
      assert.equal(ok.status, 201, 'the same token, within its limit');
      // The workspace's own limit still applies when it is lower.
      await h.services.workspaces.setLimits(h.ws.workspace_id, { maxFileSize: 500 });
      try {
        const low = (await mint({ file_name: 'low.bin', max_file_size: 10_000 })).body.token;
        assert.equal((await send(low, Buffer.alloc(600))).status, 413);
      } finally {
        await h.services.workspaces.setLimits(h.ws.workspace_id, { maxFileSize: null });
      }
    });

    test('single use: a second upload gets 401 TOKEN_USED; of 10 parallel uploads exactly one succeeds', async () => {
      const t = (await mint({ file_name: 'once.txt' })).body.token;
      assert.equal((await send(t, 'first')).status, 201);
      const again = await send(t, 'second');
      assert.equal(again.status, 401);
      assert.deepEqual(
        {
          error: again.body.error,
          message: again.body.message,
          errorCode: again.body.errorCode,
          success: again.body.success,
        },
        { error: 'Unauthorized', message: 'Invalid or expired token', errorCode: 'TOKEN_USED', success: false },
      );

      const race = (await mint({ file_name: 'race.txt' })).body.token;
      const results = await Promise.all(Array.from({ length: 10 }, (_, i) => send(race, randomBytes(50_000 + i))));
      const statuses = results.map((r) => r.status).sort();
      assert.deepEqual(statuses, [201, 401, 401, 401, 401, 401, 401, 401, 401, 401], JSON.stringify(statuses));
      const files = await h.services.db.kysely
        .selectFrom('files')
        .select('id')
        .where('name', 'like', 'race%')
        .execute();
      assert.equal(files.length, 1, 'one file');
    });

    test('forged, altered, expired, unknown and revoked tokens: 401 with the documented texts, nothing stored', async () => {
      const t = (await mint({ file_name: 'f.txt' })).body.token as string;
      const id = t.slice(7, 29);
      const flip = (s: string, i: number) => s.slice(0, i) + (s[i] === 'A' ? 'B' : 'A') + s.slice(i + 1);
      const cases: [string, string][] = [
        [flip(t, 10), 'TOKEN_INVALID'], // another id, same signature
        [flip(t, t.length - 3), 'TOKEN_INVALID'], // altered signature
        [`stw_ut_${'A'.repeat(22)}.${'A'.repeat(43)}`, 'TOKEN_INVALID'],
        ['not-a-token', 'TOKEN_INVALID'],
        [`${t}x`, 'TOKEN_INVALID'],
      ];
      for (const [token, code] of cases) {
        const res = await send(encodeURIComponent(token), 'x');
        assert.equal(res.status, 401, token);
        assert.equal(res.body.errorCode, code);
        assert.equal(res.body.message, 'Invalid or expired token');
      }
      await h.services.db.kysely
        .updateTable('upload_tokens')
        .set({ expire_at: Math.floor(Date.now() / 1000) - 1 })
        .where('id', '=', id)
        .execute();
      const expired = await send(t, 'x');
      assert.equal(expired.status, 401);
      assert.equal(expired.body.errorCode, 'TOKEN_EXPIRED');

      // Revoking (or rotating) the private key that minted a token ends it.
      const key = await h.services.workspaces.createKey(h.ws.workspace_id, 'private');
      const r = (await mint({ file_name: 'r.txt' }, key.key)).body.token;
      await h.services.workspaces.revokeKey(key.id);
      const revoked = await send(r, 'x');
      assert.equal(revoked.status, 401);
      assert.equal(revoked.body.errorCode, 'TOKEN_INVALID');
      assert.equal(
        (await h.services.db.kysely.selectFrom('files').select('id').where('name', 'in', ['f.txt', 'r.txt']).execute())
          .length,
        0,
      );
    });

    test('a token never replaces: an existing name gets a new unique name', async () => {
      const first = await send((await mint({ file_name: 'same.txt', folder: 'keep' })).body.token, 'one');
      const second = await send((await mint({ file_name: 'same.txt', folder: 'keep' })).body.token, 'two');
      assert.equal(first.body.data.name, 'same.txt');
      assert.match(second.body.data.name, /^same_[0-9A-Za-z]{8}\.txt$/);
      assert.deepEqual(await bytesOf(first.body.data.file_no), Buffer.from('one'));
    });

    test('a token held by an upload that died (no heartbeat) is given back by the sweeper; a live one is not', async () => {
      const t = (await mint({ file_name: 'dead.txt' })).body.token;
      const id = t.slice(7, 29);
      await h.services.db.kysely
        .updateTable('upload_tokens')
        .set({ state: 'uploading', used_at: new Date(Date.now() - 60_000).toISOString() })
        .where('id', '=', id)
        .execute();
      assert.equal((await send(t, 'x')).status, 401, 'held by the dead upload');
      await h.services.tokens.sweep(120_000);
      assert.equal((await tokenRow(t)).state, 'uploading', 'within the grace period it may still be alive');
      await h.services.tokens.sweep(30_000);
      assert.equal((await tokenRow(t)).state, 'unused');
      assert.equal((await send(t, 'x')).status, 201);
    });

    test('override headers are percent-decoded UTF-8 like the name', async () => {
      const t = (await mint({ file_name: 'u.txt', allow_override: { folder: true, tags: true } })).body.token;
      const res = await send(t, 'u', {
        'x-folder': encodeURIComponent('médias/été'),
        'x-tags': encodeURIComponent('café,日本'),
      });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      assert.equal(res.body.data.path, '/médias/été/u.txt');
      assert.deepEqual(res.body.data.tags, ['café', '日本']);
    });

    test('tokens a day past expiry are swept', async () => {
      const t = (await mint({ file_name: 's.txt' })).body.token;
      await h.services.db.kysely
        .updateTable('upload_tokens')
        .set({ expire_at: Math.floor(Date.now() / 1000) - 2 * 86400 })
        .where('id', '=', t.slice(7, 29))
        .execute();
      assert.ok((await h.services.tokens.sweep()) >= 1);
      assert.equal(
        (await h.services.db.kysely.selectFrom('upload_tokens').select('id').where('id', '=', t.slice(7, 29)).execute())
          .length,
        0,
      );
    });
  });
}
