// Node helpers: a file on disk as a Blob whose parts are read only when sent.
import { openAsBlob } from 'node:fs';
import { basename } from 'node:path';

export async function fileFromPath(path: string, type?: string): Promise<{ blob: Blob; name: string }> {
  return { blob: await openAsBlob(path, type ? { type } : {}), name: basename(path) };
}
