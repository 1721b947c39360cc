// An upload of new bytes under a free name commits at once, outside the long transaction
// (BlobRepository.adoptWithFile: one statement on PostgreSQL, one synchronous transaction of
// prepared statements on SQLite); every other case takes the transaction path. These
// tests drive the statement into each of its outcomes and check that it did all or nothing, then
// check through the API which uploads take which path and that their answers do not change.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { newUuid } from '../src/crypto/ids.ts';
import { BlobRepository } from '../src/db/blobs.ts';
import { holdWorkspace, inTransaction, nowIso } from '../src/db/database.ts';
import type { BlobRow, FileRow } from '../src/db/schema.ts';
import { DIALECTS, type Harness, makeHarness } from './helpers/harness.ts';

for (const dialect of DIALECTS)
  describe(`commit at once on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    let base: string;
    let repo: BlobRepository;
    before(async () => {
      h = await makeHarness(dialect.name, { config: { storage: { driver: 'local', fsync: false } } });
      base = await h.app.listen({ host: '127.0.0.1', port: 0 });
      repo = new BlobRepository(h.services.db.kysely);
    });
    after(() => h?.close());

    const ws = () => h.ws.workspace_id;
    const state = async () => {
      const k = h.services.db.kysely;
      const w = await k
        .selectFrom('workspaces')
        .select(['used_bytes', 'reserved_bytes'])
        .where('id', '=', ws())
        .executeTakeFirstOrThrow();
      const count = async (table: 'blobs' | 'files' | 'storage_intents') =>
        Number(
          (
            await k
              .selectFrom(table)
              .select((eb) => eb.fn.countAll().as('n'))
              .where('workspace_id', '=', ws())
              .executeTakeFirstOrThrow()
          ).n,
        );
      return {
        used: Number(w.used_bytes),
        reserved: Number(w.reserved_bytes),
        blobs: await count('blobs'),
        files: await count('files'),
        intents: await count('storage_intents'),
      };
    };
    /** A staged blob as the statement takes it: an intent holding `size` bytes, and its row. */
    const staged = async (size: number, sha = randomBytes(32).toString('hex')): Promise<BlobRow> => {
      const key = `${ws()}/blobs/${newUuid()}`;
      await repo.recordIntent(ws(), key, 'upload');
      return { id: newUuid(), workspace_id: ws(), sha256: sha, size, storage_key: key, created_at: nowIso() };
    };
    const fileOf = (blob: BlobRow, name: string, folderId: string | null = null): FileRow => ({
      id: newUuid(),
      file_no: newUuid().slice(0, 12),
      workspace_id: ws(),
      folder_id: folderId,
      name,
      is_private: 0,
      created_at: nowIso(),
      blob_id: blob.id,
      size: blob.size,
      mime_type: 'application/octet-stream',
      extension: 'bin',
      format: null,
      width: null,
      height: null,
      duration: null,
      media: null,
      tags: '["a"]',
      metadata: '{}',
      custom_id: null,
      is_duplicate: 0,
      upload_source: 'direct',
      updated_at: nowIso(),
    });

    test('new bytes under a free name: the blob, the file, the usage, and the intent gone, together', async () => {
      const before = await state();
      const blob = await staged(1000);
      assert.equal(await repo.adoptWithFile(blob, fileOf(blob, 'one.bin')), true);
      const now = await state();
      assert.deepEqual(now, { ...before, used: before.used + 1000, blobs: before.blobs + 1, files: before.files + 1 });
    });

    test('a taken name, known bytes, a full quota or a folder gone: nothing changes', async () => {
      const first = await staged(500);
      assert.equal(await repo.adoptWithFile(first, fileOf(first, 'taken.bin')), true);
      const cases: [string, () => Promise<[BlobRow, FileRow]>][] = [
        [
          'taken name',
          async () => {
            const b = await staged(10);
            return [b, fileOf(b, 'taken.bin')];
          },
        ],
        [
          'known bytes',
          async () => {
            const b = await staged(500, first.sha256);
            return [b, fileOf(b, 'other.bin')];
          },
        ],
        [
          'folder gone',
          async () => {
            const b = await staged(10);
            return [b, fileOf(b, 'f.bin', newUuid())];
          },
        ],
      ];
      for (const [label, make] of cases) {
        const [blob, file] = await make();
        const before = await state();
        assert.equal(await repo.adoptWithFile(blob, file), false, label);
        assert.deepEqual(await state(), before, label);
      }
      // Over quota: the blob row is inserted and the intent deleted before the charge fails, so
      // the commit must undo itself (stowage_undo on PostgreSQL, a rollback on SQLite), not just skip the file.
      const used = (await state()).used;
      await h.services.workspaces.setLimits(ws(), { quotaBytes: used + 50 });
      try {
        const blob = await staged(100);
        const before = await state();
        assert.equal(await repo.adoptWithFile(blob, fileOf(blob, 'big.bin')), false);
        assert.deepEqual(await state(), before);
      } finally {
        await h.services.workspaces.setLimits(ws(), { quotaBytes: null });
      }
    });

    const direct = async (data: Buffer, name: string, fields: Record<string, string> = {}) => {
      const form = new FormData();
      form.append('file_name', name);
      for (const [k, v] of Object.entries(fields)) form.append(k, v);
      form.append('file', new Blob([new Uint8Array(data)]), name);
      const res = await fetch(`${base}/api/v1/uploads`, {
        method: 'POST',
        body: form,
        headers: { 'x-api-key': h.ws.private_key },
      });
      return { status: res.status, body: (await res.json()) as any };
    };

    test('through the API: which uploads take the one statement, and their answers', async () => {
      const intentsBefore = (await state()).intents;
      const calls: boolean[] = [];
      const store = h.services.blobs;
      const real = store.commitWithFile.bind(store);
      store.commitWithFile = async (...args) => {
        const blob = await real(...args);
        calls.push(blob !== null);
        return blob;
      };
      try {
        const data = randomBytes(3000);
        const a = await direct(data, 'api.bin', { tags: 'x,y', metadata: '{"k":1}' });
        assert.equal(a.status, 201);
        assert.deepEqual(calls, [true], 'a new file at the root: one statement');
        assert.equal(a.body.hash, createHash('sha256').update(data).digest('hex'));
        assert.deepEqual(
          [a.body.tags, a.body.metadata, a.body.is_duplicate, a.body.path],
          [['x', 'y'], { k: 1 }, false, '/api.bin'],
        );
        const listed = await h.services.files.get(ws(), a.body.file_no);
        assert.equal(listed.name, 'api.bin');

        // The same name again: the statement does nothing, the transaction replaces the file.
        const bData = randomBytes(2000);
        const b = await direct(bData, 'api.bin');
        assert.equal(b.status, 201);
        assert.deepEqual(calls, [true, false]);
        assert.equal(b.body.file_no, a.body.file_no);
        assert.equal(b.body.size, 2000);

        // Known bytes: nothing done by the statement; a duplicate record from the transaction.
        const c = await direct(bData, 'copy.bin');
        assert.deepEqual([c.status, c.body.is_duplicate, calls.at(-1)], [201, true, false]);

        // A folder that does not exist yet is made in the transaction; the next upload there is one statement.
        const d = await direct(randomBytes(100), 'in.bin', { folder: 'new/folder' });
        assert.equal(d.status, 201);
        assert.equal(calls.length, 3, 'a missing folder skips the statement');
        const e = await direct(randomBytes(100), 'in2.bin', { folder: 'new/folder' });
        assert.deepEqual(
          [e.status, e.body.path, e.body.folder_no, calls.at(-1)],
          [201, '/new/folder/in2.bin', d.body.folder_no, true],
        );
      } finally {
        store.commitWithFile = real;
      }
      const s = await state();
      assert.equal(s.intents, intentsBefore, 'no intent left behind');
      const blobsTotal = await h.services.db.kysely
        .selectFrom('blobs')
        .select((eb) => eb.fn.sum<string>('size').as('n'))
        .where('workspace_id', '=', ws())
        .executeTakeFirstOrThrow();
      assert.equal(s.used, Number(blobsTotal.n), 'usage is the sum of the blobs');
    });

    test("the same new bytes in an upload's transaction at once: the statement waits its turn, neither fails", async () => {
      // The upload's transaction holds the workspace's row first (holdWorkspace), then adds its
      // blob. The statement took the blob's key before the workspace's row: on PostgreSQL, with
      // the same bytes, each waited for the other until the server broke the deadlock (500).
      const sha = randomBytes(32).toString('hex');
      const mine = await staged(500, sha);
      const theirs = await staged(500, sha);
      const before = await state();
      const k = h.services.db.kysely;
      let release: () => void = () => {};
      const held = new Promise<void>((r) => {
        release = r;
      });
      const transaction = inTransaction(k, async (trx) => {
        await holdWorkspace(trx, ws());
        await held;
        return new BlobRepository(trx).adopt(theirs);
      });
      await new Promise((r) => setTimeout(r, 50));
      const statement = repo.adoptWithFile(mine, fileOf(mine, 'same-bytes.bin'));
      await new Promise((r) => setTimeout(r, 200));
      release();
      const [adopted, filed] = await Promise.all([transaction, statement]);
      // Whichever went first: one blob of these bytes, charged once; a statement that found them
      // known already did nothing, and its upload takes the transaction path (not checked here).
      assert.equal(adopted === 'adopted' || adopted === 'exists', true, String(adopted));
      const after = await state();
      assert.equal(after.blobs, before.blobs + 1);
      assert.equal(after.used, before.used + 500);
      assert.equal(after.files, before.files + (filed ? 1 : 0));
    });

    test('parallel uploads of new files: all stored, usage exact', async () => {
      const before = await state();
      const results = await Promise.all(
        Array.from({ length: 24 }, (_, i) => direct(randomBytes(1000 + i), `par-${i}.bin`)),
      );
      assert.deepEqual(
        results.map((r) => r.status),
        results.map(() => 201),
      );
      const now = await state();
      assert.equal(now.files, before.files + 24);
      assert.equal(
        now.used - before.used,
        results.reduce((n, r) => n + r.body.size, 0),
      );
    });
  });
