import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { hashApiKey, newApiKey, newShortId, randomBase62 } from '../src/crypto/ids.ts';
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
