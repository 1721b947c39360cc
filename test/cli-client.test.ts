// The client commands of the real `stowage` binary against a real server.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, truncateSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { useCliServer } from './helpers/cli-server.ts';
import { runCli } from './helpers/process.ts';
import { closedPort } from './helpers/servers.ts';

const MiB = 1024 * 1024;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('stowage client commands: upload, resume, errors', () => {
  const s = useCliServer();
  const cli = s.cli;

  test('upload: small files direct, large ones multipart, --json records byte-exact', async () => {
    const small = randomBytes(3000);
    const large = randomBytes(20 * MiB + 5);
    writeFileSync(join(s.dir, 'small.bin'), small);
    writeFileSync(join(s.dir, 'large.bin'), large);
    const res = await cli(
      [
        'upload',
        join(s.dir, 'small.bin'),
        join(s.dir, 'large.bin'),
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
      s.ws.public_key,
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
    const plain = await cli(['upload', join(s.dir, 'small.bin')], s.ws.public_key);
    assert.match(plain.stdout, /small\.bin\s+2\.9 KiB\s+http/);
  });

  test('upload is resumable after Ctrl-C: exit 130, then the same command finishes the file', async () => {
    const big = join(s.dir, 'big.bin');
    truncateSync((writeFileSync(big, ''), big), 192 * MiB);
    const args = ['upload', big, '--multipart-threshold', String(MiB), '--parallel', '1', '--json'];
    // Press Ctrl-C once a session exists and the server holds at least one of its parts
    // (192 MiB one 8 MiB part at a time takes seconds, so the upload is cut part way).
    const run = runCli(args, { ...s.env, STOWAGE_API_KEY: s.ws.public_key }, (child) => {
      let asking = false;
      const poll = setInterval(() => {
        if (asking || !existsSync(s.stateFile)) return;
        const state = readFileSync(s.stateFile, 'utf8');
        if (!state.includes('session_id')) return;
        let id: string;
        try {
          id = (Object.values(JSON.parse(state))[0] as { session: { session_id: string } }).session.session_id;
        } catch {
          return; // caught mid-write: read it again on the next tick
        }
        asking = true;
        fetch(`${s.server.url}/api/v1/multipart/${id}`, { headers: { 'x-api-key': s.ws.public_key } })
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
    const saved = JSON.parse(readFileSync(s.stateFile, 'utf8'));
    const { session, mtimeMs } = saved[big] as { session: { session_id: string }; mtimeMs: number };
    const status = await fetch(`${s.server.url}/api/v1/multipart/${session.session_id}`, {
      headers: { 'x-api-key': s.ws.public_key },
    }).then((r) => r.json() as any);
    assert.equal(status.data.status, 'active');
    const before = status.data.uploaded_parts.length;
    assert.ok(before > 0 && before < 24, `interrupted part way (${before} of 24 parts)`);
    // Another folder, or a file touched since: refused, saying what changed; nothing is sent.
    const otherFolder = await cli([...args, '--folder', 'elsewhere'], s.ws.public_key);
    assert.equal(otherFolder.code, 5, otherFolder.stderr);
    assert.match(otherFolder.stderr, /cannot resume the interrupted upload: --folder \(none → elsewhere\) changed/);
    assert.match(otherFolder.stderr, /--restart/);
    utimesSync(big, new Date(), new Date(mtimeMs + 60_000));
    const touched = await cli(args, s.ws.public_key);
    assert.equal(touched.code, 5, touched.stderr);
    assert.match(touched.stderr, /the file's modification time/);
    utimesSync(big, new Date(), mtimeMs / 1000);
    const unchanged = await fetch(`${s.server.url}/api/v1/multipart/${session.session_id}`, {
      headers: { 'x-api-key': s.ws.public_key },
    }).then((r) => r.json() as any);
    assert.equal(unchanged.data.uploaded_parts.length, before, 'the refusals sent no part');
    const resumed = await cli(args, s.ws.public_key);
    assert.equal(resumed.code, 0, resumed.stderr);
    const [record] = JSON.parse(resumed.stdout);
    assert.equal(record.size, 192 * MiB);
    assert.equal(record.upload_source, 'multipart');
    const after = await fetch(`${s.server.url}/api/v1/multipart/${session.session_id}`, {
      headers: { 'x-api-key': s.ws.public_key },
    }).then((r) => r.json() as any);
    assert.equal(after.data.status, 'completed', 'the same session was completed');
    assert.deepEqual(JSON.parse(readFileSync(s.stateFile, 'utf8')), {}, 'nothing left to resume');
  });

  test('--restart gives an interrupted upload up and starts the file over', async () => {
    const file = join(s.dir, 'restart.bin');
    const data = randomBytes(3 * MiB);
    writeFileSync(file, data);
    // An interrupted upload of this file, as a cut run leaves it: a saved session, no part sent.
    const start = await fetch(`${s.server.url}/api/v1/multipart/start`, {
      method: 'POST',
      headers: { 'x-api-key': s.ws.public_key, 'content-type': 'application/json' },
      body: JSON.stringify({ file_name: 'restart.bin', size: 1, format: 'application/octet-stream' }),
    }).then((r) => r.json() as any);
    const stale = start.data ?? start;
    writeFileSync(
      s.stateFile,
      JSON.stringify({ [file]: { session: stale, size: 1, mtimeMs: 0, name: 'restart.bin', options: {} } }),
    );
    const args = ['upload', file, '--multipart-threshold', String(MiB), '--json'];
    const refused = await cli(args, s.ws.public_key);
    assert.equal(refused.code, 5);
    assert.match(refused.stderr, /the file's size \(1 → 3145728 bytes\)/);
    const restarted = await cli([...args, '--restart'], s.ws.public_key);
    assert.equal(restarted.code, 0, restarted.stderr);
    assert.equal(JSON.parse(restarted.stdout)[0].hash, sha(data));
    const old = await fetch(`${s.server.url}/api/v1/multipart/${stale.session_id}`, {
      headers: { 'x-api-key': s.ws.public_key },
    });
    assert.ok(old.status === 404 || (await old.json()).data?.status === 'aborted', 'the old session was given up');
    assert.deepEqual(JSON.parse(readFileSync(s.stateFile, 'utf8')), {});
  });

  test('an unreachable service: the message says where and why, exit 69', async () => {
    const port = await closedPort();
    const res = await runCli(['files', 'ls'], {
      STOWAGE_URL: `http://127.0.0.1:${port}`,
      STOWAGE_API_KEY: s.ws.private_key,
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

  test('exit codes a shell user can act on: 78 without configuration, 4 for a refused key, 2 for bad usage', async () => {
    const bare = await runCli(['files', 'ls'], {});
    assert.equal(bare.code, 78);
    assert.match(bare.stderr, /STOWAGE_URL/);
    const pub = await cli(['files', 'ls'], s.ws.public_key);
    assert.equal(pub.code, 4);
    assert.equal((await cli(['upload', join(s.dir, 'nope.bin')], s.ws.public_key)).code, 2);
    assert.equal((await cli(['upload', join(s.dir, 'small.bin'), '--metadata', '[1]'], s.ws.public_key)).code, 2);
  });
});
