// Bucket CORS for browser multipart uploads (src/storage/s3-cors.ts), the start-up check
// (src/main.ts) and `stowage storage cors` (src/cli/main.ts).
//
// Against the real S3 layer of OpenStack Swift (scripts/start-swift.sh) when configured: what
// Swift answers to GetBucketCors/PutBucketCors (501 NotImplemented, whatever the credentials or
// bucket), and that the Swift settings the script makes (s3api cors_preflight_allow_origin, proxy
// cors_allow_origin) let a cross-origin page PUT to a presigned part URL and read the ETag.
//
// Swift cannot produce the other answers (a stored configuration, NoSuchCORSConfiguration,
// access denied, no answer), so those come from a small local HTTP server on 127.0.0.1 that
// answers the two calls as AWS S3 documents them: GET /<bucket>?cors and PUT /<bucket>?cors.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import type http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { chromium } from 'playwright-core';
import {
  AbortMultipartUploadCommand,
  type CORSRule,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteBucketCommand,
  PutBucketCorsCommand,
} from '@aws-sdk/client-s3';
import { S3Storage, type S3Settings } from '../src/storage/s3.ts';
import {
  applyBucketCors,
  CORS_RULE_ID,
  checkBucketCors,
  classifyCorsError,
  isValidOrigin,
  mergeCorsRules,
  rulesAllowPartUploads,
  stowageCorsRule,
} from '../src/storage/s3-cors.ts';
import { runCli, startServer } from './helpers/process.ts';
import { localServer } from './helpers/servers.ts';
import { externalService } from './helpers/services.ts';

const CHROMIUM = process.env.STOWAGE_TEST_CHROMIUM ?? '/usr/bin/chromium';
const s3 = externalService('STOWAGE_TEST_S3_ENDPOINT', 'an S3-compatible server (scripts/start-swift.sh)');
const ORIGIN = 'https://app.example';

const rule = (r: Partial<CORSRule>): CORSRule => ({
  AllowedMethods: ['PUT'],
  AllowedOrigins: ['*'],
  AllowedHeaders: ['*'],
  ExposeHeaders: ['ETag'],
  ...r,
});

describe('CORS rules: what a browser part PUT would get', () => {
  test("Stowage's rule: PUT from the origins, any header, ETag exposed, an hour of preflight cache", () => {
    assert.deepEqual(stowageCorsRule(), {
      ID: CORS_RULE_ID,
      AllowedMethods: ['PUT'],
      AllowedOrigins: ['*'],
      AllowedHeaders: ['*'],
      ExposeHeaders: ['ETag'],
      MaxAgeSeconds: 3600,
    });
    assert.deepEqual(stowageCorsRule(['https://a.example', 'https://b.example']).AllowedOrigins, [
      'https://a.example',
      'https://b.example',
    ]);
    assert.equal(rulesAllowPartUploads([stowageCorsRule()], [ORIGIN]), true);
    assert.equal(rulesAllowPartUploads([stowageCorsRule([ORIGIN])], [ORIGIN]), true);
  });

  test('every origin asked for must be covered; wildcards as S3 matches them', () => {
    const rules = [rule({ AllowedOrigins: ['https://*.example.com', 'http://localhost:5173'] })];
    assert.equal(rulesAllowPartUploads(rules, ['https://shop.example.com']), true);
    assert.equal(rulesAllowPartUploads(rules, ['https://shop.example.com', 'http://localhost:5173']), true);
    assert.equal(rulesAllowPartUploads(rules, ['https://shop.example.com', 'https://other.example']), false);
    assert.equal(rulesAllowPartUploads(rules, ['*']), false, 'a rule for some origins does not cover any origin');
    // Without origins (the start-up check does not know the pages): some origin a rule names.
    assert.equal(rulesAllowPartUploads(rules), true);
    assert.equal(rulesAllowPartUploads([]), false);
  });

  test('a rule must allow PUT, the content-type header, and expose ETag (any case)', () => {
    assert.equal(rulesAllowPartUploads([rule({ AllowedMethods: ['GET', 'HEAD'] })], [ORIGIN]), false);
    assert.equal(rulesAllowPartUploads([rule({ ExposeHeaders: [] })], [ORIGIN]), false);
    assert.equal(rulesAllowPartUploads([rule({ ExposeHeaders: ['etag'] })], [ORIGIN]), true);
    assert.equal(rulesAllowPartUploads([rule({ AllowedHeaders: undefined })], [ORIGIN]), false);
    assert.equal(rulesAllowPartUploads([rule({ AllowedHeaders: ['Content-Type'] })], [ORIGIN]), true);
    assert.equal(rulesAllowPartUploads([rule({ AllowedHeaders: ['content-*'] })], [ORIGIN]), true);
  });

  test('S3 answers with the first matching rule: an earlier PUT rule without ETag hides a later one', () => {
    const theirs = rule({ ID: 'theirs', ExposeHeaders: ['x-amz-request-id'] });
    assert.equal(rulesAllowPartUploads([theirs, stowageCorsRule()], [ORIGIN]), false);
    // Hence Stowage's rule goes first; the owner's rules are kept in order, an older Stowage rule replaced.
    const unrelated = rule({ ID: 'cdn', AllowedMethods: ['GET'], AllowedOrigins: ['https://cdn.example'] });
    const merged = mergeCorsRules(
      [theirs, stowageCorsRule(['https://old.example']), unrelated],
      stowageCorsRule([ORIGIN]),
    );
    assert.deepEqual(
      merged.map((r) => r.ID),
      [CORS_RULE_ID, 'theirs', 'cdn'],
    );
    assert.deepEqual(merged[0].AllowedOrigins, [ORIGIN]);
    assert.equal(rulesAllowPartUploads(merged, [ORIGIN]), true);
  });

  test('origins the CLI accepts', () => {
    for (const o of ['*', 'https://a.example', 'http://localhost:5173', 'https://*.example.com'])
      assert.equal(isValidOrigin(o), true, o);
    for (const o of [
      '',
      'a.example',
      'ftp://a.example',
      'https://a.example/path',
      'https://u:p@a.example',
      'https://*.*.example',
      'https://a .example',
    ]) {
      assert.equal(isValidOrigin(o), false, o);
    }
  });
});

// ---------------------------------------------------------------------------------------------
// A stand-in that answers like AWS S3, for what Swift cannot say.

type Answer = { status: number; body?: string } | 'hang';
const xmlError = (code: string, message: string) =>
  `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${message}</Message><RequestId>4442587FB7D0A2F9</RequestId></Error>`;
const corsXml = (rules: string) =>
  `<?xml version="1.0" encoding="UTF-8"?>\n<CORSConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">${rules}</CORSConfiguration>`;
const NO_CORS: Answer = {
  status: 404,
  body: xmlError('NoSuchCORSConfiguration', 'The CORS configuration does not exist'),
};
const GET_ONLY_RULE =
  '<CORSRule><ID>cdn</ID><AllowedOrigin>https://cdn.example</AllowedOrigin><AllowedMethod>GET</AllowedMethod><MaxAgeSeconds>600</MaxAgeSeconds></CORSRule>';
const PUT_RULE =
  '<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>PUT</AllowedMethod><AllowedMethod>GET</AllowedMethod><AllowedHeader>*</AllowedHeader><ExposeHeader>ETag</ExposeHeader></CORSRule>';

interface FakeS3 {
  url: string;
  /** The answer to GET ?cors while nothing was stored by a PUT. */
  get: Answer;
  /** How PUT ?cors is answered: stored (and returned by later GETs), accepted but forgotten, or refused. */
  put: 'store' | 'ignore' | Answer;
  stored?: string;
  puts: string[];
  requests: string[];
  close(): Promise<void>;
}

async function fakeS3(): Promise<FakeS3> {
  const fake = { get: NO_CORS, put: 'store', puts: [], requests: [] } as unknown as FakeS3;
  const reply = (res: http.ServerResponse, a: Answer) => {
    if (a === 'hang') return; // never answered; close() drops it
    res
      .writeHead(a.status, { 'content-type': 'application/xml', 'x-amz-request-id': '4442587FB7D0A2F9' })
      .end(a.body ?? '');
  };
  const server = await localServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://x');
    // The SDK sends /media/?cors=; recorded as the call it is.
    fake.requests.push(
      `${req.method} ${u.pathname.replace(/\/$/, '')}${u.searchParams.has('cors') ? '?cors' : u.search}`,
    );
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      if (!u.searchParams.has('cors'))
        return reply(res, { status: 400, body: xmlError('InvalidRequest', 'only ?cors here') });
      if (req.method === 'GET') return reply(res, fake.stored ? { status: 200, body: fake.stored } : fake.get);
      if (req.method === 'PUT') {
        fake.puts.push(body);
        if (fake.put === 'store') fake.stored = body;
        return reply(res, typeof fake.put === 'string' ? { status: 200 } : fake.put);
      }
      reply(res, { status: 405, body: xmlError('MethodNotAllowed', 'no') });
    });
  });
  return Object.assign(fake, { url: server.url, close: server.close });
}

const FAKE_SECRET = 'fake-secret-Wd9x2';
const fakeSettings = (url: string): S3Settings => ({
  endpoint: url,
  region: 'us-east-1',
  bucket: 'media',
  accessKeyId: 'AKIAFAKEKEY123',
  secretAccessKey: FAKE_SECRET,
  forcePathStyle: true,
});

describe('CORS check and apply: each kind of answer (local stand-in for S3)', () => {
  let fake: FakeS3;
  let storage: S3Storage;
  const opts = { secrets: ['AKIAFAKEKEY123', FAKE_SECRET], timeoutMs: 2000 };
  before(async () => {
    fake = await fakeS3();
    storage = new S3Storage(fakeSettings(fake.url));
  });
  after(async () => {
    storage?.destroy();
    await fake?.close();
  });
  const reset = (get: Answer, put: FakeS3['put'] = 'store') =>
    Object.assign(fake, { get, put, stored: undefined, puts: [], requests: [] });

  test('NoSuchCORSConfiguration: missing', async () => {
    reset(NO_CORS);
    const c = await checkBucketCors(storage.client, 'media', opts);
    assert.equal(c.status, 'missing', c.detail);
    assert.deepEqual(c.rules, []);
    assert.deepEqual(fake.requests, ['GET /media?cors']);
  });

  test('rules, none for part uploads: missing; a PUT rule exposing ETag: ok', async () => {
    reset({ status: 200, body: corsXml(GET_ONLY_RULE) });
    let c = await checkBucketCors(storage.client, 'media', opts);
    assert.equal(c.status, 'missing', c.detail);
    assert.equal(c.rules?.length, 1);
    reset({ status: 200, body: corsXml(GET_ONLY_RULE + PUT_RULE) });
    c = await checkBucketCors(storage.client, 'media', { ...opts, origins: [ORIGIN] });
    assert.equal(c.status, 'ok', c.detail);
  });

  test('NotImplemented (501, with or without a body) and MethodNotAllowed: unsupported', async () => {
    for (const answer of [
      {
        status: 501,
        body: xmlError('NotImplemented', 'A header you provided implies functionality that is not implemented'),
      },
      { status: 501 },
      { status: 405, body: xmlError('MethodNotAllowed', 'The specified method is not allowed against this resource.') },
    ]) {
      reset(answer);
      const c = await checkBucketCors(storage.client, 'media', opts);
      assert.equal(c.status, 'unsupported', `${answer.status}: ${c.detail}`);
      assert.equal(c.httpStatus, answer.status);
    }
  });

  test('anything else: error, and no credential in the message', async () => {
    reset({
      status: 403,
      body: xmlError('AccessDenied', `Access Denied for ${FAKE_SECRET} AKIAFAKEKEY123 via http://user:pw@s3.internal`),
    });
    let c = await checkBucketCors(storage.client, 'media', opts);
    assert.equal(c.status, 'error');
    assert.equal(c.code, 'AccessDenied');
    assert.equal(c.httpStatus, 403);
    assert.match(c.detail, /AccessDenied/);
    assert.match(c.detail, /s3:GetBucketCORS/);
    for (const secret of [FAKE_SECRET, 'AKIAFAKEKEY123', 'user:pw'])
      assert.ok(!JSON.stringify(c).includes(secret), `${secret} leaked: ${c.detail}`);

    reset({ status: 404, body: xmlError('NoSuchBucket', 'The specified bucket does not exist') });
    c = await checkBucketCors(storage.client, 'media', opts);
    assert.equal(c.status, 'error');
    assert.equal(c.code, 'NoSuchBucket');
  });

  test('no answer: error once the time limit passes', async () => {
    reset('hang');
    const started = Date.now();
    const c = await checkBucketCors(storage.client, 'media', { ...opts, timeoutMs: 300 });
    assert.equal(c.status, 'error', c.detail);
    assert.ok(Date.now() - started < 2000, `took ${Date.now() - started} ms`);
    assert.match(c.detail, /no answer within 300 ms/);
  });

  test('the classification of raw errors (network, unknown)', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' });
    assert.equal(classifyCorsError(refused, 'b').status, 'error');
    assert.equal(classifyCorsError(refused, 'b').code, 'ECONNREFUSED');
    assert.equal(classifyCorsError('odd', 'b').status, 'error');
  });

  test("apply: the rule goes first, the bucket's other rules are kept, and it reads back ok", async () => {
    reset({ status: 200, body: corsXml(GET_ONLY_RULE) });
    const r = await applyBucketCors(storage.client, 'media', {
      ...opts,
      origins: ['https://a.example', 'https://b.example'],
    });
    assert.equal(r.applied, true);
    assert.equal(r.before.status, 'missing');
    assert.equal(r.after.status, 'ok', r.after.detail);
    assert.deepEqual(fake.requests, ['GET /media?cors', 'PUT /media?cors', 'GET /media?cors']);
    const sent = fake.puts[0];
    assert.ok(
      sent.indexOf(`<ID>${CORS_RULE_ID}</ID>`) >= 0 &&
        sent.indexOf(`<ID>${CORS_RULE_ID}</ID>`) < sent.indexOf('<ID>cdn</ID>'),
      sent,
    );
    for (const part of [
      '<AllowedOrigin>https://a.example</AllowedOrigin>',
      '<AllowedOrigin>https://b.example</AllowedOrigin>',
      '<AllowedMethod>PUT</AllowedMethod>',
      '<ExposeHeader>ETag</ExposeHeader>',
      '<MaxAgeSeconds>3600</MaxAgeSeconds>',
      '<AllowedOrigin>https://cdn.example</AllowedOrigin>',
    ]) {
      assert.ok(sent.includes(part), `${part} in ${sent}`);
    }
    assert.deepEqual(
      r.after.rules?.map((x) => x.ID),
      [CORS_RULE_ID, 'cdn'],
    );

    // Again: nothing to do, nothing written.
    fake.requests = [];
    const again = await applyBucketCors(storage.client, 'media', { ...opts, origins: ['https://a.example'] });
    assert.equal(again.applied, false);
    assert.equal(again.after.status, 'ok');
    assert.deepEqual(fake.requests, ['GET /media?cors']);
  });

  test('apply writes nothing it could not read first (unsupported, error)', async () => {
    for (const answer of [
      { status: 501, body: xmlError('NotImplemented', 'not implemented') },
      { status: 403, body: xmlError('AccessDenied', 'Access Denied') },
    ]) {
      reset(answer);
      const r = await applyBucketCors(storage.client, 'media', opts);
      assert.equal(r.applied, false);
      assert.notEqual(r.after.status, 'ok');
      assert.deepEqual(fake.puts, [], 'PutBucketCors replaces the whole configuration: never sent blind');
    }
  });

  test('apply: a server that accepts the configuration but does not keep it is a failure', async () => {
    reset(NO_CORS, 'ignore');
    const r = await applyBucketCors(storage.client, 'media', opts);
    assert.equal(r.applied, true);
    assert.equal(r.after.status, 'missing');
    assert.match(r.after.detail, /accepted the configuration, but reading it back/);
  });

  test('apply: a refused write is reported', async () => {
    reset(NO_CORS, { status: 403, body: xmlError('AccessDenied', 'Access Denied') });
    const r = await applyBucketCors(storage.client, 'media', opts);
    assert.equal(r.applied, false);
    assert.equal(r.after.status, 'error');
    assert.match(r.after.detail, /cannot write the CORS configuration/);
  });
});

// ---------------------------------------------------------------------------------------------
// The start-up log line and the admin command, as real processes.

const serverEnv = (dataDir: string, settings: S3Settings) => ({
  STOWAGE_DATA_DIR: dataDir,
  STOWAGE_STORAGE: 's3',
  S3_ENDPOINT: settings.endpoint,
  S3_BUCKET: settings.bucket,
  S3_ACCESS_KEY_ID: settings.accessKeyId,
  S3_SECRET_ACCESS_KEY: settings.secretAccessKey,
  STOWAGE_SWEEP_INTERVAL_MS: '0',
  STOWAGE_WEBHOOK_POLL_MS: '0',
});

/** Waits for a JSON log line with `cors` set; returns it parsed. */
async function corsLogLine(output: () => string, waitMs = 10_000): Promise<Record<string, any>> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    const line = output()
      .split('\n')
      .find((l) => l.startsWith('{') && l.includes('"cors":'));
    if (line) return JSON.parse(line);
    if (Date.now() > deadline) throw new Error(`no CORS log line:\n${output()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('start-up check and `stowage storage cors` (processes, local stand-in for S3)', () => {
  let fake: FakeS3;
  let dataDir: string;
  before(async () => {
    fake = await fakeS3();
    dataDir = mkdtempSync(join(tmpdir(), 'stowage-cors-'));
  });
  after(async () => {
    await fake?.close();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  test('missing: a warning with the exact rule as JSON and the command to apply it', async () => {
    Object.assign(fake, { get: NO_CORS, put: 'store', stored: undefined });
    const server = await startServer(serverEnv(dataDir, fakeSettings(fake.url)));
    try {
      const line = await corsLogLine(server.output);
      assert.equal(line.level, 40);
      assert.equal(line.cors, 'missing');
      assert.ok(line.msg.includes(JSON.stringify(stowageCorsRule())), line.msg);
      assert.match(line.msg, /stowage storage cors --apply/);
      assert.deepEqual(line.cors_rule, stowageCorsRule());
      assert.ok(!server.output().includes(FAKE_SECRET));
    } finally {
      await server.stop();
    }
  });

  test('ok: an info line', async () => {
    Object.assign(fake, { get: { status: 200, body: corsXml(PUT_RULE) }, stored: undefined });
    const server = await startServer(serverEnv(dataDir, fakeSettings(fake.url)));
    try {
      const line = await corsLogLine(server.output);
      assert.equal(line.level, 30);
      assert.equal(line.cors, 'ok');
    } finally {
      await server.stop();
    }
  });

  test('a storage server that never answers neither holds up nor fails the start', async () => {
    Object.assign(fake, { get: 'hang', stored: undefined });
    const server = await startServer(serverEnv(dataDir, fakeSettings(fake.url)));
    try {
      // Listening already (startServer resolved); requests are served while the check waits.
      assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
      assert.ok(!server.output().includes('"cors":'));
      const line = await corsLogLine(server.output, 15_000);
      assert.equal(line.level, 40);
      assert.equal(line.cors, 'error');
      assert.match(line.msg, /no answer within 5000 ms/);
      assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
    } finally {
      await server.stop();
    }
  });

  test('the command: status, --apply with origins, --json, exit codes', async () => {
    Object.assign(fake, { get: NO_CORS, put: 'store', stored: undefined, puts: [] });
    const env = serverEnv(dataDir, fakeSettings(fake.url));
    let r = await runCli(['storage', 'cors'], env);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stdout, /S3 bucket CORS: missing/);
    assert.ok(r.stdout.includes(JSON.stringify(stowageCorsRule(), null, 2)), r.stdout);
    assert.match(r.stdout, /stowage storage cors --apply/);

    r = await runCli(['storage', 'cors', '--apply', '--origins', 'https://a.example,https://b.example', '--json'], env);
    assert.equal(r.code, 0, r.stderr);
    const applied = JSON.parse(r.stdout);
    assert.equal(applied.status, 'ok');
    assert.equal(applied.applied, true);
    assert.equal(applied.before, 'missing');
    assert.deepEqual(applied.origins, ['https://a.example', 'https://b.example']);
    assert.equal(fake.puts.length, 1);

    r = await runCli(['storage', 'cors', '--origins', 'https://a.example', '--json'], env);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(JSON.parse(r.stdout).status, 'ok');
    r = await runCli(['storage', 'cors', '--origins', 'https://c.example', '--json'], env);
    assert.equal(r.code, 1);
    assert.equal(JSON.parse(r.stdout).status, 'missing');

    r = await runCli(['storage', 'cors', '--origins', 'https://a.example/path'], env);
    assert.equal(r.code, 2, 'bad usage');
    r = await runCli(['storage', 'cors'], { STOWAGE_DATA_DIR: dataDir });
    assert.equal(r.code, 78, 'local storage');
    assert.match(r.stderr, /STOWAGE_STORAGE is not "s3"/);
    for (const out of [r.stdout, r.stderr]) assert.ok(!out.includes(FAKE_SECRET));
  });
});

// ---------------------------------------------------------------------------------------------
// The real thing: OpenStack Swift's S3 layer.

describe('bucket CORS on OpenStack Swift (s3api)', { skip: s3.skip }, () => {
  let storage: S3Storage;
  let settings: S3Settings;
  let dataDir: string;
  before(async () => {
    settings = {
      endpoint: s3.value,
      region: process.env.STOWAGE_TEST_S3_REGION ?? 'us-east-1',
      bucket: `cors-${randomBytes(4).toString('hex')}`,
      accessKeyId: process.env.STOWAGE_TEST_S3_ACCESS_KEY_ID ?? 'test:tester',
      secretAccessKey: process.env.STOWAGE_TEST_S3_SECRET_ACCESS_KEY ?? 'testing',
      forcePathStyle: true,
    };
    storage = new S3Storage(settings);
    await storage.client.send(new CreateBucketCommand({ Bucket: settings.bucket }));
    dataDir = mkdtempSync(join(tmpdir(), 'stowage-cors-swift-'));
  });
  after(async () => {
    if (storage) {
      for await (const o of storage.list('')) await storage.delete(o.key);
      await storage.client.send(new DeleteBucketCommand({ Bucket: settings.bucket })).catch(() => {});
      storage.destroy();
    }
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  test('GetBucketCors: 501 NotImplemented, so the check says unsupported', async () => {
    const c = await checkBucketCors(storage.client, settings.bucket, { timeoutMs: 10_000 });
    assert.equal(c.status, 'unsupported', c.detail);
    assert.equal(c.code, 'NotImplemented');
    assert.equal(c.httpStatus, 501);
  });

  test('Swift answers 501 before it checks the signature or the bucket', async () => {
    const wrong = new S3Storage({ ...settings, bucket: 'no-such-bucket-here', secretAccessKey: 'not-the-secret' });
    try {
      const c = await checkBucketCors(wrong.client, 'no-such-bucket-here', {
        timeoutMs: 10_000,
        secrets: ['not-the-secret'],
      });
      assert.equal(c.status, 'unsupported', c.detail);
      assert.equal(c.httpStatus, 501);
    } finally {
      wrong.destroy();
    }
  });

  test('PutBucketCors: 501 NotImplemented too; apply writes nothing and reports unsupported', async () => {
    await assert.rejects(
      storage.client.send(
        new PutBucketCorsCommand({ Bucket: settings.bucket, CORSConfiguration: { CORSRules: [stowageCorsRule()] } }),
      ),
      (err: any) => err.name === 'NotImplemented' && err.$metadata?.httpStatusCode === 501,
    );
    const r = await applyBucketCors(storage.client, settings.bucket, { origins: [ORIGIN], timeoutMs: 10_000 });
    assert.equal(r.applied, false);
    assert.equal(r.after.status, 'unsupported');
  });

  test('a presigned part URL: the preflight and the PUT carry what a browser needs to read ETag', async () => {
    const key = `ws/${randomBytes(4).toString('hex')}/part.bin`;
    const { UploadId } = await storage.client.send(
      new CreateMultipartUploadCommand({ Bucket: settings.bucket, Key: key }),
    );
    try {
      const body = randomBytes(1000);
      const [url] = await storage.presignParts(key, UploadId!, [{ partNumber: 1, length: body.length }], 300);
      const setup =
        'start Swift with scripts/start-swift.sh, which sets cors_preflight_allow_origin ([filter:s3api]) and cors_allow_origin ([app:proxy-server])';

      // What the browser sends before the PUT (the SDK sets content-type on parts).
      const pre = await fetch(url, {
        method: 'OPTIONS',
        headers: {
          Origin: ORIGIN,
          'Access-Control-Request-Method': 'PUT',
          'Access-Control-Request-Headers': 'content-type',
        },
      });
      await pre.arrayBuffer();
      assert.equal(pre.status, 200, `preflight answered ${pre.status}: ${setup}`);
      assert.ok(
        [ORIGIN, '*'].includes(pre.headers.get('access-control-allow-origin') ?? ''),
        `Access-Control-Allow-Origin: ${pre.headers.get('access-control-allow-origin')}`,
      );
      assert.ok(
        (pre.headers.get('access-control-allow-methods') ?? '').split(/,\s*/).includes('PUT'),
        `${pre.headers.get('access-control-allow-methods')}`,
      );
      assert.ok(
        (pre.headers.get('access-control-allow-headers') ?? '').toLowerCase().split(/,\s*/).includes('content-type'),
      );

      // The PUT itself: still signature-checked, and its answer lets the page read ETag.
      const put = await fetch(url, {
        method: 'PUT',
        body,
        headers: { Origin: ORIGIN, 'content-type': 'application/octet-stream' },
      });
      await put.arrayBuffer();
      assert.equal(put.status, 200);
      assert.ok(
        [ORIGIN, '*'].includes(put.headers.get('access-control-allow-origin') ?? ''),
        `PUT without Access-Control-Allow-Origin: ${setup}`,
      );
      const exposed = (put.headers.get('access-control-expose-headers') ?? '').toLowerCase().split(/,\s*/);
      assert.ok(exposed.includes('etag'), `Access-Control-Expose-Headers: ${exposed.join(', ')}`);
      const etag = put.headers.get('etag');
      assert.ok(etag, 'ETag');
      const [part] = await storage.listParts(key, UploadId!);
      assert.equal(part.etag, etag, 'the ETag the page reads is the one storage lists');

      // CORS does not open the door to anything else: a tampered URL is still refused.
      const tampered = url.replace('partNumber=1', 'partNumber=2');
      const refused = await fetch(tampered, { method: 'PUT', body, headers: { Origin: ORIGIN } });
      await refused.arrayBuffer();
      assert.equal(refused.status, 403);
    } finally {
      await storage.client
        .send(new AbortMultipartUploadCommand({ Bucket: settings.bucket, Key: key, UploadId }))
        .catch(() => {});
    }
  });

  test('in Chromium: a page on another origin PUTs a part to its presigned URL and reads the ETag', {
    skip: existsSync(CHROMIUM) ? false : `install chromium (or set STOWAGE_TEST_CHROMIUM) to run`,
  }, async () => {
    const key = `ws/${randomBytes(4).toString('hex')}/browser.bin`;
    const { UploadId } = await storage.client.send(
      new CreateMultipartUploadCommand({ Bucket: settings.bucket, Key: key }),
    );
    // The page's origin: another port on 127.0.0.1 is another origin.
    const site = await localServer((_req, res) =>
      res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>uploader</title>'),
    );
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
    });
    try {
      const [url] = await storage.presignParts(key, UploadId!, [{ partNumber: 1, length: 4096 }], 300);
      const page = await browser.newPage();
      await page.goto(`${site.url}/`);
      // As sdk/src/client.ts sends a part.
      const got = await page.evaluate(async (u) => {
        try {
          const res = await fetch(u, {
            method: 'PUT',
            body: new Uint8Array(4096),
            headers: { 'content-type': 'application/octet-stream' },
          });
          return { status: res.status, etag: res.headers.get('etag') };
        } catch (err) {
          return { error: String(err) };
        }
      }, url);
      assert.ok(
        !('error' in got),
        `the browser refused the cross-origin PUT (${'error' in got ? got.error : ''}): start Swift with scripts/start-swift.sh`,
      );
      assert.equal(got.status, 200);
      const [part] = await storage.listParts(key, UploadId!);
      assert.ok(got.etag, 'the page could not read ETag');
      assert.equal(got.etag, part.etag);
    } finally {
      await browser.close();
      await site.close();
      await storage.client
        .send(new AbortMultipartUploadCommand({ Bucket: settings.bucket, Key: key, UploadId }))
        .catch(() => {});
    }
  });

  test('start-up: a warning that Swift needs its own CORS setting', async () => {
    const server = await startServer(serverEnv(dataDir, settings));
    try {
      const line = await corsLogLine(server.output);
      assert.equal(line.level, 40);
      assert.equal(line.cors, 'unsupported');
      assert.match(line.msg, /storage server's own CORS setting/);
      assert.ok(!server.output().includes(settings.secretAccessKey!));
    } finally {
      await server.stop();
    }
  });

  test('`stowage storage cors` (and --apply) on Swift: unsupported, exit 1', async () => {
    const env = serverEnv(dataDir, settings);
    let r = await runCli(['storage', 'cors', '--json'], env);
    assert.equal(r.code, 1, r.stderr);
    assert.equal(JSON.parse(r.stdout).status, 'unsupported');
    r = await runCli(['storage', 'cors', '--apply'], env);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stdout, /Nothing applied/);
    assert.match(r.stdout, /cors_preflight_allow_origin/);
  });
});
