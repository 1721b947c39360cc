// Webhooks (docs/api/webhooks.md): queued with the upload, signed the Standard Webhooks way
// (checked with the independent `standardwebhooks` package), retried with backoff under the
// same id, durable across a restart, and claimed by one worker at a time.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { Webhook } from 'standardwebhooks';
import { createServices } from '../src/services/container.ts';
import { DIALECTS, type Harness, makeHarness } from './helpers/harness.ts';
import { localServer } from './helpers/servers.ts';

interface Received {
  headers: Record<string, string>;
  body: string;
}

async function receiver(behaviour: (n: number) => 'ok' | 'fail' | 'hang') {
  const got: Received[] = [];
  const server = await localServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      got.push({ headers: req.headers as Record<string, string>, body });
      const what = behaviour(got.length);
      if (what === 'ok') res.writeHead(204).end();
      else if (what === 'fail') res.writeHead(500).end('nope');
      // 'hang': never answer; the sender's timeout ends it.
    });
  });
  return { ...server, got };
}

async function until(cond: () => boolean | Promise<boolean>, step: () => Promise<unknown>, ms = 15_000) {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await step();
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function upload(base: string, key: string, webhookUrl: string, name = `f-${randomBytes(4).toString('hex')}.bin`) {
  const form = new FormData();
  form.append('file', new Blob([randomBytes(1000)]), name);
  form.append('file_name', name);
  form.append('webhook_url', webhookUrl);
  const res = await fetch(`${base}/api/v1/uploads`, { method: 'POST', body: form, headers: { 'x-api-key': key } });
  return { status: res.status, body: (await res.json()) as any };
}

describe('webhooks', () => {
  let h: Harness;
  let base: string;
  before(async () => {
    h = await makeHarness('sqlite', {
      config: { outboundAllow: ['127.0.0.1'], webhookRetrySchedule: [1, 1, 1], webhookTimeoutMs: 700 },
    });
    base = await h.app.listen({ host: '127.0.0.1', port: 0 });
  });
  after(() => h?.close());

  test('upload.completed arrives signed; an independent implementation verifies it; the data is the record', async () => {
    const r = await receiver(() => 'ok');
    try {
      const up = await upload(base, h.ws.private_key, `${r.url}/hooks`);
      assert.equal(up.status, 201);
      await until(
        () => r.got.length === 1,
        () => h.services.webhooks.runOnce(),
      );
      const msg = r.got[0];
      const verified = new Webhook(h.ws.webhook_secret).verify(msg.body, msg.headers) as any;
      assert.equal(verified.type, 'upload.completed');
      assert.equal(verified.workspace_id, h.ws.workspace_id);
      assert.match(verified.id, /^msg_/);
      assert.equal(msg.headers['webhook-id'], verified.id);
      assert.deepEqual(verified.data, up.body.data, 'the record (the upload answer has it flat and in data)');
      assert.throws(
        () => new Webhook(Buffer.alloc(32, 1).toString('base64')).verify(msg.body, msg.headers),
        'another secret does not verify',
      );
      assert.throws(
        () =>
          new Webhook(h.ws.webhook_secret).verify(msg.body.replace('upload.completed', 'upload.deleted'), msg.headers),
        'a changed body does not verify',
      );
    } finally {
      await r.close();
    }
  });

  test('a receiver that fails, then times out, then recovers: retried with backoff under one id', async () => {
    const r = await receiver((n) => (n <= 2 ? 'fail' : n === 3 ? 'hang' : 'ok'));
    try {
      await upload(base, h.ws.private_key, `${r.url}/flaky`);
      const started = Date.now();
      await until(
        () => r.got.length === 4,
        () => h.services.webhooks.runOnce(),
        20_000,
      );
      const ids = new Set(r.got.map((g) => g.headers['webhook-id']));
      assert.equal(ids.size, 1, 'the same message id on every attempt');
      assert.ok(Date.now() - started >= 2500, 'attempts were spaced by the schedule');
      for (const g of r.got) new Webhook(h.ws.webhook_secret).verify(g.body, g.headers);
      const row = await h.services.db.kysely
        .selectFrom('webhook_deliveries')
        .selectAll()
        .where('id', '=', [...ids][0])
        .executeTakeFirstOrThrow();
      assert.equal(row.status, 'delivered');
      assert.equal(row.attempts, 4);
    } finally {
      await r.close();
    }
  });

  test('a receiver that never recovers: the delivery fails after the last scheduled attempt', async () => {
    const r = await receiver(() => 'fail');
    try {
      await upload(base, h.ws.private_key, `${r.url}/dead`);
      await until(
        async () => (await h.services.webhooks.counts()).failed === 1,
        () => h.services.webhooks.runOnce(),
        20_000,
      );
      assert.equal(r.got.length, 4, 'one attempt plus one per scheduled retry');
      await new Promise((res) => setTimeout(res, 1200));
      await h.services.webhooks.runOnce();
      assert.equal(r.got.length, 4, 'no attempts after failing');
    } finally {
      await r.close();
    }
  });

  test('remote and multipart uploads notify too, with their records', async () => {
    const r = await receiver(() => 'ok');
    const origin = await localServer((_req, res) => res.writeHead(200).end(randomBytes(3000)));
    try {
      const remote = await fetch(`${base}/api/v1/uploads/remote`, {
        method: 'POST',
        headers: { 'x-api-key': h.ws.private_key, 'content-type': 'application/json' },
        body: JSON.stringify({ remote_url: `${origin.url}/a.bin`, webhook_url: `${r.url}/remote` }),
      });
      const remoteRecord = ((await remote.json()) as any).data;
      assert.equal(remote.status, 201);
      (h.services.multipart as any).settings.publicUrl = base;
      const start = await fetch(`${base}/api/v1/multipart/start`, {
        method: 'POST',
        headers: { 'x-api-key': h.ws.private_key, 'content-type': 'application/json' },
        body: JSON.stringify({
          file_name: 'mp.bin',
          size: 1000,
          format: 'application/octet-stream',
          webhook_url: `${r.url}/multipart`,
        }),
      });
      const session = (await start.json()) as any;
      await fetch(session.parts[0], {
        method: 'PUT',
        body: randomBytes(1000),
        headers: { 'content-type': 'application/octet-stream' },
      });
      const done = await fetch(`${base}/api/v1/multipart/complete`, {
        method: 'POST',
        headers: { 'x-api-key': h.ws.private_key, 'content-type': 'application/json' },
        body: JSON.stringify({ session_id: session.session_id }),
      });
      const mpRecord = ((await done.json()) as any).data; // the answer is the record flat plus success and data
      await until(
        () => r.got.length === 2,
        () => h.services.webhooks.runOnce(),
      );
      const byPath = Object.fromEntries(
        r.got.map((g) => [g.headers['webhook-id'], new Webhook(h.ws.webhook_secret).verify(g.body, g.headers) as any]),
      );
      const events = Object.values(byPath);
      assert.deepEqual(events.map((e) => e.data.upload_source).sort(), ['multipart', 'remote']);
      assert.deepEqual(events.find((e) => e.data.upload_source === 'remote').data, remoteRecord);
      assert.deepEqual(events.find((e) => e.data.upload_source === 'multipart').data, mpRecord);
    } finally {
      await r.close();
      await origin.close();
    }
  });

  test('a webhook_url at a private address is refused when the upload is made', async () => {
    const strict = await makeHarness('sqlite');
    const strictBase = await strict.app.listen({ host: '127.0.0.1', port: 0 });
    try {
      for (const url of ['http://127.0.0.1:9/x', 'http://169.254.169.254/latest', 'http://[::1]/x']) {
        const res = await upload(strictBase, strict.ws.private_key, url);
        assert.equal(res.status, 400, url);
        assert.equal(res.body.errorCode, 'URL_REFUSED');
        assert.match(res.body.message, /^webhook_url/);
      }
      assert.equal(
        (await strict.services.db.kysely.selectFrom('files').select('id').execute()).length,
        0,
        'refused uploads stored nothing',
      );
    } finally {
      await strict.close();
    }
  });
});

for (const dialect of DIALECTS) {
  describe(`webhook durability and claiming on ${dialect.name}`, { skip: dialect.skip }, () => {
    test('with the job runner started, deliveries go out by themselves, retries too', async () => {
      const r = await receiver((n) => (n === 1 ? 'fail' : 'ok'));
      const h = await makeHarness(dialect.name, {
        config: { outboundAllow: ['127.0.0.1'], webhookPollMs: 50, webhookRetrySchedule: [1] },
      });
      try {
        await h.services.jobs.start();
        const base = await h.app.listen({ host: '127.0.0.1', port: 0 });
        assert.equal((await upload(base, h.ws.private_key, `${r.url}/auto`)).status, 201);
        const deadline = Date.now() + 15_000;
        while (r.got.length < 2 && Date.now() < deadline) await new Promise((res) => setTimeout(res, 50));
        assert.equal(r.got.length, 2, 'a failed first attempt and its retry');
        assert.equal(r.got[0].headers['webhook-id'], r.got[1].headers['webhook-id']);
        const delivery = () =>
          h.services.db.kysely.selectFrom('webhook_deliveries').selectAll().executeTakeFirstOrThrow();
        await until(
          async () => (await delivery()).status === 'delivered',
          async () => {},
        );
        const row = await delivery();
        assert.equal(row.id, r.got[0].headers['webhook-id']);
        assert.equal(row.attempts, 2);
      } finally {
        await r.close();
        await h.close();
      }
    });

    test('a pending delivery whose job was lost is queued again and sent once', async () => {
      const r = await receiver(() => 'ok');
      const h = await makeHarness(dialect.name, { config: { outboundAllow: ['127.0.0.1'] } });
      try {
        const base = await h.app.listen({ host: '127.0.0.1', port: 0 });
        assert.equal((await upload(base, h.ws.private_key, `${r.url}/lost`)).status, 201);
        const { id } = await h.services.db.kysely
          .selectFrom('webhook_deliveries')
          .select('id')
          .executeTakeFirstOrThrow();
        if (dialect.name === 'postgres') {
          // The job is gone (as after a node died and its lock was cleared by hand).
          await sql`select graphile_worker.remove_job(${`webhook:${id}`})`.execute(h.services.db.kysely);
          assert.equal(await h.services.jobs.runDue('webhook.deliver'), 0, 'no job left');
        }
        // A fresh node (on SQLite: the restart of the one process) has no job for it either.
        const node = await createServices(h.config);
        try {
          assert.equal(await node.webhooks.requeue(), 1);
          assert.equal(await node.webhooks.requeue(), 0, 'queued once');
          await until(
            () => r.got.length === 1,
            () => node.webhooks.runOnce(),
          );
          assert.equal(r.got[0].headers['webhook-id'], id);
          await node.webhooks.runOnce();
          await h.services.webhooks.runOnce();
          assert.equal(r.got.length, 1, 'sent once');
        } finally {
          await node.close();
        }
      } finally {
        await r.close();
        await h.close();
      }
    });

    test('deliveries pending at shutdown are sent after a restart, exactly once each by two workers', async () => {
      const r = await receiver(() => 'ok');
      const h = await makeHarness(dialect.name, { config: { outboundAllow: ['127.0.0.1'] } });
      try {
        const base = await h.app.listen({ host: '127.0.0.1', port: 0 });
        for (let i = 0; i < 12; i++) assert.equal((await upload(base, h.ws.private_key, `${r.url}/n${i}`)).status, 201);
        assert.equal((await h.services.webhooks.counts()).pending, 12);
        await h.app.close();
        await h.services.close();
        // "Restart": two fresh nodes over the same database, working at the same time.
        const nodes = await Promise.all([createServices(h.config), createServices(h.config)]);
        try {
          if (dialect.name === 'postgres')
            await Promise.all(nodes.map((n) => n.webhooks.runOnce(5)).concat(nodes.map((n) => n.webhooks.runOnce(5))));
          else for (const n of nodes) await n.webhooks.runOnce(7);
          await until(
            async () => (await nodes[0].webhooks.counts()).pending === 0,
            () => nodes[1].webhooks.runOnce(),
          );
          const ids = r.got.map((g) => g.headers['webhook-id']);
          assert.equal(ids.length, 12);
          assert.equal(new Set(ids).size, 12, 'no delivery was sent twice');
        } finally {
          await Promise.all(nodes.map((n) => n.close()));
        }
      } finally {
        await r.close();
        await h.close();
      }
    });
  });
}
