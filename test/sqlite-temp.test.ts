// SQLite keeps its temporary data (statement journals) in memory while Stowage runs: a file
// insert with its triggers and full-text row journals more than SQLite's 64 KiB spill size, and
// on disk that was a temporary file created and unlinked on the main thread for about every
// other upload. SQLite names its temporary files in SQLITE_TMPDIR, read at its first temporary
// file, so this process points it at a directory of its own and watches that directory.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, watch } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import { type Harness, makeHarness } from './helpers/harness.ts';

const sqliteTmp = mkdtempSync(join(tmpdir(), 'stowage-sqlite-tmp-'));
process.env.SQLITE_TMPDIR = sqliteTmp;

let h: Harness;
let base: string;
before(async () => {
  h = await makeHarness('sqlite', { config: { storage: { driver: 'local', fsync: false } } });
  base = await h.app.listen({ host: '127.0.0.1', port: 0 });
});
after(async () => {
  await h?.close();
  rmSync(sqliteTmp, { recursive: true, force: true });
});

test('the main connection keeps temporary data in memory once migrated', async () => {
  const { rows } = await sql<{ temp_store: number }>`pragma temp_store`.execute(h.services.db.kysely);
  assert.equal(Number(rows[0]?.temp_store), 2);
});

test('uploads with tags and metadata create no SQLite temporary file', async () => {
  const seen: string[] = [];
  const watcher = watch(sqliteTmp, (_event, name) => seen.push(String(name)));
  try {
    for (let i = 0; i < 30; i++) {
      const form = new FormData();
      form.append('file_name', `a long file name for the full-text index number ${i}.bin`);
      form.append('tags', 'alpha,beta,gamma,delta');
      form.append('metadata', JSON.stringify({ shoot: 'autumn', index: i, note: 'x'.repeat(200) }));
      form.append('file', new Blob([new Uint8Array(Buffer.alloc(2048, i))]), 'f.bin');
      const res = await fetch(`${base}/api/v1/uploads`, {
        method: 'POST',
        body: form,
        headers: { 'x-api-key': h.ws.private_key },
      });
      assert.equal(res.status, 201, await res.text());
    }
    await new Promise((r) => setTimeout(r, 200));
  } finally {
    watcher.close();
  }
  assert.deepEqual(seen, []);
});
