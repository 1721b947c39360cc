// Crash safety: the server process is killed with SIGKILL in the middle of a direct upload
// and of a multipart part upload. After a restart, no half-written file is visible, no
// record points at missing bytes, one sweep leaves no orphaned bytes, and the multipart
// session completes byte-exact.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { openDatabase } from '../src/db/database.ts';
import { runCli, type ServerProcess, startServer } from './helpers/process.ts';
import { leftoverTemp, storedObjects } from './helpers/storage.ts';

const MiB = 1024 * 1024;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** Sends `total` bytes slowly to a PUT or multipart POST; calls `midway` once half is out. */
function slowRequest(
  url: string,
  opts: {
    method: string;
    headers: Record<string, string>;
    prefix?: Buffer;
    total: number;
    suffix?: Buffer;
    midway: () => void;
  },
): Promise<string> {
  return new Promise((resolve) => {
    const req = http.request(url, { method: opts.method, headers: opts.headers });
    req.on('error', (e) => resolve(`error: ${e.message}`));
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => resolve(`status ${res.statusCode}`));
    });
    if (opts.prefix) req.write(opts.prefix);
    let sent = 0;
    let signalled = false;
    const chunk = randomBytes(256 * 1024);
    const pump = () => {
      while (sent < opts.total) {
        const n = Math.min(chunk.length, opts.total - sent);
        sent += n;
        if (!signalled && sent >= opts.total / 2) {
          signalled = true;
          opts.midway();
          return;
        }
        if (!req.write(chunk.subarray(0, n))) return void req.once('drain', pump);
      }
      if (opts.suffix) req.write(opts.suffix);
      req.end();
    };
    pump();
  });
}

describe('SIGKILL mid-upload', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'stowage-crash-'));
  const env = { STOWAGE_DATA_DIR: dataDir, STOWAGE_SWEEP_INTERVAL_MS: '0' };
  let server: ServerProcess | undefined;
  after(async () => {
    await server?.stop('SIGKILL').catch(() => {});
    rmSync(dataDir, { recursive: true, force: true });
  });

  test('no visible half-written file, no dangling record, no orphaned bytes after one sweep; multipart resumes', async () => {
    const ws = JSON.parse((await runCli(['workspace', 'create', '--name', 'Crash', '--json'], env)).stdout);
    server = await startServer(env);
    const headers = { 'x-api-key': ws.public_key };

    // A finished upload before the crash must survive it intact.
    const kept = randomBytes(300_000);
    const form = new FormData();
    form.append('file', new Blob([kept]), 'kept.bin');
    form.append('file_name', 'kept.bin');
    const keptRes = await fetch(`${server.url}/api/v1/uploads`, { method: 'POST', body: form, headers });
    assert.equal(keptRes.status, 201);

    // A multipart session with part 1 done.
    const data = randomBytes(2 * 8 * MiB + 1234);
    const started = await fetch(`${server.url}/api/v1/multipart/start`, {
      method: 'POST',
      body: JSON.stringify({ file_name: 'survivor.bin', size: data.length, format: 'application/octet-stream' }),
      headers: { ...headers, 'content-type': 'application/json' },
    });
    const session = (await started.json()) as any;
    // PORT=0: the configured public URL does not know the port; aim the part URLs at the server.
    session.parts = session.parts.map((u: string) => u.replace(/^http:\/\/[^/]+/, server!.url));
    const part = (n: number) => data.subarray((n - 1) * session.part_size, n * session.part_size);
    assert.equal(
      (
        await fetch(session.parts[0], {
          method: 'PUT',
          body: part(1),
          headers: { 'content-type': 'application/octet-stream' },
        })
      ).status,
      200,
    );

    // Now two uploads in flight, and the process is killed when both are half way.
    const boundary = '----stowagecrash';
    const total = 64 * MiB;
    let halfway = 0;
    const kill = () => {
      if (++halfway === 2) server!.child.kill('SIGKILL');
    };
    const direct = slowRequest(`${server.url}/api/v1/uploads`, {
      method: 'POST',
      headers: { ...headers, 'content-type': `multipart/form-data; boundary=${boundary}` },
      prefix: Buffer.from(
        `--${boundary}\r\nContent-Disposition: form-data; name="file_name"\r\n\r\ncrashed.bin\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="crashed.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`,
      ),
      total,
      suffix: Buffer.from(`\r\n--${boundary}--\r\n`),
      midway: kill,
    });
    const partTwo = slowRequest(session.parts[1], {
      method: 'PUT',
      headers: { 'content-type': 'application/octet-stream', 'content-length': String(session.part_size) },
      total: session.part_size,
      midway: kill,
    });
    const outcomes = await Promise.all([direct, partTwo]);
    assert.ok(
      outcomes.every((o) => o.startsWith('error')),
      `both requests died with the server: ${outcomes}`,
    );
    assert.equal(await server.stop('SIGKILL'), null, 'killed, not exited');

    // Right after the crash, before any sweep: nothing half-written is visible.
    const db = openDatabase({ dataDir });
    const files = await db.kysely
      .selectFrom('files')
      .innerJoin('blobs', 'blobs.id', 'files.blob_id')
      .select(['files.name', 'blobs.storage_key', 'blobs.size', 'blobs.sha256'])
      .execute();
    assert.deepEqual(
      files.map((f) => f.name),
      ['kept.bin'],
      'only the finished upload has a record',
    );
    for (const f of files) {
      const path = join(dataDir, 'storage', 'objects', ...f.storage_key.split('/'));
      assert.ok(existsSync(path), 'every record points at bytes that are there');
    }

    // Restart with an eager sweeper.
    server = await startServer({ ...env, STOWAGE_SWEEP_INTERVAL_MS: '200', STOWAGE_SWEEP_GRACE_MS: '0' });
    await new Promise((r) => setTimeout(r, 1500));
    const blobs = await db.kysely.selectFrom('blobs').select('storage_key').execute();
    assert.deepEqual(storedObjects(dataDir), blobs.map((b) => b.storage_key).sort(), 'no orphaned bytes in storage');
    assert.deepEqual(leftoverTemp(dataDir), [], 'no temporary files left');
    const intents = await db.kysely.selectFrom('storage_intents').select(['reason']).execute();
    assert.deepEqual(
      intents.map((i) => i.reason),
      ['multipart'],
      'only the live session still holds an intent',
    );

    // The session survived: part 1 is there, part 2 is not (it was cut off), then it completes.
    const status = (await (
      await fetch(`${server.url}/api/v1/multipart/${session.session_id}`, { headers })
    ).json()) as any;
    assert.equal(status.data.status, 'active');
    assert.deepEqual(
      status.data.uploaded_parts.map((p: any) => p.part_number),
      [1],
    );
    const rebased = session.parts.map((u: string) => u.replace(/^http:\/\/[^/]+/, server!.url));
    for (const n of [2, 3])
      assert.equal(
        (
          await fetch(rebased[n - 1], {
            method: 'PUT',
            body: part(n),
            headers: { 'content-type': 'application/octet-stream' },
          })
        ).status,
        200,
      );
    const done = await fetch(`${server.url}/api/v1/multipart/complete`, {
      method: 'POST',
      body: JSON.stringify({ session_id: session.session_id }),
      headers: { ...headers, 'content-type': 'application/json' },
    });
    const record = (await done.json()) as any;
    assert.equal(done.status, 200, JSON.stringify(record));
    assert.equal(record.hash, sha(data));
    const keptRow = await db.kysely
      .selectFrom('blobs')
      .select('sha256')
      .where('sha256', '=', sha(kept))
      .executeTakeFirst();
    assert.ok(keptRow, 'the upload finished before the crash is intact');
    await db.close();
  });
});

describe('webhooks pending when the server dies', () => {
  test('a new server process delivers what the killed one had queued', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'stowage-crash-hooks-'));
    const got: string[] = [];
    const receiver = http.createServer((req, res) => {
      got.push(String(req.headers['webhook-id']));
      req.resume();
      req.on('end', () => res.writeHead(204).end());
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    const hook = `http://127.0.0.1:${(receiver.address() as import('node:net').AddressInfo).port}/hook`;
    const env = { STOWAGE_DATA_DIR: dataDir, STOWAGE_OUTBOUND_ALLOW: '127.0.0.1', STOWAGE_SWEEP_INTERVAL_MS: '0' };
    let server: ServerProcess | undefined;
    try {
      const ws = JSON.parse((await runCli(['workspace', 'create', '--name', 'Hooks', '--json'], env)).stdout);
      // This node sends no webhooks: everything it accepts stays queued.
      server = await startServer({ ...env, STOWAGE_WEBHOOK_POLL_MS: '0' });
      for (let i = 0; i < 3; i++) {
        const form = new FormData();
        form.append('file', new Blob([randomBytes(500)]), `f${i}.bin`);
        form.append('file_name', `f${i}.bin`);
        form.append('webhook_url', hook);
        assert.equal(
          (
            await fetch(`${server.url}/api/v1/uploads`, {
              method: 'POST',
              body: form,
              headers: { 'x-api-key': ws.private_key },
            })
          ).status,
          201,
        );
      }
      await server.stop('SIGKILL');
      assert.deepEqual(got, [], 'nothing was sent before the crash');
      server = await startServer({ ...env, STOWAGE_WEBHOOK_POLL_MS: '100' });
      const deadline = Date.now() + 10_000;
      while (got.length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      assert.equal(got.length, 3);
      assert.equal(new Set(got).size, 3);
    } finally {
      await server?.stop('SIGKILL');
      await new Promise((r) => receiver.close(r));
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
