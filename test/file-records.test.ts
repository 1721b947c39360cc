// The record's delivery URLs, made faster for lists (encoded folder paths remembered, private
// URLs signed without parsing each one), against the plain way of making them.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { DeliverySigner } from '../src/crypto/delivery-url.ts';
import { isTokenSegment } from '../src/media/transform/tokens.ts';
import { deliveryPath, FileRecords } from '../src/services/file-records.ts';

/** The delivery path as it was made before the folders' encodings were remembered. */
function plainDeliveryPath(folderPath: string, name: string): string {
  const segments = [...(folderPath ? folderPath.split('/') : []), name].map(encodeURIComponent);
  if (segments.length > 1 && isTokenSegment(segments[0])) segments[0] = segments[0].replace('_', '%5F');
  return segments.join('/');
}

const FOLDERS = [
  '',
  'a',
  'a b/c',
  'w_100',
  'w_100/w_200',
  'my_photos/x',
  '50% off',
  'café/naïve',
  "it's (1)*!~",
  '.',
  '..',
  'x/../y',
  'a?b#c/d&e',
];
const NAMES = [
  'shoe.png',
  'a b.jpg',
  '50% off.png',
  '%20.png',
  '%2F',
  '.',
  '..',
  'w_100',
  "it's (1).png",
  'ünï.webp',
  'q?x#y.png',
];

describe('file records: delivery URLs', () => {
  test('deliveryPath is the same, the first time and again (remembered), for every folder and name', () => {
    for (let round = 0; round < 2; round++)
      for (const folder of FOLDERS)
        for (const name of NAMES)
          assert.equal(deliveryPath(folder, name), plainDeliveryPath(folder, name), `${folder} | ${name}`);
  });

  test('a private URL is what DeliverySigner.sign gives for the same URL and expiry, whatever the public URL', () => {
    const signer = new DeliverySigner(randomBytes(32));
    const ws = '0b3f5a4e-0d5c-4a51-9d6e-1c2b3a4d5e6f';
    const publicUrls = [
      'http://127.0.0.1:3000',
      'https://cdn.example.com/media',
      'HTTP://Example.COM:80',
      'https://example.com/',
      'https://example.com/base path',
      'https://example.com:443/a/./b',
    ];
    let fast = 0;
    for (const publicUrl of publicUrls) {
      const records = new FileRecords({ publicUrl, signer, privateUrlTtl: 600 });
      for (const folder of FOLDERS)
        for (const name of NAMES)
          for (const path of [deliveryPath(folder, name), `w_200,h_200,c_fit/${deliveryPath(folder, name)}`]) {
            const before = Math.floor(Date.now() / 1000);
            const got = records.deliveryUrl(ws, path, true);
            const expires = Number(new URL(got).searchParams.get('expires'));
            assert.ok(expires >= before + 600 && expires <= Math.floor(Date.now() / 1000) + 600, got);
            assert.equal(got, signer.sign(`${publicUrl}/${ws}/${path}`, expires), `${publicUrl} | ${path}`);
            assert.equal(
              signer.verify(
                new URL(got).pathname,
                { expires: String(expires), signature: new URL(got).searchParams.get('signature') ?? '' },
                before,
              ),
              'ok',
            );
            if (got.startsWith(`${publicUrl}/${ws}/${path}?`)) fast++;
          }
      assert.equal(records.deliveryUrl(ws, 'a/b.png', false), `${publicUrl}/${ws}/a/b.png`, 'public: unsigned');
    }
    assert.ok(fast > 0, 'some URLs were kept as written (the fast way was taken)');
  });
});
