// One log line per request, when it ends: what an operator reads first. The URL is redacted
// (signatures, upload tokens) before it is written; keys never reach the line, since only the
// principal's workspace id is taken from the authentication. Delivery's fast path
// (routes/delivery.ts) answers cached bytes before Fastify and writes no line: it is counted in
// the metrics instead.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { redactUrl } from './log-redaction.ts';

const asBytes = (value: unknown): number | undefined => {
  const n = typeof value === 'number' ? value : typeof value === 'string' ? Number(value) : Number.NaN;
  return Number.isSafeInteger(n) && n >= 0 ? n : undefined;
};

export function logRequest(request: FastifyRequest, reply: FastifyReply): void {
  const status = reply.statusCode;
  const durationMs = Math.round(reply.elapsedTime * 10) / 10;
  const url = redactUrl(request.url);
  const line = {
    method: request.method,
    route: request.routeOptions.url ?? null,
    url,
    status,
    bytesIn: asBytes(request.headers['content-length']),
    bytesOut: asBytes(reply.getHeader('content-length')),
    durationMs,
    workspace: request.principal?.workspaceId,
  };
  const message = `${request.method} ${url} ${status} ${durationMs} ms`;
  if (status >= 500) request.log.error(line, message);
  else request.log.info(line, message);
}
