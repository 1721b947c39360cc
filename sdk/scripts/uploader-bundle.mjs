// How the standalone uploader (dist/uploader.min.js) is bundled: by build.mjs, and by the
// Chromium tests, which serve it from another origin.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const ENTRY = fileURLToPath(new URL('../src/uploader-bundle.ts', import.meta.url));

/** Uppy's style sheets the uploader uses, in the order Uppy's docs list them. */
export function uppyStyles() {
  return ['@uppy/core', '@uppy/dashboard', '@uppy/webcam']
    .map((p) => readFileSync(require.resolve(`${p}/css/style.min.css`), 'utf8'))
    .join('\n');
}

/** esbuild's options: one minified ES module with Uppy, its styles as text, and the helpers. */
export function uploaderBundleOptions(outfile) {
  const styles = uppyStyles();
  return {
    entryPoints: [ENTRY],
    outfile,
    bundle: true,
    format: 'esm',
    target: 'es2022',
    platform: 'browser',
    minify: true,
    legalComments: 'none',
    logLevel: 'warning',
    plugins: [
      {
        name: 'uppy-styles',
        setup(b) {
          b.onResolve({ filter: /^stowage:uppy-styles$/ }, () => ({ path: 'uppy-styles', namespace: 'uppy-styles' }));
          b.onLoad({ filter: /.*/, namespace: 'uppy-styles' }, () => ({ contents: styles, loader: 'text' }));
        },
      },
    ],
  };
}
