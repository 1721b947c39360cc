// S3_PUBLIC_ENDPOINT: Stowage reaches the store at one address (a compose network's
// http://minio:9000) while browsers reach it at another (https://s3.example.com). Part URLs must be
// signed for the address browsers use, and work there; Stowage's own calls keep the internal one.
// Here the store (OpenStack Swift's S3 layer) is the internal 127.0.0.1 and the public "localhost".
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { loadConfig } from '../src/config.ts';
import { type Harness, makeHarness } from './helpers/harness.ts';
import { externalService } from './helpers/services.ts';
import { freshS3Storage } from './helpers/storage.ts';

const s3 = externalService('STOWAGE_TEST_S3_ENDPOINT', 'an S3-compatible server (scripts/start-swift.sh)');

describe('S3_PUBLIC_ENDPOINT', { skip: s3.skip }, () => {
  let h: Harness;
  let publicEndpoint: string;
  before(async () => {
    const storage = await freshS3Storage();
    if (storage.driver !== 's3') throw new Error('expected S3');
    const internal = new URL(storage.s3.endpoint!);
    assert.equal(internal.hostname, '127.0.0.1', 'the test store listens on 127.0.0.1');
    publicEndpoint = `${internal.protocol}//localhost:${internal.port}`;
    h = await makeHarness('sqlite', { config: { storage: { driver: 's3', s3: { ...storage.s3, publicEndpoint } } } });
  });
  after(() => h?.close());

  test('part URLs name the public host, are accepted there, and the upload completes byte-exact', async () => {
    const data = randomBytes(6 * 1024 * 1024);
    const start = await h.app.inject({
      method: 'POST',
      url: '/api/v1/multipart/start',
      headers: { 'x-api-key': h.ws.public_key },
      payload: { file_name: 'public.bin', size: data.length, format: 'application/octet-stream' },
    });
    assert.equal(start.statusCode, 201, start.body);
    const session = start.json();
    assert.equal(session.parts.length, 1);
    const url = new URL(session.parts[0]);
    assert.equal(url.origin, publicEndpoint);
    const put = await fetch(url, { method: 'PUT', body: new Blob([new Uint8Array(data)]) });
    assert.equal(put.status, 200, await put.text());
    const done = await h.app.inject({
      method: 'POST',
      url: '/api/v1/multipart/complete',
      headers: { 'x-api-key': h.ws.public_key },
      payload: { session_id: session.session_id },
    });
    assert.equal(done.statusCode, 200, done.body);
    assert.equal(done.json().hash, createHash('sha256').update(data).digest('hex'));
    // The browser's origin for CSP and CORS checks is the public one too.
    assert.equal(h.services.storage.partUploadOrigin, publicEndpoint);
  });

  test('a part URL moved to the internal host no longer matches its signature', async () => {
    const start = await h.app.inject({
      method: 'POST',
      url: '/api/v1/multipart/start',
      headers: { 'x-api-key': h.ws.public_key },
      payload: { file_name: 'moved.bin', size: 10, format: 'application/octet-stream' },
    });
    const url = new URL(start.json().parts[0]);
    url.hostname = '127.0.0.1';
    const put = await fetch(url, { method: 'PUT', body: new Blob([new Uint8Array(randomBytes(10))]) });
    assert.equal(put.status, 403, 'signed for the public host only');
  });
});

test('S3_PUBLIC_ENDPOINT is read and checked with the other S3 settings', () => {
  const base = { STOWAGE_STORAGE: 's3', S3_BUCKET: 'b', S3_ENDPOINT: 'http://minio:9000' };
  const ok = loadConfig({ ...base, S3_PUBLIC_ENDPOINT: 'https://s3.example.com/' });
  assert.equal(ok.storage.driver === 's3' && ok.storage.s3.publicEndpoint, 'https://s3.example.com');
  assert.throws(
    () => loadConfig({ ...base, S3_PUBLIC_ENDPOINT: 'ftp://nope' }),
    /S3_PUBLIC_ENDPOINT must be an http\(s\) URL/,
  );
});
