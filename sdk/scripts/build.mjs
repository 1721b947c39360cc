// Builds the @stowage/sdk package into sdk/dist/ (run by `npm run build:sdk` at the repository's
// root and by the package's prepack):
//   index.js         ESM, platform neutral, unminified: for Node and for bundlers, which minify
//                    and tree-shake it themselves;
//   node.js          the Node helpers (files on disk), Node built-ins left as imports;
//   stowage.min.js   one minified ES module for a <script type="module"> or an import map;
//   video.js         video rendition tokens and waiting for a rendition made in the background;
//   uppy.js          the option builders for Uppy's plugins (no Uppy inside: types only);
//   uploader.js      createUploader, importing Uppy 5 (optional peer dependencies) as packages;
//   react.js         <StowageUploader/>, importing react and Uppy as packages;
//   uploader.css     Uppy's style sheets the uploader needs, in one file;
//   uploader.min.js  createUploader with Uppy and its styles inside, one minified ES module for
//                    pages without a build step (not in the size budget: Uppy is most of it);
//   *.d.ts           declarations, one per source file, with `.js` specifiers.
// Prints the gzipped size of stowage.min.js; the budget lives in package.json (`sizeBudget`) and
// test/sdk-package.test.ts holds the build to it.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';
import { uploaderBundleOptions, uppyStyles } from './uploader-bundle.mjs';

const SDK = fileURLToPath(new URL('..', import.meta.url));
const DIST = join(SDK, 'dist');
const pkg = JSON.parse(readFileSync(join(SDK, 'package.json'), 'utf8'));

rmSync(DIST, { recursive: true, force: true });

const common = { bundle: true, format: 'esm', target: 'es2022', logLevel: 'warning', legalComments: 'none' };
await build({
  ...common,
  entryPoints: [join(SDK, 'src', 'index.ts')],
  outfile: join(DIST, 'index.js'),
  platform: 'neutral',
});
await build({
  ...common,
  entryPoints: [join(SDK, 'src', 'node.ts')],
  outfile: join(DIST, 'node.js'),
  platform: 'node',
});
await build({
  ...common,
  entryPoints: [join(SDK, 'src', 'index.ts')],
  outfile: join(DIST, 'stowage.min.js'),
  platform: 'browser',
  minify: true,
});

await build({
  ...common,
  entryPoints: [join(SDK, 'src', 'video.ts')],
  outfile: join(DIST, 'video.js'),
  platform: 'neutral',
});

writeFileSync(join(DIST, 'uploader.css'), uppyStyles());
const uppyExternal = ['@uppy/*', 'react', 'react-dom'];
await build({
  ...common,
  entryPoints: [join(SDK, 'src', 'uppy.ts')],
  outfile: join(DIST, 'uppy.js'),
  platform: 'neutral',
  external: uppyExternal,
});
await build({
  ...common,
  entryPoints: [join(SDK, 'src', 'uploader.ts')],
  outfile: join(DIST, 'uploader.js'),
  platform: 'browser',
  external: uppyExternal,
});
await build({
  ...common,
  entryPoints: [join(SDK, 'src', 'react.ts')],
  outfile: join(DIST, 'react.js'),
  platform: 'browser',
  external: uppyExternal,
});
await build(uploaderBundleOptions(join(DIST, 'uploader.min.js')));

// Declarations: the compiler keeps the sources' `./x.ts` specifiers in .d.ts files, which a
// consumer's compiler resolves only with allowImportingTsExtensions; the built files are `.js`.
const tsc = join(dirname(createRequire(import.meta.url).resolve('typescript/package.json')), 'bin', 'tsc');
execFileSync(process.execPath, [tsc, '-p', join(SDK, 'tsconfig.build.json')], { stdio: 'inherit', cwd: SDK });
for (const name of readdirSync(DIST).filter((n) => n.endsWith('.d.ts'))) {
  if (name === 'uploader-bundle.d.ts') {
    rmSync(join(DIST, name)); // the bundle's types are those of uppy.d.ts and uploader.d.ts
    continue;
  }
  const file = join(DIST, name);
  const text = readFileSync(file, 'utf8');
  writeFileSync(file, text.replace(/(from\s+['"]\.{1,2}\/[^'"]+)\.ts(['"])/g, '$1.js$2'));
}

const min = readFileSync(join(DIST, 'stowage.min.js'));
const gzipped = gzipSync(min, { level: 9 }).length;
const budget = pkg.sizeBudget?.['dist/stowage.min.js'];
console.log(
  `@stowage/sdk: dist/stowage.min.js ${min.length} bytes, ${gzipped} bytes gzipped` +
    (budget ? ` (budget ${budget})` : ''),
);
if (budget && gzipped > budget) {
  console.error(`@stowage/sdk: the browser build is over its size budget (${gzipped} > ${budget} bytes gzipped)`);
  process.exit(1);
}
