// The shape of a seeded library before any file is made: how many files each workspace gets
// (one big workspace, the rest a long tail), and each workspace's folder tree, nested as
// people nest them (10 top folders, 10 below each, 8 below those, a stage folder under some):
// 1,010 folders in the big workspace, fewer in smaller ones.
import { randomUUID } from 'node:crypto';
import type { NewFolder } from '../../../src/db/folders.ts';
import { type Rng, shortId, zipf } from './random.ts';
import { STAGES, TOP_FOLDERS, WORDS } from './vocab.ts';

/** Children per folder at each depth: 10 top folders, then 10, 8 and 1 below each. */
const FANOUT = [10, 10, 8, 1];
export const MAX_FOLDERS = FANOUT.reduce((sum, _, i) => sum + FANOUT.slice(0, i + 1).reduce((p, f) => p * f, 1), 0);

export interface PlannedFolder {
  row: NewFolder & { parent_id: string | null };
  depth: number;
  /** Index of the parent in the workspace's list; -1 at the top. */
  parent: number;
}

export interface PlannedWorkspace {
  id: string;
  /** How many files it is meant to get (the rows are drawn by these weights, so roughly). */
  files: number;
  folders: PlannedFolder[];
}

/**
 * Files per workspace: all of them with one workspace; otherwise `bigShare` in the first and
 * the rest over the others with Zipf weights (a few mid-size workspaces, many small ones).
 */
export function splitFiles(total: number, workspaces: number, bigShare: number): number[] {
  if (workspaces === 1) return [total];
  const big = Math.round(total * bigShare);
  const weights = zipf(workspaces - 1, 0.8);
  const sum = weights.reduce((a, b) => a + b, 0);
  const rest = weights.map((w) => Math.floor(((total - big) * w) / sum));
  let left = total - big - rest.reduce((a, b) => a + b, 0);
  for (let i = 0; left > 0; i = (i + 1) % rest.length, left--) rest[i]++;
  return [big, ...rest];
}

/** How many folders a workspace of `files` gets when the biggest (`bigFiles`) gets `bigFolders`. */
export function folderCount(files: number, bigFiles: number, bigFolders: number): number {
  if (files === bigFiles) return Math.min(bigFolders, MAX_FOLDERS);
  return Math.max(1, Math.min(MAX_FOLDERS, Math.round((bigFolders * files) / Math.max(1, bigFiles))));
}

const cap = (w: string) => w[0].toUpperCase() + w.slice(1);

/** A sibling name at `depth` (0 = top), unique among the parent's children by construction. */
function folderName(rng: Rng, depth: number, k: number, used: Set<string>): string {
  if (depth === 0) return TOP_FOLDERS[k] ?? `Library ${k + 1}`;
  if (depth === 2) return `2024-${String(k + 1).padStart(2, '0')} ${rng.pick(WORDS)}`;
  if (depth === 3) return STAGES[k % STAGES.length];
  for (;;) {
    const name = `${cap(rng.pick(WORDS))} ${cap(rng.pick(WORDS))}`;
    if (!used.has(name)) return name;
  }
}

/** `count` folders, breadth first, so a small workspace has a few top folders and a big one the full tree. */
export function planFolders(rng: Rng, workspaceId: string, count: number, createdAt: string): PlannedFolder[] {
  const out: PlannedFolder[] = [];
  const add = (depth: number, parent: number, k: number, used: Set<string>) => {
    const name = folderName(rng, depth, k, used);
    used.add(name);
    const p = parent >= 0 ? out[parent].row : null;
    out.push({
      depth,
      parent,
      row: {
        id: randomUUID(),
        folder_no: shortId(),
        workspace_id: workspaceId,
        parent_id: p?.id ?? null,
        name,
        path: p ? `${p.path}/${name}` : name,
        created_at: createdAt,
        updated_at: createdAt,
      },
    });
  };
  let level = [-1];
  for (let depth = 0; depth < FANOUT.length && out.length < count; depth++) {
    const next: number[] = [];
    for (const parent of level) {
      const used = new Set<string>();
      for (let k = 0; k < FANOUT[depth] && out.length < count; k++) {
        add(depth, parent, k, used);
        next.push(out.length - 1);
      }
    }
    level = next;
  }
  return out;
}

/** Files in each folder and below it, from the files directly in each (`direct[i]`). */
export function filesBelow(folders: PlannedFolder[], direct: ArrayLike<number>): number[] {
  const below = Array.from(direct);
  // Children come after their parents (breadth first): add each into its parent, deepest first.
  for (let i = folders.length - 1; i >= 0; i--) if (folders[i].parent >= 0) below[folders[i].parent] += below[i];
  return below;
}
