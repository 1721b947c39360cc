// Browser uploads from ANOTHER origin, in a real browser (Debian's Chromium driven by
// playwright-core): Stowage runs as a real process, and the page is served by a second loopback
// server on another port, so every request the page makes is cross-origin and goes through
// Chromium's CORS checks. Each flow is asserted from what the page sees (page.evaluate returns
// statuses, readable headers, bodies, the SHA-256 of the bytes it sent) and checked on the
// server side (Node fetches the stored file back from Stowage and compares hashes).
//
// - direct upload with the public key (multipart/form-data, x-api-key);
// - multipart with the public key: 20 MiB made in the page, parts PUT in parallel, each part's
//   ETag read by the page (Access-Control-Expose-Headers), then complete with the ETags;
// - an upload token minted by Node with the private key, spent by the page with no key (a
//   non-ASCII name in X-File-Name), and refused when used again (401 TOKEN_USED, readable);
// - the SDK's browser build imported by the page from Stowage as an ES module;
// - allowed_origins: a readable 403 ORIGIN_NOT_ALLOWED for the public key, a refused preflight
//   for a token (fetch rejects), then the exact origin and a wildcard let the page in again;
// - examples/cross-origin-upload.html, served from the other origin with its two constants
//   filled in: direct, multipart (ETags shown per part) and token uploads through its form.
//
// All of it runs twice: on local disk, and on S3 storage (OpenStack Swift's S3 layer started by
// scripts/start-swift.sh) when STOWAGE_TEST_S3_ENDPOINT is set. On S3, direct and token
// uploads go through Stowage like on local disk; multipart parts go from the page straight to
// presigned Swift URLs, a THIRD origin, so they work only when the storage answers CORS itself
// (Swift's cors_preflight_allow_origin and cors_allow_origin, which start-swift.sh sets; Swift's
// S3 API has no PutBucketCors). The multipart tests ask Swift's preflight from Node first and
// assert what the browser then does either way; under CI=true Swift's CORS must be on.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, before, describe, test, type TestContext } from 'node:test';
import {
  AbortMultipartUploadCommand,
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  S3Client,
} from '@aws-sdk/client-s3';
import type { Browser, Page } from 'playwright-core';
import { chromiumSkip, launchChromium } from './helpers/browser.ts';
import { ROOT, runCli, type ServerProcess, startServer } from './helpers/process.ts';
import { closedPort, localServer } from './helpers/servers.ts';
import { externalService, IN_CI } from './helpers/services.ts';

const skipWithoutChromium = chromiumSkip();
const s3 = externalService('STOWAGE_TEST_S3_ENDPOINT', 'an S3-compatible server (scripts/start-swift.sh)');

const MiB = 1024 * 1024;
/** Above the 16 MiB the example sends directly, and over two 8 MiB parts: three parts. */
const BIG = 20 * MiB;
const EXAMPLE = join(ROOT, 'examples', 'cross-origin-upload.html');

type Json = Record<string, any>;
const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
/** docs/api/uploads.md#answer-shapes: upload answers are flat or {success, data}: the record either way. */
const recordOf = (body: Json): Json => body.data ?? body;

// ---------------------------------------------------------------------------------------------
// Stowage processes

interface Target {
  name: 'local' | 's3';
  url: string;
  ws: { workspace_id: string; public_key: string; private_key: string };
  /** The origin multipart part URLs point at. */
  partOrigin: string;
  server: ServerProcess;
  close(): Promise<void>;
}

async function startStowage(name: Target['name'], storageEnv: Record<string, string>): Promise<Target> {
  const dir = mkdtempSync(join(tmpdir(), `stowage-browser-${name}-`));
  const env = { STOWAGE_DATA_DIR: join(dir, 'data'), ...storageEnv };
  const created = await runCli(['workspace', 'create', '--name', `Browser uploads (${name})`, '--json'], env);
  assert.equal(created.code, 0, created.stderr);
  const ws = JSON.parse(created.stdout);
  // STOWAGE_PUBLIC_URL must name the real port: it is the base of part URLs and upload_url.
  const port = await closedPort();
  const url = `http://127.0.0.1:${port}`;
  const server = await startServer({
    ...env,
    PORT: String(port),
    STOWAGE_PUBLIC_URL: url,
    STOWAGE_SWEEP_INTERVAL_MS: '0',
    STOWAGE_WEBHOOK_POLL_MS: '0',
  });
  return {
    name,
    url,
    ws,
    partOrigin: storageEnv.S3_ENDPOINT ? new URL(storageEnv.S3_ENDPOINT).origin : url,
    server,
    async close() {
      await server.stop('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A fresh bucket on the test S3 server, and how to empty and drop it afterwards. */
async function freshBucket(): Promise<{ env: Record<string, string>; drop(): Promise<void> }> {
  const endpoint = s3.value!;
  const region = process.env.STOWAGE_TEST_S3_REGION ?? 'us-east-1';
  const credentials = {
    accessKeyId: process.env.STOWAGE_TEST_S3_ACCESS_KEY_ID ?? 'test:tester',
    secretAccessKey: process.env.STOWAGE_TEST_S3_SECRET_ACCESS_KEY ?? 'testing',
  };
  const Bucket = `browser-${randomBytes(5).toString('hex')}`;
  const client = new S3Client({ endpoint, region, forcePathStyle: true, credentials });
  await client.send(new CreateBucketCommand({ Bucket }));
  return {
    env: {
      STOWAGE_STORAGE: 's3',
      S3_ENDPOINT: endpoint,
      S3_REGION: region,
      S3_BUCKET: Bucket,
      S3_ACCESS_KEY_ID: credentials.accessKeyId,
      S3_SECRET_ACCESS_KEY: credentials.secretAccessKey,
    },
    async drop() {
      try {
        const uploads = await client.send(new ListMultipartUploadsCommand({ Bucket }));
        for (const u of uploads.Uploads ?? [])
          await client.send(new AbortMultipartUploadCommand({ Bucket, Key: u.Key, UploadId: u.UploadId }));
        for (;;) {
          const page = await client.send(new ListObjectsV2Command({ Bucket }));
          for (const o of page.Contents ?? []) await client.send(new DeleteObjectCommand({ Bucket, Key: o.Key }));
          if (!page.IsTruncated) break;
        }
        await client.send(new DeleteBucketCommand({ Bucket }));
      } catch {
        // best effort: a leftover test bucket harms nothing
      }
      client.destroy();
    },
  };
}

/** A call to Stowage's API from Node (not a browser: no Origin unless given). */
async function api(
  t: Target,
  method: string,
  path: string,
  body?: unknown,
  key = t.ws.private_key,
): Promise<{ status: number; body: Json }> {
  const res = await fetch(`${t.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Json };
}

async function mintToken(t: Target, input: Json = { file_name: 'from-token.txt', folder: 'tokens' }): Promise<Json> {
  const r = await api(t, 'POST', '/api/v1/generate-token', input);
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return r.body;
}

async function setAllowedOrigins(t: Target, origins: string[]): Promise<void> {
  const r = await api(t, 'PATCH', '/api/v1/workspace', { allowed_origins: origins });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.deepEqual(r.body.data.allowed_origins, origins);
}

/** The stored bytes, fetched back from Stowage's delivery URL by Node. */
async function storedHash(url: string): Promise<string> {
  const res = await fetch(url);
  assert.equal(res.status, 200, `GET ${url}`);
  return sha256(new Uint8Array(await res.arrayBuffer()));
}

/** The file's record as the private key reads it, and its bytes, both matching what the page sent. */
async function assertStored(t: Target, record: Json, pageSha256: string): Promise<void> {
  assert.equal(record.hash, pageSha256, 'the record names the SHA-256 of the bytes the page sent');
  assert.equal(await storedHash(record.url), pageSha256, 'the bytes Stowage delivers are the bytes the page sent');
  const read = await api(t, 'GET', `/api/v1/files/${record.file_no}`);
  assert.equal(read.status, 200, JSON.stringify(read.body));
  const readRecord = recordOf(read.body);
  assert.equal(readRecord.hash, pageSha256);
  assert.equal(readRecord.name, record.name);
}

/** A preflight as Chromium sends it before a part PUT, sent from Node. */
async function preflight(
  url: string,
  origin: string,
  method: string,
  headers: string,
): Promise<{ status: number; allowOrigin: string | null; allowHeaders: string | null }> {
  const res = await fetch(url, {
    method: 'OPTIONS',
    headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': headers },
  });
  await res.arrayBuffer();
  return {
    status: res.status,
    allowOrigin: res.headers.get('access-control-allow-origin'),
    allowHeaders: res.headers.get('access-control-allow-headers'),
  };
}

/**
 * Whether the storage answers part-URL preflights from `origin`. Stowage itself always does; for
 * S3 it is the bucket's (here Swift's) own CORS setting. Logged either way; required under CI.
 */
async function storageAllowsParts(t: TestContext, target: Target, partUrl: string, origin: string): Promise<boolean> {
  if (target.name === 'local') return true;
  const p = await preflight(partUrl, origin, 'PUT', 'content-type');
  const ok = p.status === 200 && (p.allowOrigin === '*' || p.allowOrigin === origin);
  t.diagnostic(
    `S3 part URL preflight from ${origin}: ${p.status}, Access-Control-Allow-Origin: ${p.allowOrigin ?? '(none)'}`,
  );
  if (!ok) {
    t.diagnostic(
      'the storage does not answer CORS for presigned part URLs: a page cannot PUT multipart parts (start Swift with scripts/start-swift.sh, which sets cors_preflight_allow_origin and cors_allow_origin)',
    );
    if (IN_CI)
      assert.fail(
        `under CI, Swift must answer part-URL preflights (scripts/start-swift.sh): got ${p.status}, ACAO ${p.allowOrigin}`,
      );
  }
  return ok;
}

// ---------------------------------------------------------------------------------------------
// The other origin: a test page with plain-JS helpers, and the example page

/** Runs in Chromium on the page's origin: plain fetch, no library. Plain JS, not compiled. */
const PAGE_SCRIPT = String.raw`
const hex = (buf) => Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, '0')).join('');
const bytesOf = (size) => {
  const a = new Uint8Array(size);
  for (let i = 0; i < size; i += 65536) crypto.getRandomValues(a.subarray(i, Math.min(i + 65536, size)));
  return a;
};
const digest = async (bytes) => hex(await crypto.subtle.digest('SHA-256', bytes));
// What a page can see of an answer: status, the exposed ETag, the body.
const answer = async (res) => {
  const text = await res.text();
  let body;
  try { body = JSON.parse(text); } catch { body = text; }
  return { status: res.status, etag: res.headers.get('etag'), body };
};
// A request the browser refuses to make (CORS) rejects with a TypeError and nothing else.
const caught = async (promise) => {
  try { return await promise; } catch (e) { return { threw: e.name, message: e.message }; }
};
window.t = {
  async direct({ stowage, key, name, size }) {
    const bytes = bytesOf(size);
    const form = new FormData();
    form.append('file_name', name);
    form.append('folder', 'browser');
    form.append('file', new Blob([bytes]), name);
    const out = await caught(fetch(stowage + '/api/v1/uploads', { method: 'POST', headers: { 'x-api-key': key }, body: form }).then(answer));
    return { ...out, sha256: await digest(bytes) };
  },
  async multipart({ stowage, key, name, size }) {
    const bytes = bytesOf(size);
    const sha256 = await digest(bytes);
    const headers = { 'x-api-key': key, 'content-type': 'application/json' };
    const start = await caught(fetch(stowage + '/api/v1/multipart/start', {
      method: 'POST', headers, body: JSON.stringify({ file_name: name, size, format: 'application/octet-stream', folder: 'browser' }),
    }).then(answer));
    if (start.status !== 201) return { start, sha256 };
    const s = start.body;
    // Every part at once; when each was sent and answered, to show they overlapped.
    const parts = await Promise.all(s.parts.map(async (url, i) => {
      const body = bytes.subarray(i * s.part_size, Math.min((i + 1) * s.part_size, size));
      const sentAt = performance.now();
      const out = await caught(fetch(url, { method: 'PUT', headers: { 'content-type': 'application/octet-stream' }, body }).then(answer));
      return { ...out, body: undefined, url, size: body.length, sentAt, doneAt: performance.now() };
    }));
    if (!parts.every((p) => p.status === 200 && p.etag)) return { start, parts, sha256 };
    const complete = await caught(fetch(stowage + '/api/v1/multipart/complete', {
      method: 'POST', headers, body: JSON.stringify({ session_id: s.session_id, parts: parts.map((p, i) => ({ part_number: i + 1, etag: p.etag })) }),
    }).then(answer));
    return { start, parts, complete, sha256 };
  },
  // name: sent in X-File-Name, which makes the request need a preflight; without it (and with
  // text/plain) the POST is a "simple" request that the browser sends without asking first.
  async token({ url, text, name }) {
    const bytes = new TextEncoder().encode(text);
    const headers = { 'content-type': 'text/plain' };
    if (name !== undefined) headers['x-file-name'] = encodeURIComponent(name);
    return caught(fetch(url, { method: 'POST', headers, body: bytes }).then(answer));
  },
  async sdk({ stowage, key, name, size }) {
    // The SDK's browser build, imported cross-origin from Stowage as an ES module.
    const { Stowage } = await import(stowage + '/dashboard/sdk.js');
    const bytes = bytesOf(size);
    const record = await new Stowage({ baseUrl: stowage, apiKey: key }).uploadFile(new Blob([bytes]), name, { folder: 'browser-sdk' });
    return { record, sha256: await digest(bytes) };
  },
};
`;

const TEST_PAGE = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Another origin</title></head><body><p>A page on another origin.</p><script>${PAGE_SCRIPT}</script></body></html>`;

const STOWAGE_CONST = /const STOWAGE = '[^']*';/;
const PUBLIC_KEY_CONST = /const PUBLIC_KEY = '[^']*';/;

/** examples/cross-origin-upload.html with its two constants set for a target, as a user would. */
function examplePage(target: Target): string {
  return readFileSync(EXAMPLE, 'utf8')
    .replace(STOWAGE_CONST, `const STOWAGE = '${target.url}';`)
    .replace(PUBLIC_KEY_CONST, `const PUBLIC_KEY = '${target.ws.public_key}';`);
}

// ---------------------------------------------------------------------------------------------

describe('browser uploads from another origin (Chromium)', {
  skip: skipWithoutChromium,
}, () => {
  const targets: Partial<Record<Target['name'], Target>> = {};
  let bucket: Awaited<ReturnType<typeof freshBucket>> | undefined;
  let browser: Browser;
  let site: Awaited<ReturnType<typeof localServer>>;
  /** The page's origin: same host as Stowage, another port. */
  let pageOrigin: string;

  before(async () => {
    const example = readFileSync(EXAMPLE, 'utf8');
    assert.ok(
      STOWAGE_CONST.test(example) && PUBLIC_KEY_CONST.test(example),
      'the example page starts with its two constants, STOWAGE and PUBLIC_KEY',
    );
    site = await localServer((req, res) => {
      const path = new URL(req.url ?? '/', 'http://x').pathname;
      const example = /^\/example-(local|s3)\.html$/.exec(path);
      const target = example ? targets[example[1] as Target['name']] : undefined;
      if (path === '/') res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(TEST_PAGE);
      else if (target) res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(examplePage(target));
      else res.writeHead(404).end();
    });
    pageOrigin = site.url;
    const starting: Promise<unknown>[] = [
      startStowage('local', {}).then((t) => (targets.local = t)),
      launchChromium().then((b) => (browser = b)),
    ];
    if (!s3.skip)
      starting.push(freshBucket().then(async (b) => ((bucket = b), (targets.s3 = await startStowage('s3', b.env)))));
    await Promise.all(starting);
  });
  after(async () => {
    await browser?.close();
    await Promise.all(Object.values(targets).map((t) => t.close()));
    await bucket?.drop();
    await site?.close();
  });

  const pageErrors: string[] = [];
  afterEach(() => assert.deepEqual(pageErrors.splice(0), [], 'no script errors on the pages'));

  /** A fresh browser context (own preflight cache) with a page open on `origin`. */
  async function openPage(origin = pageOrigin, path = '/'): Promise<Page> {
    const context = await browser.newContext();
    const page = await context.newPage();
    page.on('pageerror', (e) => pageErrors.push(`${origin}${path}: ${e}`));
    const res = await page.goto(`${origin}${path}`);
    assert.equal(res?.status(), 200, `${origin}${path}`);
    return page;
  }
  const run = (page: Page, fn: 'direct' | 'multipart' | 'token' | 'sdk', arg: Json): Promise<Json> =>
    page.evaluate(([f, a]) => (window as any).t[f](a), [fn, arg] as const);

  for (const name of ['local', 's3'] as const) {
    describe(name === 'local' ? 'Stowage on local disk' : 'Stowage on S3 storage (OpenStack Swift)', {
      skip: name === 's3' ? s3.skip : false,
    }, () => {
      const target = () => targets[name]!;

      test('direct upload with the public key (multipart/form-data, x-api-key): 201, readable record, same bytes', async () => {
        const t = target();
        const page = await openPage();
        try {
          const r = await run(page, 'direct', {
            stowage: t.url,
            key: t.ws.public_key,
            name: `direct-${name}.bin`,
            size: 300_000,
          });
          assert.equal(r.status, 201, JSON.stringify(r));
          const record = recordOf(r.body);
          assert.equal(record.name, `direct-${name}.bin`);
          assert.equal(record.size, 300_000);
          assert.equal(record.path, `/browser/direct-${name}.bin`);
          await assertStored(t, record, r.sha256);
        } finally {
          await page.context().close();
        }
      });

      test('multipart with the public key: 20 MiB, parts PUT in parallel, every ETag readable by the page, complete 200', async (tc) => {
        const t = target();
        const page = await openPage();
        try {
          const r = await run(page, 'multipart', {
            stowage: t.url,
            key: t.ws.public_key,
            name: `multipart-${name}.bin`,
            size: BIG,
          });
          assert.equal(r.start.status, 201, JSON.stringify(r.start));
          const urls: string[] = r.start.body.parts;
          assert.equal(urls.length, 3, '20 MiB in 8 MiB parts');
          for (const u of urls)
            assert.equal(
              new URL(u).origin,
              t.partOrigin,
              `part URLs point at ${t.name === 'local' ? 'Stowage itself' : 'the S3 endpoint, a third origin'}`,
            );
          assert.notEqual(t.partOrigin, pageOrigin);

          if (!(await storageAllowsParts(tc, t, urls[0], pageOrigin))) {
            // What a page gets from storage without CORS: every part PUT rejected, nothing to read.
            for (const p of r.parts) assert.equal(p.threw, 'TypeError', JSON.stringify(p));
            assert.equal(r.complete, undefined);
            const abort = await api(t, 'DELETE', `/api/v1/multipart/${r.start.body.session_id}`);
            assert.equal(abort.status, 200);
            return;
          }
          for (const p of r.parts) {
            assert.equal(p.status, 200, JSON.stringify(p));
            assert.ok(p.etag, `part ETag readable by the page (Access-Control-Expose-Headers): ${JSON.stringify(p)}`);
          }
          // In parallel: every part was sent before the first answer came back.
          const lastSent = Math.max(...r.parts.map((p: Json) => p.sentAt));
          const firstDone = Math.min(...r.parts.map((p: Json) => p.doneAt));
          assert.ok(
            lastSent < firstDone,
            `parts overlapped (last sent at ${lastSent}, first answered at ${firstDone})`,
          );
          assert.equal(r.complete.status, 200, JSON.stringify(r.complete));
          const record = recordOf(r.complete.body);
          assert.equal(record.size, BIG);
          await assertStored(t, record, r.sha256);
        } finally {
          await page.context().close();
        }
      });

      test('upload token: the page POSTs raw bytes with no key and a non-ASCII X-File-Name: 201; used again: a readable 401 TOKEN_USED', async () => {
        const t = target();
        const minted = await mintToken(t);
        assert.equal(minted.upload_url, `${t.url}/api/v1/uploads/${minted.token}`);
        assert.equal(minted.policy.max_file_size, 5 * MiB);
        const page = await openPage();
        try {
          const text = `hello from ${pageOrigin} ☕\n`;
          const r = await run(page, 'token', { url: minted.upload_url, text, name: 'café ☕.txt' });
          assert.equal(r.status, 201, JSON.stringify(r));
          assert.equal(r.body.data.name, 'café ☕.txt');
          assert.equal(r.body.data.path, '/tokens/café ☕.txt');
          assert.equal(r.body.data.upload_source, 'token');
          await assertStored(t, r.body.data, sha256(new TextEncoder().encode(text)));

          const again = await run(page, 'token', { url: minted.upload_url, text, name: 'again.txt' });
          assert.equal(again.status, 401, JSON.stringify(again));
          assert.equal(again.body.errorCode, 'TOKEN_USED');
          assert.equal(again.body.message, 'Invalid or expired token');
        } finally {
          await page.context().close();
        }
      });

      test("the SDK's browser build, imported by the page from Stowage's /dashboard/sdk.js, uploads with the public key", async () => {
        const t = target();
        const page = await openPage();
        try {
          const r = await run(page, 'sdk', {
            stowage: t.url,
            key: t.ws.public_key,
            name: `sdk-${name}.bin`,
            size: 100_000,
          });
          assert.equal(r.record.name, `sdk-${name}.bin`);
          await assertStored(t, r.record, r.sha256);
        } finally {
          await page.context().close();
        }
      });

      test('allowed_origins: a readable 403 for the public key, a refused preflight for a token, then the exact origin and a wildcard let the page in', async () => {
        const t = target();
        const shop = 'https://shop.example.com';
        const page = await openPage();
        // Chromium maps *.localhost to loopback itself: a second host name for the same server.
        const wildOrigin = `http://shop.localhost:${site.port}`;
        const wildPage = await openPage(wildOrigin);
        try {
          await setAllowedOrigins(t, [shop]);

          // The public key from a page elsewhere: refused, and the page can read why.
          const direct = await run(page, 'direct', {
            stowage: t.url,
            key: t.ws.public_key,
            name: 'refused.bin',
            size: 1000,
          });
          assert.equal(direct.status, 403, JSON.stringify(direct));
          assert.equal(direct.body.errorCode, 'ORIGIN_NOT_ALLOWED');
          assert.ok(direct.body.message.includes(pageOrigin), direct.body.message);
          const start = await run(page, 'multipart', {
            stowage: t.url,
            key: t.ws.public_key,
            name: 'refused.bin',
            size: BIG,
          });
          assert.equal(start.start.status, 403, JSON.stringify(start.start));
          assert.equal(start.start.body.errorCode, 'ORIGIN_NOT_ALLOWED');

          // What allowed_origins cannot stop: a client that is not a browser sends no Origin.
          const form = new FormData();
          form.append('file_name', 'not-a-browser.bin');
          form.append('file', new Blob([new Uint8Array(10)]), 'not-a-browser.bin');
          const nodeUpload = await fetch(`${t.url}/api/v1/uploads`, {
            method: 'POST',
            headers: { 'x-api-key': t.ws.public_key },
            body: form,
          });
          assert.equal(nodeUpload.status, 201, 'no Origin header, no origin check');

          // A token from a page elsewhere: the preflight is refused, so fetch rejects.
          const minted = await mintToken(t);
          const text = 'token after the origin was allowed\n';
          const refused = await run(page, 'token', { url: minted.upload_url, text, name: 'refused.txt' });
          assert.equal(refused.threw, 'TypeError', JSON.stringify(refused));
          const denied = await preflight(minted.upload_url, pageOrigin, 'POST', 'content-type,x-file-name');
          assert.equal(
            denied.allowOrigin,
            null,
            `preflight from ${pageOrigin}: no Access-Control-Allow-Origin (status ${denied.status})`,
          );
          const granted = await preflight(minted.upload_url, shop, 'POST', 'content-type,x-file-name');
          assert.ok(
            granted.allowOrigin === '*' || granted.allowOrigin === shop,
            `preflight from ${shop}: ${JSON.stringify(granted)}`,
          );
          // A request simple enough to need no preflight reaches Stowage, which refuses it
          // readably before touching the token.
          const simple = await run(page, 'token', { url: minted.upload_url, text });
          assert.equal(simple.status, 403, JSON.stringify(simple));
          assert.equal(simple.body.errorCode, 'ORIGIN_NOT_ALLOWED');

          // The page's exact origin: both work again, and the refused token was not spent.
          await setAllowedOrigins(t, [shop, pageOrigin]);
          const allowed = await run(page, 'direct', {
            stowage: t.url,
            key: t.ws.public_key,
            name: 'allowed.bin',
            size: 1000,
          });
          assert.equal(allowed.status, 201, JSON.stringify(allowed));
          await assertStored(t, recordOf(allowed.body), allowed.sha256);
          const spent = await run(page, 'token', { url: minted.upload_url, text, name: 'allowed.txt' });
          assert.equal(spent.status, 201, JSON.stringify(spent));
          await assertStored(t, spent.body.data, sha256(new TextEncoder().encode(text)));

          // A wildcard: any subdomain of localhost on the page's port, not 127.0.0.1.
          const wildcard = `http://*.localhost:${site.port}`;
          await setAllowedOrigins(t, [wildcard]);
          const viaWildcard = await run(wildPage, 'direct', {
            stowage: t.url,
            key: t.ws.public_key,
            name: 'wildcard.bin',
            size: 1000,
          });
          assert.equal(viaWildcard.status, 201, `from ${wildOrigin}: ${JSON.stringify(viaWildcard)}`);
          const token2 = await mintToken(t);
          const wildToken = await run(wildPage, 'token', { url: token2.upload_url, text, name: 'wildcard.txt' });
          assert.equal(wildToken.status, 201, JSON.stringify(wildToken));
          const notCovered = await run(page, 'direct', {
            stowage: t.url,
            key: t.ws.public_key,
            name: 'not-covered.bin',
            size: 1000,
          });
          assert.equal(notCovered.status, 403, `${pageOrigin} is not under ${wildcard}`);
        } finally {
          await setAllowedOrigins(t, []);
          await page.context().close();
          await wildPage.context().close();
        }
      });

      test('examples/cross-origin-upload.html from another origin: direct, multipart with ETags per part, token URL', async (tc) => {
        const t = target();
        const page = await openPage(pageOrigin, `/example-${name}.html`);
        /** Chooses a file, submits, waits for the outcome; returns the status line. */
        const upload = async (
          file: { name: string; mimeType: string; buffer: Buffer },
          tokenUrl = '',
        ): Promise<string> => {
          await page.locator('#token-url').fill(tokenUrl);
          await page.locator('#file').setInputFiles(file);
          await page.getByRole('button', { name: 'Upload' }).click();
          await page.waitForFunction(
            () => /^(Uploaded|Failed)/.test(document.getElementById('status')?.textContent ?? ''),
            undefined,
            { timeout: 30_000 },
          );
          return (await page.locator('#status').textContent()) ?? '';
        };
        const linkHash = async () => storedHash((await page.locator('#link').getAttribute('href'))!);
        try {
          // Below 16 MiB: one request with the public key.
          const small = randomBytes(200_000);
          assert.equal(
            await upload({ name: `example-${name}.bin`, mimeType: 'application/octet-stream', buffer: small }),
            `Uploaded example-${name}.bin (200000 bytes)`,
          );
          assert.equal(await linkHash(), sha256(small));

          // Above: multipart, three parts, each row with the ETag the page read.
          const big = randomBytes(BIG + 1);
          const partsSent: string[] = [];
          page.on('request', (req) => {
            if (req.method() === 'PUT') partsSent.push(req.url());
          });
          const status = await upload({
            name: `example-big-${name}.bin`,
            mimeType: 'application/octet-stream',
            buffer: big,
          });
          assert.equal(partsSent.length, 3, partsSent.join('\n'));
          if (await storageAllowsParts(tc, t, partsSent[0], pageOrigin)) {
            assert.equal(status, `Uploaded example-big-${name}.bin (${BIG + 1} bytes)`);
            const rows = page.locator('#parts li');
            assert.equal(await rows.count(), 3);
            for (let i = 0; i < 3; i++) {
              assert.equal(await rows.nth(i).getAttribute('data-state'), 'done');
              assert.match((await rows.nth(i).locator('.etag').textContent()) ?? '', /^ETag \S+/);
            }
            assert.equal(await linkHash(), sha256(big));
          } else {
            assert.match(status, /^Failed: the browser could not send PUT/);
          }

          // With a token URL: no key, the file's own (non-ASCII) name.
          const minted = await mintToken(t);
          const note = Buffer.from('a note from the example page ☕\n');
          assert.equal(
            await upload({ name: 'crème brûlée ☕.txt', mimeType: 'text/plain', buffer: note }, minted.upload_url),
            `Uploaded crème brûlée ☕.txt (${note.length} bytes)`,
          );
          assert.equal(await linkHash(), sha256(note));
          assert.equal(
            await upload({ name: 'again.txt', mimeType: 'text/plain', buffer: note }, minted.upload_url),
            'Failed: 401 TOKEN_USED: Invalid or expired token',
          );
        } finally {
          await page.context().close();
        }
      });
    });
  }
});
