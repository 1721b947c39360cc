// What the Files view's modules share: the signed-in client, the folder shown, the folder list,
// and how to reload the view after a change. One object, so every module sees the same values.
import type { Stowage } from '../sdk/src/index.ts';
import type { Folder } from '../sdk/src/types.ts';

export const lib: {
  api: Stowage | undefined;
  folderNo: string | null;
  folders: Folder[];
  /** Reloads the folder tree and the first page of files. */
  refresh: () => Promise<void>;
} = {
  api: undefined,
  folderNo: null,
  folders: [],
  refresh: async () => {},
};

/** The signed-in client (the Files view is only shown once signed in). */
export const api = (): Stowage => {
  if (!lib.api) throw new Error('Not signed in');
  return lib.api;
};

/**
 * Runs `fn` over `items`, at most `limit` at a time, and says which failed and why: a bulk action
 * over hundreds of files neither floods the server nor stops at the first refusal.
 */
export async function eachBounded<T>(
  items: T[],
  limit: number,
  fn: (item: T) => Promise<void>,
): Promise<{ done: T[]; failed: { item: T; error: unknown }[] }> {
  const done: T[] = [];
  const failed: { item: T; error: unknown }[] = [];
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const item = items[next++]!;
      try {
        await fn(item);
        done.push(item);
      } catch (error) {
        failed.push({ item, error });
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return { done, failed };
}
