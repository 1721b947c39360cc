// Property-based fuzzing of every endpoint, generated from the OpenAPI document the service
// publishes (/openapi.json), plus the delivery routes it does not list: for any request,
// (1) no 5xx, (2) every refusal comes in the documented error shape, and (3) a refused request
// changes no state: database rows and stored objects are the same before and after.
// fast-check shrinks a failure to a minimal request and prints its seed; FUZZ_SEED replays it,
// FUZZ_RUNS explores more.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { type Harness, makeHarness } from './helpers/harness.ts';
import { call } from './helpers/http.ts';

const RUNS = Number(process.env.FUZZ_RUNS ?? 40);
const SEED = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : undefined;

interface Operation {
  method: string;
  path: string;
  params: { in: string; name: string; schema?: JsonSchema }[];
  body?: JsonSchema;
}
interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  enum?: unknown[];
  items?: JsonSchema;
  anyOf?: JsonSchema[];
}

/** Strings that have broken services before: SQL and LIKE metacharacters, traversal, Unicode tricks, sizes. */
const NASTY = [
  '',
  ' ',
  '%',
  '_',
  '%_%',
  "'",
  "''",
  '"',
  '\\',
  "' OR 1=1 --",
  "'; DROP TABLE files; --",
  '\u0000',
  '\u202e',
  '\ufeff',
  'é',
  'e\u0301',
  'ﬁ',
  'Å',
  'Å',
  '../../etc/passwd',
  '..\\..\\windows',
  '%2e%2e%2f',
  '..%2f',
  '／etc／passwd',
  '‥/x',
  'a/../../b',
  '/abs',
  'C:\\x',
  '//double',
  'name\r\nSet-Cookie: x=1',
  'http://127.0.0.1/',
  'http://169.254.169.254/latest/meta-data/',
  'http://[::1]/',
  'file:///etc/passwd',
  'gopher://x',
  'https://example.invalid/x.png',
  '__proto__',
  'constructor',
  'prototype',
  'toString',
  '{}',
  '[]',
  'null',
  'NaN',
  '-1',
  '0',
  '1e309',
  '9007199254740993',
  '0x10',
  ' 1',
  '1 ',
  '💥',
  '𝕏',
  '<script>alert(1)</script>',
  '${7*7}',
  '{{7*7}}',
  'a'.repeat(300),
  'x'.repeat(70_000),
];

const hostileString = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...NASTY) },
  { weight: 2, arbitrary: fc.string({ maxLength: 40 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
  { weight: 1, arbitrary: fc.integer({ min: -5, max: 1_000_000 }).map(String) },
);
const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: hostileString },
  { weight: 1, arbitrary: fc.constantFrom(null, true, false, 0, -1, 1.5, 2 ** 53, -(2 ** 63), 1e308) },
  { weight: 1, arbitrary: fc.array(hostileString, { maxLength: 3 }) },
  { weight: 1, arbitrary: fc.dictionary(hostileString, hostileString, { maxKeys: 3 }) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }) },
);

/** Values of the declared type most of the time (to get past validation), hostile otherwise. */
function fromSchema(schema: JsonSchema | undefined, depth = 0): fc.Arbitrary<unknown> {
  if (!schema || depth > 3) return hostileValue;
  if (schema.enum)
    return fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...schema.enum) }, { weight: 1, arbitrary: hostileValue });
  if (schema.anyOf) return fc.oneof(...schema.anyOf.map((s) => fromSchema(s, depth + 1)));
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  let typed: fc.Arbitrary<unknown>;
  switch (type) {
    case 'string':
      typed = fc.oneof(fc.stringMatching(/^[a-z0-9_.-]{1,12}$/), hostileString);
      break;
    case 'integer':
      typed = fc.oneof(
        fc.integer({ min: 0, max: 100 }),
        fc.constantFrom(-1, 0, 2 ** 31, 2 ** 53, Number.MAX_SAFE_INTEGER),
      );
      break;
    case 'number':
      typed = fc.oneof(fc.double({ noNaN: true }), fc.integer());
      break;
    case 'boolean':
      typed = fc.boolean();
      break;
    case 'array':
      typed = fc.array(fromSchema(schema.items, depth + 1), { maxLength: 4 });
      break;
    case 'object': {
      const props = schema.properties ?? {};
      typed =
        Object.keys(props).length === 0
          ? fc.dictionary(hostileString, hostileValue, { maxKeys: 4 })
          : fc.record(Object.fromEntries(Object.entries(props).map(([k, v]) => [k, fromSchema(v, depth + 1)])), {
              requiredKeys: [],
            });
      break;
    }
    default:
      return hostileValue;
  }
  return fc.oneof({ weight: 4, arbitrary: typed }, { weight: 1, arbitrary: hostileValue });
}

describe('fuzzing every endpoint from its schema', () => {
  let h: Harness;
  let ops: Operation[];
  const known = { sourceId: '', file_no: '', folder_no: '', sessionId: '', partNumber: '1', workspace: '' };

  /** Every table's rows and every stored object, as one digest. */
  const snapshot = async () => {
    const hash = createHash('sha256');
    for (const table of [
      'workspaces',
      'api_keys',
      'sources',
      'folders',
      'files',
      'blobs',
      'multipart_sessions',
      'storage_intents',
      'webhook_deliveries',
    ] as const) {
      hash.update(JSON.stringify(await h.services.db.kysely.selectFrom(table).selectAll().execute()));
    }
    for await (const o of h.services.storage.list('')) hash.update(`${o.key}:${o.size}\n`);
    return hash.digest('hex');
  };

  before(async () => {
    // Every name resolves to a private address: no fuzzed URL ever leaves this machine.
    h = await makeHarness('sqlite', { services: { resolver: async () => [{ address: '10.0.0.1', family: 4 }] } });
    known.workspace = h.ws.workspace_id;
    const doc = (await call(h.app, 'GET', '/openapi.json')).body;
    ops = [];
    for (const [path, methods] of Object.entries<Record<string, any>>(doc.paths)) {
      for (const [method, op] of Object.entries<any>(methods)) {
        ops.push({
          method: method.toUpperCase(),
          path,
          params: op.parameters ?? [],
          body: op.requestBody?.content?.['application/json']?.schema,
        });
      }
    }
    // Something for the identifiers to point at.
    known.sourceId = (
      await call(h.app, 'POST', '/api/v1/sources', {
        headers: h.auth,
        body: { name: 'fuzz-anchor', type: 'image_source', configuration: { base_url: 'https://images.example.com' } },
      })
    ).body.data.id;
    const boundary = 'fuzzboundary';
    const form = `--${boundary}\r\nContent-Disposition: form-data; name="file_name"\r\n\r\na.txt\r\n--${boundary}\r\nContent-Disposition: form-data; name="folder"\r\n\r\nfuzz/dir\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\nContent-Type: text/plain\r\n\r\nhello fuzz\r\n--${boundary}--\r\n`;
    const up = await call(h.app, 'POST', '/api/v1/uploads', {
      headers: { ...h.auth, 'content-type': `multipart/form-data; boundary=${boundary}` },
      rawBody: form,
    });
    assert.equal(up.status, 201, up.raw);
    known.file_no = String(up.body.file_no);
    known.folder_no = String(up.body.folder_no);
    const mp = await call(h.app, 'POST', '/api/v1/multipart/start', {
      headers: h.auth,
      body: { file_name: 'fuzz.bin', size: 6 * 1024 * 1024, format: 'application/octet-stream' },
    });
    known.sessionId = mp.body.session_id ?? mp.body.data?.session_id;
    assert.ok(known.sessionId, mp.raw);
  });
  after(() => h?.close());

  test('the document lists every API route (the fuzzer covers what the service publishes)', () => {
    const listed = new Set(ops.map((o) => `${o.method} ${o.path}`));
    for (const route of [
      'POST /api/v1/sources',
      'PATCH /api/v1/files/{file_no}',
      'POST /api/v1/multipart/complete',
      'PUT /api/v1/multipart/{sessionId}/parts/{partNumber}',
      'POST /api/v1/uploads/remote',
      'DELETE /api/v1/folders/{folder_no}',
    ]) {
      assert.ok(listed.has(route), route);
    }
    assert.ok(ops.length >= 20, `${ops.length} operations`);
  });

  /** One request, checked: the three properties above. */
  async function check(
    method: string,
    url: string,
    opts: { body?: unknown; rawBody?: string; headers: Record<string, string> },
  ) {
    const before = await snapshot();
    const res = await call(h.app, method, url, opts);
    const where = `${method} ${url.slice(0, 200)} ${JSON.stringify(opts.body ?? opts.rawBody ?? '').slice(0, 300)}`;
    assert.ok(res.status < 500, `${res.status} for ${where}: ${res.raw.slice(0, 300)}`);
    if (res.status >= 400) {
      assert.equal(res.body?.success, false, `error shape for ${where}: ${res.raw.slice(0, 200)}`);
      assert.equal(typeof res.body.error, 'string');
      assert.equal(await snapshot(), before, `refused (${res.status}) yet changed state: ${where}`);
    }
    return res.status;
  }

  const keyArb = () =>
    fc
      .constantFrom<'private' | 'public' | 'none' | 'garbage'>(
        'private',
        'private',
        'private',
        'public',
        'none',
        'garbage',
      )
      .map(
        (k): Record<string, string> =>
          k === 'private'
            ? h.auth
            : k === 'public'
              ? { 'x-api-key': h.ws.public_key }
              : k === 'garbage'
                ? { 'x-api-key': "stw_sk_' OR 1=1 --" }
                : {},
      );

  test(`every published operation, ${RUNS} generated requests each: no 5xx, errors in shape, refusals change nothing`, async () => {
    const statuses = new Map<number, number>();
    for (const op of ops) {
      if (op.path === '/openapi.json' || op.path.startsWith('/docs')) continue;
      const pathParams = Object.fromEntries(
        op.params
          .filter((p) => p.in === 'path')
          .map((p) => [
            p.name,
            fc.oneof(
              { weight: 3, arbitrary: fc.constant((known as Record<string, string>)[p.name] ?? '1') },
              { weight: 2, arbitrary: hostileString.map((s) => encodeURIComponent(s) || 'x') },
            ),
          ]),
      );
      const query = fc.record(
        Object.fromEntries(op.params.filter((p) => p.in === 'query').map((p) => [p.name, fromSchema(p.schema)])),
        { requiredKeys: [] },
      );
      const body = op.body
        ? fc.oneof({ weight: 4, arbitrary: fromSchema(op.body) }, { weight: 1, arbitrary: hostileValue })
        : fc.constant(undefined);
      await fc.assert(
        fc.asyncProperty(fc.record(pathParams), query, body, keyArb(), async (pp, q, b, headers) => {
          let url = op.path.replace(/\{(\w+)\}/g, (_, name: string) => String(pp[name]));
          const qs = new URLSearchParams();
          for (const [k, v] of Object.entries(q)) qs.set(k, typeof v === 'string' ? v : JSON.stringify(v));
          if ([...qs].length) url += `?${qs}`;
          const status = await check(op.method, url, { headers, body: op.body ? b : undefined });
          statuses.set(status, (statuses.get(status) ?? 0) + 1);
        }),
        { numRuns: RUNS, seed: SEED, endOnFailure: false },
      );
    }
    // Reaching both outcomes, or the generator is not testing much.
    const ok = [...statuses].filter(([s]) => s < 300).reduce((n, [, c]) => n + c, 0);
    const refused = [...statuses].filter(([s]) => s >= 400).reduce((n, [, c]) => n + c, 0);
    if (process.env.FUZZ_VERBOSE) console.log(JSON.stringify([...statuses]));
    assert.ok(ok > 50 && refused > 200, JSON.stringify([...statuses]));
  });

  test(`delivery: generated transformation tokens and paths, ${RUNS * 5} requests`, async () => {
    const token = fc.oneof(
      fc
        .tuple(
          fc.constantFrom('w', 'h', 'q', 'f', 'c', 'g', 'r', 'b', 'e', 'o', 'x', 'y', 'z', 'dpr', 'bg', 'ar', 'fl'),
          fc.oneof(
            fc.integer({ min: -10, max: 100_000 }).map(String),
            hostileString,
            fc.constantFrom(
              'auto',
              'webp',
              'avif',
              'png',
              'jpg',
              'fill',
              'fit',
              'thumb',
              'face',
              'ffffff',
              '16:9',
              '1.5',
            ),
          ),
        )
        .map(([k, v]) => `${k}_${v}`),
      hostileString,
    );
    const path = fc.tuple(
      fc.array(token, { maxLength: 4 }),
      fc.oneof(fc.constant('fuzz/dir/a.txt'), fc.constant('a.txt'), hostileString),
      fc.constantFrom('', '', '-src', '-fuzz-anchor', '-nope'),
    );
    await fc.assert(
      fc.asyncProperty(path, async ([tokens, name, suffix]) => {
        const segments = [
          encodeURIComponent(known.workspace + suffix),
          ...(tokens.length ? [tokens.map((t) => encodeURIComponent(t).replace(/%2C/g, ',')).join(',')] : []),
          ...name.split('/').map(encodeURIComponent),
        ];
        const url = `/${segments.join('/')}`;
        const before = await snapshot();
        const res = await h.app.inject({ method: 'GET', url });
        assert.ok(
          res.statusCode < 500 || res.statusCode === 502,
          `${res.statusCode} for ${url}: ${res.body.slice(0, 200)}`,
        );
        // Renditions are a cache beside the blob; rows never change on a read.
        if (res.statusCode >= 400) assert.equal(await snapshot(), before, `refused ${url} changed state`);
      }),
      { numRuns: RUNS * 5, seed: SEED, endOnFailure: false },
    );
  });

  test('direct upload forms: generated fields, broken boundaries and bodies', async () => {
    const field = fc.tuple(
      fc.constantFrom(
        'file_name',
        'folder',
        'tags',
        'metadata',
        'custom_id',
        'random_prefix',
        'transform',
        'webhook_url',
        'unknown',
        'file',
      ),
      hostileString,
    );
    const form = fc.record({
      boundary: fc.oneof(
        fc.constant('b0undary'),
        fc.constantFrom('', ' ', '"quoted"', 'a'.repeat(200), '--', 'x;y', '\u00e9'),
      ),
      fields: fc.array(field, { maxLength: 5 }),
      withFile: fc.boolean(),
      breakage: fc.constantFrom(
        'none',
        'none',
        'no-closing',
        'wrong-boundary',
        'no-crlf',
        'truncated',
        'no-disposition',
      ),
      contentType: fc.constantFrom(
        'multipart/form-data; boundary=',
        'multipart/form-data; boundary=',
        'multipart/mixed; boundary=',
        'application/json; x=',
        'text/plain; boundary=',
      ),
    });
    await fc.assert(
      fc.asyncProperty(form, keyArb(), async (f, headers) => {
        const b = f.boundary;
        let body = '';
        for (const [name, value] of f.fields)
          body += `--${b}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`;
        if (f.withFile)
          body += `--${b}\r\n${f.breakage === 'no-disposition' ? '' : 'Content-Disposition: form-data; name="file"; filename="f.bin"\r\n'}Content-Type: application/octet-stream\r\n\r\nfuzz-bytes-${Math.random()}\r\n`;
        body += f.breakage === 'no-closing' ? '' : `--${f.breakage === 'wrong-boundary' ? 'other' : b}--\r\n`;
        if (f.breakage === 'no-crlf') body = body.replace(/\r\n/g, '\n');
        if (f.breakage === 'truncated') body = body.slice(0, Math.floor(body.length / 2));
        await check('POST', '/api/v1/uploads', {
          headers: { ...headers, 'content-type': `${f.contentType}${b}` },
          rawBody: body,
        });
      }),
      { numRuns: RUNS * 3, seed: SEED, endOnFailure: false },
    );
  });
});
