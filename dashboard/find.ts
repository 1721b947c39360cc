// The Files view's search, filters and sort, kept in the page's address (?q=…&type=…) so that a
// view can be shared, bookmarked and reloaded as it was.
import type { FileListQuery } from '../sdk/src/types.ts';
import { $ } from './ui.ts';

type SearchIn = 'name' | 'tag' | 'custom_id';

/** The address's parameters and the control each is kept in. */
const FIELDS = {
  q: 'f-text',
  in: 'f-in',
  type: 'f-type',
  from: 'f-from',
  to: 'f-to',
  sort: 'f-sort',
} as const;

const input = (id: string) => $<HTMLInputElement | HTMLSelectElement>(id);

/** The list query the controls describe (without folder and paging). */
export function findQuery(): Partial<FileListQuery> {
  const q: Partial<FileListQuery> = {};
  const text = input('f-text').value.trim();
  const where = input('f-in').value as SearchIn;
  if (text) {
    if (where === 'tag') q.tags = text;
    else if (where === 'custom_id') q.custom_id = text;
    else q.search = text;
  }
  const type = input('f-type').value;
  if (type) q.type = type as FileListQuery['type'];
  const from = input('f-from').value;
  if (from) q.created_after = from;
  // "To" is the last day wanted: the list is asked for what came before the next day.
  const to = input('f-to').value;
  if (to) q.created_before = new Date(Date.parse(to) + 86_400_000).toISOString().slice(0, 10);
  const sort = input('f-sort').value;
  if (sort && sort !== 'created_at_desc') q.sort = sort as FileListQuery['sort'];
  return q;
}

/** Whether any filter narrows the list (the empty message then says so). */
export function filtering(): boolean {
  return ['f-text', 'f-type', 'f-from', 'f-to'].some((id) => input(id).value.trim() !== '');
}

/** Writes the view, the folder and the controls into the address, replacing the entry. */
export function saveToAddress(view: string, folderNo: string | null): void {
  const params = new URLSearchParams();
  if (view !== 'files') params.set('view', view);
  if (folderNo) params.set('folder', folderNo);
  // The open file's page stays in the address while the list behind it changes.
  const file = new URLSearchParams(location.search).get('file');
  if (file && view === 'files') params.set('file', file);
  for (const [param, id] of Object.entries(FIELDS)) {
    const value = input(id).value.trim();
    const isDefault = (param === 'in' && value === 'name') || (param === 'sort' && value === 'created_at_desc');
    if (value && !isDefault) params.set(param, value);
  }
  const search = params.toString();
  history.replaceState(null, '', `${location.pathname}${search ? `?${search}` : ''}`);
}

/** Names the file whose page is open in the address (`?file=<file_no>`), or takes it out. */
export function setAddressFile(fileNo: string | null): void {
  const params = new URLSearchParams(location.search);
  if (fileNo) params.set('file', fileNo);
  else params.delete('file');
  const search = params.toString();
  history.replaceState(null, '', `${location.pathname}${search ? `?${search}` : ''}`);
}

/** Reads the address into the controls; returns the view and folder it names. */
export function loadFromAddress(): { view: string | null; folderNo: string | null; fileNo: string | null } {
  const params = new URLSearchParams(location.search);
  for (const [param, id] of Object.entries(FIELDS)) {
    const value = params.get(param);
    if (value === null) continue;
    const el = input(id);
    // A select keeps its value only when it is one of its options: a hand-edited address cannot set another.
    if (el instanceof HTMLSelectElement && ![...el.options].some((o) => o.value === value)) continue;
    el.value = value;
  }
  return { view: params.get('view'), folderNo: params.get('folder'), fileNo: params.get('file') };
}

/** Calls `onChange` when a control changes; typing in the search box waits for a pause. */
export function wireFind(onChange: () => void): void {
  let timer: ReturnType<typeof setTimeout> | undefined;
  $('f-text').addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(onChange, 300);
  });
  for (const id of ['f-in', 'f-type', 'f-from', 'f-to', 'f-sort']) $(id).addEventListener('change', onChange);
  $('find').addEventListener('submit', (e) => {
    e.preventDefault();
    clearTimeout(timer);
    onChange();
  });
  // After the form's own reset has put the controls back.
  $('find').addEventListener('reset', () => setTimeout(onChange, 0));
}
