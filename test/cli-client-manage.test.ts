// The client commands of the real `stowage` binary against a real server: managing files,
// folders, sources, tokens, settings, signed URLs and presets (uploads are in cli-client.test.ts).
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import sharp from 'sharp';
import { useCliServer } from './helpers/cli-server.ts';
import { runCli } from './helpers/process.ts';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('stowage client commands: files, sources, tokens, settings, presets', () => {
  const s = useCliServer();
  const cli = s.cli;

  test('files ls, get, rename, mv, rm; folders create, ls, rm', async () => {
    writeFileSync(join(s.dir, 'small.bin'), Buffer.alloc(3000, 7));
    assert.equal((await cli(['upload', join(s.dir, 'small.bin')], s.ws.public_key)).code, 0);
    const folder = JSON.parse((await cli(['folders', 'create', 'target', '--json'])).stdout);
    const ls = await cli(['files', 'ls', '--search', 'small', '--json']);
    assert.equal(ls.code, 0, ls.stderr);
    const file = JSON.parse(ls.stdout).files[0];
    assert.equal(JSON.parse((await cli(['files', 'get', file.file_no, '--json'])).stdout).file_no, file.file_no);
    assert.equal(
      JSON.parse((await cli(['files', 'rename', file.file_no, 'renamed.bin', '--json'])).stdout).name,
      'renamed.bin',
    );
    const moved = await cli(['files', 'mv', file.file_no, folder.folder_no]);
    assert.match(moved.stdout, /Moved to \/target\/renamed\.bin/);
    const human = await cli(['folders', 'ls']);
    assert.match(human.stdout, new RegExp(`${folder.folder_no}\\s+1 files`));
    const notEmpty = await cli(['folders', 'rm', folder.folder_no]);
    assert.equal(notEmpty.code, 5, 'a folder with a file in it needs --recursive');
    assert.match(notEmpty.stderr, /FOLDER_NOT_EMPTY/);
    assert.equal((await cli(['files', 'rm', file.file_no])).code, 0);
    const gone = await cli(['files', 'get', file.file_no]);
    assert.equal(gone.code, 3, 'not found');
    assert.match(gone.stderr, /HTTP 404 FILE_NOT_FOUND/);
    assert.equal((await cli(['folders', 'rm', folder.folder_no])).code, 0);
  });

  test('sources add, ls, test, rm', async () => {
    const added = await cli([
      'sources',
      'add',
      'web',
      '--type',
      'image_source',
      '--config',
      '{"base_url":"http://127.0.0.1:9"}',
      '--json',
    ]);
    assert.equal(added.code, 0, added.stderr);
    const src = JSON.parse(added.stdout);
    assert.match((await cli(['sources', 'ls'])).stdout, /image_source\s+active\s+web/);
    const probe = await cli(['sources', 'test', src.id]);
    assert.equal(probe.code, 1, 'a failed test exits 1');
    assert.match(probe.stdout, /^failed: address refused/);
    assert.equal(
      (
        await cli([
          'sources',
          'add',
          'web',
          '--type',
          'image_source',
          '--config',
          '{"base_url":"http://x.example.com"}',
        ])
      ).code,
      5,
      'name taken: conflict',
    );
    assert.equal((await cli(['sources', 'add', 'bad', '--type', 'image_source', '--config', 'not json'])).code, 2);
    assert.equal((await cli(['sources', 'rm', src.id])).code, 0);
  });

  test('token create: its upload_url takes one raw POST without a key, with the overrides it allows', async () => {
    const made = await cli([
      'token',
      'create',
      'cli ☕.txt',
      '--folder',
      'tok',
      '--tags',
      'a,b',
      '--max-size',
      '100',
      '--ttl',
      '60',
      '--metadata',
      '{"by":"cli"}',
      '--custom-id',
      'cli-tok',
      '--allow-override',
      'tags',
      '--json',
    ]);
    assert.equal(made.code, 0, made.stderr);
    const t = JSON.parse(made.stdout);
    assert.equal(t.upload_url, `${s.server.url}/api/v1/uploads/${t.token}`);
    assert.ok(
      Math.abs(t.expire_at - (Math.floor(Date.now() / 1000) + 60)) <= 5,
      `expire_at ${t.expire_at} is about 60 s away`,
    );
    assert.deepEqual(t.policy.tags, ['a', 'b']);
    assert.equal(t.policy.folder, 'tok');
    assert.equal(t.policy.max_file_size, 100);
    assert.deepEqual(t.policy.allow_override, { folder: false, tags: true, transform: false });

    const body = Buffer.from('token bytes ☕\n');
    const post = (headers: Record<string, string>) =>
      fetch(t.upload_url, { method: 'POST', body, headers: { 'content-type': 'text/plain', ...headers } });
    const refused = await post({ 'x-folder': 'elsewhere' });
    assert.equal(refused.status, 403);
    assert.equal(((await refused.json()) as any).errorCode, 'OVERRIDE_NOT_ALLOWED');
    const res = await post({ 'x-tags': 'c' });
    assert.equal(res.status, 201);
    const stored = ((await res.json()) as any).data;
    assert.equal(stored.path, '/tok/cli ☕.txt', 'the name from the token');
    assert.deepEqual(stored.tags, ['c']);
    assert.deepEqual(stored.metadata, { by: 'cli' });
    assert.equal(stored.custom_id, 'cli-tok');
    assert.equal(stored.hash, sha(body));
    const again = await post({});
    assert.equal(again.status, 401);
    assert.equal(((await again.json()) as any).errorCode, 'TOKEN_USED');

    const plain = await cli(['token', 'create', 'x.txt']);
    assert.equal(plain.code, 0, plain.stderr);
    const [url, expiry] = plain.stdout.trim().split('\n');
    assert.match(url, new RegExp(`^${s.server.url}/api/v1/uploads/\\S+$`));
    assert.match(expiry, /^expires \d{4}-\d\d-\d\dT\S+Z \(single use, at most 5\.0 MiB\)$/);
    assert.equal((await cli(['token', 'create', 'x.txt', '--allow-override', 'owner'])).code, 2);
    assert.equal((await cli(['token', 'create', 'x.txt', '--max-size', '0'])).code, 2);
    assert.equal((await cli(['token', 'create', 'x.txt', '--metadata', '[1]'])).code, 2);
    assert.equal((await cli(['token', 'create', 'x.txt'], s.ws.public_key)).code, 4, 'a public key cannot make tokens');
  });

  test('settings set and show: allowed and webhook origins, "" empties a list', async () => {
    const initial = await cli(['settings', 'show', '--json']);
    assert.equal(initial.code, 0, initial.stderr);
    const w = JSON.parse(initial.stdout);
    assert.equal(w.workspace_id, s.ws.workspace_id);
    assert.deepEqual([w.allowed_origins, w.webhook_origins], [[], []]);
    const set = await cli([
      'settings',
      'set',
      '--allowed-origins',
      'https://shop.example.com, http://localhost:5173',
      '--webhook-origins',
      'https://hooks.example.com',
    ]);
    assert.equal(set.code, 0, set.stderr);
    assert.match(set.stdout, /allowed_origins\s+https:\/\/shop\.example\.com, http:\/\/localhost:5173\n/);
    const shown = JSON.parse((await cli(['settings', 'show', '--json'])).stdout);
    assert.deepEqual(shown.allowed_origins, ['https://shop.example.com', 'http://localhost:5173']);
    assert.deepEqual(shown.webhook_origins, ['https://hooks.example.com']);
    assert.equal((await cli(['settings', 'set', '--allowed-origins', ''])).code, 0);
    const cleared = JSON.parse((await cli(['settings', 'show', '--json'])).stdout);
    assert.deepEqual(cleared.allowed_origins, [], '"" empties the list');
    assert.deepEqual(cleared.webhook_origins, ['https://hooks.example.com'], 'the other list is kept');
    assert.match(
      (await cli(['settings', 'show'])).stdout,
      /allowed_origins\s+\(any origin\)\nwebhook_origins\s+https:\/\/hooks\.example\.com\n/,
    );
    assert.equal((await cli(['settings', 'set'])).code, 2, 'nothing to set');
    const bad = await cli(['settings', 'set', '--allowed-origins', 'not an origin']);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /HTTP 400/);
    assert.equal((await cli(['settings', 'set', '--webhook-origins', ''])).code, 0);
  });

  test('url sign: with the delivery key offline or fetched; settings switch signed transformations', async () => {
    writeFileSync(
      join(s.dir, 'pic.png'),
      await sharp({ create: { width: 20, height: 10, channels: 3, background: '#0a0' } })
        .png()
        .toBuffer(),
    );
    const up = await cli(['upload', join(s.dir, 'pic.png'), '--folder', 'signing', '--json']);
    assert.equal(up.code, 0, up.stderr);
    const plain = `${s.server.url}/${s.ws.workspace_id}/w_5/signing/pic.png`;
    assert.equal((await cli(['settings', 'set', '--signed-transformations', 'maybe'])).code, 2);
    const on = await cli(['settings', 'set', '--signed-transformations', 'on']);
    assert.equal(on.code, 0, on.stderr);
    assert.match(on.stdout, /signed_transformations\s+on/);
    try {
      assert.equal((await fetch(plain)).status, 403);
      // Fetched with the private key; the public key may not read it.
      assert.equal((await cli(['url', 'sign', plain], s.ws.public_key)).code, 4);
      const fetched = await cli(['url', 'sign', plain]);
      assert.equal(fetched.code, 0, fetched.stderr);
      const res = await fetch(fetched.stdout.trim());
      assert.equal(res.status, 200);
      assert.equal((await sharp(Buffer.from(await res.arrayBuffer())).metadata()).width, 5);
      // Offline: STOWAGE_DELIVERY_KEY and no API key or service at all.
      const key = (await cli(['url', 'key'])).stdout.trim();
      assert.match(key, /^stw_dk_/);
      const offline = await runCli(['url', 'sign', plain.replace('w_5', 'w_6'), '--expires-in', '120'], {
        STOWAGE_DELIVERY_KEY: key,
      });
      assert.equal(offline.code, 0, offline.stderr);
      assert.match(offline.stdout, /[?&]texp=\d+&tsig=/);
      assert.equal((await fetch(offline.stdout.trim())).status, 200);
      assert.equal((await runCli(['url', 'sign', 'not a url'], { STOWAGE_DELIVERY_KEY: key })).code, 2);
      // Rotation: the old key's URLs stop working.
      const rotated = (await cli(['url', 'key', '--rotate'])).stdout.trim();
      assert.notEqual(rotated, key);
      assert.equal((await fetch(offline.stdout.trim())).status, 403);
    } finally {
      assert.equal((await cli(['settings', 'set', '--signed-transformations', 'off'])).code, 0);
    }
    assert.equal((await fetch(plain)).status, 200);
  });

  test('preset set, get, list, delete; a preset URL is served unsigned when signing is on', async () => {
    writeFileSync(
      join(s.dir, 'wide.png'),
      await sharp({ create: { width: 30, height: 10, channels: 3, background: '#00a' } })
        .png()
        .toBuffer(),
    );
    assert.equal((await cli(['upload', join(s.dir, 'wide.png'), '--folder', 'presets'])).code, 0);
    assert.match((await cli(['preset', 'list'])).stdout, /No presets \(a workspace may have 100\)/);
    const set = await cli(['preset', 'set', 'tiny', 'w_6, f_png']);
    assert.equal(set.code, 0, set.stderr);
    assert.equal(set.stdout.trim(), 't_tiny = w_6,f_png');
    assert.equal((await cli(['preset', 'get', 'tiny'])).stdout.trim(), 'w_6,f_png');
    assert.equal(JSON.parse((await cli(['preset', 'get', 'tiny', '--json'])).stdout).name, 'tiny');
    assert.match((await cli(['preset', 'ls'])).stdout, /^t_tiny\s+w_6,f_png$/m);
    const broken = await cli(['preset', 'set', 'bad', 'w_6,zz_1']);
    assert.equal(broken.code, 1);
    assert.match(broken.stderr, /zz_1.*\(HTTP 400 VALIDATION_FAILED\)/);
    assert.equal((await cli(['preset', 'set', 'evil', 'w_1'], s.ws.public_key)).code, 4, 'the public key may not');
    const url = `${s.server.url}/${s.ws.workspace_id}/t_tiny/presets/wide.png`;
    assert.equal((await cli(['settings', 'set', '--signed-transformations', 'on'])).code, 0);
    try {
      const res = await fetch(url);
      assert.equal(res.status, 200);
      assert.equal((await sharp(Buffer.from(await res.arrayBuffer())).metadata()).width, 6);
      assert.equal((await fetch(url.replace('t_tiny', 't_tiny,w_7'))).status, 403);
    } finally {
      assert.equal((await cli(['settings', 'set', '--signed-transformations', 'off'])).code, 0);
    }
    assert.equal((await cli(['preset', 'delete', 'tiny'])).code, 0);
    const gone = await cli(['preset', 'rm', 'tiny']);
    assert.equal(gone.code, 3);
    assert.match(gone.stderr, /HTTP 404 PRESET_NOT_FOUND/);
    assert.equal((await fetch(url)).status, 400);
  });
});
