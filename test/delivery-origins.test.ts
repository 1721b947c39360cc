// Sources as live origins: /{workspace_id}-{source_name}/[tokens/]path from a web origin, S3
// (Swift), Azure (Azurite) and Google Cloud Storage (a local stub of its JSON API: no
// emulator runs here). Every origin fetch passes the outbound address checks.
import assert from 'node:assert/strict';
import { createHash, generateKeyPairSync } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { CreateBucketCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { BlobServiceClient } from '@azure/storage-blob';
import sharp from 'sharp';
import type { ResolvedAddress } from '../src/outbound/guard.ts';
import { type Harness, makeHarness } from './helpers/harness.ts';
import { call } from './helpers/http.ts';
import { localServer } from './helpers/servers.ts';
import { externalService } from './helpers/services.ts';

const s3 = externalService('STOWAGE_TEST_S3_ENDPOINT', 'an S3-compatible server (scripts/start-swift.sh)');
const azure = externalService('STOWAGE_TEST_AZURE_CONNECTION_STRING', 'Azurite (scripts/start-azurite.sh)');
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const resolver = async (host: string): Promise<ResolvedAddress[]> => {
  if (host === 'origin.test') return [{ address: '127.0.0.1', family: 4 }];
  throw Object.assign(new Error('nx'), { code: 'ENOTFOUND' });
};

describe('sources as origins', () => {
  let h: Harness;
  let base: string;
  let photo: Buffer;
  let origin: Awaited<ReturnType<typeof localServer>>;
  let gcs: Awaited<ReturnType<typeof localServer>>;
  const originHits: { url: string; headers: Record<string, unknown> }[] = [];
  const get = async (path: string, headers: Record<string, string> = {}) => {
    const res = await fetch(`${base}${path}`, { headers });
    return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) };
  };
  const source = async (name: string, type: string, configuration: Record<string, unknown>) => {
    const res = await call(h.app, 'POST', '/api/v1/sources', { body: { name, type, configuration }, headers: h.auth });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.data;
  };
  const at = (name: string, path: string) => `/${h.ws.workspace_id}-${name}/${path}`;

  before(async () => {
    photo = await sharp({ create: { width: 800, height: 600, channels: 3, background: '#a05030' } })
      .jpeg()
      .toBuffer();
    origin = await localServer((req, res) => {
      originHits.push({ url: req.url!, headers: req.headers });
      const pathname = req.url!.split('?')[0];
      if (pathname === '/img/photo.jpg' || pathname === '/img/caf%C3%A9%201.jpg')
        res.writeHead(200, { 'content-type': 'image/jpeg', etag: '"v1"' }).end(photo);
      else if (pathname === '/img/broken.jpg') res.writeHead(500).end();
      else res.writeHead(404).end();
    });
    const { privateKey } = generateKeyPairSync('rsa', {
      modulusLength: 2048,
      privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
      publicKeyEncoding: { type: 'spki', format: 'pem' },
    });
    gcs = await localServer((req, res) => {
      const m = /\/b\/media-bucket\/o\/([^?]+)/.exec(req.url ?? '');
      if (!m || decodeURIComponent(m[1]) !== 'pics/photo.jpg')
        return void res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"code":404}}');
      if ((req.url ?? '').includes('alt=media'))
        return void res.writeHead(200, { 'content-type': 'image/jpeg' }).end(photo);
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          name: 'pics/photo.jpg',
          bucket: 'media-bucket',
          contentType: 'image/jpeg',
          size: String(photo.length),
          updated: new Date().toISOString(),
        }),
      );
    });
    h = await makeHarness('sqlite', {
      config: { outboundAllow: ['origin.test', '127.0.0.1'], gcsApiEndpoint: gcs.url },
      services: { resolver },
    });
    base = await h.app.listen({ host: '127.0.0.1', port: 0 });
    await source('web', 'image_source', {
      base_url: `http://origin.test:${origin.port}/img`,
      canonical_header: true,
      forward_header: true,
    });
    await source('gcs', 'google_cloud', {
      service_account_json: JSON.stringify({
        type: 'service_account',
        project_id: 'p',
        client_email: 'svc@p.iam.gserviceaccount.com',
        private_key: privateKey,
      }),
      bucket_name: 'media-bucket',
    });
  });
  after(async () => {
    await h?.close();
    await origin?.close();
    await gcs?.close();
  });

  test('image_source: the original, with a canonical link and forwarded headers (never credentials)', async () => {
    const res = await get(at('web', 'photo.jpg'), {
      'user-agent': 'stowage-test',
      cookie: 'session=1',
      authorization: 'Bearer secret',
    });
    assert.equal(res.status, 200);
    assert.equal(sha(res.body), sha(photo));
    assert.equal(res.headers.get('content-type'), 'image/jpeg');
    assert.equal(res.headers.get('link'), `<http://origin.test:${origin.port}/img/photo.jpg>; rel="canonical"`);
    const hit = originHits.at(-1)!;
    assert.equal(hit.headers['user-agent'], 'stowage-test');
    assert.equal(hit.headers.cookie, undefined);
    assert.equal(hit.headers.authorization, undefined);
    assert.equal(hit.headers['x-forwarded-host'], undefined, 'canonical_header: true sends nothing to the origin');
    assert.equal((await get(at('web', 'caf%C3%A9%201.jpg'))).status, 200, 'path segments are passed on encoded');
  });

  test('image_source: the query string reaches the origin and keys the rendition cache', async () => {
    const res = await get(at('web', 'photo.jpg?v=123&width=360'));
    assert.equal(res.status, 200);
    assert.equal(originHits.at(-1)!.url, '/img/photo.jpg?v=123&width=360');
    assert.equal(
      res.headers.get('link'),
      `<http://origin.test:${origin.port}/img/photo.jpg?v=123&width=360>; rel="canonical"`,
    );
    const before = originHits.length;
    for (const q of ['?v=1', '?v=2', '?v=1', '?v=2', ''])
      assert.equal((await get(at('web', `w_120/photo.jpg${q}`))).status, 200);
    assert.deepEqual(
      originHits.slice(before).map((h) => h.url),
      ['/img/photo.jpg?v=1', '/img/photo.jpg?v=2', '/img/photo.jpg'],
      'one fetch per query string',
    );
  });

  test('a rendition of an origin object is made once and then cached', async () => {
    const before = originHits.length;
    const first = await get(at('web', 'w_200,f_webp/photo.jpg'));
    assert.equal(first.status, 200);
    assert.equal(first.headers.get('content-type'), 'image/webp');
    assert.equal((await sharp(first.body).metadata()).width, 200);
    const second = await get(at('web', 'w_200,f_webp/photo.jpg'));
    assert.deepEqual(second.body, first.body);
    assert.equal(originHits.length, before + 1, 'the second request never reached the origin');
  });

  test('missing object 404, origin error 502, unknown source 404, inactive source 410, bad tokens 400', async () => {
    assert.equal((await get(at('web', 'nothing.jpg'))).status, 404);
    const broken = await get(at('web', 'broken.jpg'));
    assert.equal(broken.status, 502);
    assert.equal(JSON.parse(broken.body.toString()).errorCode, 'ORIGIN_FAILED');
    assert.equal((await get(at('nosuch', 'photo.jpg'))).status, 404);
    assert.equal((await get(at('web', 'w_0/photo.jpg'))).status, 400);
    const off = await source('off', 'image_source', { base_url: `http://origin.test:${origin.port}/img` });
    await call(h.app, 'PATCH', `/api/v1/sources/${off.id}`, { body: { is_active: false }, headers: h.auth });
    const gone = await get(at('off', 'photo.jpg'));
    assert.equal(gone.status, 410);
    assert.equal(JSON.parse(gone.body.toString()).errorCode, 'SOURCE_INACTIVE');
  });

  test('origin addresses are checked: a private origin the operator did not allow is refused', async () => {
    const strict = await makeHarness('sqlite', {
      services: { resolver: async () => [{ address: '10.0.0.8', family: 4 }] },
    });
    try {
      await call(strict.app, 'POST', '/api/v1/sources', {
        body: { name: 'intranet', type: 'image_source', configuration: { base_url: 'http://intranet.test' } },
        headers: strict.auth,
      });
      await call(strict.app, 'POST', '/api/v1/sources', {
        body: { name: 'meta', type: 'image_source', configuration: { base_url: 'http://169.254.169.254/latest' } },
        headers: strict.auth,
      });
      for (const name of ['intranet', 'meta']) {
        const res = await call(strict.app, 'GET', `/${strict.ws.workspace_id}-${name}/x.jpg`);
        assert.equal(res.status, 502, name);
        assert.match(res.body.message, /refused/);
      }
    } finally {
      await strict.close();
    }
  });

  test('google_cloud through the stub: original and rendition', async () => {
    const res = await get(at('gcs', 'pics/photo.jpg'));
    assert.equal(res.status, 200, res.body.toString());
    assert.equal(sha(res.body), sha(photo));
    assert.equal((await get(at('gcs', 'pics/none.jpg'))).status, 404);
    const small = await get(at('gcs', 'w_64/pics/photo.jpg'));
    assert.equal((await sharp(small.body).metadata()).width, 64);
  });

  describe('s3 origin against Swift', { skip: s3.skip }, () => {
    test('serves the object at the path', async () => {
      const creds = {
        accessKeyId: process.env.STOWAGE_TEST_S3_ACCESS_KEY_ID ?? 'test:tester',
        secretAccessKey: process.env.STOWAGE_TEST_S3_SECRET_ACCESS_KEY ?? 'testing',
      };
      const client = new S3Client({
        endpoint: s3.value,
        region: 'us-east-1',
        forcePathStyle: true,
        credentials: creds,
      });
      await client.send(new CreateBucketCommand({ Bucket: 'origin-bucket' })).catch(() => {});
      await client.send(
        new PutObjectCommand({
          Bucket: 'origin-bucket',
          Key: 'catalog/shoe.jpg',
          Body: photo,
          ContentType: 'image/jpeg',
        }),
      );
      client.destroy();
      await source('bucket', 's3', {
        endpoint: s3.value,
        region: 'us-east-1',
        bucket: 'origin-bucket',
        access_key: creds.accessKeyId,
        secret_key: creds.secretAccessKey,
      });
      const res = await get(at('bucket', 'catalog/shoe.jpg'));
      assert.equal(res.status, 200);
      assert.equal(sha(res.body), sha(photo));
      assert.equal((await get(at('bucket', 'catalog/none.jpg'))).status, 404);
      assert.equal((await sharp((await get(at('bucket', 'w_50/catalog/shoe.jpg'))).body).metadata()).width, 50);
    });
  });

  describe('azure origin against Azurite', { skip: azure.skip }, () => {
    test('serves the blob at the path', async () => {
      const container = BlobServiceClient.fromConnectionString(azure.value!).getContainerClient('origin');
      await container.createIfNotExists();
      await container
        .getBlockBlobClient('catalog/shoe.jpg')
        .uploadData(photo, { blobHTTPHeaders: { blobContentType: 'image/jpeg' } });
      await source('blobs', 'azure', { connection_string: azure.value!, container_name: 'origin' });
      const res = await get(at('blobs', 'catalog/shoe.jpg'));
      assert.equal(res.status, 200);
      assert.equal(sha(res.body), sha(photo));
      assert.equal((await get(at('blobs', 'catalog/none.jpg'))).status, 404);
    });
  });
});
