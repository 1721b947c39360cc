// /openapi.json passes a standard OpenAPI linter (Redocly CLI, the recommended ruleset and
// redocly.yaml) with no error and no warning, and says what clients need: an id and an example
// for every operation, the direct upload's form, delivery URLs, the probes and the metrics.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { UPLOAD_FORM_FIELDS } from '../src/contract/index.ts';
import { OPERATIONS } from '../src/contract/openapi-operations.ts';
import { type Harness, makeHarness } from './helpers/harness.ts';
import { call } from './helpers/http.ts';

const root = new URL('..', import.meta.url).pathname;
const METHODS = ['get', 'put', 'post', 'patch', 'delete', 'head', 'options'];

interface Problem {
  ruleId: string;
  severity: string;
  message: string;
  location: { pointer: string }[];
}
interface LintReport {
  totals: { errors: number; warnings: number; ignored: number };
  problems: Problem[];
}

/** Runs `redocly lint` on a document with the repository's redocly.yaml; no network (telemetry off). */
function lint(dir: string, doc: unknown, name = 'openapi.json'): LintReport {
  const file = join(dir, name);
  writeFileSync(file, JSON.stringify(doc, null, 2));
  const run = spawnSync(
    join(root, 'node_modules/.bin/redocly'),
    ['lint', file, `--config=${join(root, 'redocly.yaml')}`, '--format=json'],
    {
      cwd: root,
      encoding: 'utf8',
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
    },
  );
  assert.ok(run.stdout.trim().startsWith('{'), `redocly gave no report: ${run.stderr}`);
  return JSON.parse(run.stdout);
}

const describeProblems = (report: LintReport) =>
  report.problems.map((p) => `${p.severity} ${p.ruleId} at ${p.location[0]?.pointer}: ${p.message}`).join('\n');

/** Every operation of a document, with its path and method. */
function operations(doc: any): { where: string; path: string; method: string; op: any }[] {
  return Object.entries<any>(doc.paths).flatMap(([path, item]) =>
    Object.entries<any>(item)
      .filter(([method]) => METHODS.includes(method))
      .map(([method, op]) => ({ where: `${method.toUpperCase()} ${path}`, path, method, op })),
  );
}

/** The media types of an operation's request body and answers. */
const mediaOf = (op: any): any[] => [
  ...Object.values(op.requestBody?.content ?? {}),
  ...Object.values<any>(op.responses ?? {}).flatMap((r) => Object.values(r.content ?? {})),
];

describe('/openapi.json lints clean', () => {
  let h: Harness;
  let doc: any;
  let dir: string;
  before(async () => {
    h = await makeHarness('sqlite');
    const answer = await call(h.app, 'GET', '/openapi.json');
    assert.equal(answer.status, 200);
    doc = answer.body;
    dir = mkdtempSync(join(tmpdir(), 'stowage-openapi-'));
  });
  after(async () => {
    await h?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('redocly lint (recommended + redocly.yaml): 0 errors, 0 warnings, nothing ignored', () => {
    const report = lint(dir, doc);
    assert.deepEqual(report.totals, { errors: 0, warnings: 0, ignored: 0 }, describeProblems(report));
  });

  test('the linter is live: a broken copy of the document is reported', () => {
    const broken = structuredClone(doc);
    delete broken.servers;
    delete broken.paths['/api/v1/files'].get.operationId;
    broken.paths['/api/v1/files'].get.responses['200'].content['application/json'].example = { files: 'none' };
    const rules = new Set(lint(dir, broken, 'broken.json').problems.map((p) => p.ruleId));
    for (const rule of ['no-empty-servers', 'operation-operationId', 'no-invalid-media-type-examples'])
      assert.ok(rules.has(rule), `${rule} reported (${[...rules].join(', ')})`);
  });

  test('servers is the configured public URL; the licence is named', () => {
    assert.deepEqual(
      doc.servers.map((s: { url: string }) => s.url),
      [h.config.publicUrl],
    );
    assert.equal(doc.info.license.name, 'MIT');
  });

  test('every operation has an operationId, unique, from the one map by method and route', () => {
    const ops = operations(doc);
    assert.ok(ops.length >= 37, `${ops.length} operations`);
    const ids = ops.map(({ where, op }) => {
      assert.match(op.operationId ?? '', /^[a-z][A-Za-z]+$/, `${where} has a readable operationId`);
      return op.operationId;
    });
    assert.equal(new Set(ids).size, ids.length, `duplicates: ${ids.filter((id, i) => ids.indexOf(id) !== i)}`);
    // The map has no entry for a route that no longer exists (its id would be silently unused).
    const documented = new Set(
      ops.map(({ method, path }) => `${method.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ':$1')}`),
    );
    for (const key of Object.keys(OPERATIONS)) assert.ok(documented.has(key), `${key} is a documented route`);
    for (const [key, { operationId }] of Object.entries(OPERATIONS)) {
      const [method, pattern] = key.split(' ');
      const path = pattern.replace(/:(\w+)/g, '{$1}');
      assert.equal(doc.paths[path][method.toLowerCase()].operationId, operationId, key);
    }
  });

  test('every operation shows at least one request or response example', () => {
    for (const { where, op } of operations(doc)) {
      const examples = mediaOf(op).filter((m) => m.example !== undefined || m.examples !== undefined);
      assert.ok(examples.length > 0, `${where} has an example`);
    }
    // The success answers of the API carry the contract's own example values.
    const files = doc.paths['/api/v1/files'].get.responses['200'].content['application/json'].example;
    assert.equal(files.files[0].name, 'shoe.jpg');
    const upload = doc.paths['/api/v1/uploads'].post.responses['201'].content['application/json'].example;
    assert.equal(upload.success, true);
    assert.equal(upload.file_no, upload.data.file_no);
  });

  test('the direct upload is multipart/form-data naming file and every form field', () => {
    const body = doc.paths['/api/v1/uploads'].post.requestBody;
    const form = body.content['multipart/form-data'];
    assert.ok(form, `content types: ${Object.keys(body.content)}`);
    assert.deepEqual(form.schema.properties.file, {
      type: 'string',
      format: 'binary',
      description: form.schema.properties.file.description,
    });
    assert.deepEqual(Object.keys(form.schema.properties).sort(), ['file', ...UPLOAD_FORM_FIELDS].sort());
    assert.deepEqual(form.schema.required.sort(), ['file', 'file_name']);
    assert.equal(form.example.file_name, 'shoe.jpg');
  });

  test('raw bodies: the token upload and a part upload take the bytes themselves, with no key', () => {
    const token = doc.paths['/api/v1/uploads/{token}'].post;
    assert.equal(token.requestBody.content['*/*'].schema.format, 'binary');
    assert.deepEqual(
      token.parameters.filter((p: any) => p.in === 'header').map((p: any) => p.name),
      ['x-file-name', 'x-folder', 'x-tags', 'x-transform'],
    );
    assert.deepEqual(token.security, []);
    const part = doc.paths['/api/v1/multipart/{sessionId}/parts/{partNumber}'].put;
    assert.equal(part.requestBody.content['application/octet-stream'].schema.format, 'binary');
    assert.deepEqual(part.security, []);
    // Routes with a key keep the document's security.
    assert.equal(doc.paths['/api/v1/files'].get.security, undefined);
  });

  test('delivery URLs are described: tokens, signatures, ranges and their answers', () => {
    const op = doc.paths['/{workspace_id}/{path}']?.get;
    assert.ok(op, 'the delivery path');
    assert.deepEqual(op.security, []);
    const params = op.parameters.map((p: any) => `${p.in}:${p.name}`);
    for (const p of [
      'path:workspace_id',
      'path:path',
      'query:expires',
      'query:signature',
      'query:tsig',
      'query:texp',
      'query:v',
      'header:Range',
      'header:If-None-Match',
    ])
      assert.ok(params.includes(p), p);
    for (const status of ['200', '206', '304', '400', '403', '404', '416', '503'])
      assert.ok(op.responses[status], `delivery answers ${status}`);
    assert.ok(op.responses['206'].headers['Content-Range']);
    assert.equal(op.responses['404'].content['application/json'].schema.$ref, '#/components/schemas/ErrorBody');
  });

  test('health, readiness and metrics are described', () => {
    assert.deepEqual(doc.paths['/healthz'].get.responses['200'].content['application/json'].example, { status: 'ok' });
    const ready = doc.paths['/readyz'].get.responses;
    assert.equal(ready['200'].content['application/json'].example.status, 'ready');
    assert.equal(ready['503'].content['application/json'].example.status, 'not ready');
    const metrics = doc.paths['/metrics'].get;
    assert.match(metrics.responses['200'].content['text/plain'].example, /^# HELP stowage_/);
    assert.ok(metrics.responses['401']);
  });
});
