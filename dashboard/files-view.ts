// The Files view: the folder tree, the grid of cards a page at a time ("Load more"), uploads of
// chosen or dropped files and folders, and opening a file's page.
import type { FileRecord } from '../sdk/src/types.ts';
import { type DroppedFile, droppedFiles } from './folder-drop.ts';
import { filtering, findQuery, saveToAddress } from './find.ts';
import { openFilePage } from './file-page.ts';
import { refreshFolders } from './folders-tree.ts';
import { api, eachBounded, lib } from './library.ts';
import { selectable, syncSelection } from './selection.ts';
import { $, guarded, human, problem, status } from './ui.ts';

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

/** Uploads files, four at a time, each into the current folder or the dropped folder path below it. */
async function uploadAll(files: DroppedFile[]): Promise<void> {
  const list = $('uploads');
  const base = lib.folders.find((f) => f.folder_no === lib.folderNo)?.path ?? '';
  const { failed } = await eachBounded(files, 4, async ({ file, dir }) => {
    const li = document.createElement('li');
    const label = document.createElement('span');
    label.textContent = dir ? `${dir}/${file.name}` : file.name;
    const bar = document.createElement('progress');
    bar.max = file.size || 1;
    bar.value = 0;
    bar.setAttribute('aria-label', `Uploading ${label.textContent}`);
    const pct = document.createElement('small');
    pct.textContent = '0%';
    li.append(label, bar, pct);
    list.append(li);
    const folder = [base, dir].filter(Boolean).join('/');
    try {
      await api().uploadFile(file, file.name, {
        folder: folder || undefined,
        parallel: 4,
        onProgress: ({ loaded, total }) => {
          bar.value = loaded;
          pct.textContent = `${Math.round((100 * loaded) / Math.max(1, total))}%`;
        },
      });
      li.remove();
      status(`Uploaded ${label.textContent}`);
    } catch (err) {
      pct.textContent = 'failed';
      status(`Upload of ${label.textContent} failed: ${problem(err)}`, true);
      throw err;
    }
  });
  if (files.length > 1 && failed.length === 0) status(`Uploaded ${files.length} files`);
  await refreshFiles();
}

export function wireFiles(): void {
  lib.refresh = refreshFiles;
  $<HTMLInputElement>('file-input').addEventListener('change', (e) => {
    const input = e.target as HTMLInputElement;
    if (input.files?.length)
      void uploadAll([...input.files].map((file) => ({ file, dir: '' }))).then(() => (input.value = ''));
  });
  const drop = $('drop');
  drop.addEventListener('dragover', (e) => {
    e.preventDefault();
    drop.classList.add('over');
  });
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', (e) => {
    e.preventDefault();
    drop.classList.remove('over');
    if (!e.dataTransfer) return;
    void droppedFiles(e.dataTransfer).then((files) => (files.length ? uploadAll(files) : undefined));
  });
  $('more').addEventListener('click', () => void guarded('Loading files', () => loadFiles(false)));
}
