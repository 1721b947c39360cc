// Retry hints on every answer, for clients that retry by themselves (the hosted service's
// SDKs retry 408, 409, 429 and 5xx unless told otherwise): `x-should-retry` as the error
// catalogue's retryHint says for the status (false on a 4xx that sending the same request again
// cannot fix: a 409 name conflict, a 404, a 400), and `retry-after` on 429 and 503 (set where
// those are made). An answer may say otherwise itself (COMPLETE_IN_PROGRESS: `x-should-retry:
// true`, from its catalogue entry).
import type { FastifyInstance } from 'fastify';
import { retryHint } from '../contract/error-catalogue.ts';

export function installRetryHints(app: FastifyInstance): void {
  app.addHook('onSend', async (_request, reply, payload) => {
    const status = reply.statusCode;
    const hint = retryHint(status);
    if (hint !== undefined && !reply.hasHeader('x-should-retry')) reply.header('x-should-retry', String(hint));
    if ((status === 429 || status === 503) && !reply.hasHeader('retry-after')) reply.header('retry-after', '5');
    return payload;
  });
}
