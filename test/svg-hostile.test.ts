// Hostile SVGs (issue 19, item 6): rasterizing an SVG must reach nothing outside its own bytes.
// Every SVG here is uploaded for real and asked for as a rendition over a real socket; sharp
// (librsvg) does the rendering. On local disk a blob used to be handed to libvips by path, and
// librsvg then resolved `<image href>`, `<use href>` and `xi:include` against the blob
// directory: another file's pixels came back inside the attacker's rendition.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import sharp from 'sharp';
import { guardSvg } from '../src/media/svg-guard.ts';
import { type Harness, makeHarness } from './helpers/harness.ts';
import { localServer } from './helpers/servers.ts';

const NS = 'xmlns="http://www.w3.org/2000/svg"';
const svg = (body: string, extra = '') => `<svg ${NS}${extra} width="40" height="40">${body}</svg>`;
/** How many pixels of a raw RGB(A) buffer are the secret's pure red. */
const redPixels = (raw: Buffer, channels: number) => {
  let n = 0;
  for (let i = 0; i < raw.length; i += channels) if (raw[i] > 200 && raw[i + 1] < 60 && raw[i + 2] < 60) n++;
  return n;
};

describe('hostile SVGs reach no other file and no network', () => {
  let h: Harness;
  let base: string;
  let canary: Awaited<ReturnType<typeof localServer>>;
  /** Requests the canary server saw that no rendering should ever make. */
  const canaryHits: string[] = [];
  /** What the canary serves as an origin (image_source) under /img/. */
  const originSvgs = new Map<string, string>();
  let secretKey: string;
  let secretPath: string;
  let partKey: string;
  let notesKey: string;
  let otherKey: string;
  let otherWorkspace: string;

  const upload = async (name: string, body: Buffer | string, extra: Record<string, string> = {}, auth = h.auth) => {
    const f = new FormData();
    f.append('file', new Blob([typeof body === 'string' ? body : new Uint8Array(body)]));
    f.append('file_name', name);
    for (const [k, v] of Object.entries(extra)) f.append(k, v);
    const res = await fetch(`${base}/api/v1/uploads`, { method: 'POST', headers: auth, body: f });
    return { status: res.status, body: (await res.json()) as any };
  };
  const keyOf = async (workspaceId: string, name: string) => {
    const row = await h.services.db.kysely
      .selectFrom('files')
      .innerJoin('blobs', 'blobs.id', 'files.blob_id')
      .select('blobs.storage_key')
      .where('files.workspace_id', '=', workspaceId)
      .where('files.name', '=', name)
      .executeTakeFirstOrThrow();
    return row.storage_key;
  };
  /** Uploads `body` as `name` and asks for a 40x40 PNG rendition of it. */
  const render = async (name: string, body: Buffer | string) => {
    const up = await upload(name, body);
    assert.equal(up.status, 201, JSON.stringify(up.body));
    const res = await fetch(`${base}/${h.ws.workspace_id}/w_40,h_40,f_png/${encodeURIComponent(name)}`);
    return { status: res.status, type: res.headers.get('content-type'), body: Buffer.from(await res.arrayBuffer()) };
  };
  /** Why `r` is not a refusal in the documented shape (naming any of the secret's pixels it shows), or undefined. */
  const notRefused = async (r: Awaited<ReturnType<typeof render>>): Promise<string | undefined> => {
    if (r.status === 200) {
      const { data, info } = await sharp(r.body).raw().toBuffer({ resolveWithObject: true });
      return `rendered, ${redPixels(data, info.channels)} of 1600 pixels the secret's red`;
    }
    const err = JSON.parse(r.body.toString());
    if (r.status !== 400 || err.errorCode !== 'UNSAFE_SVG' || !/^the SVG is not rendered: /.test(err.message))
      return `${r.status} ${err.errorCode}: ${err.message}`;
    return undefined;
  };
  /** Renders every case; all must be refused (every case that is not is listed, not only the first). */
  const refuseAll = async (prefix: string, cases: Record<string, string>) => {
    const failures: string[] = [];
    let n = 0;
    for (const [what, body] of Object.entries(cases)) {
      const why = await notRefused(await render(`${prefix}-${n++}.svg`, body));
      if (why) failures.push(`${what}: ${why}`);
    }
    assert.deepEqual(failures, []);
  };

  before(async () => {
    canary = await localServer((req, res) => {
      const m = /^\/img\/(.+)$/.exec(req.url ?? '');
      const body = m ? originSvgs.get(m[1]) : undefined;
      if (body) return void res.writeHead(200, { 'content-type': 'image/svg+xml' }).end(body);
      canaryHits.push(req.url ?? '');
      res.writeHead(200, { 'content-type': 'image/png' }).end();
    });
    h = await makeHarness('sqlite', { config: { outboundAllow: ['127.0.0.1'] } });
    base = await h.app.listen({ host: '127.0.0.1', port: 0 });
    const red = await sharp({ create: { width: 40, height: 40, channels: 3, background: '#ff0000' } })
      .png()
      .toBuffer();
    // The secrets: a red image, an SVG fragment painting red, a text file; and another
    // workspace's red image.
    assert.equal((await upload('secret.png', red)).status, 201);
    assert.equal((await upload('part.svg', svg('<rect id="r" width="40" height="40" fill="#ff0000"/>'))).status, 201);
    assert.equal((await upload('notes.txt', 'the secret launch code is 0000')).status, 201);
    const other = await h.services.workspaces.create('Another tenant');
    otherWorkspace = other.workspace_id;
    assert.equal((await upload('theirs.png', red, {}, { authorization: `Bearer ${other.private_key}` })).status, 201);
    secretKey = await keyOf(h.ws.workspace_id, 'secret.png');
    partKey = await keyOf(h.ws.workspace_id, 'part.svg');
    notesKey = await keyOf(h.ws.workspace_id, 'notes.txt');
    otherKey = await keyOf(otherWorkspace, 'theirs.png');
    secretPath = h.services.storage.localPath!(secretKey);
  });
  after(async () => {
    await h?.close();
    await canary?.close();
  });

  const blobName = (key: string) => key.split('/').pop()!;

  test('a benign SVG still renders: shapes, a gradient, #fragment use, a data: PNG, an Illustrator DOCTYPE', async () => {
    const dot = await sharp({ create: { width: 4, height: 4, channels: 3, background: '#00ff00' } })
      .png()
      .toBuffer();
    const body = `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">
<!-- drawn by hand -->
<svg ${NS} xmlns:xlink="http://www.w3.org/1999/xlink" width="40" height="40" viewBox="0 0 40 40">
  <defs>
    <linearGradient id="g" x1="0" x2="1"><stop offset="0" stop-color="#0000ff"/><stop offset="1" stop-color="#0000ff"/></linearGradient>
    <rect id="box" width="20" height="40"/>
  </defs>
  <style><![CDATA[ .half { fill: url(#g); } ]]></style>
  <use xlink:href="#box" class="half"/>
  <rect x="20" width="20" height="40" style="fill: url('#g')"/>
  <image x="0" y="0" width="4" height="4" href="data:image/png;base64,${dot.toString('base64')}"/>
  <text x="5" y="30" font-size="4">a &amp; b &#60; c</text>
</svg>`;
    const r = await render('benign.svg', body);
    assert.equal(r.status, 200, r.body.toString().slice(0, 300));
    assert.equal(r.type, 'image/png');
    const { data, info } = await sharp(r.body).removeAlpha().raw().toBuffer({ resolveWithObject: true });
    assert.deepEqual([info.width, info.height], [40, 40]);
    const px = (x: number, y: number) => [...data.subarray((y * 40 + x) * 3, (y * 40 + x) * 3 + 3)];
    assert.deepEqual(px(10, 20), [0, 0, 255], 'the gradient through <use href="#box">');
    assert.deepEqual(px(30, 20), [0, 0, 255], 'the gradient through a style attribute');
    assert.deepEqual(px(1, 1), [0, 255, 0], 'the data: PNG');
  });

  test("another file's blob by relative path, absolute path and file:// URL: refused, no pixels of it", async () => {
    const image = (href: string, extra = '') => svg(`<image ${href} width="40" height="40"/>`, extra);
    const cases: Record<string, string> = {
      'relative href': image(`href="${blobName(secretKey)}"`),
      'relative xlink:href': image(
        `xlink:href="${blobName(secretKey)}"`,
        ' xmlns:xlink="http://www.w3.org/1999/xlink"',
      ),
      'another prefix bound to xlink': image(
        `q:href="${blobName(secretKey)}"`,
        ' xmlns:q="http://www.w3.org/1999/xlink"',
      ),
      'absolute path': image(`href="${secretPath}"`),
      'file:// URL': image(`href="file://${secretPath}"`),
      'FILE:// in capitals, spaced': image(`href="  FILE://${secretPath}  "`),
      'entity-encoded file: (hex)': image(`href="&#x66;&#x69;le://${secretPath}"`),
      'entity-encoded name (decimal)': image(
        `href="&#${blobName(secretKey).charCodeAt(0)};${blobName(secretKey).slice(1)}"`,
      ),
      'a tab inside "file"': image(`href="fi&#9;le://${secretPath}"`),
      "another workspace's blob": image(`href="../../${otherWorkspace}/blobs/${blobName(otherKey)}"`),
      '<use> of an SVG blob': svg(`<use href="${blobName(partKey)}#r"/>`),
      'data: PNG that is an SVG': image(
        `href="data:image/png;base64,${Buffer.from(image(`href="${blobName(secretKey)}"`)).toString('base64')}"`,
      ),
      'data: SVG': image(`href="data:image/svg+xml,${encodeURIComponent(image(`href="${blobName(secretKey)}"`))}"`),
    };
    await refuseAll('leak', cases);
  });

  test('CSS: url() to a blob in a <style> element, a style attribute, a presentation attribute; @import', async () => {
    const ref = `${blobName(partKey)}#r`;
    const cases: Record<string, string> = {
      '<style> url()': svg(`<style>rect { fill: url(${ref}) }</style><rect width="40" height="40"/>`),
      '<style> in CDATA': svg(`<style><![CDATA[rect { fill: url("${ref}") }]]></style><rect width="40" height="40"/>`),
      '<style> split by a comment': svg(
        `<style>rect { fill: ur<!-- -->l(${ref}) }</style><rect width="40" height="40"/>`,
      ),
      '<style> with a CSS escape': svg(`<style>rect { fill: \\75 rl(${ref}) }</style><rect width="40" height="40"/>`),
      'style attribute': svg(`<rect width="40" height="40" style="fill: URL( &quot;${ref}&quot; )"/>`),
      'fill attribute': svg(`<rect width="40" height="40" fill="url(${ref})"/>`),
      '@import': svg(`<style>@import url(${blobName(notesKey)});</style><rect width="40" height="40"/>`),
      '@import with an escape': svg(`<style>@\\69mport "${blobName(notesKey)}";</style><rect width="40" height="40"/>`),
    };
    await refuseAll('css', cases);
  });

  test('xi:include of /etc/passwd and of a blob, under any prefix; entity expansion; DOCTYPE subsets', async () => {
    const xi = (prefix: string, href: string) =>
      svg(
        `<text x="0" y="20" font-size="8"><${prefix}include href="${href}" parse="text"/></text>`,
        prefix ? ` xmlns:${prefix.slice(0, -1)}="http://www.w3.org/2001/XInclude"` : '',
      );
    const laughs = `<?xml version="1.0"?>
<!DOCTYPE svg [
  <!ENTITY a "lollollollollollollollollollol">
  ${Array.from({ length: 9 }, (_, i) => `<!ENTITY ${String.fromCharCode(98 + i)} "${`&${String.fromCharCode(97 + i)};`.repeat(10)}">`).join('\n  ')}
]>
${svg('<text y="20">&j;</text>')}`;
    const cases: Record<string, string> = {
      'xi:include /etc/passwd': xi('xi:', '/etc/passwd'),
      'xi:include file:///etc/passwd': xi('xi:', 'file:///etc/passwd'),
      'xi:include of a blob': xi('xi:', blobName(notesKey)),
      'another prefix for XInclude': xi('inc:', blobName(notesKey)),
      'XInclude as the default namespace': svg(
        `<text y="20"><include xmlns="http://www.w3.org/2001/XInclude" href="${blobName(notesKey)}" parse="text"/></text>`,
      ),
      'billion laughs': laughs,
      'an external entity': `<!DOCTYPE svg [<!ENTITY x SYSTEM "file:///etc/passwd">]>${svg('<text y="20">&x;</text>')}`,
      'an undeclared entity': svg('<text y="20">&x;</text>'),
      'xml-stylesheet': `<?xml-stylesheet type="text/css" href="${blobName(notesKey)}"?>${svg('<rect width="9" height="9"/>')}`,
      '<foreignObject>': svg(
        '<foreignObject width="40" height="40"><p xmlns="http://www.w3.org/1999/xhtml">x</p></foreignObject>',
      ),
      '<script>': svg('<script>alert(1)</script>'),
      'xml:base': svg('<g xml:base="file:///etc/"><rect width="9" height="9"/></g>'),
      'a comment that is not XML': svg('<!-- a -- b --><rect width="9" height="9"/>'),
    };
    await refuseAll('xml', cases);
  });

  test('http:// references to a local server: refused, and the server never hears of them', async () => {
    const url = `${canary.url}/leak`;
    const cases: Record<string, string> = {
      '<image href=http>': svg(`<image href="${url}.png" width="40" height="40"/>`),
      '<use href=http>': svg(`<use href="${url}.svg#a"/>`),
      'CSS url(http)': svg(`<rect width="40" height="40" style="fill:url(${url}.svg#g)"/>`),
      '@import http': svg(`<style>@import url(${url}.css);</style>`),
      'xi:include http': svg(
        `<text y="20"><xi:include href="${url}.txt" parse="text"/></text>`,
        ' xmlns:xi="http://www.w3.org/2001/XInclude"',
      ),
      'external DTD entity over http': `<!DOCTYPE svg [<!ENTITY % d SYSTEM "${url}.dtd"> %d;]>${svg('')}`,
    };
    await refuseAll('net', cases);
    // The same SVGs through an image_source origin (fetched, so decoded from memory): refused too.
    await fetch(`${base}/api/v1/sources`, {
      method: 'POST',
      headers: { ...h.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'web', type: 'image_source', configuration: { base_url: `${canary.url}/img` } }),
    }).then(async (r) => assert.equal(r.status, 201, await r.text()));
    originSvgs.set('evil.svg', cases['<image href=http>']);
    const viaOrigin = await fetch(`${base}/${h.ws.workspace_id}-web/w_40,f_png/evil.svg`);
    const body = Buffer.from(await viaOrigin.arrayBuffer());
    assert.equal(await notRefused({ status: viaOrigin.status, type: null, body }), undefined, 'an origin serving it');
    assert.deepEqual(canaryHits, [], 'no rendering reached the local server');
  });

  test('encodings: UTF-16 (with and without BOM), a UTF-16 declaration, gzip: never rendered', async () => {
    const inner = svg(`<image href="${blobName(secretKey)}" width="40" height="40"/>`);
    const variants: Record<string, Buffer> = {
      'UTF-16LE with BOM': Buffer.from(`\ufeff${inner}`, 'utf16le'),
      'UTF-16LE without BOM': Buffer.from(inner, 'utf16le'),
      'UTF-16BE with BOM': Buffer.from(`\ufeff${inner}`, 'utf16le').swap16(),
      'encoding="UTF-16" declared over UTF-8 bytes': Buffer.from(`<?xml version="1.0" encoding="UTF-16"?>${inner}`),
      'encoding="UTF-7"': Buffer.from(`<?xml version="1.0" encoding="UTF-7"?>${inner}`),
    };
    let n = 0;
    for (const [what, bytes] of Object.entries(variants)) {
      const r = await render(`enc-${n++}.svg`, bytes);
      // Stored under whatever type detection gives such bytes; never rendered with the secret.
      const code = r.status === 200 ? await notRefused(r) : JSON.parse(r.body.toString()).errorCode;
      assert.match(code, /^(UNSAFE_SVG|TRANSFORM_NOT_APPLICABLE)$/, `${what}: ${r.status} ${code}`);
      // And the guard itself, whatever a stored type says.
      assert.throws(() => guardSvg(bytes), { errorCode: 'UNSAFE_SVG' }, what);
    }
    const { gzipSync } = await import('node:zlib');
    assert.throws(() => guardSvg(gzipSync(inner)), { errorCode: 'UNSAFE_SVG' }, 'SVGZ');
  });

  test('an SVG over 10 MiB is refused by size, in parallel too, and its original is still served', async () => {
    const big = svg(`<!-- ${'x'.repeat(10 * 1024 * 1024)} --><rect width="40" height="40"/>`);
    assert.equal((await upload('big.svg', big)).status, 201);
    const answers = await Promise.all(
      Array.from({ length: 6 }, () => fetch(`${base}/${h.ws.workspace_id}/w_40,f_png/big.svg`)),
    );
    for (const res of answers) {
      assert.equal(res.status, 400);
      const err = (await res.json()) as any;
      assert.equal(err.errorCode, 'UNSAFE_SVG');
      assert.match(err.message, /larger than 10485760 bytes/);
    }
    const original = await fetch(`${base}/${h.ws.workspace_id}/big.svg`);
    assert.equal(original.status, 200);
    assert.equal((await original.arrayBuffer()).byteLength, Buffer.byteLength(big));
  });

  test('at upload: a hostile SVG is stored with its size read from its text, and `transform` refuses it', async () => {
    const hostile = svg(
      `<image href="${canary.url}/upload.png" width="40" height="40"/><image href="${blobName(secretKey)}"/>`,
    );
    const stored = await upload('upload.svg', hostile);
    assert.equal(stored.status, 201, JSON.stringify(stored.body));
    const record = stored.body.data ?? stored.body;
    assert.equal(record.mime_type, 'image/svg+xml');
    assert.deepEqual([record.width, record.height], [40, 40]);
    const transformed = await upload('upload-t.svg', hostile, { transform: 'w_20' });
    assert.equal(transformed.status, 400, JSON.stringify(transformed.body));
    assert.equal(transformed.body.errorCode, 'TRANSFORM_NOT_APPLICABLE');
    assert.deepEqual(canaryHits, [], 'neither detection nor transform reached the local server');
  });

  test('a PNG carrying a hostile SVG in its metadata is rendered as the PNG it is (libvips picks its PNG loader)', async () => {
    // Only files stored as image/svg+xml go through the guard; this pins why that is enough:
    // the other decodable types are recognised by their magic bytes first.
    const hidden = svg(`<image href="${blobName(secretKey)}" width="40" height="40"/>`);
    const green = await sharp({ create: { width: 40, height: 40, channels: 3, background: '#00ff00' } })
      .png()
      .withExif({ IFD0: { ImageDescription: hidden } })
      .toBuffer();
    assert.ok(green.includes(hidden), 'the SVG is inside the PNG');
    const up = await upload('polyglot.png', green);
    assert.equal(up.status, 201);
    const res = await fetch(`${base}/${h.ws.workspace_id}/w_40,h_40,f_png/polyglot.png`);
    assert.equal(res.status, 200);
    const { data, info } = await sharp(Buffer.from(await res.arrayBuffer()))
      .raw()
      .toBuffer({ resolveWithObject: true });
    assert.equal(redPixels(data, info.channels), 0);
    assert.deepEqual([...data.subarray(0, 3)], [0, 255, 0]);
  });

  test('originals of SVG, HTML and XML are served as data: nosniff and a sandboxing CSP', async () => {
    const files: [string, string, string][] = [
      ['page.svg', svg('<script>alert(document.cookie)</script>'), 'image/svg+xml'],
      ['page.html', '<!doctype html><script>alert(document.cookie)</script>', 'text/html'],
      [
        'page.xml',
        '<?xml version="1.0"?><x:script xmlns:x="http://www.w3.org/1999/xhtml">alert(1)</x:script>',
        'application/xml',
      ],
    ];
    for (const [name, body, type] of files) {
      assert.equal((await upload(name, body)).status, 201);
      for (const method of ['GET', 'HEAD']) {
        const res = await fetch(`${base}/${h.ws.workspace_id}/${name}`, { method });
        assert.equal(res.status, 200, `${method} ${name}`);
        assert.equal(res.headers.get('content-type')?.split(';')[0], type, name);
        assert.equal(res.headers.get('x-content-type-options'), 'nosniff', name);
        const csp = res.headers.get('content-security-policy') ?? '';
        assert.match(csp, /(^|;)\s*sandbox\s*(;|$)/, `${name}: ${csp}`);
        assert.match(csp, /default-src 'none'/, `${name}: ${csp}`);
        assert.doesNotMatch(csp, /script-src/, `${name}: ${csp}`);
        await res.arrayBuffer();
      }
    }
  });
});
