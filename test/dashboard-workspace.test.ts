// The dashboard's Workspace page in Chromium, against the real server: usage against the quota,
// API keys by hint (a new key shown once and working, a revoked one refused), webhook deliveries
// with their outcome and a Redeliver that sends again; then axe-core on every page of the
// dashboard (0 serious or critical violations), at desktop and phone sizes.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { chromiumSkip, launchChromium } from './helpers/browser.ts';
import { ROOT, runCli, type ServerProcess, startServer } from './helpers/process.ts';

const ARTIFACTS = join(ROOT, '.test-artifacts');
const AXE = join(ROOT, 'node_modules', 'axe-core', 'axe.min.js');

describe('dashboard workspace page and accessibility', { skip: chromiumSkip() }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'stowage-uiw-'));
  let server: ServerProcess;
  let browser: Browser;
  let ws: { workspace_id: string; private_key: string; public_key: string };
  let receiver: http.Server;
  let hookUrl: string;
  let failHooks = true;
  const hooks: string[] = [];

  before(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    const dataDir = join(dir, 'data');
    const env = { STOWAGE_DATA_DIR: dataDir };
    ws = JSON.parse((await runCli(['workspace', 'create', '--name', 'UIW', '--json'], env)).stdout);
    assert.equal((await runCli(['workspace', 'set-quota', ws.workspace_id, '10MB'], env)).code, 0);
    receiver = http.createServer((req, res) => {
      hooks.push(String(req.headers['webhook-id']));
      req.resume();
      req.on('end', () => res.writeHead(failHooks ? 500 : 204).end());
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
    server = await startServer({
      ...env,
      STOWAGE_SWEEP_INTERVAL_MS: '0',
      STOWAGE_OUTBOUND_ALLOW: '127.0.0.1',
      STOWAGE_WEBHOOK_RETRY_SCHEDULE: '3600',
    });
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    await server?.stop('SIGKILL');
    await new Promise((r) => receiver?.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  async function signedIn(width: number, height: number, opts: { bypassCSP?: boolean } = {}) {
    const context = await browser.newContext({ viewport: { width, height }, bypassCSP: opts.bypassCSP });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.url });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(m.text());
    });
    page.on('response', (r) => {
      if (r.status() >= 400) errors.push(`${r.status()} ${r.url()}`);
    });
    page.on('dialog', (d) => void d.accept());
    await page.goto(`${server.url}/dashboard/`);
    await page.getByLabel('Private key').fill(ws.private_key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: /Files/ }).waitFor();
    return { page, errors, close: () => context.close() };
  }

  const upload = async (key: string, name: string, webhook?: string) => {
    const form = new FormData();
    form.append('file', new Blob([Buffer.alloc(250_000, 7)]), name);
    form.append('file_name', name);
    if (webhook) form.append('webhook_url', webhook);
    return fetch(`${server.url}/api/v1/uploads`, { method: 'POST', headers: { 'x-api-key': key }, body: form });
  };

  test('usage, keys (new one shown once and working, revoked one refused), deliveries and Redeliver', async () => {
    assert.equal((await upload(ws.private_key, 'hooked.bin', hookUrl)).status, 201);
    const deadline = Date.now() + 15_000;
    while (hooks.length < 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    assert.equal(hooks.length, 1, 'the first attempt was made (and refused)');

    const { page, errors, close } = await signedIn(1280, 900);
    await page.getByRole('button', { name: 'Workspace', exact: true }).click();
    await page.getByRole('heading', { name: 'API keys' }).waitFor();
    // 250,000 bytes of a 10 MB (10,000,000 byte) quota, in the dashboard's binary units.
    await page.getByText(/244\.1 KiB used of 9\.5 MiB \(3%\)/).waitFor();
    assert.equal(await page.locator('#usage-bar').getAttribute('max'), '10000000');

    // Keys by hint; the keys themselves are nowhere on the page.
    await page.getByRole('cell', { name: `stw_sk_…${ws.private_key.slice(-4)}`, exact: true }).waitFor();
    await page.getByRole('cell', { name: `stw_pk_…${ws.public_key.slice(-4)}`, exact: true }).waitFor();
    const text = await page.locator('body').textContent();
    assert.ok(!text?.includes(ws.private_key) && !text?.includes(ws.public_key));

    // A new public key: shown once, copied, working; then revoked and refused.
    await page.getByRole('button', { name: 'New public key' }).click();
    const shown = page.locator('#new-key-value');
    await shown.waitFor();
    const fresh = (await shown.textContent()) ?? '';
    assert.match(fresh, /^stw_pk_/);
    await page.getByRole('button', { name: 'Copy key' }).click();
    await page.getByText('Key copied').waitFor();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), fresh);
    assert.equal((await upload(fresh, 'by-new-key.bin')).status, 201, 'the new key uploads');
    await page.getByRole('button', { name: 'Done' }).click();
    assert.equal(await page.locator('#new-key').isVisible(), false);
    assert.equal(await shown.textContent(), '', 'not left in the page');
    await page.getByRole('button', { name: `Revoke key stw_pk_…${fresh.slice(-4)}` }).click();
    await page.getByText(`Revoked stw_pk_…${fresh.slice(-4)}`).waitFor();
    assert.equal((await upload(fresh, 'after-revoke.bin')).status, 401, 'the revoked key is refused');

    // The refused delivery shows its outcome; Redeliver sends it again and it is delivered.
    await page.getByRole('cell', { name: 'pending: HTTP 500' }).waitFor();
    failHooks = false;
    await page.getByRole('button', { name: /^Redeliver msg_/ }).click();
    await page.getByText(/^Queued msg_/).waitFor();
    const until = Date.now() + 15_000;
    while (hooks.length < 2 && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(hooks, [hooks[0], hooks[0]], 'sent again with the same webhook-id');
    await page.getByLabel('Show deliveries', { exact: true }).selectOption('delivered');
    await page.getByRole('cell', { name: 'delivered (HTTP 204)' }).waitFor({ timeout: 15_000 });
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-workspace-1280.png'), fullPage: true });
    assert.deepEqual(errors, []);
    await close();
  });

  /** axe-core over the page as it is now: violations of serious or critical impact. */
  async function axe(page: Page): Promise<string[]> {
    if (!(await page.evaluate(() => 'axe' in window))) await page.addScriptTag({ path: AXE });
    return page.evaluate(async () => {
      const run = (window as unknown as { axe: { run(ctx: Document): Promise<{ violations: any[] }> } }).axe;
      const r = await run.run(document);
      return r.violations
        .filter((v) => v.impact === 'serious' || v.impact === 'critical')
        .map(
          (v) => `${v.id} (${v.impact}): ${v.nodes.map((n: { target: string[] }) => n.target.join(' ')).join(', ')}`,
        );
    });
  }

  for (const [width, height] of [
    [1280, 900],
    [375, 740],
  ] as const) {
    test(`axe-core finds no serious or critical violation on any page at ${width} px`, async () => {
      // Signed out first: the sign-in page.
      const context = await browser.newContext({ viewport: { width, height }, bypassCSP: true });
      const out = await context.newPage();
      await out.goto(`${server.url}/dashboard/`);
      assert.deepEqual(await axe(out), [], 'sign-in page');
      await context.close();

      // axe is injected as a script: the test context lets it past the dashboard's CSP.
      const { page, close } = await signedIn(width, height, { bypassCSP: true });
      const found: Record<string, string[]> = {};
      for (const view of ['Files', 'Sources', 'Presets', 'Workspace']) {
        await page.getByRole('button', { name: view, exact: true }).click();
        await page.waitForLoadState('networkidle');
        found[view] = await axe(page);
      }
      await page.getByRole('button', { name: 'Files', exact: true }).click();
      await page.getByRole('button', { name: /hooked\.bin/ }).click();
      await page.getByRole('dialog').waitFor();
      found['File details'] = await axe(page);
      await page.getByRole('button', { name: 'Close details' }).click();
      // Files chosen, with the bar of bulk actions.
      await page.getByRole('checkbox', { name: 'Select hooked.bin' }).check();
      await page.getByRole('region', { name: 'Selected files' }).waitFor();
      found['Selection'] = await axe(page);
      // Inside a folder: breadcrumbs, the folder's own rename, move and delete, a nested tree.
      await page.getByLabel('New folder').fill(`axe-${width}`);
      await page.getByRole('button', { name: 'Create folder' }).click();
      await page
        .locator('#folders')
        .getByRole('button', { name: `axe-${width}`, exact: true })
        .click();
      await page.getByRole('heading', { name: `Folder axe-${width}` }).waitFor();
      await page.getByLabel('New folder').fill('inner');
      await page.getByRole('button', { name: 'Create folder' }).click();
      await page.locator('#folders').getByRole('button', { name: 'inner', exact: true }).waitFor();
      found['Folder'] = await axe(page);
      assert.deepEqual(found, {
        Files: [],
        Sources: [],
        Presets: [],
        Workspace: [],
        'File details': [],
        Selection: [],
        Folder: [],
      });
      await close();
    });
  }
});
