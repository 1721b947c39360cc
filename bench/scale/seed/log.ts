// Progress lines of the seeder and the bench, each with the seconds since the start.
export type Log = (line: string) => void;

export function stopwatchLog(write: (line: string) => void = (l) => process.stderr.write(`${l}\n`)): Log {
  const started = Date.now();
  return (line) => write(`[${((Date.now() - started) / 1000).toFixed(1).padStart(6)} s] ${line}`);
}
