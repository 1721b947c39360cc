// Storage for tests: fresh S3 buckets, the driver x database matrix of the upload suites, what a
// local data directory holds, and the drivers of the storage contract suite.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import type { StorageConfig } from '../../src/config.ts';
import { AzureStorage } from '../../src/storage/azure.ts';
import type { StorageCapabilities, StorageDriver } from '../../src/storage/driver.ts';
import { openStorage } from '../../src/storage/open.ts';
import { startFakeGcs } from './fake-gcs.ts';
import { externalService } from './services.ts';
import type { DialectName } from './harness.ts';
import { DIALECTS } from './harness.ts';

const s3 = externalService('STOWAGE_TEST_S3_ENDPOINT', 'an S3-compatible server (scripts/start-swift.sh)');

/** A fresh bucket on the test S3 server, as service storage configuration. */
export async function freshS3Storage(): Promise<StorageConfig> {
  const settings = {
    endpoint: s3.value!,
    region: process.env.STOWAGE_TEST_S3_REGION ?? 'us-east-1',
    bucket: `stowage-${randomBytes(5).toString('hex')}`,
    accessKeyId: process.env.STOWAGE_TEST_S3_ACCESS_KEY_ID ?? 'test:tester',
    secretAccessKey: process.env.STOWAGE_TEST_S3_SECRET_ACCESS_KEY ?? 'testing',
    forcePathStyle: true,
  };
  const client = new S3Client({
    endpoint: settings.endpoint,
    region: settings.region,
    forcePathStyle: true,
    credentials: { accessKeyId: settings.accessKeyId, secretAccessKey: settings.secretAccessKey },
  });
  await client.send(new CreateBucketCommand({ Bucket: settings.bucket }));
  client.destroy();
  return { driver: 's3', s3: settings };
}

/** Storage driver x database combinations an upload suite runs on. */
export const UPLOAD_MATRIX: { name: string; dialect: DialectName; storage: 'local' | 's3'; skip: string | false }[] = [
  { name: 'local disk + SQLite', dialect: 'sqlite', storage: 'local', skip: false },
  { name: 'local disk + PostgreSQL', dialect: 'postgres', storage: 'local', skip: DIALECTS[1].skip },
  { name: 'S3 + SQLite', dialect: 'sqlite', storage: 's3', skip: s3.skip },
];

/** A local data directory's stored objects (keys under storage/objects), sorted. */
export function storedObjects(dataDir: string): string[] {
  const walk = (dir: string, prefix = ''): string[] =>
    existsSync(dir)
      ? readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
          e.isDirectory() ? walk(join(dir, e.name), `${prefix}${e.name}/`) : [`${prefix}${e.name}`],
        )
      : [];
  return walk(join(dataDir, 'storage', 'objects')).sort();
}

/** Temporary files a local data directory still holds (readiness probes aside). */
export const leftoverTemp = (dataDir: string): string[] =>
  readdirSync(join(dataDir, 'storage', 'tmp')).filter((n) => !n.startsWith('.ready'));

// --- drivers for the storage contract suite (test/storage-contract.test.ts) --------------------

const azure = externalService('STOWAGE_TEST_AZURE_CONNECTION_STRING', 'Azurite (scripts/start-azurite.sh)');

export interface ContractDriver {
  name: string;
  skip: string | false;
  /** The capabilities the driver must report (capabilitiesOf), all of them. */
  capabilities: StorageCapabilities;
  /** What its part ETags look like (quoted content hashes). */
  etag: RegExp;
  make(): Promise<{ driver: StorageDriver; cleanup(): Promise<void> }>;
}

const emptyAll = async (driver: StorageDriver) => {
  for await (const o of driver.list('')) await driver.delete(o.key);
};

export const CONTRACT_DRIVERS: ContractDriver[] = [
  {
    name: 'local',
    skip: false,
    capabilities: {
      multipart: true,
      presignParts: false,
      writePart: true,
      readRange: true,
      localPath: true,
      freeSpace: true,
      serverSideConcat: true,
      bucketCors: false,
    },
    // XXH3-64, computed as the part passes.
    etag: /^"[0-9a-f]{16}"$/,
    async make() {
      const dir = mkdtempSync(join(tmpdir(), 'stowage-storage-'));
      const driver = await openStorage({ dataDir: dir, storage: { driver: 'local', fsync: true } });
      return { driver, cleanup: async () => rmSync(dir, { recursive: true, force: true }) };
    },
  },
  {
    name: 's3 (OpenStack Swift)',
    skip: s3.skip,
    capabilities: {
      multipart: true,
      presignParts: true,
      writePart: true,
      readRange: true,
      localPath: false,
      freeSpace: false,
      serverSideConcat: true,
      bucketCors: true,
    },
    // The MD5 storage computes.
    etag: /^"[0-9a-f]{32}"$/,
    async make() {
      const storage = await freshS3Storage();
      const driver = await openStorage({ dataDir: tmpdir(), storage });
      return {
        driver,
        async cleanup() {
          await emptyAll(driver);
          await driver.close?.();
        },
      };
    },
  },
  {
    name: 'azure (Azurite)',
    skip: azure.skip,
    capabilities: {
      multipart: true,
      presignParts: false,
      writePart: true,
      readRange: true,
      localPath: false,
      freeSpace: false,
      serverSideConcat: true,
      bucketCors: false,
    },
    etag: /^"[0-9a-f]{16}"$/,
    async make() {
      const container = `contract-${randomBytes(4).toString('hex')}`;
      const driver = new AzureStorage({ connectionString: azure.value!, container });
      await driver.container.create();
      return { driver, cleanup: async () => void (await driver.container.deleteIfExists()) };
    },
  },
  {
    // A mock: no GCS emulator runs on this machine (see test/helpers/fake-gcs.ts).
    name: 'gcs (an in-process fake of the GCS JSON API, not real GCS)',
    skip: false,
    capabilities: {
      multipart: true,
      presignParts: false,
      writePart: true,
      readRange: true,
      localPath: false,
      freeSpace: false,
      serverSideConcat: true,
      bucketCors: false,
    },
    etag: /^"[0-9a-f]{32}"$/,
    async make() {
      // Pages of 7, so that listings page through.
      const fake = await startFakeGcs({ buckets: ['contract'], pageSize: 7 });
      const driver = await openStorage({
        dataDir: tmpdir(),
        storage: { driver: 'gcs', gcs: { bucket: 'contract', apiEndpoint: fake.url, projectId: 'test' } },
      });
      return { driver, cleanup: () => fake.close() };
    },
  },
];
