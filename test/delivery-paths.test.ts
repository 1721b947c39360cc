// Delivery paths (issue 15, item 5): a path is encoded by one encoder (record `url`, `thumbnail`,
// signed URLs) and decoded exactly once per segment. Round trips over awkward file names in
// awkward folders, each URL fetched exactly as the record gives it; other spellings never
// reach another file; and an origin gets the path re-encoded exactly once.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import sharp from 'sharp';
import type { ResolvedAddress } from '../src/outbound/guard.ts';
import { DIALECTS, type Harness, makeHarness } from './helpers/harness.ts';
import { call } from './helpers/http.ts';
import { closedPort, localServer } from './helpers/servers.ts';

const sha = (b: Buffer | Uint8Array) => createHash('sha256').update(b).digest('hex');

interface Got {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** A GET whose request target is sent byte for byte as given: no client-side normalisation. */
function rawGet(port: number, target: string, headers: Record<string, string> = {}): Promise<Got> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'GET', path: target, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/** A URL fetched exactly as given (checked to be a string no WHATWG client would rewrite). */
async function fetchExact(url: string): Promise<Got> {
  assert.equal(new URL(url).href, url, `a client would rewrite ${url}`);
  const u = new URL(url);
  // The request target is the URL's own text after the origin, not a re-serialisation.
  return rawGet(Number(u.port), url.slice(u.origin.length));
}

const enc = encodeURIComponent;

/** Runs `fn` over `items`, `width` at a time. */
async function inParallel<T>(items: T[], width: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) await fn(items[next++]);
    }),
  );
}

// Folders and names: percent signs and sequences, reserved characters, spaces, dots within the
// rules, emoji, combining marks, right-to-left text, token look-alikes, case-only differences.
const FOLDERS = [
  '',
  '100% real',
  '%25',
  'a%2Fb',
  'sp ace',
  'a+b',
  '#tag',
  'why?',
  'k=v&x;y',
  '.dot.',
  '😀 party',
  'שלום עולם',
  'w_100,h_100',
  'w_100',
  'my_photos',
  'cafe\u0301', // NFD on upload, stored as NFC "café"
  '%2E%2E',
];
const NAMES: { name: string; image?: true }[] = [
  { name: '50% off.png', image: true },
  { name: '%25.txt' },
  { name: '%.txt' },
  { name: '%2F.txt' },
  { name: 'a%2Fb.txt' },
  { name: 'a%20b.txt' },
  { name: 'a b.txt' },
  { name: 'a+b.txt' },
  { name: '#1.txt' },
  { name: 'what?.txt' },
  { name: 'k=v&x=y;z.txt' },
  { name: '.env' },
  { name: 'trailing.' },
  { name: '.both.' },
  { name: '😀.png', image: true },
  { name: 'café.png', image: true },
  { name: 'cafe\u0301 nfd.txt' },
  { name: 'שלום.txt' },
  { name: 'مرحبا بالعالم.png', image: true },
  { name: 'Case.txt' },
  { name: 'case.txt' },
  { name: 'w_100,h_100.png', image: true },
  { name: '%2E%2E' },
  { name: '%C3%A9.txt' },
  { name: 'é.txt' },
  { name: "it's (1)!*~.txt" },
  { name: 'x.png', image: true },
];

/** A distinct colour per image, so a thumbnail shows whose it is. */
const colourOf = (i: number): [number, number, number] => [(i * 53) % 256, (i * 101 + 40) % 256, (i * 197 + 90) % 256];
const meanRgb = async (img: Buffer) => (await sharp(img).stats()).channels.slice(0, 3).map((c) => Math.round(c.mean));
const near = (a: number[], b: number[]) => a.every((v, k) => Math.abs(v - b[k]) <= 3);

for (const dialect of DIALECTS) {
  describe(`delivery paths on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    let port: number;
    interface Stored {
      folder: string;
      name: string;
      image: boolean;
      bytes: Buffer;
      colour?: [number, number, number];
      record: any;
    }
    const stored: Stored[] = [];
    const byPath = new Map<string, Stored>();
    const at = (p: string) => `/${h.ws.workspace_id}/${p}`;
    const get = (target: string, headers?: Record<string, string>) => rawGet(port, target, headers);
    const upload = async (folder: string, name: string, bytes: Buffer) => {
      const form = new FormData();
      form.append('file', new Blob([new Uint8Array(bytes)]), 'upload.bin');
      form.append('file_name', name);
      if (folder) form.append('folder', folder);
      const res = await fetch(`http://127.0.0.1:${port}/api/v1/uploads`, {
        method: 'POST',
        body: form,
        headers: { 'x-api-key': h.ws.private_key },
      });
      const body = (await res.json()) as any;
      assert.equal(res.status, 201, `${folder}/${name}: ${JSON.stringify(body)}`);
      return body;
    };
    const file = (folder: string, name: string) => {
      const f = byPath.get(`${folder.normalize('NFC')}/${name.normalize('NFC')}`);
      assert.ok(f, `${folder}/${name} was uploaded`);
      return f;
    };

    before(async () => {
      port = await closedPort();
      h = await makeHarness(dialect.name, {
        config: { publicUrl: `http://127.0.0.1:${port}`, storage: { driver: 'local', fsync: false } },
      });
      await h.app.listen({ host: '127.0.0.1', port });
      let i = 0;
      for (const folder of FOLDERS) {
        for (const { name, image } of NAMES) {
          i++;
          const colour = image ? colourOf(i) : undefined;
          const bytes = colour
            ? await sharp({
                create: {
                  width: 40,
                  height: 30,
                  channels: 3,
                  background: { r: colour[0], g: colour[1], b: colour[2] },
                },
              })
                .png()
                .toBuffer()
            : Buffer.from(`the bytes of ${JSON.stringify(folder)} / ${JSON.stringify(name)} #${i}`);
          const record = await upload(folder, name, bytes);
          const s: Stored = {
            folder: folder.normalize('NFC'),
            name: name.normalize('NFC'),
            image: Boolean(image),
            bytes,
            colour,
            record,
          };
          stored.push(s);
          byPath.set(`${s.folder}/${s.name}`, s);
        }
      }
      // A real folder "a" holding "b.txt", next to files literally named "a%2Fb.txt".
      const ab = Buffer.from('the real a/b.txt');
      byPath.set('a/b.txt', {
        folder: 'a',
        name: 'b.txt',
        image: false,
        bytes: ab,
        record: await upload('a', 'b.txt', ab),
      });
    });
    after(() => h?.close());

    test('every record: stored as named (NFC), its url serves its own bytes, its thumbnail its own image', async () => {
      const failures: string[] = [];
      await inParallel(stored, 8, async (s) => {
        const r = s.record;
        assert.equal(r.name, s.name);
        assert.equal(r.path, `/${s.folder ? `${s.folder}/` : ''}${s.name}`);
        const res = await fetchExact(r.url);
        if (res.status !== 200 || sha(res.body) !== sha(s.bytes))
          failures.push(
            `${r.path} at ${r.url}: ${res.status} ${res.status === 200 ? 'other bytes' : res.body.toString().slice(0, 120)}`,
          );
        if (!s.image) {
          assert.equal(r.thumbnail, null);
          return;
        }
        const thumb = await fetchExact(r.thumbnail);
        if (thumb.status !== 200) {
          failures.push(`${r.path} thumbnail ${r.thumbnail}: ${thumb.status} ${thumb.body.toString().slice(0, 120)}`);
          return;
        }
        const meta = await sharp(thumb.body).metadata();
        assert.ok((meta.width ?? 999) <= 200 && (meta.height ?? 999) <= 200, r.thumbnail);
        const rgb = await meanRgb(thumb.body);
        if (!near(rgb, s.colour!))
          failures.push(`${r.path} thumbnail ${r.thumbnail} shows another image (${rgb} vs ${s.colour})`);
      });
      assert.equal(failures.length, 0, `${failures.length} failures, the first:\n${failures.slice(0, 12).join('\n')}`);
    });

    test('the encoder: each segment percent-encoded once; a folder that reads as tokens is escaped', () => {
      const ws = h.ws.workspace_id;
      const base = `http://127.0.0.1:${port}/${ws}`;
      assert.equal(file('', '50% off.png').record.url, `${base}/50%25%20off.png`);
      assert.equal(file('', 'a%20b.txt').record.url, `${base}/a%2520b.txt`);
      assert.equal(file('', 'a%2Fb.txt').record.url, `${base}/a%252Fb.txt`);
      assert.equal(file('a', 'b.txt').record.url, `${base}/a/b.txt`);
      assert.equal(file('w_100,h_100', 'x.png').record.url, `${base}/w_100%2Ch_100/x.png`);
      assert.equal(
        file('w_100', 'x.png').record.url,
        `${base}/w%5F100/x.png`,
        'w_100/x.png would name a rendition of /x.png',
      );
      assert.equal(file('w_100', 'x.png').record.thumbnail, `${base}/w_200,h_200,c_fit/w%5F100/x.png`);
      assert.equal(
        file('my_photos', 'x.png').record.url,
        `${base}/my%5Fphotos/x.png`,
        'shaped like tokens: escaped too, since the signed-transformations gate reads shapes',
      );
      assert.equal(file('cafe\u0301', 'x.png').record.url, `${base}/caf%C3%A9/x.png`);
    });

    test('other spellings never reach another file', async () => {
      const bytesOf = (folder: string, name: string) => sha(file(folder, name).bytes);
      const expect = async (target: string, folder: string | null, name?: string) => {
        const res = await get(at(target));
        if (folder === null)
          assert.equal(res.status, 404, `${target}: ${res.status} ${res.body.toString().slice(0, 100)}`);
        else {
          assert.equal(res.status, 200, `${target}: ${res.body.toString().slice(0, 100)}`);
          assert.equal(sha(res.body), bytesOf(folder, name!), `${target} serves ${folder}/${name}`);
        }
      };
      // "%20" in a name is three characters, not a space.
      await expect('a%20b.txt', '', 'a b.txt');
      await expect('a%2520b.txt', '', 'a%20b.txt');
      await expect('sp%20ace/a%20b.txt', 'sp ace', 'a b.txt');
      await expect('sp%20ace/a%2520b.txt', 'sp ace', 'a%20b.txt');
      await expect('%2525/%2525.txt', '%25', '%25.txt');
      await expect('%2525/%25.txt', '%25', '%.txt');
      // Decoding twice would turn these into names that exist.
      await expect('50%2525%2520off.png', null);
      await expect('a%252520b.txt', null);
      await expect('%252E%252E', '', '%2E%2E');
      await expect('%2525C3%2525A9.txt', null);
      await expect('%25C3%25A9.txt', '', '%C3%A9.txt');
      await expect('%C3%A9.txt', '', 'é.txt');
      // "%2F" is a character of a segment, never a folder separator.
      await expect('a/b.txt', 'a', 'b.txt');
      await expect('a%2Fb.txt', null);
      await expect('a%2fb.txt', null);
      await expect('a%252Fb.txt', '', 'a%2Fb.txt');
      await expect('a%252Fb/a%2520b.txt', 'a%2Fb', 'a%20b.txt');
      await expect('%2E%2E/a%20b.txt', null);
      await expect('sp%20ace/%2E%2E/a%20b.txt', null);
      // "+" is a plus sign in a path, and an escaped plus is the same plus.
      await expect('a+b.txt', '', 'a+b.txt');
      await expect('a%2Bb.txt', '', 'a+b.txt');
      await expect('a+b/a+b.txt', 'a+b', 'a+b.txt');
      // Case is part of the name.
      await expect('Case.txt', '', 'Case.txt');
      await expect('case.txt', '', 'case.txt');
      await expect('CASE.txt', null);
      // Canonically equivalent spellings (NFD) reach the one NFC name; there can be no other.
      await expect(`caf${enc('e\u0301')}.png`, '', 'café.png');
      await expect(`caf${enc('e\u0301')}/caf${enc('e\u0301')}.png`, 'cafe\u0301', 'café.png');
      await expect(`${enc('e\u0301')}.txt`, '', 'é.txt');
      // Malformed percent-encoding is refused, not guessed at.
      assert.equal((await get(at('50%.png'))).status, 400);
      assert.equal((await get(at('a%2gb.txt'))).status, 400);
    });

    test('a folder that looks like tokens: its URLs reach it; tokens spelled literally still mean tokens', async () => {
      const folderFile = file('w_100,h_100', 'x.png');
      const rootFile = file('', 'x.png');
      assert.notDeepEqual(folderFile.colour, rootFile.colour);
      const own = await get(at('w_100%2Ch_100/x.png'));
      assert.equal(own.status, 200);
      assert.equal(sha(own.body), sha(folderFile.bytes), 'an escaped comma is part of a folder name');
      const single = await get(at('w%5F100/x.png'));
      assert.equal(
        sha(single.body),
        sha(file('w_100', 'x.png').bytes),
        'an escaped underscore is part of a folder name',
      );
      // Written literally, the first segment is tokens: a rendition of /x.png.
      const rendition = await get(at('w_100,h_100/x.png'));
      assert.equal(rendition.status, 200);
      assert.ok(near(await meanRgb(rendition.body), rootFile.colour!), 'literal tokens name a rendition of /x.png');
      assert.notEqual(sha(rendition.body), sha(folderFile.bytes));
      // Not valid tokens, so a folder, even with /x.png present.
      const photos = await get(at('my_photos/x.png'));
      assert.equal(photos.status, 200, photos.body.toString());
      assert.equal(sha(photos.body), sha(file('my_photos', 'x.png').bytes));
      // Tokens over a token-looking folder.
      const nested = await get(at('w_20/w_100%2Ch_100/x.png'));
      assert.equal(nested.status, 200);
      assert.equal((await sharp(nested.body).metadata()).width, 20);
      assert.ok(near(await meanRgb(nested.body), folderFile.colour!));
      // Invalid tokens over a path that is no file stay a 400.
      assert.equal((await get(at('w_abc/x.png'))).status, 400);
    });

    test("the SDK's deliveryUrl escapes a token-shaped first folder too; a signed URL's transform may have spaces", async () => {
      const { Stowage } = await import('../sdk/src/index.ts');
      const sdk = new Stowage({ baseUrl: `http://127.0.0.1:${port}`, apiKey: h.ws.private_key });
      const built = sdk.deliveryUrl(h.ws.workspace_id, 'w_100/x.png');
      assert.ok(built.includes('/w%5F100/x.png'), built);
      const got = await get(new URL(built).pathname);
      assert.equal(sha(got.body), sha(file('w_100', 'x.png').bytes), 'the folder, not a rendition of /x.png');
      const root = file('', 'x.png');
      const signed = await fetch(`http://127.0.0.1:${port}/api/v1/files/${root.record.file_no}/signed-url`, {
        method: 'POST',
        headers: { 'x-api-key': h.ws.private_key, 'content-type': 'application/json' },
        body: JSON.stringify({ expires_in: 600, transform: 'w_20, h_10' }),
      }).then((r) => r.json() as Promise<any>);
      const u = new URL(signed.data?.url ?? signed.url);
      const rendition = await get(u.pathname + u.search);
      assert.equal(rendition.status, 200, rendition.body.toString());
      assert.equal((await sharp(rendition.body).metadata()).width, 20);
    });

    test('private files: the signed record URL, thumbnail and minted URLs work for every name, only as signed', async () => {
      const failures: string[] = [];
      await inParallel(stored, 8, async (s) => {
        const patched = await call(h.app, 'PATCH', `/api/v1/files/${s.record.file_no}`, {
          body: { is_private: true },
          headers: h.auth,
        });
        assert.equal(patched.status, 200, JSON.stringify(patched.body));
        const r = patched.body.data;
        const signed = new URL(r.url);
        assert.ok(signed.searchParams.get('signature'), r.url);
        const unsigned = await fetchExact(r.url.slice(0, r.url.indexOf('?')));
        if (unsigned.status !== 403) failures.push(`${r.path} unsigned: ${unsigned.status}`);
        const res = await fetchExact(r.url);
        if (res.status !== 200 || sha(res.body) !== sha(s.bytes))
          failures.push(`${r.path} signed record url ${r.url}: ${res.status} ${res.body.toString().slice(0, 120)}`);
        const minted = await call(h.app, 'POST', `/api/v1/files/${s.record.file_no}/signed-url`, {
          body: { expires_in: 600 },
          headers: h.auth,
        });
        assert.equal(minted.status, 200, JSON.stringify(minted.body));
        const viaMinted = await fetchExact(minted.body.data.url);
        if (viaMinted.status !== 200 || sha(viaMinted.body) !== sha(s.bytes))
          failures.push(
            `${r.path} minted ${minted.body.data.url}: ${viaMinted.status} ${viaMinted.body.toString().slice(0, 120)}`,
          );
        if (!s.image) return;
        const thumb = await fetchExact(r.thumbnail);
        if (thumb.status !== 200 || !near(await meanRgb(thumb.body), s.colour!))
          failures.push(
            `${r.path} signed thumbnail ${r.thumbnail}: ${thumb.status} ${thumb.body.toString().slice(0, 120)}`,
          );
        const small = await call(h.app, 'POST', `/api/v1/files/${s.record.file_no}/signed-url`, {
          body: { expires_in: 600, transform: 'w_24' },
          headers: h.auth,
        });
        const rendition = await fetchExact(small.body.data.url);
        if (rendition.status !== 200)
          failures.push(
            `${r.path} minted rendition ${small.body.data.url}: ${rendition.status} ${rendition.body.toString().slice(0, 120)}`,
          );
        else {
          assert.equal((await sharp(rendition.body).metadata()).width, 24);
          if (!near(await meanRgb(rendition.body), s.colour!))
            failures.push(`${r.path} minted rendition shows another image`);
        }
      });
      assert.equal(failures.length, 0, `${failures.length} failures, the first:\n${failures.slice(0, 12).join('\n')}`);
      // A signature covers the exact spelling: another spelling of the same path is not signed.
      const ab = await call(h.app, 'POST', `/api/v1/files/${file('', 'a b.txt').record.file_no}/signed-url`, {
        body: { expires_in: 600 },
        headers: h.auth,
      });
      const u = new URL(ab.body.data.url);
      assert.equal((await get(u.pathname + u.search)).status, 200);
      const respelled = await get(u.pathname.replace('/a%20b.txt', '/%61%20b.txt') + u.search);
      assert.equal(respelled.status, 403);
      assert.equal(JSON.parse(respelled.body.toString()).errorCode, 'INVALID_SIGNATURE');
      // The NFD spelling reaches a public file, but a signature is for the spelling it signed.
      const cafe = await call(h.app, 'POST', `/api/v1/files/${file('', 'café.png').record.file_no}/signed-url`, {
        body: { expires_in: 600 },
        headers: h.auth,
      });
      const c = new URL(cafe.body.data.url);
      assert.equal((await get(c.pathname + c.search)).status, 200);
      assert.equal((await get(c.pathname.replace('caf%C3%A9', `caf${enc('e\u0301')}`) + c.search)).status, 403);
    });
  });
}

describe('delivery paths through an origin', () => {
  let h: Harness;
  let port: number;
  let origin: Awaited<ReturnType<typeof localServer>>;
  let photo: Buffer;
  const hits: string[] = [];
  const resolver = async (host: string): Promise<ResolvedAddress[]> => {
    if (host === 'origin.test') return [{ address: '127.0.0.1', family: 4 }];
    throw Object.assign(new Error('nx'), { code: 'ENOTFOUND' });
  };
  const at = (p: string) => `/${h.ws.workspace_id}-web/${p}`;

  before(async () => {
    photo = await sharp({ create: { width: 300, height: 200, channels: 3, background: '#208040' } })
      .jpeg()
      .toBuffer();
    origin = await localServer((req, res) => {
      hits.push(req.url!);
      res.writeHead(200, { 'content-type': 'image/jpeg' }).end(photo);
    });
    h = await makeHarness('sqlite', {
      config: { outboundAllow: ['origin.test', '127.0.0.1'] },
      services: { resolver },
    });
    await h.app.listen({ host: '127.0.0.1', port: 0 });
    port = (h.app.server.address() as { port: number }).port;
    const res = await call(h.app, 'POST', '/api/v1/sources', {
      body: {
        name: 'web',
        type: 'image_source',
        configuration: { base_url: `http://origin.test:${origin.port}/img`, canonical_header: true },
      },
      headers: h.auth,
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
  });
  after(async () => {
    await h?.close();
    await origin?.close();
  });

  /** What the origin was asked for when the client asked for `target`. */
  const sent = async (target: string) => {
    const before = hits.length;
    const res = await rawGet(port, at(target));
    return { status: res.status, headers: res.headers, body: res.body, asked: hits.slice(before) };
  };

  test('the origin gets the path decoded once and re-encoded once', async () => {
    for (const [target, expected] of [
      ['50%25%20off.jpg', '/img/50%25%20off.jpg'],
      ['a%2520b.jpg', '/img/a%2520b.jpg'],
      ['a%20b.jpg', '/img/a%20b.jpg'],
      ['dir/caf%C3%A9.jpg', '/img/dir/caf%C3%A9.jpg'],
      ['100%25/%2523.jpg', '/img/100%25/%2523.jpg'],
      ['a+b/q%3Fx%26y%3Dz.jpg', '/img/a%2Bb/q%3Fx%26y%3Dz.jpg'],
      ['w%5F200/photo.jpg', '/img/w_200/photo.jpg'],
      ['w_200%2Ch_100/photo.jpg', '/img/w_200%2Ch_100/photo.jpg'],
    ]) {
      const res = await sent(target);
      assert.equal(res.status, 200, `${target}: ${res.body.toString().slice(0, 120)}`);
      assert.deepEqual(res.asked, [expected], target);
    }
    const canonical = await sent('50%25%20off.jpg');
    assert.equal(canonical.headers.link, `<http://origin.test:${origin.port}/img/50%25%20off.jpg>; rel="canonical"`);
  });

  test('a rendition of an awkward origin path; "%2F" never splits a segment', async () => {
    const small = await sent('w_50/50%25%20off.jpg');
    assert.equal(small.status, 200);
    assert.equal((await sharp(small.body).metadata()).width, 50);
    assert.deepEqual(small.asked, ['/img/50%25%20off.jpg']);
    const other = await sent('w_50/a%2520b.jpg');
    assert.deepEqual(other.asked, ['/img/a%2520b.jpg'], 'a different path is a different cached rendition');
    const slash = await sent('a%2Fb.jpg');
    assert.equal(slash.status, 404);
    assert.deepEqual(slash.asked, []);
    assert.equal((await sent('50%.jpg')).status, 400);
  });
});
