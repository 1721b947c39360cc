// The contract is the one source: the generated SDK types and error docs are fresh, every error
// the service makes agrees with the error catalogue, and /openapi.json is built from the
// contract's schemas.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  ERROR_CATALOGUE,
  ERROR_CODES,
  FileListQuery,
  retryHint,
  SHARED_SCHEMAS,
  SourceCreateBody,
  shouldRetry,
  TokenMintBody,
} from '../src/contract/index.ts';
import { type AppError, appError, errors } from '../src/errors.ts';
import { ERROR_DOCS_PATH, renderErrorDocs, renderSdkTypes, SDK_TYPES_PATH } from '../scripts/gen-sdk-types.ts';
import { type Harness, makeHarness } from './helpers/harness.ts';
import { call } from './helpers/http.ts';

const root = new URL('..', import.meta.url).pathname;
const json = (schema: unknown) => JSON.parse(JSON.stringify(schema));
/**
 * A schema as OpenAPI 3.0 spells it (@fastify/swagger does so): `const` becomes a one-value
 * `enum`; `examples` become `example`, except a body's own, which move to its media type.
 */
const openapi3 = (schema: unknown) =>
  JSON.parse(JSON.stringify(schema), (key, value) => {
    if (!value || typeof value !== 'object' || Array.isArray(value)) return value;
    let out = value;
    if ('const' in out) {
      const { const: only, ...rest } = out;
      out = { ...rest, enum: [only] };
    }
    if (Array.isArray(out.examples)) {
      const { examples, ...rest } = out;
      out = key === '' ? rest : { ...rest, example: examples[0] };
    }
    return out;
  });

/** Answers of 400 and above that are not the error body, and why. */
const NOT_ERROR_BODIES: Record<string, string> = {
  'get /readyz 503': 'the readiness report (not ready, draining), which probes read',
  'get /metrics 401': 'plain text with WWW-Authenticate, for Prometheus scrapers (the metrics token)',
};

describe('generated files', () => {
  test('sdk/src/types.gen.ts is what `npm run gen:sdk` writes from the contract', () => {
    assert.equal(readFileSync(SDK_TYPES_PATH, 'utf8'), renderSdkTypes(), 'stale: run npm run gen:sdk');
  });

  test('docs/errors.md is what `npm run gen:sdk` writes from the error catalogue', () => {
    assert.equal(readFileSync(ERROR_DOCS_PATH, 'utf8'), renderErrorDocs(), 'stale: run npm run gen:sdk');
  });

  test('the SDK imports nothing of the server (it is bundled for browsers)', () => {
    for (const name of readdirSync(join(root, 'sdk/src'))) {
      const text = readFileSync(join(root, 'sdk/src', name), 'utf8');
      assert.doesNotMatch(text, /from '\.\.\/|from 'typebox'|from 'fastify'/, name);
    }
  });
});

describe('error catalogue', () => {
  /** One call of every error constructor. */
  const made: AppError[] = [
    errors.validation('x is wrong'),
    errors.invalidConfiguration(),
    errors.unauthorized(),
    errors.invalidApiKey(),
    errors.privateKeyRequired(),
    errors.sourceNotFound(),
    errors.sourceNameTaken(),
    errors.workspaceNotFound('w'),
    errors.keyNotFound('k'),
    errors.fileRequired(),
    errors.fileNameRequired(),
    errors.fileTooLarge(10),
    errors.storageLimitExceeded(),
    errors.fieldTooLarge('f'),
    errors.notAnImage(),
    errors.sessionNotFound(),
    errors.sessionExpired(),
    errors.uploadIncomplete([1, 2]),
    errors.partMismatch(3),
    errors.completeInProgress(),
    errors.urlRefused('private address'),
    errors.remoteFailed('refused'),
    errors.nothingStored(),
    errors.fileNotFound(),
    errors.folderNotFound(),
    errors.fileNameTaken(),
    errors.folderNotEmpty(),
    errors.folderExists(),
    errors.preflightRefused(),
    errors.originNotAllowed('https://a.example'),
    errors.webhookNotAllowed(),
    errors.invalidToken('TOKEN_USED'),
    errors.overrideNotAllowed('folder'),
    errors.insufficientStorage(),
    errors.tooManyUploads(4),
    errors.bodyIdle(1000),
    errors.serviceUnavailable('Storage'),
  ];

  test('every error constructor answers with its code’s status', () => {
    for (const e of made) assert.equal(e.status, ERROR_CATALOGUE[e.errorCode].status, e.errorCode);
  });

  test('constructors with a fixed text give the catalogue’s error and message', () => {
    for (const code of ERROR_CODES) {
      const entry = ERROR_CATALOGUE[code];
      if (entry.message.includes('{')) continue;
      const e = appError(code);
      assert.deepEqual([e.status, e.error, e.message], [entry.status, entry.error, entry.message], code);
    }
    // The texts clients match on, unchanged.
    assert.deepEqual(errors.unauthorized().toBody(), {
      success: false,
      error: 'Unauthorized',
      errorCode: 'UNAUTHORIZED',
      code: 'UNAUTHORIZED',
      message: 'Invalid or missing API key',
    });
    assert.equal(errors.sourceNameTaken().error, 'Origin name already exists in this workspace');
  });

  test('x-should-retry: false on 4xx a retry cannot fix, unsaid on 408/425/429 and 5xx, true where the catalogue says', () => {
    assert.equal(retryHint(404), false);
    assert.equal(retryHint(409), false);
    for (const s of [408, 425, 429, 500, 502, 503, 507]) assert.equal(retryHint(s), undefined, String(s));
    assert.equal(shouldRetry('COMPLETE_IN_PROGRESS'), true);
    assert.deepEqual(errors.completeInProgress().extra.headers, { 'retry-after': '5', 'x-should-retry': 'true' });
    for (const code of ERROR_CODES) {
      const header = appError(code).extra.headers?.['x-should-retry'];
      if (shouldRetry(code) === retryHint(ERROR_CATALOGUE[code].status)) assert.equal(header, undefined, code);
      else assert.equal(header, String(shouldRetry(code)), code);
    }
  });

  test('every code in the catalogue is answered somewhere in src/ (no entry outlives its error)', () => {
    const files = (dir: string): string[] =>
      readdirSync(dir).flatMap((n) => {
        const p = join(dir, n);
        return statSync(p).isDirectory() ? files(p) : p.endsWith('.ts') ? [p] : [];
      });
    const text = files(join(root, 'src'))
      .filter((f) => !f.includes('/contract/'))
      .map((f) => readFileSync(f, 'utf8'))
      .join('\n');
    const unused = ERROR_CODES.filter((code) => !text.includes(`'${code}'`));
    assert.deepEqual(unused, []);
  });
});

describe('/openapi.json comes from the contract', () => {
  let h: Harness;
  let doc: any;
  before(async () => {
    h = await makeHarness('sqlite');
    doc = (await call(h.app, 'GET', '/openapi.json')).body;
  });
  after(() => h?.close());

  test('the shared schemas are its components', () => {
    for (const schema of SHARED_SCHEMAS) {
      const { $id, ...rest } = json(schema);
      assert.ok(doc.components.schemas[$id], $id);
      assert.deepEqual(Object.keys(doc.components.schemas[$id].properties), Object.keys(rest.properties), $id);
    }
  });

  test('request bodies and queries are the contract’s schemas', () => {
    const body = (path: string) => doc.paths[path].post.requestBody.content['application/json'].schema;
    assert.deepEqual(body('/api/v1/sources'), openapi3(SourceCreateBody));
    assert.deepEqual(body('/api/v1/generate-token'), openapi3(TokenMintBody));
    const params = doc.paths['/api/v1/files'].get.parameters.map((p: { name: string }) => p.name).sort();
    assert.deepEqual(params, Object.keys(FileListQuery.properties).sort());
  });

  test('every error response is the error body and names the catalogue’s codes of its status', () => {
    let seen = 0;
    for (const [path, methods] of Object.entries<Record<string, any>>(doc.paths)) {
      for (const [method, op] of Object.entries<any>(methods)) {
        for (const [status, response] of Object.entries<any>(op.responses ?? {})) {
          if (Number(status) < 400) continue;
          const where = `${method} ${path} ${status}`;
          if (NOT_ERROR_BODIES[where]) continue;
          seen++;
          assert.equal(response.content['application/json'].schema.$ref, '#/components/schemas/ErrorBody', where);
          const codes = ERROR_CODES.filter((c) => ERROR_CATALOGUE[c].status === Number(status));
          assert.ok(codes.length > 0, `${where}: no catalogue code has this status`);
          for (const code of codes) assert.ok(response.description.includes(code), `${where} names ${code}`);
        }
      }
    }
    assert.ok(seen > 50, `${seen} error responses`);
  });
});
