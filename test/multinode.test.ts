// Two service processes over one PostgreSQL, one S3-compatible store and one Redis: either
// node can take any step, and background jobs (webhooks, the sweeper) are never done twice.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { freshPostgres } from './helpers/harness.ts';
import { readFirstWorkspace, type ServerProcess, startServer } from './helpers/process.ts';
import { externalService } from './helpers/services.ts';
import { freshS3Storage } from './helpers/storage.ts';

const pgGate = externalService('STOWAGE_TEST_DATABASE_URL', 'PostgreSQL');
const s3Gate = externalService('STOWAGE_TEST_S3_ENDPOINT', 'an S3-compatible server');
const redisGate = externalService('STOWAGE_TEST_REDIS_URL', 'Redis');
const skip = pgGate.skip || s3Gate.skip || redisGate.skip;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const MiB = 1024 * 1024;

describe('two nodes', { skip }, () => {
  let db: { url: string; drop(): Promise<void> };
  let a: ServerProcess;
  let b: ServerProcess;
  let ws: { workspace_id: string; public_key: string; private_key: string };
  const hooks: string[] = [];
  let receiver: http.Server;
  let hookUrl: string;

  before(async () => {
    db = await freshPostgres();
    const storage = await freshS3Storage();
    if (storage.driver !== 's3') throw new Error('expected s3');
    receiver = http.createServer((req, res) => {
      hooks.push(String(req.headers['webhook-id']));
      req.resume();
      req.on('end', () => res.writeHead(204).end());
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    hookUrl = `http://127.0.0.1:${(receiver.address() as import('node:net').AddressInfo).port}/hook`;
    const env = {
      DATABASE_URL: db.url,
      STOWAGE_MASTER_KEY: randomBytes(32).toString('base64'),
      STOWAGE_STORAGE: 's3',
      S3_ENDPOINT: storage.s3.endpoint!,
      S3_BUCKET: storage.s3.bucket,
      S3_ACCESS_KEY_ID: storage.s3.accessKeyId!,
      S3_SECRET_ACCESS_KEY: storage.s3.secretAccessKey!,
      REDIS_URL: redisGate.value!,
      STOWAGE_OUTBOUND_ALLOW: '127.0.0.1',
      STOWAGE_WEBHOOK_POLL_MS: '50',
      STOWAGE_SWEEP_INTERVAL_MS: '100',
      STOWAGE_DATA_DIR: `/tmp/stowage-node-${randomBytes(4).toString('hex')}`,
    };
    // Both start at once on an empty database: migrations and the first workspace happen once.
    [a, b] = await Promise.all([
      startServer(env),
      startServer({ ...env, STOWAGE_DATA_DIR: `${env.STOWAGE_DATA_DIR}-b` }),
    ]);
    // The node that created the first workspace wrote its keys into its own data directory.
    const dirs = [env.STOWAGE_DATA_DIR, `${env.STOWAGE_DATA_DIR}-b`];
    const created = dirs.map((d) => readFirstWorkspace(d)).filter((w) => w !== undefined);
    assert.equal(created.length, 1, 'exactly one node created the first workspace');
    assert.equal([a.output(), b.output()].filter((o) => o.includes('first-workspace.json')).length, 1);
    ws = created[0]!;
  });
  after(async () => {
    await a?.stop('SIGKILL');
    await b?.stop('SIGKILL');
    await new Promise((r) => receiver?.close(r));
    await db?.drop();
  });

  test('a multipart upload started on one node is completed through the other; files listed on one are served by the other', async () => {
    const data = randomBytes(2 * 8 * MiB + 77);
    const start = await fetch(`${a.url}/api/v1/multipart/start`, {
      method: 'POST',
      headers: { 'x-api-key': ws.public_key, 'content-type': 'application/json' },
      body: JSON.stringify({
        file_name: 'shared.bin',
        size: data.length,
        format: 'application/octet-stream',
        folder: 'cluster',
      }),
    });
    const s = (await start.json()) as any;
    assert.equal(start.status, 201);
    for (let i = 0; i < s.parts.length; i++) {
      const res = await fetch(s.parts[i], {
        method: 'PUT',
        body: new Blob([data.subarray(i * s.part_size, (i + 1) * s.part_size)]),
        headers: { 'content-type': 'application/octet-stream' },
      });
      assert.equal(res.status, 200, 'parts go straight to S3');
    }
    const done = await fetch(`${b.url}/api/v1/multipart/complete`, {
      method: 'POST',
      headers: { 'x-api-key': ws.public_key, 'content-type': 'application/json' },
      body: JSON.stringify({ session_id: s.session_id }),
    });
    const record = (await done.json()) as any;
    assert.equal(done.status, 200, JSON.stringify(record));
    assert.equal(record.hash, sha(data));
    const listed = (await fetch(`${a.url}/api/v1/files?search=shared`, {
      headers: { 'x-api-key': ws.private_key },
    }).then((r) => r.json())) as any;
    assert.equal(listed.files[0].file_no, record.file_no);
    const served = await fetch(`${b.url}${new URL(record.url).pathname}`);
    assert.equal(sha(Buffer.from(await served.arrayBuffer())), sha(data));
  });

  test('webhooks from uploads on both nodes are each delivered once, though both nodes send', async () => {
    for (let i = 0; i < 12; i++) {
      const node = i % 2 ? b : a;
      const form = new FormData();
      form.append('file', new Blob([randomBytes(100)]), `h${i}.bin`);
      form.append('file_name', `h${i}.bin`);
      form.append('webhook_url', hookUrl);
      assert.equal(
        (
          await fetch(`${node.url}/api/v1/uploads`, {
            method: 'POST',
            body: form,
            headers: { 'x-api-key': ws.private_key },
          })
        ).status,
        201,
      );
    }
    const deadline = Date.now() + 15_000;
    while (hooks.length < 12 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(hooks.length, 12);
    assert.equal(new Set(hooks).size, 12, 'no message twice');
  });

  test('expired sessions are swept by the two sweepers together, each exactly once', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const res = await fetch(`${(i % 2 ? a : b).url}/api/v1/multipart/start`, {
        method: 'POST',
        headers: { 'x-api-key': ws.public_key, 'content-type': 'application/json' },
        body: JSON.stringify({ file_name: `old${i}.bin`, size: 10, format: 'application/octet-stream' }),
      });
      ids.push(((await res.json()) as any).session_id);
    }
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      await client.query(`UPDATE multipart_sessions SET expire_at = 1 WHERE id = ANY($1)`, [ids]);
      const deadline = Date.now() + 10_000;
      let expired = 0;
      while (Date.now() < deadline) {
        expired = Number(
          (
            await client.query(`SELECT count(*) FROM multipart_sessions WHERE id = ANY($1) AND status = 'expired'`, [
              ids,
            ])
          ).rows[0].count,
        );
        if (expired === 6) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.equal(expired, 6);
    } finally {
      await client.end();
    }
    await new Promise((r) => setTimeout(r, 400));
    // Each node logs how many sessions it expired: together, exactly the six.
    const total = [a, b]
      .flatMap((n) => n.output().split('\n'))
      .filter((l) => l.startsWith('{') && l.includes('"msg":"sweep"'))
      .reduce((sum, l) => sum + Number(JSON.parse(l).expired ?? 0), 0);
    assert.equal(total, 6, 'no session expired twice');
  });
});
