// The Files view: the folder tree, the grid of cards a page at a time ("Load more"), and opening
// a file's page. Uploads are the drop-in uploader's (uploads.ts).
import type { FileRecord } from '../sdk/src/types.ts';
import { filtering, findQuery, saveToAddress } from './find.ts';
import { openFilePage } from './file-page.ts';
import { refreshFolders } from './folders-tree.ts';
import { api, lib } from './library.ts';
import { selectable, syncSelection } from './selection.ts';
import { $, guarded, human } from './ui.ts';

/** Where the next page of the Files view starts; null when the last page is shown. */
let nextCursor: string | null = null;
/** Answers to list requests can arrive out of order: only the latest request's is shown. */
let listSeq = 0;

export async function refreshFiles(): Promise<void> {
  await guarded('Loading files', async () => {
    await refreshFolders();
    await loadFiles(true);
  });
}

/** The first page of the list the controls describe, or (`fromStart` false) the next one, appended. */
export async function loadFiles(fromStart: boolean): Promise<void> {
  const seq = ++listSeq;
  if (fromStart) saveToAddress('files', lib.folderNo);
  const res = await api().listFiles({
    ...findQuery(),
    folder_no: lib.folderNo ?? undefined,
    limit: 100,
    ...(fromStart || !nextCursor ? {} : { cursor: nextCursor }),
  });
  if (seq !== listSeq) return;
  const grid = $('grid');
  if (fromStart) grid.replaceChildren();
  for (const f of res.files) grid.append(card(f));
  syncSelection();
  nextCursor = res.meta.nextCursor;
  $('more').hidden = !nextCursor;
  const shown = grid.childElementCount;
  const total = `${res.meta.totalEstimated ? 'about ' : ''}${res.meta.total.toLocaleString()}`;
  $('count').textContent = shown ? `Showing ${shown.toLocaleString()} of ${total} files` : '';
  $('select-all').hidden = shown === 0;
  $('empty').hidden = shown > 0;
  $('empty').textContent = filtering() ? 'No files match these filters.' : 'No files here yet.';
}

function card(f: FileRecord): HTMLLIElement {
  const li = document.createElement('li');
  const b = document.createElement('button');
  b.type = 'button';
  b.className = 'card';
  if (f.thumbnail) {
    const img = document.createElement('img');
    img.src = f.thumbnail;
    img.alt = f.name;
    img.loading = 'lazy';
    // A card is dragged as a whole, not its picture.
    img.draggable = false;
    b.append(img);
  } else {
    const icon = document.createElement('div');
    icon.className = 'icon';
    icon.textContent = (f.extension ?? 'file').toUpperCase();
    icon.setAttribute('aria-hidden', 'true');
    b.append(icon);
  }
  const name = document.createElement('span');
  name.textContent = f.name;
  const size = document.createElement('small');
  size.textContent = human(f.size);
  b.append(name, size);
  li.append(b);
  selectable(li, b, f);
  b.addEventListener('click', () => openFilePage(f));
  return li;
}

export function wireFiles(): void {
  lib.refresh = refreshFiles;
  $('more').addEventListener('click', () => void guarded('Loading files', () => loadFiles(false)));
}
