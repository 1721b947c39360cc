// Multipart under races, from the attacker's side: a part PUT whose body is still arriving when
// complete (or abort) runs must not change a byte of the completed file, and two completes of
// one session at once both get the record. On local disk, where parts go through the service.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { MultipartSealedError } from '../src/storage/driver.ts';
import type { LocalStorage } from '../src/storage/local.ts';
import { DIALECTS, type Harness, makeHarness } from './helpers/harness.ts';

const MiB = 1024 * 1024;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('multipart races on local disk', () => {
  let h: Harness;
  let base: string;

  before(async () => {
    h = await makeHarness('sqlite', { config: { storage: { driver: 'local', fsync: false } } });
    base = await h.app.listen({ host: '127.0.0.1', port: 0 });
  });
  after(async () => {
    // Any 5xx would be logged as an unhandled error: show it.
    const errs = h?.logs.filter((l) => l.includes('unhandled error')) ?? [];
    await h?.close();
    assert.deepEqual(errs, [], 'no unhandled errors');
  });

  const local = (url: string) => url.replace(h.config.publicUrl, base);
  const api = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { 'x-api-key': h.ws.private_key, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    return { status: res.status, body: (await res.json()) as any };
  };
  const put = (url: string, body: Buffer | ReadableStream<Uint8Array>) =>
    fetch(local(url), {
      method: 'PUT',
      body: body instanceof Buffer ? new Uint8Array(body) : body,
      headers: { 'content-type': 'application/octet-stream' },
      duplex: 'half',
    } as RequestInit).then(async (r) => ({ status: r.status, body: (await r.json()) as any }));
  /**
   * A part PUT still sending when it is refused: the service answers 409 and closes the
   * connection rather than read the rest, so a client still writing may see the connection
   * end instead of the answer (status 0 here). Either way the part was refused.
   */
  const latePut = (url: string, body: ReadableStream<Uint8Array>) =>
    put(url, body).catch((err: Error) => ({ status: 0, body: { cut: String(err.cause ?? err) } }));
  /** A part body that sends `head` bytes, pauses `pauseMs`, then the rest. */
  const slowly = (data: Buffer, head: number, pauseMs: number) =>
    new ReadableStream<Uint8Array>({
      async start(c) {
        c.enqueue(new Uint8Array(data.subarray(0, head)));
        await sleep(pauseMs);
        for (let i = head; i < data.length; i += 256 * 1024)
          c.enqueue(new Uint8Array(data.subarray(i, Math.min(data.length, i + 256 * 1024))));
        c.close();
      },
    });
  const served = async (record: { url: string }) => Buffer.from(await (await fetch(local(record.url))).arrayBuffer());

  test('the driver: a seal cuts a part write in flight, nothing reaches the file after it, later writes are refused until unsealed', async () => {
    const storage = h.services.storage as LocalStorage;
    const key = h.services.blobs.newKey(h.ws.workspace_id);
    const id = await storage.createMultipart(key, { size: 4 * MiB, partSize: 4 * MiB });
    const body = new PassThrough();
    const writing = storage.writePart(key, id, 1, body, 4 * MiB);
    body.write(Buffer.alloc(MiB, 1));
    await sleep(250); // past the 100 ms batch hold: the first MiB is on disk
    await storage.sealMultipart(id);
    await assert.rejects(writing, MultipartSealedError);
    const data = join(storage.multipartDataPath(id));
    const { readFile } = await import('node:fs/promises');
    const atSeal = sha(await readFile(data));
    body.write(Buffer.alloc(MiB, 2)); // the client keeps sending
    await sleep(250);
    assert.equal(sha(await readFile(data)), atSeal, 'no byte arrives after the seal');
    await assert.rejects(storage.writePart(key, id, 1, new PassThrough(), 4 * MiB), MultipartSealedError);
    assert.deepEqual(await storage.listParts(key, id), [], 'the cut part is not listed');
    storage.unsealMultipart(id);
    const again = new PassThrough();
    const ok = storage.writePart(key, id, 1, again, 4 * MiB);
    again.end(Buffer.alloc(4 * MiB, 3));
    assert.equal((await ok).size, 4 * MiB);
    await storage.abortMultipart(key, id);
  });

  test('20 rounds of "re-upload a part slowly, complete mid-body": every completed file is byte-exact with its recorded hash', async () => {
    const rounds = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const size = 9 * MiB;
        const first = randomBytes(size);
        const s = (
          await api('POST', '/api/v1/multipart/start', {
            file_name: `race-${i}.bin`,
            size,
            format: 'application/octet-stream',
          })
        ).body;
        assert.equal((await put(s.parts[0], first.subarray(0, 8 * MiB))).status, 200);
        assert.equal((await put(s.parts[1], first.subarray(8 * MiB))).status, 200);
        // Now the attack: new bytes for part 1, trickling in, while complete runs.
        const second = randomBytes(8 * MiB);
        const late = latePut(s.parts[0], slowly(second, 3 * MiB, 150 + Math.floor(Math.random() * 150)));
        await sleep(Math.floor(Math.random() * 200));
        const done = await api('POST', '/api/v1/multipart/complete', { session_id: s.session_id });
        const lateAnswer = await late;
        let record = done.body;
        if (done.status !== 200) {
          // Complete saw the part missing (it was being replaced): the client completes again.
          assert.equal(done.status, 409, JSON.stringify(done.body));
          const retry = await api('POST', '/api/v1/multipart/complete', { session_id: s.session_id });
          if (retry.status === 409) {
            // The late PUT was cut by the seal: the part is missing until sent again.
            assert.ok([409, 0].includes(lateAnswer.status), JSON.stringify(lateAnswer.body));
            assert.equal((await put(s.parts[0], second)).status, 200);
            record = (await api('POST', '/api/v1/multipart/complete', { session_id: s.session_id })).body;
          } else record = retry.body;
        } else {
          assert.ok(
            [200, 409, 404, 0].includes(lateAnswer.status),
            `late PUT: ${lateAnswer.status} ${JSON.stringify(lateAnswer.body)}`,
          );
        }
        const bytes = await served(record);
        assert.equal(sha(bytes), record.hash, `round ${i}: served bytes match the recorded hash`);
        assert.equal(bytes.length, size);
        // The file is one of the two whole versions, never a mix.
        assert.ok(
          bytes.subarray(0, 8 * MiB).equals(first.subarray(0, 8 * MiB)) || bytes.subarray(0, 8 * MiB).equals(second),
          `round ${i}: part 1 is whole`,
        );
        // And it stays so: nothing in flight can still change it.
        await sleep(300);
        assert.equal(sha(await served(record)), record.hash);
        return { done: done.status, late: lateAnswer.status };
      }),
    );
    const outcomes = rounds.map((r) => `${r.done}/${r.late}`);
    assert.equal(rounds.length, 20, outcomes.join(' '));
  });

  test('a part PUT after complete began gets 409 or 404 and changes nothing', async () => {
    const data = randomBytes(6 * MiB);
    const s = (
      await api('POST', '/api/v1/multipart/start', {
        file_name: 'sealed.bin',
        size: data.length,
        format: 'application/octet-stream',
      })
    ).body;
    assert.equal((await put(s.parts[0], data)).status, 200);
    const record = (await api('POST', '/api/v1/multipart/complete', { session_id: s.session_id })).body;
    const after = await put(s.parts[0], randomBytes(data.length));
    assert.equal(after.status, 404, JSON.stringify(after.body));
    assert.equal(sha(await served(record)), sha(data));
  });

  test('two completes at once, and ten: every one answers 200 with the same record', async () => {
    for (const n of [2, 10]) {
      const data = randomBytes(9 * MiB);
      const s = (
        await api('POST', '/api/v1/multipart/start', {
          file_name: `twice-${n}.bin`,
          size: data.length,
          format: 'application/octet-stream',
        })
      ).body;
      await put(s.parts[0], data.subarray(0, 8 * MiB));
      await put(s.parts[1], data.subarray(8 * MiB));
      const answers = await Promise.all(
        Array.from({ length: n }, () => api('POST', '/api/v1/multipart/complete', { session_id: s.session_id })),
      );
      for (const a of answers) assert.equal(a.status, 200, JSON.stringify(a.body));
      assert.equal(new Set(answers.map((a) => a.body.file_no)).size, 1);
      assert.equal(answers[0].body.hash, sha(data));
      const files = await h.services.db.kysely
        .selectFrom('files')
        .select('id')
        .where('name', '=', `twice-${n}.bin`)
        .execute();
      assert.equal(files.length, 1);
    }
  });

  test('abort while a part is arriving: the PUT is refused, nothing is left on disk', async () => {
    const data = randomBytes(8 * MiB);
    const s = (
      await api('POST', '/api/v1/multipart/start', {
        file_name: 'aborted.bin',
        size: data.length,
        format: 'application/octet-stream',
      })
    ).body;
    const row = await h.services.db.kysely
      .selectFrom('multipart_sessions')
      .select('upload_id')
      .where('id', '=', s.session_id)
      .executeTakeFirstOrThrow();
    const late = latePut(s.parts[0], slowly(data, 2 * MiB, 400));
    await sleep(150);
    assert.equal((await api('DELETE', `/api/v1/multipart/${s.session_id}`)).status, 200);
    const answer = await late;
    assert.ok([404, 409, 0].includes(answer.status), JSON.stringify(answer.body));
    const dir = join(h.config.dataDir, 'storage');
    const leftovers = readdirSync(dir, { recursive: true })
      .map(String)
      .filter((p) => p.includes(row.upload_id));
    assert.deepEqual(leftovers, []);
    assert.ok(!existsSync(join(dir, 'multipart', row.upload_id)));
  });
});

for (const dialect of DIALECTS) {
  describe(`abort racing complete on ${dialect.name}`, { skip: dialect.skip }, () => {
    let h: Harness;
    let base: string;
    before(async () => {
      h = await makeHarness(dialect.name, { config: { storage: { driver: 'local', fsync: false } } });
      base = await h.app.listen({ host: '127.0.0.1', port: 0 });
    });
    after(async () => {
      const errs = h?.logs.filter((l) => l.includes('unhandled error')) ?? [];
      await h?.close();
      assert.deepEqual(errs, [], 'no unhandled errors');
    });

    test('one of them wins each round: a completed file keeps its bytes, an aborted session gives 404, nothing hangs', async () => {
      const local = (url: string) => url.replace(h.config.publicUrl, base);
      const api = async (method: string, path: string, body?: unknown) => {
        // A complete that waited for itself never answered: a bounded wait makes that a failure.
        const res = await fetch(`${base}${path}`, {
          method,
          signal: AbortSignal.timeout(15_000),
          headers: { 'x-api-key': h.ws.private_key, ...(body ? { 'content-type': 'application/json' } : {}) },
          body: body ? JSON.stringify(body) : undefined,
        });
        return { status: res.status, body: (await res.json()) as any };
      };
      const outcomes: string[] = [];
      for (let i = 0; i < 16; i++) {
        const data = randomBytes(MiB + i);
        const s = (
          await api('POST', '/api/v1/multipart/start', {
            file_name: `race-${i}.bin`,
            size: data.length,
            format: 'application/octet-stream',
          })
        ).body;
        const put = await fetch(local(s.parts[0]), {
          method: 'PUT',
          body: new Uint8Array(data),
          headers: { 'content-type': 'application/octet-stream' },
        });
        assert.equal(put.status, 200);
        const completing = api('POST', '/api/v1/multipart/complete', { session_id: s.session_id });
        await sleep(i % 8);
        const aborted = await api('DELETE', `/api/v1/multipart/${s.session_id}`);
        const completed = await completing;
        const row = await h.services.db.kysely
          .selectFrom('multipart_sessions')
          .select('status')
          .where('id', '=', s.session_id)
          .executeTakeFirstOrThrow();
        const outcome = `complete ${completed.status}, abort ${aborted.status}, session ${row.status}`;
        outcomes.push(outcome);
        if (completed.status === 200) {
          assert.equal(aborted.status, 409, outcome);
          assert.equal(aborted.body.errorCode, 'SESSION_COMPLETED');
          assert.equal(row.status, 'completed');
          const got = await fetch(local(completed.body.url));
          assert.equal(got.status, 200, `${outcome}: the file's bytes are gone`);
          assert.equal(sha(Buffer.from(await got.arrayBuffer())), sha(data));
        } else {
          assert.deepEqual([completed.status, aborted.status, row.status], [404, 200, 'aborted'], outcome);
        }
      }
      // Acknowledged bytes are all that is charged; nothing stays reserved.
      const ws = await h.services.db.kysely
        .selectFrom('workspaces')
        .select(['used_bytes', 'reserved_bytes'])
        .where('id', '=', h.ws.workspace_id)
        .executeTakeFirstOrThrow();
      const blobs = await h.services.db.kysely
        .selectFrom('blobs')
        .select('size')
        .where('workspace_id', '=', h.ws.workspace_id)
        .execute();
      assert.equal(
        Number(ws.used_bytes),
        blobs.reduce((n, b) => n + Number(b.size), 0),
      );
      assert.equal(Number(ws.reserved_bytes), 0);
    });
  });
}
