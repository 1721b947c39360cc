// The dashboard (/dashboard), the browser build of the SDK (/dashboard/sdk.js) and the plain
// example page (/examples/public-upload.html). The TypeScript is bundled by `npm run build` (or at
// start, when running from source: http/browser-bundles.ts) and served from memory.
//
// Scripts are pinned by hash, not allowed by origin. Uploads are delivered from this same
// origin (GET /{workspace_id}/{path}, public, a `.js` as text/javascript), so `script-src
// 'self'` would let any markup injected into a page load an uploaded script next to the private
// key. Instead each page's `script-src` lists only the SHA-384 hashes of its own scripts: the
// external ones carry a matching `integrity` attribute (CSP Level 3 hash sources for external
// scripts), the modules they import are pinned by the import map's `integrity`, and inline
// scripts (the import map) by the hash of their text. The hashes are computed here at start
// from the bytes served, so the pages stay static and cacheable.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { browserScript } from '../browser-bundles.ts';

const root = (path: string) => fileURLToPath(new URL(`../../../${path}`, import.meta.url));

/** Source text as the browser will see it (the HTML parser turns CRLF into LF). */
const read = (path: string) => readFileSync(root(path), 'utf8').replace(/\r\n?/g, '\n');

/** The hash of a script's UTF-8 bytes as SRI and CSP write it. */
function sha384(text: string): string {
  return `sha384-${createHash('sha384').update(text, 'utf8').digest('base64')}`;
}

/**
 * Pins a page's scripts. Each `{{sri /path}}` in the page becomes the hash of the script served
 * at /path (in an `integrity` attribute, or in the import map); the page may then run those
 * scripts and its inline scripts, by hash, and nothing else. A `<script src>` without integrity
 * would be refused by the browser, so it is refused here, at start.
 */
export function pinScripts(
  page: string,
  html: string,
  scripts: Record<string, string>,
): { html: string; hashes: string[] } {
  const hashes = new Set<string>();
  const pinned = html.replace(/\{\{sri ([^\s}]+)\}\}/g, (_, path: string) => {
    if (scripts[path] === undefined) throw new Error(`${page}: no script is served at ${path}`);
    const hash = sha384(scripts[path]);
    hashes.add(hash);
    return hash;
  });
  for (const [tag, attrs, body] of pinned.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script\s*>/gi)) {
    if (/\ssrc\s*=/i.test(attrs)) {
      if (!/\sintegrity="sha384-[^"]+"/.test(attrs))
        throw new Error(`${page}: ${tag.slice(0, 80)} needs integrity="{{sri <its path>}}"`);
    } else if (body.trim() !== '') {
      hashes.add(sha384(body));
    }
  }
  return { html: pinned, hashes: [...hashes] };
}

export async function dashboardRoutes(
  app: FastifyInstance,
  opts: { publicUrl: string; storageOrigin?: string },
): Promise<void> {
  const [appJs, sdkJs, uppyCss] = await Promise.all([
    browserScript('dashboard-app.js'),
    browserScript('sdk.js'),
    browserScript('dashboard-uppy.css'),
  ]);
  const scripts: Record<string, string> = {
    '/dashboard/app.js': appJs,
    '/dashboard/sdk.js': sdkJs,
    '/examples/public-upload.js': read('examples/public-upload.js'),
  };
  const pages: Record<string, string> = {
    '/dashboard/': 'dashboard/index.html',
    '/examples/public-upload.html': 'examples/public-upload.html',
  };

  // Styles from this origin only (the uploader's, Uppy's, are a file: /dashboard/uppy.css; the
  // inline styles Uppy's Dashboard sets go through the CSSOM, which style-src does not govern);
  // images, video, audio and uploads may also go to the public URL (delivery)
  // and the storage endpoint (presigned part URLs). Trusted Types with no policy: no page
  // writes HTML or script through the DOM's string sinks (innerHTML, script.src = …), so any
  // such write is an injection and is refused.
  const extra = [new URL(opts.publicUrl).origin, opts.storageOrigin].filter(Boolean).join(' ');
  const policy = (scriptSrc: string) =>
    [
      "default-src 'self'",
      `script-src ${scriptSrc}`,
      "style-src 'self'",
      `img-src 'self' data: blob: ${extra}`,
      // A file's page plays its video and audio from the delivery origin.
      `media-src 'self' ${extra}`,
      `connect-src 'self' ${extra}`,
      "frame-ancestors 'none'",
      "base-uri 'none'",
      "form-action 'self'",
      "require-trusted-types-for 'script'",
      "trusted-types 'none'",
    ].join('; ');

  // [content type, body, policy]. Scripts and styles are not documents: nothing runs in them.
  const files: Record<string, [string, string, string]> = {
    '/dashboard/styles.css': ['text/css; charset=utf-8', read('dashboard/styles.css'), policy("'none'")],
    '/dashboard/uppy.css': ['text/css; charset=utf-8', uppyCss, policy("'none'")],
  };
  for (const [path, body] of Object.entries(scripts))
    files[path] = ['text/javascript; charset=utf-8', body, policy("'none'")];
  for (const [path, file] of Object.entries(pages)) {
    const { html, hashes } = pinScripts(path, read(file), scripts);
    files[path] = ['text/html; charset=utf-8', html, policy(hashes.map((h) => `'${h}'`).join(' ') || "'none'")];
  }

  const send = (reply: FastifyReply, path: string) => {
    const [type, body, csp] = files[path];
    return reply
      .headers({
        'content-type': type,
        'content-security-policy': csp,
        'x-content-type-options': 'nosniff',
        'referrer-policy': 'no-referrer',
        'cache-control': 'no-cache',
      })
      .send(body);
  };
  for (const path of Object.keys(files)) app.get(path, { schema: { hide: true } }, (_req, reply) => send(reply, path));
}
