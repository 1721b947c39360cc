#!/usr/bin/env node
// `npm test`: runs every test/**/*.test.ts with Node's test runner (through tsx).
// Pass file paths or name filters as arguments to run fewer: `npm test -- sources`.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
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
// Slowest first (times from an earlier full run, scripts/test-times.json; a file not listed yet
// counts as slow), so that two lanes end together instead of one long file running alone at the end.
const timesPath = join(root, 'scripts/test-times.json');
const times = existsSync(timesPath) ? JSON.parse(readFileSync(timesPath, 'utf8')) : {};
const cost = (f) => times[f] ?? 120;
files.sort((a, b) => cost(b) - cost(a));
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
    // A guard against a hung test, not a speed limit: on a loaded machine a file of CLI runs took 300 s.
    '--test-timeout=600000',
    '--test-reporter=spec',
    '--test-reporter-destination=stdout',
    `--test-reporter=${join(root, 'scripts/test-file-times.mjs')}`,
    '--test-reporter-destination=stdout',
    ...files,
  ],
  { stdio: 'inherit', cwd: root },
);
process.exit(result.status ?? 1);
