// Acting on many files: a checkbox on every card, click and Shift+click for a range, Ctrl/Cmd+click
// to toggle, Space to toggle the focused card and Shift+arrows to extend; a bar with the count and
// Move, Add tag, Remove tag and Delete; dragging the selection onto a folder in the tree. Bulk
// actions run four requests at a time and name every file that failed, which stays selected.
import type { FileRecord } from '../sdk/src/types.ts';
import { api, eachBounded, lib } from './library.ts';
import { $, guarded, problem, status } from './ui.ts';

/** The drag data type of files dragged from the grid: a JSON array of file numbers. */
export const DRAG_TYPE = 'application/x-stowage-files';
const CONCURRENCY = 4;

const selected = new Set<string>();
/** Names by file number, for messages about files no longer shown. */
const names = new Map<string, string>();
/** Where a Shift+click or Shift+arrow range starts. */
let anchor: string | null = null;

const shown = () => [...document.querySelectorAll<HTMLLIElement>('#grid > li[data-file-no]')];
const itemOf = (no: string) => document.querySelector<HTMLLIElement>(`#grid > li[data-file-no="${no}"]`);

function mark(no: string, on: boolean): void {
  if (on) selected.add(no);
  else selected.delete(no);
  const li = itemOf(no);
  if (!li) return;
  li.classList.toggle('selected', on);
  li.querySelector<HTMLInputElement>('input[type=checkbox]')!.checked = on;
}

function selectRange(from: string, to: string, on = true): void {
  const nos = shown().map((li) => li.dataset.fileNo!);
  const a = nos.indexOf(from);
  const b = nos.indexOf(to);
  if (a < 0 || b < 0) {
    mark(to, on);
    return;
  }
  for (const no of nos.slice(Math.min(a, b), Math.max(a, b) + 1)) mark(no, on);
}

function updateBar(): void {
  $('bulk').hidden = selected.size === 0;
  $('bulk-count').textContent = `${selected.size} ${selected.size === 1 ? 'file' : 'files'} selected`;
}

/** After the list reloads: what is no longer shown is no longer selected; the rest is marked again. */
export function syncSelection(): void {
  const here = new Set(shown().map((li) => li.dataset.fileNo!));
  for (const no of [...selected]) if (!here.has(no)) selected.delete(no);
  for (const no of here) mark(no, selected.has(no));
  if (anchor && !here.has(anchor)) anchor = null;
  updateBar();
}

/** Makes a card (`li` holding the card button) selectable; call before the button's open handler. */
export function selectable(li: HTMLLIElement, button: HTMLButtonElement, f: FileRecord): void {
  const no = f.file_no;
  names.set(no, f.name);
  li.dataset.fileNo = no;
  const box = document.createElement('input');
  box.type = 'checkbox';
  box.className = 'pick';
  box.setAttribute('aria-label', `Select ${f.name}`);
  box.addEventListener('click', (e) => {
    if (e.shiftKey && anchor) selectRange(anchor, no, box.checked);
    else mark(no, box.checked);
    anchor = no;
    updateBar();
  });
  li.prepend(box);

  button.addEventListener('click', (e) => {
    if (!(e.ctrlKey || e.metaKey || e.shiftKey)) return;
    // With a modifier the click selects instead of opening the file.
    e.preventDefault();
    e.stopImmediatePropagation();
    if (e.shiftKey && anchor) selectRange(anchor, no);
    else {
      mark(no, !selected.has(no));
      anchor = no;
    }
    updateBar();
  });
  button.addEventListener('keydown', (e) => {
    if (e.key === ' ') {
      // Space selects (Enter opens): the button's own Space-click is held back.
      e.preventDefault();
      mark(no, !selected.has(no));
      anchor = no;
      updateBar();
      return;
    }
    const step = arrowStep(e.key);
    if (!step) return;
    e.preventDefault();
    const items = shown();
    const target = items[items.findIndex((i) => i.dataset.fileNo === no) + step];
    if (!target) return;
    if (e.shiftKey) {
      if (!anchor) anchor = no;
      mark(no, true);
      selectRange(anchor, target.dataset.fileNo!);
      updateBar();
    }
    target.querySelector<HTMLButtonElement>('button.card')?.focus();
  });
  button.addEventListener('keyup', (e) => {
    if (e.key === ' ') e.preventDefault();
  });

  button.draggable = true;
  button.addEventListener('dragstart', (e) => {
    // Dragging a selected card drags the whole selection; another card goes alone.
    const nos = selected.has(no) ? [...selected] : [no];
    e.dataTransfer?.setData(DRAG_TYPE, JSON.stringify(nos));
    e.dataTransfer?.setData('text/plain', nos.map((n) => names.get(n) ?? n).join('\n'));
    if (e.dataTransfer) e.dataTransfer.effectAllowed = 'move';
  });
}

/** How many cards an arrow key moves: ±1 sideways, ± a row (the cards sharing the first's top) up and down. */
function arrowStep(key: string): number {
  if (key === 'ArrowRight') return 1;
  if (key === 'ArrowLeft') return -1;
  if (key !== 'ArrowDown' && key !== 'ArrowUp') return 0;
  const items = shown();
  const top = items[0]?.offsetTop;
  const perRow = Math.max(1, items.filter((i) => i.offsetTop === top).length);
  return key === 'ArrowDown' ? perRow : -perRow;
}

const plural = (n: number) => `${n} ${n === 1 ? 'file' : 'files'}`;

/**
 * Runs one request per file, four at a time, then says what happened: all done, or how many
 * failed and why, by name. Failed files stay selected for another try; the list reloads.
 */
async function bulk(nos: string[], done: string, fn: (no: string) => Promise<void>): Promise<void> {
  const { failed } = await eachBounded(nos, CONCURRENCY, fn);
  for (const no of nos) mark(no, false);
  for (const { item } of failed) selected.add(item);
  await lib.refresh();
  if (failed.length === 0) status(`${done}: ${plural(nos.length)}`);
  else {
    const why = failed
      .slice(0, 5)
      .map(({ item, error }) => `${names.get(item) ?? item} (${problem(error)})`)
      .join('; ');
    const more = failed.length > 5 ? `; and ${failed.length - 5} more` : '';
    status(
      `${done}: ${nos.length - failed.length} of ${plural(nos.length)}; ${failed.length} failed (kept selected): ${why}${more}`,
      true,
    );
  }
}

export async function moveFiles(nos: string[], folderNo: string | null): Promise<void> {
  const to = lib.folders.find((f) => f.folder_no === folderNo)?.path ?? 'the root';
  await guarded('Moving', () =>
    bulk(nos, `Moved to ${to}`, async (no) => {
      await api().updateFile(no, { folder_no: folderNo });
    }),
  );
}

function tagInput(): string | undefined {
  const tag = $<HTMLInputElement>('bulk-tag').value.trim();
  if (!tag) status('Type the tag to add or remove first', true);
  return tag || undefined;
}

export function wireSelection(): void {
  $('select-all').addEventListener('click', () => {
    for (const li of shown()) mark(li.dataset.fileNo!, true);
    updateBar();
  });
  $('bulk-clear').addEventListener('click', () => {
    for (const no of [...selected]) mark(no, false);
    anchor = null;
    updateBar();
  });
  $('bulk-move-form').addEventListener('submit', (e) => {
    e.preventDefault();
    void moveFiles([...selected], $<HTMLSelectElement>('bulk-folder').value || null);
  });
  $('bulk-add-tag').addEventListener('click', () => {
    const tag = tagInput();
    if (tag)
      void guarded('Tagging', () =>
        bulk([...selected], `Tagged ${tag}`, async (no) => {
          await api().updateFile(no, { add_tags: [tag] });
        }),
      );
  });
  $('bulk-remove-tag').addEventListener('click', () => {
    const tag = tagInput();
    if (tag)
      void guarded('Untagging', () =>
        bulk([...selected], `Removed the tag ${tag}`, async (no) => {
          await api().updateFile(no, { remove_tags: [tag] });
        }),
      );
  });
  $('bulk-delete').addEventListener('click', () => {
    const nos = [...selected];
    if (nos.length === 0 || !confirm(`Delete ${plural(nos.length)}?`)) return;
    void guarded('Deleting', () => bulk(nos, 'Deleted', (no) => api().deleteFile(no)));
  });
}
