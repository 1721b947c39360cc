// The Uppy option builders of @stowage/sdk/uppy without a browser: which credentials a page may
// hold (a private key is refused, by its prefix), and that Uppy cuts files into the parts
// Stowage expects (the SDK's copy of the layout against the server's own).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  browserCredential,
  type MultipartSessions,
  stowageMultipart,
  stowagePartSize,
  stowageTus,
} from '../sdk/src/uppy.ts';
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

describe('Uppy helpers: the caller makes the session calls (sessions)', () => {
  test('no key in the helper: start, list, complete and abort go through the given calls', async () => {
    const calls: string[] = [];
    const session = {
      session_id: 'ses_1',
      uuid: 'u-1',
      part_size: 8 * 1024 * 1024,
      parts: ['https://storage.example.com/p1', 'https://storage.example.com/p2'],
    };
    const sessions = {
      startMultipart: async (input: { file_name: string; folder?: string }) => {
        calls.push(`start ${input.file_name} ${input.folder}`);
        return session;
      },
      multipartStatus: async (id: string) => {
        calls.push(`status ${id}`);
        return {
          status: 'active',
          size: 9 * 1024 * 1024,
          part_size: session.part_size,
          uploaded_parts: [{ part_number: 1, size: session.part_size, etag: '"e1"' }],
        };
      },
      completeMultipart: async (id: string, opts: { uuid?: string }) => {
        calls.push(`complete ${id} ${opts.uuid}`);
        return { file_no: '7', url: 'https://media.example.com/w/a.bin' };
      },
      abortMultipart: async (id: string) => {
        calls.push(`abort ${id}`);
      },
    } as unknown as MultipartSessions;
    const kept = new Map<string, string>();
    const storage = {
      getItem: (k: string) => kept.get(k) ?? null,
      setItem: (k: string, v: string) => void kept.set(k, v),
      removeItem: (k: string) => void kept.delete(k),
    };
    const opts = stowageMultipart({ baseUrl: BASE, sessions, storage }) as any;
    const file = { name: 'a.bin', size: 9 * 1024 * 1024, type: '', meta: { folder: 'clips' } };
    assert.deepEqual(await opts.createMultipartUpload(file), { uploadId: 'ses_1', key: 'u-1' });
    assert.equal(opts.signPart(file, { uploadId: 'ses_1', partNumber: 2 }).url, session.parts[1]);
    assert.deepEqual(await opts.listParts(file, { uploadId: 'ses_1' }), [
      { PartNumber: 1, Size: session.part_size, ETag: '"e1"' },
    ]);
    assert.equal((await opts.completeMultipartUpload(file, { uploadId: 'ses_1', parts: [] })).file_no, '7');
    assert.deepEqual(calls, ['start a.bin clips', 'status ses_1', 'complete ses_1 u-1']);
    assert.equal(kept.size, 0, 'the saved session goes once complete');
    assert.ok(![...kept.values()].join('').includes('stw_'), 'no key saved');
  });

  test('sessions or a key, not both; a private key beside them is still refused as one', () => {
    const sessions = {} as MultipartSessions;
    assert.throws(() => stowageMultipart({ baseUrl: BASE, sessions, publicKey: SK }), PRIVATE);
    assert.throws(
      () => stowageMultipart({ baseUrl: BASE, sessions, publicKey: PK }),
      /sessions or a publicKey, not both/,
    );
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
