// Retry hints on every answer, for clients that retry by themselves (the hosted service's
// SDKs retry 408, 409, 429 and 5xx unless told otherwise): `x-should-retry: false` on a 4xx
// that sending the same request again cannot fix (a 409 name conflict, a 404, a 400), and
// `retry-after` on 429 and 503 (set where those are made). An answer may say otherwise itself
// (COMPLETE_IN_PROGRESS: `x-should-retry: true`).
import type { FastifyInstance } from 'fastify';

/** 4xx that are about time, not about the request: left to the client's own rules. */
const WORTH_RETRYING = new Set([408, 425, 429]);

export function installRetryHints(app: FastifyInstance): void {
  app.addHook('onSend', async (_request, reply, payload) => {
    const status = reply.statusCode;
    if (status >= 400 && status < 500 && !WORTH_RETRYING.has(status) && !reply.hasHeader('x-should-retry'))
      reply.header('x-should-retry', 'false');
    if ((status === 429 || status === 503) && !reply.hasHeader('retry-after')) reply.header('retry-after', '5');
    return payload;
  });
}
