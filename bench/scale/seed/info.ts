// What a seed leaves for the bench, in DATA_DIR/scale.json (owner-readable only: it holds an
// API key): where the database is, the big workspace and its key, and the things the bench's
// requests name (sample file numbers, folders to list and rename, words and tags to look for).
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Dialect } from '../../../src/db/database.ts';

export interface RenameTarget {
  folder_no: string;
  name: string;
  path: string;
  /** Files in it and below it. */
  files: number;
}

export interface SeedInfo {
  dialect: Dialect;
  /** PostgreSQL only. */
  databaseUrl?: string;
  dataDir: string;
  /** Every file of every workspace. */
  files: number;
  workspaces: number;
  /** The big workspace: the one measured. */
  workspaceId: string;
  privateKey: string;
  workspaceFiles: number;
  workspaceFolders: number;
  fileNos: string[];
  /** Folders to list the files of (the files directly in each). */
  listFolders: string[];
  /** Folders with about 10,000 files below, to rename. */
  renameFolders: RenameTarget[];
  /** A top folder: the bench makes its upload folder inside it. */
  uploadParent: { folder_no: string; path: string };
  searchWords: string[];
  tags: string[];
  seededAt: string;
  seconds: number;
}

export const infoPath = (dataDir: string) => join(dataDir, 'scale.json');

export function writeInfo(info: SeedInfo): void {
  writeFileSync(infoPath(info.dataDir), `${JSON.stringify(info, null, 2)}\n`, { mode: 0o600 });
}

export function readInfo(dataDir: string): SeedInfo {
  try {
    return JSON.parse(readFileSync(infoPath(dataDir), 'utf8')) as SeedInfo;
  } catch (err) {
    throw new Error(
      `no seed in ${dataDir} (${(err as NodeJS.ErrnoException).code ?? String(err)}): run npm run seed first`,
    );
  }
}
