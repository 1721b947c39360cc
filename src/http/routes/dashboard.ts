// The dashboard (/dashboard), the browser build of the SDK (/dashboard/sdk.js) and the plain
// example page (/examples/public-upload.html). The TypeScript is bundled once, at start, by
// esbuild, and served from memory.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import type { FastifyInstance, FastifyReply } from 'fastify';

const root = (path: string) => fileURLToPath(new URL(`../../../${path}`, import.meta.url));

async function bundle(entry: string): Promise<string> {
  const out = await build({ entryPoints: [root(entry)], bundle: true, format: 'esm', target: 'es2022', minify: true, write: false, logLevel: 'silent', platform: 'browser' });
  return out.outputFiles[0].text;
}

export async function dashboardRoutes(app: FastifyInstance, opts: { publicUrl: string; storageOrigin?: string }): Promise<void> {
  const [appJs, sdkJs] = await Promise.all([bundle('dashboard/app.ts'), bundle('sdk/src/index.ts')]);
  const files: Record<string, [string, string]> = {
    '/dashboard/': ['text/html; charset=utf-8', readFileSync(root('dashboard/index.html'), 'utf8')],
    '/dashboard/styles.css': ['text/css; charset=utf-8', readFileSync(root('dashboard/styles.css'), 'utf8')],
    '/dashboard/app.js': ['text/javascript; charset=utf-8', appJs],
    '/dashboard/sdk.js': ['text/javascript; charset=utf-8', sdkJs],
    '/examples/public-upload.html': ['text/html; charset=utf-8', readFileSync(root('examples/public-upload.html'), 'utf8')],
    '/examples/public-upload.js': ['text/javascript; charset=utf-8', readFileSync(root('examples/public-upload.js'), 'utf8')],
  };
  // Scripts and styles from this origin only; images and uploads may also go to the public URL
  // (delivery) and the storage endpoint (presigned part URLs).
  const extra = [new URL(opts.publicUrl).origin, opts.storageOrigin].filter(Boolean).join(' ');
  const csp = [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    `img-src 'self' data: blob: ${extra}`,
    `connect-src 'self' ${extra}`,
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "form-action 'self'",
  ].join('; ');
  const send = (reply: FastifyReply, path: string) => {
    const [type, body] = files[path];
    return reply
      .headers({ 'content-type': type, 'content-security-policy': csp, 'x-content-type-options': 'nosniff', 'referrer-policy': 'no-referrer', 'cache-control': 'no-cache' })
      .send(body);
  };
  for (const path of Object.keys(files)) app.get(path, { schema: { hide: true } }, (_req, reply) => send(reply, path));
}
