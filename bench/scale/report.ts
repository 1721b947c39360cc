// The block bench/scale prints last, to paste into the README's performance section as it is:
// one line saying what was measured, then a Markdown table (p50 and p99 of each operation with
// each number of clients, the latency target and whether the figure with the most clients
// meets it, then the server's max event-loop delay per client count and the 20 ms target on
// it, judged apart so that each verdict reads on its own), then what the marks mean.
import { cpus as cpuList } from 'node:os';
import type { Cell, Measured } from './measure.ts';
import { LOOP_RESOLUTION_MS } from './loop.ts';
import type { SeedInfo } from './seed/info.ts';

/** Issue 18: no request blocks the event loop for more than this. */
export const LOOP_TARGET_MS = 20;

const ms = (v: number) => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));
const cellText = (c: Cell | undefined, which: 'p50' | 'p99') => {
  if (!c) return '-';
  const bound = c.lowerBound && (which === 'p99' || c.result.requests === 0);
  return `${bound ? '≥' : ''}${ms(c.result[which])}`;
};
const loopText = (c: Cell | undefined) => (!c ? '-' : c.loopMax === undefined ? '?' : ms(c.loopMax));

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

/** The event-loop target, judged on every client count (a stall with one client counts too). */
function loopVerdict(m: Measured): string {
  if (m.cells.length === 0) return 'no data';
  const known = m.cells.flatMap((c) => (c.loopMax === undefined ? [] : [c.loopMax]));
  if (known.some((v) => v > LOOP_TARGET_MS)) return 'FAIL';
  return known.length < m.cells.length ? 'no data' : 'pass';
}

export interface Context {
  clients: number[];
  /** Seconds a run lasts at least. */
  seconds: number;
  /** "0.4 → 1.2": the 5-minute load average before and after (the machine may be shared). */
  load: string;
  /** The loop max of the idle server over 3 s, after the runs (ms). */
  idleLoop?: number;
  /** Lines to print under the table (rows skipped, and why). */
  notes?: string[];
  empty?: Measured;
}

export function table(info: SeedInfo, rows: Measured[], c: Context): string {
  const { clients, empty } = c;
  const head = ['Operation'];
  for (const n of clients) head.push(`p50 ${n}c`, `p99 ${n}c`);
  head.push('requests', 'Target (most clients)', 'Result', `Loop max ${clients.map((n) => `${n}c`).join(' / ')}`);
  head.push(`Loop < ${LOOP_TARGET_MS} ms`);
  const body: string[][] = [];
  const line = (label: string, m: Measured, v?: { target: string; result: string }) => {
    const cells = [label];
    for (const n of clients) {
      const cell = m.cells.find((x) => x.clients === n);
      cells.push(cellText(cell, 'p50'), cellText(cell, 'p99'));
    }
    cells.push(m.cells.map((x) => x.result.requests).join(' / '), v?.target ?? '', v?.result ?? '');
    cells.push(clients.map((n) => loopText(m.cells.find((x) => x.clients === n))).join(' / '), loopVerdict(m));
    body.push(cells);
  };
  for (const m of rows) line(m.op.label, m, verdict(m, empty));
  if (empty) line('upload a 1 KB file, empty database', empty);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((r) => r[i].length)));
  const fmt = (r: string[]) =>
    `| ${r.map((x, i) => (i === 0 ? x.padEnd(widths[i]) : x.padStart(widths[i]))).join(' | ')} |`;
  const db = info.dialect === 'postgres' ? 'PostgreSQL' : 'SQLite';
  const cpus = cpuList();
  const notes = [...(c.notes ?? [])];
  if (c.idleLoop !== undefined && c.idleLoop > LOOP_TARGET_MS)
    notes.push(
      `The idle server's loop max is over ${LOOP_TARGET_MS} ms: other processes had the CPUs, ` +
        'so the loop figures say more about the machine than about Stowage.',
    );
  const clientText =
    clients.length === 1 ? `${clients[0]}` : `${clients.slice(0, -1).join(', ')} and ${clients.at(-1)}`;
  return [
    `Measured on ${db}: ${info.workspaceFiles.toLocaleString('en')} files in ${info.workspaceFolders} folders in ` +
      `the measured workspace, ${info.files.toLocaleString('en')} files over ${info.workspaces.toLocaleString('en')} ` +
      `workspace(s) in all; ${clientText} concurrent clients, each run ≥ ${c.seconds} s; ${cpus.length} CPU cores ` +
      `(${cpus[0]?.model.trim() ?? 'unknown'}), load average ${c.load}; idle server's loop max ` +
      `${c.idleLoop === undefined ? '?' : ms(c.idleLoop)} ms; ${new Date().toISOString().slice(0, 10)}.`,
    '',
    fmt(head),
    `|${widths.map((w, i) => (i === 0 ? `:${'-'.repeat(w + 1)}` : `${'-'.repeat(w + 1)}:`)).join('|')}|`,
    ...body.map(fmt),
    '',
    'Latencies in ms, wrk as the client (closed loop); ≥ marks a lower bound: too few requests finished ' +
      "(none: the run's length). Loop max: the server's longest event-loop delay during each run " +
      `(monitorEventLoopDelay through /metrics; at its ${LOOP_RESOLUTION_MS} ms resolution an idle server ` +
      `reads ~${LOOP_RESOLUTION_MS} ms and a stall of B ms reads B to B + ${LOOP_RESOLUTION_MS} ms), ` +
      `judged on every client count; ? when /metrics did not answer.`,
    ...(notes.length ? ['', ...notes.map((n) => `- ${n}`)] : []),
  ].join('\n');
}
