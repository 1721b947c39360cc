// Quota is a reservation, not a check: uploads in parallel can never together pass a
// workspace's quota, and what they reserve is given back on abort, expiry, failure and sweep.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { DIALECTS, type Harness, makeHarness } from './helpers/harness.ts';

const MiB = 1024 * 1024;

for (const dialect of DIALECTS) {
  describe(`quota reservations on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    let base: string;

    before(async () => {
      h = await makeHarness(dialect.name, { config: { storage: { driver: 'local', fsync: false } } });
      base = await h.app.listen({ host: '127.0.0.1', port: 0 });
    });
    after(() => h?.close());

    const usage = async () => {
      const ws = await h.services.db.kysely
        .selectFrom('workspaces')
        .select(['used_bytes', 'reserved_bytes', 'quota_bytes'])
        .where('id', '=', h.ws.workspace_id)
        .executeTakeFirstOrThrow();
      return { used: Number(ws.used_bytes), reserved: Number(ws.reserved_bytes) };
    };
    const blobsTotal = async () =>
      (
        await h.services.db.kysely
          .selectFrom('blobs')
          .select('size')
          .where('workspace_id', '=', h.ws.workspace_id)
          .execute()
      ).reduce((n, b) => n + Number(b.size), 0);
    const api = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${base}${path}`, {
        method,
        headers: { 'x-api-key': h.ws.private_key, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      });
      return { status: res.status, body: (await res.json()) as any };
    };
    const direct = async (data: Buffer, name: string) => {
      const form = new FormData();
      form.append('file_name', name);
      form.append('file', new Blob([new Uint8Array(data)]), name);
      const res = await fetch(`${base}/api/v1/uploads`, {
        method: 'POST',
        body: form,
        headers: { 'x-api-key': h.ws.private_key },
      });
      return { status: res.status, body: (await res.json()) as any };
    };
    const setQuota = (bytes: number | null) =>
      h.services.workspaces.setLimits(h.ws.workspace_id, { quotaBytes: bytes });
    const clearFiles = async () => {
      for (const f of (await h.services.files.list(h.ws.workspace_id, { page: 1, limit: 100 })).files)
        await h.services.files.delete(h.ws.workspace_id, f.file_no);
    };

    test('six parallel 8 MiB multipart starts against 20 MiB: exactly two get sessions; abort and expiry give the bytes back', async () => {
      await setQuota(20 * MiB);
      try {
        const starts = await Promise.all(
          Array.from({ length: 6 }, (_, i) =>
            api('POST', '/api/v1/multipart/start', {
              file_name: `p${i}.bin`,
              size: 8 * MiB,
              format: 'application/octet-stream',
            }),
          ),
        );
        const ok = starts.filter((s) => s.status === 201);
        assert.equal(ok.length, 2, JSON.stringify(starts.map((s) => s.status)));
        for (const s of starts.filter((x) => x.status !== 201))
          assert.equal(s.body.errorCode, 'STORAGE_LIMIT_EXCEEDED');
        assert.deepEqual(await usage(), { used: 0, reserved: 16 * MiB });
        const settings = await api('GET', '/api/v1/workspace');
        assert.equal(settings.body.data.reserved_bytes, 16 * MiB, 'usage shows the reservation');
        // A refused start leaves no intent behind.
        assert.equal(
          (await h.services.db.kysely.selectFrom('storage_intents').select('storage_key').execute()).length,
          2,
        );

        assert.equal((await api('DELETE', `/api/v1/multipart/${ok[0].body.session_id}`)).status, 200);
        assert.deepEqual(await usage(), { used: 0, reserved: 8 * MiB }, 'abort gives back');
        const third = await api('POST', '/api/v1/multipart/start', {
          file_name: 'p-after.bin',
          size: 8 * MiB,
          format: 'application/octet-stream',
        });
        assert.equal(third.status, 201);

        // Expiry: the sweeper frees the session and its reservation.
        await h.services.db.kysely
          .updateTable('multipart_sessions')
          .set({ expire_at: Math.floor(Date.now() / 1000) - 10 })
          .where('status', '=', 'active')
          .execute();
        await h.services.multipart.sweep(0);
        assert.deepEqual(await usage(), { used: 0, reserved: 0 }, 'expiry gives back');
      } finally {
        await setQuota(null);
      }
    });

    test('a completed session turns its reservation into usage; the quota holds at complete', async () => {
      await setQuota(20 * MiB);
      try {
        const data = randomBytes(9 * MiB);
        const s = (
          await api('POST', '/api/v1/multipart/start', {
            file_name: 'done.bin',
            size: data.length,
            format: 'application/octet-stream',
          })
        ).body;
        assert.deepEqual(await usage(), { used: 0, reserved: data.length });
        for (const [i, url] of (s.parts as string[]).entries()) {
          const part = data.subarray(i * s.part_size, (i + 1) * s.part_size);
          const r = await fetch(url.replace(h.config.publicUrl, base), {
            method: 'PUT',
            body: new Uint8Array(part),
            headers: { 'content-type': 'application/octet-stream' },
          });
          assert.equal(r.status, 200);
        }
        assert.equal((await api('POST', '/api/v1/multipart/complete', { session_id: s.session_id })).status, 200);
        assert.deepEqual(await usage(), { used: data.length, reserved: 0 });
      } finally {
        await clearFiles();
        await setQuota(null);
      }
    });

    test('parallel direct uploads never pass the quota together; nothing stays reserved afterwards', async () => {
      await setQuota(10 * MiB);
      try {
        const results = await Promise.all(
          Array.from({ length: 8 }, (_, i) => direct(randomBytes(3 * MiB), `d${i}.bin`)),
        );
        const ok = results.filter((r) => r.status === 201);
        for (const r of results.filter((x) => x.status !== 201)) assert.equal(r.status, 402, JSON.stringify(r.body));
        assert.ok(ok.length >= 1 && ok.length <= 3, `${ok.length} of 8 stored`);
        const u = await usage();
        assert.equal(u.reserved, 0, 'every reservation given back');
        assert.ok(u.used <= 10 * MiB, `used ${u.used}`);
        assert.equal(u.used, await blobsTotal());
        assert.equal(u.used, ok.length * 3 * MiB);
        assert.equal(
          (await h.services.db.kysely.selectFrom('storage_intents').select('storage_key').execute()).length,
          0,
        );
        // Full: the next upload is refused at once.
        await setQuota(u.used);
        const full = await direct(Buffer.from('one more byte'), 'full.bin');
        assert.equal(full.status, 402);
      } finally {
        await clearFiles();
        await setQuota(null);
      }
    });

    test('parallel uploads of the same bytes: stored once, counted once, nothing left reserved', async () => {
      await setQuota(10 * MiB);
      try {
        const data = randomBytes(2 * MiB);
        const results = await Promise.all(Array.from({ length: 6 }, (_, i) => direct(data, `same${i}.bin`)));
        const ok = results.filter((r) => r.status === 201);
        assert.ok(ok.length >= 1);
        const u = await usage();
        assert.deepEqual(u, { used: 2 * MiB, reserved: 0 });
      } finally {
        await clearFiles();
        await setQuota(null);
      }
    });

    test('parallel uploads of the same new bytes under distinct names: every one stored, one blob', async () => {
      const data = randomBytes(256 * 1024);
      const results = await Promise.all(Array.from({ length: 8 }, (_, i) => direct(data, `twin${i}.bin`)));
      try {
        assert.deepEqual(
          results.map((r) => r.status),
          results.map(() => 201),
          JSON.stringify(results.filter((r) => r.status !== 201).map((r) => r.body)),
        );
        assert.equal(new Set(results.map((r) => r.body.hash)).size, 1);
        assert.equal(results.filter((r) => r.body.is_duplicate === false).length, 1, 'one upload stored the bytes');
        const u = await usage();
        assert.deepEqual(u, { used: data.length, reserved: 0 });
        assert.equal(await blobsTotal(), data.length);
      } finally {
        await clearFiles();
      }
    });

    test('a quota set while an upload streams holds at its commit: 402, nothing charged, nothing left', async () => {
      await setQuota(null);
      const boundary = 'quota-boundary';
      const head = Buffer.from(
        `--${boundary}\r\nContent-Disposition: form-data; name="file_name"\r\n\r\nlate.bin\r\n` +
          `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="late.bin"\r\n` +
          'Content-Type: application/octet-stream\r\n\r\n',
      );
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      let sentHalf!: () => void;
      const halfSent = new Promise<void>((r) => (sentHalf = r));
      const body = new ReadableStream<Uint8Array>({
        async start(controller) {
          controller.enqueue(new Uint8Array(head));
          controller.enqueue(new Uint8Array(randomBytes(MiB)));
          sentHalf();
          await gate;
          controller.enqueue(new Uint8Array(randomBytes(MiB)));
          controller.enqueue(new Uint8Array(Buffer.from(`\r\n--${boundary}--\r\n`)));
          controller.close();
        },
      });
      // No Content-Length (chunked) and no quota when it starts: nothing is reserved up front.
      const pending = fetch(`${base}/api/v1/uploads`, {
        method: 'POST',
        body,
        duplex: 'half',
        headers: { 'x-api-key': h.ws.private_key, 'content-type': `multipart/form-data; boundary=${boundary}` },
      } as RequestInit);
      try {
        await halfSent;
        await new Promise((r) => setTimeout(r, 200));
        // The key was checked with no quota in force; the commit must see this one.
        await setQuota(MiB);
        release();
        const res = await pending;
        const answer = (await res.json()) as any;
        assert.equal(res.status, 402, JSON.stringify(answer));
        assert.deepEqual(await usage(), { used: 0, reserved: 0 });
        assert.equal(await blobsTotal(), 0);
        assert.equal(
          (await h.services.db.kysely.selectFrom('storage_intents').select('storage_key').execute()).length,
          0,
          'the intent went with the refused bytes',
        );
        assert.equal((await h.services.files.list(h.ws.workspace_id, { page: 1, limit: 10 })).files.length, 0);
      } finally {
        release();
        await setQuota(null);
        await clearFiles();
      }
    });

    test('an upload that died holding a reservation: the sweeper gives it back', async () => {
      await setQuota(10 * MiB);
      try {
        const key = h.services.blobs.newKey(h.ws.workspace_id);
        await h.services.blobs.recordIntent(h.ws.workspace_id, key, 'upload');
        assert.equal(await h.services.blobs.reserve(h.ws.workspace_id, key, 6 * MiB, 10 * MiB), true);
        assert.equal(
          await h.services.blobs.reserve(h.ws.workspace_id, key, 6 * MiB, 10 * MiB),
          false,
          'no more than the quota',
        );
        assert.deepEqual(await usage(), { used: 0, reserved: 6 * MiB });
        await new Promise((r) => setTimeout(r, 10)); // older than "now" by the sweeper's clock
        await h.services.blobs.sweepIntents(0);
        assert.deepEqual(await usage(), { used: 0, reserved: 0 });
      } finally {
        await setQuota(null);
      }
    });
  });
}
