#!/usr/bin/env node
// `npm start`: runs the built server (dist/src/main.js). From a checkout, it builds first when dist/ is
// missing or was built from other sources, so a fresh clone still starts with one command; an
// installed package (no sources) runs dist/ as it is.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { DIST, ROOT, builtFingerprint, sourceFingerprint } from '../scripts/build-info.mjs';

const sources = sourceFingerprint();
if (sources !== undefined && (sources !== builtFingerprint() || !existsSync(join(DIST, 'src', 'main.js')))) {
  process.stderr.write('stowage: dist/ is missing or out of date; building it first (npm run build)\n');
  try {
    execFileSync(process.execPath, [join(ROOT, 'scripts', 'build.mjs')], { stdio: ['ignore', 'ignore', 'inherit'] });
  } catch {
    process.stderr.write(
      'stowage: the build failed; run `npm ci` (it installs the build tools), then `npm run build`\n',
    );
    process.exit(1);
  }
}
await import(join(DIST, 'src', 'main.js'));
