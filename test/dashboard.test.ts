// The dashboard in a real browser (Debian's Chromium driven by playwright-core): sign in,
// upload a 30 MB image by multipart, see it with its thumbnail, build a transformation and
// see its preview, rename, delete. Screenshots at 375 and 1440 px go to .test-artifacts/.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser } from 'playwright-core';
import sharp from 'sharp';
import { ROOT, runCli, type ServerProcess, startServerAtPublicUrl } from './helpers/process.ts';
import { chooseFiles, chromiumSkip, launchChromium } from './helpers/browser.ts';

const skipWithoutChromium = chromiumSkip();
const ARTIFACTS = join(ROOT, '.test-artifacts');

describe('dashboard in Chromium', {
  skip: skipWithoutChromium,
}, () => {
  const dir = mkdtempSync(join(tmpdir(), 'stowage-ui-'));
  let server: ServerProcess;
  let browser: Browser;
  let ws: { workspace_id: string; public_key: string; private_key: string };
  let image: string;

  before(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    const dataDir = join(dir, 'data');
    ws = JSON.parse(
      (await runCli(['workspace', 'create', '--name', 'UI', '--json'], { STOWAGE_DATA_DIR: dataDir })).stdout,
    );
    // Delivery and part URLs are made from the public URL: the port is known beforehand.
    server = await startServerAtPublicUrl({
      STOWAGE_DATA_DIR: dataDir,
      STOWAGE_SWEEP_INTERVAL_MS: '0',
    });
    // A 30 MB image: noise does not compress.
    image = join(dir, 'poster.png');
    writeFileSync(
      image,
      await sharp({
        create: {
          width: 3200,
          height: 3200,
          channels: 3,
          background: '#777',
          noise: { type: 'gaussian', mean: 128, sigma: 60 },
        },
      })
        .png({ compressionLevel: 0 })
        .toBuffer(),
    );
    assert.ok(statSync(image).size > 30_000_000);
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    await server?.stop('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  test('sign in, upload 30 MB by multipart, thumbnail, transformation preview, rename, delete', async () => {
    const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.url });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    const partPuts: string[] = [];
    page.on('request', (r) => {
      if (r.method() === 'PUT' && r.url().includes('/parts/')) partPuts.push(r.url());
    });
    await page.goto(`${server.url}/dashboard`);

    // A public key is turned away with a clear message; the private key gets in.
    await page.getByLabel('Private key').fill(ws.public_key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByText('That is a public key').waitFor();
    await page.getByLabel('Private key').fill(ws.private_key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: /Files/ }).waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.getItem('stowage.key')), ws.private_key);
    assert.equal(await page.evaluate(() => localStorage.length), 0, 'nothing in long-lived storage');

    await chooseFiles(page, image);
    // In the library's grid: Uppy's list shows its own preview of the file while it uploads.
    const thumb = page.locator('#grid').getByRole('img', { name: 'poster.png', exact: true });
    await thumb.waitFor({ timeout: 60_000 });
    await page.waitForFunction(() => {
      const img = document.querySelector<HTMLImageElement>('#grid img[alt="poster.png"]');
      return img?.complete && img.naturalWidth > 0;
    });
    assert.equal(
      await thumb.evaluate((img: HTMLImageElement) => img.naturalWidth),
      200,
      'the thumbnail is a 200 px rendition',
    );
    assert.ok(partPuts.length >= 4, `uploaded in parts (${partPuts.length})`);
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-1440.png'), fullPage: true });

    // Details: the transformation builder previews its rendition and copies its URL.
    await page
      .locator('#grid')
      .getByRole('button', { name: /poster\.png/ })
      .click();
    await page.getByLabel('Width').fill('320');
    await page.getByLabel('Format').selectOption('webp');
    const preview = page.getByRole('img', { name: 'Transformation preview' });
    await page.waitForFunction(() => {
      const img = document.querySelector<HTMLImageElement>('#t-preview');
      return img?.complete && img.naturalWidth === 320;
    });
    assert.match((await preview.getAttribute('src')) ?? '', /\/w_320,f_webp\/poster\.png$/);
    await page.getByRole('button', { name: 'Copy URL' }).click();
    await page.getByText('URL copied').waitFor();
    assert.match(await page.evaluate(() => navigator.clipboard.readText()), /\/w_320,f_webp\/poster\.png$/);
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-details-1440.png') });

    // Rename, then delete.
    await page.getByLabel('File name').fill('renamed-poster.png');
    await page.getByRole('button', { name: 'Rename' }).click();
    await page.getByText('Renamed to renamed-poster.png').waitFor();
    await page.getByRole('img', { name: 'renamed-poster.png', exact: true }).waitFor();
    page.once('dialog', (d) => d.accept());
    await page.getByRole('button', { name: 'Delete file' }).click();
    await page.getByText('Deleted renamed-poster.png').waitFor();
    await page.getByText('No files here yet.').waitFor();
    assert.deepEqual(errors, [], 'no script errors');
    await context.close();
  });

  test('usable at 375 px, and by keyboard', async () => {
    const context = await browser.newContext({ viewport: { width: 375, height: 800 } });
    const page = await context.newPage();
    await page.goto(`${server.url}/dashboard/`);
    // Keyboard only: Tab to the key field, type, Enter.
    await page.keyboard.press('Tab');
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'key');
    await page.keyboard.type(ws.private_key);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: /Files/ }).waitFor();
    await page.getByLabel('New folder').fill('mobile');
    await page.keyboard.press('Enter');
    await page.getByRole('button', { name: 'mobile' }).waitFor();
    const overflow = await page.evaluate(
      () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
    );
    assert.ok(overflow <= 0, `no horizontal scrolling at 375 px (${overflow} px)`);
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-375.png'), fullPage: true });
    await page.getByRole('button', { name: 'Sources' }).click();
    await page.getByLabel('Source name').fill('cdn');
    await page.getByLabel('Configuration (JSON)').fill('{"base_url":"http://127.0.0.1:9"}');
    await page.getByRole('button', { name: 'Add source' }).click();
    await page.getByRole('cell', { name: 'cdn', exact: true }).waitFor();
    await page.getByRole('button', { name: 'Test source cdn' }).click();
    await page.getByText(/cdn: address refused/).waitFor();
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-sources-375.png'), fullPage: true });
    await context.close();
  });

  test('drag-and-drop upload, then move, tags and metadata from the details', async () => {
    const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    const page = await context.newPage();
    await page.goto(`${server.url}/dashboard/`);
    await page.getByLabel('Private key').fill(ws.private_key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: /Files/ }).waitFor();
    await page.getByLabel('New folder').fill('archive');
    await page.getByRole('button', { name: 'Create folder' }).click();
    await page.getByRole('button', { name: 'archive' }).waitFor();
    // A drop event carrying a file, as a browser sends it.
    const drop = await page.evaluateHandle(() => {
      const dt = new DataTransfer();
      dt.items.add(new File(['dropped bytes'], 'dropped.txt', { type: 'text/plain' }));
      return dt;
    });
    // Onto the uploader's drop area (Uppy's Dashboard).
    await page.locator('#uploader .uppy-Dashboard-inner').dispatchEvent('drop', { dataTransfer: drop });
    await page
      .locator('#grid')
      .getByRole('button', { name: /dropped\.txt/ })
      .click();
    await page.getByLabel('Folder', { exact: true }).selectOption({ label: 'archive' });
    await page.getByRole('button', { name: 'Move' }).click();
    await page.getByText('Moved').waitFor();
    await page.getByLabel('Tags (comma-separated)').fill('one, two');
    await page.getByLabel('Metadata (JSON)').fill('{"owner":"ui"}');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByText('Saved').waitFor();
    const res = await fetch(`${server.url}/api/v1/files?search=dropped`, {
      headers: { 'x-api-key': ws.private_key },
    }).then((r) => r.json() as any);
    const f = res.files[0];
    assert.equal(f.path, '/archive/dropped.txt');
    assert.deepEqual(f.tags, ['one', 'two']);
    assert.deepEqual(f.metadata, { owner: 'ui' });
    await context.close();
  });

  test('the plain example page uploads with a public key through the SDK', async () => {
    const page = await browser.newPage();
    await page.goto(`${server.url}/examples/public-upload.html`);
    const small = join(dir, 'hello.txt');
    writeFileSync(small, 'hello from the example page');
    await page.getByLabel('Public key').fill(ws.public_key);
    await page.getByLabel('File').setInputFiles(small);
    await page.getByRole('button', { name: 'Upload' }).click();
    await page.getByText(/^Uploaded: http/).waitFor();
    const url = (await page.getByRole('status').textContent())!.replace('Uploaded: ', '');
    assert.equal(await (await fetch(url)).text(), 'hello from the example page');
    await page.close();
  });

  test('presets: add, refused when broken, edit, used in a URL, delete', async () => {
    const png = await sharp({ create: { width: 90, height: 60, channels: 3, background: '#3a3' } })
      .png()
      .toBuffer();
    const form = new FormData();
    form.append('file', new Blob([new Uint8Array(png)], { type: 'image/png' }), 'preset-me.png');
    form.append('file_name', 'preset-me.png');
    form.append('folder', 'presets');
    const up = await fetch(`${server.url}/api/v1/uploads`, {
      method: 'POST',
      body: form,
      headers: { 'x-api-key': ws.private_key },
    });
    assert.equal(up.status, 201);
    const url = (tokens: string) => `${server.url}/${ws.workspace_id}/${tokens}/presets/preset-me.png`;
    const widthOf = async (tokens: string) => {
      const res = await fetch(url(tokens));
      return res.ok ? (await sharp(Buffer.from(await res.arrayBuffer())).metadata()).width : res.status;
    };
    const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(`${server.url}/dashboard/`);
    await page.getByLabel('Private key').fill(ws.private_key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: /Files/ }).waitFor();
    await page.getByRole('button', { name: 'Presets', exact: true }).click();
    await page.getByRole('heading', { name: 'Presets' }).waitFor();
    await page.getByText('No presets yet.').waitFor();

    await page.getByLabel('Preset name').fill('small');
    await page.getByLabel('Tokens').fill('w_30,zz_1');
    await page.getByRole('button', { name: 'Save preset' }).click();
    await page.getByText(/Saving the preset failed: .*zz_1/).waitFor();
    await page.getByLabel('Tokens').fill('w_30,f_png');
    await page.getByRole('button', { name: 'Save preset' }).click();
    await page.getByText('Saved t_small = w_30,f_png').waitFor();
    const row = page.getByRole('row', { name: /t_small/ });
    await row.waitFor();
    await page.getByText('1 of 100 presets used.').waitFor();
    assert.equal(await widthOf('t_small'), 30);

    await page.getByRole('button', { name: 'Edit preset small' }).click();
    assert.equal(await page.getByLabel('Preset name').inputValue(), 'small');
    await page.getByLabel('Tokens').fill('w_45,f_png');
    await page.getByRole('button', { name: 'Save preset' }).click();
    await page.getByRole('cell', { name: 'w_45,f_png' }).waitFor();
    assert.equal(await widthOf('t_small'), 45, 'the change applies at once');
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-presets-1440.png') });

    page.once('dialog', (d) => d.accept());
    await page.getByRole('button', { name: 'Delete preset small' }).click();
    await page.getByText('Deleted preset small').waitFor();
    await page.getByText('No presets yet.').waitFor();
    assert.equal(await widthOf('t_small'), 400);
    assert.deepEqual(errors, [], 'no script errors');
    await context.close();
  });

  test('with signed transformations on: thumbnail, preview, builder and copied URL still work', async () => {
    const api = (method: string, path: string, body?: unknown) =>
      fetch(`${server.url}${path}`, {
        method,
        headers: { 'x-api-key': ws.private_key, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    assert.equal((await api('PATCH', '/api/v1/workspace', { signed_transformations: true })).status, 200);
    try {
      const form = new FormData();
      const png = await sharp({ create: { width: 800, height: 600, channels: 3, background: '#a33' } })
        .png()
        .toBuffer();
      form.append('file', new Blob([new Uint8Array(png)], { type: 'image/png' }), 'signed.png');
      form.append('file_name', 'signed.png');
      const up = await fetch(`${server.url}/api/v1/uploads`, {
        method: 'POST',
        body: form,
        headers: { 'x-api-key': ws.private_key },
      });
      assert.equal(up.status, 201);
      const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
      await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.url });
      const page = await context.newPage();
      const errors: string[] = [];
      page.on('pageerror', (e) => errors.push(String(e)));
      await page.goto(`${server.url}/dashboard/`);
      await page.getByLabel('Private key').fill(ws.private_key);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { name: /Files/ }).waitFor();
      await page.waitForFunction(() => {
        const img = document.querySelector<HTMLImageElement>('img[alt="signed.png"]');
        return img?.complete && img.naturalWidth === 200;
      });
      await page.getByRole('button', { name: /signed\.png/ }).click();
      await page.waitForFunction(() => {
        const img = document.querySelector<HTMLImageElement>('#preview img');
        return img?.complete && img.naturalWidth === 800 && img.src.includes('signature=');
      });
      await page.getByLabel('Width').fill('320');
      await page.waitForFunction(() => {
        const img = document.querySelector<HTMLImageElement>('#t-preview');
        return img?.complete && img.naturalWidth === 320;
      });
      await page.getByRole('button', { name: 'Copy URL' }).click();
      await page.getByText('URL copied').waitFor();
      const copied = await page.evaluate(() => navigator.clipboard.readText());
      assert.match(copied, /\/w_320\/signed\.png\?.*signature=/);
      assert.equal((await fetch(copied)).status, 200, 'the copied URL works outside the dashboard');
      assert.equal((await fetch(copied.split('?')[0])).status, 403, 'and only because it is signed');
      assert.deepEqual(errors, [], 'no script errors');
      await context.close();
    } finally {
      await api('PATCH', '/api/v1/workspace', { signed_transformations: false });
    }
  });
});
