// Key and secret rotation: `stowage key rotate` with a grace period, and `stowage master-key
// rotate` re-encrypting every secret while nodes hold both keys (no downtime).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { loadConfig } from '../src/config.ts';
import { createServices } from '../src/services/container.ts';
import { runCli } from './helpers/process.ts';

describe('rotation', () => {
  const dir = mkdtempSync(join(tmpdir(), 'stowage-rotate-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('key rotate: the new key works at once, the old one until the grace period ends', async () => {
    const env = { STOWAGE_DATA_DIR: join(dir, 'keys') };
    const ws = JSON.parse((await runCli(['workspace', 'create', '--name', 'K', '--json'], env)).stdout);
    const keys = JSON.parse((await runCli(['key', 'list', '--workspace', ws.workspace_id, '--json'], env)).stdout);
    const privateId = keys.find((k: any) => k.type === 'private').id;
    const rotated = await runCli(['key', 'rotate', privateId, '--grace', '2', '--json'], env);
    assert.equal(rotated.code, 0, rotated.stderr);
    const r = JSON.parse(rotated.stdout);
    assert.match(r.new.key, /^stw_sk_/);
    const services = await createServices(loadConfig(env));
    try {
      assert.ok(await services.workspaces.authenticate(r.new.key), 'the new key works');
      assert.ok(
        await services.workspaces.authenticate(ws.private_key),
        'the old key still works during the grace period',
      );
      await new Promise((res) => setTimeout(res, 2200));
      assert.equal(await services.workspaces.authenticate(ws.private_key), null, 'then it stops');
      assert.ok(await services.workspaces.authenticate(r.new.key));
      const pub = keys.find((k: any) => k.type === 'public').id;
      const now = JSON.parse((await runCli(['key', 'rotate', pub, '--json'], env)).stdout);
      assert.equal(await services.workspaces.authenticate(ws.public_key), null, 'no grace: at once');
      assert.ok(await services.workspaces.authenticate(now.new.key));
    } finally {
      await services.close();
    }
  });

  test('master-key rotate: secrets re-encrypted under the new key while both are known', async () => {
    const dataDir = join(dir, 'master');
    const A = Buffer.alloc(32, 1).toString('base64');
    const B = (await runCli(['master-key', 'generate'], {})).stdout.trim();
    assert.equal(Buffer.from(B, 'base64').length, 32);
    const withKeys = (current: string, previous?: string) => ({
      STOWAGE_DATA_DIR: dataDir,
      STOWAGE_MASTER_KEY: current,
      ...(previous ? { STOWAGE_MASTER_KEY_PREVIOUS: previous } : {}),
    });

    // Under key A: a workspace (webhook secret) and a source with secrets.
    const ws = JSON.parse((await runCli(['workspace', 'create', '--name', 'M', '--json'], withKeys(A))).stdout);
    let s = await createServices(loadConfig(withKeys(A)));
    const source = await s.sources.create(ws.workspace_id, {
      name: 'bucket',
      type: 's3',
      configuration: { region: 'us-east-1', bucket: 'b-b-b', access_key: 'AKIA123', secret_key: 'very-secret' },
    });
    // A delivery key lives in customers' backends: a master-key rotation must not change it.
    const deliveryKey = await s.workspaces.deliveryKey(ws.workspace_id);
    await s.close();

    // Every node now knows B (current) and A (previous): everything still reads.
    s = await createServices(loadConfig(withKeys(B, A)));
    const row = async (svc: typeof s) =>
      svc.db.kysely.selectFrom('sources').selectAll().where('id', '=', source.id).executeTakeFirstOrThrow();
    assert.equal(s.sources.configuration(await row(s)).secret_key, 'very-secret');
    assert.equal(await s.workspaces.webhookSecret(ws.workspace_id), ws.webhook_secret);
    await s.close();

    const rotated = await runCli(['master-key', 'rotate', '--json'], withKeys(B, A));
    assert.equal(rotated.code, 0, rotated.stderr);
    const counts = JSON.parse(rotated.stdout);
    assert.equal(counts.sources, 1);
    assert.equal(counts.webhook_secrets, 1);
    assert.equal(counts.delivery_keys, 1);

    // Only B from now on: still readable. Only A: no longer.
    s = await createServices(loadConfig(withKeys(B)));
    assert.equal(s.sources.configuration(await row(s)).secret_key, 'very-secret');
    assert.equal(await s.workspaces.webhookSecret(ws.workspace_id), ws.webhook_secret);
    assert.equal(await s.workspaces.deliveryKey(ws.workspace_id), deliveryKey);
    await s.close();
    s = await createServices(loadConfig(withKeys(A)));
    const stale = await row(s);
    assert.throws(() => s.sources.configuration(stale), /not configured/);
    await s.close();
    const again = JSON.parse((await runCli(['master-key', 'rotate', '--json'], withKeys(B))).stdout);
    assert.deepEqual(again, { sources: 0, webhook_secrets: 0, delivery_keys: 0 }, 'nothing left to re-encrypt');
  });
});
