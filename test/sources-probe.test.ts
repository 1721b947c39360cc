// POST /api/v1/sources/{id}/test really reaches the origin: an HTTP server, S3 (OpenStack
// Swift's S3 layer, which checks signatures), Azure (Azurite), and Google Cloud Storage
// through a local stub of its JSON API, because no GCS emulator can run on this machine.
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { BlobServiceClient } from '@azure/storage-blob';
import { type Harness, makeHarness } from './helpers/harness.ts';
import { call } from './helpers/http.ts';
import { closedPort, localServer } from './helpers/servers.ts';
import { externalService } from './helpers/services.ts';

const s3 = externalService('STOWAGE_TEST_S3_ENDPOINT', 'an S3-compatible server (scripts/start-swift.sh)');
const azure = externalService('STOWAGE_TEST_AZURE_CONNECTION_STRING', 'Azurite (scripts/start-azurite.sh)');

async function probe(h: Harness, type: string, configuration: Record<string, unknown>) {
  const name = `probe-${Math.random().toString(36).slice(2, 10)}`;
  const created = await call(h.app, 'POST', '/api/v1/sources', {
    body: { name, type, configuration },
    headers: h.auth,
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const res = await call(h.app, 'POST', `/api/v1/sources/${created.body.data.id}/test`, { headers: h.auth });
  assert.equal(res.status, 200);
  assert.equal(res.body.success, true);
  assert.equal(typeof res.body.data.ok, 'boolean');
  assert.ok(Number.isInteger(res.body.data.latency_ms) && res.body.data.latency_ms >= 0);
  if (res.body.data.ok) assert.equal('error' in res.body.data, false);
  else assert.equal(typeof res.body.data.error, 'string');
  return res.body.data as { ok: boolean; latency_ms: number; error?: string };
}

describe('source test: image_source', () => {
  let h: Harness;
  let strict: Harness;
  let origin: Awaited<ReturnType<typeof localServer>>;
  before(async () => {
    origin = await localServer((req, res) => {
      if (req.url?.startsWith('/broken')) res.writeHead(503).end();
      else if (req.url?.startsWith('/hop')) res.writeHead(302, { location: `http://127.0.0.1:${origin.port}/` }).end();
      else res.writeHead(404).end();
    });
    h = await makeHarness('sqlite', {
      config: { outboundAllow: ['127.0.0.1', 'allowed.test'] },
      services: {
        resolver: async (host) =>
          host === 'allowed.test' || host === 'public.test'
            ? [{ address: '127.0.0.1', family: 4 }]
            : Promise.reject(Object.assign(new Error('nx'), { code: 'ENOTFOUND' })),
      },
    });
    strict = await makeHarness('sqlite', {
      config: { outboundAllow: ['allowed.test'] },
      services: { resolver: async (host) => (host.endsWith('.test') ? [{ address: '127.0.0.1', family: 4 }] : []) },
    });
  });
  after(async () => {
    await h?.close();
    await strict?.close();
    await origin?.close();
  });

  test('a reachable origin is ok, even when its root is 404', async () => {
    const r = await probe(h, 'image_source', { base_url: origin.url });
    assert.equal(r.ok, true);
  });

  test('a 5xx origin, a closed port and an unknown host are not ok, each with its reason', async () => {
    assert.deepEqual(
      (await probe(h, 'image_source', { base_url: `${origin.url}/broken` })).error,
      'origin answered HTTP 503',
    );
    assert.equal(
      (await probe(h, 'image_source', { base_url: `http://127.0.0.1:${await closedPort()}` })).error,
      'connection refused',
    );
    assert.match(
      (await probe(h, 'image_source', { base_url: 'http://nowhere.invalid' })).error!,
      /could not be resolved/,
    );
  });

  test('loopback is refused unless the operator allows it, by literal address and by name', async () => {
    assert.match((await probe(strict, 'image_source', { base_url: origin.url })).error!, /address refused/);
    assert.match(
      (await probe(strict, 'image_source', { base_url: `http://public.test:${origin.port}` })).error!,
      /address refused/,
    );
    assert.match(
      (await probe(strict, 'image_source', { base_url: `http://[::1]:${origin.port}` })).error!,
      /address refused/,
    );
  });

  test('a redirect from an allowed host to a private address is refused', async () => {
    const r = await probe(strict, 'image_source', { base_url: `http://allowed.test:${origin.port}/hop` });
    assert.equal(r.ok, false);
    assert.match(r.error!, /address refused/);
  });
});

describe('source test: s3 against an S3-compatible server', { skip: s3.skip }, () => {
  let h: Harness;
  const base = () => ({
    endpoint: s3.value!,
    region: process.env.STOWAGE_TEST_S3_REGION ?? 'us-east-1',
    access_key: process.env.STOWAGE_TEST_S3_ACCESS_KEY_ID ?? 'test:tester',
    secret_key: process.env.STOWAGE_TEST_S3_SECRET_ACCESS_KEY ?? 'testing',
    bucket: 'stowage-probe',
  });
  before(async () => {
    h = await makeHarness('sqlite', { config: { outboundAllow: ['127.0.0.1'] } });
    const c = new S3Client({
      endpoint: s3.value,
      region: base().region,
      forcePathStyle: true,
      credentials: { accessKeyId: base().access_key, secretAccessKey: base().secret_key },
    });
    await c.send(new CreateBucketCommand({ Bucket: 'stowage-probe' })).catch((e) => {
      if (!/BucketAlready/.test(e.name)) throw e;
    });
    c.destroy();
  });
  after(() => h?.close());

  test('valid credentials and bucket: ok', async () => {
    const r = await probe(h, 's3', base());
    assert.equal(r.ok, true, r.error);
  });
  test('a wrong secret key: access denied, and the secret is not echoed', async () => {
    const r = await probe(h, 's3', { ...base(), secret_key: 'definitely-wrong-secret' });
    assert.equal(r.ok, false);
    assert.match(r.error!, /access denied/);
    assert.ok(!JSON.stringify(r).includes('definitely-wrong-secret'));
  });
  test('a missing bucket: named in the answer', async () => {
    const r = await probe(h, 's3', { ...base(), bucket: 'no-such-bucket-here' });
    assert.equal(r.ok, false);
    assert.match(r.error!, /does not exist/);
  });
  test('without the operator allowing loopback the endpoint is refused', async () => {
    const strict = await makeHarness('sqlite');
    try {
      const r = await probe(strict, 's3', base());
      assert.equal(r.ok, false);
      assert.match(r.error!, /address refused/);
    } finally {
      await strict.close();
    }
  });
});

describe('source test: azure against Azurite', { skip: azure.skip }, () => {
  let h: Harness;
  before(async () => {
    h = await makeHarness('sqlite', { config: { outboundAllow: ['127.0.0.1'] } });
    const container = BlobServiceClient.fromConnectionString(azure.value!).getContainerClient('stowage-probe');
    await container.createIfNotExists();
  });
  after(() => h?.close());

  test('valid connection string and container: ok', async () => {
    const r = await probe(h, 'azure', { connection_string: azure.value!, container_name: 'stowage-probe' });
    assert.equal(r.ok, true, r.error);
  });
  test('a wrong account key: authentication failed', async () => {
    const wrong = azure.value!.replace(/AccountKey=[^;]+/, `AccountKey=${Buffer.alloc(64, 7).toString('base64')}`);
    const r = await probe(h, 'azure', { connection_string: wrong, container_name: 'stowage-probe' });
    assert.equal(r.ok, false);
    assert.match(r.error!, /authentication failed/);
  });
  test('a missing container: named in the answer', async () => {
    const r = await probe(h, 'azure', { connection_string: azure.value!, container_name: 'no-such-container' });
    assert.equal(r.ok, false);
    assert.match(r.error!, /does not exist/);
  });
});

describe('source test: SDK connections go only to checked addresses (DNS rebinding)', () => {
  let h: Harness;
  const calls = new Map<string, number>();
  before(async () => {
    // The first answer (the check) is public; every later one (the connection) is loopback.
    h = await makeHarness('sqlite', {
      services: {
        resolver: async (host) => {
          const n = (calls.get(host) ?? 0) + 1;
          calls.set(host, n);
          return [{ address: n === 1 ? '93.184.216.34' : '127.0.0.1', family: 4 }];
        },
      },
    });
  });
  after(() => h?.close());

  test('s3: the endpoint rebinding to loopback is refused at connect time', async () => {
    const r = await probe(h, 's3', {
      endpoint: 'http://s3.rebind.test:18080',
      region: 'us-east-1',
      bucket: 'media-bucket',
      access_key: 'a',
      secret_key: 'b',
    });
    assert.equal(r.ok, false);
    assert.match(r.error!, /address refused/);
    assert.ok((calls.get('s3.rebind.test') ?? 0) >= 2, 'the connection asked the guard again');
  });

  test('azure: the blob endpoint rebinding to loopback is refused at connect time', async () => {
    const cs = `DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=${Buffer.alloc(64, 1).toString('base64')};BlobEndpoint=http://blob.rebind.test:10000/devstoreaccount1;`;
    const r = await probe(h, 'azure', { connection_string: cs, container_name: 'media' });
    assert.equal(r.ok, false);
    assert.match(r.error!, /address refused/);
    assert.ok((calls.get('blob.rebind.test') ?? 0) >= 2, 'the connection asked the guard again');
  });

  test('image_source: the origin rebinding to loopback is refused at connect time', async () => {
    const r = await probe(h, 'image_source', { base_url: 'http://img.rebind.test:9' });
    assert.equal(r.ok, false);
    assert.match(r.error!, /address refused/);
  });
});

describe('source test: google_cloud (a local stub of the GCS JSON API: no emulator runs here)', () => {
  const { privateKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  const account = JSON.stringify({
    type: 'service_account',
    project_id: 'demo',
    client_email: 'svc@demo.iam.gserviceaccount.com',
    private_key: privateKey,
  });
  let stub: Awaited<ReturnType<typeof localServer>>;
  let h: Harness;
  let offline: Harness;
  const seen: string[] = [];
  before(async () => {
    stub = await localServer((req, res) => {
      seen.push(`${req.method} ${req.url}`);
      const m = /^\/storage\/v1\/b\/([^/?]+)/.exec(req.url ?? '');
      if (m && m[1] === 'media-bucket') {
        res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ kind: 'storage#bucket', name: 'media-bucket' }));
      } else {
        res
          .writeHead(404, { 'content-type': 'application/json' })
          .end(JSON.stringify({ error: { code: 404, message: 'Not Found' } }));
      }
    });
    h = await makeHarness('sqlite', { config: { gcsApiEndpoint: stub.url } });
    // No network: Google's host does not resolve here, as on any offline machine.
    offline = await makeHarness('sqlite', {
      services: { resolver: async () => Promise.reject(Object.assign(new Error('offline'), { code: 'ENOTFOUND' })) },
    });
  });
  after(async () => {
    await h?.close();
    await offline?.close();
    await stub?.close();
  });

  test('a valid key and an existing bucket: ok, asked of the bucket endpoint', async () => {
    const r = await probe(h, 'google_cloud', { service_account_json: account, bucket_name: 'media-bucket' });
    assert.equal(r.ok, true, r.error);
    assert.ok(seen.some((s) => s.startsWith('GET /storage/v1/b/media-bucket')));
  });
  test('a missing bucket: the key is valid but the bucket does not exist', async () => {
    const r = await probe(h, 'google_cloud', { service_account_json: account, bucket_name: 'other-bucket' });
    assert.equal(r.ok, false);
    assert.match(r.error!, /key is valid, but bucket "other-bucket" does not exist/);
  });
  test('Google unreachable: says the key was checked locally and what could not be', async () => {
    const r = await probe(offline, 'google_cloud', { service_account_json: account, bucket_name: 'media-bucket' });
    assert.equal(r.ok, false);
    assert.match(
      r.error!,
      /service account key is valid \(checked by signing locally\), but Google Cloud Storage could not be reached/,
    );
  });
});
