// V8 heap tuning for a server that streams large bodies and answers many short requests.
//
// Every request-body chunk Node hands us is a fresh 64 KiB ArrayBuffer. V8 counts their bytes
// against the old generation until a scavenge frees them, which it triggers only every 32 MB of
// such buffers. After a quiet spell V8 sizes the old generation with its smallest growth factor
// (1.1x, since almost nothing was allocated), so those 32 MB of dead chunks alone start a full
// mark-compact of the whole heap (about 45 MB here: the SDKs, the router, the schemas), again
// and again: measured, about 40 full collections per GiB uploaded, and 1 GiB uploads at half the
// speed of the same server right after a busy spell. With the old generation allowed to grow to
// 2x its live size before a full collection, no such collection runs during an upload.
//
// `--heap-growing-percent` is read at every collection, so setting it at startup takes effect.
// A value given on the command line wins.
import { setFlagsFromString } from 'node:v8';

export const HEAP_GROWING_PERCENT = 100;

export function tuneHeapForStreaming(execArgv: readonly string[] = process.execArgv): boolean {
  if (execArgv.some((arg) => /^--heap[-_]growing[-_]percent\b/.test(arg))) return false;
  setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
  return true;
}

// Allocation-site pretenuring: V8 watches the objects each allocation site makes, and when most
// of them survive a scavenge it allocates the site's objects in the old generation from then on.
// The pg driver builds each result row from one site while the rows of a page arrive; a scavenge
// that lands while a page's 100 rows are alive can make V8 tenure that site for good. Every row
// after it is then born old, dies young, and holds its field strings through the next scavenges
// too (an old object keeps what it points to alive until a full collection): measured on 10M
// files in PostgreSQL, ~140 KB of each 100-file page ended in the old generation, a full
// collection every 0.7 to 1.5 s, and 13 to 24% more server CPU per page (1,916 against 1,452
// µs with one client, 1,702 against 1,405 with 32; the event loop's max delay 26 against 14 ms).
// Whether V8 takes that decision depends on when its scavenges land, so a run may or may not
// show it; without pretenuring it cannot happen. Setting the flag at startup takes effect: V8
// reads it at every scavenge. A value given on the command line wins.
export function tunePretenuring(execArgv: readonly string[] = process.execArgv): boolean {
  if (execArgv.some((arg) => /^--(no-)?allocation[-_]site[-_]pretenuring\b/.test(arg))) return false;
  setFlagsFromString('--no-allocation-site-pretenuring');
  return true;
}
