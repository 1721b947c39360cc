// Random and hostile input against every source route: never a 5xx, and a refused request
// changes nothing. Seeded, so a failure replays exactly (set FUZZ_SEED to explore others).
import assert from 'node:assert/strict';
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
  '', ' ', '********', '%', '_', "'", '"', '\\', '\u0000', '\u202e', 'é', 'e\u0301', '../../etc/passwd', 'http://127.0.0.1/', 'https://x.example.com/',
  'https://x.example.com', 's3', 'azure', 'google_cloud', 'image_source', '{}', '[]', 'null', 'a'.repeat(70_000), '💥', '<script>', "' OR 1=1 --", '__proto__', 'constructor',
];
const KEYS = ['name', 'type', 'configuration', 'is_active', 'region', 'bucket', 'access_key', 'secret_key', 'endpoint', 'base_url', 'connection_string', 'container_name', 'service_account_json', 'bucket_name', 'forward_header', 'canonical_header', '__proto__', 'constructor'];

function value(r: () => number, depth = 0): unknown {
  const pick = Math.floor(r() * (depth > 2 ? 6 : 8));
  switch (pick) {
    case 0: return null;
    case 1: return r() < 0.5;
    case 2: return [0, -1, 1.5, 2 ** 53, -(2 ** 63), 1e308, Number.MAX_SAFE_INTEGER][Math.floor(r() * 7)];
    case 3:
    case 4: return NASTY_STRINGS[Math.floor(r() * NASTY_STRINGS.length)];
    case 5: return `name_${Math.floor(r() * 1e6)}`;
    case 6: return Array.from({ length: Math.floor(r() * 3) }, () => value(r, depth + 1));
    default: return Object.fromEntries(Array.from({ length: Math.floor(r() * 5) }, () => [KEYS[Math.floor(r() * KEYS.length)], value(r, depth + 1)]));
  }
}

const VALID: Record<string, Record<string, unknown>> = {
  s3: { region: 'us-east-1', bucket: 'media-bucket', access_key: 'AKIAFUZZ', secret_key: 'fuzz-secret' },
  azure: { connection_string: 'AccountName=a;AccountKey=QUJD;EndpointSuffix=core.windows.net', container_name: 'media' },
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
  const snapshot = async () => JSON.stringify(await h.services.db.kysely.selectFrom('sources').selectAll().orderBy('id').execute());
  before(async () => {
    h = await makeHarness('sqlite');
    const res = await call(h.app, 'POST', '/api/v1/sources', { body: { name: 'anchor', type: 'image_source', configuration: { base_url: 'https://x.example.com' } }, headers: h.auth });
    id = res.body.data.id;
  });
  after(() => h?.close());

  test(`${ROUNDS} random requests: no 5xx, every answer in the error shape, refusals change nothing (seed ${SEED})`, async () => {
    const r = rng(SEED);
    const statuses = new Map<number, number>();
    for (let i = 0; i < ROUNDS; i++) {
      const kind = Math.floor(r() * 4);
      const before = await snapshot();
      let res;
      if (kind === 0) {
        const body = r() < 0.5 ? mutated(r) : r() < 0.7 ? { name: value(r), type: value(r), configuration: value(r) } : value(r);
        res = await call(h.app, 'POST', '/api/v1/sources', { body, headers: h.auth });
      } else if (kind === 1) {
        const body = r() < 0.4 ? { configuration: mutated(r).configuration } : r() < 0.7 ? { name: value(r), configuration: value(r), is_active: value(r) } : value(r);
        res = await call(h.app, 'PATCH', `/api/v1/sources/${r() < 0.8 ? id : encodeURIComponent(String(value(r)))}`, { body, headers: h.auth });
      } else if (kind === 2) {
        const q = new URLSearchParams();
        for (const k of ['page', 'limit', 'search', 'type']) if (r() < 0.5) q.set(k, String(value(r)));
        res = await call(h.app, 'GET', `/api/v1/sources?${q}`, { headers: h.auth });
      } else {
        res = await call(h.app, 'POST', '/api/v1/sources', { headers: { ...h.auth, 'content-type': ['application/json', 'text/plain', 'application/json; charset=latin1', 'multipart/form-data'][Math.floor(r() * 4)] }, rawBody: String(value(r)) });
      }
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      assert.ok(res.status < 500, `round ${i}: ${res.status} ${res.raw.slice(0, 300)} ${h.logs.filter((l) => l.includes('unhandled')).slice(-1)[0]?.slice(0, 1500)}`);
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
