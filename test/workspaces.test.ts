// Workspaces and keys on both dialects: creation, hashing, revocation, first-start bootstrap.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { hashApiKey } from '../src/crypto/ids.ts';
import { createServices, type Services } from '../src/services/container.ts';
import { DIALECTS, freshPostgres, testConfig } from './helpers/harness.ts';

for (const dialect of DIALECTS) {
  describe(`workspaces and keys on ${dialect.name}`, { skip: dialect.skip }, () => {
    let s: Services;
    let drop: (() => Promise<void>) | undefined;
    let databaseUrl: string | undefined;
    const dataDir = mkdtempSync(join(tmpdir(), 'stowage-ws-'));
    before(async () => {
      if (dialect.name === 'postgres') {
        const db = await freshPostgres();
        databaseUrl = db.url;
        drop = db.drop;
      }
      s = await createServices(testConfig(dataDir, { databaseUrl }));
    });
    after(async () => {
      await s?.close();
      await drop?.();
      rmSync(dataDir, { recursive: true, force: true });
    });

    test('first start creates exactly one workspace, even when several nodes start at once', async () => {
      const config = s.config;
      const nodes = await Promise.all([1, 2, 3].map(() => createServices(config)));
      try {
        // Several nodes share PostgreSQL: race them. SQLite serves one node; connections in one
        // process would block each other's event loop, so there they take turns.
        const all = [s, ...nodes];
        const results =
          dialect.name === 'postgres'
            ? await Promise.all(all.map((n) => n.workspaces.bootstrapIfEmpty()))
            : await all.reduce(
                async (acc, n) => [...(await acc), await n.workspaces.bootstrapIfEmpty()],
                Promise.resolve([] as unknown[]),
              );
        const created = results.filter(Boolean);
        assert.equal(created.length, 1);
        assert.equal((await s.workspaces.list()).length, 1);
        assert.equal(await s.workspaces.bootstrapIfEmpty(), null, 'later starts create nothing');
        const first = created[0] as { private_key: string; workspace_id: string };
        const principal = await s.workspaces.authenticate(first.private_key);
        assert.equal(principal?.workspaceId, first.workspace_id);
      } finally {
        await Promise.all(nodes.map((n) => n.close()));
      }
    });

    test('a workspace comes with a public key, a private key and a webhook secret; keys stored as hashes', async () => {
      const w = await s.workspaces.create('Acme');
      assert.match(w.workspace_id, /^[0-9A-Za-z]{12}$/);
      assert.match(w.public_key, /^stw_pk_/);
      assert.match(w.private_key, /^stw_sk_/);
      assert.match(w.webhook_secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
      const rows = await s.db.kysely
        .selectFrom('api_keys')
        .selectAll()
        .where('workspace_id', '=', w.workspace_id)
        .execute();
      assert.equal(rows.length, 2);
      assert.deepEqual(
        new Set(rows.map((r) => r.key_hash)),
        new Set([hashApiKey(w.public_key), hashApiKey(w.private_key)]),
      );
      assert.equal(await s.workspaces.webhookSecret(w.workspace_id), w.webhook_secret);
      assert.equal((await s.workspaces.authenticate(w.public_key))?.keyType, 'public');
      assert.equal((await s.workspaces.authenticate(w.private_key))?.keyType, 'private');
    });

    test('keys can be added, listed by hint and revoked; a revoked key authenticates no more', async () => {
      const w = await s.workspaces.create('Keys');
      const k = await s.workspaces.createKey(w.workspace_id, 'private');
      assert.ok(await s.workspaces.authenticate(k.key));
      const list = await s.workspaces.listKeys(w.workspace_id);
      assert.equal(list.length, 3);
      assert.ok(list.every((x) => !JSON.stringify(x).includes(k.key)));
      assert.ok(list.some((x) => x.id === k.id && x.hint.endsWith(k.key.slice(-4))));
      const revoked = await s.workspaces.revokeKey(k.id);
      assert.ok(revoked.revoked_at);
      assert.equal(await s.workspaces.authenticate(k.key), null);
      assert.ok(await s.workspaces.authenticate(w.private_key), 'other keys still work');
      await assert.rejects(s.workspaces.revokeKey('00000000-0000-4000-8000-000000000000'), /No API key/);
      await assert.rejects(s.workspaces.createKey('nope', 'public'), /No workspace/);
    });

    test('malformed and unknown keys authenticate as nobody', async () => {
      for (const k of [
        undefined,
        '',
        'x',
        'stw_sk_short',
        `stw_sk_${'A'.repeat(43)}`,
        `stw_xx_${'A'.repeat(43)}`,
        "stw_sk_' OR 1=1 --",
      ]) {
        assert.equal(await s.workspaces.authenticate(k), null);
      }
    });
  });
}
