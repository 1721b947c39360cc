// Random and hostile input against every source route: never a 5xx, and a refused request
// changes nothing. Seeded, so a failure replays exactly (set FUZZ_SEED to explore others).
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { type Harness, makeHarness } from './helpers/harness.ts';
import { call } from './helpers/http.ts';

const SEED = Number(process.env.FUZZ_SEED ?? 20261121);
const ROUNDS = Number(process.env.FUZZ_ROUNDS ?? 250);

function rng(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const NASTY_STRINGS = [
  '',
  ' ',
  '********',
  '%',
  '_',
  "'",
  '"',
  '\\',
  '\u0000',
  '\u202e',
  'é',
  'e\u0301',
  '../../etc/passwd',
  'http://127.0.0.1/',
  'https://x.example.com/',
  'https://x.example.com',
  's3',
  'azure',
  'google_cloud',
  'image_source',
  '{}',
  '[]',
  'null',
  'a'.repeat(70_000),
  '💥',
  '<script>',
  "' OR 1=1 --",
  '__proto__',
  'constructor',
];
const KEYS = [
  'name',
  'type',
  'configuration',
  'is_active',
  'region',
  'bucket',
  'access_key',
  'secret_key',
  'endpoint',
  'base_url',
  'connection_string',
  'container_name',
  'service_account_json',
  'bucket_name',
  'forward_header',
  'canonical_header',
  '__proto__',
  'constructor',
];

function value(r: () => number, depth = 0): unknown {
  const pick = Math.floor(r() * (depth > 2 ? 6 : 8));
  switch (pick) {
    case 0:
      return null;
    case 1:
      return r() < 0.5;
    case 2:
      return [0, -1, 1.5, 2 ** 53, -(2 ** 63), 1e308, Number.MAX_SAFE_INTEGER][Math.floor(r() * 7)];
    case 3:
    case 4:
      return NASTY_STRINGS[Math.floor(r() * NASTY_STRINGS.length)];
    case 5:
      return `name_${Math.floor(r() * 1e6)}`;
    case 6:
      return Array.from({ length: Math.floor(r() * 3) }, () => value(r, depth + 1));
    default:
      return Object.fromEntries(
        Array.from({ length: Math.floor(r() * 5) }, () => [KEYS[Math.floor(r() * KEYS.length)], value(r, depth + 1)]),
      );
  }
}

const VALID: Record<string, Record<string, unknown>> = {
  s3: { region: 'us-east-1', bucket: 'media-bucket', access_key: 'AKIAFUZZ', secret_key: 'fuzz-secret' },
  azure: {
    connection_string: 'AccountName=a;AccountKey=QUJD;EndpointSuffix=core.windows.net',
    container_name: 'media',
  },
  image_source: { base_url: 'https://x.example.com', forward_header: true },
};

/** A valid body with up to two fields changed to something random: finds the edges. */
function mutated(r: () => number): Record<string, unknown> {
  const type = Object.keys(VALID)[Math.floor(r() * 3)];
  const configuration: Record<string, unknown> = { ...VALID[type] };
  const body: Record<string, unknown> = { name: `n${Math.floor(r() * 1e9)}`, type, configuration };
  for (let m = Math.floor(r() * 3); m > 0; m--) {
    const key = KEYS[Math.floor(r() * KEYS.length)];
    if (r() < 0.5) configuration[key] = value(r);
    else body[key] = value(r);
  }
  return body;
}

describe('hostile input on the sources API', () => {
  let h: Harness;
  let id: string;
  const snapshot = async () =>
    JSON.stringify(await h.services.db.kysely.selectFrom('sources').selectAll().orderBy('id').execute());
  before(async () => {
    h = await makeHarness('sqlite');
    const res = await call(h.app, 'POST', '/api/v1/sources', {
      body: { name: 'anchor', type: 'image_source', configuration: { base_url: 'https://x.example.com' } },
      headers: h.auth,
    });
    id = res.body.data.id;
  });
  after(() => h?.close());

  test(`${ROUNDS} random requests: no 5xx, every answer in the error shape, refusals change nothing (seed ${SEED})`, async () => {
    const r = rng(SEED);
    const statuses = new Map<number, number>();
    for (let i = 0; i < ROUNDS; i++) {
      const kind = Math.floor(r() * 4);
      const before = await snapshot();
      let res: Awaited<ReturnType<typeof call>>;
      if (kind === 0) {
        const body =
          r() < 0.5 ? mutated(r) : r() < 0.7 ? { name: value(r), type: value(r), configuration: value(r) } : value(r);
        res = await call(h.app, 'POST', '/api/v1/sources', { body, headers: h.auth });
      } else if (kind === 1) {
        const body =
          r() < 0.4
            ? { configuration: mutated(r).configuration }
            : r() < 0.7
              ? { name: value(r), configuration: value(r), is_active: value(r) }
              : value(r);
        res = await call(h.app, 'PATCH', `/api/v1/sources/${r() < 0.8 ? id : encodeURIComponent(String(value(r)))}`, {
          body,
          headers: h.auth,
        });
      } else if (kind === 2) {
        const q = new URLSearchParams();
        for (const k of ['page', 'limit', 'search', 'type']) if (r() < 0.5) q.set(k, String(value(r)));
        res = await call(h.app, 'GET', `/api/v1/sources?${q}`, { headers: h.auth });
      } else {
        res = await call(h.app, 'POST', '/api/v1/sources', {
          headers: {
            ...h.auth,
            'content-type': [
              'application/json',
              'text/plain',
              'application/json; charset=latin1',
              'multipart/form-data',
            ][Math.floor(r() * 4)],
          },
          rawBody: String(value(r)),
        });
      }
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      assert.ok(
        res.status < 500,
        `round ${i}: ${res.status} ${res.raw.slice(0, 300)} ${h.logs
          .filter((l) => l.includes('unhandled'))
          .slice(-1)[0]
          ?.slice(0, 1500)}`,
      );
      if (res.status >= 400) {
        assert.equal(res.body?.success, false, `round ${i}: error shape: ${res.status} ${res.raw.slice(0, 300)}`);
        assert.equal(typeof res.body.error, 'string');
        assert.equal(await snapshot(), before, `round ${i}: a refused request changed nothing`);
      }
    }
    // The generator must reach both outcomes, or it is not testing much.
    assert.ok((statuses.get(400) ?? 0) > ROUNDS / 4, JSON.stringify([...statuses]));
    assert.ok((statuses.get(200) ?? 0) + (statuses.get(201) ?? 0) > 10, JSON.stringify([...statuses]));
  });
});

// Issue 15 item 8: a configuration value is checked for what it becomes. base_url becomes a
// request URL and a Link header, endpoint and the connection string's endpoint become request
// URLs, access_key goes into the Authorization header: none may carry a control character (CR
// LF would split a header), and every URL must parse as http(s) as it was written.
describe('control characters in what a source turns into URLs and headers', () => {
  let h: Harness;
  const azureKey = 'QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0NTY3ODk=';
  const VALID_CONFIG: Record<string, Record<string, unknown>> = {
    image_source: { base_url: 'https://images.example.com/catalog', canonical_header: true, forward_header: true },
    s3: {
      region: 'us-east-1',
      bucket: 'media-bucket',
      endpoint: 'https://s3.example.com',
      access_key: 'AKIAEXAMPLE',
      secret_key: 'secret-value',
    },
    azure: {
      connection_string: `DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=${azureKey};EndpointSuffix=core.windows.net`,
      container_name: 'media',
    },
  };
  /** URL-shaped values no source may hold. */
  const HOSTILE_URLS: [string, string][] = [
    ['CR LF and a header (as the issue wrote it)', 'https://a.example.com\r\nX-Evil: 1'],
    ['CR LF and a header without a space', 'https://a.example.com\r\nX-Evil:1'],
    ['a line feed in the path', 'https://a.example.com/p\nq'],
    ['a carriage return in the host', 'https://a.exa\rmple.com'],
    ['a tab', 'https://a.example.com/p\tq'],
    ['NUL', 'https://a.example.com/p\u0000q'],
    ['DEL', 'https://a.example.com/p\u007f'],
    ['NEL (C1)', 'https://a.example.com/p\u0085'],
    ['a space', 'https://a.example.com/a b'],
    ['a leading space', ' https://a.example.com'],
    ['a trailing line feed', 'https://a.example.com\n'],
    ['a line separator', 'https://a.example.com/p\u2028'],
    ['a right-to-left override', 'https://a.example.com/\u202egnp'],
    ['a lone surrogate', 'https://a.example.com/\ud800'],
    ['a javascript: URL', 'javascript:alert(1)'],
    ['a data: URL', 'data:text/plain,hi'],
    ['a URL that does not parse', 'https://'],
  ];
  const snapshot = async () =>
    JSON.stringify(await h.services.db.kysely.selectFrom('sources').selectAll().orderBy('id').execute());
  const assertRefused = async (label: string, send: () => Promise<{ status: number; body: any; raw: string }>) => {
    const before = await snapshot();
    const res = await send();
    assert.equal(res.status, 400, `${label}: ${res.status} ${res.raw.slice(0, 300)}`);
    assert.deepEqual(
      { success: res.body.success, error: res.body.error, errorCode: res.body.errorCode, message: res.body.message },
      {
        success: false,
        error: 'Validation failed',
        errorCode: 'VALIDATION_FAILED',
        message: 'Configuration is invalid for the specified type',
      },
      label,
    );
    assert.equal(await snapshot(), before, `${label}: nothing stored`);
  };
  const ids: Record<string, string> = {};
  let n = 0;
  const create = (type: string, configuration: Record<string, unknown>) =>
    call(h.app, 'POST', '/api/v1/sources', { body: { name: `hostile-${++n}`, type, configuration }, headers: h.auth });
  const patch = (type: string, configuration: Record<string, unknown>) =>
    call(h.app, 'PATCH', `/api/v1/sources/${ids[type]}`, { body: { configuration }, headers: h.auth });

  before(async () => {
    h = await makeHarness('sqlite');
    for (const [type, configuration] of Object.entries(VALID_CONFIG)) {
      const res = await create(type, configuration);
      assert.equal(res.status, 201, res.raw);
      ids[type] = res.body.data.id;
    }
  });
  after(() => h?.close());

  test('image_source base_url and s3 endpoint: refused on create and on update, nothing stored; header fields take no text; clean URLs pass', async () => {
    for (const [label, url] of HOSTILE_URLS) {
      await assertRefused(`create image_source, base_url with ${label}`, () =>
        create('image_source', { ...VALID_CONFIG.image_source, base_url: url }),
      );
      await assertRefused(`update image_source, base_url with ${label}`, () =>
        patch('image_source', { base_url: url }),
      );
      await assertRefused(`create s3, endpoint with ${label}`, () =>
        create('s3', { ...VALID_CONFIG.s3, endpoint: url }),
      );
      await assertRefused(`update s3, endpoint with ${label}`, () => patch('s3', { endpoint: url }));
    }
    // canonical_header may name a header and forward_header list names (sources-compat.test.ts),
    // but only RFC 7230 tokens Stowage may forward: text with CR LF, a space, a NUL, nothing at
    // all or a credential's name is refused, as is forward_header given as text.
    for (const value of ['X-Evil\r\nInjected: 1', 'bad header', 'x\u0000y', '', 'authorization', 'host']) {
      for (const [field, given] of [
        ['canonical_header', value],
        ['forward_header', [value]],
        ['forward_header', value],
      ] as const) {
        await assertRefused(`create image_source, ${field} ${JSON.stringify(given)}`, () =>
          create('image_source', { base_url: 'https://x.example.com', [field]: given }),
        );
        await assertRefused(`update image_source, ${field} ${JSON.stringify(given)}`, () =>
          patch('image_source', { [field]: given }),
        );
      }
    }
    await assertRefused('create image_source, forward_header as text', () =>
      create('image_source', { base_url: 'https://x.example.com', forward_header: 'x-forwarded-host' }),
    );
    // Clean values are still accepted: ports, paths, IPv6 literals, international host names.
    for (const url of [
      'https://images.example.com',
      'http://images.example.com:8080/a/b',
      'https://[2001:db8::1]/x',
      'https://bücher.example/katalog',
      'https://images.example.com/caf%C3%A9',
    ]) {
      const res = await create('image_source', { base_url: url });
      assert.equal(res.status, 201, `${url}: ${res.raw.slice(0, 300)}`);
      const s3 = await create('s3', { ...VALID_CONFIG.s3, endpoint: url });
      assert.equal(s3.status, 201, `${url}: ${s3.raw.slice(0, 300)}`);
    }
  });

  test('azure: a control character anywhere in the connection string, or a BlobEndpoint that is not a clean http(s) URL', async () => {
    const base = VALID_CONFIG.azure.connection_string as string;
    const hostile: [string, string][] = [
      ['CR LF between parts', base.replace(';AccountKey', ';\r\nAccountKey')],
      ['a line feed in AccountName', base.replace('AccountName=acct', 'AccountName=ac\nct')],
      ['a CR LF header after the suffix', `${base}\r\nX-Evil: 1`],
      ['NUL in EndpointSuffix', base.replace('core.windows.net', 'core.windows\u0000.net')],
      ['NEL in AccountName', base.replace('AccountName=acct', 'AccountName=ac\u0085ct')],
      [
        'a protocol that is not http(s)',
        base.replace('DefaultEndpointsProtocol=https', 'DefaultEndpointsProtocol=file'),
      ],
      ...HOSTILE_URLS.filter(([label]) => label !== 'a leading space').map(([label, url]): [string, string] => [
        `BlobEndpoint with ${label}`,
        `BlobEndpoint=${url};SharedAccessSignature=sv=2024&sig=abc`,
      ]),
    ];
    for (const [label, cs] of hostile) {
      await assertRefused(`create azure, ${label}`, () =>
        create('azure', { ...VALID_CONFIG.azure, connection_string: cs }),
      );
      await assertRefused(`update azure, ${label}`, () => patch('azure', { connection_string: cs }));
    }
  });

  test('s3 keys: access_key goes into a header, so printable ASCII only; neither key may hold a control character', async () => {
    for (const [label, value] of [
      ['NUL', 'AKIA\u0000X'],
      ['DEL', 'AKIA\u007f'],
      ['NEL', 'AKIA\u0085X'],
      ['CSI', 'AKIA\u009b'],
      ['a non-ASCII letter', 'AKIAÉ'],
      ['a lone surrogate', 'AKIA\ud800'],
    ]) {
      await assertRefused(`create s3, access_key with ${label}`, () =>
        create('s3', { ...VALID_CONFIG.s3, access_key: value }),
      );
      await assertRefused(`update s3, access_key with ${label}`, () =>
        patch('s3', { access_key: value, secret_key: 'secret-value' }),
      );
      if (label !== 'a non-ASCII letter')
        await assertRefused(`create s3, secret_key with ${label}`, () =>
          create('s3', { ...VALID_CONFIG.s3, secret_key: value }),
        );
    }
  });

  test('google_cloud: client_email and project_id hold no control characters; a deeply nested service_account_json is a 400', async () => {
    const { privateKey } = generateKeyPairSync('rsa', {
      modulusLength: 2048,
      privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
      publicKeyEncoding: { type: 'spki', format: 'pem' },
    });
    const account = (over: Record<string, unknown>) =>
      JSON.stringify({
        type: 'service_account',
        project_id: 'demo',
        client_email: 'svc@demo.iam.gserviceaccount.com',
        private_key: privateKey,
        ...over,
      });
    const ok = await create('google_cloud', { service_account_json: account({}), bucket_name: 'media-bucket' });
    assert.equal(ok.status, 201, ok.raw);
    for (const [label, over] of [
      ['CR LF in client_email', { client_email: 'svc@demo\r\nX-Evil: 1' }],
      ['NUL in client_email', { client_email: 'svc\u0000@demo' }],
      ['a line feed in project_id', { project_id: 'demo\nx' }],
      ['an object as project_id', { project_id: { a: 1 } }],
    ] as [string, Record<string, unknown>][]) {
      await assertRefused(`create google_cloud, ${label}`, () =>
        create('google_cloud', { service_account_json: account(over), bucket_name: 'media-bucket' }),
      );
    }
    const deep = `${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}`;
    const before = await snapshot();
    const res = await call(h.app, 'POST', '/api/v1/sources', {
      rawBody: `{"name":"deep-gcs","type":"google_cloud","configuration":{"bucket_name":"media-bucket","service_account_json":${deep}}}`,
      headers: { ...h.auth, 'content-type': 'application/json' },
    });
    assert.equal(res.status, 400, res.raw.slice(0, 300));
    assert.equal(res.body.message, 'Configuration is invalid for the specified type');
    assert.equal(await snapshot(), before);
  });
});
