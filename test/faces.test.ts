// Face detection (src/media/faces.ts) with the real model on real photos. Expected face centres
// were measured by eye on the fixtures (see test/fixtures/faces/README.md), not taken from a run.
import assert from 'node:assert/strict';
import { rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { crc32, deflateSync } from 'node:zlib';
import sharp from 'sharp';
import {
  type FaceBox,
  FaceInputError,
  faceDetectorStarts,
  faceFocus,
  findFaces,
  preloadFaceDetector,
} from '../src/media/faces.ts';

const fixture = (name: string) => new URL(`./fixtures/faces/${name}`, import.meta.url).pathname;
const ONE_FACE = fixture('one-face.jpg'); // 400x478
const THREE_FACES = fixture('three-faces.jpg'); // 960x640
const opts = { timeoutMs: 10_000, maxPixels: 100_000_000 };

const centre = (b: FaceBox) => ({ x: b.left + b.width / 2, y: b.top + b.height / 2 });
function assertNear(p: { x: number; y: number }, want: { x: number; y: number }, tolerance: number, what: string) {
  const d = Math.hypot(p.x - want.x, p.y - want.y);
  assert.ok(
    d <= tolerance,
    `${what}: (${p.x.toFixed(0)}, ${p.y.toFixed(0)}) is ${d.toFixed(0)} px from (${want.x}, ${want.y})`,
  );
}

// By eye: the face spans about x 130-255, y 125-265 of one-face.jpg.
const ONE_FACE_CENTRE = { x: 190, y: 197 };
// By eye, left to right: three faces about 90-100 px wide in three-faces.jpg.
const THREE_FACE_CENTRES = [
  { x: 250, y: 235 },
  { x: 465, y: 270 },
  { x: 785, y: 170 },
];

test('concurrent first calls share one model load', async () => {
  assert.equal(faceDetectorStarts(), 0, 'nothing has started the detector yet');
  const results = await Promise.all([
    findFaces(ONE_FACE, opts),
    findFaces(THREE_FACES, opts),
    findFaces(ONE_FACE, opts),
    preloadFaceDetector(),
  ]);
  assert.equal(faceDetectorStarts(), 1);
  assert.equal(results[0].length, 1);
  assert.equal(results[1].length, 3);
  assert.deepEqual(results[2], results[0], 'the same image gives the same answer');
});

test('a portrait with one face gives one box around it', async () => {
  const faces = await findFaces(ONE_FACE, opts);
  assert.equal(faces.length, 1);
  const [face] = faces;
  assertNear(centre(face), ONE_FACE_CENTRE, 35, 'face centre');
  assert.ok(face.width > 60 && face.width < 220, `width ${face.width}`);
  assert.ok(face.height > 60 && face.height < 220, `height ${face.height}`);
  assert.ok(face.score >= 0.5 && face.score <= 1);
  assertNear(faceFocus(faces, 400, 478) ?? { x: -1, y: -1 }, ONE_FACE_CENTRE, 35, 'focus');
});

test('a group photo gives each face, and the focus lies between them', async () => {
  const faces = await findFaces(THREE_FACES, opts);
  assert.equal(faces.length, 3);
  const found = faces.map(centre).sort((a, b) => a.x - b.x);
  for (const [i, want] of THREE_FACE_CENTRES.entries()) assertNear(found[i], want, 40, `face ${i + 1}`);
  const focus = faceFocus(faces, 960, 640);
  assert.ok(focus);
  assert.ok(focus.x > 400 && focus.x < 620, `focus x ${focus.x}`);
  assert.ok(focus.y > 150 && focus.y < 300, `focus y ${focus.y}`);
});

test('boxes are in the upright image: EXIF orientation is applied, from bytes as from a file', async () => {
  // Pixels stored a quarter turn anticlockwise, with the tag that says to turn them back.
  const sideways = await sharp(ONE_FACE).rotate(270).withMetadata({ orientation: 6 }).jpeg().toBuffer();
  const meta = await sharp(sideways).metadata();
  assert.deepEqual([meta.width, meta.height, meta.orientation], [478, 400, 6]);
  const faces = await findFaces(sideways, opts);
  assert.equal(faces.length, 1);
  assertNear(centre(faces[0]), ONE_FACE_CENTRE, 35, 'face centre');
  assert.ok(faces[0].left + faces[0].width <= 400 && faces[0].top + faces[0].height <= 478);
});

test('greyscale and transparent images are detected like colour ones', async () => {
  const withAlpha = await sharp(ONE_FACE).ensureAlpha(0.8).png().toBuffer();
  assert.equal((await sharp(withAlpha).metadata()).channels, 4);
  const faces = await findFaces(withAlpha, opts);
  assert.equal(faces.length, 1);
  assertNear(centre(faces[0]), ONE_FACE_CENTRE, 35, 'face centre');
  // The model was trained on colour photos and is less sure without colour: it need not find
  // every face, but what it finds must be faces.
  const grey = await sharp(THREE_FACES).toColourspace('b-w').png().toBuffer();
  assert.equal((await sharp(grey).metadata()).channels, 1);
  const greyFaces = await findFaces(grey, opts);
  assert.ok(greyFaces.length >= 1);
  for (const face of greyFaces) {
    const c = centre(face);
    const nearest = Math.min(...THREE_FACE_CENTRES.map((w) => Math.hypot(c.x - w.x, c.y - w.y)));
    assert.ok(nearest <= 40, `(${c.x}, ${c.y}) is no face`);
  }
});

test('an image without faces gives []', async () => {
  const width = 800;
  const height = 600;
  const pixels = Buffer.alloc(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = (y * width + x) * 3;
      pixels[i] = (x * 255) / width;
      pixels[i + 1] = (y * 255) / height;
      pixels[i + 2] = 128 + 60 * Math.sin(x / 40);
    }
  }
  const gradient = await sharp(pixels, { raw: { width, height, channels: 3 } })
    .png()
    .toBuffer();
  assert.deepEqual(await findFaces(gradient, opts), []);
  assert.equal(faceFocus([], width, height), undefined);
});

test('a corrupt image is refused with FaceInputError, quickly', async () => {
  const jpeg = await sharp(ONE_FACE).toBuffer();
  const cases: Array<[string, Buffer | string]> = [
    ['garbage', Buffer.from('this is not an image at all, only some text')],
    ['truncated JPEG', jpeg.subarray(0, 600)],
    ['empty', Buffer.alloc(0)],
  ];
  const path = join(tmpdir(), `faces-test-${process.pid}.jpg`);
  await writeFile(path, Buffer.concat([jpeg.subarray(0, 2), Buffer.alloc(5000, 0x41)]));
  cases.push(['corrupt file', path]);
  try {
    for (const [what, input] of cases) {
      const t = performance.now();
      await assert.rejects(findFaces(input, opts), FaceInputError, what);
      assert.ok(performance.now() - t < 2000, `${what} took ${performance.now() - t} ms`);
    }
  } finally {
    await rm(path, { force: true });
  }
});

test('a decompression bomb is refused before it is decoded', async () => {
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
    const out = Buffer.alloc(4 + body.length + 4);
    out.writeUInt32BE(data.length, 0);
    body.copy(out, 4);
    out.writeUInt32BE(crc32(body), 4 + body.length);
    return out;
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(100_000, 0);
  ihdr.writeUInt32BE(100_000, 4);
  ihdr.set([8, 2, 0, 0, 0], 8); // 8-bit RGB
  // A few rows of zeros: the file is tiny, the image it claims is 10^10 pixels.
  const idat = deflateSync(Buffer.alloc(4 * (1 + 3 * 100_000)));
  const bomb = Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', idat),
    chunk('IEND', Buffer.alloc(0)),
  ]);
  assert.ok(bomb.length < 10_000);
  const t = performance.now();
  await assert.rejects(findFaces(bomb, opts), (err: Error) => {
    assert.ok(err instanceof FaceInputError);
    assert.match(err.message, /pixel limit|over the limit/);
    return true;
  });
  assert.ok(performance.now() - t < 500, `took ${performance.now() - t} ms`);
  // A real photo over a small pixel limit is refused the same way.
  await assert.rejects(findFaces(THREE_FACES, { ...opts, maxPixels: 960 * 640 - 1 }), FaceInputError);
});

test('a call over its time budget resolves to [] promptly, and the detector recovers', async () => {
  await preloadFaceDetector();
  const before = faceDetectorStarts();
  const t = performance.now();
  assert.deepEqual(await findFaces(THREE_FACES, { ...opts, timeoutMs: 1 }), []);
  // Promptly: well before a detection would have finished, with slack for a busy machine.
  assert.ok(performance.now() - t < 250, `timeoutMs 1 took ${performance.now() - t} ms`);
  assert.equal(faceDetectorStarts(), before, 'it ran out while decoding: the thread was not needed');
  // A budget that runs out while the thread is detecting: the busy thread is replaced by a fresh
  // one. Decoding this image takes a few ms and detecting it 60 ms or more, but on a busy machine
  // either can take longer, so the budget grows until it falls inside the detection.
  let replaced = false;
  for (const budget of [20, 40, 80, 160, 320, 640]) {
    const t2 = performance.now();
    const faces = await findFaces(THREE_FACES, { ...opts, timeoutMs: budget });
    assert.ok(performance.now() - t2 < budget + 250, `timeoutMs ${budget} took ${performance.now() - t2} ms`);
    await preloadFaceDetector();
    if (faceDetectorStarts() === before + 1) {
      assert.deepEqual(faces, []);
      replaced = true;
      break;
    }
    assert.equal(faceDetectorStarts(), before, 'a thread is only replaced when a budget runs out during detection');
  }
  assert.ok(replaced, 'no budget ran out during a detection');
  const after = await findFaces(THREE_FACES, opts);
  assert.equal(after.length, 3, 'later calls still find faces');
  assert.equal(faceDetectorStarts(), before + 1);
});

test('faceFocus centres on the faces that matter', () => {
  const box = (left: number, top: number, size: number): FaceBox => ({
    left,
    top,
    width: size,
    height: size,
    score: 0.9,
  });
  assert.equal(faceFocus([], 100, 100), undefined);
  assert.deepEqual(faceFocus([box(10, 20, 40)], 1000, 1000), { x: 30, y: 40 });
  // Two faces of a size: the middle of the box around both.
  assert.deepEqual(faceFocus([box(0, 0, 100), box(400, 200, 100)], 1000, 1000), { x: 250, y: 150 });
  // A small face far behind the subject (under a quarter of its area) does not move the focus.
  assert.deepEqual(faceFocus([box(100, 100, 200), box(900, 900, 90)], 1000, 1000), { x: 200, y: 200 });
  // One just at a quarter of the area counts.
  assert.deepEqual(faceFocus([box(100, 100, 200), box(700, 100, 100)], 1000, 1000), { x: 450, y: 200 });
  // Clamped to the image.
  assert.deepEqual(faceFocus([box(-50, -50, 60)], 100, 100), { x: 0, y: 0 });
});
