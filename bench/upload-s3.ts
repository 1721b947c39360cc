// bench/upload --s3 (or BENCH_S3=1): the S3 path, on the S3 server of STOWAGE_TEST_S3_ENDPOINT
// (here OpenStack Swift's S3 layer; a fresh bucket, removed afterwards).
//
// 1. Throughput: a BENCH_SIZE_MB file (default 1 GiB) through Stowage's multipart API with
//    BENCH_S3_CONCURRENCY parts in flight (default 4): start, the parts PUT straight to S3 at
//    the presigned URLs start hands out, complete (which lists the parts, has S3 assemble them
//    and reads the object back once to hash it); against the AWS SDK's own `Upload`
//    (@aws-sdk/lib-storage) of the same bytes to the same bucket, same part size and queue size.
//    Median (BENCH_PICK=best: fastest) of BENCH_ROUNDS interleaved rounds.
// 2. Complete with many parts, for each count in BENCH_S3_PARTS (default "100,1000"). Stowage's
//    part size is 8 MiB (src/uploads/multipart/part-layout.ts) and S3 refuses to assemble parts
//    under 5 MiB (Swift answers EntityTooSmall, as AWS does), so 1,000 parts are 7.8 GiB, sent
//    to the presigned part URLs (UploadPartCopy would spare the client, but Swift's ListParts
//    then shows those parts with empty ETags and complete cannot name them). Then complete is
//    timed, then a plain GET + SHA-256 of the same object (the read-back inside complete), and
//    ListParts + CompleteMultipartUpload sent straight to S3 for as many parts (S3's own share).
//    With no count >= 1,000 the line through the measured counts is extrapolated to 1,000, and
//    says so.
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  ListPartsCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { partSizeFor } from '../src/uploads/multipart/part-layout.ts';
import { freshS3Storage } from '../test/helpers/storage.ts';
import { chunks, fmt, MiB, mbps, median, removeFile, type Stowage, send, sendMultipart, startStowage } from './lib.ts';

const CONCURRENCY = Number(process.env.BENCH_S3_CONCURRENCY ?? 4);
const PART_COUNTS = (process.env.BENCH_S3_PARTS ?? '100,1000').split(',').map(Number);
/** Part uploads in flight while parts are filled for the complete runs. */
const FILL_CONCURRENCY = 4;

/** Runs `job(0..count-1)`, `width` at a time. */
async function inParallel(count: number, width: number, job: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, count) }, async () => {
      for (let i = next++; i < count; i = next++) await job(i);
    }),
  );
}

/** Parts 1..count of an open multipart upload, sent straight to S3 by the SDK (one 8 MiB buffer for all). */
async function fillParts(client: S3Client, bucket: string, key: string, uploadId: string, count: number) {
  const body = Buffer.alloc(8 * MiB, 7);
  await inParallel(count, FILL_CONCURRENCY, async (i) => {
    await client.send(
      new UploadPartCommand({ Bucket: bucket, Key: key, UploadId: uploadId, PartNumber: i + 1, Body: body }),
    );
  });
}

/** A GET of the whole object, hashed as it comes: what complete's read-back costs on its own. */
async function readBack(client: S3Client, bucket: string, key: string): Promise<number> {
  const started = performance.now();
  const res = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
  const hash = createHash('sha256');
  for await (const chunk of res.Body as Readable) hash.update(chunk as Buffer);
  hash.digest();
  return performance.now() - started;
}

/** Everything left in the bucket (objects, unfinished multipart uploads), then the bucket. */
async function removeBucket(client: S3Client, bucket: string): Promise<void> {
  const uploads = await client.send(new ListMultipartUploadsCommand({ Bucket: bucket }));
  for (const u of uploads.Uploads ?? [])
    await client.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: u.Key, UploadId: u.UploadId }));
  const objects = await client.send(new ListObjectsV2Command({ Bucket: bucket }));
  for (const o of objects.Contents ?? []) await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: o.Key }));
  await client.send(new DeleteBucketCommand({ Bucket: bucket }));
}

/** Least squares line through (x, y): its value at `at`. */
function extrapolate(points: [number, number][], at: number): number {
  const n = points.length;
  const mx = points.reduce((a, [x]) => a + x, 0) / n;
  const my = points.reduce((a, [, y]) => a + y, 0) / n;
  const slope =
    points.reduce((a, [x, y]) => a + (x - mx) * (y - my), 0) / points.reduce((a, [x]) => a + (x - mx) ** 2, 0);
  return my + slope * (at - mx);
}

export async function mainS3(opts: { size: number; rounds: number; pick: 'median' | 'best'; tmp: string }) {
  if (!process.env.STOWAGE_TEST_S3_ENDPOINT) {
    throw new Error('bench/upload --s3 needs STOWAGE_TEST_S3_ENDPOINT (+ _ACCESS_KEY_ID, _SECRET_ACCESS_KEY, _REGION)');
  }
  const { size, rounds, pick } = opts;
  const partSize = partSizeFor(size);
  const storage = await freshS3Storage();
  if (storage.driver !== 's3') throw new Error('expected S3 storage');
  const s3 = storage.s3;
  const client = new S3Client({
    endpoint: s3.endpoint,
    region: s3.region,
    forcePathStyle: true,
    credentials: { accessKeyId: s3.accessKeyId!, secretAccessKey: s3.secretAccessKey! },
  });
  console.log(
    `bench/upload --s3 — ${s3.endpoint}, bucket ${s3.bucket}; ${size / MiB} MiB per run, parts of ${partSize / MiB} MiB, ` +
      `${CONCURRENCY} in flight, ${pick} of ${rounds} interleaved rounds; node ${process.version}\n`,
  );
  let stowage: Stowage | undefined;
  try {
    stowage = await startStowage(
      {
        STOWAGE_STORAGE: 's3',
        S3_ENDPOINT: s3.endpoint!,
        S3_BUCKET: s3.bucket,
        S3_REGION: s3.region,
        S3_ACCESS_KEY_ID: s3.accessKeyId!,
        S3_SECRET_ACCESS_KEY: s3.secretAccessKey!,
        S3_FORCE_PATH_STYLE: 'true',
        STOWAGE_RATE_LIMIT_UPLOAD: 'off',
        STOWAGE_RATE_LIMIT_API: 'off',
      },
      opts.tmp,
    );
    const s = stowage;
    let n = 0;
    const rows: { label: string; run: () => Promise<{ ms: number; completeMs?: number }> }[] = [
      {
        label: `AWS SDK lib-storage Upload, queueSize ${CONCURRENCY}`,
        run: async () => {
          const key = `sdk-${n++}.bin`;
          const started = performance.now();
          await new Upload({
            client,
            params: { Bucket: s3.bucket, Key: key, Body: Readable.from(chunks(size)) },
            partSize,
            queueSize: CONCURRENCY,
          }).done();
          const ms = performance.now() - started;
          await client.send(new DeleteObjectCommand({ Bucket: s3.bucket, Key: key }));
          return { ms };
        },
      },
      {
        label: `stowage multipart x${CONCURRENCY}, presigned part URLs`,
        run: () => sendMultipart(s, size, `s3-${n++}.bin`, CONCURRENCY),
      },
    ];
    const ms: number[][] = rows.map(() => []);
    const completeMs: number[] = [];
    for (let round = 0; round < rounds; round++)
      for (let k = 0; k < rows.length; k++) {
        const i = (k + round) % rows.length;
        const r = await rows[i].run();
        ms[i].push(r.ms);
        if (r.completeMs !== undefined) completeMs.push(r.completeMs);
      }
    const choose = (v: number[]) => (pick === 'best' ? Math.min(...v) : median(v));
    const sdkRate = mbps(size, choose(ms[0]));
    console.log(`${'throughput'.padEnd(48)} ${'MiB/s'.padStart(7)} ${'x SDK'.padStart(6)}  every round (MiB/s)`);
    for (const [i, r] of rows.entries()) {
      const rate = mbps(size, choose(ms[i]));
      console.log(
        `${r.label.padEnd(48)} ${fmt(rate).padStart(7)} ${fmt(rate / sdkRate, 2).padStart(6)}  ${ms[i].map((t) => fmt(mbps(size, t), 0)).join(' ')}`,
      );
    }
    console.log(
      `stowage's complete within those runs: ${completeMs.map((t) => fmt(t, 0)).join(', ')} ms ` +
        `(${Math.ceil(size / partSize)} parts; it reads the ${size / MiB} MiB back once to hash them)\n`,
    );

    // Complete with many parts.
    const part = 8 * MiB;
    console.log(
      `${'complete, parts of 8 MiB'.padEnd(26)} ${'MiB'.padStart(6)} ${'fill s'.padStart(7)} ${'stowage ms'.padStart(10)} ${'GET+hash ms'.padStart(11)} ${'rest ms'.padStart(8)} ${'S3 list+complete ms'.padStart(19)}`,
    );
    const points: [number, number][] = [];
    const rawPoints: [number, number][] = [];
    for (const count of PART_COUNTS) {
      // Through Stowage: start, the parts PUT to its presigned URLs, complete (timed).
      const total = count * part;
      if (partSizeFor(total) !== part) throw new Error(`${count} parts would not be of 8 MiB`);
      const started = await fetch(`${s.url}/api/v1/multipart/start`, {
        method: 'POST',
        headers: { 'x-api-key': s.key, 'content-type': 'application/json' },
        body: JSON.stringify({ file_name: `complete-${count}.bin`, size: total, format: 'application/octet-stream' }),
      });
      if (started.status !== 201) throw new Error(`start: ${started.status} ${await started.text()}`);
      const session = (await started.json()) as { session_id: string; parts: string[] };
      const key = decodeURIComponent(new URL(session.parts[0]).pathname.split('/').slice(2).join('/'));
      const fillStarted = performance.now();
      await inParallel(count, FILL_CONCURRENCY, async (i) => {
        const res = await send(session.parts[i], {
          method: 'PUT',
          headers: { 'content-length': part },
          total: part,
        });
        if (res.status !== 200) throw new Error(`part ${i + 1}: ${res.status} ${res.body}`);
      });
      const fillS = (performance.now() - fillStarted) / 1000;
      const t0 = performance.now();
      const done = await fetch(`${s.url}/api/v1/multipart/complete`, {
        method: 'POST',
        headers: { 'x-api-key': s.key, 'content-type': 'application/json' },
        body: JSON.stringify({ session_id: session.session_id }),
      });
      const stowageMs = performance.now() - t0;
      if (done.status !== 200) {
        await new Promise((r) => setTimeout(r, 1000)); // the server's log line of the failure
        throw new Error(`complete: ${done.status} ${await done.text()}\nserver log: ${s.output.slice(-2000)}`);
      }
      const readMs = await readBack(client, s3.bucket, key);
      await removeFile(s, await done.json());

      // Straight to S3: as many parts sent by the SDK, then ListParts (every page) and complete (timed).
      const rawKey = `raw-complete-${count}.bin`;
      const mpu = await client.send(new CreateMultipartUploadCommand({ Bucket: s3.bucket, Key: rawKey }));
      await fillParts(client, s3.bucket, rawKey, mpu.UploadId!, count);
      const t1 = performance.now();
      const listed: { PartNumber: number; ETag: string }[] = [];
      let marker: string | undefined;
      do {
        const page = await client.send(
          new ListPartsCommand({ Bucket: s3.bucket, Key: rawKey, UploadId: mpu.UploadId, PartNumberMarker: marker }),
        );
        for (const p of page.Parts ?? []) listed.push({ PartNumber: p.PartNumber!, ETag: p.ETag! });
        marker = page.IsTruncated ? page.NextPartNumberMarker : undefined;
      } while (marker);
      await client.send(
        new CompleteMultipartUploadCommand({
          Bucket: s3.bucket,
          Key: rawKey,
          UploadId: mpu.UploadId,
          MultipartUpload: { Parts: listed },
        }),
      );
      const rawMs = performance.now() - t1;
      await client.send(new DeleteObjectCommand({ Bucket: s3.bucket, Key: rawKey }));

      points.push([count, stowageMs]);
      rawPoints.push([count, rawMs]);
      console.log(
        `${`${count} parts`.padEnd(26)} ${String(total / MiB).padStart(6)} ${fmt(fillS).padStart(7)} ${fmt(stowageMs, 0).padStart(10)} ${fmt(readMs, 0).padStart(11)} ${fmt(stowageMs - readMs, 0).padStart(8)} ${fmt(rawMs, 0).padStart(19)}`,
      );
    }
    if (!PART_COUNTS.some((c) => c >= 1000) && points.length >= 2) {
      console.log(
        `${'1000 parts, EXTRAPOLATED'.padEnd(26)} ${String(1000 * 8).padStart(6)} ${''.padStart(7)} ${fmt(extrapolate(points, 1000), 0).padStart(10)} ${''.padStart(11)} ${''.padStart(8)} ${fmt(extrapolate(rawPoints, 1000), 0).padStart(19)}`,
      );
      console.log(
        '(a straight line through the measured counts, not a measurement: run with BENCH_S3_PARTS=1000 for one)',
      );
    }
    console.log(
      'rest: stowage minus GET+hash, what complete costs besides reading the file back (listing, S3 assembling, the record).',
    );
  } finally {
    await stowage?.stop();
    await removeBucket(client, s3.bucket).catch((err) => console.error(`bucket ${s3.bucket} left behind: ${err}`));
    client.destroy();
  }
}
