// The Uppy option builders of @stowage/sdk/uppy without a browser: which credentials a page may
// hold (a private key is refused, by its prefix), and that Uppy cuts files into the parts
// Stowage expects (the SDK's copy of the layout against the server's own).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { browserCredential, stowageMultipart, stowagePartSize, stowageTus } from '../sdk/src/uppy.ts';
import { partSizeFor } from '../src/uploads/multipart/part-layout.ts';

const BASE = 'https://media.example.com';
const PK = `stw_pk_${'a'.repeat(43)}`;
const SK = `stw_sk_${'b'.repeat(43)}`;
const UT = 'stw_ut_2MiV5VfH4JiA5iELcvVXWf.RotUPGRHd0orS3xvDyXPiPzyUtU-dY1zbqp_p3ae5oE';
const PRIVATE = /private key \(stw_sk_…\) must never be put in a web page/;

describe('Uppy helpers: credentials', () => {
  test('a private key is refused wherever it is put, before any request', () => {
    assert.throws(() => browserCredential({ baseUrl: BASE, publicKey: SK }), PRIVATE);
    assert.throws(() => browserCredential({ baseUrl: BASE, uploadToken: SK }), PRIVATE);
    assert.throws(() => browserCredential({ baseUrl: BASE, publicKey: ` ${SK}\n` }), PRIVATE);
    assert.throws(() => stowageMultipart({ baseUrl: BASE, publicKey: SK }), PRIVATE);
    assert.throws(() => stowageTus({ baseUrl: BASE, publicKey: SK }), PRIVATE);
    assert.throws(() => stowageTus({ baseUrl: BASE, publicKey: PK, uploadToken: SK }), PRIVATE);
  });

  test('a public key or an upload token, one of them, each in its own option', () => {
    assert.equal(browserCredential({ baseUrl: BASE, publicKey: PK }), PK);
    assert.equal(browserCredential({ baseUrl: BASE, uploadToken: UT }), UT);
    assert.throws(() => browserCredential({ baseUrl: BASE }), /exactly one of publicKey or uploadToken/);
    assert.throws(() => browserCredential({ baseUrl: BASE, publicKey: PK, uploadToken: UT }), /exactly one/);
    assert.throws(() => browserCredential({ baseUrl: BASE, publicKey: UT }), /publicKey must be/);
    assert.throws(() => browserCredential({ baseUrl: BASE, uploadToken: PK }), /uploadToken must be/);
    assert.throws(() => browserCredential({ baseUrl: '', publicKey: PK }), /baseUrl is required/);
  });

  test('multipart takes the public key; a token goes through tus', () => {
    assert.throws(() => stowageMultipart({ baseUrl: BASE, uploadToken: UT }), /upload token uploads through tus/);
    const tus = stowageTus({ baseUrl: `${BASE}/`, uploadToken: UT, chunkSize: 1024 });
    assert.equal(tus.endpoint, `${BASE}/api/v1/tus`);
    assert.deepEqual(tus.headers, { authorization: `Bearer ${UT}` });
    assert.equal(tus.chunkSize, 1024, 'other @uppy/tus options pass through');
  });
});

describe('Uppy helpers: the part layout', () => {
  test("Uppy's chunks are Stowage's parts, for every size up to 5 TB", () => {
    const MiB = 1024 * 1024;
    const sizes = [1, 5 * MiB, 8 * MiB - 1, 8 * MiB, 8 * MiB + 1, 50_000_000, 83_886_080_000, 83_886_080_001, 5e12];
    for (const size of sizes) assert.equal(stowagePartSize(size), partSizeFor(size), `size ${size}`);
    const options = stowageMultipart({ baseUrl: BASE, publicKey: PK });
    assert.equal(options.shouldUseMultipart, true, 'every file goes multipart');
    assert.equal(options.getChunkSize?.({ size: 50_000_000 }), 8 * MiB);
  });
});
