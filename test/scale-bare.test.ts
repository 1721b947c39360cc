// bench/scale's bare baseline: the SQL captured from Stowage for a request, replayed by the bare
// server on the same database, must fetch exactly the records Stowage answered (same files of
// the page, same folders), or the baseline would measure other work than Stowage's.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { Bare } from '../bench/scale/bare.ts';
import { Capturer } from '../bench/scale/capture.ts';
import { seed } from '../bench/scale/seed/seed.ts';
import type { SeedInfo } from '../bench/scale/seed/info.ts';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { createServices } from '../src/services/container.ts';
import { stowageEnv } from '../bench/scale/server.ts';

let dir: string;
let info: SeedInfo;
let capturer: Capturer;
let bare: Bare;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'stowage-bare-'));
  info = await seed({
    dialect: 'sqlite',
    files: 3000,
    workspaces: 1,
    dataDir: dir,
    bigShare: 1,
    folders: 20,
    seed: 1,
    reset: true,
    check: false,
    log: () => {},
  });
  capturer = new Capturer(info);
  await capturer.open();
  bare = new Bare(info);
  await bare.start();
});

after(async () => {
  await bare?.stop();
  await capturer?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** What Stowage itself answers (a second copy in this process, as the bench's server would). */
async function stowage(path: string): Promise<Record<string, unknown>> {
  const services = await createServices(loadConfig(stowageEnv(info, 0)));
  const app = await buildApp(services, { logger: false });
  try {
    const res = await app.inject({ url: path, headers: { authorization: `Bearer ${info.privateKey}` } });
    assert.equal(res.statusCode, 200, res.body);
    return res.json();
  } finally {
    await app.close();
    await services.close();
  }
}

async function replayed(path: string): Promise<unknown[][]> {
  const captured = await capturer.capture([path]);
  assert.ok(!('refused' in captured), JSON.stringify(captured));
  await bare.load(captured.scripts);
  const r = await fetch(bare.base + path);
  assert.equal(r.status, 200);
  return ((await r.json()) as { results: unknown[][] }).results;
}

test('a page of files: the bare server fetches the same files as Stowage answers', async () => {
  for (const path of [
    '/api/v1/files?limit=100',
    `/api/v1/files?limit=100&search=${encodeURIComponent(info.searchWords[0])}`,
    `/api/v1/files?limit=100&tags=${encodeURIComponent(info.tags[0])}`,
  ]) {
    const answer = (await stowage(path)) as { files: { id: string }[] };
    assert.ok(answer.files.length > 0, path);
    const results = await replayed(path);
    // The statement that reads the page's rows: file rows, the page's in order, then the one
    // past it that tells whether more follow.
    const ids = answer.files.map((f) => f.id);
    const rows = results.find(
      (r) => r.length >= ids.length && r.every((row) => 'file_no' in (row as Record<string, unknown>)),
    ) as { id: string }[] | undefined;
    assert.ok(rows, `${path}: no statement read the page's files`);
    assert.deepEqual(
      rows.slice(0, ids.length).map((r) => r.id),
      ids,
      `${path}: the replayed statements read other files than Stowage answered`,
    );
    assert.ok(rows.length <= ids.length + 1, `${path}: at most one row past the page`);
  }
});

test('the folder list: the same folders, with the totals statement run on the main connection', async () => {
  const path = '/api/v1/folders';
  const answer = (await stowage(path)) as { folders: { folder_no: string }[] };
  const captured = await capturer.capture([path]);
  assert.ok(!('refused' in captured));
  const statements = captured.scripts[path].statements;
  // The totals are raw SQL, which Stowage runs on its main connection, not on a reader thread.
  assert.ok(statements.some((s) => !s.reader && /with recursive/i.test(s.sql)));
  const results = await replayed(path);
  const folders = results.find((r) => r.length === answer.folders.length && 'folder_no' in (r[0] as object));
  assert.deepEqual(
    (folders as { folder_no: string }[]).map((f) => f.folder_no),
    answer.folders.map((f) => f.folder_no),
  );
});

test('a request that is not a plain read is refused, not faked', async () => {
  const captured = await capturer.capture(['/api/v1/files/nosuchfile0']);
  assert.ok('refused' in captured && /answered 404/.test(captured.refused));
});
