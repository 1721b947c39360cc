// The rendition cache's budget (issue 19 item 4, src/services/rendition-cache.ts): least recently
// used renditions go when their bytes pass STOWAGE_RENDITION_CACHE_BYTES, on local disk and S3,
// on SQLite and PostgreSQL; renditions of a deleted or replaced file go with it; two nodes
// evicting at once count nothing twice; requests racing an eviction never get a 5xx.
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import sharp from 'sharp';
import type { StorageConfig } from '../src/config.ts';
import { migrateTo, migrateToLatest } from '../src/db/migrations.ts';
import { InProcessJobQueue } from '../src/jobs/in-process.ts';
import { JobMetrics } from '../src/jobs/metrics.ts';
import { scheduleRenditionBackfill } from '../src/jobs/renditions.ts';
import { BACKFILL_SETTING, type BackfillResult, RenditionBackfill } from '../src/services/rendition-backfill.ts';
import { RenditionCache } from '../src/services/rendition-cache.ts';
import { DIALECTS, freshPostgres, type Harness, makeHarness, addFile } from './helpers/harness.ts';
import { externalService } from './helpers/services.ts';
import { freshS3Storage } from './helpers/storage.ts';

const s3 = externalService('STOWAGE_TEST_S3_ENDPOINT', 'an S3-compatible server (scripts/start-swift.sh)');

const STORAGES: { name: string; skip: string | false; make(): Promise<StorageConfig> }[] = [
  { name: 'local', skip: false, make: async () => ({ driver: 'local', fsync: false }) },
  { name: 's3', skip: s3.skip, make: () => freshS3Storage() },
];

const image = (color: string) =>
  sharp({ create: { width: 640, height: 480, channels: 3, background: color } })
    .composite([
      {
        input: { create: { width: 200, height: 100, channels: 3, background: '#ffffff' } },
        top: 40,
        left: 60,
      },
    ])
    .jpeg()
    .toBuffer();

const add = addFile;

async function rows(h: Harness) {
  const all = await h.services.db.kysely.selectFrom('renditions').selectAll().orderBy('key').execute();
  return all.map((r) => ({ ...r, bytes: Number(r.bytes) }));
}

async function ledgerMatches(h: Harness) {
  const all = await rows(h);
  const total = await h.services.renditions.repo.total();
  assert.equal(
    total.bytes,
    all.reduce((n, r) => n + r.bytes, 0),
    'the counter is the sum of the rows',
  );
  assert.equal(total.count, all.filter((r) => r.bytes > 0).length);
  return total;
}

async function exists(h: Harness, key: string) {
  return (await h.services.storage.stat(key)) !== null;
}

async function blobKey(h: Harness, sha256: string) {
  const b = await h.services.db.kysely
    .selectFrom('blobs')
    .select('storage_key')
    .where('sha256', '=', sha256)
    .executeTakeFirstOrThrow();
  return b.storage_key;
}

for (const storage of STORAGES)
  for (const dialect of DIALECTS)
    describe(`rendition cache on ${storage.name} storage, ${dialect.name}`, {
      skip: storage.skip || dialect.skip,
    }, () => {
      let h: Harness;
      let base: string;
      const get = async (path: string) => {
        const res = await fetch(`${base}/${h.ws.workspace_id}/${path}`);
        return { status: res.status, body: Buffer.from(await res.arrayBuffer()) };
      };

      before(async () => {
        // No bytes in memory: every answer reads storage, where eviction deletes under it.
        // Lookups are remembered for a minute, not the default second: on a loaded machine the
        // renders of one test outlast a second, and "the second request is a hit" must not race it.
        h = await makeHarness(dialect.name, {
          config: { storage: await storage.make(), deliveryHotCacheBytes: 0, deliveryLookupTtlMs: 60_000 },
        });
        base = await h.app.listen({ host: '127.0.0.1', port: 0 });
        await add(h, 'photo.jpg', await image('#3060a0'));
      });
      after(() => h?.close());

      test('past the budget the least recently used go, from storage and ledger; used ones stay; an evicted one is made again', async () => {
        const widths = [100, 120, 140, 160, 180, 200, 220, 240];
        for (const w of widths) assert.equal((await get(`w_${w}/photo.jpg`)).status, 200);
        let ledger = await rows(h);
        assert.equal(ledger.length, widths.length);
        assert.ok(ledger.every((r) => r.bytes > 0));
        const total = await ledgerMatches(h);
        assert.ok(total.bytes > 0);
        // Their ages set by hand, oldest first in width order; then the two oldest are used again.
        const keys = new Map(widths.map((w) => [w, ledger.find((r) => r.key.includes(`/w_${w}.`))!.key]));
        const keyOf = (w: number) => keys.get(w)!;
        for (const [i, w] of widths.entries())
          await h.services.db.kysely
            .updateTable('renditions')
            .set({ last_used_at: new Date(Date.UTC(2020, 0, 1, 0, 0, i)).toISOString() })
            .where('key', '=', keyOf(w))
            .execute();
        // The second request of an address is answered from a remembered lookup, or from memory
        // before the web framework (the fast path): both report the hit.
        const fastBefore = h.services.deliveryCache.stats.fastHits + h.services.deliveryCache.stats.lookupHits;
        for (const w of [100, 120]) assert.equal((await get(`w_${w}/photo.jpg`)).status, 200);
        assert.ok(
          h.services.deliveryCache.stats.fastHits + h.services.deliveryCache.stats.lookupHits > fastBefore,
          'served from memory',
        );
        await h.services.renditions.flush();
        // A budget of about half: eviction goes down to 90% of it.
        const budget = Math.floor(total.bytes / 2);
        const cache = new RenditionCache(h.services.db, h.services.storage, budget);
        const result = await cache.evict();
        assert.ok(result.evicted > 0);
        const after = await ledgerMatches(h);
        assert.ok(after.bytes <= budget, `${after.bytes} <= ${budget}`);
        assert.ok(after.bytes <= Math.floor(budget * 0.9));
        ledger = await rows(h);
        const kept = new Set(ledger.map((r) => r.key));
        assert.ok(kept.has(keyOf(100)) && kept.has(keyOf(120)), 'the recently used are kept');
        assert.ok(!kept.has(keyOf(140)), 'the least recently used is gone from the ledger');
        for (const w of widths) assert.equal(await exists(h, keyOf(w)), kept.has(keyOf(w)), `w_${w} in storage`);
        // A second run under the budget does nothing.
        assert.equal((await cache.evict()).evicted, 0);
        // Made again on request once this node's remembered lookup has expired (1 s; forgotten here
        // at once): until then its copy in memory may still be served, which costs no storage.
        h.services.deliveryCache.invalidate(h.ws.workspace_id);
        const made = h.services.delivery.stats.renditionsMade;
        const again = await get('w_140/photo.jpg');
        assert.equal(again.status, 200);
        assert.equal((await sharp(again.body).metadata()).width, 140);
        assert.equal(h.services.delivery.stats.renditionsMade, made + 1);
        assert.ok(await exists(h, keyOf(140)));
        assert.ok((await rows(h)).some((r) => r.key === keyOf(140) && r.bytes > 0));
        await ledgerMatches(h);
      });

      test('deleting a file removes its renditions from storage and ledger', async () => {
        const record = await add(h, 'gone.jpg', await image('#a03030'));
        for (const w of [50, 60]) assert.equal((await get(`w_${w}/gone.jpg`)).status, 200);
        const owner = await blobKey(h, record.hash);
        const mine = (await rows(h)).filter((r) => r.owner === owner);
        assert.equal(mine.length, 2);
        await h.services.files.delete(h.ws.workspace_id, record.file_no);
        assert.deepEqual(
          (await rows(h)).filter((r) => r.owner === owner),
          [],
        );
        for (const r of mine) assert.equal(await exists(h, r.key), false);
        await ledgerMatches(h);
      });

      test('replacing a file: its old renditions are never served again, and are removed', async () => {
        const first = await add(h, 'swap.jpg', await image('#ff0000'));
        const red = await get('w_64/swap.jpg');
        assert.equal(red.status, 200);
        const oldOwner = await blobKey(h, first.hash);
        const old = (await rows(h)).filter((r) => r.owner === oldOwner);
        assert.equal(old.length, 1);
        await add(h, 'swap.jpg', await image('#0000ff'));
        const blue = await get('w_64/swap.jpg');
        assert.equal(blue.status, 200);
        const px = await sharp(blue.body).extract({ left: 2, top: 2, width: 1, height: 1 }).raw().toBuffer();
        assert.ok(px[2] > 200 && px[0] < 60, `the new content is served (${[...px]})`);
        assert.deepEqual(
          (await rows(h)).filter((r) => r.owner === oldOwner),
          [],
        );
        assert.equal(await exists(h, old[0].key), false);
        await ledgerMatches(h);
      });

      test('a rendition evicted under a remembered lookup is made again, not answered 404', async () => {
        // A private file takes the route (never the fast path), which reads the remembered lookup.
        const record = await add(h, 'private.jpg', await image('#707020'));
        await h.services.files.update(h.ws.workspace_id, record.file_no, { is_private: true });
        const url = h.services.deliverySigner.sign(
          `${base}/${h.ws.workspace_id}/w_90/private.jpg`,
          Math.floor(Date.now() / 1000) + 600,
        );
        const first = await fetch(url);
        assert.equal(first.status, 200);
        await first.arrayBuffer();
        // Every rendition over a 1-byte budget goes (the lookup stays remembered for 1 s).
        await new RenditionCache(h.services.db, h.services.storage, 1).evict();
        assert.deepEqual(await rows(h), []);
        const made = h.services.delivery.stats.renditionsMade;
        const again = await fetch(url);
        assert.equal(again.status, 200);
        assert.equal((await sharp(Buffer.from(await again.arrayBuffer())).metadata()).width, 90);
        assert.equal(h.services.delivery.stats.renditionsMade, made + 1);
        await ledgerMatches(h);
      });

      test('requests racing evictions never get a 5xx', async () => {
        const widths = [300, 310, 320, 330, 340, 350];
        for (const w of widths) assert.equal((await get(`w_${w}/photo.jpg`)).status, 200);
        const total = await ledgerMatches(h);
        const cache = new RenditionCache(h.services.db, h.services.storage, Math.floor(total.bytes / 3));
        const statuses: number[] = [];
        const requests = async () => {
          for (let i = 0; i < 6; i++) {
            const got = await Promise.all(widths.map((w) => get(`w_${w}/photo.jpg`)));
            for (const g of got) statuses.push(g.status);
          }
        };
        const evictions = async () => {
          for (let i = 0; i < 6; i++) await cache.evict();
        };
        await Promise.all([requests(), requests(), evictions(), evictions()]);
        assert.deepEqual(
          statuses.filter((s) => s !== 200),
          [],
        );
        await ledgerMatches(h);
      });

      test('renditions made before the ledger are backfilled once from storage, counted once, and evicted oldest first', async () => {
        const oldFile = await add(h, 'old.jpg', await image('#30a060'));
        for (const w of [20, 30, 40]) assert.equal((await get(`w_${w}/old.jpg`)).status, 200);
        // An origin's rendition, named as delivery names them (owner: the origin object's prefix).
        const originOwner = `${h.ws.workspace_id}/origins/src_backfill/${'ab'.repeat(20)}`;
        const originKey = `${originOwner}.renditions/w_10.jpg`;
        await h.services.storage.put(originKey, Readable.from([await image('#102030')]));
        // Not renditions: the originals, and a key that only looks like one.
        await h.services.storage.put(
          `${h.ws.workspace_id}/blobs/x.renditions/a/b.jpg`,
          Readable.from([Buffer.from('x')]),
        );
        const inStorage = new Map<string, { size: number; modified: string }>();
        for await (const o of h.services.storage.list(`${h.ws.workspace_id}/`))
          if (o.key.includes('.renditions/') && !o.key.includes('/x.renditions/'))
            inStorage.set(o.key, { size: o.size, modified: o.lastModified.toISOString() });
        assert.ok(inStorage.size >= 4 && inStorage.has(originKey));
        // As a database from before migration 0009 would be, except one row a live render wrote
        // meanwhile (counted already: the backfill must not count it again).
        const kept = [...inStorage.keys()].find((k) => k.includes('/w_30.'))!;
        const db = h.services.db.kysely;
        await db.deleteFrom('renditions').where('key', '<>', kept).execute();
        const keptBytes = inStorage.get(kept)!.size;
        await db.updateTable('rendition_totals').set({ bytes: keptBytes, count: 1 }).where('id', '=', 1).execute();
        await db.deleteFrom('settings').where('key', '=', BACKFILL_SETTING).execute();
        assert.equal((await rows(h)).length, 1);

        const walkStart = new Date().toISOString();
        const backfill = new RenditionBackfill(h.services.db, h.services.storage);
        const first = await backfill.run();
        assert.equal(first.walked, true);
        assert.equal(first.found, inStorage.size);
        assert.equal(first.added, inStorage.size - 1);
        const ledger = await rows(h);
        assert.deepEqual(
          ledger.map((r) => r.key),
          [...inStorage.keys()].sort(),
        );
        for (const r of ledger) {
          assert.equal(r.bytes, inStorage.get(r.key)!.size, r.key);
          assert.equal(r.workspace_id, h.ws.workspace_id);
          // Last used when written, or when the walk began if storage says later (clock skew,
          // times rounded up to the second).
          const written = inStorage.get(r.key)!.modified;
          if (r.key !== kept)
            assert.ok(
              r.last_used_at === written || (r.last_used_at < written && r.last_used_at >= walkStart),
              `${r.last_used_at} for ${written}`,
            );
        }
        assert.equal(ledger.find((r) => r.key === originKey)?.owner, originOwner);
        const blob = await blobKey(h, oldFile.hash);
        assert.deepEqual(
          ledger.filter((r) => r.owner === blob).map((r) => r.key.slice(r.key.lastIndexOf('/') + 1)),
          ['w_20.f_jpg.jpg', 'w_30.f_jpg.jpg', 'w_40.f_jpg.jpg'],
        );
        const total = await ledgerMatches(h);
        assert.equal(
          total.bytes,
          [...inStorage.values()].reduce((n, o) => n + o.size, 0),
        );

        // Done once: the next run reads one row. Forced again (as after a crash before the
        // completion was recorded), it adds nothing.
        assert.deepEqual(await backfill.run(), { walked: false, workspaces: 0, found: 0, added: 0, bytes: 0 });
        await db.deleteFrom('settings').where('key', '=', BACKFILL_SETTING).execute();
        const again = await new RenditionBackfill(h.services.db, h.services.storage).run();
        assert.equal(again.found, inStorage.size);
        assert.equal(again.added, 0);
        assert.deepEqual(await rows(h), ledger);
        assert.deepEqual(await h.services.renditions.repo.total(), total);
        // A run that stopped after this workspace resumes past it.
        await db
          .updateTable('settings')
          .set({ value: `after:${h.ws.workspace_id}` })
          .where('key', '=', BACKFILL_SETTING)
          .execute();
        const resumed = await new RenditionBackfill(h.services.db, h.services.storage).run();
        assert.equal(resumed.found, 0);
        assert.equal(
          (await db.selectFrom('settings').select('value').where('key', '=', BACKFILL_SETTING).executeTakeFirst())
            ?.value,
          'done',
        );

        // A rendition made now is newer than every backfilled one: a budget that holds it alone
        // evicts all of those and keeps it.
        assert.equal((await get('w_55/old.jpg')).status, 200);
        const fresh = (await rows(h)).find((r) => r.key.includes('/w_55.'))!;
        assert.ok(fresh.bytes > 0);
        const budget = Math.ceil(fresh.bytes / 0.9) + 1;
        const result = await new RenditionCache(h.services.db, h.services.storage, budget).evict();
        assert.deepEqual(
          (await rows(h)).map((r) => r.key),
          [fresh.key],
        );
        assert.equal(result.evicted, inStorage.size);
        for (const k of inStorage.keys()) assert.equal(await exists(h, k), false, k);
        assert.ok(await exists(h, fresh.key));
        await ledgerMatches(h);
        await h.services.storage.delete(`${h.ws.workspace_id}/blobs/x.renditions/a/b.jpg`);
      });
    });

describe('two nodes on one PostgreSQL database evicting at once', { skip: DIALECTS[1].skip || s3.skip }, () => {
  let a: Harness;
  let b: Harness;
  let db: { url: string; drop(): Promise<void> };

  before(async () => {
    db = await freshPostgres();
    const storage = await freshS3Storage();
    // Budget 1 byte: every rendition is over it, so both nodes try to evict all of them.
    a = await makeHarness('sqlite', { config: { databaseUrl: db.url, storage, renditionCacheBytes: 1 } });
    b = await makeHarness('sqlite', { config: { databaseUrl: db.url, storage, renditionCacheBytes: 1 } });
  });
  after(async () => {
    await a?.close();
    await b?.close();
    await db?.drop();
  });

  test('nothing is removed twice, nothing crashes, the counter stays the sum of the rows', async () => {
    await add(a, 'p.jpg', await image('#208020'));
    const base = await a.app.listen({ host: '127.0.0.1', port: 0 });
    for (let w = 40; w < 100; w += 4) {
      const res = await fetch(`${base}/${a.ws.workspace_id}/w_${w}/p.jpg`);
      assert.equal(res.status, 200);
      await res.arrayBuffer();
    }
    const before = await rows(a);
    assert.equal(before.length, 15);
    const [ra, rb] = await Promise.all([a.services.renditions.evict(), b.services.renditions.evict()]);
    assert.equal(ra.evicted + rb.evicted, before.length, 'each rendition removed by exactly one node');
    assert.equal(
      ra.bytes + rb.bytes,
      before.reduce((n, r) => n + r.bytes, 0),
    );
    assert.deepEqual(await rows(a), []);
    assert.deepEqual(await a.services.renditions.repo.total(), { bytes: 0, count: 0 });
    for (const r of before) assert.equal(await exists(a, r.key), false);
    // Metrics: the gauge reads the shared total; each node counts what it evicted.
    const metric = async (h: Harness, name: string) =>
      Number(/ (\d+)$/m.exec(await h.services.metrics.registry.getSingleMetricAsString(name))?.[1]);
    assert.equal(await metric(a, 'stowage_rendition_cache_bytes'), 0);
    assert.equal(await metric(a, 'stowage_rendition_evictions_total'), ra.evicted);
    assert.equal(await metric(b, 'stowage_rendition_evictions_total'), rb.evicted);
    assert.equal(await metric(b, 'stowage_rendition_evicted_bytes_total'), rb.bytes);
  });
});

for (const dialect of DIALECTS)
  describe(`migration 0009 on a populated ${dialect.name} database`, { skip: dialect.skip }, () => {
    let h: Harness;
    before(async () => {
      h = await makeHarness(dialect.name);
    });
    after(() => h?.close());

    test('down to 0008 and up again: files are kept, the ledger starts empty and counts from there', async () => {
      for (let i = 0; i < 20; i++)
        await add(h, `f${i}.jpg`, await image(`#${(i * 12 + 16).toString(16).padStart(2, '0')}4080`));
      await migrateTo(h.services.db.kysely, '0008_signed_transformations');
      await migrateToLatest(h.services.db.kysely);
      const files = await h.services.db.kysely.selectFrom('files').select('name').execute();
      assert.equal(files.length, 20);
      assert.deepEqual(await h.services.renditions.repo.total(), { bytes: 0, count: 0 });
      const base = await h.app.listen({ host: '127.0.0.1', port: 0 });
      const res = await fetch(`${base}/${h.ws.workspace_id}/w_32/f3.jpg`);
      assert.equal(res.status, 200);
      await res.arrayBuffer();
      assert.equal((await ledgerMatches(h)).count, 1);
    });
  });

describe('the backfill job', () => {
  let h: Harness;
  before(async () => {
    h = await makeHarness('sqlite');
  });
  after(() => h?.close());

  test('runs at start, records that it is done, and only reads that afterwards', async () => {
    const record = await add(h, 'j.jpg', await image('#604020'));
    const key = `${await blobKey(h, record.hash)}.renditions/w_8.f_jpg.jpg`;
    await h.services.storage.put(key, Readable.from([Buffer.alloc(1234)]));
    const silent = { debug() {}, info() {}, warn() {}, error() {} };
    const runs: BackfillResult[] = [];
    const backfill = new RenditionBackfill(h.services.db, h.services.storage);
    const queue = new InProcessJobQueue(silent, new JobMetrics(), 1);
    const counted = {
      run: async () => {
        const r = await backfill.run();
        runs.push(r);
        return r;
      },
    };
    scheduleRenditionBackfill(queue, counted, silent);
    await queue.start();
    await queue.runDue('renditions.backfill');
    await queue.stop();
    assert.equal(runs.length, 1);
    assert.equal(runs[0].added, 1);
    assert.deepEqual(
      (await rows(h)).map((r) => [r.key, r.bytes]),
      [[key, 1234]],
    );
    assert.deepEqual(await h.services.renditions.repo.total(), { bytes: 1234, count: 1 });
    assert.equal((await backfill.run()).walked, false);
  });
});
