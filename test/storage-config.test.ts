// STOWAGE_STORAGE=azure|gcs: their settings are read and checked like S3's, secrets never echoed,
// and the configured driver is what storage/open.ts makes of them.
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { ConfigError, loadConfig } from '../src/config.ts';
import { capabilitiesOf } from '../src/storage/driver.ts';
import { createStorage } from '../src/storage/open.ts';

const dirs: string[] = [];
const tmp = () => {
  const d = mkdtempSync(join(tmpdir(), 'stowage-storage-config-'));
  dirs.push(d);
  return d;
};
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
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

const AZURE =
  'DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=c2VjcmV0LWtleS1ub3QtcmVhbA==;BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;';

describe('storage configuration: azure and gcs', () => {
  test('azure: connection string and container', () => {
    const config = loadConfig({
      STOWAGE_DATA_DIR: tmp(),
      STOWAGE_STORAGE: 'azure',
      AZURE_STORAGE_CONNECTION_STRING: AZURE,
      AZURE_STORAGE_CONTAINER: 'media-prod',
    });
    assert.deepEqual(config.storage, { driver: 'azure', azure: { connectionString: AZURE, container: 'media-prod' } });
    const driver = createStorage(config);
    assert.equal(driver.name, 'azure');
    assert.equal(capabilitiesOf(driver).writePart, true);
    assert.equal(driver.bucketCors, undefined);
  });

  test('azure: missing or malformed settings are named, the secret never echoed', () => {
    assert.deepEqual(problems({ STOWAGE_STORAGE: 'azure' }), [
      'AZURE_STORAGE_CONNECTION_STRING is required when STOWAGE_STORAGE=azure',
      'AZURE_STORAGE_CONTAINER is required when STOWAGE_STORAGE=azure',
    ]);
    const p = problems({
      STOWAGE_STORAGE: 'azure',
      AZURE_STORAGE_CONNECTION_STRING: 'not-a-connection-string-secret',
      AZURE_STORAGE_CONTAINER: 'Bad_Name',
    });
    assert.equal(p.length, 2);
    assert.match(p[0], /^AZURE_STORAGE_CONNECTION_STRING must be a connection string/);
    assert.match(p[1], /^AZURE_STORAGE_CONTAINER must be 3 to 63 lowercase/);
    assert.ok(!p.join('\n').includes('not-a-connection-string-secret'));
  });

  test('gcs: bucket, service account key, project and the shared API endpoint', () => {
    const { privateKey } = generateKeyPairSync('rsa', {
      modulusLength: 2048,
      privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
      publicKeyEncoding: { type: 'spki', format: 'pem' },
    });
    const config = loadConfig({
      STOWAGE_DATA_DIR: tmp(),
      STOWAGE_STORAGE: 'gcs',
      GCS_BUCKET: 'media-prod',
      GCS_PROJECT_ID: 'demo',
      GCS_CREDENTIALS: JSON.stringify({ client_email: 'svc@demo.iam.gserviceaccount.com', private_key: privateKey }),
      STOWAGE_GCS_API_ENDPOINT: 'http://127.0.0.1:4443/',
    });
    assert.deepEqual(config.storage, {
      driver: 'gcs',
      gcs: {
        bucket: 'media-prod',
        projectId: 'demo',
        credentials: { client_email: 'svc@demo.iam.gserviceaccount.com', private_key: privateKey },
        apiEndpoint: 'http://127.0.0.1:4443',
      },
    });
    assert.equal(createStorage(config).name, 'gcs');
  });

  test('gcs: missing bucket and unusable key are named, the key never echoed', () => {
    assert.deepEqual(problems({ STOWAGE_STORAGE: 'gcs' }), ['GCS_BUCKET is required when STOWAGE_STORAGE=gcs']);
    const p = problems({ STOWAGE_STORAGE: 'gcs', GCS_BUCKET: 'b', GCS_CREDENTIALS: '{"private_key":"secret-pem"}' });
    assert.equal(p.length, 1);
    assert.match(p[0], /^GCS_CREDENTIALS must be a service account key/);
    assert.ok(!p[0].includes('secret-pem'));
  });

  test('an unknown driver lists the four', () => {
    assert.deepEqual(problems({ STOWAGE_STORAGE: 'ftp' }), [
      'STOWAGE_STORAGE must be "local", "s3", "azure" or "gcs" (got "ftp")',
    ]);
  });
});
