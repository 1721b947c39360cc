// A second reporter for `npm test`: how long each test file took, from the moment the runner
// started it (the file's own `test:dequeue`) to its `test:complete` (so with two files at a
// time, a file's figure includes sharing the machine). At the end it prints the slowest files, and with TEST_TIMES_OUT=path it
// writes every file's seconds as JSON. scripts/run-tests.mjs starts the slowest files first
// from scripts/test-times.json, so the run does not end on one long file.
import { writeFileSync } from 'node:fs';
import { relative } from 'node:path';

export default async function* fileTimes(source) {
  const spans = new Map();
  for await (const event of source) {
    const file = event.data?.file;
    // The file's own events carry its path as their name; its tests' events carry theirs.
    if (!file || event.data.name !== file) continue;
    if (event.type === 'test:dequeue') spans.set(file, { first: Date.now(), last: Date.now() });
    else if (event.type === 'test:complete' && spans.has(file)) spans.get(file).last = Date.now();
  }
  const seconds = Object.fromEntries(
    [...spans]
      .map(([file, { first, last }]) => [relative(process.cwd(), file), Math.round((last - first) / 100) / 10])
      .sort((a, b) => b[1] - a[1]),
  );
  if (process.env.TEST_TIMES_OUT) writeFileSync(process.env.TEST_TIMES_OUT, `${JSON.stringify(seconds, null, 2)}\n`);
  const slowest = Object.entries(seconds).slice(0, 12);
  if (slowest.length > 1) {
    yield '\nslowest test files (s):\n';
    for (const [file, s] of slowest) yield `  ${String(s).padStart(7)}  ${file}\n`;
  }
}
