// The dashboard's and the example page's Content-Security-Policy against HTML injection, in a
// real browser (Debian's Chromium driven by playwright-core). Uploaded files are served from
// the same origin (GET /{workspace_id}/{path}, public, `.js` as text/javascript), so a policy of
// `script-src 'self'` would let injected markup run an uploaded script with the private key in
// reach. The pages' own scripts are pinned by hash instead: these tests upload scripts with the
// public key, inject them into the pages every way markup can (parser-inserted tags, DOM-created
// elements, inline code, module scripts, an attacker-chosen integrity, a srcdoc frame) and
// check that none runs, that the browser reports the violation, and that the pages still work.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { pinScripts } from '../src/http/routes/dashboard.ts';
import { runCli, type ServerProcess, startServerAtPublicUrl } from './helpers/process.ts';
import { chromiumSkip, launchChromium } from './helpers/browser.ts';

const skipWithoutChromium = chromiumSkip();

const sri = (body: string | Buffer) => `sha384-${createHash('sha384').update(body).digest('base64')}`;

/** The attacker's code: records that it ran, in the top window (also from a frame). */
const evil = (name: string) =>
  `(top.__pwned = top.__pwned || []).push(${JSON.stringify(name)}); window.__pwned = top.__pwned;`;

/** A policy header as a map of directive name to its values. */
function directives(header: string): Map<string, string[]> {
  return new Map(
    header
      .split(';')
      .map((d) => d.trim().split(/\s+/))
      .filter((d) => d[0])
      .map(([name, ...values]) => [name.toLowerCase(), values]),
  );
}

const dir = mkdtempSync(join(tmpdir(), 'stowage-csp-'));
let server: ServerProcess;
let ws: { workspace_id: string; public_key: string; private_key: string };
/** Paths of the uploaded scripts, served by the public delivery route. */
let evilJs: string;
let evilMjs: string;

before(async () => {
  const dataDir = join(dir, 'data');
  ws = JSON.parse(
    (await runCli(['workspace', 'create', '--name', 'CSP', '--json'], { STOWAGE_DATA_DIR: dataDir })).stdout,
  );
  // Delivery and part URLs are made from the public URL: the port is known beforehand.
  server = await startServerAtPublicUrl({
    STOWAGE_DATA_DIR: dataDir,
    STOWAGE_SWEEP_INTERVAL_MS: '0',
  });

  // What an attacker holding only the public key can do: upload a script, get it served here.
  const upload = async (name: string): Promise<string> => {
    const form = new FormData();
    form.append('file', new Blob([evil(name)], { type: 'text/javascript' }), name);
    form.append('file_name', name);
    const res = await fetch(`${server.url}/api/v1/uploads`, {
      method: 'POST',
      headers: { 'x-api-key': ws.public_key },
      body: form,
    });
    assert.equal(res.status, 201, await res.clone().text());
    const path = `/${ws.workspace_id}/${name}`;
    assert.equal(new URL(((await res.json()) as { url: string }).url).pathname, path);
    const served = await fetch(server.url + path);
    assert.equal(served.status, 200);
    assert.match(
      served.headers.get('content-type') ?? '',
      /^(text|application)\/javascript\b/,
      `${name} is served as JavaScript, so the attack is real`,
    );
    assert.equal(await served.text(), evil(name));
    return path;
  };
  evilJs = await upload('evil.js');
  evilMjs = await upload('evil.mjs');
});
after(async () => {
  await server?.stop('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

describe('the pages pin their scripts by hash', () => {
  test('pinScripts fills in integrity, hashes inline scripts, and refuses a script it cannot pin', () => {
    const scripts = { '/a.js': 'console.log(1)', '/b.js': 'export const b = 2;' };
    const { html, hashes } = pinScripts(
      '/page',
      '<script type="importmap">{"integrity":{"/b.js":"{{sri /b.js}}"}}</script><script type="module" src="/a.js" integrity="{{sri /a.js}}"></script>',
      scripts,
    );
    const map = `{"integrity":{"/b.js":"${sri(scripts['/b.js'])}"}}`;
    assert.equal(
      html,
      `<script type="importmap">${map}</script><script type="module" src="/a.js" integrity="${sri(scripts['/a.js'])}"></script>`,
    );
    assert.deepEqual(new Set(hashes), new Set([sri(scripts['/a.js']), sri(scripts['/b.js']), sri(map)]));
    assert.throws(() => pinScripts('/page', '<script src="/a.js"></script>', scripts), /needs integrity/);
    assert.throws(
      () => pinScripts('/page', '<script src="/c.js" integrity="{{sri /c.js}}"></script>', scripts),
      /no script is served at \/c\.js/,
    );
  });

  for (const page of ['/dashboard/', '/examples/public-upload.html']) {
    test(`${page}: script-src lists exactly the hashes of its own scripts, which carry integrity`, async () => {
      const res = await fetch(server.url + page);
      assert.equal(res.status, 200);
      const html = await res.text();
      const policy = directives(res.headers.get('content-security-policy') ?? '');
      const scriptSrc = policy.get('script-src') ?? [];
      assert.ok(scriptSrc.length > 0, 'a script-src');
      for (const source of scriptSrc)
        assert.match(
          source,
          /^'sha384-[A-Za-z0-9+/]+={0,2}'$/,
          `only hash sources in script-src (not 'self', a host, 'unsafe-inline' or 'strict-dynamic'): ${source}`,
        );
      assert.deepEqual(policy.get('require-trusted-types-for'), ["'script'"]);
      assert.deepEqual(policy.get('trusted-types'), ["'none'"]);
      assert.equal(policy.has('script-src-elem'), false);
      assert.equal(policy.has('script-src-attr'), false);

      // Every hash listed is one of this page's scripts: the ones it loads (integrity must be
      // the hash of the bytes served), the modules they import (the import map's integrity) and
      // its inline import map.
      const expected = new Set<string>();
      const tags = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/gi)];
      assert.ok(tags.length > 0);
      for (const [, attrs, body] of tags) {
        const src = /\bsrc="([^"]+)"/.exec(attrs)?.[1];
        if (src) {
          const integrity = /\bintegrity="([^"]+)"/.exec(attrs)?.[1];
          const script = await fetch(new URL(src, server.url + page));
          assert.equal(script.status, 200);
          assert.equal(
            integrity,
            sri(Buffer.from(await script.arrayBuffer())),
            `${src}: integrity is the hash of what is served`,
          );
          expected.add(`'${integrity}'`);
        } else {
          expected.add(`'${sri(body)}'`);
          if (/\btype="importmap"/.test(attrs)) {
            for (const [url, integrity] of Object.entries(
              (JSON.parse(body) as { integrity?: Record<string, string> }).integrity ?? {},
            )) {
              const module = await fetch(new URL(url, server.url + page));
              assert.equal(
                integrity,
                sri(Buffer.from(await module.arrayBuffer())),
                `${url}: the import map's integrity is the hash of what is served`,
              );
              expected.add(`'${integrity}'`);
            }
          }
        }
      }
      assert.deepEqual(new Set(scriptSrc), expected);

      // The rest of the policy is as it was.
      const origin = new URL(server.url).origin;
      assert.deepEqual(policy.get('default-src'), ["'self'"]);
      assert.deepEqual(policy.get('style-src'), ["'self'"]);
      assert.deepEqual(policy.get('img-src'), ["'self'", 'data:', 'blob:', origin]);
      assert.deepEqual(policy.get('media-src'), ["'self'", origin]);
      assert.deepEqual(policy.get('connect-src'), ["'self'", origin]);
      assert.deepEqual(policy.get('frame-ancestors'), ["'none'"]);
      assert.deepEqual(policy.get('base-uri'), ["'none'"]);
      assert.deepEqual(policy.get('form-action'), ["'self'"]);
    });
  }

  test('the scripts and styles themselves are served with a policy that runs nothing', async () => {
    for (const path of [
      '/dashboard/app.js',
      '/dashboard/sdk.js',
      '/dashboard/styles.css',
      '/dashboard/uppy.css',
      '/examples/public-upload.js',
    ]) {
      const res = await fetch(server.url + path);
      assert.equal(res.status, 200, path);
      assert.deepEqual(
        directives(res.headers.get('content-security-policy') ?? '').get('script-src'),
        ["'none'"],
        path,
      );
    }
  });
});

describe('injected scripts do not run in Chromium', {
  skip: skipWithoutChromium,
}, () => {
  let browser: Browser;
  let appHash: string;

  before(async () => {
    browser = await launchChromium();
    appHash = sri(await (await fetch(`${server.url}/dashboard/app.js`)).text());
  });
  after(async () => {
    await browser?.close();
  });

  interface Watched {
    page: Page;
    context: BrowserContext;
    /** securitypolicyviolation events seen by the page: "directive blocked-uri". */
    violations(): Promise<string[]>;
    pwned(): Promise<unknown>;
    errors: string[];
    console: string[];
  }

  /** A fresh context whose pages record every policy violation from the very start. */
  async function watchedPage(): Promise<Watched> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    await context.addInitScript(() => {
      const seen: string[] = [];
      (window as any).__violations = seen;
      document.addEventListener(
        'securitypolicyviolation',
        (e) => seen.push(`${e.effectiveDirective} ${e.blockedURI}`),
        true,
      );
    });
    const page = await context.newPage();
    const errors: string[] = [];
    const console: string[] = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('console', (m) => console.push(`${m.type()}: ${m.text()}`));
    return {
      page,
      context,
      errors,
      console,
      violations: () => page.evaluate(() => [...((window as any).__violations as string[])]),
      pwned: () => page.evaluate(() => (window as any).__pwned),
    };
  }

  /** Serves `path` from the real server, with `edit` applied to its HTML and/or headers. */
  async function tamper(
    page: Page,
    path: string,
    edit: { html?: (html: string) => string; headers?: (h: Record<string, string>) => Record<string, string> },
  ): Promise<void> {
    await page.route(server.url + path, async (route) => {
      const response = await route.fetch();
      const body = await response.text();
      const headers = response.headers();
      await route.fulfill({
        response,
        body: edit.html ? edit.html(body) : body,
        headers: edit.headers ? edit.headers(headers) : headers,
      });
    });
  }

  /** Markup an HTML injection could put into the page's source (parser-inserted). */
  const injectedMarkup = () =>
    [
      `<script src="${evilJs}"></script>`,
      `<script type="module" src="${evilMjs}"></script>`,
      `<script>${evil('inline')}</script>`,
      `<script type="module">${evil('inline module')}</script>`,
      `<script src="${evilJs}?own-hash" integrity="${sri(evil('evil.js'))}"></script>`,
      `<script src="${evilJs}?dashboard-hash" integrity="${appHash}"></script>`,
      `<img src="data:," onerror="${evil('onerror').replaceAll('"', '&quot;')}" alt="">`,
      `<iframe srcdoc="<script src='${evilJs}?frame'></script>"></iframe>`,
    ].join('\n');

  /**
   * The same through DOM APIs, as script could (scripts made by createElement are not
   * parser-inserted, and CSP still applies to them). Each element reports whether it loaded
   * (ran), failed (refused), or could not even be built (a Trusted Types refusal).
   */
  async function injectThroughDom(page: Page): Promise<Record<string, string>> {
    // (No named functions inside: tsx would wrap them in a helper the page does not have.)
    return page.evaluate(
      async ({ evilJs, evilMjs, ownHash, appHash, inline }) => {
        const attempts: [string, (s: HTMLScriptElement) => void][] = [
          ['classic', (s) => (s.src = evilJs)],
          ['module', (s) => ((s.type = 'module'), (s.src = evilMjs))],
          ['own integrity', (s) => ((s.src = `${evilJs}?dom-own`), (s.integrity = ownHash))],
          ['dashboard integrity', (s) => ((s.src = `${evilJs}?dom-app`), (s.integrity = appHash))],
          ['inline', (s) => (s.textContent = inline)],
          ['inline module', (s) => ((s.type = 'module'), (s.textContent = inline))],
        ];
        const outcomes = await Promise.all(
          attempts.map(
            ([name, build]) =>
              new Promise<[string, string]>((resolve) => {
                const s = document.createElement('script');
                s.addEventListener('load', () => resolve([name, 'loaded']));
                s.addEventListener('error', () => resolve([name, 'refused']));
                try {
                  build(s);
                  document.body.append(s);
                } catch (err) {
                  resolve([name, `threw ${(err as Error).name}`]);
                  return;
                }
                // Inline scripts fire neither event: they ran or not by now (module ones a task later).
                if (!s.src) setTimeout(() => resolve([name, 'inline']), 500);
              }),
          ),
        );
        return Object.fromEntries(outcomes);
      },
      { evilJs, evilMjs, ownHash: sri(evil('evil.js')), appHash, inline: evil('dom inline') },
    );
  }

  async function signIn(page: Page): Promise<void> {
    await page.getByLabel('Private key').fill(ws.private_key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: /Files/ }).waitFor();
    assert.equal(
      await page.evaluate(() => sessionStorage.getItem('stowage.key')),
      ws.private_key,
      'the key an injected script would be after',
    );
  }

  /** Waits until the page has reported at least `n` violations. */
  async function violationsAtLeast(w: Watched, n: number): Promise<string[]> {
    await w.page
      .waitForFunction((n) => ((window as any).__violations as string[]).length >= n, n, { timeout: 10_000 })
      .catch(() => {});
    return w.violations();
  }

  test("control: an uploaded script does run on this origin under script-src 'self'", async () => {
    const w = await watchedPage();
    await w.page.route(`${server.url}/__control.html`, (route) =>
      route.fulfill({
        contentType: 'text/html',
        headers: { 'content-security-policy': "default-src 'self'; script-src 'self'" },
        body: `<!doctype html><title>control</title><script src="${evilJs}"></script><script type="module" src="${evilMjs}"></script>`,
      }),
    );
    await w.page.goto(`${server.url}/__control.html`);
    await w.page.waitForFunction(() => ((window as any).__pwned ?? []).length === 2);
    assert.deepEqual(((await w.pwned()) as string[]).sort(), ['evil.js', 'evil.mjs']);
    await w.context.close();
  });

  test('dashboard: scripts injected into its HTML do not run, the violations are reported, the dashboard works', async () => {
    const w = await watchedPage();
    await tamper(w.page, '/dashboard/', { html: (html) => html.replace('<body>', `<body>\n${injectedMarkup()}`) });
    await w.page.goto(`${server.url}/dashboard/`);
    await signIn(w.page);
    const violations = await violationsAtLeast(w, 6);
    assert.equal(await w.pwned(), undefined, `no injected script ran; console:\n${w.console.join('\n')}`);
    for (const blocked of [evilJs, evilMjs])
      assert.ok(
        violations.some((v) => /^script-src(-elem)? /.test(v) && v.includes(blocked)),
        `${blocked} refused by script-src: ${violations.join(', ')}`,
      );
    assert.ok(
      violations.filter((v) => /^script-src(-elem)? inline$/.test(v)).length >= 2,
      `inline scripts refused: ${violations.join(', ')}`,
    );
    assert.ok(
      violations.some((v) => /^script-src(-attr)? inline$/.test(v)),
      `the event handler refused: ${violations.join(', ')}`,
    );
    assert.ok(
      w.console.some((m) => /integrity/i.test(m)),
      'the copy of the dashboard hash is refused by the integrity check',
    );
    assert.deepEqual(w.errors, [], 'the dashboard itself has no errors');
    await w.context.close();
  });

  test('dashboard: scripts injected through the DOM do not run, whether Trusted Types or script-src stops them', async () => {
    // With the policy as served, and with its Trusted Types directives stripped, to show that
    // script-src alone refuses them too.
    for (const withTrustedTypes of [true, false]) {
      const w = await watchedPage();
      if (!withTrustedTypes) {
        await tamper(w.page, '/dashboard/', {
          headers: (h) => ({
            ...h,
            'content-security-policy': h['content-security-policy'].replace(
              /;\s*(require-trusted-types-for|trusted-types)[^;]*/g,
              '',
            ),
          }),
        });
      }
      await w.page.goto(`${server.url}/dashboard/`);
      await signIn(w.page);
      assert.deepEqual(await w.violations(), [], 'the dashboard itself violates nothing');
      const outcomes = await injectThroughDom(w.page);
      const violations = await violationsAtLeast(w, 5);
      assert.equal(
        await w.pwned(),
        undefined,
        `no injected script ran (${withTrustedTypes ? 'served policy' : 'without Trusted Types'}): ${JSON.stringify(outcomes)}`,
      );
      for (const [name, result] of Object.entries(outcomes)) assert.notEqual(result, 'loaded', `${name} did not load`);
      if (withTrustedTypes) {
        assert.ok(
          violations.some((v) => v.startsWith('require-trusted-types-for ')),
          `Trusted Types reported: ${violations.join(', ')}`,
        );
      } else {
        assert.deepEqual(Object.fromEntries(Object.entries(outcomes).filter(([name]) => !name.startsWith('inline'))), {
          classic: 'refused',
          module: 'refused',
          'own integrity': 'refused',
          'dashboard integrity': 'refused',
        });
        for (const blocked of [evilJs, evilMjs])
          assert.ok(
            violations.some((v) => /^script-src(-elem)? /.test(v) && v.includes(blocked)),
            `${blocked} refused by script-src: ${violations.join(', ')}`,
          );
        assert.ok(
          violations.filter((v) => /^script-src(-elem)? inline$/.test(v)).length >= 2,
          `inline scripts refused: ${violations.join(', ')}`,
        );
      }
      // Still working after all that.
      await w.page.getByRole('button', { name: 'Sources' }).click();
      await w.page.getByRole('heading', { name: 'Sources' }).waitFor();
      assert.deepEqual(w.errors, []);
      await w.context.close();
    }
  });

  test('example page: injected scripts do not run, and it still uploads with the public key', async () => {
    const w = await watchedPage();
    await tamper(w.page, '/examples/public-upload.html', {
      html: (html) => html.replace('<body>', `<body>\n${injectedMarkup()}`),
    });
    await w.page.goto(`${server.url}/examples/public-upload.html`);
    const violations = await violationsAtLeast(w, 6);
    const outcomes = await injectThroughDom(w.page);
    await violationsAtLeast(w, violations.length + 1);
    assert.equal(
      await w.pwned(),
      undefined,
      `no injected script ran: ${JSON.stringify(outcomes)}; console:\n${w.console.join('\n')}`,
    );
    for (const blocked of [evilJs, evilMjs])
      assert.ok(
        violations.some((v) => /^script-src(-elem)? /.test(v) && v.includes(blocked)),
        `${blocked} refused by script-src: ${violations.join(', ')}`,
      );
    for (const [name, result] of Object.entries(outcomes)) assert.notEqual(result, 'loaded', `${name} did not load`);

    const small = join(dir, 'hello.txt');
    writeFileSync(small, 'hello from the example page');
    await w.page.getByLabel('Public key').fill(ws.public_key);
    await w.page.getByLabel('File').setInputFiles(small);
    await w.page.getByRole('button', { name: 'Upload' }).click();
    await w.page.getByText(/^Uploaded: http/).waitFor();
    const url = (await w.page.getByRole('status').textContent())!.replace('Uploaded: ', '');
    assert.equal(await (await fetch(url)).text(), 'hello from the example page');
    assert.equal(await w.pwned(), undefined);
    assert.deepEqual(w.errors, []);
    await w.context.close();
  });
});
