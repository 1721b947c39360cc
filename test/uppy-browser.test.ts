// Uppy in Chromium, from another origin, against a real Stowage process: the example pages
// (examples/uppy-s3.html, uppy-tus.html, uploader.html) are served by a second loopback server
// with the SDK's standalone uploader bundle (sdk/src/uploader-bundle.ts, built here by esbuild)
// next to them, and a user's steps are played on Uppy's Dashboard: pick a 50 MB file, press
// Upload. The stored bytes are compared by SHA-256 with the file on disk.
//
// Stowage is reached through a counting proxy on a third port (STOWAGE_PUBLIC_URL names it, so
// part URLs and tus upload URLs lead through it too): every request the page makes is seen on
// the server side, with the bytes of its body. The resume tests use it to stop an upload half
// way, reload the page, pick the file again, resume, and show from the proxy's count that the
// parts Stowage already held were not sent again.
//
// Both paths also run on S3 storage (OpenStack Swift, scripts/start-swift.sh) when
// STOWAGE_TEST_S3_ENDPOINT is set: multipart parts then go from the page to presigned Swift
// URLs, tus bytes through Stowage into the bucket.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { build } from 'esbuild';
import type { Browser, Page } from 'playwright-core';
import { uploaderBundleOptions } from '../sdk/scripts/uploader-bundle.mjs';
import { chromiumSkip, launchChromium } from './helpers/browser.ts';
import { ROOT, runCli, type ServerProcess, startServer } from './helpers/process.ts';
import { countingProxy, type CountingProxy, type Seen } from './helpers/counting-proxy.ts';
import { closedPort, localServer } from './helpers/servers.ts';
import { externalService } from './helpers/services.ts';

const skipWithoutChromium = chromiumSkip();
const s3 = externalService('STOWAGE_TEST_S3_ENDPOINT', 'an S3-compatible server (scripts/start-swift.sh)');

const MiB = 1024 * 1024;
/** 50 MB: six parts of 8 MiB, the last one short. */
const SIZE = 50_000_000;
const PART = 8 * MiB;

type Json = Record<string, any>;

// ---------------------------------------------------------------------------------------------
// Stowage behind the proxy, and the page's origin

interface Target {
  name: 'local' | 's3';
  /** The proxy: what the page and STOWAGE_PUBLIC_URL name. */
  url: string;
  /**
   * Stowage itself, for the test's own checks from Node: they are not the page's traffic, and
   * a kept-alive connection to the proxy could be closed by its idle timeout as it is reused.
   */
  direct(url: string): string;
  ws: { workspace_id: string; public_key: string; private_key: string };
  proxy: CountingProxy;
  server: ServerProcess;
  close(): Promise<void>;
}

async function startStowage(name: Target['name'], storageEnv: Record<string, string>): Promise<Target> {
  const dir = mkdtempSync(join(tmpdir(), `stowage-uppy-${name}-`));
  const env = { STOWAGE_DATA_DIR: join(dir, 'data'), ...storageEnv };
  const created = await runCli(['workspace', 'create', '--name', `Uppy (${name})`, '--json'], env);
  assert.equal(created.code, 0, created.stderr);
  const port = await closedPort();
  const upstream = `http://127.0.0.1:${port}`;
  const proxy = await countingProxy(upstream);
  const server = await startServer({
    ...env,
    PORT: String(port),
    STOWAGE_PUBLIC_URL: proxy.url,
    STOWAGE_SWEEP_INTERVAL_MS: '0',
    STOWAGE_WEBHOOK_POLL_MS: '0',
  });
  return {
    name,
    url: proxy.url,
    direct: (url) => (url.startsWith(proxy.url) ? upstream + url.slice(proxy.url.length) : url),
    ws: JSON.parse(created.stdout),
    proxy,
    server,
    async close() {
      await server.stop('SIGKILL');
      await proxy.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The example page with its constants set for a target, as a user would edit them. */
function examplePage(file: string, t: Target, extra: Record<string, string> = {}): string {
  let html = readFileSync(join(ROOT, 'examples', file), 'utf8')
    .replace(/const STOWAGE = '[^']*';/, `const STOWAGE = '${t.url}';`)
    .replace(/const PUBLIC_KEY = '[^']*';/, `const PUBLIC_KEY = '${t.ws.public_key}';`);
  for (const [name, value] of Object.entries(extra))
    html = html.replace(new RegExp(`const ${name} = '[^']*';`), `const ${name} = '${value}';`);
  return html;
}

/**
 * A page that mounts createUploader with `options` (JSON) into #uploader, listing stored records
 * in #stored and errors in #errors, as examples/uploader.html does.
 */
function uploaderPage(options: Json): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Uploader</title></head><body>
<button id="open" type="button">Upload files</button>
<div id="uploader"></div><ul id="stored"></ul><ul id="errors"></ul>
<script type="module">
import { createUploader } from './uploader.min.js';
const list = (id, text, data = {}) => {
  const li = document.createElement('li');
  Object.assign(li.dataset, data);
  li.textContent = text;
  document.getElementById(id).append(li);
  return li;
};
window.uploader = createUploader({
  target: '#uploader',
  ...${JSON.stringify(options)},
  onFileUploaded: (r) => {
    const li = list('stored', '', { fileNo: r.file_no, sha256: r.hash, folder: r.folder_name ?? '' });
    const a = document.createElement('a');
    a.href = r.url;
    a.textContent = r.name;
    li.append(a);
  },
  onError: (e) => list('errors', e.message),
});
</script></body></html>`;
}

const sha256File = (path: string) =>
  new Promise<string>((resolve, reject) => {
    const h = createHash('sha256');
    createReadStream(path)
      .on('data', (c) => h.update(c))
      .on('end', () => resolve(h.digest('hex')))
      .on('error', reject);
  });

async function storedSha256(url: string): Promise<string> {
  const res = await fetch(url);
  assert.equal(res.status, 200, `GET ${url}`);
  return createHash('sha256')
    .update(new Uint8Array(await res.arrayBuffer()))
    .digest('hex');
}

const partNumberOf = (path: string) => Number(/\/parts\/(\d+)/.exec(path)?.[1] ?? 0);
const isPartPut = (s: Seen) => s.method === 'PUT' && /\/api\/v1\/multipart\/[^/]+\/parts\/\d+/.test(s.path);
const isTusPatch = (s: Seen) => s.method === 'PATCH' && s.path.startsWith('/api/v1/tus/');

/** Polls until `probe` holds; a limit of a minute turns a stuck upload into a failure that says what was seen. */
async function until<T>(
  what: string,
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  seen?: () => unknown,
): Promise<T> {
  for (let i = 0; i < 1200; i++) {
    const v = await probe();
    if (v) return v;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`gave up waiting for ${what}${seen ? `; seen: ${JSON.stringify(seen())}` : ''}`);
}

/** The requests since `from`, shortly. */
const digestOf = (p: CountingProxy, from: number) =>
  p.seen.slice(from).map((s) => `${s.method} ${s.path.slice(0, 60)} ${s.status ?? (s.held ? 'held' : '…')} ${s.bytes}`);

/** Picks the file in the Dashboard, as a user would, and presses its Upload button. */
async function pickAndUpload(page: Page, path: string): Promise<void> {
  const input = page.locator('input.uppy-Dashboard-input[type=file]').first();
  // After a reload the Dashboard lists the restored upload: "Add more" shows the picker again.
  if ((await input.count()) === 0) await page.locator('.uppy-DashboardContent-addMore').click();
  await input.setInputFiles(path);
  if (process.env.DEBUG_UPPY) {
    await page.screenshot({ path: '/tmp/uppy-debug.png' });
    console.error(await page.locator('#uploader').innerHTML());
  }
  await page.locator('.uppy-StatusBar-actionBtn--upload').click();
}

/** The record the page lists once the upload is stored (or the error it shows). */
async function storedRecord(page: Page): Promise<{ fileNo: string; sha256: string; href: string }> {
  const li = page.locator('#stored li').first();
  await li.waitFor({ timeout: 120_000 });
  return {
    fileNo: (await li.getAttribute('data-file-no'))!,
    sha256: (await li.getAttribute('data-sha256'))!,
    href: (await li.locator('a').getAttribute('href'))!,
  };
}

// ---------------------------------------------------------------------------------------------

describe('Uppy in Chromium from another origin: @uppy/aws-s3 (multipart), @uppy/tus, createUploader', {
  skip: skipWithoutChromium,
}, () => {
  let dir: string;
  let big: string;
  let bigSha: string;
  let bundle: string;
  let browser: Browser;
  let local: Target;
  /** Page files by path; the page server serves them. */
  const pages = new Map<string, string>();
  let site: Awaited<ReturnType<typeof localServer>>;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'stowage-uppy-'));
    big = join(dir, 'big.bin');
    writeFileSync(big, randomBytes(SIZE));
    bigSha = await sha256File(big);
    await build(uploaderBundleOptions(join(dir, 'uploader.min.js')));
    bundle = readFileSync(join(dir, 'uploader.min.js'), 'utf8');
    site = await localServer((req, res) => {
      const path = new URL(req.url!, 'http://x').pathname;
      if (path === '/uploader.min.js' || path.endsWith('.js')) {
        const js = path === '/uploader.min.js' ? bundle : pages.get(path);
        res.writeHead(js === undefined ? 404 : 200, { 'content-type': 'text/javascript' }).end(js);
        return;
      }
      const html = pages.get(path);
      if (path === '/favicon.ico') res.writeHead(204).end();
      else if (html === undefined) res.writeHead(404).end();
      else res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(html);
    });
    local = await startStowage('local', {});
    browser = await launchChromium();
  });

  after(async () => {
    await browser?.close();
    await local?.close();
    await site?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  async function openPage(path: string, html: string): Promise<Page> {
    pages.set(path, html);
    // A context of its own: Golden Retriever's saved state is per origin.
    const page = await (await browser.newContext()).newPage();
    page.on('close', () =>
      page
        .context()
        .close()
        .catch(() => {}),
    );
    page.on('pageerror', (err) => console.error(`[page ${path}] ${err.message}`));
    page.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warning') console.error(`[page ${path}] ${m.text()}`);
    });
    await page.goto(`${site.url}${path}`);
    await page.locator('.uppy-Dashboard').first().waitFor();
    return page;
  }

  async function assertStored(t: Target, record: { fileNo: string; sha256: string; href: string }) {
    assert.equal(record.sha256, bigSha, "the record's SHA-256 is the file's");
    const delivered = await storedSha256(t.direct(record.href)).catch((err: Error) => {
      // Say what the server logged about it: a cut answer has no status to show.
      throw new Error(
        `GET ${record.href}: ${err.message} (${String((err.cause as Error)?.message)})\n${t.server.output().slice(-4000)}`,
      );
    });
    assert.equal(delivered, bigSha, 'the bytes Stowage delivers are the bytes of the file');
    const res = await fetch(t.direct(`${t.url}/api/v1/files/${record.fileNo}`), {
      headers: { authorization: `Bearer ${t.ws.private_key}` },
    });
    const body = (await res.json()) as Json;
    assert.equal(res.status, 200, JSON.stringify(body));
    assert.equal((body.data ?? body).size, SIZE);
  }

  test('examples/uppy-s3.html: the Dashboard uploads 50 MB through @uppy/aws-s3 to Stowage multipart', async () => {
    const before = local.proxy.seen.length;
    const page = await openPage('/uppy-s3.html', examplePage('uppy-s3.html', local));
    await pickAndUpload(page, big);
    await assertStored(local, await storedRecord(page));
    const seen = local.proxy.seen.slice(before);
    const puts = seen.filter(isPartPut);
    assert.deepEqual(
      puts.map((s) => partNumberOf(s.path)).sort((a, b) => a - b),
      [1, 2, 3, 4, 5, 6],
      'each part once',
    );
    assert.equal(
      puts.reduce((n, s) => n + s.bytes, 0),
      SIZE,
      'the parts carried the file, no byte twice',
    );
    for (const p of puts)
      assert.equal(p.headers['x-api-key'] ?? p.headers.authorization, undefined, 'no key on a part');
    assert.equal(seen.filter((s) => s.method === 'POST' && s.path === '/api/v1/multipart/start').length, 1);
    assert.equal(seen.filter((s) => s.method === 'POST' && s.path === '/api/v1/multipart/complete').length, 1);
    await page.close();
  });

  test('examples/uppy-tus.html: the Dashboard uploads 50 MB through @uppy/tus to /api/v1/tus', async () => {
    const before = local.proxy.seen.length;
    const page = await openPage('/uppy-tus.html', examplePage('uppy-tus.html', local));
    await pickAndUpload(page, big);
    await assertStored(local, await storedRecord(page));
    const seen = local.proxy.seen.slice(before);
    assert.equal(seen.filter((s) => s.method === 'POST' && s.path === '/api/v1/tus').length, 1, 'one creation');
    assert.equal(
      seen.filter(isTusPatch).reduce((n, s) => n + s.bytes, 0),
      SIZE,
      'the PATCHes carried the file once',
    );
    await page.close();
  });

  test('createUploader (multipart): a reload in the middle resumes, and stored parts are not sent again', async () => {
    const before = local.proxy.seen.length;
    const html = examplePage('uploader.html', local, { PROTOCOL: 'multipart' });
    // Parts 1 and 2 reach Stowage; the others wait at the proxy until the page is reloaded.
    local.proxy.hold = (req) => req.method === 'PUT' && partNumberOf(req.url!) > 2;
    const page = await openPage('/uploader.html', html);
    try {
      await pickAndUpload(page, big);
      await until(
        'parts 1 and 2 stored, a later one waiting',
        () => {
          const seen = local.proxy.seen.slice(before).filter(isPartPut);
          return seen.filter((s) => s.status === 200).length === 2 && seen.some((s) => s.held);
        },
        () => digestOf(local.proxy, before),
      );
      // Held until the old page is gone: a part it asked for later must not slip through.
      await page.reload();
      await page.locator('.uppy-Dashboard').first().waitFor();
      local.proxy.hold = () => false;
      const reloadAt = local.proxy.seen.length;
      // Golden Retriever kept the upload; the file itself (over its 10 MiB IndexedDB limit) is picked again.
      await pickAndUpload(page, big);
      const record = await storedRecord(page);
      await assertStored(local, record);

      const afterReload = local.proxy.seen.slice(reloadAt);
      assert.equal(
        afterReload.filter((s) => s.method === 'POST' && s.path === '/api/v1/multipart/start').length,
        0,
        'the same session goes on',
      );
      assert.ok(
        afterReload.some((s) => s.method === 'GET' && /^\/api\/v1\/multipart\/[^/]+$/.test(s.path)),
        'Stowage was asked which parts it holds',
      );
      const resent = afterReload.filter(isPartPut).map((s) => partNumberOf(s.path));
      assert.deepEqual(
        resent.sort((a, b) => a - b),
        [3, 4, 5, 6],
        'only the parts Stowage did not hold were sent after the reload',
      );
      assert.equal(
        afterReload.filter(isPartPut).reduce((n, s) => n + s.bytes, 0),
        SIZE - 2 * PART,
      );
    } finally {
      local.proxy.hold = () => false;
      await page.close();
    }
  });

  test('createUploader (tus): a reload in the middle resumes from the offset Stowage holds', async (t) => {
    const before = local.proxy.seen.length;
    const html = examplePage('uploader.html', local, { PROTOCOL: 'tus' });
    // 20 MB of the upload reach Stowage, which writes two whole 8 MiB parts as they complete
    // and keeps the rest when the request is cut; the page's upload stalls until the reload.
    local.proxy.cap = (req) => (req.method === 'PATCH' ? 20_000_000 : Infinity);
    const page = await openPage('/uploader-tus.html', html);
    try {
      await pickAndUpload(page, big);
      const created = await until('the tus upload created', () =>
        local.proxy.seen.slice(before).find((s) => s.method === 'POST' && s.path === '/api/v1/tus' && s.status === 201),
      );
      const uploadUrl = String(created.responseHeaders!.location);
      // Stowage's own GET on the upload (not tus's HEAD, which would take the upload's lock).
      await until('two parts stored', async () => {
        const res = await fetch(local.direct(uploadUrl), {
          headers: { authorization: `Bearer ${local.ws.public_key}` },
        });
        const body = (await res.json()) as Json;
        return body.upload_offset >= 2 * PART;
      });
      await page.reload();
      await page.locator('.uppy-Dashboard').first().waitFor();
      local.proxy.cap = () => Infinity;
      const reloadAt = local.proxy.seen.length;
      await pickAndUpload(page, big);
      const record = await storedRecord(page);
      await assertStored(local, record);

      const afterReload = local.proxy.seen.slice(reloadAt);
      assert.equal(
        afterReload.filter((s) => s.method === 'POST' && s.path === '/api/v1/tus').length,
        0,
        'the same upload goes on',
      );
      // The resumed page asked Stowage (HEAD) where to go on, and went on from there.
      const head = afterReload.find((s) => s.method === 'HEAD' && s.path.startsWith('/api/v1/tus/'));
      const held = Number(head?.responseHeaders?.['upload-offset']);
      assert.ok(held >= 2 * PART && held <= 20_000_000, `Stowage held ${held} bytes: at least the two parts`);
      t.diagnostic(`Stowage held ${held} of the 20,000,000 bytes sent before the reload`);
      const patches = afterReload.filter(isTusPatch);
      assert.ok(patches.length >= 1);
      assert.equal(Number(patches[0].headers['upload-offset']), held, 'the upload went on from what Stowage held');
      assert.equal(
        patches.reduce((n, s) => n + s.bytes, 0),
        SIZE - held,
        'only the bytes after them were sent again',
      );
    } finally {
      local.proxy.cap = () => Infinity;
      await page.close();
    }
  });

  test('a private key in a page is refused before any request; a public key works', async () => {
    const page = await openPage('/uppy-s3.html', examplePage('uppy-s3.html', local));
    const before = local.proxy.seen.length;
    // Plain JS (a string): the test runner's compiler would add helpers the page does not have.
    const refused: Record<string, string> = await page.evaluate(`(async () => {
      const m = await import('/uploader.min.js');
      const args = ${JSON.stringify({ url: local.url, sk: local.ws.private_key, pk: local.ws.public_key })};
      const tries = {};
      const attempt = (name, f) => {
        try { f(); tries[name] = 'accepted'; } catch (e) { tries[name] = e.message; }
      };
      attempt('multipart', () => m.stowageMultipart({ baseUrl: args.url, publicKey: args.sk }));
      attempt('tus', () => m.stowageTus({ baseUrl: args.url, uploadToken: args.sk }));
      attempt('uploader', () => m.createUploader({ baseUrl: args.url, apiKey: args.sk, target: document.body }));
      attempt('public', () => m.stowageMultipart({ baseUrl: args.url, publicKey: args.pk }));
      return tries;
    })()`);
    for (const name of ['multipart', 'tus', 'uploader'])
      assert.match(refused[name], /private key \(stw_sk_…\) must never be put in a web page/, name);
    assert.equal(refused.public, 'accepted');
    assert.equal(local.proxy.seen.length, before, 'nothing was sent');
    await page.close();
  });

  test("createUploader with an upload token: tus, no key in the page, the token's size limit held by Stowage", async () => {
    const small = join(dir, 'small.bin');
    writeFileSync(small, randomBytes(3_000_000));
    const smallSha = await sha256File(small);
    const mint = async (body: Json) => {
      const res = await fetch(local.direct(`${local.url}/api/v1/generate-token`), {
        method: 'POST',
        headers: { authorization: `Bearer ${local.ws.private_key}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      const answer = (await res.json()) as Json;
      assert.equal(res.status, 201, JSON.stringify(answer));
      return answer.token as string;
    };

    const token = await mint({ file_name: 'from-token.bin', folder: 'tokens', max_file_size: 10_000_000 });
    const before = local.proxy.seen.length;
    const page = await openPage('/token.html', uploaderPage({ baseUrl: local.url, uploadToken: token }));
    await pickAndUpload(page, small);
    const li = page.locator('#stored li').first();
    await li.waitFor({ timeout: 60_000 });
    assert.equal(await li.getAttribute('data-sha256'), smallSha);
    assert.equal(await li.getAttribute('data-folder'), 'tokens', "the token's policy chose the folder");
    assert.equal(await storedSha256(local.direct((await li.locator('a').getAttribute('href'))!)), smallSha);
    const sent = local.proxy.seen.slice(before).filter((s) => s.method !== 'OPTIONS' && s.path.startsWith('/api/'));
    assert.ok(
      sent.some((s) => s.method === 'POST' && s.path === '/api/v1/tus'),
      'through tus',
    );
    for (const s of sent) {
      assert.equal(s.headers['x-api-key'], undefined);
      assert.equal(s.headers.authorization, `Bearer ${token}`, `${s.method} ${s.path} carries the token`);
    }
    await page.close();

    // A token for 1 MB, no limit in the page: Stowage refuses the 3 MB file before a byte is sent.
    const tight = await mint({ file_name: 'tight.bin', max_file_size: 1_000_000 });
    const from = local.proxy.seen.length;
    const refused = await openPage('/token-tight.html', uploaderPage({ baseUrl: local.url, uploadToken: tight }));
    await pickAndUpload(refused, small);
    await refused.locator('#errors li').first().waitFor({ timeout: 60_000 });
    const creation = local.proxy.seen.slice(from).find((s) => s.method === 'POST' && s.path === '/api/v1/tus');
    assert.equal(creation?.status, 413, 'FILE_TOO_LARGE at creation');
    assert.equal(local.proxy.seen.slice(from).filter(isTusPatch).length, 0, 'no byte of the file was sent');
    assert.equal(await refused.locator('#stored li').count(), 0);
    await refused.close();
  });

  test('createUploader restrictions refuse files in the page, before any request', async () => {
    const page = await openPage(
      '/restricted.html',
      uploaderPage({
        baseUrl: local.url,
        publicKey: local.ws.public_key,
        restrictions: { maxFileSize: 1_000_000, allowedFileTypes: ['image/*'] },
        sources: ['local', 'camera'],
      }),
    );
    assert.equal(await page.locator('[data-uppy-acquirer-id="Webcam"]').count(), 1, 'a Camera tab');
    const before = local.proxy.seen.length;
    await page.locator('input.uppy-Dashboard-input[type=file]').first().setInputFiles(big);
    // Uppy's informer says why; the file is not added, so there is nothing to upload.
    await page.locator('.uppy-Informer p').first().waitFor();
    assert.equal(await page.evaluate('window.uploader.uppy.getFiles().length'), 0);
    assert.equal(local.proxy.seen.length, before, 'nothing was sent');
    await page.close();
  });

  test('createUploader takes files dropped on it and pasted into it', async () => {
    const page = await openPage(
      '/drop-paste.html',
      uploaderPage({ baseUrl: local.url, publicKey: local.ws.public_key }),
    );
    // What the browser hands a page for a drop and a paste: events carrying a DataTransfer.
    const count = await page.evaluate(`(async () => {
      const files = (name) => {
        const dt = new DataTransfer();
        dt.items.add(new File([name.repeat(100)], name, { type: 'text/plain' }));
        return dt;
      };
      const inner = document.querySelector('.uppy-Dashboard-inner');
      for (const type of ['dragenter', 'dragover', 'drop'])
        inner.dispatchEvent(new DragEvent(type, { bubbles: true, cancelable: true, dataTransfer: files('dropped.txt') }));
      // Uppy reads dropped files asynchronously (folders are walked); wait for it to have them.
      for (let i = 0; i < 500 && window.uploader.uppy.getFiles().length === 0; i++)
        await new Promise((r) => setTimeout(r, 10));
      document.querySelector('.uppy-Dashboard-browse, .uppy-DashboardContent-addMore').focus();
      document.dispatchEvent(new ClipboardEvent('paste', { bubbles: true, clipboardData: files('pasted.txt') }));
      return window.uploader.uppy.getFiles().map((f) => f.name).sort();
    })()`);
    assert.deepEqual(count, ['dropped.txt', 'pasted.txt']);
    await page.close();
  });

  test("createUploader type 'modal' opens from its target and uploads", async () => {
    pages.set(
      '/modal.html',
      uploaderPage({ baseUrl: local.url, publicKey: local.ws.public_key, type: 'modal', target: '#open' }),
    );
    const page = await (await browser.newContext()).newPage();
    await page.goto(`${site.url}/modal.html`);
    const modal = page.locator('.uppy-Dashboard--modal');
    await modal.waitFor({ state: 'attached' });
    assert.equal(await modal.getAttribute('aria-hidden'), 'true', 'closed until asked');
    await page.locator('#open').click();
    await page.waitForFunction(
      `document.querySelector('.uppy-Dashboard--modal').getAttribute('aria-hidden') === 'false'`,
    );
    const small = join(dir, 'modal.bin');
    writeFileSync(small, randomBytes(1_000_000));
    await pickAndUpload(page, small);
    const li = page.locator('#stored li').first();
    await li.waitFor({ timeout: 60_000 });
    assert.equal(await li.getAttribute('data-sha256'), await sha256File(small));
    await page.context().close();
  });

  test('<StowageUploader/> (@stowage/sdk/react) mounts the uploader, uploads, and goes with its component', async () => {
    // The page's app: React 19 and the component, bundled as an app would bundle them.
    const app = await build({
      stdin: {
        contents: `
          import { createElement } from 'react';
          import { createRoot } from 'react-dom/client';
          import { StowageUploader } from './sdk/src/react.ts';
          const root = createRoot(document.getElementById('app'));
          window.unmount = () => root.unmount();
          window.mount = (props) => root.render(createElement(StowageUploader, {
            ...props,
            className: 'uploader',
            onFileUploaded: (r) => {
              const li = document.createElement('li');
              li.dataset.fileNo = r.file_no;
              li.dataset.sha256 = r.hash;
              li.textContent = r.name;
              document.getElementById('stored').append(li);
            },
          }));`,
        resolveDir: ROOT,
        loader: 'js',
      },
      bundle: true,
      format: 'esm',
      platform: 'browser',
      write: false,
      define: { 'process.env.NODE_ENV': '"production"' },
      logLevel: 'warning',
    });
    pages.set('/react-app.js', app.outputFiles[0].text);
    const small = join(dir, 'react.bin');
    writeFileSync(small, randomBytes(2_000_000));
    const page = await openPage(
      '/react.html',
      `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>React</title></head><body>
<div id="app"></div><ul id="stored"></ul>
<script type="module">
import './react-app.js';
window.mount(${JSON.stringify({ baseUrl: local.url, publicKey: local.ws.public_key, folder: 'react' })});
</script></body></html>`,
    );
    await pickAndUpload(page, small);
    const li = page.locator('#stored li').first();
    await li.waitFor({ timeout: 60_000 });
    assert.equal(await li.getAttribute('data-sha256'), await sha256File(small));
    await page.evaluate('window.unmount()');
    assert.equal(await page.locator('.uppy-Dashboard').count(), 0, 'unmounting removed the Dashboard');
    await page.close();
  });

  describe('on S3 storage (Swift)', { skip: s3.skip }, () => {
    let target: Target;

    before(async () => {
      const endpoint = s3.value!;
      const region = process.env.STOWAGE_TEST_S3_REGION ?? 'us-east-1';
      const credentials = {
        accessKeyId: process.env.STOWAGE_TEST_S3_ACCESS_KEY_ID ?? 'test:tester',
        secretAccessKey: process.env.STOWAGE_TEST_S3_SECRET_ACCESS_KEY ?? 'testing',
      };
      const Bucket = `uppy-${randomBytes(5).toString('hex')}`;
      const client = new S3Client({ endpoint, region, forcePathStyle: true, credentials });
      await client.send(new CreateBucketCommand({ Bucket }));
      client.destroy();
      target = await startStowage('s3', {
        STOWAGE_STORAGE: 's3',
        S3_ENDPOINT: endpoint,
        S3_REGION: region,
        S3_BUCKET: Bucket,
        S3_ACCESS_KEY_ID: credentials.accessKeyId,
        S3_SECRET_ACCESS_KEY: credentials.secretAccessKey,
      });
    });

    after(async () => {
      await target?.close();
    });

    test('examples/uppy-s3.html: 50 MB through @uppy/aws-s3, parts straight to presigned Swift URLs', async () => {
      const before = target.proxy.seen.length;
      const page = await openPage('/uppy-s3-on-s3.html', examplePage('uppy-s3.html', target));
      const parts: string[] = [];
      page.on('requestfinished', (r) => {
        if (r.method() === 'PUT') parts.push(r.url());
      });
      await pickAndUpload(page, big);
      await assertStored(target, await storedRecord(page));
      assert.equal(parts.length, 6, 'six part PUTs');
      assert.ok(
        parts.every((u) => new URL(u).origin === new URL(s3.value!).origin),
        'the parts went to the bucket, not through Stowage',
      );
      assert.equal(target.proxy.seen.slice(before).filter(isPartPut).length, 0);
      await page.close();
    });

    test('examples/uppy-tus.html: 50 MB through @uppy/tus, stored in the bucket by Stowage', async () => {
      const before = target.proxy.seen.length;
      const page = await openPage('/uppy-tus-on-s3.html', examplePage('uppy-tus.html', target));
      await pickAndUpload(page, big);
      await assertStored(target, await storedRecord(page));
      assert.equal(
        target.proxy.seen
          .slice(before)
          .filter(isTusPatch)
          .reduce((n, s) => n + s.bytes, 0),
        SIZE,
        'the file went through Stowage once',
      );
      await page.close();
    });
  });
});
