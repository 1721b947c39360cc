import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import type { StorageConfig } from '../../src/config.ts';
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
