// bench/api: requests/s and p99 latency of two API calls at 50 connections, on SQLite and on
// PostgreSQL, against a bare Fastify route measured in the same run. Prints; asserts nothing.
//
//   npm run bench:api            (PostgreSQL from STOWAGE_BENCH_DATABASE_URL, default local)
//
// No targets: issue 6 asked for 0.3x (start) and 0.5x (list) of a bare hello-world route, but a
// bare route answering the same bodies reaches only a quarter to two fifths of that route here,
// so those ratios measured JSON and the database, not Stowage (retired in issue 25). The table
// prints both ratios for reading: against the minimal route and against the same-body route.
//
// Then the signing of a start's 200 part URLs on its own, against one HMAC (local disk) or one
// getSignedUrl (S3) per part measured in the same run: the straightforward way, which start
// used before.
import { createHmac, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { UploadPartCommand } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import autocannon from 'autocannon';
import Fastify from 'fastify';
import { buildApp } from '../src/app.ts';
import { PartUrlSigner } from '../src/crypto/part-url.ts';
import { createServices } from '../src/services/container.ts';
import { S3Storage } from '../src/storage/s3.ts';
import { freshPostgres, testConfig } from '../test/helpers/harness.ts';
import { fmt } from './lib.ts';

const DURATION = Number(process.env.BENCH_DURATION_S ?? 10);
const CONNECTIONS = 50;
const PG_ADMIN = process.env.STOWAGE_BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

interface Result {
  rps: number;
  p99: number;
  errors: number;
}

async function load(opts: autocannon.Options): Promise<Result> {
  const r = await autocannon({ connections: CONNECTIONS, duration: DURATION, ...opts });
  return { rps: r.requests.average, p99: r.latency.p99, errors: r.errors + r.non2xx };
}

interface Measured {
  start: Result;
  list: Result;
  /** One real answer of each, for the same-body baseline. */
  startBody: unknown;
  listBody: unknown;
  /** The same answers from routes added to Stowage's app, which do no work: its hooks' share. */
  app?: [string, Result][];
}

async function measure(databaseUrl: string | undefined, appRoutes = false): Promise<Measured> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-api-'));
  const services = await createServices(testConfig(dir, { databaseUrl, logLevel: 'silent' }));
  const app = await buildApp(services, { logger: false });
  const answers: { start?: unknown; list?: unknown } = {};
  if (appRoutes) {
    app.get('/bench/start', async () => answers.start);
    app.get('/bench/start-key', { config: { auth: 'any' } }, async () => answers.start);
    app.get('/bench/list', async () => answers.list);
    app.get('/bench/list-key', { config: { auth: 'private' } }, async () => answers.list);
  }
  const base = await app.listen({ host: '127.0.0.1', port: 0 });
  (services.multipart as any).settings.publicUrl = base;
  const ws = await services.workspaces.create('bench');
  for (let i = 0; i < 25; i++)
    await services.sources.create(ws.workspace_id, {
      name: `src-${i}`,
      type: 's3',
      configuration: { region: 'us-east-1', bucket: `bucket-${i}`, access_key: 'AKIA', secret_key: 'secret' },
    });
  // Each request is sent once to keep a real answer (for the same-body baseline), then loaded.
  const startRequest = {
    url: `${base}/api/v1/multipart/start`,
    method: 'POST' as const,
    headers: { 'x-api-key': ws.public_key, 'content-type': 'application/json' },
    // 200 parts of 8 MiB.
    body: JSON.stringify({ file_name: 'bench.bin', size: 200 * 8 * 1024 * 1024, format: 'application/octet-stream' }),
  };
  const listRequest = { url: `${base}/api/v1/sources?limit=10`, headers: { 'x-api-key': ws.private_key } };
  const startBody = await (await fetch(startRequest.url, startRequest)).json();
  const listBody = await (await fetch(listRequest.url, listRequest)).json();
  const start = await load(startRequest);
  const list = await load(listRequest);
  let appRuns: [string, Result][] | undefined;
  if (appRoutes) {
    Object.assign(answers, { start: startBody, list: listBody });
    appRuns = [];
    for (const [label, path, key] of [
      ['  same body as start', 'start', undefined],
      ['    and the key checked', 'start-key', ws.public_key],
      ['  same body as list', 'list', undefined],
      ['    and the key checked', 'list-key', ws.private_key],
    ] as const) {
      appRuns.push([label, await load({ url: `${base}/bench/${path}`, headers: key ? { 'x-api-key': key } : {} })]);
    }
  }
  await app.close();
  await services.close();
  rmSync(dir, { recursive: true, force: true });
  return { start, list, startBody, listBody, app: appRuns };
}

/** A bare Fastify route answering `body` (serialized per request, as any route does). */
async function bareRoute(body: unknown): Promise<Result> {
  const bare = Fastify({ logger: false });
  bare.get('/x', async () => body);
  const url = await bare.listen({ host: '127.0.0.1', port: 0 });
  const r = await load({ url: `${url}/x` });
  await bare.close();
  return r;
}

/** Mean µs per call of `f`, after a warm-up; calls run one after another. */
async function perCall(f: () => unknown, minMs = 1500): Promise<number> {
  for (let i = 0; i < 20; i++) await f();
  let n = 0;
  const t0 = performance.now();
  while (performance.now() - t0 < minMs) {
    await f();
    n++;
  }
  return ((performance.now() - t0) * 1000) / n;
}

/** Signing the part URLs of one 200-part start (no HTTP, no database). */
async function signing(): Promise<void> {
  const PARTS = 200;
  const lengths = Array(PARTS).fill(8 * 1024 * 1024);
  const session = 'S'.repeat(24);
  const expires = Math.floor(Date.now() / 1000) + 3600;
  const master = randomBytes(32);
  const key = createHmac('sha256', master).update('stowage/part-url/v1').digest();
  const signer = new PartUrlSigner(master);
  const perPartHmac = await perCall(() => {
    for (let n = 1; n <= PARTS; n++)
      createHmac('sha256', key)
        .update(`${session}\n${n}\n${lengths[n - 1]}\n${expires}`)
        .digest('base64url');
  });
  const batched = await perCall(() => signer.urls('http://127.0.0.1:8080', session, lengths, expires));
  // Presigning needs no server: nothing is sent.
  const s3 = new S3Storage({
    endpoint: 'http://127.0.0.1:9',
    region: 'us-east-1',
    bucket: 'bench',
    accessKeyId: 'AKIA',
    secretAccessKey: 'secret',
    forcePathStyle: true,
  });
  const parts = lengths.map((length, i) => ({ partNumber: i + 1, length }));
  const perPartSdk = await perCall(async () => {
    for (const p of parts) {
      await getSignedUrl(
        s3.client,
        new UploadPartCommand({
          Bucket: 'bench',
          Key: 'ws/key.bin',
          UploadId: 'upload-1',
          PartNumber: p.partNumber,
          ContentLength: p.length,
        }),
        {
          expiresIn: 3600,
          signableHeaders: new Set(['content-length']),
        },
      );
    }
  });
  const presigned = await perCall(() => s3.presignParts('ws/key.bin', 'upload-1', parts, 3600));
  console.log(
    `\nsigning the ${PARTS} part URLs of one start (µs per start, one start after another; x = baseline / ours)`,
  );
  console.log(`${'local: one HMAC per part'.padEnd(40)} ${fmt(perPartHmac, 0).padStart(8)}`);
  console.log(
    `${'local: batched (PartUrlSigner.urls)'.padEnd(40)} ${fmt(batched, 0).padStart(8)}  ${fmt(perPartHmac / batched, 2)}x`,
  );
  console.log(`${'S3: getSignedUrl per part'.padEnd(40)} ${fmt(perPartSdk, 0).padStart(8)}`);
  console.log(`${'S3: presignParts'.padEnd(40)} ${fmt(presigned, 0).padStart(8)}  ${fmt(perPartSdk / presigned, 2)}x`);
}

async function main() {
  console.log(`bench/api — ${CONNECTIONS} connections x ${DURATION} s per run; node ${process.version}\n`);
  const baseline = await bareRoute({ sources: [], meta: { page: 1, limit: 10, total: 0, hasMore: false } });

  const rows: [string, Result, Result][] = [];
  const sqlite = await measure(undefined, true);
  // The same answers from a bare route: what Fastify and the network cost for these bodies alone
  // (200 part URLs are 30 KB of JSON), printed beside the ratio to the minimal route.
  const sameStart = await bareRoute(sqlite.startBody);
  const sameList = await bareRoute(sqlite.listBody);
  rows.push(['multipart start, SQLite', sqlite.start, sameStart], ['list sources, SQLite', sqlite.list, sameList]);
  const db = await freshPostgres(PG_ADMIN, 'stowage_bench').catch(() => undefined);
  if (db) {
    try {
      const p = await measure(db.url);
      rows.push(['multipart start, PostgreSQL', p.start, sameStart], ['list sources, PostgreSQL', p.list, sameList]);
    } finally {
      await db.drop();
    }
  } else console.log('(PostgreSQL not reachable: skipped)\n');

  console.log(
    `${'run'.padEnd(30)} ${'req/s'.padStart(8)} ${'p99 ms'.padStart(7)} ${'errors'.padStart(6)} ${'x bare'.padStart(7)}  ${'x same-body bare'.padStart(16)}`,
  );
  /** One line of the table: figures, then the ratio to the bare route and anything after it. */
  const line = (label: string, r: Result, extra = '') =>
    console.log(
      `${label.padEnd(30)} ${fmt(r.rps, 0).padStart(8)} ${String(r.p99).padStart(7)} ${String(r.errors).padStart(6)} ${fmt(r.rps / baseline.rps, 3).padStart(7)}${extra}`,
    );
  line('bare Fastify route', baseline);
  line('  same body as start', sameStart);
  line('  same body as list', sameList);
  if (sqlite.app) {
    console.log("Stowage's app, routes that do no work (its hooks: request metrics, auth, errors)");
    for (const [label, r] of sqlite.app) line(label, r);
  }
  for (const [label, r, same] of rows) line(label, r, `  ${fmt(r.rps / same.rps, 3).padStart(16)}`);
  await signing();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
