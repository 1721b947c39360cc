// File and blob rows as an upload writes them (uploads/commit.ts, services/file-records.ts,
// uploads/blob-store.ts), made in batches in creation order over two years: a name of words
// and an extension, a few tags, metadata, a size typical of its kind, a blob of the same size
// (or, for a re-upload of bytes the workspace already has, the earlier blob and is_duplicate).
// While it goes it counts what the seeder must write afterwards (usage) and what the bench
// needs to know (sample file numbers, files per folder, tag and word frequencies).
import { randomUUID } from 'node:crypto';
import type { NewFolder } from '../../../src/db/folders.ts';
import type { BlobRow, FileRow } from '../../../src/db/schema.ts';
import { extensionOf } from '../../../src/media/detect.ts';
import type { PlannedWorkspace } from './plan.ts';
import { type Rng, Weighted, fakeSha256, shortId, zipf } from './random.ts';
import { DIMENSIONS, KINDS, PHOTOGRAPHERS, TAGS, WORDS } from './vocab.ts';

export type Cell = string | number | null;
export type Row = Cell[];

export const FILE_COLUMNS = [
  'id',
  'file_no',
  'workspace_id',
  'folder_id',
  'name',
  'blob_id',
  'size',
  'mime_type',
  'extension',
  'format',
  'width',
  'height',
  'tags',
  'metadata',
  'custom_id',
  'is_private',
  'is_duplicate',
  'upload_source',
  'created_at',
  'updated_at',
] as const satisfies readonly (keyof FileRow)[];

export const BLOB_COLUMNS = [
  'id',
  'workspace_id',
  'sha256',
  'size',
  'storage_key',
  'created_at',
] as const satisfies readonly (keyof BlobRow)[];

export const FOLDER_COLUMNS = [
  'id',
  'folder_no',
  'workspace_id',
  'parent_id',
  'name',
  'path',
  'created_at',
  'updated_at',
] as const satisfies readonly (keyof NewFolder)[];

export interface Batch {
  files: Row[];
  blobs: Row[];
}

/** What the rows added up to; index 0 of `workspaces` is the big one. */
export interface SeedStats {
  usedBytes: number[];
  /** Files of the big workspace directly in each of its folders (by plan index), and at its root. */
  direct: Int32Array;
  root: number;
  bigFiles: number;
  /** A uniform sample of the big workspace's file numbers. */
  fileNos: string[];
  /** How many of the big workspace's files carry each tag of TAGS / hold each word of WORDS. */
  tagCounts: number[];
  wordCounts: number[];
}

const SAMPLE = 1000;
const TWO_YEARS_MS = 730 * 24 * 3600 * 1000;
const kindPicker = new Weighted(KINDS.map((k) => k.weight));
const tagPicker = new Weighted(zipf(TAGS.length));
const tagCountPicker = new Weighted([15, 25, 25, 20, 10, 5]);
const sourcePicker = new Weighted([70, 5, 10, 8, 7]);
const SOURCES = ['direct', 'multipart', 'remote', 'token', 'dashboard'] as const;
const cap = (w: string) => w[0].toUpperCase() + w.slice(1);

export function newStats(workspaces: PlannedWorkspace[]): SeedStats {
  return {
    usedBytes: workspaces.map(() => 0),
    direct: new Int32Array(workspaces[0].folders.length),
    root: 0,
    bigFiles: 0,
    fileNos: [],
    tagCounts: TAGS.map(() => 0),
    wordCounts: WORDS.map(() => 0),
  };
}

/** `total` files over `workspaces`, in batches of `batchSize`, the newest created at `endMs`. */
export function* fileBatches(
  rng: Rng,
  workspaces: PlannedWorkspace[],
  total: number,
  batchSize: number,
  endMs: number,
  stats: SeedStats,
): Generator<Batch> {
  const wsPicker = new Weighted(workspaces.map((w) => w.files));
  const lastBlob: ({ id: string; size: number; kind: number } | null)[] = workspaces.map(() => null);
  const startMs = endMs - TWO_YEARS_MS;
  let batch: Batch = { files: [], blobs: [] };
  for (let i = 0; i < total; i++) {
    const w = workspaces.length === 1 ? 0 : wsPicker.pick(rng);
    const ws = workspaces[w];
    const atMs = startMs + ((i + rng.next()) * TWO_YEARS_MS) / total;
    const created = new Date(atMs).toISOString();
    const dupOf = lastBlob[w] && rng.chance(0.02) ? lastBlob[w] : null;
    const k = dupOf ? dupOf.kind : kindPicker.pick(rng);
    const kind = KINDS[k];
    const size = dupOf ? dupOf.size : Math.max(1, Math.round(rng.logNormal(kind.median, kind.sigma)));
    let blobId = dupOf?.id;
    if (!blobId) {
      blobId = randomUUID();
      batch.blobs.push([blobId, ws.id, fakeSha256(), size, `${ws.id}/blobs/${randomUUID()}`, created]);
      lastBlob[w] = { id: blobId, size, kind: k };
      stats.usedBytes[w] += size;
    }
    const f = ws.folders.length === 0 || rng.chance(0.02) ? -1 : rng.int(ws.folders.length);
    const folder = f >= 0 ? ws.folders[f].row : null;
    const words: number[] = [];
    const name = fileName(rng, i, kind.ext, words);
    const tags = pickTags(rng);
    const fileNo = shortId();
    const [width, height] = kind.image ? dimensions(rng) : [null, null];
    const source = size > 100 * 1024 * 1024 ? 'multipart' : SOURCES[sourcePicker.pick(rng)];
    const updated = rng.chance(0.1)
      ? new Date(Math.min(endMs, atMs + rng.next() * 60 * 86_400_000)).toISOString()
      : created;
    batch.files.push([
      randomUUID(),
      fileNo,
      ws.id,
      folder?.id ?? null,
      name,
      blobId,
      size,
      kind.mime,
      extensionOf(name),
      kind.format,
      width,
      height,
      JSON.stringify(tags.map((t) => TAGS[t])),
      JSON.stringify(metadata(rng, i, kind.image, words)),
      rng.chance(0.1) ? `asset-${i}` : null,
      rng.chance(0.04) ? 1 : 0,
      dupOf ? 1 : 0,
      source,
      created,
      updated,
    ]);
    if (w === 0) count(stats, rng, f, fileNo, tags, words);
    if (batch.files.length === batchSize) {
      yield batch;
      batch = { files: [], blobs: [] };
    }
  }
  if (batch.files.length > 0) yield batch;
}

/** Tallies a big-workspace file; keeps a reservoir sample of file numbers. */
function count(stats: SeedStats, rng: Rng, folder: number, fileNo: string, tags: number[], words: number[]): void {
  stats.bigFiles++;
  if (folder >= 0) stats.direct[folder]++;
  else stats.root++;
  for (const t of tags) stats.tagCounts[t]++;
  for (const w of words) stats.wordCounts[w]++;
  if (stats.fileNos.length < SAMPLE) stats.fileNos.push(fileNo);
  else {
    const j = rng.int(stats.bigFiles);
    if (j < SAMPLE) stats.fileNos[j] = fileNo;
  }
}

/** Names as cameras, designers and exports make them; the running number keeps them unique. */
function fileName(rng: Rng, i: number, ext: string, words: number[]): string {
  const num = String(i).padStart(6, '0');
  const p = rng.next();
  if (p >= 0.7) return p < 0.85 ? `IMG_${num}.${ext.toUpperCase()}` : `DSC${num}.${ext}`;
  const a = rng.int(WORDS.length);
  words.push(a);
  if (p >= 0.55) return `${WORDS[a]}_${2023 + (i & 1)}_${num}.${ext}`;
  const b = rng.int(WORDS.length);
  words.push(b);
  return p < 0.35 ? `${WORDS[a]}-${WORDS[b]}-${num}.${ext}` : `${cap(WORDS[a])} ${WORDS[b]} ${num}.${ext}`;
}

/** Zero to five distinct tags, common ones far more often. */
function pickTags(rng: Rng): number[] {
  const want = tagCountPicker.pick(rng);
  const out: number[] = [];
  for (let tries = 0; out.length < want && tries < 20; tries++) {
    const t = tagPicker.pick(rng);
    if (!out.includes(t)) out.push(t);
  }
  return out;
}

function dimensions(rng: Rng): [number, number] {
  const [w, h] = rng.pick(DIMENSIONS);
  return rng.chance(0.3) ? [h, w] : [w, h];
}

function metadata(rng: Rng, i: number, image: boolean, words: number[]): Record<string, unknown> {
  if (rng.chance(0.2)) return {};
  const m: Record<string, unknown> = {};
  if (words.length > 0) m.alt = words.map((w) => WORDS[w]).join(' ');
  if (image && rng.chance(0.5)) m.photographer = rng.pick(PHOTOGRAPHERS);
  if (rng.chance(0.3)) m.sku = `SKU-${100000 + (i % 900000)}`;
  if (rng.chance(0.2)) m.campaign = `${rng.pick(WORDS)}-${2023 + (i & 1)}`;
  if (rng.chance(0.1)) m.rating = 1 + rng.int(5);
  return m;
}
