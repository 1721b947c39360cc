// Measures each operation against a running server with 1, then more, concurrent clients.
// Closed loop: with c clients and requests the server must take one at a time (SQLite), a
// request waits for the c-1 before it, so a run lasts long enough for that to show (up to
// maxSeconds); when fewer than 2c requests finished, the p99 is only a lower bound. Between
// runs the server must be idle again: wrk stops counting at its deadline, but the server still
// works on what it had taken, so the bench waits for that, or restarts the server when it
// would take long (a killed query is rolled back; nothing else changes). Each run's window,
// from just before wrk starts until the server is idle again, also gets the server's own max
// event-loop delay (loop.ts).
import type { Log } from './seed/log.ts';
import type { SeedInfo } from './seed/info.ts';
import type { Operation } from './operations.ts';
import { resetLoopWindow, scrapeLoopMax } from './loop.ts';
import { processCpuMs, type Server } from './server.ts';
import { type WrkResult, wrk } from './wrk.ts';

export interface Cell {
  clients: number;
  result: WrkResult;
  /** Too few requests finished for the p99 (none: also the p50) to be more than a lower bound. */
  lowerBound: boolean;
  /** The server's max event-loop delay during the run (ms); undefined when /metrics did not answer. */
  loopMax?: number;
  /**
   * CPU time the server's process used during the run, in µs per finished request (all its
   * threads and its system time; not the database's): what a request costs the server itself,
   * which the p99 of a shared machine hides. Undefined where /proc cannot say.
   */
  cpuUsPerRequest?: number;
}

export interface Measured {
  op: Operation;
  cells: Cell[];
  /** The `meta` of the answer to the first request (reads), for --verbose. */
  meta?: Record<string, unknown>;
}

export interface MeasureOptions {
  server: Server;
  key: string;
  /** A cheap request that goes through the database (see `settle`). */
  probe: string;
  clients: number[];
  seconds: number;
  maxSeconds: number;
  run: string;
  log: Log;
}

export async function measure(op: Operation, o: MeasureOptions): Promise<Measured> {
  await settle(o);
  // One request first (caches warm, and code the server loads on first use loaded, which the
  // first upload of a fresh server showed as a 150 ms stall); how long it took sets how long a
  // single client runs.
  const started = performance.now();
  const meta = await warmUp(op, o);
  let single = performance.now() - started;
  const cells: Cell[] = [];
  for (const clients of o.clients) {
    const wanted = clients === 1 ? 3 * single : 1.5 * clients * single;
    const seconds = Math.min(o.maxSeconds, Math.max(o.seconds, wanted / 1000));
    const run = { base: o.server.base, key: o.key, seconds, run: `${o.run}c${clients}` };
    await resetLoopWindow(o.server.base);
    const cpuBefore = processCpuMs(o.server.pid);
    let result: WrkResult;
    if (op.beside) {
      // The beside load gets the clients; the measured requests come from one more connection.
      const [beside, measured] = await Promise.all([
        wrk({ ...run, ...op.beside, clients }),
        wrk({ ...run, ...op.wrk, clients: 1 }),
      ]);
      result = measured;
      if (clients === 1 && beside.requests > 0) single = beside.p50;
    } else result = await wrk({ ...run, ...op.wrk, clients });
    // Read at wrk's end: requests still in flight then are not counted, nor is their CPU after it.
    const cpuAfter = processCpuMs(o.server.pid);
    const cpuUsPerRequest =
      cpuBefore !== undefined && cpuAfter !== undefined && result.requests > 0 && !op.beside
        ? ((cpuAfter - cpuBefore) * 1000) / result.requests
        : undefined;
    // Nothing finished: every request took longer than the run.
    if (result.requests === 0) result = { ...result, p50: result.seconds * 1000, p99: result.seconds * 1000 };
    else if (clients === 1 && !op.beside) single = result.p50;
    const lowerBound = result.requests === 0 || (clients > 1 && result.requests < 2 * clients);
    const loopMax = await settle(o);
    cells.push({ clients, result, lowerBound, loopMax, cpuUsPerRequest });
    o.log(
      `${op.id} c=${clients}: p50 ${result.requests === 0 ? '≥' : ''}${result.p50.toFixed(1)} ms, ` +
        `p99 ${lowerBound ? '≥' : ''}${result.p99.toFixed(1)} ms, ` +
        `${result.requests} requests in ${result.seconds.toFixed(0)} s${result.errors ? `, ${result.errors} ERRORS` : ''}, ` +
        `${cpuUsPerRequest === undefined ? '' : `server CPU ${cpuUsPerRequest.toFixed(0)} µs/request, `}` +
        `loop max ${loopMax === undefined ? '?' : `${loopMax.toFixed(1)} ms`}`,
    );
  }
  return { op, cells, meta };
}

/** One request of the operation's kind, as wrk will send them; answers a list's `meta`. */
async function warmUp(op: Operation, o: MeasureOptions): Promise<Record<string, unknown> | undefined> {
  const base = o.server.base;
  const line = (op.beside ?? op.wrk).lines[0];
  let r: Response;
  if (op.beside || op.wrk.kind === 'get') r = await fetch(base + line, { headers: auth(o.key) });
  else if (op.wrk.kind === 'upload') {
    const name = `bench-${o.run}-warm.txt`;
    const form = new FormData();
    form.set('file_name', name);
    form.set('folder', line);
    form.set('file', new Blob([name.padEnd(1024, 'x')], { type: 'text/plain' }), name);
    r = await fetch(`${base}/api/v1/uploads`, { method: 'POST', headers: auth(o.key), body: form });
  } else {
    // The bench gives renamed folders their names back after the row.
    const [folderNo, name] = line.split('\t');
    r = await fetch(`${base}/api/v1/folders/rename/${folderNo}`, {
      method: 'POST',
      headers: { ...auth(o.key), 'content-type': 'application/json' },
      body: JSON.stringify({ name: `${name} r${o.run}-warm` }),
    });
  }
  const text = await r.text();
  // wrk counts the errors of the run itself; the row shows them.
  if (!r.ok) o.log(`${op.id}: the first request answered ${r.status}: ${text.slice(0, 300)}`);
  return op.wrk.kind === 'get' ? metaOf(text) : undefined;
}

function metaOf(text: string): Record<string, unknown> | undefined {
  try {
    const body = JSON.parse(text) as { meta?: unknown };
    return body.meta && typeof body.meta === 'object' ? (body.meta as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Waits until the server is idle: cheap database requests one after another until two in a
 * row are quick. Past 30 s the server is restarted instead (what is left would take minutes).
 * Answers the server's max event-loop delay since the last scrape, read once it is idle, or
 * just before the restart (if /metrics answers within 5 s).
 */
export async function settle(
  o: Pick<MeasureOptions, 'server' | 'key' | 'probe' | 'log'>,
  restarted = false,
): Promise<number | undefined> {
  const until = Date.now() + 30_000;
  let quick = 0;
  while (quick < 2) {
    if (Date.now() > until) {
      if (restarted) return undefined;
      const loopMax = await scrapeLoopMax(o.server.base, 5000);
      o.log('the server is still busy with the last run: restarting it');
      await o.server.restart();
      await settle(o, true);
      return loopMax;
    }
    const started = performance.now();
    const answered = await fetch(o.server.base + o.probe, {
      headers: auth(o.key),
      signal: AbortSignal.timeout(Math.max(1000, until - Date.now())),
    }).then(
      (r) => r.text().then(() => true),
      () => false,
    );
    quick = answered && performance.now() - started < 100 ? quick + 1 : 0;
  }
  return scrapeLoopMax(o.server.base);
}

export const auth = (key: string) => ({ authorization: `Bearer ${key}` });

/** Gives the renamed folders their names back. */
export async function restoreNames(base: string, info: SeedInfo): Promise<void> {
  for (const f of info.renameFolders) {
    const r = await fetch(`${base}/api/v1/folders/rename/${f.folder_no}`, {
      method: 'POST',
      headers: { ...auth(info.privateKey), 'content-type': 'application/json' },
      body: JSON.stringify({ name: f.name }),
    });
    if (!r.ok) throw new Error(`renaming ${f.folder_no} back to "${f.name}" answered ${r.status}: ${await r.text()}`);
  }
}

/** Deletes the folder the bench uploaded into, with its files. */
export async function deleteUploads(base: string, info: SeedInfo, folderName: string): Promise<number> {
  const parent = info.uploadParent.folder_no ? `&parent_folder_no=${info.uploadParent.folder_no}` : '';
  const r = await fetch(`${base}/api/v1/folders?search=${encodeURIComponent(folderName)}${parent}`, {
    headers: auth(info.privateKey),
  });
  const { folders } = (await r.json()) as { folders?: { folder_no: string; name: string; total_items: number }[] };
  let deleted = 0;
  for (const f of folders ?? []) {
    if (f.name !== folderName) continue;
    const d = await fetch(`${base}/api/v1/folders/${f.folder_no}?recursive=true`, {
      method: 'DELETE',
      headers: auth(info.privateKey),
    });
    if (!d.ok) throw new Error(`deleting the upload folder answered ${d.status}: ${await d.text()}`);
    deleted += f.total_items;
  }
  return deleted;
}
