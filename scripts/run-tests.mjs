#!/usr/bin/env node
// `npm test`: runs every test/**/*.test.ts with Node's test runner (through tsx).
// Pass file paths or name filters as arguments to run fewer: `npm test -- sources`.
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const find = (dir) =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? find(path) : name.endsWith('.test.ts') ? [path] : [];
  });

const filters = process.argv.slice(2);
const files = find(join(root, 'test'))
  .map((f) => relative(root, f))
  .filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)))
  .sort();
if (files.length === 0) {
  console.error('no test files match', filters.join(' '));
  process.exit(1);
}
const concurrency = process.env.TEST_CONCURRENCY ?? '2';
const result = spawnSync(
  process.execPath,
  [
    '--import',
    'tsx',
    '--test',
    `--test-concurrency=${concurrency}`,
    '--test-timeout=300000',
    '--test-reporter=spec',
    ...files,
  ],
  { stdio: 'inherit', cwd: root },
);
process.exit(result.status ?? 1);
