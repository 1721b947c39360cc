import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { StorageDriver } from './driver.ts';

/** Files under a root folder on local disk. */
export class LocalStorage implements StorageDriver {
  readonly name = 'local';
  constructor(private readonly root: string) {}

  async init(): Promise<void> {
    await mkdir(join(this.root, 'tmp'), { recursive: true });
  }

  async check(): Promise<void> {
    const probe = join(this.root, 'tmp', `.ready-${process.pid}`);
    await writeFile(probe, '');
    await rm(probe, { force: true });
  }
}
