// Start-up patience, as an operator meets it: `npm start` while PostgreSQL, Redis or the S3 store is
// not up yet. The dependency is reached through a TCP proxy on a port that only starts forwarding a
// moment after Stowage, so the first connections are refused exactly as they are by a server that
// is still starting.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { DIALECTS, freshPostgres } from './helpers/harness.ts';
import { startServer } from './helpers/process.ts';
import { closedPort } from './helpers/servers.ts';
import { externalService } from './helpers/services.ts';
import { freshS3Storage } from './helpers/storage.ts';
import { isUnreachable } from '../src/startup/patience.ts';

const redisGate = externalService('STOWAGE_TEST_REDIS_URL', 'Redis');
const s3Gate = externalService('STOWAGE_TEST_S3_ENDPOINT', 'an S3-compatible server (scripts/start-swift.sh)');

/**
 * Starts the server and, once it has logged its first wait for `what`, starts `proxy`: the
 * dependency is refused at least once, whatever the machine's speed.
 */
async function startWhileDown(
  env: Record<string, string | undefined>,
  what: RegExp,
  proxy: { start(): Promise<void> },
) {
  let started = false;
  return startServer(env, {
    onOutput: (out) => {
      if (!started && what.test(out)) {
        started = true;
        void proxy.start();
      }
    },
  });
}

/** Forwards 127.0.0.1:`port` to `target` once started; until then the port refuses connections. */
function lateProxy(port: number, target: { host: string; port: number }) {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, target.host);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => s.destroy());
      s.on('close', () => sockets.delete(s));
    }
    client.pipe(upstream).pipe(client);
  });
  return {
    start: () => new Promise<void>((r) => server.listen(port, '127.0.0.1', () => r())),
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

const target = (url: string) => {
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port) };
};

describe('start-up patience', () => {
  const dirs: string[] = [];
  const cleanups: (() => Promise<unknown>)[] = [];
  const dataDir = () => {
    const d = mkdtempSync(join(tmpdir(), 'stowage-patience-'));
    dirs.push(d);
    return d;
  };
  after(async () => {
    for (const c of cleanups.reverse()) await c().catch(() => {});
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  test('PostgreSQL that comes up late: Stowage waits, logs each attempt without the password, then starts', {
    skip: DIALECTS[1].skip,
  }, async () => {
    const db = await freshPostgres();
    cleanups.push(db.drop);
    const port = await closedPort();
    const url = new URL(db.url);
    const real = { host: url.hostname, port: Number(url.port || 5432) };
    url.host = `127.0.0.1:${port}`;
    url.password = 'not-shown-anywhere';
    const proxy = lateProxy(port, real);
    cleanups.push(proxy.close);
    const server = await startWhileDown(
      { STOWAGE_DATA_DIR: dataDir(), DATABASE_URL: url.toString() },
      /waiting for PostgreSQL/,
      proxy,
    );
    cleanups.push(() => server.stop('SIGKILL'));
    const out = server.output();
    assert.match(out, new RegExp(`waiting for PostgreSQL at 127\\.0\\.0\\.1:${port}/`));
    assert.match(out, /ECONNREFUSED/);
    assert.match(out, /is reachable/);
    assert.ok(!out.includes('not-shown-anywhere'), 'the password is in no log line');
    assert.equal((await fetch(`${server.url}/readyz`)).status, 200);
    assert.equal(await server.stop('SIGTERM'), 0);
  });

  test('a dependency that never comes: the start fails after STOWAGE_STARTUP_WAIT_MS with one clear line', async () => {
    const port = await closedPort();
    const started = Date.now();
    await assert.rejects(
      startServer({
        STOWAGE_DATA_DIR: dataDir(),
        DATABASE_URL: `postgres://postgres@127.0.0.1:${port}/nothing`,
        STOWAGE_STARTUP_WAIT_MS: '2000',
      }),
      (err: { code: number; output: string }) => {
        assert.equal(err.code, 1);
        assert.match(err.output, /PostgreSQL at 127\.0\.0\.1:\d+\/nothing could not be reached within 2 s/);
        // 250 + 500 + 1000 ms, then the rest of the 2 s: four or five attempts, each logged once.
        const attempts = err.output.match(/waiting for PostgreSQL/g)?.length ?? 0;
        assert.ok(attempts >= 3 && attempts <= 6, `${attempts} attempts`);
        return true;
      },
    );
    assert.ok(Date.now() - started < 15_000);
  });

  test('a wrong database name is not waited for: it fails at once', { skip: DIALECTS[1].skip }, async () => {
    const admin = new URL(process.env.STOWAGE_TEST_DATABASE_URL!);
    admin.pathname = '/no_such_database_here';
    const started = Date.now();
    await assert.rejects(
      startServer({ STOWAGE_DATA_DIR: dataDir(), DATABASE_URL: admin.toString(), STOWAGE_STARTUP_WAIT_MS: '60000' }),
      (err: { code: number; output: string }) => {
        assert.equal(err.code, 1);
        assert.doesNotMatch(err.output, /waiting for/);
        return true;
      },
    );
    assert.ok(Date.now() - started < 20_000, 'no minute of waiting');
  });

  test('Redis that comes up late: Stowage waits for it before listening', { skip: redisGate.skip }, async () => {
    const port = await closedPort();
    const proxy = lateProxy(port, target(redisGate.value!));
    cleanups.push(proxy.close);
    const server = await startWhileDown(
      { STOWAGE_DATA_DIR: dataDir(), REDIS_URL: `redis://127.0.0.1:${port}` },
      /waiting for Redis/,
      proxy,
    );
    cleanups.push(() => server.stop('SIGKILL'));
    assert.match(server.output(), new RegExp(`waiting for Redis at 127\\.0\\.0\\.1:${port}`));
    assert.equal((await fetch(`${server.url}/readyz`)).status, 200);
  });

  test('an S3 store that comes up late: Stowage waits for it before listening', { skip: s3Gate.skip }, async () => {
    const storage = await freshS3Storage();
    if (storage.driver !== 's3') throw new Error('expected S3');
    const port = await closedPort();
    const proxy = lateProxy(port, target(storage.s3.endpoint!));
    cleanups.push(proxy.close);
    const server = await startWhileDown(
      {
        STOWAGE_DATA_DIR: dataDir(),
        STOWAGE_STORAGE: 's3',
        S3_ENDPOINT: `http://127.0.0.1:${port}`,
        S3_BUCKET: storage.s3.bucket,
        S3_REGION: storage.s3.region,
        S3_ACCESS_KEY_ID: storage.s3.accessKeyId,
        S3_SECRET_ACCESS_KEY: storage.s3.secretAccessKey,
        S3_FORCE_PATH_STYLE: 'true',
      },
      /waiting for storage/,
      proxy,
    );
    cleanups.push(() => server.stop('SIGKILL'));
    const out = server.output();
    assert.match(out, /waiting for storage \(files are in an S3 bucket\)/);
    assert.ok(!out.includes(storage.s3.secretAccessKey!), 'no secret in the log');
    assert.equal((await fetch(`${server.url}/readyz`)).status, 200);
  });
});

test('what counts as unreachable: socket errors, wrapped or aggregated; not a refusal', () => {
  const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
  assert.ok(isUnreachable(refused));
  assert.ok(isUnreachable(new Error('fetch failed', { cause: refused })));
  assert.ok(isUnreachable(new AggregateError([new Error('x'), refused])));
  assert.ok(isUnreachable(Object.assign(new Error('the database system is starting up'), { code: '57P03' })));
  assert.ok(!isUnreachable(Object.assign(new Error('password authentication failed'), { code: '28P01' })));
  assert.ok(!isUnreachable(Object.assign(new Error('Access Denied'), { name: 'AccessDenied' })));
  assert.ok(!isUnreachable(undefined));
});
