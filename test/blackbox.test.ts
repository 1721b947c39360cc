// The service and the admin CLI as a newcomer runs them: real processes, real ports.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { DIALECTS, freshPostgres } from './helpers/harness.ts';
import { firstWorkspaceFile, readFirstWorkspace, runCli, type ServerProcess, startServer } from './helpers/process.ts';

const get = async (url: string, key?: string) => {
  const res = await fetch(url, { headers: key ? { authorization: `Bearer ${key}` } : {} });
  return { status: res.status, body: (await res.json().catch(() => undefined)) as any };
};

for (const dialect of DIALECTS) {
  describe(`npm start and the stowage CLI on ${dialect.name}`, { skip: dialect.skip }, () => {
    let dataDir: string;
    let env: Record<string, string | undefined>;
    let drop: (() => Promise<void>) | undefined;
    let server: ServerProcess | undefined;
    before(async () => {
      dataDir = mkdtempSync(join(tmpdir(), 'stowage-bb-'));
      env = { STOWAGE_DATA_DIR: dataDir };
      if (dialect.name === 'postgres') {
        const db = await freshPostgres();
        env.DATABASE_URL = db.url;
        drop = db.drop;
      }
    });
    after(async () => {
      await server?.stop('SIGKILL');
      await drop?.();
      rmSync(dataDir, { recursive: true, force: true });
    });

    test('the first start on an empty database creates a workspace and hands its keys over once, in a file', async () => {
      server = await startServer(env);
      const out = server.output();
      // stdout is not a terminal here: the keys are in DATA_DIR/first-workspace.json, whose path is printed.
      // The start logs the new workspace id through pino (a JSON line), never its keys.
      const workspaceId = /"workspace_id":"([A-Za-z0-9]+)"/.exec(out)?.[1];
      const first = readFirstWorkspace(dataDir);
      const privateKey = first?.private_key;
      const publicKey = first?.public_key;
      assert.ok(workspaceId && privateKey?.startsWith('stw_sk_') && publicKey?.startsWith('stw_pk_'), out);
      assert.equal(first!.workspace_id, workspaceId);
      assert.ok(out.includes(firstWorkspaceFile(dataDir)), out);
      assert.ok(
        !out.includes(privateKey!) && !out.includes(publicKey!) && !out.includes(first!.webhook_secret),
        'no key on stdout or stderr',
      );
      assert.equal((await get(`${server.url}/healthz`)).status, 200);
      assert.equal((await get(`${server.url}/readyz`)).status, 200);
      const list = await get(`${server.url}/api/v1/sources`, privateKey);
      assert.equal(list.status, 200);
      assert.equal((await get(`${server.url}/api/v1/sources`, publicKey)).status, 403);
      const logLines = out.split('\n').filter((l) => l.startsWith('{'));
      assert.ok(logLines.length > 0);
      assert.equal(await server.stop('SIGTERM'), 0, 'SIGTERM shuts down cleanly');

      server = await startServer(env);
      assert.ok(!/private_key|first-workspace/.test(server.output()), 'a restart prints no keys');
      assert.equal((await get(`${server.url}/api/v1/sources`, privateKey)).status, 200, 'keys survive a restart');
    });

    test('workspace create --json prints exactly one JSON object, whose keys work on the running server', async () => {
      const res = await runCli(['workspace', 'create', '--name', 'From CLI', '--json'], env);
      assert.equal(res.code, 0, res.stderr);
      const created = JSON.parse(res.stdout);
      assert.deepEqual(Object.keys(created).sort(), ['private_key', 'public_key', 'webhook_secret', 'workspace_id']);
      assert.equal(res.stdout.trim().split('\n').length, 1);
      assert.equal((await get(`${server!.url}/api/v1/sources`, created.private_key)).status, 200);
    });

    test('key create, list and revoke; a revoked key gets 401 at once on the running server', async () => {
      const ws = JSON.parse((await runCli(['workspace', 'create', '--name', 'Keys', '--json'], env)).stdout);
      const made = await runCli(['key', 'create', '--workspace', ws.workspace_id, '--type', 'private', '--json'], env);
      assert.equal(made.code, 0, made.stderr);
      const key = JSON.parse(made.stdout);
      assert.match(key.key, /^stw_sk_/);
      assert.equal((await get(`${server!.url}/api/v1/sources`, key.key)).status, 200);

      const listed = await runCli(['key', 'list', '--workspace', ws.workspace_id, '--json'], env);
      const keys = JSON.parse(listed.stdout);
      assert.equal(keys.length, 3);
      assert.ok(!listed.stdout.includes(key.key), 'listing shows hints, never keys');

      const human = await runCli(['key', 'list', '--workspace', ws.workspace_id], env);
      assert.match(human.stdout, new RegExp(key.id));

      const revoked = await runCli(['key', 'revoke', key.id], env);
      assert.equal(revoked.code, 0, revoked.stderr);
      const after = await get(`${server!.url}/api/v1/sources`, key.key);
      assert.equal(after.status, 401);
      assert.equal(after.body.error, 'Invalid API key.');
    });

    test('workspace set-quota: 402 above the quota, 413 above the maximum file size', async () => {
      const ws = JSON.parse((await runCli(['workspace', 'create', '--name', 'Quota', '--json'], env)).stdout);
      const set = await runCli(
        ['workspace', 'set-quota', ws.workspace_id, '1KB', '--max-file-size', '600', '--json'],
        env,
      );
      assert.equal(set.code, 0, set.stderr);
      assert.deepEqual(JSON.parse(set.stdout), {
        workspace_id: ws.workspace_id,
        quota_bytes: 1000,
        max_file_size: 600,
        used_bytes: 0,
        reserved_bytes: 0,
      });
      const send = async (bytes: number, name: string) => {
        const form = new FormData();
        form.append('file', new Blob([Buffer.alloc(bytes, name.length)]), name);
        form.append('file_name', name);
        return (
          await fetch(`${server!.url}/api/v1/uploads`, {
            method: 'POST',
            body: form,
            headers: { 'x-api-key': ws.public_key },
          })
        ).status;
      };
      assert.equal(await send(700, 'too-big.bin'), 413);
      assert.equal(await send(500, 'fits.bin'), 201);
      assert.equal(await send(550, 'over-quota.bin'), 402);
      const unlimited = await runCli(
        ['workspace', 'set-quota', ws.workspace_id, 'unlimited', '--max-file-size', 'default'],
        env,
      );
      assert.equal(unlimited.code, 0, unlimited.stderr);
      assert.match(unlimited.stdout, /quota unlimited/);
      assert.equal(await send(550, 'now-fine.bin'), 201);
      assert.equal((await runCli(['workspace', 'set-quota', ws.workspace_id, 'lots'], env)).code, 2);
    });

    test('errors a shell user can act on: usage 2, not found 3, bad configuration 78', async () => {
      const usage = await runCli(['key', 'create', '--workspace', 'x', '--type', 'admin'], env);
      assert.equal(usage.code, 2);
      assert.match(usage.stderr, /public.*private/);
      const missing = await runCli(['key', 'create', '--workspace', 'nope', '--type', 'public'], env);
      assert.equal(missing.code, 3);
      assert.match(missing.stderr, /No workspace nope/);
      const badConfig = await runCli(['workspace', 'list'], { ...env, PORT: 'eighty' });
      assert.equal(badConfig.code, 78);
      assert.match(badConfig.stderr, /PORT must be/);
    });
  });
}

test('a bad configuration stops the start with a message naming the variable', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'stowage-bb-'));
  try {
    await assert.rejects(
      startServer({ STOWAGE_DATA_DIR: dataDir, PORT: 'not-a-port', STOWAGE_PUBLIC_URL: 'nope' }),
      (err: any) => {
        assert.equal(err.code, 78);
        assert.match(err.output, /PORT must be a whole number/);
        assert.match(err.output, /STOWAGE_PUBLIC_URL must be/);
        return true;
      },
    );
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('a SIGTERM the moment the server says it listens still drains and exits 0', async () => {
  // Regression: the handlers used to be armed only after the jobs had started, so a SIGTERM in
  // that window (a fast orchestrator, or a loaded CI machine) killed the process by the signal.
  const dataDir = mkdtempSync(join(tmpdir(), 'stowage-bb-'));
  try {
    for (let i = 0; i < 3; i++) {
      const server = await startServer({ STOWAGE_DATA_DIR: dataDir });
      assert.equal(await server.stop('SIGTERM'), 0, server.output());
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});
