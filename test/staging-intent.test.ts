// An upload's storage intent and its bytes, on local disk (src/uploads/staging.ts): the intent's
// insert runs while the bytes are written to a temporary file, but the object appears at its key
// only once the intent is in the database, so a crash can never leave an object nobody records.
// An insert that fails fails the upload and leaves nothing: no object, no temporary file, no
// intent. With a quota the intent still comes first (reservations update it). Real SQLite, real
// local disk.
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, test } from 'node:test';
import { stageBody } from '../src/uploads/staging.ts';
import { BlobRepository } from '../src/db/blobs.ts';
import type { LocalStorage } from '../src/storage/local.ts';
import { type Harness, makeHarness } from './helpers/harness.ts';

const harnesses: Harness[] = [];
after(async () => {
  for (const h of harnesses) await h.close();
});

/** A server's services on SQLite with local storage (not listening), and its first workspace. */
async function setup() {
  const h = await makeHarness('sqlite', { config: { storage: { driver: 'local', fsync: true } } });
  harnesses.push(h);
  const { db, blobs: store } = h.services;
  const storage = h.services.storage as LocalStorage;
  const repo = new BlobRepository(db.kysely);
  const intents = async () => (await db.kysely.selectFrom('storage_intents').select('storage_key').execute()).length;
  return { dir: storage.root, storage, store, repo, intents, ws: h.ws.workspace_id };
}

/** A body of `n` chunks of 64 KiB, one every few milliseconds (the bytes keep coming while the insert waits). */
function slowBody(n: number): Readable {
  let i = 0;
  return new Readable({
    read() {
      setTimeout(() => this.push(i++ < n ? Buffer.alloc(64 * 1024, i) : null), 2);
    },
  });
}

test('the object appears at its key only once its intent is in the database', async () => {
  const { dir, storage, store, repo, intents, ws } = await setup();
  let key = '';
  let keyExistedBeforeIntent = false;
  const blobs = {
    newKey: (ws: string) => (key = store.newKey(ws)),
    recordIntent: async (ws: string, k: string, reason: string) => {
      // The insert is slow: the bytes are all written before it lands.
      await new Promise((r) => setTimeout(r, 300));
      keyExistedBeforeIntent = existsSync(storage.localPath(k));
      await store.recordIntent(ws, k, reason);
    },
    reserve: store.reserve.bind(store),
    forget: store.forget.bind(store),
  };
  const started = Date.now();
  const staged = await stageBody({ storage, blobs, repo, graceMs: 60_000 }, ws, slowBody(4), {
    maxFileSize: 10 * 1024 * 1024,
  });
  assert.equal(staged.size, 4 * 64 * 1024);
  assert.equal(keyExistedBeforeIntent, false, 'no object at the key while its intent was not recorded');
  assert.ok(existsSync(storage.localPath(key)));
  assert.equal(await intents(), 1);
  assert.ok(Date.now() - started >= 300);
  assert.deepEqual(readdirSync(join(dir, 'tmp')), []);
});

test('an intent that cannot be recorded fails the upload and leaves nothing behind', async () => {
  const { dir, storage, store, repo, intents, ws } = await setup();
  let key = '';
  const blobs = {
    newKey: (ws: string) => (key = store.newKey(ws)),
    recordIntent: async () => {
      await new Promise((r) => setTimeout(r, 50));
      throw Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
    },
    reserve: store.reserve.bind(store),
    forget: store.forget.bind(store),
  };
  // 200 chunks, one every 2 ms or more: the failure at 50 ms must stop the write long before the end.
  let chunksRead = 0;
  let i = 0;
  const body = new Readable({
    read() {
      chunksRead++;
      setTimeout(() => this.push(i++ < 200 ? Buffer.alloc(64 * 1024, i) : null), 2);
    },
  });
  const started = Date.now();
  await assert.rejects(
    stageBody({ storage, blobs, repo, graceMs: 60_000 }, ws, body, { maxFileSize: 100 * 1024 * 1024 }),
    /database is locked/,
  );
  assert.ok(chunksRead < 150, `the write stopped early (${chunksRead} of 200 chunks read)`);
  assert.ok(Date.now() - started < 400, 'the upload failed once the intent did, not at the end of the body');
  assert.equal(existsSync(storage.localPath(key)), false);
  assert.deepEqual(readdirSync(join(dir, 'tmp')), [], 'the temporary file is removed');
  assert.equal(await intents(), 0);
});

test('a body that fails before its intent is recorded leaves no intent behind once both have settled', async () => {
  const { dir, storage, store, repo, intents, ws } = await setup();
  let recorded!: Promise<void>;
  const blobs = {
    newKey: (ws: string) => store.newKey(ws),
    recordIntent: (ws: string, k: string, reason: string) => {
      recorded = new Promise<void>((r) => setTimeout(r, 200)).then(() => store.recordIntent(ws, k, reason));
      return recorded;
    },
    reserve: store.reserve.bind(store),
    forget: store.forget.bind(store),
  };
  const body = new Readable({ read() {} });
  body.push(Buffer.alloc(1000));
  setTimeout(() => body.destroy(new Error('client went away')), 20);
  await assert.rejects(
    stageBody({ storage, blobs, repo, graceMs: 60_000 }, ws, body, { maxFileSize: 1024 * 1024 }),
    /client went away/,
  );
  await recorded;
  assert.equal(await intents(), 0, 'the forget waited for the insert');
  assert.deepEqual(readdirSync(join(dir, 'tmp')), []);
});

test('with a quota the intent is recorded before the first byte is written', async () => {
  const { storage, store, repo, ws } = await setup();
  let intentDone = false;
  let wroteBeforeIntent = false;
  const blobs = {
    newKey: (ws: string) => store.newKey(ws),
    recordIntent: async (ws: string, k: string, reason: string) => {
      await new Promise((r) => setTimeout(r, 100));
      await store.recordIntent(ws, k, reason);
      intentDone = true;
    },
    reserve: store.reserve.bind(store),
    forget: store.forget.bind(store),
  };
  const body = new Readable({
    read() {
      if (!intentDone) wroteBeforeIntent = true;
      this.push(Buffer.alloc(1000));
      this.push(null);
    },
  });
  const staged = await stageBody({ storage, blobs, repo, graceMs: 60_000 }, ws, body, {
    maxFileSize: 1024 * 1024,
    quotaBytes: 10 * 1024 * 1024,
    expectedBytes: 1000,
  });
  assert.equal(staged.size, 1000);
  assert.equal(wroteBeforeIntent, false, 'the body was not read before the intent');
});
