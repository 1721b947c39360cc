// PostgreSQL prepared statements on the upload path (src/db/pg-prepared.ts): the API-key check,
// the storage intent and the one-statement commit go by name, in sessions that plan each run for
// its values until `files` is large; STOWAGE_PG_PREPARED_STATEMENTS=false sends everything
// unnamed, as Kysely does. Either way the answers are the same. A real PostgreSQL server.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { GENERIC_FROM, prepareOn, preparedNaming, recheckPlanMode } from '../src/db/pg-prepared.ts';
import { DIALECTS, type Harness, makeHarness } from './helpers/harness.ts';

const postgres = DIALECTS.find((d) => d.name === 'postgres')!;

for (const prepare of [true, false])
  describe(`upload path with STOWAGE_PG_PREPARED_STATEMENTS=${prepare}`, { skip: postgres.skip }, () => {
    let h: Harness;
    let base: string;
    before(async () => {
      h = await makeHarness('postgres', {
        config: { pgPreparedStatements: prepare, storage: { driver: 'local', fsync: false } },
      });
      base = await h.app.listen({ host: '127.0.0.1', port: 0 });
    });
    after(() => h?.close());

    const upload = async (name: string, body: string) => {
      const form = new FormData();
      form.append('file_name', name);
      form.append('file', new Blob([body]), name);
      const res = await fetch(`${base}/api/v1/uploads`, {
        method: 'POST',
        headers: { 'x-api-key': h.ws.public_key },
        body: form,
      });
      return { status: res.status, json: (await res.json()) as Record<string, unknown> };
    };

    test('uploads answer the same, and the session prepares what it should', async () => {
      const first = await upload('a.txt', 'first file');
      assert.equal(first.status, 201, JSON.stringify(first.json));
      assert.equal(first.json.name, 'a.txt');
      // Same name from a public key: a fresh name (the commit-at-once statement sees it taken).
      const second = await upload('a.txt', 'second file');
      assert.equal(second.status, 201);
      assert.notEqual(second.json.name, 'a.txt');
      // Same bytes again: a duplicate of the first.
      const third = await upload('b.txt', 'first file');
      assert.equal(third.status, 201);
      for (let i = 0; i < 3; i++) assert.equal((await upload(`c${i}.txt`, `body ${i}`)).status, 201);

      const k = h.services.db.kysely;
      // Sequential requests reuse the pool's most recently released connection: the one read here.
      const { rows } = await sql<{
        name: string;
        statement: string;
        mode: string;
      }>`select p.name, p.statement, current_setting('plan_cache_mode') as mode from pg_prepared_statements p
         right join (select 1) one on true`.execute(k);
      const names = rows.filter((r) => r.name !== null);
      if (prepare) {
        assert.equal(rows[0].mode, 'force_custom_plan');
        const texts = names.map((r) => r.statement).join('\n');
        assert.match(texts, /insert into "storage_intents"/);
        assert.match(texts, /with hold as .* ins as/s);
        assert.match(texts, /from "api_keys"/);
        for (const r of names) assert.match(r.name, /^stowage_\d+$/);
      } else {
        assert.equal(rows[0].mode, 'auto');
        assert.deepEqual(names, []);
      }
      const count = await k
        .selectFrom('files')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('workspace_id', '=', h.ws.workspace_id)
        .executeTakeFirstOrThrow();
      assert.equal(Number(count.n), 6);
    });

    if (prepare)
      test('a connection keeps custom plans while files is small, and generic ones once it is large', async (t) => {
        // A pool of one connection that prepares as Stowage's does; `every`: how often it asks again.
        const preparingPool = (every?: number) => {
          const pool = new pg.Pool({ connectionString: h.config.databaseUrl, max: 1 });
          pool.on('connect', prepareOn);
          if (every !== undefined) pool.on('acquire', (client) => recheckPlanMode(client, every));
          return pool;
        };
        // The mode of the pool's connection, and what a named statement run six times on it does.
        const modeOf = async (pool: pg.Pool) => {
          const client = await pool.connect();
          try {
            const text = 'select id from files where id = $1';
            for (let i = 0; i < 6; i++) await client.query({ name: 'probe', text, values: [`f${i}`] });
            const { rows } = await client.query(
              "select current_setting('plan_cache_mode') as mode, generic_plans from pg_prepared_statements where name = 'probe'",
            );
            return { mode: rows[0].mode as string, generic: Number(rows[0].generic_plans) };
          } finally {
            client.release();
          }
        };
        // The mode a new connection gets.
        const connectionMode = async () => {
          const pool = preparingPool();
          try {
            return await modeOf(pool);
          } finally {
            await pool.end();
          }
        };
        // A new database: planned per run, so no generic plan made while the table is small.
        assert.deepEqual(await connectionMode(), { mode: 'force_custom_plan', generic: 0 });
        // Two connections opened now and kept: one without the checkout hook (as before the
        // re-check), one that asks at every checkout. While the table is small, asking changes nothing.
        const settled = preparingPool();
        const asking = preparingPool(0);
        t.after(() => Promise.all([settled.end(), asking.end()]));
        assert.deepEqual(await modeOf(settled), { mode: 'force_custom_plan', generic: 0 });
        assert.deepEqual(await modeOf(asking), { mode: 'force_custom_plan', generic: 0 });

        // The table grows past GENERIC_FROM rows (inserted directly, triggers and checks off) and
        // is analyzed: new connections keep the server's default, and a statement goes generic.
        const k = h.services.db.kysely;
        await k.transaction().execute(async (trx) => {
          await sql`set local session_replication_role = replica`.execute(trx);
          await sql`insert into files (id, file_no, workspace_id, folder_id, name, is_private, created_at, blob_id,
              size, mime_type, tags, metadata, is_duplicate, upload_source, updated_at)
            select 'big-' || g, 'big-' || g, 'absent', null, 'name-' || g, 0, '2026-01-01T00:00:00.000Z', 'absent',
              1, 'text/plain', '[]', '{}', 0, 'direct', '2026-01-01T00:00:00.000Z'
              from generate_series(1, ${GENERIC_FROM}) g`.execute(trx);
        });
        await sql`analyze files`.execute(k);
        const large = await connectionMode();
        assert.equal(large.mode, 'auto');
        assert.ok(large.generic > 0, `generic plans: ${large.generic}`);
        // The kept connection that asks again goes over at its next checkout; the one that never
        // asks still plans every run.
        const asked = await modeOf(asking);
        assert.equal(asked.mode, 'auto');
        assert.ok(asked.generic > 0, `generic plans after asking again: ${asked.generic}`);
        assert.deepEqual(await modeOf(settled), { mode: 'force_custom_plan', generic: 0 });
        await k.transaction().execute(async (trx) => {
          await sql`set local session_replication_role = replica`.execute(trx);
          await sql`delete from files where id like 'big-%'`.execute(trx);
        });
      });

    if (prepare)
      test('a server connection that lost its statements costs one request, then naming stops', async () => {
        const k = h.services.db.kysely;
        // As a transaction-mode pooler would: the connection pg believes prepared has nothing.
        await sql`deallocate all`.execute(k);
        const broken = await upload('d.txt', 'after deallocate');
        assert.equal(broken.status, 500);
        assert.equal(preparedNaming(), false);
        const next = await upload('e.txt', 'next one');
        assert.equal(next.status, 201, JSON.stringify(next.json));
        const again = await upload('f.txt', 'and the one after');
        assert.equal(again.status, 201);
      });
  });
