// Two validators: query strings and params arrive as text and are coerced to the schema's
// types; JSON bodies are checked as sent, so `5` is never silently read as `"5"`. The contract's
// TypeBox schemas are plain JSON Schema, compiled here by Ajv; the TypeBox type provider routes
// use (withTypeProvider) only types handlers from them, it validates nothing itself.
import Ajv, { type Options } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifyInstance } from 'fastify';
import { errors } from '../errors.ts';

export function installValidation(app: FastifyInstance): void {
  // An empty body with a JSON content type is an empty object (the hosted service's Python SDK
  // sends DELETE that way); anything else goes to Fastify's own parser, prototype-poisoning
  // checks included.
  const json = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text.trim() === '') return done(null, {});
    void json(request, text, done);
  });

  const base: Options = { removeAdditional: false, useDefaults: true, allErrors: false, strict: false };
  const strictAjv = addFormats.default(new Ajv.default({ ...base, coerceTypes: false }));
  const coercingAjv = addFormats.default(new Ajv.default({ ...base, coerceTypes: 'array' }));
  app.setValidatorCompiler(({ schema, httpPart }) => (httpPart === 'body' ? strictAjv : coercingAjv).compile(schema));

  // A NUL in the path or the query: PostgreSQL's text cannot hold one (the statement fails) and
  // it ends SQLite's FTS5 phrase early, while no name, tag, id or setting the service keeps can
  // contain one. Refused before any route reads its parameters, whichever carries it.
  app.addHook('preValidation', async (request) => {
    if (request.url.includes('%00')) throw errors.validation("the request's path and query must not contain NUL (%00)");
  });
}
