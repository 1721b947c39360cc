// The table bench/scale prints (Markdown, to paste into the README): p50 and p99 of each
// operation with each number of clients, the target, and whether the figure with the most
// clients meets it.
import type { Cell, Measured } from './measure.ts';
import type { SeedInfo } from './seed/info.ts';

const ms = (v: number) => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));
const cellText = (c: Cell | undefined, which: 'p50' | 'p99') => {
  if (!c) return '-';
  const bound = c.lowerBound && (which === 'p99' || c.result.requests === 0);
  return `${bound ? '≥' : ''}${ms(c.result[which])}`;
};

/** Whether the row meets its target, judged with the most clients. */
function verdict(m: Measured, empty?: Measured): { target: string; result: string } {
  const last = m.cells[m.cells.length - 1];
  if (!last) return { target: '', result: 'no data' };
  const errors = m.cells.reduce((n, c) => n + c.result.errors, 0);
  const t = m.op.target;
  let target: string;
  let pass: boolean;
  if (t.kind === 'p99') {
    target = `p99 < ${t.ms} ms`;
    pass = last.result.p99 < t.ms;
  } else {
    const base = empty?.cells.find((c) => c.clients === last.clients);
    if (!base) return { target: `≤ ${t.ratio}x empty`, result: 'no baseline' };
    const r50 = last.result.p50 / base.result.p50;
    const r99 = last.result.p99 / base.result.p99;
    target = `≤ ${t.ratio}x empty (${r50.toFixed(2)}x, ${r99.toFixed(2)}x)`;
    pass = r50 <= t.ratio && r99 <= t.ratio;
  }
  return { target, result: errors > 0 ? `FAIL (${errors} errors)` : pass ? 'pass' : 'FAIL' };
}

export function table(info: SeedInfo, rows: Measured[], clients: number[], empty?: Measured, note = ''): string {
  const head = ['Operation'];
  for (const c of clients) head.push(`p50 ${c}c`, `p99 ${c}c`);
  head.push('requests', 'Target (most clients)', 'Result');
  const body: string[][] = [];
  const line = (label: string, m: Measured, v?: { target: string; result: string }) => {
    const cells = [label];
    for (const c of clients) {
      const cell = m.cells.find((x) => x.clients === c);
      cells.push(cellText(cell, 'p50'), cellText(cell, 'p99'));
    }
    cells.push(m.cells.map((c) => c.result.requests).join(' / '), v?.target ?? '', v?.result ?? '');
    body.push(cells);
  };
  for (const m of rows) line(m.op.label, m, verdict(m, empty));
  if (empty) line('upload a 1 KB file, empty database', empty);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((r) => r[i].length)));
  const fmt = (r: string[]) =>
    `| ${r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join(' | ')} |`;
  const db = info.dialect === 'postgres' ? 'PostgreSQL' : 'SQLite';
  return [
    `Stowage at scale: ${db}, ${info.files.toLocaleString('en')} files over ${info.workspaces} workspace(s); ` +
      `measured workspace ${info.workspaceFiles.toLocaleString('en')} files in ${info.workspaceFolders} folders. ` +
      "Latencies in ms (wrk, closed loop); ≥ marks a lower bound: too few requests finished (none: the run's length)." +
      note,
    '',
    fmt(head),
    `|${widths.map((w, i) => (i === 0 ? `:${'-'.repeat(w + 1)}` : `${'-'.repeat(w + 1)}:`)).join('|')}|`,
    ...body.map(fmt),
  ].join('\n');
}
