// `npm run build`: compiles src/ to dist/ (one .js per .ts, imports rewritten to .js, source maps),
// copies the files that are not TypeScript (worker entry points written as .mjs), bundles the
// browser scripts (the dashboard and the SDK's browser build) into dist/browser/, and stamps dist/
// with the sources' fingerprint. The compiler and esbuild are dev dependencies: a production
// install runs what this wrote and needs neither.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { createRequire } from 'node:module';
import { build } from 'esbuild';
import { register } from 'tsx/esm/api';
import { DIST, ROOT, STAMP, sourceFingerprint } from './build-info.mjs';

const started = Date.now();
const sources = sourceFingerprint();
rmSync(DIST, { recursive: true, force: true });

const tsc = join(dirname(createRequire(import.meta.url).resolve('typescript/package.json')), 'bin', 'tsc');
execFileSync(process.execPath, [tsc, '-p', join(ROOT, 'tsconfig.build.json')], { stdio: 'inherit', cwd: ROOT });

// Files that are not TypeScript keep their place beside the compiled modules: worker entry points
// written as .mjs under src/, and the pages and styles the dashboard route reads.
function copyOthers(dir) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const full = join(dir, e.name);
    if (e.isDirectory()) copyOthers(full);
    else if (!e.name.endsWith('.ts')) {
      const target = join(DIST, relative(ROOT, full));
      mkdirSync(dirname(target), { recursive: true });
      cpSync(full, target);
    }
  }
}
for (const dir of ['src', 'dashboard', 'examples']) copyOthers(join(ROOT, dir));

// The browser scripts, with the options the dashboard route uses when it runs from source.
register();
const { BROWSER_BUNDLES, browserBuildOptions } = await import('../src/http/browser-bundles.ts');
for (const name of Object.keys(BROWSER_BUNDLES)) {
  await build({ ...browserBuildOptions(name), write: true, outfile: join(DIST, 'src', 'browser', name) });
}

writeFileSync(STAMP, `${JSON.stringify({ sources, builtAt: new Date().toISOString() }, null, 2)}\n`);
console.log(`built dist/ in ${((Date.now() - started) / 1000).toFixed(1)} s`);
