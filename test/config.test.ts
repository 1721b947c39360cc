import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { availableParallelism } from 'node:os';
import { ConfigError, loadConfig } from '../src/config.ts';

const made: string[] = [];
const tmp = () => {
  const dir = mkdtempSync(join(tmpdir(), 'stowage-config-'));
  made.push(dir);
  return dir;
};
after(() => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});

function problems(env: Record<string, string>): string[] {
  try {
    loadConfig({ STOWAGE_DATA_DIR: tmp(), ...env });
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    return err.problems;
  }
  assert.fail('expected a ConfigError');
}

describe('configuration', () => {
  test('embedded defaults: 127.0.0.1:3000, SQLite under the data dir, a generated master key with mode 0600', () => {
    const dir = tmp();
    const c = loadConfig({ STOWAGE_DATA_DIR: dir });
    assert.equal(c.host, '127.0.0.1');
    assert.equal(c.port, 3000);
    assert.equal(c.publicUrl, 'http://127.0.0.1:3000');
    assert.equal(c.databaseUrl, undefined);
    assert.equal(c.masterKey.length, 32);
    const keyFile = join(dir, 'master.key');
    assert.equal(statSync(keyFile).mode & 0o777, 0o600);
    const again = loadConfig({ STOWAGE_DATA_DIR: dir });
    assert.deepEqual(again.masterKey, c.masterKey, 'the generated key is reused');
    assert.ok(readFileSync(keyFile, 'utf8').trim().length >= 43);
  });

  test('the rendition cache budget: 10 GiB by default, 0 for none, a bad value named', () => {
    assert.equal(loadConfig({ STOWAGE_DATA_DIR: tmp() }).renditionCacheBytes, 10 * 1024 ** 3);
    assert.equal(loadConfig({ STOWAGE_DATA_DIR: tmp(), STOWAGE_RENDITION_CACHE_BYTES: '0' }).renditionCacheBytes, 0);
    assert.equal(
      loadConfig({ STOWAGE_DATA_DIR: tmp(), STOWAGE_RENDITION_CACHE_BYTES: '1048576' }).renditionCacheBytes,
      1048576,
    );
    assert.match(problems({ STOWAGE_RENDITION_CACHE_BYTES: '10G' }).join('\n'), /STOWAGE_RENDITION_CACHE_BYTES/);
  });

  test('the X-Accel-Redirect prefix: off by default, a plain location prefix, anything else named', () => {
    assert.equal(loadConfig({ STOWAGE_DATA_DIR: tmp() }).accelRedirect, undefined);
    assert.equal(
      loadConfig({ STOWAGE_DATA_DIR: tmp(), STOWAGE_ACCEL_REDIRECT: '/_stowage_internal/' }).accelRedirect,
      '/_stowage_internal/',
    );
    assert.equal(loadConfig({ STOWAGE_DATA_DIR: tmp(), STOWAGE_ACCEL_REDIRECT: '/a/b.c/' }).accelRedirect, '/a/b.c/');
    for (const bad of [
      '_stowage/',
      '/_stowage',
      '/',
      '//x/',
      '/../x/',
      '/x/../',
      '/./',
      '/a%2F/',
      '/a?b/',
      '@named',
      '/a b/',
    ])
      assert.match(problems({ STOWAGE_ACCEL_REDIRECT: bad }).join('\n'), /STOWAGE_ACCEL_REDIRECT must be/, bad);
  });

  test('a master key readable by others stops the start with the fix in the message', () => {
    const dir = tmp();
    loadConfig({ STOWAGE_DATA_DIR: dir });
    chmodSync(join(dir, 'master.key'), 0o644);
    assert.throws(() => loadConfig({ STOWAGE_DATA_DIR: dir }), /chmod 600/);
  });

  test('values are read and typed', () => {
    const key = randomBytes(32);
    const c = loadConfig({
      STOWAGE_DATA_DIR: tmp(),
      HOST: '0.0.0.0',
      PORT: '8080',
      STOWAGE_PUBLIC_URL: 'https://media.example.com/',
      DATABASE_URL: 'postgres://u:p@db/stowage',
      STOWAGE_MASTER_KEY: key.toString('hex'),
      STOWAGE_OUTBOUND_ALLOW: '10.0.0.0/8, intranet.local',
      LOG_LEVEL: 'warn',
    });
    assert.equal(c.port, 8080);
    assert.equal(c.publicUrl, 'https://media.example.com');
    assert.equal(c.databaseUrl, 'postgres://u:p@db/stowage');
    assert.deepEqual(c.masterKey, key);
    assert.deepEqual(c.outboundAllow, ['10.0.0.0/8', 'intranet.local']);
    assert.equal(c.logLevel, 'warn');
    assert.deepEqual(
      loadConfig({ STOWAGE_DATA_DIR: tmp(), STOWAGE_MASTER_KEY: key.toString('base64') }).masterKey,
      key,
    );
  });

  test('*_FILE variants read secrets from files', () => {
    const dir = tmp();
    const key = randomBytes(32);
    writeFileSync(join(dir, 'mk'), `${key.toString('base64')}\n`);
    writeFileSync(join(dir, 'db'), 'postgres://app:s3cret@db:5432/stowage\n');
    const c = loadConfig({
      STOWAGE_DATA_DIR: dir,
      STOWAGE_MASTER_KEY_FILE: join(dir, 'mk'),
      DATABASE_URL_FILE: join(dir, 'db'),
    });
    assert.deepEqual(c.masterKey, key);
    assert.equal(c.databaseUrl, 'postgres://app:s3cret@db:5432/stowage');
  });

  test('every bad value is reported at once, each naming its variable', () => {
    const p = problems({
      PORT: '70000',
      STOWAGE_PUBLIC_URL: 'ftp://x',
      LOG_LEVEL: 'loud',
      STOWAGE_MASTER_KEY: 'short',
    });
    assert.equal(p.length, 4);
    assert.ok(p.some((x) => x.startsWith('PORT')));
    assert.ok(p.some((x) => x.startsWith('STOWAGE_PUBLIC_URL')));
    assert.ok(p.some((x) => x.startsWith('LOG_LEVEL')));
    assert.ok(p.some((x) => x.startsWith('STOWAGE_MASTER_KEY')));
  });

  test('render bounds: defaults by core count, values read, bad ones named', () => {
    const cores = availableParallelism();
    assert.deepEqual(loadConfig({ STOWAGE_DATA_DIR: tmp() }).render, {
      maxMegapixels: 25,
      maxSide: 8192,
      timeoutMs: 10_000,
      concurrency: cores,
      queue: 8 * cores,
      threads: 1,
      faceTimeoutMs: 1500,
    });
    const set = loadConfig({
      STOWAGE_DATA_DIR: tmp(),
      STOWAGE_RENDER_MAX_MEGAPIXELS: '40',
      STOWAGE_RENDER_MAX_SIDE: '4096',
      STOWAGE_RENDER_TIMEOUT_MS: '2500',
      STOWAGE_RENDER_CONCURRENCY: '3',
      STOWAGE_RENDER_QUEUE: '0',
      STOWAGE_RENDER_THREADS: '2',
      STOWAGE_RENDER_FACE_TIMEOUT_MS: '300',
    }).render;
    assert.deepEqual(set, {
      maxMegapixels: 40,
      maxSide: 4096,
      timeoutMs: 2500,
      concurrency: 3,
      queue: 0,
      threads: 2,
      faceTimeoutMs: 300,
    });
    const p = problems({
      STOWAGE_RENDER_CONCURRENCY: '0',
      STOWAGE_RENDER_MAX_SIDE: '20000',
      STOWAGE_RENDER_QUEUE: 'many',
    });
    assert.equal(p.length, 3, p.join('; '));
    for (const name of ['STOWAGE_RENDER_CONCURRENCY', 'STOWAGE_RENDER_MAX_SIDE', 'STOWAGE_RENDER_QUEUE'])
      assert.ok(
        p.some((x) => x.startsWith(name)),
        name,
      );
  });

  test('secrets are never echoed in configuration errors', () => {
    const p = problems({ DATABASE_URL: 'mysql://root:hunter2@db/x', STOWAGE_MASTER_KEY: 'hunter3hunter3' });
    assert.ok(p.some((x) => x.startsWith('DATABASE_URL')));
    assert.ok(!p.join(' ').includes('hunter2') && !p.join(' ').includes('hunter3'));
  });

  test('PostgreSQL prepared statements: on by default, off with false, anything else an error', () => {
    assert.equal(loadConfig({ STOWAGE_DATA_DIR: tmp() }).pgPreparedStatements, true);
    assert.equal(
      loadConfig({ STOWAGE_DATA_DIR: tmp(), STOWAGE_PG_PREPARED_STATEMENTS: 'false' }).pgPreparedStatements,
      false,
    );
    assert.deepEqual(problems({ STOWAGE_PG_PREPARED_STATEMENTS: 'off' }), [
      'STOWAGE_PG_PREPARED_STATEMENTS must be true or false (got "off")',
    ]);
  });

  test('storage: local by default; s3 with its settings; s3 without a bucket is an error', () => {
    assert.deepEqual(loadConfig({ STOWAGE_DATA_DIR: tmp() }).storage, { driver: 'local', fsync: true });
    assert.deepEqual(loadConfig({ STOWAGE_DATA_DIR: tmp(), STOWAGE_FSYNC: 'false' }).storage, {
      driver: 'local',
      fsync: false,
    });
    const c = loadConfig({
      STOWAGE_DATA_DIR: tmp(),
      STOWAGE_STORAGE: 's3',
      S3_ENDPOINT: 'http://127.0.0.1:9000/',
      S3_BUCKET: 'media',
      S3_ACCESS_KEY_ID: 'id',
      S3_SECRET_ACCESS_KEY: 'secret',
    });
    assert.deepEqual(c.storage, {
      driver: 's3',
      s3: {
        endpoint: 'http://127.0.0.1:9000',
        publicEndpoint: undefined,
        region: 'us-east-1',
        bucket: 'media',
        accessKeyId: 'id',
        secretAccessKey: 'secret',
        forcePathStyle: true,
      },
    });
    const aws = loadConfig({
      STOWAGE_DATA_DIR: tmp(),
      STOWAGE_STORAGE: 's3',
      S3_BUCKET: 'media',
      S3_REGION: 'eu-west-1',
    });
    assert.equal(aws.storage.driver === 's3' && aws.storage.s3.forcePathStyle, false);
    const p = problems({ STOWAGE_STORAGE: 's3', S3_ACCESS_KEY_ID: 'id', S3_FORCE_PATH_STYLE: 'maybe' });
    assert.ok(p.some((x) => x.startsWith('S3_BUCKET is required')));
    assert.ok(p.some((x) => x.startsWith('S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY')));
    assert.ok(p.some((x) => x.startsWith('S3_FORCE_PATH_STYLE')));
    assert.ok(problems({ STOWAGE_STORAGE: 'ftp' })[0].startsWith('STOWAGE_STORAGE'));
  });

  test('a variable and its _FILE together, or an unreadable file, are errors', () => {
    assert.ok(problems({ PORT: '1', PORT_FILE: '/x' })[0].includes('PORT and PORT_FILE'));
    assert.ok(problems({ STOWAGE_MASTER_KEY_FILE: '/nonexistent/key' })[0].startsWith('STOWAGE_MASTER_KEY_FILE'));
  });
});
