// The folder tree of the Files view: expandable folders (each a button with aria-expanded; the
// arrow keys open and close it), breadcrumbs, and the current folder's rename, move and delete.
// Files dragged from the grid drop onto a folder here to move there.
import type { Folder } from '../sdk/src/types.ts';
import { api, lib } from './library.ts';
import { moveFiles, DRAG_TYPE } from './selection.ts';
import { $, guarded, status } from './ui.ts';

/** Folders opened by hand; the current folder's ancestors are open as well. */
const expanded = new Set<string>();

const parentPath = (path: string) => (path.includes('/') ? path.slice(0, path.lastIndexOf('/')) : '');
const childrenOf = (path: string) => lib.folders.filter((f) => parentPath(f.path) === path);
/** The folders inside `f`, at any depth. */
export const below = (f: Folder) => lib.folders.filter((o) => o.path.startsWith(`${f.path}/`));

export async function refreshFolders(): Promise<void> {
  const all: Folder[] = [];
  const walk = async (parent?: string) => {
    const res = await api().listFolders({ parent_folder_no: parent, limit: 100 });
    for (const f of res.folders) {
      all.push(f);
      await walk(f.folder_no);
    }
  };
  await walk();
  lib.folders = all.sort((a, b) => a.path.localeCompare(b.path));
  if (lib.folderNo && !lib.folders.some((f) => f.folder_no === lib.folderNo)) lib.folderNo = null;
  render();
}

function open(folderNo: string | null): void {
  lib.folderNo = folderNo;
  void lib.refresh();
}

function render(): void {
  const current = lib.folders.find((f) => f.folder_no === lib.folderNo);
  // The folder you are in is open, and so is the way to it; they stay open when you go back up.
  for (const f of lib.folders) if (current && `${current.path}/`.startsWith(`${f.path}/`)) expanded.add(f.folder_no);
  const list = $('folders');
  const root = document.createElement('li');
  root.append(folderButton('All files (root)', null));
  list.replaceChildren(root, ...childrenOf('').map((f) => branch(f)));
  crumbs(current);
  tools(current);
  const move = $<HTMLSelectElement>('move');
  move.replaceChildren(new Option('(root)', ''), ...lib.folders.map((f) => new Option(f.path, f.folder_no)));
  const bulkMove = $<HTMLSelectElement>('bulk-folder');
  bulkMove.replaceChildren(new Option('(root)', ''), ...lib.folders.map((f) => new Option(f.path, f.folder_no)));
}

/** A folder's button: opens it; a drop of dragged files moves them into it. */
function folderButton(label: string, folderNo: string | null): HTMLButtonElement {
  const b = document.createElement('button');
  b.type = 'button';
  b.textContent = label;
  b.dataset.folderNo = folderNo ?? '';
  if (folderNo === lib.folderNo) b.setAttribute('aria-current', 'true');
  b.addEventListener('click', () => open(folderNo));
  b.addEventListener('dragover', (e) => {
    if (!e.dataTransfer?.types.includes(DRAG_TYPE)) return;
    e.preventDefault();
    e.dataTransfer.dropEffect = 'move';
    b.classList.add('over');
  });
  b.addEventListener('dragleave', () => b.classList.remove('over'));
  b.addEventListener('drop', (e) => {
    const data = e.dataTransfer?.getData(DRAG_TYPE);
    b.classList.remove('over');
    if (!data) return;
    e.preventDefault();
    e.stopPropagation();
    void moveFiles(JSON.parse(data) as string[], folderNo);
  });
  return b;
}

function branch(f: Folder): HTMLLIElement {
  const li = document.createElement('li');
  const kids = childrenOf(f.path);
  const b = folderButton(f.name, f.folder_no);
  li.append(b);
  if (kids.length === 0) return li;
  const isOpen = expanded.has(f.folder_no);
  b.setAttribute('aria-expanded', String(isOpen));
  const toggle = (want: boolean) => {
    if (want) expanded.add(f.folder_no);
    else expanded.delete(f.folder_no);
    render();
    document.querySelector<HTMLButtonElement>(`#folders button[data-folder-no="${f.folder_no}"]`)?.focus();
  };
  // The arrow is for the mouse; keyboards open and close a folder with → and ←.
  const arrow = document.createElement('span');
  arrow.className = 'twisty';
  arrow.textContent = isOpen ? '▾' : '▸';
  arrow.setAttribute('aria-hidden', 'true');
  arrow.addEventListener('click', () => toggle(!isOpen));
  li.prepend(arrow);
  b.addEventListener('keydown', (e) => {
    if (e.key === 'ArrowRight' && !isOpen) toggle(true);
    else if (e.key === 'ArrowLeft' && isOpen) toggle(false);
    else return;
    e.preventDefault();
  });
  if (isOpen) {
    const ul = document.createElement('ul');
    ul.append(...kids.map((k) => branch(k)));
    li.append(ul);
  }
  return li;
}

/** "All files / a / b": every crumb but the last (where you are) opens its folder. */
function crumbs(current: Folder | undefined): void {
  const ol = $('crumbs');
  ol.replaceChildren();
  const trail: { label: string; no: string | null }[] = [{ label: 'All files', no: null }];
  if (current) {
    const parts = current.path.split('/');
    parts.forEach((_, i) => {
      const path = parts.slice(0, i + 1).join('/');
      const f = lib.folders.find((o) => o.path === path);
      if (f) trail.push({ label: f.name, no: f.folder_no });
    });
  }
  trail.forEach((c, i) => {
    const li = document.createElement('li');
    if (i === trail.length - 1) {
      const here = document.createElement('span');
      here.textContent = c.label;
      here.setAttribute('aria-current', 'location');
      li.append(here);
    } else {
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'link';
      b.textContent = c.label;
      b.addEventListener('click', () => open(c.no));
      li.append(b);
    }
    ol.append(li);
  });
}

/** The current folder's rename, move and delete (hidden at the root). */
function tools(current: Folder | undefined): void {
  $('folder-tools').hidden = !current;
  if (!current) return;
  $('folder-tools-title').textContent = `Folder ${current.name}`;
  $<HTMLInputElement>('folder-rename').value = current.name;
  const inside = new Set(below(current).map((f) => f.folder_no));
  const parent = $<HTMLSelectElement>('folder-parent');
  parent.replaceChildren(new Option('(root)', ''));
  for (const f of lib.folders) {
    if (f.folder_no === current.folder_no) continue;
    // A folder cannot go inside itself: its own subfolders are listed, but not offered.
    const o = new Option(inside.has(f.folder_no) ? `${f.path} (inside this folder)` : f.path, f.folder_no);
    o.disabled = inside.has(f.folder_no);
    parent.append(o);
  }
  parent.value = current.parent_folder_no ?? '';
}

async function deleteCurrent(): Promise<void> {
  const current = lib.folders.find((f) => f.folder_no === lib.folderNo);
  if (!current) return;
  const files = current.total_items;
  const subfolders = below(current).length;
  if (files === 0 && subfolders === 0) {
    if (!confirm(`Delete the empty folder ${current.path}?`)) return;
    await api().deleteFolder(current.folder_no);
  } else {
    const what = [
      files ? `${files} ${files === 1 ? 'file' : 'files'}` : '',
      subfolders ? `${subfolders} ${subfolders === 1 ? 'folder' : 'folders'}` : '',
    ]
      .filter(Boolean)
      .join(' and ');
    if (!confirm(`${current.path} is not empty: it holds ${what}. Delete it?`)) return;
    // Deleting files is not undone: a second, explicit yes before the recursive delete.
    if (!confirm(`Really delete ${current.path} and the ${what} in it? This cannot be undone.`)) return;
    await api().deleteFolder(current.folder_no, { recursive: true });
  }
  status(`Deleted the folder ${current.path}`);
  lib.folderNo = current.parent_folder_no;
  await lib.refresh();
}

export function wireFolders(): void {
  $('folder-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const input = $<HTMLInputElement>('folder-name');
    void guarded('Creating the folder', async () => {
      const made = await api().createFolder(input.value.trim(), lib.folderNo ?? undefined);
      input.value = '';
      status(`Created the folder ${made.path}`);
      await lib.refresh();
    });
  });
  $('folder-rename-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const no = lib.folderNo;
    if (!no) return;
    void guarded('Renaming the folder', async () => {
      const f = await api().renameFolder(no, $<HTMLInputElement>('folder-rename').value.trim());
      status(`Renamed the folder to ${f.path}`);
      await lib.refresh();
    });
  });
  $('folder-move-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const no = lib.folderNo;
    if (!no) return;
    void guarded('Moving the folder', async () => {
      const f = await api().moveFolder(no, $<HTMLSelectElement>('folder-parent').value || null);
      status(`Moved the folder to ${f.path}`);
      await lib.refresh();
    });
  });
  $('folder-delete').addEventListener('click', () => void guarded('Deleting the folder', deleteCurrent));
}
