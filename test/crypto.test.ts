import assert from 'node:assert/strict';
import { createHmac, randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { hashApiKey, newApiKey, newShortId, randomBase62 } from '../src/crypto/ids.ts';
import { PartUrlSigner } from '../src/crypto/part-url.ts';
import { SecretBox } from '../src/crypto/secret-box.ts';

describe('SecretBox (AES-256-GCM)', () => {
  const box = new SecretBox(randomBytes(32));
  test('seals and opens; the sealed text does not contain the plaintext', () => {
    const sealed = box.seal('my-secret-value', 'source:1');
    assert.ok(!sealed.includes('my-secret-value'));
    assert.equal(box.open(sealed, 'source:1'), 'my-secret-value');
    assert.notEqual(box.seal('my-secret-value', 'source:1'), sealed, 'a fresh IV each time');
  });
  test('a sealed value is bound to its owner: another aad fails', () => {
    assert.throws(() => box.open(box.seal('x', 'source:1'), 'source:2'));
  });
  test('tampering is detected', () => {
    const parts = box.seal('abcdef', 'a').split('.');
    const body = Buffer.from(parts[4], 'base64url');
    body[0] ^= 1;
    parts[4] = body.toString('base64url');
    assert.throws(() => box.open(parts.join('.'), 'a'));
  });
  test('previous master keys still open old values; the wrong key cannot', () => {
    const oldKey = randomBytes(32);
    const sealed = new SecretBox(oldKey).seal('v', 'a');
    const rotated = new SecretBox(randomBytes(32), [oldKey]);
    assert.equal(rotated.open(sealed, 'a'), 'v');
    assert.equal(rotated.isStale(sealed), true);
    assert.equal(rotated.isStale(rotated.seal('v', 'a')), false);
    assert.throws(() => new SecretBox(randomBytes(32)).open(sealed, 'a'), /not configured/);
  });
});

describe('ids and keys', () => {
  test('API keys carry their type and over 256 random bits; hashes are stable', () => {
    const pk = newApiKey('public');
    const sk = newApiKey('private');
    assert.match(pk, /^stw_pk_[0-9A-Za-z]{43}$/);
    assert.match(sk, /^stw_sk_[0-9A-Za-z]{43}$/);
    assert.ok(43 * Math.log2(62) >= 256);
    assert.equal(hashApiKey(pk), hashApiKey(pk));
    assert.notEqual(hashApiKey(pk), hashApiKey(sk));
    assert.equal(new Set(Array.from({ length: 1000 }, () => newApiKey('public'))).size, 1000);
  });
  test('short ids are base62 of 12 characters, spread over the whole alphabet', () => {
    assert.match(newShortId(), /^[0-9A-Za-z]{12}$/);
    const counts = new Map<string, number>();
    for (const c of randomBase62(62 * 400)) counts.set(c, (counts.get(c) ?? 0) + 1);
    assert.equal(counts.size, 62);
    for (const n of counts.values()) assert.ok(n > 250 && n < 560, `uniform enough (${n})`);
  });
});

describe('part URL signatures (local multipart)', () => {
  const master = randomBytes(32);
  const signer = new PartUrlSigner(master);
  // Recomputed here from the documented definition, one plain HMAC per part.
  const key = createHmac('sha256', master).update('stowage/part-url/v1').digest();
  const int32 = (n: number) => Buffer.from([n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255]);
  const hmac = (session: string, part: number, length: number, expires: number) =>
    createHmac('sha256', key).update(`${session}\n${length}\n${expires}\n`).update(int32(part)).digest('base64url');
  const query = (url: string) =>
    Object.fromEntries(new URL(url).searchParams) as { length: string; expires: string; signature: string };
  const session = 'S'.repeat(24);
  const expires = 2_000_000_000;

  test('the batch gives every part HMAC-SHA256 over session, length, expiry and part number; each verifies alone', async () => {
    for (const lengths of [[8, 8, 8, 3], [8, 8, 8], [5], [8, 3, 8]]) {
      const urls = await signer.urls('http://h', session, lengths, expires);
      assert.equal(urls.length, lengths.length);
      urls.forEach((url, i) => {
        const q = query(url);
        assert.equal(url.split('?')[0], `http://h/api/v1/multipart/${session}/parts/${i + 1}`);
        assert.deepEqual([q.length, q.expires], [String(lengths[i]), String(expires)]);
        assert.equal(q.signature, hmac(session, i + 1, lengths[i], expires), `${lengths} part ${i + 1}`);
        assert.equal(signer.verify(session, i + 1, q, expires - 1), 'ok');
        assert.equal(signer.verify(session, i + 1, q, expires + 1), 'expired');
      });
      assert.equal(new Set(urls.map((u) => query(u).signature)).size, urls.length);
    }
    // 10,000 parts (the most a start hands out): still exact at the far end.
    const many = await signer.urls('http://h', session, Array(10_000).fill(9 << 20), expires);
    assert.equal(query(many[9_999]).signature, hmac(session, 10_000, 9 << 20, expires));
  });

  test('a signature is good for its own part, length, session and expiry only', async () => {
    const [one, two] = await signer.urls('http://h', session, [8, 8], expires);
    const q = query(one);
    assert.equal(signer.verify(session, 2, q, 0), 'bad');
    assert.equal(signer.verify('T'.repeat(24), 1, q, 0), 'bad');
    assert.equal(signer.verify(session, 1, { ...q, length: '9' }, 0), 'bad');
    assert.equal(signer.verify(session, 1, { ...q, expires: String(expires + 1) }, 0), 'bad');
    assert.equal(signer.verify(session, 1, { ...q, signature: query(two).signature }, 0), 'bad');
    assert.equal(new PartUrlSigner(randomBytes(32)).verify(session, 1, q, 0), 'bad');
    for (const n of [0, -1, 1.5, 2 ** 32, Number.NaN]) assert.equal(signer.verify(session, n, q, 0), 'bad', String(n));
  });

  test('URLs signed before batching (session, part, length, expiry as text) still verify', () => {
    const legacy = createHmac('sha256', key).update(`${session}\n3\n8\n${expires}`).digest('base64url');
    assert.equal(signer.verify(session, 3, { length: '8', expires: String(expires), signature: legacy }, 0), 'ok');
    assert.equal(signer.verify(session, 4, { length: '8', expires: String(expires), signature: legacy }, 0), 'bad');
  });
});
