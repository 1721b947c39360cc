// Finding files in the dashboard (issue 24 item 1), in Chromium against the real server with 130
// real uploads: search by name, tag and custom id, filter by type and date, sort, page past the
// first 100 with "Load more", and the whole state kept in the address, so a reload or a shared
// link opens the same view.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import sharp from 'sharp';
import { chromiumSkip, launchChromium } from './helpers/browser.ts';
import { runCli, type ServerProcess, startServer } from './helpers/process.ts';

const IMAGES = 30;
const NOTES = 100;

describe('dashboard: finding files', { skip: chromiumSkip() }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'stowage-uif-'));
  let server: ServerProcess;
  let browser: Browser;
  let ws: { private_key: string };

  before(async () => {
    const dataDir = join(dir, 'data');
    ws = JSON.parse(
      (await runCli(['workspace', 'create', '--name', 'Find', '--json'], { STOWAGE_DATA_DIR: dataDir })).stdout,
    );
    // 130 uploads in a few seconds: over the default upload rate limit, which this suite is not about.
    server = await startServer({
      STOWAGE_DATA_DIR: dataDir,
      STOWAGE_SWEEP_INTERVAL_MS: '0',
      STOWAGE_RATE_LIMIT_UPLOAD: 'off',
    });
    const png = await sharp({ create: { width: 4, height: 4, channels: 3, background: '#36c' } })
      .png()
      .toBuffer();
    const jobs: (() => Promise<void>)[] = [];
    const upload =
      (name: string, body: Uint8Array, fields: Record<string, string> = {}) =>
      async () => {
        const form = new FormData();
        form.append('file', new Blob([new Uint8Array(body)]), name);
        form.append('file_name', name);
        for (const [k, v] of Object.entries(fields)) form.append(k, v);
        const res = await fetch(`${server.url}/api/v1/uploads`, {
          method: 'POST',
          headers: { 'x-api-key': ws.private_key },
          body: form,
        });
        assert.equal(res.status, 201, await res.text());
      };
    for (let i = 0; i < IMAGES; i++) {
      const n = String(i).padStart(3, '0');
      // Different bytes per image (the last one differs), so none is a duplicate of another.
      const bytes = Uint8Array.from([...png, i]);
      jobs.push(upload(`photo-${n}.png`, bytes, i < 5 ? { tags: 'hero' } : {}));
    }
    for (let i = 0; i < NOTES; i++) {
      const n = String(i).padStart(3, '0');
      jobs.push(
        upload(
          `note-${n}.txt`,
          new TextEncoder().encode(`note ${n}\n${'x'.repeat(i)}`),
          i === 42 ? { custom_id: 'order-42' } : {},
        ),
      );
    }
    for (let i = 0; i < jobs.length; i += 10) await Promise.all(jobs.slice(i, i + 10).map((j) => j()));
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    await server?.stop('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  async function open(path = '/dashboard/'): Promise<{ page: Page; close(): Promise<void> }> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    await page.goto(`${server.url}/dashboard/`);
    await page.getByLabel('Private key').fill(ws.private_key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: /Files/ }).waitFor();
    if (path !== '/dashboard/') {
      // The key is in this tab's session storage: a shared link opened here signs in by itself.
      await page.goto(`${server.url}${path}`);
      await page.getByRole('heading', { name: /Files/ }).waitFor();
    }
    return { page, close: () => context.close() };
  }

  const cards = (page: Page) =>
    page.locator('#grid .card span').evaluateAll((els) => els.map((e) => e.textContent ?? ''));
  const countSays = async (page: Page, text: RegExp) => page.getByText(text).waitFor();

  test('the first 100, then "Load more" for the rest; sort by name and size', async () => {
    const { page, close } = await open();
    await countSays(page, /Showing 100 of 130 files/);
    await page.getByRole('button', { name: 'Load more' }).click();
    await countSays(page, /Showing 130 of 130 files/);
    assert.equal(await page.getByRole('button', { name: 'Load more' }).isVisible(), false);
    assert.equal(new Set(await cards(page)).size, 130, 'no file twice');

    await page.getByLabel('Sort').selectOption('name_asc');
    await countSays(page, /Showing 100 of 130 files/);
    const byName = await cards(page);
    assert.deepEqual(byName.slice(0, 3), ['note-000.txt', 'note-001.txt', 'note-002.txt']);
    await page.getByLabel('Sort').selectOption('size_desc');
    await page.waitForFunction(() => document.querySelector('#grid .card span')?.textContent === 'note-099.txt');
    assert.match(page.url(), /[?&]sort=size_desc/);
    await close();
  });

  test('search by name, by tag and by custom id; filter by type and by date', async () => {
    const { page, close } = await open();
    await page.getByLabel('Search', { exact: true }).fill('photo-00');
    await countSays(page, /Showing 10 of 10 files/);
    assert.ok((await cards(page)).every((n) => n.startsWith('photo-00')));

    await page.getByLabel('Search', { exact: true }).fill('hero');
    await page.getByLabel('Search in').selectOption('tag');
    await countSays(page, /Showing 5 of 5 files/);

    await page.getByLabel('Search', { exact: true }).fill('order-42');
    await page.getByLabel('Search in').selectOption('custom_id');
    await countSays(page, /Showing 1 of 1 files/);
    assert.deepEqual(await cards(page), ['note-042.txt']);

    await page.getByRole('button', { name: 'Clear' }).click();
    await countSays(page, /Showing 100 of 130 files/);
    await page.getByLabel('File type').selectOption('image');
    await countSays(page, /Showing 30 of 30 files/);
    await page.getByLabel('File type').selectOption('document');
    await countSays(page, /Showing 100 of 100 files/);

    const tomorrow = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10);
    await page.getByLabel('Uploaded from').fill(tomorrow);
    await page.getByText('No files match these filters.').waitFor();
    const today = new Date().toISOString().slice(0, 10);
    await page.getByLabel('Uploaded from').fill(today);
    await page.getByLabel('Uploaded until').fill(today);
    await countSays(page, /Showing 100 of 100 files/);
    await close();
  });

  test('the view lives in the address: a reload and a shared link open it as it was', async () => {
    const { page, close } = await open();
    await page.getByLabel('Search', { exact: true }).fill('photo');
    await page.getByLabel('File type').selectOption('image');
    await page.getByLabel('Sort').selectOption('name_desc');
    await countSays(page, /Showing 30 of 30 files/);
    await page.waitForFunction(() => location.search.includes('sort=name_desc') && location.search.includes('q=photo'));
    const address = new URL(page.url());
    assert.deepEqual(Object.fromEntries(address.searchParams), { q: 'photo', type: 'image', sort: 'name_desc' });

    await page.reload();
    await countSays(page, /Showing 30 of 30 files/);
    assert.equal(await page.getByLabel('Search', { exact: true }).inputValue(), 'photo');
    assert.equal(await page.getByLabel('Sort').inputValue(), 'name_desc');
    assert.equal((await cards(page))[0], 'photo-029.png');
    await close();

    // Another tab, signed in, opening the link as shared; a hand-edited bad value is ignored.
    const shared = await open(`/dashboard/?q=note-04&sort=name_asc&type=nonsense`);
    await countSays(shared.page, /Showing 10 of 10 files/);
    assert.equal(await shared.page.getByLabel('File type').inputValue(), '');
    assert.equal((await cards(shared.page))[0], 'note-040.txt');
    await shared.close();
  });
});
