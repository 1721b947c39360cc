// The hashing thread: SHA-256 of file ranges read back after they were written, and local disk
// puts that hash on it instead of on the main thread, with and without fsync.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { after, describe, test } from 'node:test';
import { FileHasher } from '../src/uploads/hashing/file-hasher.ts';
import { LocalStorage } from '../src/storage/local.ts';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('FileHasher', () => {
  const dir = mkdtempSync(join(tmpdir(), 'stowage-hash-'));
  const hasher = new FileHasher();
  after(async () => {
    await hasher.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('ranges fed in file order hash to the SHA-256 of the whole, across files and interleaved jobs', async () => {
    const a = randomBytes(3 * 1024 * 1024 + 17);
    const b = randomBytes(1024 * 1024 + 5);
    writeFileSync(join(dir, 'a'), a);
    writeFileSync(join(dir, 'b'), b);
    const one = hasher.start();
    const two = hasher.start();
    one.feed(join(dir, 'a'), 0, 1000);
    two.feed(join(dir, 'b'), 0, b.length);
    one.feed(join(dir, 'a'), 1000, a.length);
    one.feed(join(dir, 'b'), 7, 7); // empty ranges are nothing
    const [h1, h2] = await Promise.all([one.digest(), two.digest()]);
    assert.equal(h1, sha(a));
    assert.equal(h2, sha(b));
  });

  test('a range past the end of the file, or a missing file, fails the digest instead of hashing less', async () => {
    const c = randomBytes(100);
    writeFileSync(join(dir, 'c'), c);
    const short = hasher.start();
    short.feed(join(dir, 'c'), 0, 200);
    await assert.rejects(short.digest(), /ends at 100/);
    const missing = hasher.start();
    missing.feed(join(dir, 'nope'), 0, 10);
    await assert.rejects(missing.digest(), /ENOENT/);
    const twice = hasher.start();
    await twice.digest();
    await assert.rejects(twice.digest(), /already ended/);
  });

  for (const fsync of [true, false]) {
    test(`local put (fsync ${fsync}) returns the SHA-256 of what it stored, computed on the thread`, async () => {
      const root = join(dir, `store-${fsync}`);
      const storage = new LocalStorage(root, { fsync, hasher });
      await storage.init();
      assert.equal(storage.hashesOnPut, true);
      const data = randomBytes(5 * 1024 * 1024 + 3);
      const chunks = Array.from({ length: Math.ceil(data.length / 65536) }, (_, i) =>
        data.subarray(i * 65536, (i + 1) * 65536),
      );
      const res = await storage.put('ws/blobs/x', Readable.from(chunks), { hash: true });
      assert.equal(res.size, data.length);
      assert.equal(res.sha256, sha(data));
      assert.ok((await readFile(storage.localPath('ws/blobs/x'))).equals(data));
      const plain = await storage.put('ws/blobs/y', Readable.from([data]));
      assert.equal(plain.sha256, undefined, 'no hash unless asked');
    });
  }

  test('local put: chunks of any size across write batches stay byte-exact, hash included', async () => {
    const storage = new LocalStorage(join(dir, 'odd'), { fsync: false, hasher });
    await storage.init();
    const data = randomBytes(3 * 1024 * 1024 + 123);
    const chunks: Buffer[] = [];
    for (let at = 0, i = 0; at < data.length; i++) {
      const n = [1, 7, 65536, 200_000, 1024 * 1024 - 1, 3][i % 6];
      chunks.push(data.subarray(at, at + n));
      at += n;
    }
    const res = await storage.put('ws/blobs/odd', Readable.from(chunks), { hash: true });
    assert.equal(res.sha256, sha(data));
    assert.ok((await readFile(storage.localPath('ws/blobs/odd'))).equals(data));
  });

  test("local put: a slow client's bytes are on disk within moments, not held until a batch fills", async () => {
    const root = join(dir, 'slow');
    const storage = new LocalStorage(root, { fsync: true, hasher });
    await storage.init();
    const body = new PassThrough();
    const put = storage.put('ws/blobs/slow', body, { hash: true });
    body.write(Buffer.from('hello, '));
    await new Promise((r) => setTimeout(r, 400));
    const temp = readdirSync(join(root, 'tmp')).filter((n) => !n.startsWith('.'));
    assert.equal(temp.length, 1);
    assert.equal(statSync(join(root, 'tmp', temp[0])).size, 7, 'written while the upload is still open');
    body.end(Buffer.from('world'));
    const res = await put;
    assert.equal(res.sha256, sha(Buffer.from('hello, world')));
    assert.equal((await readFile(storage.localPath('ws/blobs/slow'))).toString(), 'hello, world');
  });
});
