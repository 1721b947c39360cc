// The block bench/scale prints last, to paste into the README's performance section as it is:
// one line saying what was measured, then a Markdown table (p50 and p99 of each operation with
// each number of clients, the latency target and whether the figure with the most clients
// meets it, then the server's max event-loop delay per client count and the 20 ms target on
// it, judged apart so that each verdict reads on its own), then what the marks mean. With the
// bare baseline, each read's row also gets the bare route's p50/p99 with the most clients and
// Stowage's p99 over the bare one, and a second table sets the two side by side (throughput,
// answer sizes, whether the bare route itself meets the target).
import { cpus as cpuList } from 'node:os';
import type { Cell, Measured } from './measure.ts';
import { START_NODE_FLAGS } from '../lib.ts';
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

/** A row's bare baseline (scale.ts measureBare), or why it has none. */
export interface BareRow {
  measured?: Measured;
  skip?: string;
  /** Statements Stowage sent per request (over the row's requests). */
  statements?: { min: number; max: number };
  /** Records in Stowage's answer to the row's first request. */
  records?: number;
  /** Bytes of Stowage's and of the bare server's answer to the row's first request. */
  stowageBytes?: number;
  bareBytes?: number;
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
  /** The bare baseline of each row, by operation id. */
  bare?: Map<string, BareRow>;
  /** The bare server's driver and its size. */
  bareDriver?: string;
}

const perSecond = (c: Cell | undefined) =>
  c && c.result.seconds > 0 ? (c.result.requests / c.result.seconds).toFixed(0) : '-';

/** "2900 / 1100 (2.6x)": each server's own CPU per request, and their ratio. */
function cpuText(stowage: Cell | undefined, bare: Cell | undefined): string {
  const s = stowage?.cpuUsPerRequest;
  const b = bare?.cpuUsPerRequest;
  if (s === undefined || b === undefined) return '-';
  return `${s.toFixed(0)} / ${b.toFixed(0)} (${b > 0 ? (s / b).toFixed(1) : '?'}x)`;
}

/** The second table: each read on Stowage and on the bare route, with the most clients. */
function bareTable(rows: Measured[], c: Context): string[] {
  const bare = c.bare;
  if (!bare) return [];
  const n = c.clients[c.clients.length - 1];
  const head = [
    'Operation',
    'SQL / request',
    `Stowage p99 ${n}c`,
    `bare p50 ${n}c`,
    `bare p99 ${n}c`,
    'Stowage ÷ bare p99',
    `Stowage req/s ${n}c`,
    `bare req/s ${n}c`,
    `server CPU µs/req ${n}c Stowage / bare`,
    `bare p99 1c`,
    'answer: records, KB Stowage / bare',
    'bare meets target',
  ];
  const body: string[][] = [];
  const notes: string[] = [];
  for (const m of rows) {
    const b = bare.get(m.op.id);
    if (!b) continue;
    const stowage = m.cells.find((x) => x.clients === n);
    if (!b.measured) {
      notes.push(`${m.op.label}: ${b.skip ?? 'no bare figure'}.`);
      continue;
    }
    const cell = b.measured.cells.find((x) => x.clients === n);
    const one = b.measured.cells.find((x) => x.clients === 1);
    const t = m.op.target;
    const errors = b.measured.cells.reduce((k, x) => k + x.result.errors, 0);
    const meets =
      t.kind !== 'p99' || !cell
        ? ''
        : errors > 0
          ? `FAIL (${errors} errors)`
          : cell.result.p99 < t.ms
            ? 'pass'
            : 'FAIL';
    const s = b.statements;
    body.push([
      m.op.label,
      s ? (s.min === s.max ? `${s.min}` : `${s.min}-${s.max}`) : '-',
      cellText(stowage, 'p99'),
      cellText(cell, 'p50'),
      cellText(cell, 'p99'),
      stowage && cell ? `${(stowage.result.p99 / cell.result.p99).toFixed(2)}x` : '-',
      perSecond(stowage),
      perSecond(cell),
      cpuText(stowage, cell),
      cellText(one, 'p99'),
      b.stowageBytes === undefined || b.bareBytes === undefined
        ? '-'
        : `${b.records ?? '?'}, ${(b.stowageBytes / 1024).toFixed(0)} / ${(b.bareBytes / 1024).toFixed(0)}`,
      t.kind === 'p99' ? `${meets} (p99 < ${t.ms} ms)` : '',
    ]);
  }
  const out = [
    '',
    `Bare baseline: each read's requests answered by a bare server in its own process (node:http, no ` +
      `auth, no Stowage code, node run with Stowage's flags: ${START_NODE_FLAGS.join(' ') || 'none'}) that sends the SQL Stowage sent for that request (captured from Stowage, ` +
      `the API-key lookup included), with the same parameters and overlap, through the same driver ` +
      `(${c.bareDriver ?? '?'}), and answers all the rows as one JSON document; the same wrk runs. ` +
      `Server CPU: what each server's process used during the run (/proc, every thread, the database's ` +
      `work not included) per request: its own cost, which the shared machine's p99 hides.`,
    '',
  ];
  if (body.length) {
    const widths = head.map((h, i) => Math.max(h.length, ...body.map((r) => r[i].length)));
    const fmt = (r: string[]) =>
      `| ${r.map((x, i) => (i === 0 ? x.padEnd(widths[i]) : x.padStart(widths[i]))).join(' | ')} |`;
    out.push(
      fmt(head),
      `|${widths.map((w, i) => (i === 0 ? `:${'-'.repeat(w + 1)}` : `${'-'.repeat(w + 1)}:`)).join('|')}|`,
      ...body.map(fmt),
    );
  }
  if (notes.length) out.push('', ...notes.map((x) => `- ${x}`));
  return out;
}

export function table(info: SeedInfo, rows: Measured[], c: Context): string {
  const { clients, empty } = c;
  const head = ['Operation'];
  for (const n of clients) head.push(`p50 ${n}c`, `p99 ${n}c`);
  const most = clients[clients.length - 1];
  if (c.bare) head.push(`bare p50 / p99 ${most}c`, '÷ bare p99');
  head.push('requests', 'Target (most clients)', 'Result', `Loop max ${clients.map((n) => `${n}c`).join(' / ')}`);
  head.push(`Loop < ${LOOP_TARGET_MS} ms`);
  const body: string[][] = [];
  const line = (label: string, m: Measured, v?: { target: string; result: string }) => {
    const cells = [label];
    for (const n of clients) {
      const cell = m.cells.find((x) => x.clients === n);
      cells.push(cellText(cell, 'p50'), cellText(cell, 'p99'));
    }
    if (c.bare) {
      const own = m.cells.find((x) => x.clients === most);
      const b = c.bare.get(m.op.id)?.measured?.cells.find((x) => x.clients === most);
      const bareLabel = b ? `${cellText(b, 'p50')} / ${cellText(b, 'p99')}` : '-';
      cells.push(bareLabel, b && own ? `${(own.result.p99 / b.result.p99).toFixed(2)}x` : '-');
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
      `reads about that plus the timer's jitter, and a stall of B ms reads B to B + ${LOOP_RESOLUTION_MS} ms ` +
      'and that jitter; the idle reading is in the header), ' +
      `judged on every client count; ? when /metrics did not answer.`,
    ...(notes.length ? ['', ...notes.map((n) => `- ${n}`)] : []),
    ...bareTable(rows, c),
  ].join('\n');
}
