// The browser scripts the dashboard serves: bundled by `npm run build` into dist/browser/, or, when
// the server runs from its sources, by esbuild at start. esbuild is a dev dependency, so it is
// imported only on that path.
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** Output name in dist/browser/ → entry point, relative to the repository. */
export const BROWSER_BUNDLES = {
  'dashboard-app.js': 'dashboard/app.ts',
  // Uppy's style sheets for the dashboard's uploader, served as a file: the page's CSP allows
  // styles from its own origin only, so they cannot be added as a <style> element.
  'dashboard-uppy.css': 'dashboard/uppy.css',
  'sdk.js': 'sdk/src/index.ts',
} as const;

export type BrowserBundle = keyof typeof BROWSER_BUNDLES;

const repoPath = (path: string) => fileURLToPath(new URL(`../../${path}`, import.meta.url));

/** esbuild's options for one bundle; `write` and the output are the caller's. */
export function browserBuildOptions(name: BrowserBundle) {
  return {
    entryPoints: [repoPath(BROWSER_BUNDLES[name])],
    bundle: true,
    ...(name.endsWith('.js') ? { format: 'esm' as const } : {}),
    target: 'es2022',
    minify: true,
    logLevel: 'silent' as const,
    platform: 'browser' as const,
  };
}

/** The script's text: the built file next to this module when there is one, else bundled now. */
export async function browserScript(name: BrowserBundle): Promise<string> {
  const built = fileURLToPath(new URL(`../browser/${name}`, import.meta.url));
  if (existsSync(built)) return readFileSync(built, 'utf8');
  const { build } = await import('esbuild');
  const out = await build({ ...browserBuildOptions(name), write: false });
  return out.outputFiles[0].text;
}
