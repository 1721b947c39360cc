// Content detection (src/media/detect.ts) on the head an upload keeps: formats whose header is
// not where file-type looks for it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import sharp from 'sharp';
import { detect, HEAD_BYTES } from '../src/media/detect.ts';

test('a TIFF whose directory follows its pixels (as libvips writes it) is still a TIFF', async () => {
  const img = sharp({ create: { width: 2000, height: 2000, channels: 3, background: '#888' } });
  const le = await img.clone().tiff({ compression: 'none' }).toBuffer();
  assert.ok(le.readUInt32LE(4) > HEAD_BYTES, 'the directory lies past the head');
  for (const name of ['scan.tif', 'scan.bin', 'scan.jpg']) {
    const d = await detect(le.subarray(0, HEAD_BYTES), name);
    assert.equal(d.mime_type, 'image/tiff', name);
    assert.equal(d.format, 'tif');
  }
  // A small TIFF keeps file-type's answer, with its size from the header.
  const small = await sharp({ create: { width: 30, height: 20, channels: 3, background: '#888' } })
    .tiff()
    .toBuffer();
  const d = await detect(small, 'small.tiff');
  assert.deepEqual([d.mime_type, d.width, d.height], ['image/tiff', 30, 20]);
  // Not a TIFF: a byte-order mark without TIFF's version number.
  assert.equal((await detect(Buffer.from('MM\u0000\u0007hello world'), 'x.bin')).mime_type, 'application/octet-stream');
});
