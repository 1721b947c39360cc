// The operations of issue 18's table, as requests on the seeded big workspace, with the target
// each must meet with the most clients: every read p99 < 50 ms on PostgreSQL and < 100 ms on
// SQLite, a folder rename p99 < 100 ms, an upload within 1.5x of the same upload on an empty
// database, and /healthz while deep lists run < 20 ms (the client-side view of event-loop
// blocking; the server's own monitorEventLoopDelay max is taken around every row: loop.ts).
import type { SeedInfo } from './seed/info.ts';
import type { WrkRun } from './wrk.ts';

export type Target =
  | { kind: 'p99'; ms: number }
  /** p50 and p99 within `ratio` of the same operation on an empty database. */
  | { kind: 'ratio'; ratio: number };

export interface Operation {
  id: string;
  label: string;
  wrk: Pick<WrkRun, 'kind' | 'lines'>;
  target: Target;
  /** Run beside it with as many clients; the row reports the /healthz requests. */
  beside?: Pick<WrkRun, 'kind' | 'lines'>;
  /**
   * Keyset paging: `wrk.lines[0]` is the first page's request; the bench walks it by cursor
   * to this page (cursor.ts) and measures the request for the page reached.
   */
  walkTo?: number;
}

/**
 * How the file lists are asked: the default answer (`full`: the records under files, items and
 * data, for every SDK generation) or as Stowage's SDK asks (`own`: aliases=none, files and meta).
 */
export type ListForm = 'full' | 'own';

export const listFormText = (form: ListForm) =>
  form === 'own'
    ? "File lists are asked with aliases=none, as Stowage's SDK asks: the records once, under files (with meta)."
    : "File lists are asked in the default answer: the records three times, under files, items and data (the hosted SDKs' names); Stowage's SDK asks with aliases=none (--lists own).";

/** The page the issue calls "page 5,000", or the last full page of a smaller workspace. */
export const deepPage = (info: SeedInfo) => Math.max(1, Math.min(5000, Math.floor(info.workspaceFiles / 100)));

/** Where the bench's uploads go (a new folder inside a top folder, deleted afterwards). */
export const uploadFolder = (info: SeedInfo, run: string) =>
  `${info.uploadParent.path || 'Marketing'}/bench-uploads-${run}`;

export function operations(info: SeedInfo, run: string, form: ListForm = 'full'): Operation[] {
  const list = (query: string) => `/api/v1/files?limit=100${query}${form === 'own' ? '&aliases=none' : ''}`;
  const read: Target = { kind: 'p99', ms: info.dialect === 'postgres' ? 50 : 100 };
  const page = deepPage(info);
  const get = (lines: string[]) => ({ kind: 'get' as const, lines });
  return [
    { id: 'first-page', label: 'GET /api/v1/files first page (100)', wrk: get([list('')]), target: read },
    { id: 'deep-page', label: `page ${page.toLocaleString('en')}`, wrk: get([list(`&page=${page}`)]), target: read },
    {
      id: 'cursor-page',
      label: cursorLabel(page),
      wrk: get([list('')]),
      target: read,
      walkTo: page,
    },
    {
      id: 'search',
      label: 'search by a name fragment',
      wrk: get(info.searchWords.map((w) => list(`&search=${encodeURIComponent(w)}`))),
      target: read,
    },
    {
      id: 'tag',
      label: 'filter by one tag',
      wrk: get(info.tags.map((t) => list(`&tags=${encodeURIComponent(t)}`))),
      target: read,
    },
    {
      id: 'folder-files',
      label: "one folder's files",
      wrk: get(info.listFolders.map((no) => list(`&folder_no=${no}`))),
      target: read,
    },
    { id: 'folders-root', label: 'folder list at root (with totals)', wrk: get(['/api/v1/folders']), target: read },
    {
      id: 'rename',
      label: `rename a folder (~${Math.round(median(info.renameFolders.map((f) => f.files))).toLocaleString('en')} files below)`,
      wrk: { kind: 'rename', lines: info.renameFolders.map((f) => `${f.folder_no}\t${f.name}`) },
      target: { kind: 'p99', ms: 100 },
    },
    {
      id: 'get-file',
      label: 'get one file by file_no',
      wrk: get(info.fileNos.map((no) => `/api/v1/files/${no}`)),
      target: read,
    },
    {
      id: 'upload',
      label: 'upload a 1 KB file',
      wrk: { kind: 'upload', lines: [uploadFolder(info, run)] },
      target: { kind: 'ratio', ratio: 1.5 },
    },
    {
      id: 'healthz',
      label: `/healthz during page ${page.toLocaleString('en')} lists`,
      wrk: get(['/healthz']),
      beside: get([list(`&page=${page}`)]),
      target: { kind: 'p99', ms: 20 },
    },
  ];
}

export const cursorLabel = (page: number) => `page ${page.toLocaleString('en')} by cursor`;

function median(values: number[]): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}
