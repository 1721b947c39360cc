// One contract every storage driver passes: local disk always, S3 against OpenStack Swift's
// S3 layer (checks signatures, part sizes and ListParts like S3) when configured.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { xxh3 } from '@node-rs/xxhash';
import { CreateBucketCommand, UploadPartCommand } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import {
  type MultipartStorage,
  ObjectNotFoundError,
  type StorageDriver,
  supportsMultipart,
} from '../src/storage/driver.ts';
import { LocalStorage, PartLengthError } from '../src/storage/local.ts';
import { S3Storage } from '../src/storage/s3.ts';
import { externalService } from './helpers/services.ts';

const s3 = externalService('STOWAGE_TEST_S3_ENDPOINT', 'an S3-compatible server (scripts/start-swift.sh)');
const MiB = 1024 * 1024;

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}
/** A stream that yields `data` in small chunks, then fails if `failAfter` is set. */
function chunked(data: Buffer, failAfter?: number): Readable {
  let offset = 0;
  return new Readable({
    read() {
      if (failAfter !== undefined && offset >= failAfter) return this.destroy(new Error('client went away'));
      if (offset >= data.length) return this.push(null);
      this.push(data.subarray(offset, offset + 64 * 1024));
      offset += 64 * 1024;
    },
  });
}

async function uploadPart(
  d: StorageDriver & MultipartStorage,
  key: string,
  uploadId: string,
  n: number,
  body: Buffer,
  declared = body.length,
) {
  if (d.presignParts) {
    // Parts 1..n are signed together, as a start does, so that for n > 1 the URL comes from
    // the batch path rather than from getSignedUrl.
    const urls = await d.presignParts(
      key,
      uploadId,
      Array.from({ length: n }, (_, i) => ({ partNumber: i + 1, length: declared })),
      300,
    );
    const url = urls[n - 1];
    const res = await fetch(url, {
      method: 'PUT',
      body: new Blob([new Uint8Array(body)]),
      headers: { 'content-type': 'application/octet-stream' },
    });
    await res.arrayBuffer();
    if (!res.ok) throw Object.assign(new Error(`part ${n}: HTTP ${res.status}`), { status: res.status });
    return;
  }
  return d.writePart!(key, uploadId, n, Readable.from([body]), declared);
}

const drivers: {
  name: string;
  skip: string | false;
  make: () => Promise<{ driver: StorageDriver; cleanup(): Promise<void> }>;
}[] = [
  {
    name: 'local',
    skip: false,
    async make() {
      const dir = mkdtempSync(join(tmpdir(), 'stowage-storage-'));
      const driver = new LocalStorage(dir);
      await driver.init();
      return { driver, cleanup: async () => rmSync(dir, { recursive: true, force: true }) };
    },
  },
  {
    name: 's3',
    skip: s3.skip,
    async make() {
      const driver = new S3Storage({
        endpoint: s3.value,
        region: process.env.STOWAGE_TEST_S3_REGION ?? 'us-east-1',
        bucket: `contract-${randomBytes(4).toString('hex')}`,
        accessKeyId: process.env.STOWAGE_TEST_S3_ACCESS_KEY_ID ?? 'test:tester',
        secretAccessKey: process.env.STOWAGE_TEST_S3_SECRET_ACCESS_KEY ?? 'testing',
        forcePathStyle: true,
      });
      await driver.client.send(new CreateBucketCommand({ Bucket: (driver as any).bucket }));
      return {
        driver,
        async cleanup() {
          for await (const o of driver.list('')) await driver.delete(o.key);
          driver.destroy();
        },
      };
    },
  },
];

for (const spec of drivers) {
  describe(`storage contract: ${spec.name}`, { skip: spec.skip }, () => {
    let d: StorageDriver;
    let cleanup: () => Promise<void>;
    before(async () => {
      ({ driver: d, cleanup } = await spec.make());
    });
    after(() => cleanup?.());

    test('check answers', async () => {
      await d.check();
    });

    test('put then get is byte-exact; stat, list and delete agree', async () => {
      const data = randomBytes(3 * MiB + 123);
      const { size } = await d.put('ws1/a/one.bin', chunked(data), { contentType: 'application/octet-stream' });
      assert.equal(size, data.length);
      assert.equal(sha(await readAll(await d.get('ws1/a/one.bin'))), sha(data));
      assert.equal((await d.stat('ws1/a/one.bin'))?.size, data.length);
      await d.put('ws1/b.bin', Readable.from([Buffer.from('b')]));
      await d.put('ws2/c.bin', Readable.from([Buffer.from('c')]));
      const listed: string[] = [];
      for await (const o of d.list('ws1/')) listed.push(o.key);
      assert.deepEqual(listed.sort(), ['ws1/a/one.bin', 'ws1/b.bin']);
      await d.delete('ws1/b.bin');
      await d.delete('ws1/b.bin');
      assert.equal(await d.stat('ws1/b.bin'), null);
    });

    test('an empty object is stored and read back', async () => {
      assert.equal((await d.put('empty.bin', Readable.from([]))).size, 0);
      assert.equal((await readAll(await d.get('empty.bin'))).length, 0);
    });

    test('ranges return exactly the bytes asked for', async () => {
      const data = randomBytes(100_000);
      await d.put('range.bin', Readable.from([data]));
      assert.deepEqual(await readAll(await d.get('range.bin', { start: 10, end: 19 })), data.subarray(10, 20));
      assert.deepEqual(await readAll(await d.get('range.bin', { start: 99_990, end: 99_999 })), data.subarray(99_990));
    });

    test('a missing object: get throws ObjectNotFoundError, stat is null', async () => {
      await assert.rejects(d.get('nope/none.bin'), ObjectNotFoundError);
      assert.equal(await d.stat('nope/none.bin'), null);
    });

    test('a put whose stream fails leaves nothing new, and the old object intact', async () => {
      const old = randomBytes(1000);
      await d.put('atomic.bin', Readable.from([old]));
      await assert.rejects(d.put('atomic.bin', chunked(randomBytes(2 * MiB), MiB)));
      assert.equal(sha(await readAll(await d.get('atomic.bin'))), sha(old));
      await assert.rejects(d.put('never.bin', chunked(randomBytes(2 * MiB), MiB)));
      assert.equal(await d.stat('never.bin'), null);
    });

    test('keys that could escape are refused', async () => {
      for (const key of ['../x', 'a/../../x', '/abs', 'a//b', 'a/./b', 'sp ace', 'nul\u0000', '']) {
        await assert.rejects(d.put(key, Readable.from([Buffer.from('x')])), /invalid storage key/, key);
      }
    });

    describe('multipart', () => {
      const partSize = 5 * MiB;
      test('parts in any order complete into the exact file; re-uploading a part replaces it', async (t) => {
        if (!supportsMultipart(d)) return t.skip('driver has no multipart');
        const m = d;
        const data = randomBytes(2 * partSize + 4321);
        const key = 'mp/file.bin';
        const id = await m.createMultipart(key, {
          size: data.length,
          partSize,
          contentType: 'application/octet-stream',
        });
        const part = (n: number) => data.subarray((n - 1) * partSize, Math.min(n * partSize, data.length));
        await uploadPart(m, key, id, 3, part(3));
        await uploadPart(m, key, id, 1, randomBytes(partSize)); // wrong bytes first...
        await uploadPart(m, key, id, 1, part(1)); // ...then replaced
        assert.deepEqual(
          (await m.listParts(key, id)).map((p) => p.partNumber),
          [1, 3],
        );
        assert.equal(await d.stat(key), null, 'nothing visible before complete');
        await uploadPart(m, key, id, 2, part(2));
        const parts = await m.listParts(key, id);
        assert.deepEqual(
          parts.map((p) => [p.partNumber, p.size]),
          [
            [1, partSize],
            [2, partSize],
            [3, 4321],
          ],
        );
        // Quoted content hashes: local storage XXH3-64 (16 hex digits), S3 MD5 (32).
        assert.ok(
          parts.every((p) => (d.name === 'local' ? /^"[0-9a-f]{16}"$/ : /^"[0-9a-f]{32}"$/).test(p.etag)),
          JSON.stringify(parts),
        );
        assert.notEqual(parts[0].etag, parts[1].etag);
        if (d.name === 'local')
          assert.deepEqual(
            parts.map((p) => p.etag),
            [1, 2, 3].map((n) => `"${xxh3.xxh64(part(n)).toString(16).padStart(16, '0')}"`),
          );
        await m.completeMultipart(key, id, parts);
        assert.equal(sha(await readAll(await d.get(key))), sha(data));
      });

      if (spec.name === 'local') {
        test('local part ETags are XXH3-64 of the part (the published test vector for "abc")', async () => {
          const m = d as StorageDriver & MultipartStorage;
          const id = await m.createMultipart('mp/abc.bin', { size: 3, partSize });
          assert.equal((await uploadPart(m, 'mp/abc.bin', id, 1, Buffer.from('abc')))?.etag, '"78af5f94892f3950"');
          await m.abortMultipart('mp/abc.bin', id);
        });
      }

      if (spec.name === 's3') {
        test('batch-presigned part URLs are exactly what getSignedUrl gives for each part', async () => {
          const m = d as S3Storage;
          const key = 'mp/batch_file-1.v2.bin';
          const id = await m.createMultipart(key, { contentType: 'application/octet-stream' });
          const signingDate = new Date(Date.now() - 60_000);
          const parts = [1, 2, 3].map((partNumber) => ({
            partNumber,
            length: partNumber < 3 ? partSize : partSize - 7,
          }));
          const urls = await m.presignParts(key, id, parts, 900, signingDate);
          const expected = await Promise.all(
            parts.map((p) =>
              getSignedUrl(
                m.client,
                new UploadPartCommand({
                  Bucket: (m as any).bucket,
                  Key: key,
                  UploadId: id,
                  PartNumber: p.partNumber,
                  ContentLength: p.length,
                }),
                {
                  expiresIn: 900,
                  signableHeaders: new Set(['content-length']),
                  signingDate,
                },
              ),
            ),
          );
          assert.deepEqual(urls, expected);
          assert.equal(new Set(urls.map((u) => new URL(u).searchParams.get('X-Amz-Signature'))).size, 3);
          await m.abortMultipart(key, id);
        });

        test('a start with thousands of parts lets the event loop turn while its URLs are signed', async () => {
          const m = d as S3Storage;
          const many = Array.from({ length: 2000 }, (_, i) => ({ partNumber: i + 1, length: partSize }));
          let turns = 0;
          let done = false;
          const tick = () => {
            turns++;
            if (!done) setImmediate(tick);
          };
          setImmediate(tick);
          const urls = await m.presignParts('mp/many.bin', 'upload-1', many, 900);
          done = true;
          assert.equal(urls.length, 2000);
          assert.match(urls[1999], /[?&]partNumber=2000&/);
          assert.ok(turns >= 5, `the event loop turned ${turns} times`);
        });
      }

      test('a part of another length than declared is refused and not recorded', async (t) => {
        if (!supportsMultipart(d)) return t.skip('driver has no multipart');
        const key = 'mp/len.bin';
        const id = await d.createMultipart(key, { size: 2 * partSize, partSize });
        await assert.rejects(
          uploadPart(d, key, id, 1, randomBytes(partSize - 10), partSize),
          (e: any) => e instanceof PartLengthError || e.status === 403 || e.status === 400,
        );
        await assert.rejects(
          uploadPart(d, key, id, 2, randomBytes(partSize + 10), partSize),
          (e: any) => e instanceof PartLengthError || e.status === 403 || e.status === 400,
        );
        assert.deepEqual(await d.listParts(key, id), []);
        await d.abortMultipart(key, id);
      });

      test('abort frees the parts; a second abort is harmless', async (t) => {
        if (!supportsMultipart(d)) return t.skip('driver has no multipart');
        const key = 'mp/abort.bin';
        const id = await d.createMultipart(key, { size: partSize, partSize });
        await uploadPart(d, key, id, 1, randomBytes(partSize));
        await d.abortMultipart(key, id);
        await d.abortMultipart(key, id);
        await assert.rejects(d.listParts(key, id));
        assert.equal(await d.stat(key), null);
      });
    });
  });
}
