// What `npm run build` compiled from: a fingerprint of the sources, so `npm start` knows whether
// dist/ is current. Plain JavaScript: it runs before anything is built.
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

export const ROOT = join(import.meta.dirname, '..');
export const DIST = join(ROOT, 'dist');
export const STAMP = join(DIST, 'BUILD');
/** What the build reads: the server's sources, the browser entry points, and the settings. */
const INPUTS = ['src', 'dashboard', 'sdk/src', 'package.json', 'tsconfig.json', 'tsconfig.build.json'];

function* files(path) {
  if (!existsSync(path)) return;
  const entries = readdirSync(path, { withFileTypes: true });
  for (const e of entries.sort((a, b) => a.name.localeCompare(b.name))) {
    const full = join(path, e.name);
    if (e.isDirectory()) yield* files(full);
    else if (e.isFile()) yield full;
  }
}

/** A SHA-256 over every input file's path and bytes; undefined when the sources are not here (an installed package). */
export function sourceFingerprint() {
  if (!existsSync(join(ROOT, 'src', 'main.ts'))) return undefined;
  const hash = createHash('sha256');
  for (const input of INPUTS) {
    const path = join(ROOT, input);
    if (!existsSync(path)) continue;
    const list = input.includes('.') ? [path] : [...files(path)];
    for (const f of list) hash.update(relative(ROOT, f)).update('\0').update(readFileSync(f)).update('\0');
  }
  return hash.digest('hex');
}

/** The fingerprint dist/ was built from, if it was built. */
export function builtFingerprint() {
  try {
    return JSON.parse(readFileSync(STAMP, 'utf8')).sources;
  } catch {
    return undefined;
  }
}
