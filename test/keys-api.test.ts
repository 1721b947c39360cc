// API keys and webhook deliveries over HTTP (src/http/routes/keys.ts), on SQLite and PostgreSQL:
// keys are shown by hint only, a new key works and a revoked one does not, rotation keeps the old
// key for its grace period, another workspace's key or delivery is as unknown as a made-up one,
// the last private key cannot be revoked even by two revocations at once, and deliveries list
// with their outcome, page by cursor and can be sent again.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { DIALECTS, type Harness, makeHarness } from './helpers/harness.ts';
import { localServer } from './helpers/servers.ts';

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

for (const dialect of DIALECTS) {
  describe(`keys and deliveries API on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    let other: { workspace_id: string; public_key: string; private_key: string };

    before(async () => {
      h = await makeHarness(dialect.name, {
        config: { outboundAllow: ['127.0.0.1'], webhookRetrySchedule: [3600], webhookTimeoutMs: 2000 },
      });
      other = await h.services.workspaces.create('Other');
    });
    after(() => h?.close());

    const call = (method: string, url: string, key = h.ws.private_key, payload?: unknown) =>
      h.app.inject({ method: method as 'GET', url, headers: bearer(key), ...(payload ? { payload } : {}) });
    const whoAmI = async (key: string) => (await call('GET', '/api/v1/workspace', key)).statusCode;

    test('keys are listed by hint only; the public key cannot list, make or revoke keys', async () => {
      const res = await call('GET', '/api/v1/keys');
      assert.equal(res.statusCode, 200);
      const keys = res.json().data.keys as { id: string; type: string; hint: string; active: boolean }[];
      assert.deepEqual(keys.map((k) => k.type).sort(), ['private', 'public']);
      assert.ok(keys.every((k) => k.active));
      assert.ok(!res.body.includes(h.ws.private_key) && !res.body.includes(h.ws.public_key), 'no key in the answer');
      assert.ok(keys.some((k) => k.hint === `stw_sk_…${h.ws.private_key.slice(-4)}`));
      assert.ok(!/key_hash/.test(res.body));
      for (const [method, url, body] of [
        ['GET', '/api/v1/keys'],
        ['POST', '/api/v1/keys', { type: 'private' }],
        ['DELETE', `/api/v1/keys/${keys[0]!.id}`],
        ['POST', `/api/v1/keys/${keys[0]!.id}/rotate`, {}],
        ['GET', '/api/v1/webhooks/deliveries'],
      ] as const)
        assert.equal((await call(method, url, h.ws.public_key, body)).statusCode, 403, `${method} ${url}`);
      assert.equal((await h.app.inject({ method: 'GET', url: '/api/v1/keys' })).statusCode, 401);
    });

    test('a created key works at once and stops at once when revoked', async () => {
      const made = await call('POST', '/api/v1/keys', undefined, { type: 'private' });
      assert.equal(made.statusCode, 201);
      const key = made.json().data as { id: string; key: string; hint: string; active: boolean };
      assert.match(key.key, /^stw_sk_/);
      assert.equal(key.hint, `stw_sk_…${key.key.slice(-4)}`);
      assert.equal(await whoAmI(key.key), 200);
      const revoked = await call('DELETE', `/api/v1/keys/${key.id}`);
      assert.equal(revoked.statusCode, 200);
      assert.equal(revoked.json().data.active, false);
      assert.equal(await whoAmI(key.key), 401);
      // Unknown bodies and types are refused.
      assert.equal((await call('POST', '/api/v1/keys', undefined, { type: 'admin' })).statusCode, 400);
      assert.equal((await call('POST', '/api/v1/keys', undefined, { type: 'public', extra: 1 })).statusCode, 400);
    });

    test('rotation: a new key now, the old one for the grace period; revoking cuts the grace short', async () => {
      const made = (await call('POST', '/api/v1/keys', undefined, { type: 'public' })).json().data;
      const rotated = await call('POST', `/api/v1/keys/${made.id}/rotate`, undefined, { grace_seconds: 600 });
      assert.equal(rotated.statusCode, 200);
      const { old, new: fresh } = rotated.json().data;
      assert.equal(old.id, made.id);
      assert.equal(old.active, true, 'in its grace period');
      assert.ok(Date.parse(old.revoked_at) > Date.now() + 500_000);
      assert.match(fresh.key, /^stw_pk_/);
      assert.equal(await whoAmI(made.key), 403, 'the old public key still authenticates (403: not private)');
      assert.equal(await whoAmI(fresh.key), 403);
      assert.equal((await call('DELETE', `/api/v1/keys/${made.id}`)).statusCode, 200);
      assert.equal(await whoAmI(made.key), 401, 'revoked now, grace or not');
      assert.equal((await call('POST', `/api/v1/keys/${made.id}/rotate`, undefined, {})).statusCode, 400);
      assert.equal(
        (await call('POST', `/api/v1/keys/${fresh.id}/rotate`, undefined, { grace_seconds: -1 })).statusCode,
        400,
      );
    });

    test('a revocation racing a rotation with a grace period stays a revocation; a second rotation never extends the first', async () => {
      for (let round = 0; round < 16; round++) {
        const made = (await call('POST', '/api/v1/keys', undefined, { type: round % 2 ? 'public' : 'private' })).json()
          .data;
        const [revoked, rotated] = await Promise.all([
          call('DELETE', `/api/v1/keys/${made.id}`),
          call('POST', `/api/v1/keys/${made.id}/rotate`, undefined, { grace_seconds: 3600 }),
        ]);
        assert.equal(revoked.statusCode, 200, revoked.body);
        assert.ok([200, 400].includes(rotated.statusCode), rotated.body);
        assert.equal(await whoAmI(made.key), 401, `round ${round}: revoked, whatever the rotation did`);
      }
      const made = (await call('POST', '/api/v1/keys', undefined, { type: 'public' })).json().data;
      const first = (await call('POST', `/api/v1/keys/${made.id}/rotate`, undefined, { grace_seconds: 60 })).json()
        .data;
      const second = (await call('POST', `/api/v1/keys/${made.id}/rotate`, undefined, { grace_seconds: 3600 })).json()
        .data;
      assert.equal(second.old.revoked_at, first.old.revoked_at, 'the earlier end stands');
    });

    test("another workspace's key is unknown here: 404, and it keeps working", async () => {
      const theirs = (await h.services.workspaces.listKeys(other.workspace_id)).find((k) => k.type === 'private')!;
      assert.equal((await call('DELETE', `/api/v1/keys/${theirs.id}`)).statusCode, 404);
      assert.equal((await call('POST', `/api/v1/keys/${theirs.id}/rotate`, undefined, {})).statusCode, 404);
      assert.equal((await call('DELETE', '/api/v1/keys/not-a-key')).statusCode, 404);
      assert.equal((await call('DELETE', `/api/v1/keys/${'x'.repeat(65)}`)).statusCode, 400);
      assert.equal(await whoAmI(other.private_key), 200);
      assert.equal((await h.services.workspaces.listKeys(other.workspace_id)).length, 2, 'nothing made over there');
    });

    test('the last private key cannot be revoked, even by two revocations at once', async () => {
      const ws = await h.services.workspaces.create('Lonely');
      const mine = (await h.services.workspaces.listKeys(ws.workspace_id)).find((k) => k.type === 'private')!;
      const alone = await call('DELETE', `/api/v1/keys/${mine.id}`, ws.private_key);
      assert.equal(alone.statusCode, 409);
      assert.equal(alone.json().code, 'LAST_PRIVATE_KEY');
      assert.equal(await whoAmI(ws.private_key), 200);

      for (let round = 0; round < 5; round++) {
        const second = (await call('POST', '/api/v1/keys', ws.private_key, { type: 'private' })).json().data;
        const inForce = (await h.services.workspaces.listKeys(ws.workspace_id)).filter(
          (k) => k.type === 'private' && k.revoked_at === null,
        );
        assert.equal(inForce.length, 2);
        // Each revocation is sent with the other key, both at once.
        const [a, b] = await Promise.all([
          call('DELETE', `/api/v1/keys/${inForce[0]!.id}`, inForce[1]!.id === second.id ? second.key : ws.private_key),
          call('DELETE', `/api/v1/keys/${inForce[1]!.id}`, inForce[0]!.id === second.id ? second.key : ws.private_key),
        ]);
        const codes = [a.statusCode, b.statusCode].sort();
        const left = (await h.services.workspaces.listKeys(ws.workspace_id)).filter(
          (k) => k.type === 'private' && k.revoked_at === null,
        );
        assert.equal(left.length, 1, `round ${round}: answers ${codes.join(', ')}, ${left.length} private keys left`);
        // 200 + 409, or 200 + 401 when the second request's own key had just been revoked.
        assert.equal(codes.filter((c) => c === 200).length, 1, `round ${round}: ${codes.join(', ')}`);
        // Carry on with the survivor.
        if (left[0]!.id === second.id) ws.private_key = second.key;
      }
    });

    test('deliveries: listed newest first with their outcome, paged by cursor, sent again on request', async () => {
      let fail = true;
      const got: string[] = [];
      const receiver = await localServer((req, res) => {
        got.push(String(req.headers['webhook-id']));
        req.resume();
        req.on('end', () => res.writeHead(fail ? 500 : 204).end());
      });
      try {
        const ids: string[] = [];
        for (let i = 0; i < 23; i++) {
          const form = new FormData();
          form.append('file', new Blob([randomBytes(10)]), `d${i}.bin`);
          form.append('file_name', `d${i}.bin`);
          form.append('webhook_url', `${receiver.url}/hook?i=${i}`);
          const up = await h.app.inject({
            method: 'POST',
            url: '/api/v1/uploads',
            headers: bearer(h.ws.private_key),
            payload: form,
          });
          assert.equal(up.statusCode, 201, up.body);
          ids.push(up.json().file_no);
        }
        await h.services.webhooks.runOnce(100);
        assert.equal(got.length, 23);

        // Pages of 10: 10, 10, 3, no repeats, newest first.
        const seen: { id: string; file_no: string; status: string; last_status: number; attempts: number }[] = [];
        let cursor: string | null = null;
        do {
          const res = await call(
            'GET',
            `/api/v1/webhooks/deliveries?limit=10${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
          );
          assert.equal(res.statusCode, 200, res.body);
          seen.push(...res.json().data.deliveries);
          cursor = res.json().data.next_cursor;
        } while (cursor);
        assert.equal(seen.length, 23);
        assert.equal(new Set(seen.map((d) => d.id)).size, 23);
        assert.deepEqual(
          seen.map((d) => d.file_no),
          [...ids].reverse(),
          'newest first',
        );
        const first = seen[0]!;
        assert.deepEqual([first.status, first.last_status, first.attempts], ['pending', 500, 1]);
        assert.ok(!JSON.stringify(seen).includes('"payload"'), 'no payloads in the list');

        // Sent again now (not in an hour, as the schedule says): delivered, same id.
        fail = false;
        const again = await call('POST', `/api/v1/webhooks/deliveries/${first.id}/redeliver`);
        assert.equal(again.statusCode, 202);
        await h.services.webhooks.runOnce(100);
        assert.equal(got.filter((id) => id === first.id).length, 2, 'the same webhook-id twice');
        const delivered = await call('GET', '/api/v1/webhooks/deliveries?status=delivered');
        assert.deepEqual(
          delivered.json().data.deliveries.map((d: { id: string }) => d.id),
          [first.id],
        );
        // A delivered one may be sent once more.
        assert.equal((await call('POST', `/api/v1/webhooks/deliveries/${first.id}/redeliver`)).statusCode, 202);
        await h.services.webhooks.runOnce(100);
        assert.equal(got.filter((id) => id === first.id).length, 3);

        // Not across workspaces; bad cursors and filters are 400s.
        assert.equal(
          (await call('POST', `/api/v1/webhooks/deliveries/${first.id}/redeliver`, other.private_key)).statusCode,
          404,
        );
        assert.deepEqual((await call('GET', '/api/v1/webhooks/deliveries', other.private_key)).json().data, {
          deliveries: [],
          next_cursor: null,
        });
        assert.equal((await call('GET', '/api/v1/webhooks/deliveries?cursor=bm9wZQ')).statusCode, 400);
        assert.equal((await call('GET', '/api/v1/webhooks/deliveries?status=lost')).statusCode, 400);
        assert.equal((await call('GET', '/api/v1/webhooks/deliveries?limit=101')).statusCode, 400);
      } finally {
        await receiver.close();
      }
    });
  });
}
