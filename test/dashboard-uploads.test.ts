// Uploads people trust (issue 24, item 6), in the dashboard, in Chromium, against a real Stowage
// process with real uploads. The Files view mounts the SDK's drop-in uploader (Uppy's Dashboard)
// with no key of its own: its multipart session calls go through the signed-in client, its parts
// straight to their URLs. Played as a user: pick a 40 MB file in a folder, watch each file's and
// the total progress move between part boundaries with the speed and time left, pause (the bytes
// stop at the server), resume (the file completes byte for byte, into the folder, and the library
// shows it); then reload in the middle of an upload and resume it (the parts Stowage already held
// are not sent again). Stowage is reached through a counting proxy (STOWAGE_PUBLIC_URL names it,
// so the part URLs lead through it too): the bytes the page sends are counted on the server's side.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { chooseFiles, chromiumSkip, launchChromium } from './helpers/browser.ts';
import { countingProxy, type CountingProxy, type Seen } from './helpers/counting-proxy.ts';
import { ROOT, runCli, type ServerProcess, startServer } from './helpers/process.ts';
import { closedPort } from './helpers/servers.ts';

const ARTIFACTS = join(ROOT, '.test-artifacts');
const AXE = join(ROOT, 'node_modules', 'axe-core', 'axe.min.js');
const MiB = 1024 * 1024;
const PART = 8 * MiB;
/** Five parts of 8 MiB, the last one short. */
const SIZE = 5 * PART - 12_345;

const isPartPut = (s: Seen) => s.method === 'PUT' && /\/api\/v1\/multipart\/[^/]+\/parts\/\d+/.test(s.path);
const partNumberOf = (path: string) => Number(/\/parts\/(\d+)/.exec(path)?.[1] ?? 0);
const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls until `probe` holds; after a minute it fails, saying what was seen. */
async function until<T>(what: string, probe: () => T | undefined | false, seen?: () => unknown): Promise<T> {
  for (let i = 0; i < 1200; i++) {
    const v = probe();
    if (v) return v;
    await sleep(50);
  }
  throw new Error(`gave up waiting for ${what}${seen ? `; seen: ${JSON.stringify(seen())}` : ''}`);
}

describe('dashboard uploads: progress, speed, pause and resume, resume after a reload', {
  skip: chromiumSkip(),
}, () => {
  const dir = mkdtempSync(join(tmpdir(), 'stowage-uiu-'));
  let server: ServerProcess;
  let proxy: CountingProxy;
  let upstream: string;
  let browser: Browser;
  let ws: { workspace_id: string; private_key: string };

  before(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    const env = { STOWAGE_DATA_DIR: join(dir, 'data') };
    ws = JSON.parse((await runCli(['workspace', 'create', '--name', 'UIU', '--json'], env)).stdout);
    const port = await closedPort();
    upstream = `http://127.0.0.1:${port}`;
    proxy = await countingProxy(upstream);
    server = await startServer({
      ...env,
      PORT: String(port),
      STOWAGE_PUBLIC_URL: proxy.url,
      STOWAGE_SWEEP_INTERVAL_MS: '0',
      STOWAGE_RATE_LIMIT_UPLOAD: 'off',
    });
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    await server?.stop('SIGKILL');
    await proxy?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Straight to Stowage, with the private key: the test's own checks are not the page's traffic. */
  async function call<T>(path: string): Promise<T> {
    const res = await fetch(`${upstream}${path}`, { headers: { authorization: `Bearer ${ws.private_key}` } });
    const body = (await res.json()) as T;
    assert.equal(res.status, 200, JSON.stringify(body));
    return body;
  }

  /** The stored file named `name`: its record, and the SHA-256 of the bytes Stowage delivers. */
  async function stored(name: string): Promise<{ folder: string | null; size: number; sha: string }> {
    const list = await call<{
      files: Array<{ name: string; file_no: string; url: string; path: string; size: number }>;
    }>(`/api/v1/files?search=${encodeURIComponent(name)}&limit=10`);
    const f = list.files.find((x) => x.name === name);
    assert.ok(f, `${name} is stored: ${JSON.stringify(list.files.map((x) => x.name))}`);
    const res = await fetch(f.url.replace(proxy.url, upstream));
    assert.equal(res.status, 200, `GET ${f.url}`);
    const bytes = new Uint8Array(await res.arrayBuffer());
    return { folder: f.path.slice(0, f.path.lastIndexOf('/')) || null, size: f.size, sha: sha256(bytes) };
  }

  /** Signed in; `bypassCSP` only where axe-core must be injected as a script. */
  async function open(width = 1280, height = 900, opts: { bypassCSP?: boolean } = {}) {
    const context = await browser.newContext({ viewport: { width, height }, bypassCSP: opts.bypassCSP });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(m.text());
    });
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(`${proxy.url}/dashboard/`);
    await page.getByLabel('Private key').fill(ws.private_key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Files', exact: true }).waitFor();
    await page.locator('#uploader .uppy-Dashboard').waitFor();
    return { page, errors, close: () => context.close() };
  }

  async function intoNewFolder(page: Page, name: string): Promise<void> {
    await page.getByLabel('New folder').fill(name);
    await page.getByRole('button', { name: 'Create folder' }).click();
    await page.locator('#folders').getByRole('button', { name, exact: true }).click();
    await page.getByRole('heading', { name: `Folder ${name}` }).waitFor();
  }

  const statusSays = (page: Page, text: string) =>
    page.locator('#status').filter({ hasText: text }).waitFor({ timeout: 120_000 });

  /** axe-core's serious and critical violations on the page as it is now. */
  async function axe(page: Page): Promise<string[]> {
    await page.addScriptTag({ path: AXE });
    return page.evaluate(async () => {
      const run = (window as unknown as { axe: { run(ctx: Document): Promise<{ violations: any[] }> } }).axe;
      const { violations } = await run.run(document);
      return violations
        .filter((v) => v.impact === 'serious' || v.impact === 'critical')
        .map((v) => `${v.id}: ${v.nodes.map((n: { target: string[] }) => n.target.join(' ')).join(', ')}`);
    });
  }

  test('progress between part boundaries, speed and time left, pause stops the bytes, resume completes byte-exact', async () => {
    const { page, errors, close } = await open();
    await intoNewFolder(page, 'clips');
    const bytes = randomBytes(SIZE);
    // A link of 6 MiB/s (Chromium's throttling): on loopback a part would take milliseconds.
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('Network.emulateNetworkConditions', {
      offline: false,
      latency: 0,
      downloadThroughput: -1,
      uploadThroughput: 6 * MiB,
    });
    // Samples, every 5 ms, the total bar under the uploader and the file's own progress circle.
    await page.evaluate(`(() => {
      const total = [], file = [];
      window.samples = { total, file };
      setInterval(() => {
        const bar = document.getElementById('upload-total');
        if (!bar.closest('[hidden]') && bar.value !== total.at(-1)) total.push(bar.value);
        const circle = document.querySelector('#uploader .uppy-Dashboard-Item-progressIcon--progress');
        if (circle) {
          const all = Number(circle.getAttribute('stroke-dasharray'));
          const pct = Math.round((100 * (all - Number(circle.getAttribute('stroke-dashoffset')))) / all);
          if (pct !== file.at(-1)) file.push(pct);
        }
      }, 5);
    })()`);
    const before = proxy.seen.length;
    await chooseFiles(page, { name: 'clip.bin', mimeType: 'application/octet-stream', buffer: bytes });

    // Speed and time left, in the line under the uploader and in Uppy's status bar.
    const summary = page.locator('#upload-summary');
    await summary.filter({ hasText: /^Uploading clip\.bin: .* of .* at .*\/s, .* left$/ }).waitFor();
    await page.locator('#uploader .uppy-StatusBar-additionalInfo').filter({ hasText: /left/ }).waitFor();
    assert.equal(await page.locator('#upload-progress').isVisible(), true);
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-uploads-progress-1280.png'), fullPage: true });

    // Pause once a part's worth is on its way: the bytes stop at the server.
    const partBytes = () =>
      proxy.seen
        .slice(before)
        .filter(isPartPut)
        .reduce((n, s) => n + s.bytes, 0);
    await until('some bytes sent', () => partBytes() > 4 * MiB);
    await page.getByRole('button', { name: 'Pause', exact: true }).click();
    await summary.filter({ hasText: /^Paused: clip\.bin, / }).waitFor();
    await sleep(700);
    const atPause = partBytes();
    await sleep(1500);
    assert.equal(partBytes(), atPause, 'no part bytes reach the server while paused');
    assert.ok(atPause < SIZE, `paused before the end (${atPause} of ${SIZE})`);
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-uploads-paused-1280.png'), fullPage: true });

    await page.getByRole('button', { name: 'Resume', exact: true }).click();
    await statusSays(page, 'Uploaded clip.bin');
    // The library refreshed by itself: the file's card is in the folder's grid.
    await page
      .locator('#grid')
      .getByRole('button', { name: /^clip\.bin/ })
      .waitFor();
    const record = await stored('clip.bin');
    assert.equal(record.size, SIZE);
    assert.equal(record.sha, sha256(bytes), 'the stored bytes are the bytes picked');
    assert.equal(record.folder, '/clips', 'into the folder shown');
    assert.equal(await page.locator('#upload-progress').isVisible(), false, 'the progress line goes when done');

    const part = (PART / SIZE) * 100;
    const samples = (await page.evaluate('window.samples')) as { total: number[]; file: number[] };
    const totalInside = samples.total.filter((v) => v > 0 && v < SIZE && v % PART !== 0);
    assert.ok(totalInside.length >= 5, `total: values between part boundaries: ${samples.total.join(', ')}`);
    const fileInside = samples.file.filter((p) => p > 0 && p < 100 && Math.abs(p / part - Math.round(p / part)) > 0.1);
    assert.ok(fileInside.length >= 3, `file: percentages between part boundaries: ${samples.file.join(', ')}`);

    // Only the page's session calls carried a key; the parts carried none.
    const seen = proxy.seen.slice(before);
    for (const p of seen.filter(isPartPut))
      assert.equal(p.headers['x-api-key'] ?? p.headers.authorization, undefined, 'no key on a part');
    const values = await page.evaluate(() => Object.values(localStorage).join('\n'));
    assert.ok(!values.includes(ws.private_key), 'the key is not in long-lived storage');
    assert.deepEqual(errors, []);
    await close();
  });

  test('on a phone-sized screen: several files, the total with speed and time left, nothing cut off, axe', async () => {
    // axe-core is injected as a script, so this page's context lets it past the CSP.
    const { page, errors, close } = await open(375, 740, { bypassCSP: true });
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('Network.emulateNetworkConditions', {
      offline: false,
      latency: 0,
      downloadThroughput: -1,
      uploadThroughput: 6 * MiB,
    });
    const files = ['phone-a.bin', 'phone-b.bin'].map((name) => ({
      name,
      mimeType: 'application/octet-stream',
      buffer: randomBytes(10 * MiB),
    }));
    await chooseFiles(page, files);
    await page
      .locator('#upload-summary')
      .filter({ hasText: /^Uploading 2 files: .* of .* at .*\/s, .* left$/ })
      .waitFor();
    const clipped = await page.evaluate(() =>
      [...document.querySelectorAll<HTMLElement>('#uploader button, #upload-progress, #upload-progress *')]
        .filter((el) => el.offsetParent !== null && el.getClientRects().length > 0)
        .filter((el) => {
          const r = el.getBoundingClientRect();
          return r.right > window.innerWidth + 1 || r.left < -1;
        })
        .map(
          (el) =>
            `${el.tagName.toLowerCase()} "${(el.getAttribute('aria-label') ?? el.textContent ?? '').trim().slice(0, 30)}"`,
        ),
    );
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-uploads-progress-375.png'), fullPage: true });
    assert.deepEqual(clipped, [], 'the uploader fits 375 px');
    assert.deepEqual(await axe(page), [], 'axe: the Files view with uploads in progress');
    await statusSays(page, 'Uploaded 2 files');
    for (const f of files) {
      await page
        .locator('#grid')
        .getByRole('button', { name: new RegExp(`^${f.name.replace('.', '\\.')}`) })
        .waitFor();
      assert.equal((await stored(f.name)).sha, sha256(f.buffer));
    }
    assert.deepEqual(errors, []);
    await close();
  });

  test('sign-out stops an unfinished upload and forgets it: the next sign-in finds nothing to resume', async () => {
    const { page, errors, close } = await open();
    const path = join(dir, 'left.bin');
    writeFileSync(path, randomBytes(2 * PART));
    const before = proxy.seen.length;
    proxy.hold = (req) => req.method === 'PUT' && partNumberOf(req.url!) > 1;
    try {
      await chooseFiles(page, path);
      await until('a part waiting', () => proxy.seen.slice(before).some((s) => isPartPut(s) && s.held));
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.getByRole('button', { name: 'Sign in' }).waitFor();
      proxy.hold = () => false;
      assert.equal(await page.evaluate(() => localStorage.getItem('uppyState:stowage-dashboard')), null);
      await page.getByLabel('Private key').fill(ws.private_key);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.locator('#uploader .uppy-Dashboard').waitFor();
      await page.getByRole('button', { name: 'browse files' }).waitFor();
      assert.equal(await page.getByText(/We could not fully recover/).count(), 0, 'nothing to resume');
      assert.equal(await page.locator('#upload-progress').isVisible(), false);
      assert.deepEqual(errors, []);
    } finally {
      proxy.hold = () => false;
      await close();
    }
  });

  test('a reload in the middle resumes the upload; the parts Stowage held are not sent again', async () => {
    const { page, errors, close } = await open();
    await intoNewFolder(page, 'reloaded');
    const bytes = randomBytes(SIZE);
    // A file on disk: picked again after the reload, it is the same file to Uppy (name, size, date).
    const path = join(dir, 'big.bin');
    writeFileSync(path, bytes);
    const before = proxy.seen.length;
    // Parts 1 and 2 reach Stowage; the others wait at the proxy until the page is reloaded.
    proxy.hold = (req) => req.method === 'PUT' && partNumberOf(req.url!) > 2;
    try {
      await chooseFiles(page, path);
      await until(
        'parts 1 and 2 stored, a later one waiting',
        () => {
          const puts = proxy.seen.slice(before).filter(isPartPut);
          return puts.filter((s) => s.status === 200).length === 2 && puts.some((s) => s.held);
        },
        () => proxy.seen.slice(before).map((s) => `${s.method} ${s.path.slice(0, 50)} ${s.status ?? '…'}`),
      );
      // The tab reloads (or the browser comes back after a crash); the key is still in this tab.
      await page.reload();
      proxy.hold = () => false;
      await page.getByRole('heading', { name: 'Folder reloaded' }).waitFor();
      await page.locator('#uploader .uppy-Dashboard').waitFor();
      const reloadAt = proxy.seen.length;
      // Uppy lists the unfinished upload; a file over Golden Retriever's 10 MiB is picked again.
      await page.getByText(/We could not fully recover 1 file/).waitFor();
      await page
        .locator('#upload-summary')
        .filter({ hasText: /^Interrupted: big\.bin, .* of / })
        .waitFor();
      await page.screenshot({ path: join(ARTIFACTS, 'dashboard-uploads-recovered-1280.png'), fullPage: true });
      await chooseFiles(page, path);
      await page.getByRole('button', { name: 'Upload 1 file' }).click();
      await statusSays(page, 'Uploaded big.bin');
      await page
        .locator('#grid')
        .getByRole('button', { name: /^big\.bin/ })
        .waitFor();

      const record = await stored('big.bin');
      assert.equal(record.sha, sha256(bytes), 'the stored bytes are the bytes picked');
      assert.equal(record.folder, '/reloaded', 'into the folder it was added in');
      const afterReload = proxy.seen.slice(reloadAt);
      assert.equal(
        afterReload.filter((s) => s.method === 'POST' && s.path === '/api/v1/multipart/start').length,
        0,
        'the same session goes on',
      );
      assert.ok(
        afterReload.some((s) => s.method === 'GET' && /^\/api\/v1\/multipart\/[^/?]+$/.test(s.path)),
        'Stowage was asked which parts it holds',
      );
      const resent = afterReload.filter(isPartPut);
      assert.deepEqual(
        resent.map((s) => partNumberOf(s.path)).sort((a, b) => a - b),
        [3, 4, 5],
        'only the parts Stowage did not hold were sent after the reload',
      );
      assert.equal(
        resent.reduce((n, s) => n + s.bytes, 0),
        SIZE - 2 * PART,
      );
      assert.deepEqual(errors, []);
    } finally {
      proxy.hold = () => false;
      await close();
    }
  });
});
