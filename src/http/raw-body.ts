// Routes whose body is a file (part uploads, token uploads): streamed to the handler whatever
// its Content-Type says, never parsed, so a wrong type can be answered as documented (not 415).
import type { FastifyInstance } from 'fastify';

export function takeRawBodies(scope: FastifyInstance): void {
  scope.removeAllContentTypeParsers();
  scope.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
}
