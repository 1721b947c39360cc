// Where log lines go. JSON lines for collectors; for a person at a terminal, pino's own pretty
// printer: coloured, one line each, times of day, no pid or host. The printer runs in this thread
// as the logger's stream, so the redaction hook (http/log-redaction.ts) sees every line before it.
import type { DestinationStream } from 'pino';
import pretty from 'pino-pretty';
import type { Config } from './config.ts';

/** The stream for `format`, or undefined for JSON on stdout (pino's default). */
export function logStream(
  format: Config['logFormat'],
  isTty = Boolean(process.stdout.isTTY),
): DestinationStream | undefined {
  if (format === 'json' || (format === 'auto' && !isTty)) return undefined;
  return pretty({
    colorize: format === 'pretty' ? isTty : true,
    singleLine: true,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname,reqId',
    sync: true,
  });
}
