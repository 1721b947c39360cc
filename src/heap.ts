// V8 heap tuning for a server that streams large bodies.
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
