// The service on Azure (Azurite) and on GCS (an in-process fake of its JSON API, a mock: no GCS
// emulator runs here): a direct upload and a multipart upload whose parts go through the
// service, byte-exact, with nothing left behind but the file.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { StorageConfig } from '../src/config.ts';
import { AzureStorage } from '../src/storage/azure.ts';
import { type FakeGcs, startFakeGcs } from './helpers/fake-gcs.ts';
import { type Harness, makeHarness } from './helpers/harness.ts';
import { externalService } from './helpers/services.ts';

const azure = externalService('STOWAGE_TEST_AZURE_CONNECTION_STRING', 'Azurite (scripts/start-azurite.sh)');
const MiB = 1024 * 1024;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

const stores: {
  name: string;
  skip: string | false;
  open(): Promise<{ storage: StorageConfig; close(): Promise<void> }>;
}[] = [
  {
    name: 'Azure (Azurite)',
    skip: azure.skip,
    async open() {
      const settings = { connectionString: azure.value!, container: `svc-${randomBytes(4).toString('hex')}` };
      const admin = new AzureStorage(settings);
      await admin.container.create();
      return {
        storage: { driver: 'azure', azure: settings },
        close: async () => void (await admin.container.deleteIfExists()),
      };
    },
  },
  {
    name: 'GCS (an in-process fake of the GCS JSON API, not real GCS)',
    skip: false,
    async open() {
      const fake: FakeGcs = await startFakeGcs({ buckets: ['media'] });
      return {
        storage: { driver: 'gcs', gcs: { bucket: 'media', apiEndpoint: fake.url, projectId: 'test' } },
        close: () => fake.close(),
      };
    },
  },
];

for (const store of stores) {
  describe(`uploads on ${store.name}`, { skip: store.skip }, () => {
    let h: Harness;
    let base: string;
    let closeStore: () => Promise<void>;
    const post = async (path: string, body: unknown) => {
      const res = await fetch(`${base}${path}`, {
        method: 'POST',
        body: JSON.stringify(body),
        headers: { 'content-type': 'application/json', 'x-api-key': h.ws.public_key },
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    const stored = async () => {
      const keys: string[] = [];
      for await (const o of h.services.storage.list('')) keys.push(o.key);
      return keys.sort();
    };

    before(async () => {
      const opened = await store.open();
      closeStore = opened.close;
      h = await makeHarness('sqlite', { config: { storage: opened.storage } });
      base = await h.app.listen({ host: '127.0.0.1', port: 0 });
      // Part URLs point at the service's public URL: parts go through it on these stores.
      (h.services.multipart as unknown as { settings: { publicUrl: string } }).settings.publicUrl = base;
    });
    after(async () => {
      await h?.close();
      await closeStore?.();
    });

    test('a direct upload is stored byte-exact', async () => {
      const data = randomBytes(3 * MiB + 7);
      const form = new FormData();
      form.append('file_name', 'direct.bin');
      form.append('file', new Blob([new Uint8Array(data)]), 'direct.bin');
      const res = await fetch(`${base}/api/v1/uploads`, {
        method: 'POST',
        body: form,
        headers: { 'x-api-key': h.ws.public_key },
      });
      const body = (await res.json()) as { hash?: string; data?: { hash?: string } };
      assert.ok(res.status === 200 || res.status === 201, JSON.stringify(body));
      assert.equal(body.hash ?? body.data?.hash, sha(data));
    });

    test('a multipart upload through the service completes byte-exact and leaves only the file', async () => {
      const before = await stored();
      const data = randomBytes(17 * MiB + 333);
      const s = (
        await post('/api/v1/multipart/start', {
          file_name: 'mp.bin',
          size: data.length,
          format: 'application/octet-stream',
        })
      ).body as { session_id: string; part_size: number; parts: string[] };
      assert.ok(
        s.parts.every((u) => u.startsWith(base)),
        'part URLs are the service',
      );
      for (let n = s.parts.length; n >= 1; n--) {
        const part = data.subarray((n - 1) * s.part_size, n * s.part_size);
        const res = await fetch(s.parts[n - 1], {
          method: 'PUT',
          body: new Blob([new Uint8Array(part)]),
          headers: { 'content-type': 'application/octet-stream' },
        });
        assert.equal(res.status, 200, await res.text());
        assert.match(res.headers.get('etag') ?? '', /^"[0-9a-f]+"$/);
      }
      const done = await post('/api/v1/multipart/complete', { session_id: s.session_id });
      assert.equal(done.status, 200, JSON.stringify(done.body));
      assert.equal(done.body.hash, sha(data));
      assert.equal(done.body.size, data.length);
      const after = await stored();
      assert.equal(after.length, before.length + 1, after.join(', '));
    });
  });
}
