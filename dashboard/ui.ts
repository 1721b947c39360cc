// What every view of the dashboard shares: element lookup, the status line (errors go once the
// next action succeeds), error wording, sizes, and table cells that name their column on phones.
import { StowageError } from '../sdk/src/index.ts';

export const $ = <T extends HTMLElement = HTMLElement>(id: string) => document.getElementById(id) as T;

/** Bumped by every status change, so an action can tell whether the line changed while it ran. */
let statusSeq = 0;
export let statusIsError = false;

export function status(text: string, isError = false): void {
  const el = $('status');
  el.textContent = text;
  el.style.color = isError ? 'var(--danger)' : '';
  statusIsError = isError && text !== '';
  statusSeq++;
}

/** After a success, an error shown before it began is out of date: it goes. */
function clearStaleError(since: number): void {
  if (statusIsError && statusSeq === since) status('');
}

/** "Invalid API key: The provided API key is invalid…": the title without its own stop, then the detail. */
export function problem(err: unknown): string {
  if (err instanceof StowageError) {
    const title = err.error.trim().replace(/[.:]+$/, '');
    const detail = err.message.trim();
    if (!detail || detail === err.error.trim()) return title;
    return title ? `${title}: ${detail}` : detail;
  }
  return err instanceof Error ? err.message : String(err);
}

export async function guarded(what: string, fn: () => Promise<void>): Promise<void> {
  const since = statusSeq;
  try {
    await fn();
    clearStaleError(since);
  } catch (err) {
    status(`${what} failed: ${problem(err)}`, true);
  }
}

/**
 * A size for people, in steps of 1024 as the uploader (Uppy) counts, so a file reads the same
 * number on its card, in the uploader and on the progress line; labelled KiB, MiB… as the CLI
 * does (Uppy writes "MB" for the same figure).
 */
export function human(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let n = bytes;
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

/** A table cell that carries its column's name, shown beside it where the header row is not (phones). */
export function labelledCell(label: string, text?: string): HTMLTableCellElement {
  const td = document.createElement('td');
  td.dataset.label = label;
  if (text !== undefined) td.textContent = text;
  return td;
}
