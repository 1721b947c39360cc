// The client commands of the real `stowage` binary against a real server.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { runCli, type ServerProcess, startServer } from './helpers/process.ts';

const MiB = 1024 * 1024;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('stowage client commands', () => {
  const dir = mkdtempSync(join(tmpdir(), 'stowage-cli-'));
  const dataDir = join(dir, 'data');
  const stateFile = join(dir, 'state', 'uploads.json');
  let server: ServerProcess;
  let ws: { workspace_id: string; public_key: string; private_key: string };
  let env: Record<string, string>;
  const cli = (args: string[], key = ws.private_key, extra: Record<string, string> = {}) => runCli(args, { ...env, STOWAGE_API_KEY: key, ...extra });

  before(async () => {
    ws = JSON.parse((await runCli(['workspace', 'create', '--name', 'CLI', '--json'], { STOWAGE_DATA_DIR: dataDir })).stdout);
    server = await startServer({ STOWAGE_DATA_DIR: dataDir, STOWAGE_SWEEP_INTERVAL_MS: '0' });
    // Part URLs carry the public URL: give the server its real address.
    await server.stop();
    const port = new URL(server.url).port;
    server = await startServer({ STOWAGE_DATA_DIR: dataDir, PORT: port, STOWAGE_PUBLIC_URL: `http://127.0.0.1:${port}`, STOWAGE_SWEEP_INTERVAL_MS: '0' });
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
    const res = await cli(['upload', join(dir, 'small.bin'), join(dir, 'large.bin'), '--folder', 'cli/in', '--tags', 'a,b', '--metadata', '{"by":"cli"}', '--multipart-threshold', String(MiB), '--json'], ws.public_key);
    assert.equal(res.code, 0, res.stderr);
    const records = JSON.parse(res.stdout);
    assert.deepEqual(records.map((r: any) => [r.name, r.upload_source, r.hash]), [
      ['small.bin', 'direct', sha(small)],
      ['large.bin', 'multipart', sha(large)],
    ]);
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
    // Press Ctrl-C once a session exists and some parts are in (512 MiB one part at a time
    // takes seconds here; the interrupt comes 300 ms in).
    const run = runCli(args, { ...env, STOWAGE_API_KEY: ws.public_key }, (child) => {
      const poll = setInterval(() => {
        if (existsSync(stateFile) && readFileSync(stateFile, 'utf8').includes('session_id')) {
          clearInterval(poll);
          setTimeout(() => child.kill('SIGINT'), 300);
        }
      }, 20);
      child.on('exit', () => clearInterval(poll));
    });
    const cut = await run;
    assert.equal(cut.code, 130, `interrupted: ${cut.stderr}`);
    assert.match(cut.stderr, /interrupted; run the same command again to resume/);
    const saved = JSON.parse(readFileSync(stateFile, 'utf8'));
    const session = Object.values(saved)[0] as { session_id: string };
    const status = await fetch(`${server.url}/api/v1/multipart/${session.session_id}`, { headers: { 'x-api-key': ws.public_key } }).then((r) => r.json() as any);
    assert.equal(status.data.status, 'active');
    const before = status.data.uploaded_parts.length;
    assert.ok(before > 0 && before < 64, `interrupted part way (${before} of 64 parts)`);
    const resumed = await cli(args, ws.public_key);
    assert.equal(resumed.code, 0, resumed.stderr);
    const [record] = JSON.parse(resumed.stdout);
    assert.equal(record.size, 512 * MiB);
    assert.equal(record.upload_source, 'multipart');
    const after = await fetch(`${server.url}/api/v1/multipart/${session.session_id}`, { headers: { 'x-api-key': ws.public_key } }).then((r) => r.json() as any);
    assert.equal(after.data.status, 'completed', 'the same session was completed');
    assert.deepEqual(JSON.parse(readFileSync(stateFile, 'utf8')), {}, 'nothing left to resume');
  });

  test('files ls, get, rename, mv, rm; folders create, ls, rm', async () => {
    const folder = JSON.parse((await cli(['folders', 'create', 'target', '--json'])).stdout);
    const ls = await cli(['files', 'ls', '--search', 'small', '--json']);
    assert.equal(ls.code, 0, ls.stderr);
    const file = JSON.parse(ls.stdout).files[0];
    assert.equal(JSON.parse((await cli(['files', 'get', file.file_no, '--json'])).stdout).file_no, file.file_no);
    assert.equal(JSON.parse((await cli(['files', 'rename', file.file_no, 'renamed.bin', '--json'])).stdout).name, 'renamed.bin');
    const moved = await cli(['files', 'mv', file.file_no, folder.folder_no]);
    assert.match(moved.stdout, /Moved to \/target\/renamed\.bin/);
    const human = await cli(['folders', 'ls']);
    assert.match(human.stdout, new RegExp(`${folder.folder_no}\\s+1 files`));
    assert.equal((await cli(['files', 'rm', file.file_no])).code, 0);
    const gone = await cli(['files', 'get', file.file_no]);
    assert.equal(gone.code, 3, 'not found');
    assert.match(gone.stderr, /HTTP 404 FILE_NOT_FOUND/);
    assert.equal((await cli(['folders', 'rm', folder.folder_no])).code, 0);
  });

  test('sources add, ls, test, rm', async () => {
    const added = await cli(['sources', 'add', 'web', '--type', 'image_source', '--config', '{"base_url":"http://127.0.0.1:9"}', '--json']);
    assert.equal(added.code, 0, added.stderr);
    const src = JSON.parse(added.stdout);
    assert.match((await cli(['sources', 'ls'])).stdout, /image_source\s+active\s+web/);
    const probe = await cli(['sources', 'test', src.id]);
    assert.equal(probe.code, 1, 'a failed test exits 1');
    assert.match(probe.stdout, /^failed: address refused/);
    assert.equal((await cli(['sources', 'add', 'web', '--type', 'image_source', '--config', '{"base_url":"http://x.example.com"}'])).code, 5, 'name taken: conflict');
    assert.equal((await cli(['sources', 'add', 'bad', '--type', 'image_source', '--config', 'not json'])).code, 2);
    assert.equal((await cli(['sources', 'rm', src.id])).code, 0);
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
