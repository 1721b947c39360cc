// The dashboard bugs a content editor reported (issue 24, "Quality bar"), each driven in Chromium
// as the editor met it: an error that stays after the next success, "Invalid API key.: " with a
// dangling colon, the transformation builder offered on a PDF, an <input pattern> the browser
// cannot compile, and labels cut off on a phone-sized screen.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { chooseFiles, chromiumSkip, launchChromium } from './helpers/browser.ts';
import { ROOT, runCli, type ServerProcess, startServerAtPublicUrl } from './helpers/process.ts';

const ARTIFACTS = join(ROOT, '.test-artifacts');

/** A one-page PDF, small enough to write out here. */
const PDF = Buffer.from(
  '%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj\n' +
    '3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 200 200]>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n',
);

describe('dashboard quality bugs', { skip: chromiumSkip() }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'stowage-uiq-'));
  let server: ServerProcess;
  let browser: Browser;
  let ws: { private_key: string };

  before(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    const dataDir = join(dir, 'data');
    ws = JSON.parse(
      (await runCli(['workspace', 'create', '--name', 'UIQ', '--json'], { STOWAGE_DATA_DIR: dataDir })).stdout,
    );
    // Delivery and part URLs are made from the public URL: the port is known beforehand.
    server = await startServerAtPublicUrl({
      STOWAGE_DATA_DIR: dataDir,
      STOWAGE_SWEEP_INTERVAL_MS: '0',
    });
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    await server?.stop('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  /** A page that records every console error and uncaught exception. */
  async function open(
    width: number,
    height: number,
  ): Promise<{ page: Page; errors: string[]; close(): Promise<void> }> {
    const context = await browser.newContext({ viewport: { width, height } });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(m.text());
    });
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(`${server.url}/dashboard/`);
    return { page, errors, close: () => context.close() };
  }

  const statusText = async (page: Page) => (await page.locator('#status').textContent()) ?? '';
  /** Waits for the status line to be empty; a message that stays fails with what it says. */
  const statusClears = async (page: Page) => {
    try {
      await page.waitForFunction(() => document.getElementById('status')?.textContent === '', null, {
        timeout: 10_000,
      });
    } catch {
      assert.fail(`the status line still says "${await statusText(page)}"`);
    }
  };

  test('a wrong key says so without a dangling colon; the message goes once sign-in succeeds', async () => {
    const { page, close } = await open(1280, 900);
    await page.getByLabel('Private key').fill('sk_not_a_real_key');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForFunction(() => (document.getElementById('status')?.textContent ?? '').length > 0);
    const refused = await statusText(page);
    assert.match(refused, /Sign in failed/);
    assert.doesNotMatch(refused, /[.:]\s*:|:\s*$/, `no dangling colon: "${refused}"`);
    await page.getByLabel('Private key').fill(ws.private_key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: /Files/ }).waitFor();
    await statusClears(page);
    await close();
  });

  test('a failed action leaves no error once the next one succeeds', async () => {
    const { page, close } = await open(1280, 900);
    await page.getByLabel('Private key').fill(ws.private_key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: /Files/ }).waitFor();
    await page.getByRole('button', { name: 'Sources' }).click();
    // Not JSON: refused on the page.
    await page.getByLabel('Source name').fill('bad');
    await page.getByLabel('Configuration (JSON)').fill('{not json');
    await page.getByRole('button', { name: 'Add source' }).click();
    await page.getByText('The configuration must be a JSON object').waitFor();
    // Back to the files: loading them succeeds, so the error must not stay on screen.
    await page.getByRole('button', { name: 'Files' }).click();
    await statusClears(page);
    await close();
  });

  test('a PDF is not offered the image transformation builder', async () => {
    const { page, close } = await open(1280, 900);
    await page.getByLabel('Private key').fill(ws.private_key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: /Files/ }).waitFor();
    await chooseFiles(page, { name: 'report.pdf', mimeType: 'application/pdf', buffer: PDF });
    await page
      .locator('#grid')
      .getByRole('button', { name: /report\.pdf/ })
      .click();
    await page.getByRole('dialog').waitFor();
    assert.equal(await page.locator('#builder').isVisible(), false, 'the builder is hidden for a PDF');
    assert.equal(await page.getByLabel('Width').isVisible(), false);
    await close();
  });

  test('every view and form loads without a console error (patterns compile)', async () => {
    const { page, errors, close } = await open(1280, 900);
    await page.getByLabel('Private key').fill(ws.private_key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: /Files/ }).waitFor();
    for (const view of ['Sources', 'Presets', 'Files']) {
      await page.getByRole('button', { name: view, exact: true }).click();
      await page.waitForLoadState('networkidle');
    }
    // Every pattern attribute compiles as the browser compiles it (the `v` flag, HTML's rule).
    const bad = await page.evaluate(() =>
      [...document.querySelectorAll<HTMLInputElement>('input[pattern]')]
        .filter((i) => {
          try {
            new RegExp(`^(?:${i.pattern})$`, 'v');
            return false;
          } catch {
            return true;
          }
        })
        .map((i) => `${i.id}: ${i.pattern}`),
    );
    assert.deepEqual(bad, []);
    // Typing into a patterned field makes the browser check it: an invalid pattern logs then.
    await page.getByRole('button', { name: 'Sources', exact: true }).click();
    await page.getByLabel('Source name').fill('cdn-1');
    assert.equal(await page.getByLabel('Source name').evaluate((i: HTMLInputElement) => i.checkValidity()), true);
    await page.getByLabel('Source name').fill('no spaces allowed');
    assert.equal(await page.getByLabel('Source name').evaluate((i: HTMLInputElement) => i.checkValidity()), false);
    assert.deepEqual(errors, []);
    await close();
  });

  test('upload progress moves with the bytes, not only when an 8 MiB part finishes', async () => {
    const { page, errors, close } = await open(1280, 900);
    await page.getByLabel('Private key').fill(ws.private_key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: /Files/ }).waitFor();
    // A link of 16 MB/s (Chromium's own throttling), so that the upload lasts long enough for
    // the page to show values between parts: on loopback a part takes a few milliseconds.
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('Network.emulateNetworkConditions', {
      offline: false,
      latency: 0,
      downloadThroughput: -1,
      uploadThroughput: 16 * 1024 * 1024,
    });
    // Samples the progress bar's value as the page shows it, every 5 ms, while the upload runs.
    await page.evaluate(() => {
      const seen: number[] = [];
      (window as unknown as { seen: number[] }).seen = seen;
      setInterval(() => {
        const bar = document.querySelector<HTMLProgressElement>('#upload-total');
        if (bar && bar.value !== seen.at(-1)) seen.push(bar.value);
      }, 5);
    });
    const size = 3 * 8 * 1024 * 1024 + 999;
    await chooseFiles(page, {
      name: 'bytes.bin',
      mimeType: 'application/octet-stream',
      buffer: randomBytes(size),
    });
    await page.getByText(/Upload(ed| of) bytes\.bin/).waitFor({ timeout: 60_000 });
    assert.equal(await statusText(page), 'Uploaded bytes.bin');
    const seen = await page.evaluate(() => (window as unknown as { seen: number[] }).seen);
    const part = 8 * 1024 * 1024;
    const inside = seen.filter((v) => v > 0 && v % part !== 0 && v < size);
    assert.ok(inside.length >= 3, `values between part boundaries: ${seen.join(', ')}`);
    assert.deepEqual(errors, []);
    await close();
  });

  test('at 375 px no label, button or heading is cut off', async () => {
    const { page, close } = await open(375, 740);
    await page.getByLabel('Private key').fill(ws.private_key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: /Files/ }).waitFor();
    const clipped = () =>
      page.evaluate(() =>
        [...document.querySelectorAll<HTMLElement>('label, button, h1, h2, h3, legend, th, nav a')]
          .filter((el) => el.offsetParent !== null && el.getClientRects().length > 0)
          .filter((el) => {
            const r = el.getBoundingClientRect();
            // Visually hidden on purpose (read by screen readers): in a clipped box of 1 px.
            for (let a: HTMLElement | null = el; a; a = a.parentElement)
              if (getComputedStyle(a).clip.startsWith('rect(0')) return false;
            return el.scrollWidth > el.clientWidth + 1 || r.right > window.innerWidth + 1 || r.left < -1;
          })
          .map((el) => `${el.tagName.toLowerCase()} "${(el.textContent ?? '').trim().slice(0, 30)}"`),
      );
    // A row in each table, so their cells are measured too.
    await page.getByRole('button', { name: 'Sources', exact: true }).click();
    await page.getByLabel('Source name').fill('cdn');
    await page.getByLabel('Configuration (JSON)').fill('{"base_url":"http://127.0.0.1:9"}');
    await page.getByRole('button', { name: 'Add source' }).click();
    await page.getByRole('cell', { name: 'cdn', exact: true }).waitFor();
    // With the header row out of sight, every cell names its column.
    const labels = await page.evaluate(() =>
      [...document.querySelectorAll<HTMLElement>('#sources tr:first-child td')].map(
        (td) =>
          // `"Name" / ""`: the label, with empty alternative text for screen readers.
          /^"([^"]*)"/.exec(getComputedStyle(td, '::before').content)?.[1],
      ),
    );
    assert.deepEqual(labels, ['Name', 'Type', 'Configuration', 'Active', 'Actions']);
    for (const view of ['Files', 'Sources', 'Presets']) {
      await page.getByRole('button', { name: view, exact: true }).click();
      await page.waitForLoadState('networkidle');
      assert.deepEqual(await clipped(), [], `${view} at 375 px`);
      await page.screenshot({
        path: join(ARTIFACTS, `dashboard-quality-${view.toLowerCase()}-375.png`),
        fullPage: true,
      });
    }
    await close();
  });
});
