// Graceful shutdown on SIGTERM: readiness turns false, in-flight uploads finish, then the
// process exits; past the deadline what is left is cut.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { runCli, startServer } from './helpers/process.ts';

/** A direct upload sent slowly: `chunks` pieces of 64 KiB, `gapMs` apart. */
function slowUpload(url: string, key: string, name: string, chunks: number, gapMs: number): Promise<number | string> {
  const boundary = '----slow';
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="file_name"\r\n\r\n${name}\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${name}"\r\n\r\n`,
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  return new Promise((resolve) => {
    const req = http.request(`${url}/api/v1/uploads`, {
      method: 'POST',
      headers: {
        'x-api-key': key,
        'content-type': `multipart/form-data; boundary=${boundary}`,
        'content-length': head.length + chunks * 65536 + tail.length,
      },
    });
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', (e) => resolve(`error: ${e.message}`));
    req.write(head);
    let sent = 0;
    const next = () => {
      if (sent === chunks) return void req.end(tail);
      sent++;
      req.write(randomBytes(65536));
      setTimeout(next, gapMs);
    };
    next();
  });
}

describe('graceful shutdown', () => {
  const dir = mkdtempSync(join(tmpdir(), 'stowage-shutdown-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('SIGTERM: readiness 503 at once, the upload in flight finishes (201), exit 0', async () => {
    const env = {
      STOWAGE_DATA_DIR: join(dir, 'a'),
      STOWAGE_SHUTDOWN_DELAY_MS: '800',
      STOWAGE_SHUTDOWN_TIMEOUT_MS: '10000',
    };
    const ws = JSON.parse((await runCli(['workspace', 'create', '--name', 'S', '--json'], env)).stdout);
    const server = await startServer(env);
    const upload = slowUpload(server.url, ws.public_key, 'inflight.bin', 30, 60);
    await new Promise((r) => setTimeout(r, 300));
    const exited = server.stop('SIGTERM');
    await new Promise((r) => setTimeout(r, 100));
    const ready = await fetch(`${server.url}/readyz`);
    assert.equal(ready.status, 503);
    assert.equal(((await ready.json()) as any).status, 'draining');
    assert.equal(await upload, 201, 'the upload in flight finished');
    assert.equal(await exited, 0);
    const again = await startServer(env);
    try {
      const files = await fetch(`${again.url}/api/v1/files`, { headers: { 'x-api-key': ws.private_key } }).then(
        (r) => r.json() as any,
      );
      assert.deepEqual(
        files.files.map((f: any) => f.name),
        ['inflight.bin'],
      );
      assert.equal(files.files[0].size, 30 * 65536);
    } finally {
      await again.stop('SIGKILL');
    }
  });

  test('past the deadline, what is still in flight is cut and the process exits', async () => {
    const env = { STOWAGE_DATA_DIR: join(dir, 'b'), STOWAGE_SHUTDOWN_TIMEOUT_MS: '500' };
    const ws = JSON.parse((await runCli(['workspace', 'create', '--name', 'S', '--json'], env)).stdout);
    const server = await startServer(env);
    const upload = slowUpload(server.url, ws.public_key, 'too-slow.bin', 100, 50);
    await new Promise((r) => setTimeout(r, 300));
    const started = Date.now();
    const code = await server.stop('SIGTERM');
    const took = Date.now() - started;
    assert.ok(took < 3000, `exited ${took} ms after SIGTERM`);
    assert.notEqual(code, 0, 'a cut shutdown says so');
    assert.notEqual(await upload, 201);
  });
});
