// Part PUTs after complete on S3 storage (issue 15): with S3, part URLs are presigned UploadPart
// URLs straight to the bucket, so Stowage cannot refuse or cut a part PUT once it has handed the
// URL out. AWS S3 refuses UploadPart on a completed upload (404 NoSuchUpload). OpenStack Swift's
// S3 layer (s3api, the test S3 server) does not: a completed upload is an SLO manifest over its
// parts, which stay writable objects in `<bucket>+segments`, and UploadPart still finds the
// upload through the completed object's upload-id. This suite documents what Swift does, through
// the real service (start, parts, complete, delivery) and a direct GetObject:
//
// - a late PUT of other bytes is accepted (200). SLO pins each part's MD5 in the manifest and
//   checks it on every read, so the object is not silently rewritten: it becomes unreadable
//   (a read that starts in the changed part: 409 BrokenMPU, delivery 500; a read that reaches it
//   later: the body is cut short). Putting the original bytes back makes it whole again.
// - a late PUT of bytes with the same MD5 (a public MD5 collision block; collisions cost seconds
//   to make) is accepted, and every read serves the new bytes, complete and with a 200, while
//   the file record still carries the old SHA-256. This is the limit: the stored object can
//   change under its record until the part URLs expire.
// - a PUT already in flight when complete runs lands after it (200), with the same effects.
//
// Cheap fixes tried on Swift, none of which helps: AbortMultipartUpload after complete answers
// 404 NoSuchKey and changes nothing (late PUTs still 200); the segments are not reachable through
// the S3 API (`<bucket>+segments` is InvalidBucketName), and deleting one through Swift's own API
// breaks the object (409) until a late PUT re-creates it. A server-side copy of the object onto
// itself does make it independent (a plain object; late PUTs then change nothing), but costs a
// full copy per upload, is limited to 5 GiB, and orphans the segments for good.
//
// On a store that is not Swift, the suite asserts AWS semantics instead: late PUTs refused,
// the bytes unchanged.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { GetObjectCommand } from '@aws-sdk/client-s3';
import type { S3Storage } from '../src/storage/s3.ts';
import { type Harness, makeHarness } from './helpers/harness.ts';
import { freshS3Storage, UPLOAD_MATRIX } from './helpers/storage.ts';

const MiB = 1024 * 1024;
const PART = 8 * MiB; // partSizeFor(any size under 80,000 MiB)
const SIZE = PART + 1000; // two parts: 8 MiB and 1,000 bytes
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const skip = UPLOAD_MATRIX.find((c) => c.storage === 's3')!.skip;

// Two 128-byte blocks with the same MD5 (Wang et al., 2004; widely published). MD5 works block
// by block, so any common suffix keeps the collision: A + rest and B + rest are two parts with
// one ETag.
const COLLIDE_A = Buffer.from(
  'd131dd02c5e6eec4693d9a0698aff95c2fcab58712467eab4004583eb8fb7f8955ad340609f4b30283e488832571415a085125e8f7cdc99fd91dbdf280373c5b' +
    'd8823e3156348f5bae6dacd436c919c6dd53e2b487da03fd02396306d248cda0e99f33420f577ee8ce54b67080a80d1ec69821bcb6a8839396f9652b6ff72a70',
  'hex',
);
const COLLIDE_B = Buffer.from(
  'd131dd02c5e6eec4693d9a0698aff95c2fcab50712467eab4004583eb8fb7f8955ad340609f4b30283e4888325f1415a085125e8f7cdc99fd91dbd7280373c5b' +
    'd8823e3156348f5bae6dacd436c919c6dd53e23487da03fd02396306d248cda0e99f33420f577ee8ce54b67080280d1ec69821bcb6a8839396f965ab6ff72a70',
  'hex',
);

interface Read {
  status: number;
  /** Bytes received, and their SHA-256, when the whole body arrived. */
  length?: number;
  sha?: string;
  /** The S3 error code (direct reads), or why the body broke off (delivery). */
  error?: string;
}

describe('S3 multipart: part PUTs after complete', { skip }, () => {
  let h: Harness;
  let base: string;
  let storage: S3Storage;
  let bucket: string;
  let swift = false;

  const post = async (path: string, body: unknown) => {
    const res = await fetch(`${base}${path}`, {
      method: 'POST',
      body: JSON.stringify(body),
      headers: { 'content-type': 'application/json', 'x-api-key': h.ws.public_key },
    });
    return { status: res.status, body: (await res.json()) as any };
  };
  const putPart = async (url: string, body: Buffer) => {
    const res = await fetch(url, {
      method: 'PUT',
      body: new Blob([new Uint8Array(body)]),
      headers: { 'content-type': 'application/octet-stream' },
    });
    const text = await res.text();
    return { status: res.status, code: /<Code>([^<]*)<\/Code>/.exec(text)?.[1] };
  };
  /** The file as Stowage's delivery URL serves it. */
  const served = async (record: { url: string }): Promise<Read> => {
    const res = await fetch(`${base}${new URL(record.url).pathname}`);
    try {
      const body = Buffer.from(await res.arrayBuffer());
      return res.ok
        ? { status: res.status, length: body.length, sha: sha(body) }
        : { status: res.status, error: JSON.parse(body.toString()).errorCode };
    } catch (err) {
      return { status: res.status, error: `body cut short (${(err as Error).message})` };
    }
  };
  /** The object as a direct GetObject returns it. */
  const direct = async (key: string): Promise<Read> => {
    try {
      const res = await storage.client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
      const chunks: Buffer[] = [];
      try {
        for await (const c of res.Body as AsyncIterable<Buffer>) chunks.push(c);
      } catch (err) {
        return { status: res.$metadata.httpStatusCode ?? 0, error: `body cut short (${(err as Error).message})` };
      }
      const body = Buffer.concat(chunks);
      return { status: res.$metadata.httpStatusCode ?? 0, length: body.length, sha: sha(body) };
    } catch (err) {
      const e = err as { name: string; $metadata?: { httpStatusCode?: number } };
      return { status: e.$metadata?.httpStatusCode ?? 0, error: e.name };
    }
  };
  /** Prints what the store did; every read is marked with whether its bytes still hash to H. */
  const report = (what: string, H: string, facts: Record<string, unknown>) => {
    const mark = (v: unknown): unknown => {
      if (Array.isArray(v)) return v.map(mark);
      if (!v || typeof v !== 'object') return v;
      const out: Record<string, unknown> = Object.fromEntries(Object.entries(v).map(([k, x]) => [k, mark(x)]));
      if ('sha' in v || 'error' in v) out.hashesToH = (v as Read).sha === H;
      return out;
    };
    console.log(`[late parts, ${swift ? 'swift' : 'other S3'}] ${what}: ${JSON.stringify(mark(facts))}`);
  };

  /** Start, both parts, complete: the session, the record and the object's storage key. */
  async function completed(data: Buffer) {
    const s = (
      await post('/api/v1/multipart/start', {
        file_name: `late-${randomBytes(4).toString('hex')}.bin`,
        size: data.length,
        format: 'application/octet-stream',
      })
    ).body;
    assert.equal(s.part_size, PART);
    assert.equal(s.parts.length, 2);
    for (let n = 1; n <= 2; n++)
      assert.equal((await putPart(s.parts[n - 1], data.subarray((n - 1) * PART, n * PART))).status, 200);
    const done = await post('/api/v1/multipart/complete', { session_id: s.session_id });
    assert.equal(done.status, 200, JSON.stringify(done.body));
    const row = await h.services.db.kysely
      .selectFrom('multipart_sessions')
      .select('storage_key')
      .where('id', '=', s.session_id)
      .executeTakeFirstOrThrow();
    return { s, record: done.body, key: row.storage_key };
  }

  const whole = (H: string): Read => ({ status: 200, length: SIZE, sha: H });

  before(async () => {
    const config = await freshS3Storage();
    if (config.driver !== 's3') throw new Error('expected S3 storage');
    bucket = config.s3.bucket;
    // Swift answers /info with its capabilities (s3api among them); S3 proper has no such path.
    const info = await fetch(new URL('/info', config.s3.endpoint)).then(
      (r) => (r.ok ? (r.json() as Promise<Record<string, unknown>>) : {}),
      () => ({}),
    );
    swift = 'swift' in info && 's3api' in info;
    h = await makeHarness('sqlite', { config: { storage: config } });
    storage = h.services.storage as S3Storage;
    base = await h.app.listen({ host: '127.0.0.1', port: 0 });
  });
  after(() => h?.close());

  test('a late PUT of other bytes: Swift takes it (200) and the file becomes unreadable, never silently other bytes', async () => {
    const data = randomBytes(SIZE);
    const H = sha(data);
    const { s, record, key } = await completed(data);
    assert.equal(record.hash, H);
    assert.deepEqual(await served(record), whole(H));
    assert.deepEqual(await direct(key), whole(H));

    // The last part changes: reads that begin before it get the first part, then break off.
    const lastPart = await putPart(s.parts[1], randomBytes(SIZE - PART));
    const afterLast = { put: lastPart, served: await served(record), direct: await direct(key) };
    report('late PUT of part 2 (random bytes)', H, afterLast);
    // The first part changes too: reads now fail before any byte is sent.
    const firstPart = await putPart(s.parts[0], randomBytes(PART));
    const afterFirst = { put: firstPart, served: await served(record), direct: await direct(key) };
    report('late PUT of part 1 (random bytes)', H, afterFirst);
    // The original bytes back: the manifest's MD5s match again.
    const restored = [
      await putPart(s.parts[0], data.subarray(0, PART)),
      await putPart(s.parts[1], data.subarray(PART)),
    ];
    const afterRestore = { put: restored, served: await served(record), direct: await direct(key) };
    report('original bytes PUT back', H, afterRestore);

    if (swift) {
      assert.deepEqual(lastPart, { status: 200, code: undefined }, 'Swift accepts a part PUT after complete');
      assert.equal(afterLast.served.status, 200);
      assert.match(afterLast.served.error ?? '', /^body cut short/, 'delivery breaks off at the changed part');
      assert.equal(afterLast.direct.status, 200);
      assert.match(afterLast.direct.error ?? '', /^body cut short/);
      assert.deepEqual(firstPart, { status: 200, code: undefined });
      assert.deepEqual(afterFirst.served, { status: 500, error: 'INTERNAL_ERROR' });
      assert.deepEqual(afterFirst.direct, { status: 409, error: 'BrokenMPU' });
      assert.deepEqual(
        restored.map((r) => r.status),
        [200, 200],
      );
      assert.deepEqual(afterRestore.served, whole(H));
      assert.deepEqual(afterRestore.direct, whole(H));
    } else {
      for (const put of [lastPart, firstPart]) assert.deepEqual(put, { status: 404, code: 'NoSuchUpload' });
      for (const read of [afterLast, afterFirst, afterRestore]) {
        assert.deepEqual(read.served, whole(H));
        assert.deepEqual(read.direct, whole(H));
      }
    }
  });

  test('a late PUT with the same MD5: Swift serves the new bytes, whole, under the old record', async () => {
    const rest = randomBytes(SIZE - COLLIDE_A.length);
    const data = Buffer.concat([COLLIDE_A, rest]);
    const forged = Buffer.concat([COLLIDE_B, rest]);
    assert.equal(
      createHash('md5').update(data.subarray(0, PART)).digest('hex'),
      createHash('md5').update(forged.subarray(0, PART)).digest('hex'),
    );
    const H = sha(data);
    const { s, record, key } = await completed(data);
    assert.equal(record.hash, H);
    assert.deepEqual(await served(record), whole(H));

    const put = await putPart(s.parts[0], forged.subarray(0, PART));
    const facts = { put, served: await served(record), direct: await direct(key) };
    report('late PUT of part 1 (MD5-colliding bytes)', H, {
      ...facts,
      recordHash: record.hash,
      forgedHash: sha(forged),
    });
    if (swift) {
      assert.deepEqual(put, { status: 200, code: undefined });
      // The limit: other bytes, complete and with a 200, while the record says H.
      assert.deepEqual(facts.served, whole(sha(forged)));
      assert.deepEqual(facts.direct, whole(sha(forged)));
      assert.notEqual(sha(forged), H);
      const again = await post('/api/v1/multipart/complete', { session_id: s.session_id });
      assert.equal(again.body.hash, H, 'Stowage still describes the original bytes');
    } else {
      assert.deepEqual(put, { status: 404, code: 'NoSuchUpload' });
      assert.deepEqual(facts.served, whole(H));
      assert.deepEqual(facts.direct, whole(H));
    }
  });

  test('a part PUT in flight while complete runs lands after it', async () => {
    const data = randomBytes(SIZE);
    const H = sha(data);
    const s = (
      await post('/api/v1/multipart/start', {
        file_name: `inflight-${randomBytes(4).toString('hex')}.bin`,
        size: SIZE,
        format: 'application/octet-stream',
      })
    ).body;
    for (let n = 1; n <= 2; n++)
      assert.equal((await putPart(s.parts[n - 1], data.subarray((n - 1) * PART, n * PART))).status, 200);

    // Part 1 again, other bytes: half sent before complete, the rest after it has answered.
    const other = randomBytes(PART);
    const url = new URL(s.parts[0]);
    const req = http.request(url, {
      method: 'PUT',
      headers: { 'content-length': String(PART), 'content-type': 'application/octet-stream' },
    });
    const answered = new Promise<{ status: number; code?: string }>((resolve, reject) => {
      req.on('response', (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, code: /<Code>([^<]*)<\/Code>/.exec(text)?.[1] }));
      });
      req.on('error', reject);
    });
    await new Promise<void>((resolve) => req.write(other.subarray(0, PART / 2), () => resolve()));
    await new Promise((r) => setTimeout(r, 200));

    const done = await post('/api/v1/multipart/complete', { session_id: s.session_id });
    assert.equal(done.status, 200, JSON.stringify(done.body));
    assert.equal(done.body.hash, H, 'complete used the part as it was before the PUT in flight');
    const key = (
      await h.services.db.kysely
        .selectFrom('multipart_sessions')
        .select('storage_key')
        .where('id', '=', s.session_id)
        .executeTakeFirstOrThrow()
    ).storage_key;
    const before = { served: await served(done.body), direct: await direct(key) };
    req.end(other.subarray(PART / 2));
    const put = await answered;
    const facts = { before, put, served: await served(done.body), direct: await direct(key) };
    report('part 1 PUT in flight during complete (random bytes)', H, facts);

    assert.deepEqual(before.served, whole(H));
    assert.deepEqual(before.direct, whole(H));
    if (swift) {
      assert.deepEqual(put, { status: 200, code: undefined }, 'Swift accepts the PUT that was in flight');
      assert.deepEqual(facts.served, { status: 500, error: 'INTERNAL_ERROR' });
      assert.deepEqual(facts.direct, { status: 409, error: 'BrokenMPU' });
    } else {
      assert.deepEqual(put, { status: 404, code: 'NoSuchUpload' });
      assert.deepEqual(facts.served, whole(H));
      assert.deepEqual(facts.direct, whole(H));
    }
  });
});
