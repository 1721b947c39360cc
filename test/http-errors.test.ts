// The error model of docs/api.md#errors for requests that never
// reach a handler: unknown routes, wrong methods, bad bodies; plus health and API docs.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildApp } from '../src/app.ts';
import { createServices } from '../src/services/container.ts';
import { type Harness, makeHarness, testConfig } from './helpers/harness.ts';
import { call } from './helpers/http.ts';

function assertShape(res: { status: number; body: any }, status: number, errorCode: string) {
  assert.equal(res.status, status, JSON.stringify(res.body));
  assert.equal(res.body.success, false);
  assert.equal(typeof res.body.error, 'string');
  assert.equal(typeof res.body.message, 'string');
  assert.equal(res.body.errorCode, errorCode);
  assert.equal(res.body.code, errorCode, 'code repeats errorCode (the hosted API reads code)');
}

describe('HTTP error model', () => {
  let h: Harness;
  before(async () => {
    h = await makeHarness('sqlite', { config: { jsonBodyLimit: 4096 } });
  });
  after(() => h?.close());

  test('unknown routes are 404 in the error shape', async () => {
    assertShape(await call(h.app, 'GET', '/api/v1/nothing-here'), 404, 'ROUTE_NOT_FOUND');
    assertShape(await call(h.app, 'POST', '/nope', { body: {} }), 404, 'ROUTE_NOT_FOUND');
  });

  test('a wrong method on a known path is 405 with Allow', async () => {
    const res = await call(h.app, 'PUT', '/api/v1/sources', { headers: h.auth, body: {} });
    assertShape(res, 405, 'METHOD_NOT_ALLOWED');
    assert.equal(res.headers.allow, 'GET, POST');
    const one = await call(h.app, 'POST', '/api/v1/sources/00000000-0000-4000-8000-000000000000', { headers: h.auth });
    assertShape(one, 405, 'METHOD_NOT_ALLOWED');
    assert.equal(one.headers.allow, 'DELETE, GET, PATCH');
  });

  test('router-level errors keep the shape: an over-long id is not found, a malformed URL 400', async () => {
    const long = await call(h.app, 'GET', `/api/v1/sources/${'a'.repeat(500)}`, { headers: h.auth });
    assertShape(long, 404, 'ROUTE_NOT_FOUND');
    assert.ok(!long.raw.includes('a'.repeat(200)), 'the URL is not echoed whole');
    assertShape(await call(h.app, 'GET', '/api/v1/sources/%E0%A4%A', { headers: h.auth }), 400, 'BAD_URL');
  });

  test('malformed JSON is 400; an empty JSON body counts as {} (then validated as such)', async () => {
    for (const raw of ['{bad', '{"name":', '[1,2', '\u0000']) {
      assertShape(
        await call(h.app, 'POST', '/api/v1/sources', {
          headers: { ...h.auth, 'content-type': 'application/json' },
          rawBody: raw,
        }),
        400,
        'INVALID_JSON',
      );
    }
    // {} lacks the required fields: the validation error, not "invalid JSON".
    assertShape(
      await call(h.app, 'POST', '/api/v1/sources', {
        headers: { ...h.auth, 'content-type': 'application/json' },
        rawBody: '',
      }),
      400,
      'VALIDATION_FAILED',
    );
    assertShape(
      await call(h.app, 'POST', '/api/v1/sources', {
        headers: { ...h.auth, 'content-type': 'application/json' },
        rawBody: '  \n',
      }),
      400,
      'VALIDATION_FAILED',
    );
  });

  test('prototype-polluting JSON is refused', async () => {
    const res = await call(h.app, 'POST', '/api/v1/sources', {
      headers: { ...h.auth, 'content-type': 'application/json' },
      rawBody:
        '{"name":"p","type":"image_source","configuration":{"base_url":"https://x.example.com"},"__proto__":{"polluted":true}}',
    });
    assert.equal(res.status, 400);
    assert.equal(({} as any).polluted, undefined);
  });

  test('an unsupported content type is 415', async () => {
    for (const type of ['text/plain', 'application/xml', 'application/x-www-form-urlencoded']) {
      assertShape(
        await call(h.app, 'POST', '/api/v1/sources', {
          headers: { ...h.auth, 'content-type': type },
          rawBody: 'name=x',
        }),
        415,
        'UNSUPPORTED_MEDIA_TYPE',
      );
    }
  });

  test('a body over the limit is 413 and creates nothing', async () => {
    const body = {
      name: 'big',
      type: 'image_source',
      configuration: { base_url: `https://x.example.com/${'a'.repeat(8000)}` },
    };
    assertShape(await call(h.app, 'POST', '/api/v1/sources', { headers: h.auth, body }), 413, 'PAYLOAD_TOO_LARGE');
    const list = await call(h.app, 'GET', '/api/v1/sources', { headers: h.auth });
    assert.equal(list.body.meta.total, 0);
  });

  test('auth comes before body parsing: no key and a bad body is still 401', async () => {
    const res = await call(h.app, 'POST', '/api/v1/sources', {
      headers: { 'content-type': 'application/json' },
      rawBody: '{bad',
    });
    assertShape(res, 401, 'UNAUTHORIZED');
  });

  test('healthz and readyz', async () => {
    assert.deepEqual((await call(h.app, 'GET', '/healthz')).body, { status: 'ok' });
    const ready = await call(h.app, 'GET', '/readyz');
    assert.equal(ready.status, 200);
    assert.deepEqual(ready.body, { status: 'ready', checks: { database: 'ok', storage: 'ok' } });
  });

  test('/openapi.json is an OpenAPI 3 document generated from the routes; /docs serves Swagger UI', async () => {
    const doc = (await call(h.app, 'GET', '/openapi.json')).body;
    assert.match(doc.openapi, /^3\./);
    for (const path of ['/api/v1/sources', '/api/v1/sources/{sourceId}', '/api/v1/sources/{sourceId}/test'])
      assert.ok(doc.paths[path], path);
    assert.deepEqual(Object.keys(doc.paths['/api/v1/sources/{sourceId}']).sort(), ['delete', 'get', 'patch']);
    const create = doc.paths['/api/v1/sources'].post;
    assert.ok(create.responses['201'] && create.responses['409'] && create.responses['400']);
    assert.ok(doc.components.schemas.Source && doc.components.schemas.ErrorBody);
    const ui = await h.app.inject({ method: 'GET', url: '/docs/' });
    assert.equal(ui.statusCode, 200);
    assert.match(ui.body, /swagger/i);
  });
});

describe('a refusal before the body is read reaches the client', () => {
  // A wrong key on an upload is refused before the form is read. The answer used to go out
  // with Connection: close while the client was still sending: the connection then closed
  // with unread bytes, the kernel reset it, and the client got EPIPE or ECONNRESET ("fetch
  // failed") instead of the 401. A small body is now read to its end first.
  let h: Harness;
  let port: number;
  before(async () => {
    h = await makeHarness('sqlite');
    port = Number(new URL(await h.app.listen({ host: '127.0.0.1', port: 0 })).port);
  });
  after(() => h?.close());

  /**
   * Sends `body` to the uploads route with `key`, 16 KiB every few milliseconds, the whole body
   * whatever the server says meanwhile (as HTTP clients do: allowHalfOpen keeps writing after
   * the server's FIN); what came back, and any socket error.
   */
  const slowUpload = (key: string, body: Buffer, boundary = 'xyz') =>
    new Promise<{ answer: string; error?: string }>((resolve) => {
      const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
      const size = body.length;
      let answer = '';
      let error: string | undefined;
      let sent = 0;
      let serverDone = false;
      socket.on('data', (d) => (answer += d.toString('latin1')));
      socket.on('error', (e: NodeJS.ErrnoException) => (error ??= e.code ?? e.message));
      socket.on('end', () => {
        serverDone = true;
        if (sent >= size) socket.end();
      });
      socket.on('close', () => resolve({ answer, error }));
      socket.write(
        `POST /api/v1/uploads HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: ${key}\r\n` +
          `Content-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: ${size}\r\nConnection: close\r\n\r\n`,
      );
      const next = () => {
        if (socket.destroyed) return;
        if (sent >= size) return void (serverDone && socket.end());
        const chunk = body.subarray(sent, sent + 16 * 1024);
        sent += chunk.length;
        socket.write(chunk, () => setTimeout(next, 5));
      };
      next();
    });

  test('a wrong key on a 600 KB upload answers 401 to a client still sending, five times out of five', async () => {
    for (let i = 0; i < 5; i++) {
      const { answer, error } = await slowUpload('stw_pk_not_a_real_key_0000000000000000', Buffer.alloc(600_000, 0x61));
      assert.equal(error, undefined, `round ${i}: the client's socket failed (${error}) before it read the answer`);
      assert.match(answer, /^HTTP\/1\.1 401 /, `round ${i}`);
      assert.match(answer, /"errorCode":"UNAUTHORIZED"/);
    }
  });

  test('a file over the maximum size, refused while the form is being read, answers 413 to a client still sending', async () => {
    // Regression (a CI flake in the black-box quota test): the refusal came while the body was
    // piped into the form parser, so it was not read to its end, and the client got EPIPE.
    const other = await h.services.workspaces.create('Small files');
    await h.services.workspaces.setLimits(other.workspace_id, { maxFileSize: 100_000 });
    const form = Buffer.concat([
      Buffer.from('--b0\r\nContent-Disposition: form-data; name="file_name"\r\n\r\nbig.bin\r\n'),
      Buffer.from('--b0\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\n'),
      Buffer.from('Content-Type: application/octet-stream\r\n\r\n'),
      Buffer.alloc(500_000, 0x62),
      Buffer.from('\r\n--b0--\r\n'),
    ]);
    for (let i = 0; i < 3; i++) {
      const { answer, error } = await slowUpload(other.public_key, form, 'b0');
      assert.equal(error, undefined, `round ${i}: the client's socket failed (${error}) before it read the answer`);
      assert.match(answer, /^HTTP\/1\.1 413 /, `round ${i}`);
      assert.match(answer, /"errorCode":"FILE_TOO_LARGE"/);
    }
  });
});

describe('unexpected errors', () => {
  test('a thrown bug becomes a 500 with no internals, and is logged', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'stowage-test-'));
    const services = await createServices(testConfig(dataDir));
    const logs: string[] = [];
    const app = await buildApp(services, { logger: { level: 'info', stream: { write: (l: string) => logs.push(l) } } });
    app.get('/__boom', async () => {
      throw new Error('secret internal detail');
    });
    try {
      const res = await call(app, 'GET', '/__boom');
      assertShape(res, 500, 'INTERNAL_ERROR');
      assert.ok(!res.raw.includes('secret internal detail'));
      assert.ok(
        logs.some((l) => l.includes('secret internal detail')),
        'the cause is in the log for operators',
      );
    } finally {
      await app.close();
      await services.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('readiness reflects the database', () => {
  test('readyz is 503 when the database is gone; healthz stays 200', async () => {
    const h = await makeHarness('sqlite');
    try {
      await h.services.db.close();
      const res = await call(h.app, 'GET', '/readyz');
      assert.equal(res.status, 503);
      assert.equal(res.body.checks.database, 'unavailable');
      assert.equal((await call(h.app, 'GET', '/healthz')).status, 200);
    } finally {
      await h.app.close();
    }
  });
});
