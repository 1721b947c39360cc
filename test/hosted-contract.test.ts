// The hosted service's SDKs against Stowage (issue 16, item 13). test/fixtures/hosted-contract.json
// records, from the hosted docs and the Node, Python, Ruby, .NET and Java SDK sources, how each
// SDK sends its requests (headers, key, content type, body) and which answer fields it reads,
// with their types. Here every request is sent exactly that way to a real listening Stowage, and
// every field is checked. docs/compatibility.md is the same comparison in prose.
//
// Where Stowage does not behave as an SDK expects yet, the case carries `todo` naming the issue
// item (node:test runs it and reports it, but a failing todo does not fail the suite). Remove the
// todo once the item lands; a todo case that passes is a hint that it can go.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { after, before, describe, test } from 'node:test';
import type { ResolvedAddress } from '../src/outbound/guard.ts';
import { type Harness, makeHarness } from './helpers/harness.ts';
import { localServer } from './helpers/servers.ts';

// ---------------------------------------------------------------------------------------------
// The fixture

interface Shape {
  sdk?: string;
  sameAs?: string;
  itemsOf?: string;
  required?: Record<string, string>;
  optional?: Record<string, string>;
  itemsOptional?: Record<string, string>;
}
interface Client {
  auth: { header: string; format: string };
  headers: Record<string, string>;
  jsonContentType: string;
  contentTypeOnBodylessNonGet?: boolean;
}
interface Operation {
  method: string;
  path: string;
  request?: {
    contentType?: string;
    json?: Record<string, unknown>;
    form?: Record<string, string>;
    headers?: Record<string, string>;
  };
  queries?: Record<string, { params: Record<string, string | number> }>;
  bodies?: Record<string, { json: Record<string, unknown> }>;
  statuses: number[];
  shapes?: Record<string, Shape>;
}
interface Fixture {
  clients: Record<string, Client>;
  auth: { schemes: { header: string; format: string }[] };
  limits: { filesListDefaultLimit: { value: number } };
  retry: { pythonHonoursRetryAfterUpTo: number };
  operations: Record<string, Operation>;
}

const fx: Fixture = JSON.parse(readFileSync(new URL('./fixtures/hosted-contract.json', import.meta.url), 'utf8'));
const op = (id: string): Operation => {
  const o = fx.operations[id];
  assert.ok(o, `fixture has no operation ${id}`);
  return o;
};

/** A shape of an operation's answer, following `sameAs` ("op" = the same shape name there, "op#name" = that one). */
function shapeOf(opId: string, name: string): Shape {
  const s = op(opId).shapes?.[name];
  assert.ok(s, `fixture has no shape ${opId} ${name}`);
  if (!s.sameAs) return s;
  const [otherOp, otherName] = s.sameAs.split('#');
  return { ...shapeOf(otherOp, otherName ?? name), sdk: s.sdk };
}

// ---------------------------------------------------------------------------------------------
// Gaps: what Stowage does not do yet, by issue item. Keys are the test names below.
//
// Item numbers follow the order of issue 16's list of open items (1 upload answers,
// 2 file record fields, 3 folder create/rename answers, 4 folder list without limit, 5 folder
// delete 409/recursive, 6 rename keeps the extension, 7 empty JSON body, 8 x-should-retry and
// retry-after, 9 files list name/path/folderNo, 10 Basic auth, 11 image_source headers).
// "issue 16 (new)" marks a gap this contract found that the issue does not list yet.

const TODO: Record<string, string> = {};

/**
 * Differences docs/compatibility.md explains: the case asserts exactly these problems, so it
 * fails if another field goes missing, and if the difference goes away (then drop it here).
 */
const DIFFERS: Record<string, string[]> = {
  // Stowage keys are not users: nobody is recorded as the uploader.
  'files.retrieve details, optional fields': ['data.uploaded_by: expected string, got null'],
  // Stowage does not record who or what created a folder.
  'folders.rename docs, optional fields': ['missing created_by (string)', 'missing source (string)'],
};
const todo = (name: string) => (TODO[name] ? { todo: TODO[name] } : {});

/** Every case goes through here, so that a gap listed above always finds its case. */
const registered = new Set<string>();
function check(name: string, fn: () => unknown): void {
  assert.ok(!registered.has(name), `two cases named ${name}`);
  registered.add(name);
  test(name, todo(name), fn as () => Promise<void>);
}

// ---------------------------------------------------------------------------------------------
// Field checks

function typeOk(value: unknown, type: string): boolean {
  return type.split('|').some((t) => {
    switch (t) {
      case 'string':
        return typeof value === 'string';
      case 'integer':
        return Number.isInteger(value);
      case 'number':
        return typeof value === 'number' && Number.isFinite(value);
      case 'boolean':
        return typeof value === 'boolean';
      case 'true':
        return value === true;
      case 'null':
        return value === null;
      case 'object':
        return typeof value === 'object' && value !== null && !Array.isArray(value);
      case 'array':
        return Array.isArray(value);
      case 'string[]':
        return Array.isArray(value) && value.every((v) => typeof v === 'string');
      case 'date-time':
        return (
          typeof value === 'string' && /^\d{4}-\d\d-\d\dT\d\d:\d\d/.test(value) && !Number.isNaN(Date.parse(value))
        );
      default:
        throw new Error(`unknown type ${t} in the fixture`);
    }
  });
}

function lookup(body: unknown, path: string): { present: boolean; value: unknown } {
  let cur: unknown = body;
  for (const key of path.split('.')) {
    if (typeof cur !== 'object' || cur === null || !Object.hasOwn(cur, key))
      return { present: false, value: undefined };
    cur = (cur as Record<string, unknown>)[key];
  }
  return { present: true, value: cur };
}

/** What is wrong with `body` for these fields: missing ones and ones of the wrong type. */
function problems(body: unknown, fields: Record<string, string>, itemsOf?: string): string[] {
  if (itemsOf) {
    const items = lookup(body, itemsOf).value;
    if (!Array.isArray(items) || items.length === 0)
      return [`${itemsOf}: expected a non-empty array to check items, got ${JSON.stringify(items)}`];
    return [...new Set(items.flatMap((item) => problems(item, fields).map((p) => `${itemsOf}[]: ${p}`)))];
  }
  const out: string[] = [];
  for (const [path, type] of Object.entries(fields)) {
    const { present, value } = lookup(body, path);
    if (!present) out.push(`missing ${path} (${type})`);
    else if (!typeOk(value, type)) out.push(`${path}: expected ${type}, got ${JSON.stringify(value)?.slice(0, 80)}`);
  }
  return out;
}

/**
 * Registers, for each named shape of an operation, a test of its required fields and one of
 * its optional fields (the SDK reads them when the hosted service sends them, and it does).
 */
function shapeTests(opId: string, names: string[], answer: () => unknown): void {
  for (const name of names) {
    const shape = shapeOf(opId, name);
    const req = `${opId} ${name}, required fields`;
    if (shape.required && Object.keys(shape.required).length > 0) {
      check(req, () => {
        assert.deepEqual(problems(answer(), shape.required!, shape.itemsOf), [], `as ${shape.sdk} reads it`);
      });
    }
    const optional = shape.optional ?? shape.itemsOptional;
    if (optional) {
      const opt = `${opId} ${name}, optional fields`;
      check(opt, () => {
        const itemsOf = shape.itemsOptional ? (shape.itemsOf ?? Object.keys(shape.required ?? {})[0]) : shape.itemsOf;
        assert.deepEqual(problems(answer(), optional, itemsOf), DIFFERS[opt] ?? [], `as ${shape.sdk} reads it`);
      });
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Requests as the SDKs shape them

interface Answer {
  status: number;
  headers: Headers;
  body: any;
}

/** The headers a client sends on every request: its fixed headers and its key, as it writes it. */
function clientHeaders(client: string, key: string | null): Record<string, string> {
  const c = fx.clients[client];
  assert.ok(c, `fixture has no client ${client}`);
  const headers = { ...c.headers };
  if (key !== null) headers[c.auth.header] = c.auth.format.replace('{key}', key);
  return headers;
}

const PNG = Buffer.from(
  '89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c63f8ffff3f0005fe02fea7d6a4a40000000049454e44ae426082',
  'hex',
);

const resolver = async (host: string): Promise<ResolvedAddress[]> => {
  if (host === 'files.test') return [{ address: '127.0.0.1', family: 4 }];
  throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
};

describe('hosted SDK contract', () => {
  let h: Harness;
  let base: string;
  let origin: Awaited<ReturnType<typeof localServer>>;

  before(async () => {
    origin = await localServer((req, res) => {
      if (req.url === '/assets/pixel.png') res.writeHead(200, { 'content-type': 'image/png' }).end(PNG);
      else res.writeHead(404).end();
    });
    h = await makeHarness('sqlite', { config: { outboundAllow: ['files.test'] }, services: { resolver } });
    base = await h.app.listen({ host: '127.0.0.1', port: 0 });
  });
  after(async () => {
    await h?.close();
    await origin?.close();
  });

  /**
   * One request as `client` sends it: its headers and key, `json` encoded with its JSON content
   * type (the Python SDK also sends that type on bodiless non-GET requests), a FormData as
   * multipart, raw bytes as they are. `url` may be absolute (a part URL).
   */
  async function send(
    client: string,
    method: string,
    url: string,
    opts: {
      json?: unknown;
      form?: FormData;
      raw?: Buffer;
      query?: Record<string, string | number>;
      headers?: Record<string, string>;
      key?: string | null;
    } = {},
  ): Promise<Answer> {
    const c = fx.clients[client];
    const headers: Record<string, string> = clientHeaders(client, opts.key === undefined ? h.ws.private_key : opts.key);
    let body: BodyInit | undefined;
    if (opts.json !== undefined) {
      headers['content-type'] = c.jsonContentType;
      body = JSON.stringify(opts.json);
    } else if (opts.form) body = opts.form;
    else if (opts.raw) body = new Uint8Array(opts.raw);
    else if (c.contentTypeOnBodylessNonGet && method !== 'GET') headers['content-type'] = c.jsonContentType;
    Object.assign(headers, opts.headers);
    const target = new URL(url, base);
    for (const [k, v] of Object.entries(opts.query ?? {})) target.searchParams.set(k, String(v));
    // fetch adds content-length: 0 to a bodiless DELETE; httpx (the Python SDK) sends neither
    // a length nor a body, so such a request goes out through node:http as httpx sends it.
    const {
      status,
      headers: answerHeaders,
      text,
    } = body === undefined && method !== 'GET' && headers['content-type'] !== undefined
      ? await bodiless(target, method, headers)
      : await viaFetch(target, method, headers, body);
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = text;
    }
    return { status, headers: answerHeaders, body: parsed };
  }

  async function viaFetch(target: URL, method: string, headers: Record<string, string>, body: BodyInit | undefined) {
    const res = await fetch(target, { method, headers, body });
    return { status: res.status, headers: res.headers, text: await res.text() };
  }

  /** A request with headers and no body at all: no content-length, no transfer-encoding. */
  function bodiless(
    target: URL,
    method: string,
    headers: Record<string, string>,
  ): Promise<{ status: number; headers: Headers; text: string }> {
    return new Promise((resolve, reject) => {
      const req = httpRequest(target, { method, headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const out = new Headers();
          for (const [k, v] of Object.entries(res.headers))
            if (v !== undefined) out.set(k, Array.isArray(v) ? v.join(', ') : v);
          resolve({ status: res.statusCode ?? 0, headers: out, text: Buffer.concat(chunks).toString('utf8') });
        });
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end();
    });
  }

  /** Replaces {placeholders} in fixture values with what earlier steps produced. */
  function fill<T>(value: T, vars: Record<string, string | number>): T {
    return JSON.parse(JSON.stringify(value), (_k, v) => {
      if (typeof v !== 'string') return v;
      const whole = /^\{(\w+)\}$/.exec(v);
      if (whole && whole[1] in vars) return vars[whole[1]];
      return v.replace(/\{(\w+)\}/g, (m, name: string) => (name in vars ? String(vars[name]) : m));
    });
  }

  const expectStatus = (a: Answer, o: Operation) =>
    assert.ok(o.statuses.includes(a.status), `status ${a.status}: ${JSON.stringify(a.body)?.slice(0, 300)}`);
  const recordOf = (b: any) => (b?.data && typeof b.data === 'object' && b.data.file_no ? b.data : b);

  // Shared state, filled in order.
  const vars: Record<string, string | number> = {};
  const answers: Record<string, any> = {};

  // ---- authentication -------------------------------------------------------------------

  for (const client of Object.keys(fx.clients)) {
    check(`auth: GET /api/v1/files with the ${client} SDK's headers`, async () => {
      const a = await send(client, 'GET', '/api/v1/files');
      assert.equal(a.status, 200, JSON.stringify(a.body));
    });
  }

  for (const scheme of fx.auth.schemes) {
    const name = `auth ${scheme.format.split(' ')[0] === '{key}' ? scheme.header : scheme.format}`;
    check(name, async () => {
      const key = h.ws.private_key;
      const value = scheme.format.replace('{key}', key).replace('{base64(key)}', Buffer.from(key).toString('base64'));
      const res = await fetch(`${base}/api/v1/folders`, { headers: { [scheme.header]: value } });
      assert.equal(res.status, 200, await res.text());
    });
  }

  check('a browser preflight allows every header the SDKs send', async () => {
    const names = [
      ...new Set(Object.values(fx.clients).flatMap((c) => [...Object.keys(c.headers), c.auth.header])),
    ].filter((n) => !['accept', 'user-agent'].includes(n));
    const res = await fetch(`${base}/api/v1/files`, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://app.example.com',
        'access-control-request-method': 'GET',
        'access-control-request-headers': names.join(','),
      },
    });
    assert.equal(res.status, 204);
    const allowed = (res.headers.get('access-control-allow-headers') ?? '').toLowerCase().split(/\s*,\s*/);
    for (const n of names) assert.ok(allowed.includes(n), `${n} not allowed: ${allowed}`);
  });

  // ---- direct upload ------------------------------------------------------------------------

  check('uploads.create: multipart/form-data with the node SDK headers', async () => {
    const o = op('uploads.create');
    const form = new FormData();
    form.append('file', new Blob([PNG], { type: 'image/png' }), 'pixel.png');
    for (const [k, v] of Object.entries(o.request!.form!)) if (k !== 'file') form.append(k, v);
    const a = await send('node', o.method, o.path, { form });
    expectStatus(a, o);
    answers['uploads.create'] = a.body;
    const r = recordOf(a.body);
    vars.file_no = r.file_no;
    vars.folder_no = r.folder_no;
    assert.equal(r.name, 'pixel.png');
    assert.deepEqual(r.tags, ['alpha', 'beta']);
    assert.deepEqual(r.metadata, { sku: 'A-1' });
    assert.equal(r.custom_id, 'sdk-1');
  });
  shapeTests('uploads.create', ['record', 'envelope'], () => answers['uploads.create']);

  check('uploads.create: folder paths lose leading and trailing slashes (docs)', async () => {
    const form = new FormData();
    form.append('file', new Blob(['plain text, 300 bytes'.padEnd(300, '.')]), 'notes.txt');
    form.append('file_name', 'notes.txt');
    form.append('folder', '/sdk/contract/');
    const a = await send('python', 'POST', '/api/v1/uploads', { form });
    assert.ok([200, 201].includes(a.status), JSON.stringify(a.body));
    const r = recordOf(a.body);
    assert.equal(r.folder_no, vars.folder_no, 'the same folder as sdk/contract');
    assert.ok(!String(r.path).includes('//'), r.path);
    vars.other_file_no = r.file_no;
  });

  // ---- files ----------------------------------------------------------------------------------

  check('files.retrieve with the python SDK headers', async () => {
    const o = op('files.retrieve');
    const a = await send('python', o.method, fill(o.path, vars));
    expectStatus(a, o);
    answers['files.retrieve'] = a.body;
  });
  shapeTests('files.retrieve', ['envelope', 'details'], () => answers['files.retrieve']);

  for (const [variant, q] of Object.entries(op('files.list').queries!)) {
    check(`files.list with the ${variant} query finds the file`, async () => {
      const o = op('files.list');
      const client = variant.startsWith('node')
        ? 'node'
        : variant === 'ruby'
          ? 'ruby'
          : variant === 'python'
            ? 'python'
            : 'dotnet';
      const a = await send(client, o.method, o.path, { query: fill(q.params, vars) });
      expectStatus(a, o);
      if (variant === 'docs') answers['files.list'] = a.body;
      const files: any[] = a.body.files ?? a.body.data ?? a.body.items ?? [];
      assert.ok(
        files.some((f) => f.file_no === vars.file_no),
        `the uploaded file is missing: ${JSON.stringify(a.body).slice(0, 300)}`,
      );
    });
  }
  shapeTests(
    'files.list',
    ['files-meta', 'item-python', 'item-docs', 'page-node', 'page-ruby', 'page-node-0.1'],
    () => answers['files.list'],
  );

  // Each filter, given a value that matches nothing, must leave the file out (an ignored
  // parameter would still list it).
  const FILTERS: Record<string, string> = {
    name: 'no-such-name',
    search: 'no-such-name',
    path: 'no/such/folder',
    folder_no: 'NoSuchFolder1',
    folderNo: 'NoSuchFolder1',
    tags: 'no-such-tag',
  };
  for (const [param, miss] of Object.entries(FILTERS)) {
    const name = `files.list filter ${param}`;
    check(name, async () => {
      const a = await send('python', 'GET', '/api/v1/files', { query: { [param]: miss } });
      assert.ok([200, 404].includes(a.status), JSON.stringify(a.body));
      const files: any[] = a.status === 200 ? a.body.files : [];
      assert.ok(
        !files.some((f) => f.file_no === vars.file_no),
        `${param}=${miss} still lists the file: ${param} is ignored`,
      );
    });
  }

  check('files.list sort_field=file_size with sort_order asc and desc (docs)', async () => {
    const sizes = async (order: string) => {
      const a = await send('dotnet', 'GET', '/api/v1/files', {
        query: { folder_no: vars.folder_no, sort_field: 'file_size', sort_order: order },
      });
      assert.equal(a.status, 200, JSON.stringify(a.body));
      return (a.body.files as any[]).map((f) => f.size ?? f.file_size);
    };
    const asc = await sizes('asc');
    assert.ok(asc.length >= 2);
    assert.deepEqual(
      asc,
      [...asc].sort((x, y) => x - y),
    );
    assert.deepEqual(await sizes('desc'), [...asc].reverse());
  });

  check('files.list sort=size_desc (python, node 0.1)', async () => {
    const a = await send('python', 'GET', '/api/v1/files', { query: { folder_no: vars.folder_no, sort: 'size_desc' } });
    assert.equal(a.status, 200, JSON.stringify(a.body));
    const sizes = (a.body.files as any[]).map((f) => f.size ?? f.file_size);
    assert.deepEqual(
      sizes,
      [...sizes].sort((x, y) => y - x),
    );
  });

  check('files.list: default limit is the hosted 20', async () => {
    const a = await send('node', 'GET', '/api/v1/files');
    assert.equal(a.status, 200);
    assert.equal(a.body.meta?.limit, fx.limits.filesListDefaultLimit.value);
  });

  check('files.update with the node SDK headers', async () => {
    const o = op('files.update');
    const a = await send('node', o.method, fill(o.path, vars), { json: o.request!.json });
    expectStatus(a, o);
    answers['files.update'] = a.body;
    const r = recordOf(a.body);
    assert.deepEqual([...r.tags].sort(), ['alpha', 'sale']);
    assert.equal(r.metadata?.color ?? r.meta_data?.color, 'red');
  });
  shapeTests('files.update', ['envelope', 'flat'], () => answers['files.update']);

  check('files.rename keeps the extension (docs: demo on a .png gives demo.png)', async () => {
    const o = op('files.rename');
    const a = await send('python', o.method, fill(o.path, vars), { json: o.request!.json });
    expectStatus(a, o);
    answers['files.rename'] = a.body;
    assert.equal(recordOf(a.body).name, 'hero.png');
  });
  shapeTests('files.rename', ['envelope', 'flat'], () => answers['files.rename']);

  // ---- multipart ---------------------------------------------------------------------------

  check('multipart.start with the node SDK headers', async () => {
    const o = op('multipart.start');
    const a = await send('node', o.method, o.path, { json: fill(o.request!.json, { size: PNG.length }) });
    expectStatus(a, o);
    answers['multipart.start'] = a.body;
    vars.session_id = a.body.session_id;
    vars.uuid = a.body.uuid;
  });
  shapeTests('multipart.start', ['session'], () => answers['multipart.start']);

  check(
    'multipart.uploadPart: PUT to the part URL as the node SDK sends it (its key header and Accept */* included)',
    async () => {
      const o = op('multipart.uploadPart');
      // The part URL is absolute under the configured public URL; send it to this listener.
      const part = new URL(answers['multipart.start'].parts[0]);
      const a = await send('node', o.method, `${part.pathname}${part.search}`, {
        raw: PNG,
        headers: { 'content-type': o.request!.contentType!, ...o.request!.headers },
      });
      expectStatus(a, o);
    },
  );

  check('multipart.complete with the python SDK headers', async () => {
    const o = op('multipart.complete');
    const a = await send('python', o.method, o.path, { json: fill(o.request!.json, vars) });
    expectStatus(a, o);
    answers['multipart.complete'] = a.body;
    assert.equal(recordOf(a.body).size, PNG.length);
  });
  shapeTests('multipart.complete', ['record', 'envelope'], () => answers['multipart.complete']);

  // ---- upload tokens ---------------------------------------------------------------------

  check('uploads.generateToken with the node SDK headers', async () => {
    const o = op('uploads.generateToken');
    const a = await send('node', o.method, o.path, { json: o.request!.json });
    expectStatus(a, o);
    answers['uploads.generateToken'] = a.body;
    vars.token = a.body.token;
  });
  shapeTests('uploads.generateToken', ['token'], () => answers['uploads.generateToken']);

  check(
    'uploads.uploadWithToken as the node SDK sends it: octet-stream, no file name, its key header still on',
    async () => {
      const o = op('uploads.uploadWithToken');
      const a = await send('node', o.method, fill(o.path, vars), {
        raw: PNG,
        headers: { 'content-type': o.request!.contentType! },
      });
      expectStatus(a, o);
      answers['uploads.uploadWithToken'] = a.body;
      const r = recordOf(a.body);
      assert.equal(r.name, 'avatar.png', "the token's file_name");
      assert.equal(r.path.replace(/^\//, '').startsWith('user-uploads/avatars/'), true, r.path);
    },
  );
  shapeTests('uploads.uploadWithToken', ['record', 'envelope'], () => answers['uploads.uploadWithToken']);

  check('uploads.uploadWithToken as the docs send it: X-File-Name and the file type, no key', async () => {
    const t = await send('python', 'POST', '/api/v1/generate-token', { json: { file_name: 'default.png' } });
    assert.ok([200, 201].includes(t.status), JSON.stringify(t.body));
    const res = await fetch(`${base}/api/v1/uploads/${t.body.token}`, {
      method: 'POST',
      headers: { 'content-type': 'image/png', 'x-file-name': 'my-image.png' },
      body: PNG,
    });
    const body = (await res.json()) as any;
    assert.equal(res.status, 201, JSON.stringify(body));
    assert.equal(recordOf(body).name, 'my-image.png');
  });

  // ---- remote upload ----------------------------------------------------------------------

  check('uploads.createFromURL: JSON with string tags, metadata and random_prefix (node SDK)', async () => {
    const o = op('uploads.createFromURL');
    const a = await send('node', o.method, o.path, {
      json: fill(o.request!.json, { origin: `http://files.test:${origin.port}` }),
    });
    expectStatus(a, o);
    answers['uploads.createFromURL'] = a.body;
    const r = recordOf(a.body);
    assert.deepEqual(r.tags, ['alpha', 'beta']);
    assert.deepEqual(r.metadata, { from: 'web' });
    assert.match(r.name, /^pixel_[0-9A-Za-z]+\.png$/, 'random_prefix "true" adds a suffix');
  });
  shapeTests('uploads.createFromURL', ['record', 'envelope'], () => answers['uploads.createFromURL']);

  // ---- folders -----------------------------------------------------------------------------

  check('folders.create with name and parent_folder_no (docs, python)', async () => {
    const o = op('folders.create');
    const a = await send('python', o.method, o.path, { json: fill(o.bodies!.name.json, vars) });
    expectStatus(a, o);
    answers['folders.create'] = a.body;
    vars.new_folder_no = a.body.folder_no ?? a.body.data?.folder_no;
    assert.equal(a.body.name ?? a.body.data?.name, 'demo2');
  });
  shapeTests('folders.create', ['docs', 'node-0.1'], () => answers['folders.create']);

  check('folders.create with folder_name and path (node 0.1.x)', async () => {
    const o = op('folders.create');
    const a = await send('node', o.method, o.path, { json: o.bodies!.folder_name.json });
    expectStatus(a, o);
    const path = a.body.path ?? a.body.data?.path;
    assert.equal(String(path).replace(/^\/|\/$/g, ''), 'sdk/contract/demo3');
  });

  check('folders.list with the python query', async () => {
    const o = op('folders.list');
    for (const n of ['demo-a', 'demo-b']) {
      const c = await send('python', 'POST', '/api/v1/folders', {
        json: { name: n, parent_folder_no: vars.folder_no },
      });
      assert.ok([200, 201].includes(c.status), JSON.stringify(c.body));
    }
    const a = await send('python', o.method, o.path, { query: fill(o.queries!.python.params, vars) });
    expectStatus(a, o);
    answers['folders.list'] = a.body;
    const names = (a.body.folders as any[]).map((f) => f.name);
    assert.ok(names.includes('demo-a') && names.includes('demo-b') && names.includes('demo2'), names.join());
  });
  shapeTests('folders.list', ['docs', 'item-python'], () => answers['folders.list']);

  check('folders.list sort=name_desc (python)', async () => {
    const a = await send('python', 'GET', '/api/v1/folders', {
      query: { parent_folder_no: vars.folder_no, sort: 'name_desc' },
    });
    assert.equal(a.status, 200);
    const names = (a.body.folders as any[]).map((f) => f.name);
    assert.deepEqual(names, [...names].sort().reverse());
  });

  check('folders.list without limit lists every folder of the parent (the docs page nothing)', async () => {
    const parent = await send('node', 'POST', '/api/v1/folders', { json: { name: 'many' } });
    const parentNo = parent.body.folder_no ?? parent.body.data?.folder_no;
    for (let i = 0; i < 12; i++) {
      const c = await send('node', 'POST', '/api/v1/folders', {
        json: { name: `f${String(i).padStart(2, '0')}`, parent_folder_no: parentNo },
      });
      assert.ok([200, 201].includes(c.status), JSON.stringify(c.body));
    }
    const a = await send('python', 'GET', '/api/v1/folders', { query: { parent_folder_no: parentNo } });
    assert.equal(a.status, 200);
    assert.equal(a.body.folders.length, 12);
  });

  check('folders.rename with the node SDK headers', async () => {
    const o = op('folders.rename');
    const a = await send('node', o.method, fill(o.path, { folder_no: vars.new_folder_no }), { json: o.request!.json });
    expectStatus(a, o);
    answers['folders.rename'] = a.body;
    assert.equal(a.body.name ?? a.body.data?.name, 'demo4');
  });
  shapeTests('folders.rename', ['python', 'docs'], () => answers['folders.rename']);

  check('folders.delete of an empty folder, Accept */* (node SDK)', async () => {
    const o = op('folders.delete');
    const a = await send('node', o.method, fill(o.path, { folder_no: vars.new_folder_no }), {
      headers: o.request!.headers,
    });
    expectStatus(a, o);
    answers['folders.delete'] = a.body;
  });
  shapeTests('folders.delete', ['message'], () => answers['folders.delete']);

  check('folders.delete with the python SDK headers (content-type json, no body)', async () => {
    const f = await send('node', 'POST', '/api/v1/folders', { json: { name: 'python-delete' } });
    const no = f.body.folder_no ?? f.body.data?.folder_no;
    const a = await send('python', 'DELETE', `/api/v1/folders/${no}`, { headers: { accept: '*/*' } });
    expectStatus(a, op('folders.delete'));
  });

  check('folders.delete non-empty: 409, not retried', async () => {
    const a = await send('node', 'DELETE', `/api/v1/folders/${vars.folder_no}`, { headers: { accept: '*/*' } });
    assert.equal(a.status, 409, JSON.stringify(a.body));
    assert.equal(a.headers.get('x-should-retry'), 'false');
  });

  // ---- sources (no SDK resource; the docs' "Source Path" form) ------------------------------

  check('sources: an image_source whose canonical_header is a header name (docs)', async () => {
    const a = await send('python', 'POST', '/api/v1/sources', {
      json: {
        name: 'store-images',
        type: 'image_source',
        configuration: {
          base_url: 'https://example.com/images',
          canonical_header: 'x-forwarded-host',
          forward_header: true,
        },
      },
    });
    assert.equal(a.status, 201, JSON.stringify(a.body));
    assert.equal(a.body.data.configuration.canonical_header, 'x-forwarded-host');
  });

  // ---- errors, retries, empty bodies -------------------------------------------------------

  check('errors: 404 body as the hosted ApiError (error string; success false)', async () => {
    const a = await send('node', 'GET', '/api/v1/files/NoSuchFile12');
    assert.equal(a.status, 404);
    assert.equal(typeof a.body.error, 'string');
    assert.equal(a.body.success, false);
    answers.e404 = a;
  });
  check('errors: 404 carries code as well as errorCode', () => {
    assert.equal(answers.e404.body.code, 'FILE_NOT_FOUND');
  });
  check('errors: 404 says x-should-retry: false', () => {
    assert.equal(answers.e404.headers.get('x-should-retry'), 'false');
  });

  check('errors: 401 has the documented texts', async () => {
    const a = await send('node', 'GET', '/api/v1/files', { key: 'stw_sk_wrong' });
    assert.equal(a.status, 401);
    assert.equal(a.body.error, 'Unauthorized');
    assert.equal(a.body.message, 'Invalid or missing API key');
    answers.e401 = a;
  });
  check('errors: 401 says x-should-retry: false', () => {
    assert.equal(answers.e401.headers.get('x-should-retry'), 'false');
  });

  check('errors: 400 says x-should-retry: false', async () => {
    const a = await send('node', 'POST', '/api/v1/multipart/start', { json: { file_name: 'x.bin' } });
    assert.equal(a.status, 400);
    assert.equal(a.headers.get('x-should-retry'), 'false');
  });

  check('errors: 409 says x-should-retry: false (the SDKs retry 409 otherwise)', async () => {
    const a = await send('node', 'POST', '/api/v1/folders', {
      json: { name: 'demo-a', parent_folder_no: vars.folder_no },
    });
    assert.equal(a.status, 409, JSON.stringify(a.body));
    assert.equal(a.headers.get('x-should-retry'), 'false');
  });

  check('empty JSON body: DELETE with content-type json and content-length 0', async () => {
    const f = await send('node', 'POST', '/api/v1/folders', { json: { name: 'empty-body' } });
    const no = f.body.folder_no ?? f.body.data?.folder_no;
    const a = await send('python', 'DELETE', `/api/v1/folders/${no}`, {
      raw: Buffer.alloc(0),
      headers: { 'content-type': 'application/json', accept: '*/*' },
    });
    assert.ok([200, 204].includes(a.status), JSON.stringify(a.body));
  });

  check('empty JSON body: POST complete with no body is a validation error, not invalid JSON', async () => {
    const a = await send('python', 'POST', '/api/v1/multipart/complete', {
      raw: Buffer.alloc(0),
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(a.status, 400);
    assert.equal(a.body.errorCode, 'VALIDATION_FAILED', JSON.stringify(a.body));
  });

  // ---- delete a file last (python sends content-type json on a bodiless DELETE) -------------

  check('files.delete with the python SDK headers (content-type json, no body, Accept */*)', async () => {
    const o = op('files.delete');
    const a = await send('python', o.method, fill(o.path, vars), { headers: o.request!.headers });
    expectStatus(a, o);
    answers['files.delete'] = a.body;
    const gone = await send('python', 'GET', fill('/api/v1/files/{file_no}', vars));
    assert.equal(gone.status, 404);
  });
  shapeTests('files.delete', ['message'], () => answers['files.delete']);
});

describe('hosted SDK contract: rate limits', () => {
  let h: Harness;
  let base: string;
  before(async () => {
    h = await makeHarness('sqlite', { config: { rateLimitApi: { max: 1, windowMs: 30_000 }, rateLimitUpload: null } });
    base = await h.app.listen({ host: '127.0.0.1', port: 0 });
  });
  after(() => h?.close());

  check('429 carries retry-after in seconds, within what the Python SDK honours', async () => {
    const headers = clientHeaders('python', h.ws.private_key);
    await fetch(`${base}/api/v1/files`, { headers });
    const res = await fetch(`${base}/api/v1/files`, { headers });
    assert.equal(res.status, 429);
    const seconds = Number(res.headers.get('retry-after'));
    assert.ok(
      seconds > 0 && seconds <= fx.retry.pythonHonoursRetryAfterUpTo,
      `retry-after ${res.headers.get('retry-after')}`,
    );
    const body = (await res.json()) as any;
    assert.equal(typeof body.error, 'string');
    assert.equal(typeof body.retryAfterSeconds, 'number');
  });
});

test('every gap listed in TODO names a case of this file', () => {
  assert.deepEqual(
    Object.keys(TODO).filter((name) => !registered.has(name)),
    [],
  );
});
