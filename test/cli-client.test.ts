// The client commands of the real `stowage` binary against a real server.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, truncateSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import sharp from 'sharp';
import { runCli, type ServerProcess, startServer } from './helpers/process.ts';
import { closedPort } from './helpers/servers.ts';

const MiB = 1024 * 1024;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('stowage client commands', () => {
  const dir = mkdtempSync(join(tmpdir(), 'stowage-cli-'));
  const dataDir = join(dir, 'data');
  const stateFile = join(dir, 'state', 'uploads.json');
  let server: ServerProcess;
  let ws: { workspace_id: string; public_key: string; private_key: string };
  let env: Record<string, string>;
  const cli = (args: string[], key = ws.private_key, extra: Record<string, string> = {}) =>
    runCli(args, { ...env, STOWAGE_API_KEY: key, ...extra });

  before(async () => {
    ws = JSON.parse(
      (await runCli(['workspace', 'create', '--name', 'CLI', '--json'], { STOWAGE_DATA_DIR: dataDir })).stdout,
    );
    server = await startServer({ STOWAGE_DATA_DIR: dataDir, STOWAGE_SWEEP_INTERVAL_MS: '0' });
    // Part URLs carry the public URL: give the server its real address.
    await server.stop();
    const port = new URL(server.url).port;
    server = await startServer({
      STOWAGE_DATA_DIR: dataDir,
      PORT: port,
      STOWAGE_PUBLIC_URL: `http://127.0.0.1:${port}`,
      STOWAGE_SWEEP_INTERVAL_MS: '0',
    });
    env = { STOWAGE_URL: server.url, STOWAGE_STATE_FILE: stateFile };
  });
  after(async () => {
    await server?.stop('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  test('upload: small files direct, large ones multipart, --json records byte-exact', async () => {
    const small = randomBytes(3000);
    const large = randomBytes(20 * MiB + 5);
    writeFileSync(join(dir, 'small.bin'), small);
    writeFileSync(join(dir, 'large.bin'), large);
    const res = await cli(
      [
        'upload',
        join(dir, 'small.bin'),
        join(dir, 'large.bin'),
        '--folder',
        'cli/in',
        '--tags',
        'a,b',
        '--metadata',
        '{"by":"cli"}',
        '--multipart-threshold',
        String(MiB),
        '--json',
      ],
      ws.public_key,
    );
    assert.equal(res.code, 0, res.stderr);
    const records = JSON.parse(res.stdout);
    assert.deepEqual(
      records.map((r: any) => [r.name, r.upload_source, r.hash]),
      [
        ['small.bin', 'direct', sha(small)],
        ['large.bin', 'multipart', sha(large)],
      ],
    );
    assert.deepEqual(records[0].tags, ['a', 'b']);
    assert.deepEqual(records[1].metadata, { by: 'cli' });
    assert.equal(records[1].path, '/cli/in/large.bin');
    const plain = await cli(['upload', join(dir, 'small.bin')], ws.public_key);
    assert.match(plain.stdout, /small\.bin\s+2\.9 KiB\s+http/);
  });

  test('upload is resumable after Ctrl-C: exit 130, then the same command finishes the file', async () => {
    const big = join(dir, 'big.bin');
    truncateSync((writeFileSync(big, ''), big), 512 * MiB);
    const args = ['upload', big, '--multipart-threshold', String(MiB), '--parallel', '1', '--json'];
    // Press Ctrl-C once a session exists and the server holds at least one of its parts
    // (512 MiB one 8 MiB part at a time takes seconds, so the upload is cut part way).
    const run = runCli(args, { ...env, STOWAGE_API_KEY: ws.public_key }, (child) => {
      let asking = false;
      const poll = setInterval(() => {
        if (asking || !existsSync(stateFile)) return;
        const state = readFileSync(stateFile, 'utf8');
        if (!state.includes('session_id')) return;
        let id: string;
        try {
          id = (Object.values(JSON.parse(state))[0] as { session: { session_id: string } }).session.session_id;
        } catch {
          return; // caught mid-write: read it again on the next tick
        }
        asking = true;
        fetch(`${server.url}/api/v1/multipart/${id}`, { headers: { 'x-api-key': ws.public_key } })
          .then((r) => r.json() as any)
          .then((s) => {
            if ((s.data?.uploaded_parts?.length ?? 0) > 0) {
              clearInterval(poll);
              child.kill('SIGINT');
            }
          })
          .catch(() => {})
          .finally(() => {
            asking = false;
          });
      }, 20);
      child.on('exit', () => clearInterval(poll));
    });
    const cut = await run;
    assert.equal(cut.code, 130, `interrupted: ${cut.stderr}`);
    assert.match(cut.stderr, /interrupted; run the same command again to resume/);
    const saved = JSON.parse(readFileSync(stateFile, 'utf8'));
    const { session, mtimeMs } = saved[big] as { session: { session_id: string }; mtimeMs: number };
    const status = await fetch(`${server.url}/api/v1/multipart/${session.session_id}`, {
      headers: { 'x-api-key': ws.public_key },
    }).then((r) => r.json() as any);
    assert.equal(status.data.status, 'active');
    const before = status.data.uploaded_parts.length;
    assert.ok(before > 0 && before < 64, `interrupted part way (${before} of 64 parts)`);
    // Another folder, or a file touched since: refused, saying what changed; nothing is sent.
    const otherFolder = await cli([...args, '--folder', 'elsewhere'], ws.public_key);
    assert.equal(otherFolder.code, 5, otherFolder.stderr);
    assert.match(otherFolder.stderr, /cannot resume the interrupted upload: --folder \(none → elsewhere\) changed/);
    assert.match(otherFolder.stderr, /--restart/);
    utimesSync(big, new Date(), new Date(mtimeMs + 60_000));
    const touched = await cli(args, ws.public_key);
    assert.equal(touched.code, 5, touched.stderr);
    assert.match(touched.stderr, /the file's modification time/);
    utimesSync(big, new Date(), mtimeMs / 1000);
    const unchanged = await fetch(`${server.url}/api/v1/multipart/${session.session_id}`, {
      headers: { 'x-api-key': ws.public_key },
    }).then((r) => r.json() as any);
    assert.equal(unchanged.data.uploaded_parts.length, before, 'the refusals sent no part');
    const resumed = await cli(args, ws.public_key);
    assert.equal(resumed.code, 0, resumed.stderr);
    const [record] = JSON.parse(resumed.stdout);
    assert.equal(record.size, 512 * MiB);
    assert.equal(record.upload_source, 'multipart');
    const after = await fetch(`${server.url}/api/v1/multipart/${session.session_id}`, {
      headers: { 'x-api-key': ws.public_key },
    }).then((r) => r.json() as any);
    assert.equal(after.data.status, 'completed', 'the same session was completed');
    assert.deepEqual(JSON.parse(readFileSync(stateFile, 'utf8')), {}, 'nothing left to resume');
  });

  test('--restart gives an interrupted upload up and starts the file over', async () => {
    const file = join(dir, 'restart.bin');
    const data = randomBytes(3 * MiB);
    writeFileSync(file, data);
    // An interrupted upload of this file, as a cut run leaves it: a saved session, no part sent.
    const start = await fetch(`${server.url}/api/v1/multipart/start`, {
      method: 'POST',
      headers: { 'x-api-key': ws.public_key, 'content-type': 'application/json' },
      body: JSON.stringify({ file_name: 'restart.bin', size: 1, format: 'application/octet-stream' }),
    }).then((r) => r.json() as any);
    const stale = start.data ?? start;
    writeFileSync(
      stateFile,
      JSON.stringify({ [file]: { session: stale, size: 1, mtimeMs: 0, name: 'restart.bin', options: {} } }),
    );
    const args = ['upload', file, '--multipart-threshold', String(MiB), '--json'];
    const refused = await cli(args, ws.public_key);
    assert.equal(refused.code, 5);
    assert.match(refused.stderr, /the file's size \(1 → 3145728 bytes\)/);
    const restarted = await cli([...args, '--restart'], ws.public_key);
    assert.equal(restarted.code, 0, restarted.stderr);
    assert.equal(JSON.parse(restarted.stdout)[0].hash, sha(data));
    const old = await fetch(`${server.url}/api/v1/multipart/${stale.session_id}`, {
      headers: { 'x-api-key': ws.public_key },
    });
    assert.ok(old.status === 404 || (await old.json()).data?.status === 'aborted', 'the old session was given up');
    assert.deepEqual(JSON.parse(readFileSync(stateFile, 'utf8')), {});
  });

  test('an unreachable service: the message says where and why, exit 69', async () => {
    const port = await closedPort();
    const res = await runCli(['files', 'ls'], {
      STOWAGE_URL: `http://127.0.0.1:${port}`,
      STOWAGE_API_KEY: ws.private_key,
    });
    assert.equal(res.code, 69);
    assert.equal(res.stderr.trim(), `stowage: cannot reach http://127.0.0.1:${port}: connection refused`);
  });

  test('--version prints the package version', async () => {
    const res = await runCli(['--version'], {});
    assert.equal(res.code, 0);
    assert.equal(
      res.stdout.trim(),
      JSON.parse(readFileSync(join(import.meta.dirname, '..', 'package.json'), 'utf8')).version,
    );
  });

  test('files ls, get, rename, mv, rm; folders create, ls, rm', async () => {
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
    assert.equal(t.upload_url, `${server.url}/api/v1/uploads/${t.token}`);
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
    assert.match(url, new RegExp(`^${server.url}/api/v1/uploads/\\S+$`));
    assert.match(expiry, /^expires \d{4}-\d\d-\d\dT\S+Z \(single use, at most 5\.0 MiB\)$/);
    assert.equal((await cli(['token', 'create', 'x.txt', '--allow-override', 'owner'])).code, 2);
    assert.equal((await cli(['token', 'create', 'x.txt', '--max-size', '0'])).code, 2);
    assert.equal((await cli(['token', 'create', 'x.txt', '--metadata', '[1]'])).code, 2);
    assert.equal((await cli(['token', 'create', 'x.txt'], ws.public_key)).code, 4, 'a public key cannot make tokens');
  });

  test('settings set and show: allowed and webhook origins, "" empties a list', async () => {
    const initial = await cli(['settings', 'show', '--json']);
    assert.equal(initial.code, 0, initial.stderr);
    const w = JSON.parse(initial.stdout);
    assert.equal(w.workspace_id, ws.workspace_id);
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
      join(dir, 'pic.png'),
      await sharp({ create: { width: 20, height: 10, channels: 3, background: '#0a0' } })
        .png()
        .toBuffer(),
    );
    const up = await cli(['upload', join(dir, 'pic.png'), '--folder', 'signing', '--json']);
    assert.equal(up.code, 0, up.stderr);
    const plain = `${server.url}/${ws.workspace_id}/w_5/signing/pic.png`;
    assert.equal((await cli(['settings', 'set', '--signed-transformations', 'maybe'])).code, 2);
    const on = await cli(['settings', 'set', '--signed-transformations', 'on']);
    assert.equal(on.code, 0, on.stderr);
    assert.match(on.stdout, /signed_transformations\s+on/);
    try {
      assert.equal((await fetch(plain)).status, 403);
      // Fetched with the private key; the public key may not read it.
      assert.equal((await cli(['url', 'sign', plain], ws.public_key)).code, 4);
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
      join(dir, 'wide.png'),
      await sharp({ create: { width: 30, height: 10, channels: 3, background: '#00a' } })
        .png()
        .toBuffer(),
    );
    assert.equal((await cli(['upload', join(dir, 'wide.png'), '--folder', 'presets'])).code, 0);
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
    assert.equal((await cli(['preset', 'set', 'evil', 'w_1'], ws.public_key)).code, 4, 'the public key may not');
    const url = `${server.url}/${ws.workspace_id}/t_tiny/presets/wide.png`;
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

  test('exit codes a shell user can act on: 78 without configuration, 4 for a refused key, 2 for bad usage', async () => {
    const bare = await runCli(['files', 'ls'], {});
    assert.equal(bare.code, 78);
    assert.match(bare.stderr, /STOWAGE_URL/);
    const pub = await cli(['files', 'ls'], ws.public_key);
    assert.equal(pub.code, 4);
    assert.equal((await cli(['upload', join(dir, 'nope.bin')], ws.public_key)).code, 2);
    assert.equal((await cli(['upload', join(dir, 'small.bin'), '--metadata', '[1]'], ws.public_key)).code, 2);
  });
});
