// @stowage/sdk as its users install it: `npm pack` of sdk/ (its prepack builds dist/) in a
// temporary copy, the tarball unpacked into a scratch project with nothing else (the SDK has no
// runtime dependencies, which this asserts), and then used against a real Stowage server:
// - from Node, by a plain .mjs file run with `node` (no tsx, no TypeScript): a file from disk,
//   uploaded directly and by multipart with progress, stored byte-exact; refusals are StowageError;
// - from TypeScript: a consumer compiled with moduleResolution NodeNext against the shipped .d.ts;
// - from Chromium: a page on another loopback origin imports `@stowage/sdk/browser` (through an
//   import map, to the file the package's exports name) and spends an upload token cross-origin.
// The minified browser build is held to the gzipped size budget in sdk/package.json.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { after, before, describe, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { chromiumSkip, launchChromium } from './helpers/browser.ts';
import { installTarball, linkInstalled, packFromCopy, productionPackages } from './helpers/pack.ts';
import { ROOT, readFirstWorkspace, type ServerProcess, startServer } from './helpers/process.ts';
import { closedPort, localServer } from './helpers/servers.ts';

type Json = Record<string, any>;
const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const skipWithoutChromium = chromiumSkip();
const TSC = join(dirname(createRequire(import.meta.url).resolve('typescript/package.json')), 'bin', 'tsc');

const work = mkdtempSync(join(tmpdir(), 'stowage-sdk-pack-'));
after(() => rmSync(work, { recursive: true, force: true }));

describe('@stowage/sdk, packed and installed into a scratch project', () => {
  const app = join(work, 'app');
  let listing: string;
  let pkgDir: string;
  let server: ServerProcess;
  let ws: { workspace_id: string; public_key: string; private_key: string };

  /** The stored bytes, fetched back from the record's delivery URL. */
  const stored = async (record: Json): Promise<Buffer> => {
    const res = await fetch(new URL(new URL(record.url).pathname, server.url));
    assert.equal(res.status, 200, record.url);
    return Buffer.from(await res.arrayBuffer());
  };
  /** Runs a module of the scratch project with plain node; its stdout is JSON. */
  const runNode = (file: string, env: Record<string, string> = {}): Json =>
    JSON.parse(
      execFileSync(process.execPath, [file], {
        cwd: app,
        encoding: 'utf8',
        env: { PATH: process.env.PATH, ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );

  before(async () => {
    const packed = packFromCopy(work, { dir: 'sdk', only: ['sdk'] });
    listing = packed.listing;
    mkdirSync(app, { recursive: true });
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'scratch', private: true, type: 'module' }));
    pkgDir = installTarball(packed.tarball, app, '@stowage/sdk');

    const dir = join(work, 'server');
    const port = await closedPort();
    // STOWAGE_PUBLIC_URL names the real port: multipart part URLs and upload_url are built on it.
    server = await startServer({
      STOWAGE_DATA_DIR: join(dir, 'data'),
      PORT: String(port),
      STOWAGE_PUBLIC_URL: `http://127.0.0.1:${port}`,
      STOWAGE_SWEEP_INTERVAL_MS: '0',
      STOWAGE_WEBHOOK_POLL_MS: '0',
    });
    const first = readFirstWorkspace(join(dir, 'data'));
    assert.ok(first, 'the first start wrote the first workspace');
    ws = first;
  });
  after(async () => {
    await server?.stop('SIGKILL');
  });

  test('the tarball holds the builds, the declarations and the README, no sources, and no dependencies', () => {
    const files = listing.trim().split('\n').sort();
    for (const f of [
      'dist/index.js',
      'dist/index.d.ts',
      'dist/node.js',
      'dist/node.d.ts',
      'dist/stowage.min.js',
      'dist/client.d.ts',
      'dist/types.gen.d.ts',
      'dist/uppy.js',
      'dist/uppy.d.ts',
      'dist/uploader.js',
      'dist/uploader.d.ts',
      'dist/uploader.min.js',
      'dist/uploader.css',
      'dist/react.js',
      'dist/react.d.ts',
      'README.md',
      'package.json',
    ])
      assert.ok(files.includes(`package/${f}`), `${f} is in the package`);
    assert.deepEqual(
      files.filter(
        (f) => !/^package\/(dist\/[\w.-]+\.(js|d\.ts)|dist\/uploader\.css|README\.md|package\.json)$/.test(f),
      ),
      [],
      'nothing else is in the package (no src/, scripts/ or tsconfig)',
    );
    const pkg = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8'));
    assert.equal(pkg.dependencies, undefined, 'the SDK has no runtime dependencies');
    // Uppy and react are for the uploader subpaths only: optional peers, so a Node install pulls neither.
    assert.deepEqual(
      Object.keys(pkg.peerDependencies).filter((name) => !/^(@uppy\/|react$)/.test(name)),
      [],
      'peers are Uppy packages and react',
    );
    for (const name of Object.keys(pkg.peerDependencies))
      assert.equal(pkg.peerDependenciesMeta?.[name]?.optional, true, `${name} is an optional peer`);
    assert.equal(pkg.sideEffects, false);
    // The main entry and its browser build are free of Uppy; the uploader subpaths import it.
    for (const f of ['index.js', 'stowage.min.js', 'uppy.js'])
      assert.doesNotMatch(readFileSync(join(pkgDir, 'dist', f), 'utf8'), /@uppy\/|from\s*["']react/, f);
    assert.match(readFileSync(join(pkgDir, 'dist', 'uploader.js'), 'utf8'), /from\s*["']@uppy\/dashboard["']/);
    // The declarations name the built files, not the TypeScript sources.
    for (const f of files.filter((f) => f.endsWith('.d.ts')))
      assert.doesNotMatch(readFileSync(join(pkgDir, f.slice('package/'.length)), 'utf8'), /from '\.[^']*\.ts'/, f);
  });

  test('the minified browser build is within its gzipped size budget, and the README states both', () => {
    const pkg = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8'));
    const budget: number = pkg.sizeBudget['dist/stowage.min.js'];
    assert.ok(Number.isInteger(budget) && budget > 0);
    const size = gzipSync(readFileSync(join(pkgDir, 'dist', 'stowage.min.js')), { level: 9 }).length;
    assert.ok(size <= budget, `dist/stowage.min.js is ${size} bytes gzipped, over its budget of ${budget}`);
    const readme = readFileSync(join(pkgDir, 'README.md'), 'utf8');
    const grouped = (n: number) => n.toLocaleString('en-US');
    assert.ok(readme.includes(grouped(budget)), `the README gives the budget, ${grouped(budget)} bytes`);
    // The figure in the README is the measured one, within 5 % (small changes need no README edit).
    const stated = /measured[^\d]*([\d,]+) bytes/i.exec(readme);
    assert.ok(stated, 'the README gives the measured size ("measured … N bytes")');
    const figure = Number(stated[1].replace(/,/g, ''));
    assert.ok(Math.abs(figure - size) <= size * 0.05, `the README says ${figure} bytes, the build is ${size}`);
  });

  test('in Node, a plain .mjs (no TypeScript) uploads a file from disk directly and by multipart', async () => {
    const bytes = randomBytes(3 * 1024 * 1024 + 17);
    const file = join(work, 'photo.bin');
    writeFileSync(file, bytes);
    const script = join(app, 'upload.mjs');
    writeFileSync(
      script,
      `import { Stowage, StowageError } from '@stowage/sdk';
import { fileFromPath } from '@stowage/sdk/node';

const client = new Stowage({ baseUrl: process.env.STOWAGE_URL, apiKey: process.env.STOWAGE_KEY });
const { blob, name } = await fileFromPath(process.env.FILE, 'application/octet-stream');
const direct = await client.upload(blob, name, { folder: 'from-node', tags: ['packed'] });
const progress = [];
const multipart = await client.uploadFile(blob, 'multi-' + name, {
  multipartThreshold: 1,
  onProgress: (p) => progress.push(p),
});
let refused;
try {
  await new Stowage({ baseUrl: process.env.STOWAGE_URL, apiKey: 'stw_sk_wrong', retries: 0 }).upload(blob, name);
} catch (err) {
  refused = { isStowageError: err instanceof StowageError, status: err.status, errorCode: err.errorCode };
}
console.log(JSON.stringify({ direct, multipart, progress, refused }));
`,
    );
    const out = runNode(script, { STOWAGE_URL: server.url, STOWAGE_KEY: ws.private_key, FILE: file });
    assert.equal(out.direct.name, 'photo.bin');
    assert.equal(out.direct.size, bytes.length);
    assert.equal(out.direct.hash, sha256(bytes));
    assert.deepEqual(out.direct.tags, ['packed']);
    assert.ok(sha256(await stored(out.direct)) === sha256(bytes), 'the direct upload is stored byte-exact');
    assert.equal(out.multipart.name, 'multi-photo.bin');
    assert.equal(out.multipart.hash, sha256(bytes));
    assert.ok(sha256(await stored(out.multipart)) === sha256(bytes), 'the multipart upload is stored byte-exact');
    assert.deepEqual(out.progress.at(-1), { loaded: bytes.length, total: bytes.length });
    assert.ok(out.progress.length >= 2, 'progress before the first part and after the last');
    assert.equal(out.refused?.isStowageError, true);
    assert.equal(out.refused.status, 401);
  });

  test('types resolve for a TypeScript consumer (moduleResolution NodeNext) and catch mistakes', () => {
    const dir = join(app, 'ts');
    mkdirSync(dir, { recursive: true });
    // Two consumers: a browser or isomorphic project (the DOM library, no Node types), and a Node
    // project (Node's types, no DOM library), with @types/node hard-linked as npm would install it.
    linkInstalled(app, ['@types/node', ...productionPackages(join(ROOT, 'node_modules', '@types', 'node'))]);
    const configs = { dom: { types: [], lib: ['ES2022', 'DOM'] }, node: { types: ['node'], lib: ['ES2022'] } };
    for (const [name, env] of Object.entries(configs))
      writeFileSync(
        join(dir, `tsconfig.${name}.json`),
        JSON.stringify({
          compilerOptions: {
            target: 'ES2022',
            module: 'NodeNext',
            moduleResolution: 'NodeNext',
            strict: true,
            noEmit: true,
            // The shipped declarations are checked too, not only used.
            skipLibCheck: false,
            ...env,
          },
          files: ['consumer.ts'],
        }),
      );
    writeFileSync(
      join(dir, 'consumer.ts'),
      `import { Stowage, StowageError, signDeliveryUrl, uploadWithToken, type FileRecord, type Progress } from '@stowage/sdk';
import * as browser from '@stowage/sdk/browser';
import { fileFromPath } from '@stowage/sdk/node';

const client = new Stowage({ baseUrl: 'https://media.example.com', apiKey: 'stw_pk_x' });

export async function send(path: string): Promise<string> {
  const { blob, name } = await fileFromPath(path);
  const record: FileRecord = await client.uploadFile(blob, name, {
    parallel: 2,
    onProgress: (p: Progress) => console.log(p.loaded / p.total),
  });
  const viaToken: FileRecord = await uploadWithToken('https://media.example.com/api/v1/uploads/t', blob);
  const viaBrowserBuild: FileRecord = await browser.uploadWithToken(viaToken.url, blob);
  return signDeliveryUrl(record.url + viaBrowserBuild.name, 'stw_dk_x', { expiresIn: 60 });
}

export function code(err: unknown): string | undefined {
  return err instanceof StowageError ? err.errorCode : undefined;
}

// @ts-expect-error: a misspelt option is refused, so the types are real and not \`any\`
new Stowage({ baseUrl: 'https://media.example.com', apiKey: 'k', retires: 2 });
// @ts-expect-error: the record's size is a number
export const size: string = ({} as FileRecord).size;
`,
    );
    for (const name of Object.keys(configs)) {
      try {
        execFileSync(process.execPath, [TSC, '-p', join(dir, `tsconfig.${name}.json`)], { cwd: dir, stdio: 'pipe' });
      } catch (err) {
        const e = err as { stdout?: Buffer; stderr?: Buffer };
        assert.fail(`tsc (${name} project) found errors:\n${e.stdout}${e.stderr}`);
      }
    }
  });

  describe('in Chromium', { skip: skipWithoutChromium }, () => {
    let browser: Browser;
    let site: Awaited<ReturnType<typeof localServer>>;

    before(async () => {
      // Where the package's exports send `@stowage/sdk/browser`, as Node resolves it in the project.
      const resolved = execFileSync(
        process.execPath,
        ['--input-type=module', '-e', "console.log(import.meta.resolve('@stowage/sdk/browser'))"],
        { cwd: app, encoding: 'utf8' },
      ).trim();
      const buildFile = fileURLToPath(resolved);
      assert.equal(buildFile, join(pkgDir, 'dist', 'stowage.min.js'));
      // The page's own code is in the page: functions passed to page.evaluate would carry
      // helpers tsx adds (__name) that the page does not have.
      const page = `<!doctype html><meta charset="utf-8"><title>SDK page</title>
<script type="importmap">{"imports": {"@stowage/sdk/browser": "/modules/stowage.min.js"}}</script>
<script type="module">
import { uploadWithToken, StowageError } from '@stowage/sdk/browser';
window.tokenUpload = async (uploadUrl, size) => {
  const bytes = new Uint8Array(size);
  for (let i = 0; i < size; i += 65536) crypto.getRandomValues(bytes.subarray(i, Math.min(i + 65536, size)));
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
  const hash = Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('');
  const progress = [];
  const record = await uploadWithToken(uploadUrl, new Blob([bytes]), { onProgress: (p) => progress.push(p) });
  let again;
  try {
    await uploadWithToken(uploadUrl, new Blob([bytes]));
  } catch (err) {
    again = { isStowageError: err instanceof StowageError, status: err.status, errorCode: err.errorCode };
  }
  return { hash, record, progress, again, origin: location.origin };
};
</script>`;
      site = await localServer((req, res) => {
        if (req.url === '/') res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(page);
        else if (req.url === '/modules/stowage.min.js')
          res.writeHead(200, { 'content-type': 'text/javascript' }).end(readFileSync(buildFile));
        else res.writeHead(404).end();
      });
      browser = await launchChromium();
    });
    after(async () => {
      await browser?.close();
      await site?.close();
    });

    test('a page on another origin loads @stowage/sdk/browser and uploads through an upload token', async () => {
      assert.notEqual(new URL(site.url).origin, new URL(server.url).origin);
      const minted = await fetch(`${server.url}/api/v1/generate-token`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ws.private_key}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          file_name: 'from-the-page.bin',
          folder: 'from-chromium',
          max_file_size: 2 * 1024 * 1024,
        }),
      });
      assert.equal(minted.status, 201, await minted.clone().text());
      const token = (await minted.json()) as Json;
      const tokenInfo = token.data ?? token;
      assert.ok(tokenInfo.upload_url);

      const page = await (await browser.newContext()).newPage();
      const errors: string[] = [];
      page.on('pageerror', (e) => errors.push(String(e)));
      await page.goto(`${site.url}/`);
      await page.waitForFunction(() => (window as any).tokenUpload !== undefined, undefined, { timeout: 10_000 });
      const size = 1024 * 1024 + 5;
      const result: Json = await page.evaluate(([u, n]) => (window as any).tokenUpload(u, n), [
        tokenInfo.upload_url as string,
        size,
      ] as const);
      assert.deepEqual(errors, [], 'no script errors on the page');
      assert.equal(result.origin, site.url);
      assert.equal(result.record.name, 'from-the-page.bin');
      assert.equal(result.record.size, size);
      assert.equal(result.record.hash, result.hash);
      assert.equal(sha256(await stored(result.record)), result.hash, 'the file arrived byte-exact');
      assert.deepEqual(result.progress.at(-1), { loaded: size, total: size });
      assert.deepEqual(result.again, { isStowageError: true, status: 401, errorCode: 'TOKEN_USED' });
    });
  });
});
