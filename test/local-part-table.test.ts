// Local multipart part records: the table after the data (storage/part-table.ts), what a cut
// write or a broken slot reads as, re-uploads, and sessions from before the table (one
// part-<n>.json per part) that must keep working after an upgrade; and the flush a session's
// parts share.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, describe, test } from 'node:test';
import type { PartInfo } from '../src/storage/driver.ts';
import { LocalStorage } from '../src/storage/local.ts';
import { dirSyncsPending, dirsToSync, renameMakingDirs, SharedFlush, syncDirs } from '../src/storage/file-sink.ts';
import { decodeSlot, decodeTable, EMPTY_SLOT, encodeSlot, SLOT, slotOffset } from '../src/storage/part-table.ts';

const MiB = 1024 * 1024;
const root = mkdtempSync(join(tmpdir(), 'stowage-part-table-'));
after(() => rmSync(root, { recursive: true, force: true }));

const etag = '"0123456789abcdef"';

describe('part table slots', () => {
  test('a record reads back as written; zero, broken or misplaced slots are parts not done', () => {
    const slot = encodeSlot({ partNumber: 7, size: 8 * MiB, etag });
    assert.equal(slot.length, SLOT);
    assert.deepEqual(decodeSlot(slot, 7), { partNumber: 7, size: 8 * MiB, etag });
    assert.equal(decodeSlot(EMPTY_SLOT, 7), undefined);
    assert.equal(decodeSlot(slot, 8), undefined, 'a record in the wrong slot');
    for (const at of [0, 5, 9, 17, 25]) {
      const broken = Buffer.from(slot);
      broken[at] ^= 0x40;
      assert.equal(decodeSlot(broken, 7), undefined, `byte ${at} changed`);
    }
    assert.equal(decodeSlot(slot.subarray(0, 20), 7), undefined, 'a short read');
    assert.throws(() => encodeSlot({ partNumber: 1, size: 1, etag: 'abc' }), /not a quoted XXH3-64/);
  });

  test('a table lists its valid records in order', () => {
    const table = Buffer.concat([
      encodeSlot({ partNumber: 1, size: 10, etag }),
      EMPTY_SLOT,
      encodeSlot({ partNumber: 3, size: 4, etag: '"ffffffffffffffff"' }),
    ]);
    assert.deepEqual(
      decodeTable(table, 3).map((p) => [p.partNumber, p.size, p.etag]),
      [
        [1, 10, etag],
        [3, 4, '"ffffffffffffffff"'],
      ],
    );
    assert.deepEqual(decodeTable(table.subarray(0, 40), 3).length, 1, 'a table cut short');
  });
});

describe('LocalStorage multipart records', () => {
  const storage = new LocalStorage(join(root, 'store'));
  const partSize = 5 * MiB;
  const bytes = randomBytes(2 * partSize + 1234);
  const part = (n: number) => bytes.subarray((n - 1) * partSize, Math.min(n * partSize, bytes.length));
  const write = (key: string, id: string, n: number, body: Buffer | Readable = part(n)): Promise<PartInfo> =>
    storage.writePart!(key, id, n, Buffer.isBuffer(body) ? Readable.from([body]) : body, part(n).length);
  const sessionDir = (id: string) => join(root, 'store', 'multipart', id);

  test('parts are recorded in the data file; complete leaves exactly the bytes', async () => {
    await storage.init();
    const key = 'pt/table.bin';
    const id = await storage.createMultipart(key, { size: bytes.length, partSize });
    assert.deepEqual(await storage.listParts(key, id), []);
    const p3 = await write(key, id, 3);
    const p1 = await write(key, id, 1);
    assert.deepEqual(await storage.listParts(key, id), [p1, p3]);
    assert.deepEqual(
      readdirSync(sessionDir(id)).filter((n) => n.startsWith('part-')),
      [],
      'no record files for a new session',
    );
    const data = join(sessionDir(id), 'data');
    assert.equal(statSync(data).size, slotOffset(bytes.length, 4), 'the data, then one slot per part');
    const p2 = await write(key, id, 2);
    await storage.completeMultipart(key, id, [p1, p2, p3]);
    const stored = readFileSync(join(root, 'store', 'objects', key));
    assert.equal(stored.length, bytes.length, 'the table is cut off');
    assert.ok(stored.equals(bytes));
  });

  test('a slot whose bytes were damaged counts as missing, and the part can be sent again', async () => {
    const key = 'pt/damaged.bin';
    const id = await storage.createMultipart(key, { size: bytes.length, partSize });
    const p1 = await write(key, id, 1);
    const p2 = await write(key, id, 2);
    const data = join(sessionDir(id), 'data');
    const file = readFileSync(data);
    file[slotOffset(bytes.length, 2) + 9] ^= 0xff;
    writeFileSync(data, file);
    assert.deepEqual(await storage.listParts(key, id), [p1]);
    assert.deepEqual(await write(key, id, 2), p2);
    assert.deepEqual(await storage.listParts(key, id), [p1, p2]);
    await storage.abortMultipart(key, id);
  });

  test('a re-upload that fails midway leaves the part missing, not the old record over new bytes', async () => {
    const key = 'pt/reupload.bin';
    const id = await storage.createMultipart(key, { size: bytes.length, partSize });
    const p1 = await write(key, id, 1);
    assert.deepEqual(await storage.listParts(key, id), [p1]);
    const failing = new Readable({
      read() {
        this.push(randomBytes(MiB));
        this.destroy(new Error('client went away'));
      },
    });
    await assert.rejects(write(key, id, 1, failing));
    assert.deepEqual(await storage.listParts(key, id), []);
    await storage.abortMultipart(key, id);
  });

  test('a session from before the table (part-<n>.json records) still lists, takes parts and completes', async () => {
    const key = 'pt/legacy.bin';
    const id = await storage.createMultipart(key, { size: bytes.length, partSize });
    const dir = sessionDir(id);
    // What the previous release wrote: meta without `table`, a data file of the final size, and
    // one record per part done.
    writeFileSync(join(dir, 'meta.json'), JSON.stringify({ key, size: bytes.length, partSize }));
    const data = readFileSync(join(dir, 'data')).subarray(0, bytes.length);
    part(1).copy(data, 0);
    writeFileSync(join(dir, 'data'), data);
    const p1 = { partNumber: 1, size: partSize, etag: '"1111111111111111"' };
    writeFileSync(join(dir, 'part-1.json'), JSON.stringify(p1));
    const fresh = new LocalStorage(join(root, 'store')); // a restarted server: nothing cached
    assert.deepEqual(await fresh.listParts(key, id), [p1]);
    const p2 = await fresh.writePart!(key, id, 2, Readable.from([part(2)]), partSize);
    const p3 = await fresh.writePart!(key, id, 3, Readable.from([part(3)]), part(3).length);
    assert.ok(readdirSync(dir).includes('part-3.json'), 'the old session keeps its kind of record');
    assert.deepEqual(await fresh.listParts(key, id), [p1, p2, p3]);
    await fresh.completeMultipart(key, id, [p1, p2, p3]);
    assert.ok(readFileSync(join(root, 'store', 'objects', key)).equals(bytes));
  });
});

describe('SharedFlush', () => {
  test('callers that come while a flush runs share the next one, never the running one', async () => {
    const calls: { fd: number; done: (err: Error | null) => void }[] = [];
    const flush = new SharedFlush(((fd: number, cb: (err: Error | null) => void) => {
      calls.push({ fd, done: cb });
    }) as never);
    const settled: string[] = [];
    const a = flush.flush(3).then(() => settled.push('a'));
    const b = flush.flush(4).then(() => settled.push('b'));
    const c = flush.flush(5).then(() => settled.push('c'));
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(
      calls.map((x) => x.fd),
      [3],
      'one flush at a time',
    );
    calls[0].done(null);
    await a;
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(settled, ['a'], 'b and c asked after the first flush began: it does not answer them');
    assert.deepEqual(
      calls.map((x) => x.fd),
      [3, 4],
      'b and c share one flush',
    );
    const d = flush.flush(6).then(() => settled.push('d'));
    calls[1].done(null);
    await Promise.all([b, c]);
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(settled, ['a', 'b', 'c']);
    calls[2].done(new Error('EIO'));
    await assert.rejects(d, /EIO/);
    const e = flush.flush(7);
    calls[3].done(null);
    await e;
    assert.equal(calls.length, 4, 'a failed flush does not stop the next');
  });
});

describe('syncDirs', () => {
  test('a rename syncs its folder, and every parent that gained a folder mkdir made for it', async () => {
    assert.deepEqual(dirsToSync('/s/objects/ws/ab'), ['/s/objects/ws/ab']);
    assert.deepEqual(dirsToSync('/s/objects/ws/ab', '/s/objects/ws/ab'), ['/s/objects/ws/ab', '/s/objects/ws']);
    assert.deepEqual(dirsToSync('/s/objects/ws/ab', '/s/objects/ws'), [
      '/s/objects/ws/ab',
      '/s/objects/ws',
      '/s/objects',
    ]);
    const base = join(root, 'sync');
    const created = await mkdir(join(base, 'a', 'b'), { recursive: true });
    assert.equal(created, base);
    await syncDirs(join(base, 'a', 'b'), created); // opens and fsyncs real folders, up to root
    await assert.rejects(syncDirs(join(base, 'missing')), /ENOENT/);
  });

  test('uploads into one folder at once share its fsyncs, each answered by one that began after it asked', async () => {
    const runs: { dir: string; done: () => void }[] = [];
    const sync = (dir: string) => new Promise<void>((resolve) => runs.push({ dir, done: resolve }));
    const settled: number[] = [];
    const ask = (i: number, dir = '/w/blobs') => syncDirs(dir, undefined, sync).then(() => void settled.push(i));
    const first = [ask(1), ask(2), ask(3), ask(4, '/w2/blobs')];
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(
      runs.map((r) => r.dir),
      ['/w/blobs', '/w2/blobs'],
      'one fsync per folder at a time',
    );
    runs[0].done();
    runs[1].done();
    await new Promise((r) => setImmediate(r));
    // 2 and 3 asked while the first ran: the first does not answer them, the next one does.
    assert.deepEqual(settled.sort(), [1, 4]);
    assert.equal(runs.length, 3, 'one more fsync of /w/blobs for both callers that waited');
    const late = ask(5); // comes while the second runs: waits for a third
    runs[2].done();
    await Promise.all(first);
    assert.deepEqual(settled.sort(), [1, 2, 3, 4]);
    await new Promise((r) => setImmediate(r));
    assert.equal(runs.length, 4);
    runs[3].done();
    await late;
    await new Promise((r) => setImmediate(r));
    assert.equal(dirSyncsPending(), 0, 'no folder is remembered once its fsyncs are done');
    // A failed fsync fails every caller that shared it, and is not remembered either.
    const failing = () => Promise.reject(Object.assign(new Error('EIO: i/o error, fsync'), { code: 'EIO' }));
    const both = await Promise.allSettled([syncDirs('/w/x', undefined, failing), syncDirs('/w/x', undefined, failing)]);
    assert.deepEqual(
      both.map((r) => r.status),
      ['rejected', 'rejected'],
    );
    await new Promise((r) => setImmediate(r));
    assert.equal(dirSyncsPending(), 0);
  });

  test('renameMakingDirs makes the target folder only when it is missing, and says which it made', async () => {
    const base = join(root, 'rename');
    await mkdir(base, { recursive: true });
    const one = join(base, 'one.tmp');
    writeFileSync(one, 'first');
    // Into folders that do not exist yet: made, and the first one made is named for syncDirs.
    assert.equal(await renameMakingDirs(one, join(base, 'ws', 'blobs', 'a')), join(base, 'ws'));
    assert.equal(readFileSync(join(base, 'ws', 'blobs', 'a'), 'utf8'), 'first');
    // Into a folder that exists: nothing made.
    const two = join(base, 'two.tmp');
    writeFileSync(two, 'second');
    assert.equal(await renameMakingDirs(two, join(base, 'ws', 'blobs', 'b')), undefined);
    assert.equal(readFileSync(join(base, 'ws', 'blobs', 'b'), 'utf8'), 'second');
    // A source that is gone is still an error, after the folder was tried.
    await assert.rejects(renameMakingDirs(join(base, 'gone.tmp'), join(base, 'ws', 'new', 'c')), /ENOENT/);
    assert.equal(readdirSync(join(base, 'ws')).sort().join(','), 'blobs,new');
  });
});
