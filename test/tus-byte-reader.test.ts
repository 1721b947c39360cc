// The tus store's body cutter (src/uploads/tus/byte-reader.ts): pieces of chosen lengths out of
// one body whose chunks fall anywhere, each byte handed out once and in order.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { PassThrough, Readable } from 'node:stream';
import { test } from 'node:test';
import { ByteReader, joined } from '../src/uploads/tus/byte-reader.ts';

const readAll = async (r: Readable) => {
  const chunks: Buffer[] = [];
  for await (const c of r) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
};

/** A body arriving in chunks of the given sizes, a turn of the event loop apart. */
function body(data: Buffer, sizes: number[]): Readable {
  const out = new PassThrough();
  void (async () => {
    let at = 0;
    for (let i = 0; at < data.length; i++) {
      const n = sizes[i % sizes.length];
      out.write(data.subarray(at, at + n));
      at += n;
      await new Promise((r) => setImmediate(r));
    }
    out.end();
  })();
  return out;
}

test('pieces of chosen lengths are the body, in order, whatever its chunks', async () => {
  const data = randomBytes(300_001);
  const reader = new ByteReader(body(data, [7, 65_536, 1, 40_000]));
  const got: Buffer[] = [];
  for (const n of [100_000, 1, 99_999, 50_000]) {
    assert.equal(await reader.hasMore(), true);
    const piece = await readAll(reader.take(n));
    assert.equal(piece.length, n);
    got.push(piece);
  }
  // The last piece asks for more than is left: it ends with the body.
  const last = await readAll(reader.take(1_000_000));
  assert.equal(last.length, 50_001);
  got.push(last);
  assert.ok(Buffer.concat(got).equals(data));
  assert.equal(await reader.hasMore(), false);
  assert.equal((await readAll(reader.take(10))).length, 0, 'a piece after the end is empty');
});

test('a piece joined to stored bytes comes after them; a body that fails fails its piece', async () => {
  const data = randomBytes(10_000);
  const reader = new ByteReader(body(data, [3000]));
  const head = Readable.from([Buffer.from('head:')]);
  const first = await readAll(joined(head, reader.take(4000)));
  assert.equal(first.toString('latin1', 0, 5), 'head:');
  assert.ok(first.subarray(5).equals(data.subarray(0, 4000)));

  const failing = new PassThrough();
  const cut = new ByteReader(failing);
  failing.write(randomBytes(500));
  const piece = cut.take(1000);
  setImmediate(() => failing.destroy(new Error('client went away')));
  await assert.rejects(readAll(piece), /client went away/);
  assert.equal(await cut.hasMore(), false);
});
