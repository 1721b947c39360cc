// A dropped folder keeps its structure: the drop's entries are walked (directories read in
// batches until one comes back empty, as the entries API hands them out) and every file is paired
// with the folder path it sat in, which the upload then names.

/** A dropped file and the folder path it came from ("" when it was dropped by itself). */
export interface DroppedFile {
  file: File;
  dir: string;
}

/** The parts of the File and Directory Entries API the walk uses. */
interface Entry {
  isFile: boolean;
  isDirectory: boolean;
  name: string;
  file?(ok: (f: File) => void, fail: (e: unknown) => void): void;
  createReader?(): { readEntries(ok: (entries: Entry[]) => void, fail: (e: unknown) => void): void };
}

/**
 * The files of a drop with their folder paths. The entries are taken at once: a DataTransfer's
 * items are only readable while the drop event is dispatched.
 */
export function droppedFiles(dt: DataTransfer): Promise<DroppedFile[]> {
  const entries = [...(dt.items ?? [])]
    .filter((i) => i.kind === 'file')
    .map((i) => (i.webkitGetAsEntry?.() ?? null) as Entry | null);
  if (entries.length === 0 || entries.some((e) => e === null))
    return Promise.resolve([...dt.files].map((file) => ({ file, dir: '' })));
  return walkEntries(entries as Entry[]);
}

/** Every file below `entries`, depth first, with the path of the directory holding it. */
export async function walkEntries(entries: Entry[], dir = ''): Promise<DroppedFile[]> {
  const out: DroppedFile[] = [];
  for (const entry of entries) {
    if (entry.isFile && entry.file) {
      const file = await new Promise<File>((ok, fail) => entry.file!(ok, fail));
      out.push({ file, dir });
    } else if (entry.isDirectory && entry.createReader) {
      const reader = entry.createReader();
      const path = dir ? `${dir}/${entry.name}` : entry.name;
      for (;;) {
        const batch = await new Promise<Entry[]>((ok, fail) => reader.readEntries(ok, fail));
        if (batch.length === 0) break;
        out.push(...(await walkEntries(batch, path)));
      }
    }
  }
  return out;
}
