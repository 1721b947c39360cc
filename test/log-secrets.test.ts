// No secret in logs or on stdout by default (issue 15, item 12). Signed part and delivery URLs
// and upload tokens travel in request URLs; outbound presigned URLs can end up in error
// messages; the first start makes keys. None of them may reach a log line or a non-terminal
// stdout, while the paths without their secrets stay in the logs.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { redactText, redactUrl } from '../src/http/log-redaction.ts';
import { type Harness, makeHarness } from './helpers/harness.ts';
import { call } from './helpers/http.ts';
import { firstWorkspaceFile, type ServerProcess, startServer } from './helpers/process.ts';

const pathOf = (url: string) => {
  const u = new URL(url);
  return u.pathname + u.search;
};

/** Every log line that holds one of the secrets, for the failure message. */
const leaks = (lines: string[], secrets: string[]) =>
  secrets.flatMap((s) => lines.filter((l) => l.includes(s)).map((l) => `${s.slice(0, 12)}… in ${l.slice(0, 300)}`));

describe('request logs carry no signature, token or key', () => {
  let h: Harness;
  const secrets: string[] = [];
  before(async () => {
    h = await makeHarness('sqlite', { config: { publicUrl: 'https://media.example.com' } });
  });
  after(() => h?.close());

  test('part URLs, signed delivery URLs, upload tokens and secret query parameters are redacted; paths stay', async () => {
    const pub = { 'x-api-key': h.ws.public_key };
    // A multipart session: its part URLs carry signatures.
    const start = await call(h.app, 'POST', '/api/v1/multipart/start', {
      body: { file_name: 'movie.bin', size: 10, format: 'application/octet-stream' },
      headers: pub,
    });
    assert.equal(start.status, 201, start.raw);
    const partUrl = new URL(start.body.parts[0]);
    const partSig = partUrl.searchParams.get('signature')!;
    assert.ok(partSig.length >= 16);
    secrets.push(partSig);
    const put = await h.app.inject({
      method: 'PUT',
      url: pathOf(partUrl.href),
      headers: { 'content-type': 'application/octet-stream' },
      payload: Buffer.alloc(10, 1),
    });
    assert.equal(put.statusCode, 200, put.body);
    // A forged signature is no secret, but it is logged the same way (and refused).
    const forged = new URL(partUrl);
    forged.searchParams.set('signature', `forged${randomBytes(12).toString('hex')}`);
    secrets.push(forged.searchParams.get('signature')!);
    assert.equal(
      (
        await h.app.inject({
          method: 'PUT',
          url: pathOf(forged.href),
          payload: Buffer.alloc(10, 1),
          headers: { 'content-type': 'application/octet-stream' },
        })
      ).statusCode,
      403,
    );

    // A private file: its record and minted URLs carry delivery signatures.
    const form = new FormData();
    form.append('file', new Blob([Buffer.from('private bytes')]), 'p.txt');
    form.append('file_name', 'secret.txt');
    const res = await fetch(`${await h.app.listen({ host: '127.0.0.1', port: 0 })}/api/v1/uploads`, {
      method: 'POST',
      body: form,
      headers: h.auth,
    });
    const record = (await res.json()) as any;
    assert.equal(res.status, 201, JSON.stringify(record));
    const priv = await call(h.app, 'PATCH', `/api/v1/files/${record.file_no}`, {
      body: { is_private: true },
      headers: h.auth,
    });
    assert.equal(priv.status, 200, priv.raw);
    const signed = new URL(priv.body.data?.url ?? priv.body.url);
    secrets.push(signed.searchParams.get('signature')!);
    assert.equal((await h.app.inject({ method: 'GET', url: pathOf(signed.href) })).statusCode, 200);
    const minted = await call(h.app, 'POST', `/api/v1/files/${record.file_no}/signed-url`, {
      body: { expires_in: 60 },
      headers: h.auth,
    });
    const mintedUrl = new URL(minted.body.data.url);
    secrets.push(mintedUrl.searchParams.get('signature')!);
    assert.equal((await h.app.inject({ method: 'GET', url: pathOf(mintedUrl.href) })).statusCode, 200);

    // Upload tokens: the path is the bearer secret. Used, reused, percent-encoded, preflighted.
    const minted2 = await call(h.app, 'POST', '/api/v1/generate-token', {
      body: { file_name: 'a.txt' },
      headers: h.auth,
    });
    assert.equal(minted2.status, 201, minted2.raw);
    const token: string = minted2.body.token;
    secrets.push(token, token.split('.')[1], minted2.body.signature);
    const up = await h.app.inject({
      method: 'POST',
      url: pathOf(minted2.body.upload_url),
      headers: { 'content-type': 'text/plain' },
      payload: 'hello',
    });
    assert.equal(up.statusCode, 201, up.body);
    assert.equal(
      (
        await h.app.inject({
          method: 'POST',
          url: `/api/v1/uploads/${token}`,
          headers: { 'content-type': 'text/plain' },
          payload: 'again',
        })
      ).statusCode,
      401,
    );
    const encoded = `/api/v1/uploads/${token.replace(/_/g, '%5F')}`;
    secrets.push(token.replace(/_/g, '%5F'));
    await h.app.inject({ method: 'POST', url: encoded, headers: { 'content-type': 'text/plain' }, payload: 'x' });
    await h.app.inject({
      method: 'OPTIONS',
      url: `/api/v1/uploads/${token}`,
      headers: { origin: 'https://shop.example.com', 'access-control-request-method': 'POST' },
    });

    // Secret query parameters of other services, on any route (and in any letter case).
    const foreign = {
      'X-Amz-Signature': `amzsig${randomBytes(8).toString('hex')}`,
      'X-Amz-Credential': `AKIA${randomBytes(8).toString('hex')}/20260101/us-east-1/s3/aws4_request`,
      'x-goog-signature': `googsig${randomBytes(8).toString('hex')}`,
      'X-Goog-Credential': `svc${randomBytes(8).toString('hex')}@p.iam.gserviceaccount.com`,
      sig: `azsig${randomBytes(8).toString('hex')}`,
      token: `tok${randomBytes(8).toString('hex')}`,
    };
    secrets.push(...Object.values(foreign));
    const qs = new URLSearchParams({ ...foreign, page: '2' }).toString();
    await h.app.inject({ method: 'GET', url: `/healthz?${qs}` });
    await h.app.inject({ method: 'GET', url: `/no/such/route?${qs}` });

    // The keys themselves (trace-level lines include the request headers multipart parsing sees).
    secrets.push(h.ws.private_key, h.ws.public_key);

    const lines = h.logs;
    assert.ok(
      lines.some((l) => l.includes('"route":')),
      'request lines were captured',
    );
    assert.deepEqual(leaks(lines, secrets), []);
    // Still useful: the paths, the other parameters, and which ones were redacted.
    const all = lines.join('\n');
    assert.ok(
      all.includes(`${partUrl.pathname}?length=10&expires=${partUrl.searchParams.get('expires')}&signature=[redacted]`),
      'the part URL without its signature',
    );
    assert.ok(
      all.includes(`${signed.pathname}?expires=${signed.searchParams.get('expires')}&signature=[redacted]`),
      'the signed delivery URL without its signature',
    );
    assert.ok(all.includes('"url":"/api/v1/uploads/stw_ut_[redacted]"'), 'the token upload path without its token');
    assert.ok(
      all.includes('/healthz?X-Amz-Signature=[redacted]&X-Amz-Credential=[redacted]&x-goog-signature=[redacted]'),
      'foreign signatures redacted by name',
    );
    assert.ok(all.includes('&token=[redacted]&page=2'), 'other parameters stay');
  });

  test('outbound URLs in messages and errors lose their signatures too', async () => {
    const s3 = `https://bucket.s3.amazonaws.com/k.bin?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAEXAMPLE%2F20260101&X-Amz-Signature=s3sig${randomBytes(6).toString('hex')}`;
    const gcs = `https://storage.googleapis.com/b/o?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Signature=gcssig${randomBytes(6).toString('hex')}`;
    const azure = `https://acct.blob.core.windows.net/c/b?sv=2023-01-03&sp=r&sig=azsig${randomBytes(6).toString('hex')}`;
    const webhook = `https://hooks.example.com/in?token=hooktok${randomBytes(6).toString('hex')}`;
    const tokenUrl = `https://media.example.com/api/v1/uploads/stw_ut_${randomBytes(11).toString('hex')}.${randomBytes(20).toString('base64url')}`;
    const err = new Error(`GET ${s3} failed`);
    Object.assign(err, { config: { url: gcs } });
    h.app.log.error({ err, target: azure }, `webhook ${webhook} and token ${tokenUrl} failed`);
    const secretsHere = [/s3sig\w+/, /gcssig\w+/, /azsig\w+/, /hooktok\w+/, /stw_ut_[0-9a-f]{22}/].map(
      (re) => re.exec([s3, gcs, azure, webhook, tokenUrl].join(' '))![0],
    );
    assert.deepEqual(leaks(h.logs, secretsHere), []);
    const line = h.logs.find((l) => l.includes('hooks.example.com'))!;
    assert.ok(
      line.includes('X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=[redacted]&X-Amz-Signature=[redacted]'),
      line,
    );
    assert.ok(line.includes('sv=2023-01-03&sp=r&sig=[redacted]'), line);

    // The functions themselves, on the shapes they meet.
    assert.equal(redactUrl('/a/b?expires=1&signature=abc'), '/a/b?expires=1&signature=[redacted]');
    assert.equal(redactUrl('/api/v1/uploads/stw_ut_abc.def?x=1'), '/api/v1/uploads/stw_ut_[redacted]?x=1');
    assert.equal(redactUrl('/api/v1/uploads/STW%5Fut%5Fabc.def'), '/api/v1/uploads/stw_ut_[redacted]');
    assert.equal(redactUrl('/x?%73ignature=abc&SIG=def&a=b'), '/x?%73ignature=[redacted]&SIG=[redacted]&a=b');
    assert.equal(redactUrl('/x?%73ignature=abc'), '/x?%73ignature=[redacted]');
    assert.equal(redactUrl('/x?next=%2Fy%3Fsignature%3Dabc'), '/x?next=[redacted]');
    assert.equal(redactUrl('/files?page=2&search=design'), '/files?page=2&search=design');
    assert.equal(redactText('plain message'), 'plain message');
  });
});

describe('the first start keeps keys off stdout when it is not a terminal', () => {
  let dataDir: string;
  let server: ServerProcess | undefined;
  before(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'stowage-first-'));
  });
  after(async () => {
    await server?.stop('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  test('keys go to DATA_DIR/first-workspace.json (0600), its path is printed, the keys work', async () => {
    server = await startServer({ STOWAGE_DATA_DIR: dataDir, LOG_LEVEL: 'info' });
    const file = join(dataDir, 'first-workspace.json');
    assert.equal(firstWorkspaceFile(dataDir), file);
    assert.ok(existsSync(file), server.output());
    assert.equal(statSync(file).mode & 0o777, 0o600, 'readable by the owner only');
    const ws = JSON.parse(readFileSync(file, 'utf8'));
    assert.match(ws.private_key, /^stw_sk_/);
    assert.match(ws.public_key, /^stw_pk_/);
    assert.match(ws.webhook_secret, /^whsec_/);
    assert.ok(ws.workspace_id);

    // A request that carries a signature and a token, through the default logger.
    await fetch(`${server.url}/healthz?signature=defaultsig${'z'.repeat(12)}`);
    await fetch(`${server.url}/api/v1/uploads/stw_ut_${'a'.repeat(22)}.${'b'.repeat(43)}`, {
      method: 'POST',
      body: 'x',
      headers: { 'content-type': 'text/plain' },
    });
    await new Promise((r) => setTimeout(r, 200));

    const out = server.output();
    for (const secret of [
      ws.private_key,
      ws.public_key,
      ws.webhook_secret,
      `defaultsig${'z'.repeat(12)}`,
      'b'.repeat(43),
    ]) {
      assert.ok(!out.includes(secret), `${secret.slice(0, 10)}… reached stdout or stderr:\n${out}`);
    }
    assert.ok(out.includes(file), 'the path of the key file is printed');
    assert.ok(out.includes(ws.workspace_id), 'the workspace id is printed');
    assert.ok(out.includes('/healthz?signature=[redacted]'), 'the default logger redacts too');

    // The keys in the file are the workspace's.
    const sources = (key: string) =>
      fetch(`${server!.url}/api/v1/sources`, { headers: { authorization: `Bearer ${key}` } }).then((r) => r.status);
    assert.equal(await sources(ws.private_key), 200);
    assert.equal(await sources(ws.public_key), 403, 'the public key is a public key of this service');
    const form = new FormData();
    form.append('file', new Blob([Buffer.from('first')]), 'first.txt');
    form.append('file_name', 'first.txt');
    const up = await fetch(`${server.url}/api/v1/uploads`, {
      method: 'POST',
      body: form,
      headers: { 'x-api-key': ws.public_key },
    });
    assert.equal(up.status, 201, await up.text());
    assert.equal(await server.stop('SIGTERM'), 0);

    // A restart creates nothing and leaves the file as it was.
    const before = readFileSync(file, 'utf8');
    server = await startServer({ STOWAGE_DATA_DIR: dataDir, LOG_LEVEL: 'info' });
    assert.ok(!server.output().includes('first-workspace.json'), 'a restart says nothing of a first workspace');
    assert.equal(readFileSync(file, 'utf8'), before);
    assert.equal(await sources(ws.private_key), 200);
  });
});
