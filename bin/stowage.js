#!/usr/bin/env node
// The `stowage` command. In a checkout with its dev dependencies it runs the TypeScript CLI through
// tsx, so no build step is needed; an installed package runs the built one (dist/).
import { existsSync } from 'node:fs';

const fromSource = existsSync(new URL('../src/cli/main.ts', import.meta.url));
let tsx;
if (fromSource) {
  try {
    tsx = await import('tsx/esm/api');
  } catch {
    // A checkout installed without its dev dependencies: the build is the way.
  }
}
if (tsx) {
  tsx.register();
  await import('../src/cli/main.ts');
} else {
  await import('../dist/src/cli/main.js');
}
