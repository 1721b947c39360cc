// Slow and stalled clients over real sockets (slowloris played with node:net): headers that
// never finish are cut after STOWAGE_HEADERS_TIMEOUT_MS; a body that stops is cut after
// STOWAGE_BODY_IDLE_TIMEOUT_MS of silence, its connection freed and its partial upload removed,
// while a slow but steady body runs to its end however long it takes; everyone else is served
// meanwhile. And the per-workspace cap on uploads in progress (STOWAGE_MAX_CONCURRENT_UPLOADS):
// exact under parallel requests, covering direct, remote and part uploads, never leaking a slot.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type Config, ConfigError, loadConfig } from '../src/config.ts';
import { type Harness, makeHarness } from './helpers/harness.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(what: string, check: () => boolean | Promise<boolean>, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) assert.fail(`timed out waiting for: ${what}`);
    await sleep(20);
  }
}

/** A raw connection: what the server sent, and when it closed. */
interface Raw {
  socket: net.Socket;
  received(): string;
  /** Resolves with the milliseconds from open to close. */
  closed: Promise<number>;
  write(data: string | Buffer): void;
}

function connect(port: number): Raw {
  const socket = net.connect(port, '127.0.0.1');
  const opened = performance.now();
  let got = '';
  socket.on('data', (d) => (got += d.toString('latin1')));
  socket.on('error', () => {});
  const closed = new Promise<number>((resolve) => socket.on('close', () => resolve(performance.now() - opened)));
  return {
    socket,
    received: () => got,
    closed,
    write: (data) => {
      if (!socket.destroyed) socket.write(data);
    },
  };
}

/** The documented error shape `{success:false, error, errorCode, message}`. */
function assertErrorShape(body: any): void {
  assert.equal(body.success, false);
  for (const k of ['error', 'errorCode', 'message'])
    assert.equal(typeof body[k], 'string', `${k} in ${JSON.stringify(body)}`);
}

/** The JSON body of a raw HTTP answer. */
const bodyOf = (answer: string) => JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4));
const statusOf = (answer: string) => Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1]);

/** A direct upload's request head and form, split so that the file can be sent as slowly as wanted. */
function uploadRequest(
  auth: string,
  name: string,
  file: Buffer,
): { head: string; preamble: string; file: Buffer; tail: string } {
  const b = 'slowboundary';
  const preamble = `--${b}\r\nContent-Disposition: form-data; name="file_name"\r\n\r\n${name}\r\n--${b}\r\nContent-Disposition: form-data; name="file"; filename="${name}"\r\nContent-Type: application/octet-stream\r\n\r\n`;
  const tail = `\r\n--${b}--\r\n`;
  const length = Buffer.byteLength(preamble) + file.length + Buffer.byteLength(tail);
  const head = `POST /api/v1/uploads HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth}\r\nContent-Type: multipart/form-data; boundary=${b}\r\nContent-Length: ${length}\r\n\r\n`;
  return { head, preamble, file, tail };
}

test('timeouts and the cap are read and checked like every variable; a bad value stops the start with exit 78', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'stowage-slowcfg-'));
  try {
    const c = loadConfig({ STOWAGE_DATA_DIR: dir });
    assert.deepEqual(
      [c.bodyIdleTimeoutMs, c.headersTimeoutMs, c.keepAliveTimeoutMs, c.maxConcurrentUploads],
      [60_000, 30_000, 72_000, 32],
    );
    const set = loadConfig({
      STOWAGE_DATA_DIR: dir,
      STOWAGE_BODY_IDLE_TIMEOUT_MS: '0',
      STOWAGE_MAX_CONCURRENT_UPLOADS: '0',
      STOWAGE_HEADERS_TIMEOUT_MS: '5000',
      STOWAGE_KEEP_ALIVE_TIMEOUT_MS: '65000',
    });
    assert.deepEqual(
      [set.bodyIdleTimeoutMs, set.headersTimeoutMs, set.keepAliveTimeoutMs, set.maxConcurrentUploads],
      [0, 5000, 65_000, 0],
    );
    for (const [name, bad] of [
      ['STOWAGE_BODY_IDLE_TIMEOUT_MS', '10'],
      ['STOWAGE_BODY_IDLE_TIMEOUT_MS', '1m'],
      ['STOWAGE_HEADERS_TIMEOUT_MS', '0'],
      ['STOWAGE_KEEP_ALIVE_TIMEOUT_MS', '-5'],
      ['STOWAGE_MAX_CONCURRENT_UPLOADS', 'many'],
    ]) {
      assert.throws(
        () => loadConfig({ STOWAGE_DATA_DIR: dir, [name]: bad }),
        (err: unknown) => err instanceof ConfigError && err.problems.some((p) => p.startsWith(name)),
        `${name}=${bad}`,
      );
    }
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
      cwd: new URL('..', import.meta.url).pathname,
      env: { PATH: process.env.PATH, STOWAGE_DATA_DIR: dir, PORT: '0', STOWAGE_MAX_CONCURRENT_UPLOADS: 'lots' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const code = await new Promise((r) => child.on('exit', r));
    assert.equal(code, 78);
    assert.match(stderr, /STOWAGE_MAX_CONCURRENT_UPLOADS/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

describe('slow and stalled clients', () => {
  const HEADERS_MS = 1000;
  const IDLE_MS = 1000;
  let h: Harness;
  let base: string;
  let port: number;
  const tmpFiles = () => readdirSync(join(h.config.dataDir, 'storage', 'tmp'));
  const intents = async () => (await h.services.db.kysely.selectFrom('storage_intents').selectAll().execute()).length;
  const filesNamed = async (name: string) =>
    (await h.services.db.kysely.selectFrom('files').select('id').where('name', '=', name).execute()).length;
  const connections = () => new Promise<number>((r) => h.app.server.getConnections((_e, n) => r(n)));
  /** Others meanwhile: each answered, and fast. */
  const others = async (n = 10) => {
    const times: number[] = [];
    for (let i = 0; i < n; i++) {
      const t = performance.now();
      const res = await fetch(`${base}/api/v1/files`, { headers: h.auth });
      assert.equal(res.status, 200);
      await res.arrayBuffer();
      times.push(performance.now() - t);
    }
    return Math.max(...times);
  };

  before(async () => {
    h = await makeHarness('sqlite', { config: { headersTimeoutMs: HEADERS_MS, bodyIdleTimeoutMs: IDLE_MS } });
    base = await h.app.listen({ host: '127.0.0.1', port: 0 });
    port = Number(new URL(base).port);
  });
  after(() => h?.close());

  test('the Node server: no total request time limit, the configured header and keep-alive timeouts', () => {
    const server = h.app.server;
    assert.equal(server.requestTimeout, 0, 'a total time limit would cut long uploads');
    assert.equal(server.headersTimeout, HEADERS_MS);
    assert.equal(server.keepAliveTimeout, 72_000);
  });

  test('headers sent slowly, or not at all: cut with 408 in the error shape after the headers timeout; others are served meanwhile', async () => {
    const trickling = connect(port);
    trickling.write('GET /api/v1/files HTTP/1.1\r\nHost: x\r\nX-Slow: ');
    const drip = setInterval(() => trickling.write('a'), 100);
    const silent = connect(port);
    try {
      const slowest = await others(10);
      assert.ok(slowest < 1000, `others waited ${slowest.toFixed(0)} ms`);
      const [a, b] = await Promise.all([trickling.closed, silent.closed]);
      for (const [c, ms] of [
        [trickling, a],
        [silent, b],
      ] as const) {
        assert.ok(ms >= HEADERS_MS - 50 && ms < HEADERS_MS * 3 + 500, `cut after ${ms.toFixed(0)} ms`);
        assert.equal(statusOf(c.received()), 408, c.received());
        const body = bodyOf(c.received());
        assertErrorShape(body);
        assert.equal(body.errorCode, 'REQUEST_TIMEOUT');
      }
    } finally {
      clearInterval(drip);
      trickling.socket.destroy();
      silent.socket.destroy();
    }
  });

  test('a body that stops halfway: cut after the idle time, connection freed, nothing of the upload left (no temporary file, intent or row)', async () => {
    const before = await connections();
    const req = uploadRequest(h.auth.authorization, 'stalled.bin', randomBytes(4 * 1024 * 1024));
    const client = connect(port);
    client.write(req.head + req.preamble);
    client.write(req.file.subarray(0, 1536 * 1024)); // more than a write batch: bytes reach the temporary file
    await until('the upload writes its temporary file', () => tmpFiles().length > 0);
    await until('the upload holds its slot', () => h.app.uploadSlots.inUse(h.ws.workspace_id) === 1);
    const slowest = await others(5);
    assert.ok(slowest < 1000);
    const ms = await client.closed;
    assert.ok(ms >= IDLE_MS && ms < IDLE_MS * 4 + 1000, `cut after ${ms.toFixed(0)} ms`);
    assert.equal(statusOf(client.received()), 408, client.received());
    assert.equal(bodyOf(client.received()).errorCode, 'BODY_TIMEOUT');
    await until('the temporary file is removed', () => tmpFiles().length === 0);
    await until('the intent is removed', async () => (await intents()) === 0);
    assert.equal(await filesNamed('stalled.bin'), 0);
    await until('the slot is given back', () => h.app.uploadSlots.inUse() === 0);
    await until('the connection is freed', async () => (await connections()) <= before);
  });

  test('a multipart part that stops halfway: cut after the idle time; the part is not recorded', async () => {
    const start = await fetch(`${base}/api/v1/multipart/start`, {
      method: 'POST',
      headers: { ...h.auth, 'content-type': 'application/json' },
      body: JSON.stringify({
        file_name: 'stalled-part.bin',
        size: 6 * 1024 * 1024,
        format: 'application/octet-stream',
      }),
    });
    const s = (await start.json()) as { session_id: string; parts: string[] };
    const url = new URL(s.parts[0]);
    const client = connect(port);
    client.write(
      `PUT ${url.pathname}${url.search} HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: ${6 * 1024 * 1024}\r\n\r\n`,
    );
    client.write(randomBytes(2 * 1024 * 1024));
    await until('the part holds its slot', () => h.app.uploadSlots.inUse(h.ws.workspace_id) === 1);
    const ms = await client.closed;
    assert.ok(ms >= IDLE_MS && ms < IDLE_MS * 4 + 1000, `cut after ${ms.toFixed(0)} ms`);
    const status = (await (await fetch(`${base}/api/v1/multipart/${s.session_id}`, { headers: h.auth })).json()) as any;
    assert.deepEqual(status.data.uploaded_parts, []);
    await until('the slot is given back', () => h.app.uploadSlots.inUse() === 0);
    await fetch(`${base}/api/v1/multipart/${s.session_id}`, { method: 'DELETE', headers: h.auth });
  });

  test('a slow but steady body (a byte every 300 ms, for several idle times) is not cut; others are unaffected meanwhile', async () => {
    const content = Buffer.from('steady bytes, slowly');
    const req = uploadRequest(h.auth.authorization, 'steady.txt', content);
    const client = connect(port);
    client.write(req.head);
    const everything = Buffer.concat([Buffer.from(req.preamble), content, Buffer.from(req.tail)]);
    // The preamble at once, then the file a byte at a time: 20 bytes over 6 s, the idle time 1 s.
    const first = Buffer.byteLength(req.preamble);
    client.write(everything.subarray(0, first));
    const started = performance.now();
    let i = first;
    const drip = setInterval(() => {
      if (i < first + content.length) client.write(everything.subarray(i, ++i));
      else {
        client.write(everything.subarray(i));
        clearInterval(drip);
      }
    }, 300);
    try {
      const slowest = await others(10);
      assert.ok(slowest < 1000, `others waited ${slowest.toFixed(0)} ms`);
      await until('the answer', () => /\r\n\r\n\{.*\}$/s.test(client.received()), 15_000);
      assert.ok(performance.now() - started > IDLE_MS * 5, 'it took several idle times');
      assert.equal(statusOf(client.received()), 201, client.received());
      const record = bodyOf(client.received());
      assert.equal(record.size, content.length);
      const served = await fetch(`${base}/${h.ws.workspace_id}/steady.txt`);
      assert.equal(await served.text(), content.toString());
    } finally {
      clearInterval(drip);
      client.socket.destroy();
    }
  });

  test("the idle timer is the client's: an answer that takes longer than the idle time once the body is in is not cut", async () => {
    // A JSON body that arrives at once, then a slow origin behind a remote upload: no byte flows
    // on the client's connection for longer than the idle time while the server works.
    const origin = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      res.write('slow ');
      setTimeout(() => res.end('origin'), IDLE_MS * 2.5);
    });
    await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
    try {
      const remote = await makeRemoteHarness();
      try {
        const res = await fetch(`${remote.base}/api/v1/uploads/remote`, {
          method: 'POST',
          headers: { ...remote.h.auth, 'content-type': 'application/json' },
          body: JSON.stringify({ remote_url: `http://127.0.0.1:${(origin.address() as net.AddressInfo).port}/f.bin` }),
        });
        assert.equal(res.status, 201, await res.clone().text());
        assert.equal(((await res.json()) as any).size, 'slow origin'.length);
      } finally {
        await remote.h.close();
      }
    } finally {
      origin.close();
    }
  });
});

/** A harness whose outbound guard lets remote uploads reach loopback (for slow origins). */
async function makeRemoteHarness(config: Partial<Config> = {}) {
  const h = await makeHarness('sqlite', {
    config: {
      outboundAllow: ['127.0.0.0/8'],
      remoteTimeoutMs: 20_000,
      outboundTimeoutMs: 20_000,
      headersTimeoutMs: 1000,
      bodyIdleTimeoutMs: 1000,
      ...config,
    },
  });
  const base = await h.app.listen({ host: '127.0.0.1', port: 0 });
  return { h, base, port: Number(new URL(base).port) };
}

describe('concurrent uploads per workspace (STOWAGE_MAX_CONCURRENT_UPLOADS)', () => {
  const CAP = 4;
  let h: Harness;
  let base: string;
  let port: number;
  /** Release functions for an origin's held answers. */
  const held: (() => void)[] = [];
  let origin: http.Server;
  let originPort: number;

  /** A direct upload that sends its head and preamble, then waits for `finish()`. */
  const slowUpload = (name: string) => {
    const req = uploadRequest(h.auth.authorization, name, randomBytes(1000));
    const client = connect(port);
    client.write(req.head + req.preamble);
    return { client, finish: () => client.write(Buffer.concat([req.file, Buffer.from(req.tail)])) };
  };
  const answered = (c: Raw) => /\r\n\r\n\{.*\}$/s.test(c.received());
  const inUse = () => h.app.uploadSlots.inUse(h.ws.workspace_id);

  before(async () => {
    origin = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      res.write('held ');
      held.push(() => res.end('answer'));
    });
    await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
    originPort = (origin.address() as net.AddressInfo).port;
    ({ h, base, port } = await makeRemoteHarness({ maxConcurrentUploads: CAP, bodyIdleTimeoutMs: 60_000 }));
  });
  after(async () => {
    await h?.close();
    origin?.close();
  });

  test(`${CAP + 5} parallel slow uploads with a cap of ${CAP}: exactly 5 refused 429 with retry-after while the others run; then every slot is free`, async (t) => {
    const uploads = Array.from({ length: CAP + 5 }, (_, i) => slowUpload(`parallel-${i}.bin`));
    t.after(() => {
      for (const u of uploads) u.client.socket.destroy();
    });
    await until('5 refusals', () => uploads.filter((u) => answered(u.client)).length === 5);
    await sleep(300);
    const refused = uploads.filter((u) => answered(u.client));
    assert.equal(refused.length, 5, 'exactly 5, and no more later');
    assert.equal(inUse(), CAP);
    for (const u of refused) {
      const text = u.client.received();
      assert.equal(statusOf(text), 429, text);
      assert.match(text, /\r\nretry-after: 5\r\n/i);
      const body = bodyOf(text);
      assertErrorShape(body);
      assert.equal(body.errorCode, 'TOO_MANY_UPLOADS');
      assert.equal(body.retryAfterSeconds, 5);
    }
    const running = uploads.filter((u) => !answered(u.client));
    for (const u of running) u.finish();
    await until('the others finish', () => running.every((u) => answered(u.client)));
    for (const u of running) assert.equal(statusOf(u.client.received()), 201, u.client.received());
    await until('every slot is free', () => h.app.uploadSlots.inUse() === 0);
  });

  test('aborted uploads give their slots back: the count returns to 0 and nothing is left behind', async () => {
    for (let round = 0; round < 3; round++) {
      const uploads = Array.from({ length: CAP }, (_, i) => slowUpload(`aborted-${round}-${i}.bin`));
      await until(`round ${round}: ${CAP} slots taken`, () => inUse() === CAP);
      // Some after a few body bytes, some at once.
      for (const [i, u] of uploads.entries()) {
        if (i % 2) u.client.write(randomBytes(100));
        u.client.socket.destroy();
      }
      await until(`round ${round}: every slot free`, () => h.app.uploadSlots.inUse() === 0);
    }
    await until(
      'no intent left',
      async () => (await h.services.db.kysely.selectFrom('storage_intents').selectAll().execute()).length === 0,
    );
    assert.deepEqual(readdirSync(join(h.config.dataDir, 'storage', 'tmp')), []);
    // And uploads are taken again.
    const form = new FormData();
    form.append('file_name', 'after.txt');
    form.append('file', new Blob(['after']));
    assert.equal((await fetch(`${base}/api/v1/uploads`, { method: 'POST', headers: h.auth, body: form })).status, 201);
    assert.equal(h.app.uploadSlots.inUse(), 0);
  });

  test('remote uploads and multipart part PUTs count too; other workspaces are not affected', async () => {
    const remote = (name: string) =>
      fetch(`${base}/api/v1/uploads/remote`, {
        method: 'POST',
        headers: { ...h.auth, 'content-type': 'application/json' },
        body: JSON.stringify({ remote_url: `http://127.0.0.1:${originPort}/${name}`, file_name: name }),
      });
    const remotes = [remote('r1.bin'), remote('r2.bin')];
    await until('the origin has both requests', () => held.length === 2);
    const start = await fetch(`${base}/api/v1/multipart/start`, {
      method: 'POST',
      headers: { ...h.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ file_name: 'parts.bin', size: 2 * 1024 * 1024, format: 'application/octet-stream' }),
    });
    const s = (await start.json()) as { session_id: string; parts: string[] };
    const url = new URL(s.parts[0]);
    const partHead = `PUT ${url.pathname}${url.search} HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: ${2 * 1024 * 1024}\r\n\r\n`;
    const part = connect(port);
    part.write(partHead);
    const direct = slowUpload('d1.bin');
    await until(`${CAP} slots taken`, () => inUse() === CAP);
    // A fifth of each kind is refused.
    const extraPart = connect(port);
    extraPart.write(partHead);
    const extraDirect = slowUpload('d2.bin');
    const extraRemote = await remote('r3.bin');
    assert.equal(extraRemote.status, 429);
    assert.equal(extraRemote.headers.get('retry-after'), '5');
    assert.equal(((await extraRemote.json()) as any).errorCode, 'TOO_MANY_UPLOADS');
    await until('the extra part and upload are refused', () => answered(extraPart) && answered(extraDirect.client));
    assert.equal(statusOf(extraPart.received()), 429);
    assert.equal(statusOf(extraDirect.client.received()), 429);
    // Another workspace has slots of its own.
    const other = await h.services.workspaces.create('Other');
    const form = new FormData();
    form.append('file_name', 'other.txt');
    form.append('file', new Blob(['other']));
    assert.equal(
      (
        await fetch(`${base}/api/v1/uploads`, {
          method: 'POST',
          headers: { authorization: `Bearer ${other.private_key}` },
          body: form,
        })
      ).status,
      201,
    );
    // Everything finishes; every slot comes back.
    for (const release of held.splice(0)) release();
    for (const r of await Promise.all(remotes)) assert.equal(r.status, 201);
    part.write(randomBytes(2 * 1024 * 1024));
    direct.finish();
    await until('the part and the upload finish', () => answered(part) && answered(direct.client));
    assert.equal(statusOf(part.received()), 200, part.received());
    assert.equal(statusOf(direct.client.received()), 201, direct.client.received());
    await until('every slot is free', () => h.app.uploadSlots.inUse() === 0);
    for (const c of [part, extraPart, direct.client, extraDirect.client]) c.socket.destroy();
  });

  test('token uploads count too, once the token names the workspace; a refused token stays unused', async () => {
    const minted = await fetch(`${base}/api/v1/generate-token`, {
      method: 'POST',
      headers: { ...h.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ file_name: 'token.txt' }),
    });
    const { token } = (await minted.json()) as { token: string };
    const uploads = Array.from({ length: CAP }, (_, i) => slowUpload(`tok-hold-${i}.bin`));
    try {
      await until(`${CAP} slots taken`, () => inUse() === CAP);
      const refused = await fetch(`${base}/api/v1/uploads/${token}`, { method: 'POST', body: 'token bytes' });
      assert.equal(refused.status, 429);
      assert.equal(refused.headers.get('retry-after'), '5');
    } finally {
      for (const u of uploads) u.client.socket.destroy();
    }
    await until('every slot is free', () => h.app.uploadSlots.inUse() === 0);
    const res = await fetch(`${base}/api/v1/uploads/${token}`, { method: 'POST', body: 'token bytes' });
    assert.equal(res.status, 201, 'the refused token was not spent');
  });
});
