// The load run of bench/load.ts as a test: 200 concurrent clients for 60 s (LOAD_SECONDS to
// change) mixing uploads, listings and delivery against a real server process. Zero 5xx, every
// acknowledged upload present and byte-exact afterwards, peak server RSS under 1 GiB. The
// figures (throughput, percentiles, memory over time) are printed as test diagnostics.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runLoad } from '../bench/load.ts';

test('200 clients for a minute: no 5xx, no lost or changed file, bounded memory', {
  timeout: 10 * 60_000,
}, async (t) => {
  const lines: string[] = [];
  const r = await runLoad({
    clients: Number(process.env.LOAD_CLIENTS ?? 200),
    seconds: Number(process.env.LOAD_SECONDS ?? 60),
    log: (l) => lines.push(l),
  });
  for (const l of lines) t.diagnostic(l);
  assert.ok(r.requests > 1000, `only ${r.requests} requests: the load did not run`);
  assert.ok(r.acked > 100, `${r.acked} uploads acknowledged`);
  assert.equal(r.fiveXx, 0, lines.join('\n'));
  assert.equal(r.missing, 0, lines.join('\n'));
  assert.deepEqual(r.failures, []);
  assert.ok(r.peakRss < 1024 * 1024 * 1024, `peak RSS ${r.peakRss}`);
});
