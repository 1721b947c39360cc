// The Sources API (docs/api/sources.md), on SQLite and
// on PostgreSQL.
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { DIALECTS, type Harness, makeHarness } from './helpers/harness.ts';
import { call } from './helpers/http.ts';

const { privateKey: PEM } = generateKeyPairSync('rsa', {
  modulusLength: 2048,
  privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  publicKeyEncoding: { type: 'spki', format: 'pem' },
});

const SECRETS = {
  access: 'AKIAEXAMPLESECRETACCESS',
  secret: 'wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY',
  azureKey: 'QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0NTY3ODk=',
};
const SERVICE_ACCOUNT = JSON.stringify({
  type: 'service_account',
  project_id: 'demo',
  client_email: 'svc@demo.iam.gserviceaccount.com',
  private_key: PEM,
});

export const VALID: Record<string, Record<string, unknown>> = {
  s3: { access_key: SECRETS.access, secret_key: SECRETS.secret, region: 'us-east-1', bucket: 'media-bucket' },
  azure: {
    connection_string: `DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=${SECRETS.azureKey};EndpointSuffix=core.windows.net`,
    container_name: 'media',
  },
  google_cloud: { service_account_json: SERVICE_ACCOUNT, bucket_name: 'media-bucket' },
  image_source: { base_url: 'https://images.example.com/assets', canonical_header: true, forward_header: false },
};

const INVALID: [string, string, Record<string, unknown>][] = [
  ['s3 without region', 's3', { bucket: 'b' }],
  ['s3 without bucket', 's3', { region: 'us-east-1' }],
  ['s3 with access_key but no secret_key', 's3', { region: 'us-east-1', bucket: 'bucket', access_key: 'x' }],
  ['s3 with a non-http endpoint', 's3', { region: 'us-east-1', bucket: 'bucket', endpoint: 'ftp://x' }],
  ['s3 with an unknown field', 's3', { region: 'us-east-1', bucket: 'bucket', colour: 'red' }],
  ['s3 with a numeric region', 's3', { region: 5, bucket: 'bucket' }],
  [
    's3 with the mask as a secret',
    's3',
    { region: 'us-east-1', bucket: 'bucket', access_key: '********', secret_key: '********' },
  ],
  ['azure without container_name', 'azure', { connection_string: VALID.azure.connection_string }],
  [
    'azure with a garbage connection string',
    'azure',
    { connection_string: 'not a connection string', container_name: 'media' },
  ],
  [
    'azure with an invalid container name',
    'azure',
    { connection_string: VALID.azure.connection_string, container_name: 'Bad_Name' },
  ],
  [
    'google_cloud with JSON that is not a service account',
    'google_cloud',
    { service_account_json: '{"type":"user"}', bucket_name: 'media-bucket' },
  ],
  [
    'google_cloud with text that is not JSON',
    'google_cloud',
    { service_account_json: 'nope', bucket_name: 'media-bucket' },
  ],
  [
    'google_cloud with a broken private key',
    'google_cloud',
    {
      service_account_json: JSON.stringify({ type: 'service_account', client_email: 'a@b', private_key: 'x' }),
      bucket_name: 'media-bucket',
    },
  ],
  ['google_cloud without bucket_name', 'google_cloud', { service_account_json: SERVICE_ACCOUNT }],
  ['image_source with a trailing slash', 'image_source', { base_url: 'https://images.example.com/' }],
  ['image_source with a non-http URL', 'image_source', { base_url: 'file:///etc/passwd' }],
  ['image_source with credentials in the URL', 'image_source', { base_url: 'https://user:pw@images.example.com' }],
  ['image_source without base_url', 'image_source', { forward_header: true }],
  [
    'image_source with a string forward_header',
    'image_source',
    { base_url: 'https://x.example.com', forward_header: 'yes' },
  ],
  [
    'image_source forwarding authorization',
    'image_source',
    { base_url: 'https://x.example.com', forward_header: ['x-shop-token', 'Authorization'] },
  ],
  [
    'image_source forwarding x-api-key',
    'image_source',
    { base_url: 'https://x.example.com', forward_header: ['x-api-key'] },
  ],
  [
    'image_source forwarding cookies',
    'image_source',
    { base_url: 'https://x.example.com', forward_header: ['cookie'] },
  ],
  ['image_source forwarding host', 'image_source', { base_url: 'https://x.example.com', forward_header: ['host'] }],
  [
    'image_source forwarding a hop-by-hop header',
    'image_source',
    { base_url: 'https://x.example.com', forward_header: ['connection'] },
  ],
  [
    'image_source forwarding a name that is not a token',
    'image_source',
    { base_url: 'https://x.example.com', forward_header: ['x shop'] },
  ],
  [
    'image_source with a canonical_header that is not a token',
    'image_source',
    { base_url: 'https://x.example.com', canonical_header: 'x-forwarded-host\r\nx-evil: 1' },
  ],
  [
    'image_source with authorization as canonical_header',
    'image_source',
    { base_url: 'https://x.example.com', canonical_header: 'authorization' },
  ],
  [
    'image_source with a numeric canonical_header',
    'image_source',
    { base_url: 'https://x.example.com', canonical_header: 1 },
  ],
  ['an unknown type', 'ftp', { base_url: 'https://x.example.com' }],
  ['a missing type', '', { base_url: 'https://x.example.com' }],
];

const ALL_SECRET_VALUES = [SECRETS.access, SECRETS.secret, SECRETS.azureKey, 'BEGIN PRIVATE KEY', 'svc@demo.iam'];
const SECRET_FIELDS = ['access_key', 'secret_key', 'connection_string', 'service_account_json'];

function assertMasked(source: any) {
  for (const f of SECRET_FIELDS)
    if (f in source.configuration) assert.equal(source.configuration[f], '********', `${f} masked`);
  const text = JSON.stringify(source);
  for (const s of ALL_SECRET_VALUES) assert.ok(!text.includes(s), 'no secret value in a response');
}

function assertError(res: { status: number; body: any }, status: number, error: string, message?: string) {
  assert.equal(res.status, status, JSON.stringify(res.body));
  assert.equal(res.body.success, false);
  assert.equal(res.body.error, error);
  if (message !== undefined) assert.equal(res.body.message, message);
  assert.match(res.body.errorCode, /^[A-Z][A-Z0-9_]+$/);
}

for (const dialect of DIALECTS) {
  describe(`sources API on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    let other: Awaited<ReturnType<Harness['services']['workspaces']['create']>>;
    const create = (name: string, type: string, configuration: unknown, headers = h.auth) =>
      call(h.app, 'POST', '/api/v1/sources', { body: { name, type, configuration }, headers });

    before(async () => {
      h = await makeHarness(dialect.name);
      other = await h.services.workspaces.create('Other');
    });
    after(() => h?.close());

    test("two PATCHes at once each keep the other's change (a key rotation is never undone)", async () => {
      for (let round = 0; round < 12; round++) {
        const made = await create(`race-${round}`, 's3', {
          access_key: 'AKOLD',
          secret_key: 'old-secret',
          region: 'r0',
          bucket: 'bucket-0',
        });
        assert.equal(made.status, 201, JSON.stringify(made.body));
        const id = made.body.data.id;
        const patch = (configuration: unknown) =>
          call(h.app, 'PATCH', `/api/v1/sources/${id}`, { body: { configuration }, headers: h.auth });
        const answers = await Promise.all([
          patch({ access_key: 'AKNEW', secret_key: 'new-secret' }),
          patch({ region: 'r1' }),
          call(h.app, 'PATCH', `/api/v1/sources/${id}`, { body: { is_active: false }, headers: h.auth }),
        ]);
        for (const a of answers) assert.equal(a.status, 200, JSON.stringify(a.body));
        const row = await h.services.db.kysely
          .selectFrom('sources')
          .selectAll()
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
        const config = h.services.sources.configuration(row);
        assert.deepEqual(
          [config.access_key, config.secret_key, config.region, row.is_active],
          ['AKNEW', 'new-secret', 'r1', 0],
          `round ${round}`,
        );
      }
    });

    test('create answers 201 {success, data} for every type, with secrets masked', async () => {
      for (const [type, configuration] of Object.entries(VALID)) {
        const res = await create(`create-${type}`, type, configuration);
        assert.equal(res.status, 201, JSON.stringify(res.body));
        assert.equal(res.body.success, true);
        const s = res.body.data;
        assert.match(s.id, /^[0-9a-f-]{36}$/);
        assert.equal(s.name, `create-${type}`);
        assert.equal(s.type, type);
        assert.equal(s.is_active, true);
        assert.match(s.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
        assert.equal(s.updated_at, s.created_at);
        assert.deepEqual(Object.keys(s).sort(), [
          'configuration',
          'created_at',
          'id',
          'is_active',
          'name',
          'type',
          'updated_at',
        ]);
        assertMasked(s);
        for (const [k, v] of Object.entries(configuration)) {
          if (!SECRET_FIELDS.includes(k)) assert.deepEqual(s.configuration[k], v, `${k} shown as stored`);
        }
      }
    });

    test('s3 keys are optional together, and endpoint is accepted', async () => {
      const res = await create('public-bucket', 's3', {
        region: 'eu-west-1',
        bucket: 'open-data',
        endpoint: 'https://s3.example.com',
      });
      assert.equal(res.status, 201);
      assert.deepEqual(res.body.data.configuration, {
        region: 'eu-west-1',
        bucket: 'open-data',
        endpoint: 'https://s3.example.com',
      });
    });

    test('image_source takes a header name for canonical_header and a list for forward_header, stored and shown lower-cased', async () => {
      const res = await create('web-names', 'image_source', {
        base_url: 'https://shop.example.com',
        canonical_header: 'X-Forwarded-Host',
        forward_header: ['X-Shop-Token', 'Accept-Language'],
      });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      const expected = {
        base_url: 'https://shop.example.com',
        canonical_header: 'x-forwarded-host',
        forward_header: ['x-shop-token', 'accept-language'],
      };
      assert.deepEqual(res.body.data.configuration, expected);
      const got = await call(h.app, 'GET', `/api/v1/sources/${res.body.data.id}`, { headers: h.auth });
      assert.equal(got.status, 200, JSON.stringify(got.body));
      assert.deepEqual(got.body.data.configuration, expected);
      const patched = await call(h.app, 'PATCH', `/api/v1/sources/${res.body.data.id}`, {
        body: { configuration: { forward_header: true, canonical_header: false } },
        headers: h.auth,
      });
      assert.equal(patched.status, 200, JSON.stringify(patched.body));
      assert.deepEqual(patched.body.data.configuration, {
        base_url: 'https://shop.example.com',
        canonical_header: false,
        forward_header: true,
      });
    });

    test('google_cloud accepts the service account as an object too', async () => {
      const res = await create('gcs-object', 'google_cloud', {
        service_account_json: JSON.parse(SERVICE_ACCOUNT),
        bucket_name: 'media-bucket',
      });
      assert.equal(res.status, 201);
      assertMasked(res.body.data);
    });

    for (const [label, type, configuration] of INVALID) {
      test(`create refuses ${label}: 400 Validation failed / Configuration is invalid..., nothing stored`, async () => {
        const before = await h.services.sources.list(h.ws.workspace_id, { page: 1, limit: 100 });
        const res = await call(h.app, 'POST', '/api/v1/sources', {
          body: type ? { name: 'refused', type, configuration } : { name: 'refused', configuration },
          headers: h.auth,
        });
        assertError(res, 400, 'Validation failed', 'Configuration is invalid for the specified type');
        const afterList = await h.services.sources.list(h.ws.workspace_id, { page: 1, limit: 100 });
        assert.equal(afterList.meta.total, before.meta.total);
      });
    }

    test('create refuses a configuration that is not an object, or missing', async () => {
      for (const configuration of ['text', [1], null, 42]) {
        assertError(
          await create('bad-config', 'image_source', configuration),
          400,
          'Validation failed',
          'Configuration is invalid for the specified type',
        );
      }
      const res = await call(h.app, 'POST', '/api/v1/sources', {
        body: { name: 'no-config', type: 's3' },
        headers: h.auth,
      });
      assertError(res, 400, 'Validation failed', 'Configuration is invalid for the specified type');
    });

    test('create refuses bad names with 400 Validation failed', async () => {
      for (const name of ['', 'has space', 'dot.name', 'slash/name', 'ünicode', 'x'.repeat(65), "quote's"]) {
        assertError(await create(name, 'image_source', VALID.image_source), 400, 'Validation failed');
      }
      assertError(
        await call(h.app, 'POST', '/api/v1/sources', {
          body: { type: 'image_source', configuration: VALID.image_source },
          headers: h.auth,
        }),
        400,
        'Validation failed',
      );
      assertError(
        await call(h.app, 'POST', '/api/v1/sources', { body: [], headers: h.auth }),
        400,
        'Validation failed',
      );
    });

    test('a duplicate name answers 409 with the documented text; other workspaces may reuse it', async () => {
      assert.equal((await create('dup', 'image_source', VALID.image_source)).status, 201);
      assertError(await create('dup', 's3', VALID.s3), 409, 'Origin name already exists in this workspace');
      const res = await create('dup', 'image_source', VALID.image_source, { 'x-api-key': other.private_key });
      assert.equal(res.status, 201);
    });

    describe('listing', () => {
      let ws: Awaited<ReturnType<Harness['services']['workspaces']['create']>>;
      const list = (query: string, key = ws.private_key) =>
        call(h.app, 'GET', `/api/v1/sources${query}`, { headers: { 'x-api-key': key } });
      before(async () => {
        ws = await h.services.workspaces.create('Listing');
        const names = ['alpha', 'Beta_one', 'gamma-two', 'delta_three', 'EPSILON', 'zeta100', 'eta_'];
        for (const [i, name] of names.entries()) {
          const type = i % 2 === 0 ? 'image_source' : 's3';
          const res = await create(name, type, VALID[type], { authorization: `Bearer ${ws.private_key}` });
          assert.equal(res.status, 201);
          // Distinct timestamps, so "newest first" is decided by time, not by the id tie-break.
          await new Promise((r) => setTimeout(r, 3));
        }
      });

      test('defaults: page 1, limit 10, newest first, meta with hasMore', async () => {
        const res = await list('');
        assert.equal(res.status, 200);
        assert.deepEqual(Object.keys(res.body).sort(), ['meta', 'sources']);
        assert.deepEqual(res.body.meta, { page: 1, limit: 10, total: 7, hasMore: false });
        const created = res.body.sources.map((s: any) => `${s.created_at}|${s.id}`);
        assert.deepEqual(created, [...created].sort().reverse(), 'created_at descending, ties by id descending');
        assert.equal(res.body.sources[0].name, 'eta_');
        res.body.sources.forEach(assertMasked);
      });

      test('pages split the list with no repeats or gaps', async () => {
        const seen: string[] = [];
        for (let page = 1; page <= 4; page++) {
          const res = await list(`?page=${page}&limit=2`);
          assert.equal(res.status, 200);
          assert.equal(res.body.meta.hasMore, page < 4);
          assert.equal(res.body.meta.total, 7);
          seen.push(...res.body.sources.map((s: any) => s.id));
        }
        assert.equal(seen.length, 7);
        assert.equal(new Set(seen).size, 7);
      });

      test('ties on created_at are broken by id', async () => {
        const same = '2020-01-01T00:00:00.000Z';
        await h.services.db.kysely
          .updateTable('sources')
          .set({ created_at: same })
          .where('workspace_id', '=', ws.workspace_id)
          .execute();
        const a = await list('?limit=3&page=1');
        const b = await list('?limit=3&page=2');
        const c = await list('?limit=3&page=3');
        const ids = [...a.body.sources, ...b.body.sources, ...c.body.sources].map((s: any) => s.id);
        assert.deepEqual(ids, [...ids].sort().reverse());
      });

      test('a page past the end is empty with hasMore false', async () => {
        const res = await list('?page=9&limit=5');
        assert.equal(res.status, 200);
        assert.deepEqual(res.body.sources, []);
        assert.deepEqual(res.body.meta, { page: 9, limit: 5, total: 7, hasMore: false });
      });

      test('limit 1 and 100 are accepted; 0, 101, -1 and text are 400', async () => {
        assert.equal((await list('?limit=1')).body.sources.length, 1);
        assert.equal((await list('?limit=100')).body.meta.limit, 100);
        for (const q of [
          '?limit=0',
          '?limit=101',
          '?limit=-1',
          '?limit=ten',
          '?page=0',
          '?page=-2',
          '?page=x',
          '?limit=1.5',
          '?page=9007199254740993',
          '?page=1e400',
        ]) {
          assertError(await list(q), 400, 'Validation failed');
        }
      });

      test('search is a case-insensitive substring match', async () => {
        const names = async (q: string) => (await list(q)).body.sources.map((s: any) => s.name).sort();
        assert.deepEqual(await names('?search=BETA'), ['Beta_one']);
        assert.deepEqual(await names('?search=epsilon'), ['EPSILON']);
        assert.deepEqual(await names('?search=ta'), ['Beta_one', 'delta_three', 'eta_', 'zeta100']);
      });

      test('search treats %, _ and quotes literally', async () => {
        const names = async (q: string) =>
          (await list(`?search=${encodeURIComponent(q)}`)).body.sources.map((s: any) => s.name).sort();
        assert.deepEqual(await names('_'), ['Beta_one', 'delta_three', 'eta_']);
        assert.deepEqual(
          await names('a_'),
          ['Beta_one', 'delta_three', 'eta_'].filter((n) => n.toLowerCase().includes('a_')),
        );
        assert.deepEqual(await names('%'), []);
        assert.deepEqual(await names('a%e'), []);
        assert.deepEqual(await names("'"), []);
        assert.deepEqual(await names("' OR '1'='1"), []);
        assert.deepEqual(await names('"'), []);
        assert.deepEqual(await names('\\'), []);
        const res = await list(`?search=${encodeURIComponent('_')}&limit=1`);
        assert.equal(res.body.meta.total, 3);
      });

      test('type filters; an unknown type is 400', async () => {
        const res = await list('?type=s3');
        assert.equal(res.body.meta.total, 3);
        assert.ok(res.body.sources.every((s: any) => s.type === 's3'));
        assert.equal((await list('?type=azure')).body.meta.total, 0);
        assertError(await list('?type=ftp'), 400, 'Validation failed');
      });

      test('only the caller workspace is listed', async () => {
        const res = await list('?limit=100', other.private_key);
        assert.ok(res.body.sources.every((s: any) => s.name === 'dup'));
      });
    });

    describe('get, update, delete', () => {
      let id: string;
      before(async () => {
        const res = await create('editable', 's3', { ...VALID.s3, endpoint: 'https://s3.example.com' });
        id = res.body.data.id;
      });

      test('get answers {success, data} with secrets masked', async () => {
        const res = await call(h.app, 'GET', `/api/v1/sources/${id}`, { headers: h.auth });
        assert.equal(res.status, 200);
        assert.equal(res.body.success, true);
        assert.equal(res.body.data.id, id);
        assertMasked(res.body.data);
      });

      test('PATCH merges configuration; masked secrets keep their stored values', async () => {
        const before = (await call(h.app, 'GET', `/api/v1/sources/${id}`, { headers: h.auth })).body.data;
        const res = await call(h.app, 'PATCH', `/api/v1/sources/${id}`, {
          body: { configuration: { region: 'eu-central-1', access_key: '********', secret_key: '********' } },
          headers: h.auth,
        });
        assert.equal(res.status, 200, JSON.stringify(res.body));
        assert.equal(res.body.success, true);
        const s = res.body.data;
        assert.deepEqual(s.configuration, {
          region: 'eu-central-1',
          bucket: 'media-bucket',
          endpoint: 'https://s3.example.com',
          access_key: '********',
          secret_key: '********',
        });
        assert.ok(s.updated_at > before.updated_at, 'updated_at moves forward');
        assert.equal(s.created_at, before.created_at);
        assertMasked(s);
        const row = await h.services.db.kysely
          .selectFrom('sources')
          .selectAll()
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
        const full = h.services.sources.configuration(row);
        assert.equal(full.access_key, SECRETS.access);
        assert.equal(full.secret_key, SECRETS.secret);
        assert.equal(full.region, 'eu-central-1');
      });

      test('PATCH with a new secret replaces it; null removes an optional field', async () => {
        const res = await call(h.app, 'PATCH', `/api/v1/sources/${id}`, {
          body: { configuration: { secret_key: 'new-secret-value-123', endpoint: null } },
          headers: h.auth,
        });
        assert.equal(res.status, 200);
        assert.equal(res.body.data.configuration.secret_key, '********');
        assert.equal('endpoint' in res.body.data.configuration, false);
        const row = await h.services.db.kysely
          .selectFrom('sources')
          .selectAll()
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
        const full = h.services.sources.configuration(row);
        assert.equal(full.secret_key, 'new-secret-value-123');
        assert.equal(full.access_key, SECRETS.access);
      });

      test('PATCH refuses a merge that breaks the configuration, and changes nothing', async () => {
        const before = (await call(h.app, 'GET', `/api/v1/sources/${id}`, { headers: h.auth })).body.data;
        for (const configuration of [{ region: null }, { bucket: '' }, { unknown: 'x' }, { secret_key: null }]) {
          assertError(
            await call(h.app, 'PATCH', `/api/v1/sources/${id}`, { body: { configuration }, headers: h.auth }),
            400,
            'Validation failed',
            'Configuration is invalid for the specified type',
          );
        }
        const afterGet = (await call(h.app, 'GET', `/api/v1/sources/${id}`, { headers: h.auth })).body.data;
        assert.deepEqual(afterGet, before);
      });

      test('PATCH renames with the name rule and uniqueness; type cannot change', async () => {
        assertError(
          await call(h.app, 'PATCH', `/api/v1/sources/${id}`, { body: { name: 'bad name' }, headers: h.auth }),
          400,
          'Validation failed',
        );
        assert.equal((await create('taken', 'image_source', VALID.image_source)).status, 201);
        assertError(
          await call(h.app, 'PATCH', `/api/v1/sources/${id}`, { body: { name: 'taken' }, headers: h.auth }),
          409,
          'Origin name already exists in this workspace',
        );
        assertError(
          await call(h.app, 'PATCH', `/api/v1/sources/${id}`, { body: { type: 'azure' }, headers: h.auth }),
          400,
          'Validation failed',
        );
        const res = await call(h.app, 'PATCH', `/api/v1/sources/${id}`, { body: { name: 'renamed' }, headers: h.auth });
        assert.equal(res.status, 200);
        assert.equal(res.body.data.name, 'renamed');
        const same = await call(h.app, 'PATCH', `/api/v1/sources/${id}`, {
          body: { name: 'renamed' },
          headers: h.auth,
        });
        assert.equal(same.status, 200, 'keeping its own name is not a clash');
      });

      test('PATCH is_active toggles the flag; a non-boolean is 400', async () => {
        const off = await call(h.app, 'PATCH', `/api/v1/sources/${id}`, {
          body: { is_active: false },
          headers: h.auth,
        });
        assert.equal(off.body.data.is_active, false);
        assertError(
          await call(h.app, 'PATCH', `/api/v1/sources/${id}`, { body: { is_active: 'no' }, headers: h.auth }),
          400,
          'Validation failed',
        );
        const on = await call(h.app, 'PATCH', `/api/v1/sources/${id}`, { body: { is_active: true }, headers: h.auth });
        assert.equal(on.body.data.is_active, true);
      });

      test('unknown, malformed and other-workspace ids are 404 Source not found on every route', async () => {
        const foreign = (
          await create('foreign', 'image_source', VALID.image_source, { 'x-api-key': other.private_key })
        ).body.data.id;
        for (const bad of ['00000000-0000-4000-8000-000000000000', 'not-a-uuid', foreign, '%27%20OR%201%3D1']) {
          assertError(await call(h.app, 'GET', `/api/v1/sources/${bad}`, { headers: h.auth }), 404, 'Source not found');
          assertError(
            await call(h.app, 'PATCH', `/api/v1/sources/${bad}`, { body: { name: 'steal' }, headers: h.auth }),
            404,
            'Source not found',
          );
          assertError(
            await call(h.app, 'DELETE', `/api/v1/sources/${bad}`, { headers: h.auth }),
            404,
            'Source not found',
          );
          assertError(
            await call(h.app, 'POST', `/api/v1/sources/${bad}/test`, { headers: h.auth }),
            404,
            'Source not found',
          );
        }
        const still = await call(h.app, 'GET', `/api/v1/sources/${foreign}`, {
          headers: { 'x-api-key': other.private_key },
        });
        assert.equal(still.body.data.name, 'foreign', 'the other workspace source is untouched');
      });

      test('ids match case-insensitively and a trailing slash is accepted', async () => {
        const res = await call(h.app, 'GET', `/api/v1/sources/${id.toUpperCase()}/`, { headers: h.auth });
        assert.equal(res.status, 200);
        assert.equal(res.body.data.id, id);
        assert.equal((await call(h.app, 'GET', '/api/v1/sources/', { headers: h.auth })).status, 200);
      });

      test('DELETE answers {success:true}; the source is gone', async () => {
        const victim = (await create('victim', 'image_source', VALID.image_source)).body.data.id;
        const res = await call(h.app, 'DELETE', `/api/v1/sources/${victim.toUpperCase()}`, { headers: h.auth });
        assert.equal(res.status, 200);
        assert.deepEqual(res.body, { success: true });
        assertError(
          await call(h.app, 'GET', `/api/v1/sources/${victim}`, { headers: h.auth }),
          404,
          'Source not found',
        );
        assertError(
          await call(h.app, 'DELETE', `/api/v1/sources/${victim}`, { headers: h.auth }),
          404,
          'Source not found',
        );
      });
    });

    describe('authentication', () => {
      let sourceId: string;
      const routes = () =>
        [
          ['POST', '/api/v1/sources', { name: 'x', type: 'image_source', configuration: VALID.image_source }],
          ['GET', '/api/v1/sources', undefined],
          ['GET', `/api/v1/sources/${sourceId}`, undefined],
          ['PATCH', `/api/v1/sources/${sourceId}`, { name: 'y' }],
          ['DELETE', `/api/v1/sources/${sourceId}`, undefined],
          ['POST', `/api/v1/sources/${sourceId}/test`, undefined],
        ] as const;
      before(async () => {
        sourceId = (await create('auth-target', 'image_source', VALID.image_source)).body.data.id;
      });

      test('a missing or invalid key is 401 with the documented texts (list sources has its own)', async () => {
        const badHeaders: Record<string, string>[] = [
          {},
          { authorization: 'Bearer nope' },
          { authorization: 'Basic dXNlcjpwYXNz' },
          { authorization: 'Bearer' },
          { 'x-api-key': '' },
          { 'x-api-key': `stw_sk_${'A'.repeat(43)}` },
          { 'x-api-key': `${h.ws.private_key}x` },
          { authorization: `Bearer ${'x'.repeat(5000)}` },
        ];
        for (const headers of badHeaders) {
          for (const [method, url, body] of routes()) {
            const res = await call(h.app, method, url, { body, headers });
            if (method === 'GET' && url === '/api/v1/sources') {
              assertError(
                res,
                401,
                'Invalid API key.',
                'The provided API key is invalid, inactive, or has been deleted',
              );
            } else {
              assertError(res, 401, 'Unauthorized', 'Invalid or missing API key');
            }
          }
        }
      });

      test('both Authorization: Bearer and x-api-key are accepted', async () => {
        assert.equal(
          (
            await call(h.app, 'GET', `/api/v1/sources/${sourceId}`, {
              headers: { authorization: `Bearer ${h.ws.private_key}` },
            })
          ).status,
          200,
        );
        assert.equal(
          (await call(h.app, 'GET', `/api/v1/sources/${sourceId}`, { headers: { 'x-api-key': h.ws.private_key } }))
            .status,
          200,
        );
        assert.equal(
          (
            await call(h.app, 'GET', `/api/v1/sources/${sourceId}`, {
              headers: { authorization: `bearer   ${h.ws.private_key}` },
            })
          ).status,
          200,
        );
      });

      test('a public key is 403 on every source route and changes nothing', async () => {
        for (const headers of [
          { authorization: `Bearer ${h.ws.public_key}` },
          { 'x-api-key': h.ws.public_key },
        ] as Record<string, string>[]) {
          for (const [method, url, body] of routes()) {
            const res = await call(h.app, method, url, { body, headers });
            assertError(res, 403, 'Forbidden');
          }
        }
        const res = await call(h.app, 'GET', `/api/v1/sources/${sourceId}`, { headers: h.auth });
        assert.equal(res.body.data.name, 'auth-target');
      });

      test('a revoked key is refused at once', async () => {
        const key = await h.services.workspaces.createKey(h.ws.workspace_id, 'private');
        const headers = { authorization: `Bearer ${key.key}` };
        assert.equal((await call(h.app, 'GET', '/api/v1/sources', { headers })).status, 200);
        await h.services.workspaces.revokeKey(key.id);
        assertError(await call(h.app, 'GET', '/api/v1/sources', { headers }), 401, 'Invalid API key.');
        assertError(await call(h.app, 'GET', `/api/v1/sources/${sourceId}`, { headers }), 401, 'Unauthorized');
      });
    });

    test('the database holds no secret in plaintext, and no log line carries one', async () => {
      const rows = await h.services.db.kysely.selectFrom('sources').selectAll().execute();
      assert.ok(rows.length > 5);
      const dump = JSON.stringify(rows);
      for (const s of [...ALL_SECRET_VALUES, 'new-secret-value-123', 'PRIVATE KEY'])
        assert.ok(!dump.includes(s), `no plaintext ${s.slice(0, 8)}… in the sources table`);
      for (const row of rows) if (row.secrets) assert.match(row.secrets, /^v1\.[0-9a-f]{12}\.[\w-]+\.[\w-]+\.[\w-]+$/);
      const keys = JSON.stringify(await h.services.db.kysely.selectFrom('api_keys').selectAll().execute());
      assert.ok(!keys.includes(h.ws.private_key) && !keys.includes(h.ws.public_key), 'api keys stored only as hashes');
      const ws = JSON.stringify(await h.services.db.kysely.selectFrom('workspaces').selectAll().execute());
      assert.ok(!ws.includes(h.ws.webhook_secret), 'webhook secret sealed');
      const logs = h.logs.join('\n');
      assert.ok(h.logs.length > 50, 'requests were logged');
      for (const s of [
        ...ALL_SECRET_VALUES,
        'new-secret-value-123',
        h.ws.private_key,
        h.ws.public_key,
        other.private_key,
      ]) {
        assert.ok(!logs.includes(s), `no ${s.slice(0, 10)}… in the logs`);
      }
    });
  });
}
