// The one place that turns the storage configuration (STOWAGE_STORAGE) into a driver. Everything
// else holds a StorageDriver and asks it for capabilities, never for its kind.
import { join } from 'node:path';
import type { StorageConfig } from '../config.ts';
import type { FileHasher } from '../uploads/hashing/file-hasher.ts';
import { AzureStorage } from './azure.ts';
import type { StorageDriver } from './driver.ts';
import { GcsStorage } from './gcs.ts';
import { LocalStorage } from './local.ts';
import { S3Storage } from './s3.ts';

export interface StorageOptions {
  /** Local disk hashes uploads off the main thread with it (see LocalStorage). */
  hasher?: FileHasher;
}

/** The configured driver, not yet prepared: nothing is created or contacted. */
export function createStorage(
  config: { dataDir: string; storage: StorageConfig },
  opts: StorageOptions = {},
): StorageDriver {
  const storage = config.storage;
  switch (storage.driver) {
    case 's3':
      return new S3Storage(storage.s3);
    case 'azure':
      return new AzureStorage(storage.azure);
    case 'gcs':
      return new GcsStorage(storage.gcs);
    case 'local':
      return new LocalStorage(join(config.dataDir, 'storage'), { fsync: storage.fsync, hasher: opts.hasher });
  }
}

/** The configured driver, ready for use. */
export async function openStorage(
  config: { dataDir: string; storage: StorageConfig },
  opts: StorageOptions = {},
): Promise<StorageDriver> {
  const driver = createStorage(config, opts);
  await driver.init?.();
  return driver;
}
