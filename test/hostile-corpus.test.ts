// Known-bad inputs over a real socket: oversized headers, slow clients, decompression bombs
// (an image that declares 1.6 gigapixels, a gzip-encoded JSON body), and names that play
// Unicode tricks. Each gets a 4xx in the documented shape (or is cut off, for the slow ones),
// the server keeps answering everyone else, and memory stays flat.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { deflateSync, gzipSync } from 'node:zlib';
import { type Harness, makeHarness } from './helpers/harness.ts';

/** A PNG whose header claims width x height, with only a little pixel data behind it. */
function pngBomb(width: number, height: number): Buffer {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (b: Buffer) => {
    let c = 0xffffffff;
    for (const x of b) c = crcTable[(c ^ x) & 0xff] ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type: string, data: Buffer) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
    const sum = Buffer.alloc(4);
    sum.writeUInt32BE(crc(body));
    return Buffer.concat([len, body, sum]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 0; // greyscale
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(Buffer.alloc(4 * 1024 * 1024))),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** Raw bytes to the server; resolves with everything it answered before closing (or the timeout). */
function raw(port: number, data: Buffer | string, waitMs = 3000): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let got = '';
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(got);
    };
    const timer = setTimeout(done, waitMs);
    socket.on('data', (d) => (got += d.toString('latin1')));
    socket.on('close', done);
    socket.on('error', done);
    socket.write(data);
  });
}

describe('a corpus of known-bad inputs, over a real socket', () => {
  let h: Harness;
  let base: string;
  let port: number;
  const form = (fields: Record<string, string | Blob>) => {
    const f = new FormData();
    for (const [k, v] of Object.entries(fields)) f.append(k, v);
    return f;
  };
  const upload = async (fields: Record<string, string | Blob>) => {
    const res = await fetch(`${base}/api/v1/uploads`, { method: 'POST', headers: h.auth, body: form(fields) });
    return { status: res.status, body: (await res.json()) as any };
  };
  const rss = () => process.memoryUsage().rss;

  before(async () => {
    // Images are refused above 20 megapixels here (STOWAGE_MAX_IMAGE_PIXELS).
    h = await makeHarness('sqlite', { config: { maxImagePixels: 20_000_000 } });
    base = await h.app.listen({ host: '127.0.0.1', port: 0 });
    port = Number(new URL(base).port);
  });
  after(() => h?.close());

  test('oversized headers: 431, and the next request is served', async () => {
    const answer = await raw(port, `GET /api/v1/files HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(80 * 1024)}\r\n\r\n`);
    assert.match(answer, /^HTTP\/1\.1 431/);
    // Many headers adding up to more than the limit: the same.
    const many = Array.from({ length: 3000 }, (_, i) => `X-Header-${i}: ${'v'.repeat(20)}`).join('\r\n');
    assert.match(await raw(port, `GET /healthz HTTP/1.1\r\nHost: x\r\n${many}\r\n\r\n`), /^HTTP\/1\.1 431/);
    assert.equal((await fetch(`${base}/healthz`)).status, 200);
  });

  test('slow clients: 60 connections trickling headers or bodies do not hold up anyone else', async () => {
    const sockets: net.Socket[] = [];
    const trickle = setInterval(() => {
      for (const s of sockets) if (!s.destroyed) s.write('a');
    }, 200);
    try {
      for (let i = 0; i < 30; i++) {
        const s = net.connect(port, '127.0.0.1');
        s.on('error', () => {});
        s.write(`GET /api/v1/files HTTP/1.1\r\nHost: x\r\nX-Slow: `);
        sockets.push(s);
      }
      for (let i = 0; i < 30; i++) {
        const s = net.connect(port, '127.0.0.1');
        s.on('error', () => {});
        s.write(
          `POST /api/v1/uploads HTTP/1.1\r\nHost: x\r\nAuthorization: ${h.auth.authorization}\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: 10000000\r\n\r\n--b\r\nContent-Disposition: form-data; name="file_name"\r\n\r\nslow.bin\r\n--b\r\nContent-Disposition: form-data; name="file"; filename="slow.bin"\r\n\r\n`,
        );
        sockets.push(s);
      }
      await new Promise((r) => setTimeout(r, 500));
      const times: number[] = [];
      for (let i = 0; i < 20; i++) {
        const t = performance.now();
        const res = await fetch(`${base}/api/v1/files`, { headers: h.auth });
        assert.equal(res.status, 200);
        await res.arrayBuffer();
        times.push(performance.now() - t);
      }
      times.sort((a, b) => a - b);
      assert.ok(times[18] < 1000, `p95 ${times[18].toFixed(0)} ms while 60 clients trickle`);
    } finally {
      clearInterval(trickle);
      for (const s of sockets) s.destroy();
    }
    // The slow uploads were cut off when their clients left: nothing of them is stored.
    await new Promise((r) => setTimeout(r, 300));
    const listed = (await (await fetch(`${base}/api/v1/files?search=slow`, { headers: h.auth })).json()) as any;
    assert.equal((listed.files ?? listed.data?.files ?? listed.data ?? []).length, 0);
    // Each cut upload removes its object and intent once its stream has failed: on a loaded
    // machine that can take longer than the pause above, so wait for it (up to 10 s).
    const intents = () => h.services.db.kysely.selectFrom('storage_intents').selectAll().execute();
    for (let i = 0; i < 100 && (await intents()).length > 0; i++) await new Promise((r) => setTimeout(r, 100));
    assert.equal((await intents()).length, 0, 'no intent left behind');
  });

  test('an image declaring 1.6 gigapixels: refused for transformation, never decoded', async () => {
    const bomb = pngBomb(40_000, 40_000);
    const before = rss();
    const transformed = await upload({
      file: new Blob([new Uint8Array(bomb)]),
      file_name: 'bomb.png',
      transform: 'w_100',
    });
    assert.ok(
      transformed.status >= 400 && transformed.status < 500,
      `${transformed.status} ${JSON.stringify(transformed.body)}`,
    );
    assert.equal(transformed.body.success, false);
    // Stored as is, it may be kept, but delivery will not render it.
    const kept = await upload({ file: new Blob([new Uint8Array(bomb)]), file_name: 'bomb.png' });
    assert.equal(kept.status, 201, JSON.stringify(kept.body));
    const rendition = await fetch(`${base}/${h.ws.workspace_id}/w_100/bomb.png`);
    assert.ok(rendition.status >= 400 && rendition.status < 500, `delivery answered ${rendition.status}`);
    await rendition.arrayBuffer();
    const original = await fetch(`${base}/${h.ws.workspace_id}/bomb.png`);
    assert.equal(original.status, 200);
    assert.equal(
      createHash('sha256')
        .update(Buffer.from(await original.arrayBuffer()))
        .digest('hex'),
      createHash('sha256').update(bomb).digest('hex'),
    );
    assert.ok(rss() - before < 300 * 1024 * 1024, `RSS grew by ${((rss() - before) / 1024 / 1024).toFixed(0)} MiB`);
  });

  test('huge-dimension requests of a bomb under the pixel limit: 400 from its header, in parallel, nothing decoded', async () => {
    // 19.4 megapixels declared (under this server's 20), a few MiB of data behind them.
    const kept = await upload({ file: new Blob([new Uint8Array(pngBomb(4400, 4400))]), file_name: 'tall.png' });
    assert.equal(kept.status, 201, JSON.stringify(kept.body));
    const asks: [string, string][] = [
      ['w_10000,h_10000,el_1', 'RENDITION_TOO_LARGE'],
      ['w_8192,h_8192,c_pad,el_1', 'RENDITION_TOO_LARGE'],
      ['w_100,ar_1:100,el_1', 'RENDITION_TOO_LARGE'],
      ['r_45', 'RENDITION_TOO_LARGE'],
      ['e_blur:900', 'EFFECT_TOO_STRONG'],
      ['e_sharpen:2000', 'EFFECT_TOO_STRONG'],
    ];
    const made = h.services.delivery.stats.renditionsMade;
    const before = rss();
    const answers = await Promise.all(
      Array.from({ length: 48 }, async (_, i) => {
        const [tokens, code] = asks[i % asks.length];
        // A distinct URL each time (q_), as an attacker minting variants would send.
        const res = await fetch(`${base}/${h.ws.workspace_id}/${tokens},q_${40 + i}/tall.png`);
        return { tokens, code, status: res.status, body: (await res.json()) as any };
      }),
    );
    for (const a of answers) {
      assert.equal(a.status, 400, `${a.tokens}: ${JSON.stringify(a.body)}`);
      assert.equal(a.body.errorCode, a.code, a.tokens);
    }
    assert.equal(h.services.delivery.stats.renditionsMade, made, 'no render started');
    assert.ok(rss() - before < 200 * 1024 * 1024, `RSS grew by ${((rss() - before) / 1024 / 1024).toFixed(0)} MiB`);
  });

  test('hostile SVGs: reaching other files, expanding entities, fetching: refused before rendering, originals kept inert', async () => {
    // The corpus's share of test/svg-hostile.test.ts, which covers each trick in depth.
    const secret = await upload({
      file: new Blob([new Uint8Array(pngBomb(10, 10))]),
      file_name: 'secret.png',
    });
    assert.equal(secret.status, 201, JSON.stringify(secret.body));
    const lol = `<!DOCTYPE svg [<!ENTITY a "lollollol"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]>`;
    const svgs: Record<string, string> = {
      'sibling.svg': `<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="10" height="10"><image xlink:href="../secret.png" width="10" height="10"/></svg>`,
      'file-url.svg': `<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><image href="&#x66;ile:///etc/passwd" width="10" height="10"/></svg>`,
      'laughs.svg': `<?xml version="1.0"?>${lol}<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><text>&c;</text></svg>`,
      'xinclude.svg': `<svg xmlns="http://www.w3.org/2000/svg" xmlns:xi="http://www.w3.org/2001/XInclude" width="10" height="10"><xi:include href="/etc/passwd" parse="text"/></svg>`,
      'css.svg': `<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><style>rect{fill:url(http://127.0.0.1:${port}/x)}</style><rect width="10" height="10"/></svg>`,
    };
    const made = h.services.delivery.stats.renditionsMade;
    for (const [name, text] of Object.entries(svgs)) {
      const up = await upload({ file: new Blob([text], { type: 'image/svg+xml' }), file_name: name });
      assert.equal(up.status, 201, `${name}: ${JSON.stringify(up.body)}`);
    }
    const answers = await Promise.all(
      Object.keys(svgs).map(async (name) => {
        const res = await fetch(`${base}/${h.ws.workspace_id}/w_10,f_png/${name}`);
        return { name, status: res.status, body: (await res.json()) as any };
      }),
    );
    for (const a of answers) {
      assert.equal(a.status, 400, `${a.name}: ${JSON.stringify(a.body)}`);
      assert.equal(a.body.errorCode, 'UNSAFE_SVG', a.name);
    }
    assert.equal(h.services.delivery.stats.renditionsMade, made, 'nothing rendered');
    const original = await fetch(`${base}/${h.ws.workspace_id}/sibling.svg`);
    assert.equal(original.status, 200);
    assert.equal(original.headers.get('x-content-type-options'), 'nosniff');
    assert.match(original.headers.get('content-security-policy') ?? '', /sandbox/);
    await original.arrayBuffer();
  });

  test('a gzip-encoded JSON body (a 64 MiB bomb in 64 KiB) is refused without being inflated', async () => {
    const bomb = gzipSync(Buffer.alloc(64 * 1024 * 1024, 0x20));
    assert.ok(bomb.length < 128 * 1024);
    const before = rss();
    const res = await fetch(`${base}/api/v1/sources`, {
      method: 'POST',
      headers: { ...h.auth, 'content-type': 'application/json', 'content-encoding': 'gzip' },
      body: bomb,
    });
    const body = (await res.json()) as any;
    assert.ok(res.status >= 400 && res.status < 500, `${res.status}`);
    assert.equal(body.success, false);
    assert.ok(rss() - before < 48 * 1024 * 1024, `RSS grew by ${((rss() - before) / 1024 / 1024).toFixed(0)} MiB`);
    assert.equal((await h.services.db.kysely.selectFrom('sources').selectAll().execute()).length, 0);
  });

  test('Unicode tricks in names: one name typed two ways is one file; look-alike slashes and dots are not separators; bidi overrides are refused', async () => {
    const nfc = 'caf\u00e9.txt';
    const nfd = 'cafe\u0301.txt';
    const first = await upload({ file: new Blob(['one']), file_name: nfc, folder: 'unicode' });
    const second = await upload({ file: new Blob(['two']), file_name: nfd, folder: 'unicode' });
    assert.equal(first.status, 201);
    assert.equal(second.status, 201);
    assert.equal(second.body.file_no, first.body.file_no, 'NFD replaced the NFC file of the same name');
    assert.equal(second.body.name, nfc);

    // Fullwidth solidus and the two-dot leader look like "/" and "..": they are plain characters.
    const lookalike = await upload({ file: new Blob(['x']), file_name: 'a\uff0fb\u2025.txt', folder: 'x\uff0fy' });
    assert.equal(lookalike.status, 201, JSON.stringify(lookalike.body));
    const folders = (await (await fetch(`${base}/api/v1/folders`, { headers: h.auth })).json()) as any;
    const names = JSON.stringify(folders);
    assert.ok(names.includes('x\uff0fy') && !/"name":"y"/.test(names), 'one folder named x／y, not x and y');

    for (const bad of [
      'evil\u202egnp.exe',
      'tab\there.txt',
      'nul\u0000.txt',
      '../up.txt',
      'a/b.txt',
      'back\\slash.txt',
    ]) {
      const res = await upload({ file: new Blob(['x']), file_name: bad });
      assert.equal(res.status, 400, `${JSON.stringify(bad)} -> ${res.status}`);
      assert.equal(res.body.success, false);
    }
  });

  test('a lone surrogate, escaped in JSON text, is refused before anything is stored; a name that merely holds ".." is a name', async () => {
    const count = async () =>
      Promise.all(
        (['files', 'folders', 'multipart_sessions', 'upload_tokens'] as const).map(
          async (t) => (await h.services.db.kysely.selectFrom(t).select('id').execute()).length,
        ),
      );
    const before = await count();
    // Written by hand: "\ud800" is valid JSON text for a string no UTF-8 can carry.
    for (const [path, body] of [
      ['/api/v1/multipart/start', '{"file_name":"x\\ud800y.bin","size":10,"format":"application/octet-stream"}'],
      [
        '/api/v1/multipart/start',
        '{"file_name":"ok.bin","folder":"a/\\udc00","size":10,"format":"application/octet-stream"}',
      ],
      ['/api/v1/generate-token', '{"file_name":"\\ud83d.bin"}'],
      ['/api/v1/folders', '{"name":"x\\ud800"}'],
    ]) {
      const res = await fetch(`${base}${path}`, {
        method: 'POST',
        headers: { ...h.auth, 'content-type': 'application/json' },
        body,
      });
      const answer = (await res.json()) as any;
      assert.equal(res.status, 400, `${path} ${body} -> ${res.status} ${JSON.stringify(answer)}`);
      assert.deepEqual(
        [answer.success, answer.error, answer.errorCode],
        [false, 'Validation failed', 'VALIDATION_FAILED'],
      );
      assert.match(answer.message, /valid Unicode/);
    }
    assert.deepEqual(await count(), before, 'nothing stored');
    const dots = await upload({ file: new Blob(['dots']), file_name: 'a..b.txt', folder: 'v1..v2' });
    assert.equal(dots.status, 201, JSON.stringify(dots.body));
    assert.equal(dots.body.name, 'a..b.txt');
  });
});
