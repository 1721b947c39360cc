// tus-js-client against the real server process (src/main.ts), killed with SIGKILL while a
// file is on its way: a new process on the same data directory and database answers HEAD with
// the offset storage holds, the same client resumes from there by itself (its retry), and the
// file is byte-exact. On local disk with SQLite, and on S3 (Swift) with PostgreSQL.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import * as tus from 'tus-js-client';
import { DIALECTS, freshPostgres } from './helpers/harness.ts';
import { readFirstWorkspace, type ServerProcess, startServer } from './helpers/process.ts';
import { closedPort } from './helpers/servers.ts';
import { freshS3Storage, UPLOAD_MATRIX } from './helpers/storage.ts';

const MiB = 1024 * 1024;
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

const combos: {
  name: string;
  skip: string | false;
  env(): Promise<{ env: Record<string, string>; cleanup(): Promise<void> }>;
}[] = [
  { name: 'local disk + SQLite', skip: false, env: async () => ({ env: {}, cleanup: async () => {} }) },
  {
    name: 'S3 (Swift) + PostgreSQL',
    skip: UPLOAD_MATRIX.find((c) => c.storage === 's3')!.skip || DIALECTS[1].skip,
    async env() {
      const storage = await freshS3Storage();
      if (storage.driver !== 's3') throw new Error('expected S3 settings');
      const db = await freshPostgres();
      const s3 = storage.s3;
      return {
        env: {
          DATABASE_URL: db.url,
          STOWAGE_STORAGE: 's3',
          S3_ENDPOINT: s3.endpoint!,
          S3_REGION: s3.region,
          S3_BUCKET: s3.bucket,
          S3_ACCESS_KEY_ID: s3.accessKeyId!,
          S3_SECRET_ACCESS_KEY: s3.secretAccessKey!,
          S3_FORCE_PATH_STYLE: 'true',
        },
        cleanup: db.drop,
      };
    },
  },
];

for (const combo of combos) {
  describe(`tus across a server crash on ${combo.name}`, { skip: combo.skip }, () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'stowage-tus-crash-'));
    const servers: ServerProcess[] = [];
    let cleanup = async () => {};
    after(async () => {
      for (const s of servers) await s.stop('SIGKILL');
      await cleanup();
      rmSync(dataDir, { recursive: true, force: true });
    });

    test('SIGKILL mid-upload, restart on the same data: tus-js-client resumes from the stored offset, byte-exact', async (t) => {
      const setup = await combo.env();
      cleanup = setup.cleanup;
      // One port for both processes, so that the upload URL the client holds stays valid.
      const port = await closedPort();
      const env = {
        ...setup.env,
        STOWAGE_DATA_DIR: dataDir,
        PORT: String(port),
        STOWAGE_PUBLIC_URL: `http://127.0.0.1:${port}`,
        STOWAGE_FSYNC: 'true',
      };
      const start = async () => {
        const s = await startServer(env);
        servers.push(s);
        return s;
      };
      await start();
      const keys = readFirstWorkspace(dataDir);
      assert.ok(keys, 'the first start wrote the workspace keys');
      const endpoint = `http://127.0.0.1:${port}/api/v1/tus`;

      // Large enough that the kill, sent once 22 MiB are out, lands mid-body even on a quiet
      // machine: with 40 MiB the server once had the rest and answered before the signal.
      const data = randomBytes(96 * MiB + 4321);
      const patches: number[] = [];
      let killedAt = -1;
      let restarted: Promise<ServerProcess> | undefined;
      const url = await new Promise<string>((resolve, reject) => {
        const upload: tus.Upload = new tus.Upload(data, {
          endpoint,
          headers: { 'x-api-key': keys.public_key },
          metadata: { filename: 'crash.bin', filetype: 'application/octet-stream' },
          // One PATCH for the whole file (tus-js-client's default), so the kill cuts a request mid-body.
          // The client retries on its own while the server is down and starting again.
          retryDelays: [250, 500, 1000, 2000, 4000, 8000, 8000, 8000],
          onBeforeRequest: (req) => {
            if (req.getMethod() === 'PATCH') patches.push(Number(req.getHeader('Upload-Offset')));
          },
          onProgress: (sent) => {
            if (killedAt < 0 && sent > 22 * MiB) {
              killedAt = sent;
              const dead = servers[servers.length - 1];
              restarted = dead.stop('SIGKILL').then(start);
              restarted.catch(reject);
            }
          },
          onError: reject,
          onSuccess: () => resolve(upload.url!),
        });
        upload.start();
      });
      assert.ok(killedAt > 0, 'the server was killed mid-upload');
      await restarted;
      assert.equal(servers.length, 2);
      assert.equal(patches[0], 0);
      const resumedFrom = patches.at(-1)!;
      // Whole parts written before the kill are kept: the client did not start over.
      assert.ok(patches.length >= 2 && resumedFrom > 0, `PATCH offsets ${patches.join(', ')}`);
      t.diagnostic(`killed after ${killedAt} bytes were sent; PATCH offsets ${patches.join(', ')}`);
      assert.ok(resumedFrom <= killedAt, `resumed at ${resumedFrom}, after ${killedAt} bytes were sent`);
      const record = (await (
        await fetch(url, { headers: { 'tus-resumable': '1.0.0', 'x-api-key': keys.public_key } })
      ).json()) as { size: number; hash: string; url: string };
      assert.equal(record.size, data.length);
      assert.equal(record.hash, sha256(data));
      const delivered = await fetch(record.url.replace(/^https?:\/\/[^/]+/, `http://127.0.0.1:${port}`));
      assert.equal(delivered.status, 200);
      assert.equal(sha256(Buffer.from(await delivered.arrayBuffer())), sha256(data));
    });
  });
}
