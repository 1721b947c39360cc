// SIGKILL at random moments: 200 mixed uploads (direct, multipart, remote URL) across 21 lives
// of the server process, 20 of which end in SIGKILL while uploads are in flight. Afterwards
// every acknowledged upload is present and byte-exact, no record points at missing bytes, and
// one sweep leaves no orphaned bytes and no temporary files. CRASH_UPLOADS and CRASH_KILLS
// change the sizes; the kill moments are random (printed, with what each life acknowledged).
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { openDatabase } from '../src/db/database.ts';
import { runCli, type ServerProcess, startServer } from './helpers/process.ts';
import { leftoverTemp, storedObjects } from './helpers/storage.ts';

const TOTAL = Number(process.env.CRASH_UPLOADS ?? 200);
const KILLS = Number(process.env.CRASH_KILLS ?? 20);
const MiB = 1024 * 1024;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** The bytes the origin serves at /r/<n>: derived from n, 64 KiB to 1 MiB. */
const remoteBytes = (n: number) => {
  const seed = createHash('sha256').update(`remote-${n}`).digest();
  const size = 64 * 1024 + (seed.readUInt32BE(0) % (960 * 1024));
  const out = Buffer.alloc(size);
  for (let i = 0; i < size; i += 32) createHash('sha256').update(seed).update(String(i)).digest().copy(out, i);
  return out;
};

interface Acked {
  kind: string;
  name: string;
  fileNo: string;
  sha256: string;
}

const dataDir = mkdtempSync(join(tmpdir(), 'stowage-crash-loop-'));
let server: ServerProcess | undefined;
// Sent in 64 KiB pieces with small pauses, so that a kill often lands mid-transfer.
const origin = http.createServer(async (req, res) => {
  const n = Number(/^\/r\/(\d+)$/.exec(req.url ?? '')?.[1]);
  if (!Number.isFinite(n)) return void res.writeHead(404).end();
  const body = remoteBytes(n);
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': body.length });
  for (let i = 0; i < body.length && !res.destroyed; i += 64 * 1024) {
    res.write(body.subarray(i, i + 64 * 1024));
    await new Promise((r) => setTimeout(r, 5));
  }
  res.end();
});
after(async () => {
  await server?.stop('SIGKILL').catch(() => {});
  origin.closeAllConnections();
  await new Promise((r) => origin.close(r));
  if (!process.env.CRASH_KEEP) rmSync(dataDir, { recursive: true, force: true });
});

test(`${TOTAL} mixed uploads, ${KILLS} SIGKILLs at random moments: nothing acknowledged is lost, nothing dangles, one sweep leaves no orphans`, {
  timeout: 15 * 60_000,
}, async (t) => {
  await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
  const originUrl = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
  const env = {
    STOWAGE_DATA_DIR: dataDir,
    STOWAGE_OUTBOUND_ALLOW: '127.0.0.1',
    STOWAGE_SWEEP_INTERVAL_MS: '0',
    STOWAGE_RATE_LIMIT_UPLOAD: 'off',
    STOWAGE_RATE_LIMIT_API: 'off',
  };
  const ws = JSON.parse((await runCli(['workspace', 'create', '--name', 'Crash loop', '--json'], env)).stdout);
  const headers = { 'x-api-key': ws.private_key };
  const acked: Acked[] = [];
  let attempted = 0;

  /** One upload of the given kind; resolves with its record when acknowledged, else null. */
  const upload = async (base: string, n: number): Promise<Acked | null> => {
    const kind = ['direct', 'multipart', 'remote'][n % 3];
    const name = `${kind}-${n}.bin`;
    if (kind === 'direct') {
      const bytes = randomBytes(16 * 1024 + Math.floor(Math.random() * 2 * MiB));
      const form = new FormData();
      form.append('file_name', name);
      form.append('file', new Blob([new Uint8Array(bytes)]));
      const res = await fetch(`${base}/api/v1/uploads`, { method: 'POST', headers, body: form });
      const record = (await res.json()) as any;
      return res.status === 201 ? { kind, name, fileNo: record.file_no, sha256: sha(bytes) } : null;
    }
    if (kind === 'remote') {
      const res = await fetch(`${base}/api/v1/uploads/remote`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json' },
        body: JSON.stringify({ remote_url: `${originUrl}/r/${n}`, file_name: name }),
      });
      const record = (await res.json()) as any;
      return res.status === 201 ? { kind, name, fileNo: record.file_no, sha256: sha(remoteBytes(n)) } : null;
    }
    const bytes = randomBytes(5 * MiB + Math.floor(Math.random() * 7 * MiB));
    const started = await fetch(`${base}/api/v1/multipart/start`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ file_name: name, size: bytes.length, format: 'application/octet-stream' }),
    });
    const s = (await started.json()) as any;
    if (started.status !== 200 && started.status !== 201) return null;
    const session = s.data ?? s;
    await Promise.all(
      session.parts.map(async (url: string, i: number) => {
        const res = await fetch(url.replace(/^http:\/\/[^/]+/, base), {
          method: 'PUT',
          headers: { 'content-type': 'application/octet-stream' },
          body: bytes.subarray(i * session.part_size, (i + 1) * session.part_size),
        });
        await res.arrayBuffer();
        if (res.status !== 200) throw new Error(`part ${i + 1}: ${res.status}`);
      }),
    );
    const done = await fetch(`${base}/api/v1/multipart/complete`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ session_id: session.session_id }),
    });
    const record = (await done.json()) as any;
    return done.status === 200
      ? { kind, name, fileNo: record.file_no ?? record.data?.file_no, sha256: sha(bytes) }
      : null;
  };

  const perLife = Math.ceil(TOTAL / KILLS);
  for (let life = 0; life < KILLS; life++) {
    server = await startServer(env);
    const base = server.url;
    const batch = Array.from({ length: Math.min(perLife, TOTAL - attempted) }, () => attempted++);
    // The kill comes after a random number of acknowledgements (fewer than all), plus a random
    // few milliseconds: always with uploads in flight, at a different stage each time.
    const killAt = Math.floor(Math.random() * batch.length);
    let done = 0;
    let reached!: () => void;
    const enough = new Promise<void>((r) => (reached = r));
    if (killAt === 0) reached();
    const outcomes = Promise.allSettled(
      batch.map((n) =>
        upload(base, n).finally(() => {
          if (++done === killAt) reached();
        }),
      ),
    );
    await enough;
    const extraMs = Math.floor(Math.random() * 30);
    await new Promise((r) => setTimeout(r, extraMs));
    const killAfter = `${killAt} answers + ${extraMs} ms`;
    assert.equal(await server.stop('SIGKILL'), null, 'killed, not exited');
    const settled = await outcomes;
    const ok = settled
      .filter((o): o is PromiseFulfilledResult<Acked> => o.status === 'fulfilled' && o.value !== null)
      .map((o) => o.value);
    acked.push(...ok);
    t.diagnostic(`life ${life + 1}: killed after ${killAfter}; ${ok.length} of ${batch.length} acknowledged`);
  }
  server = undefined;
  assert.equal(attempted, TOTAL);
  assert.ok(
    acked.length > 0 && acked.length < TOTAL,
    `some uploads acknowledged, some cut off (${acked.length} of ${TOTAL})`,
  );
  t.diagnostic(
    `acknowledged: ${acked.length} of ${TOTAL} (${['direct', 'multipart', 'remote'].map((k) => `${k} ${acked.filter((a) => a.kind === k).length}`).join(', ')})`,
  );

  // Before any sweep: every record points at bytes that are there.
  const db = openDatabase({ dataDir });
  try {
    const rows = await db.kysely
      .selectFrom('files')
      .innerJoin('blobs', 'blobs.id', 'files.blob_id')
      .select(['files.name', 'blobs.storage_key'])
      .execute();
    for (const r of rows)
      assert.ok(
        existsSync(join(dataDir, 'storage', 'objects', ...r.storage_key.split('/'))),
        `${r.name} points at missing bytes`,
      );
    // Only what was acknowledged, or finished in the moment before a kill, has a record.
    assert.ok(rows.length >= acked.length);

    // Restart with an eager sweeper: every acknowledged upload is there and byte-exact.
    server = await startServer({ ...env, STOWAGE_SWEEP_INTERVAL_MS: '200', STOWAGE_SWEEP_GRACE_MS: '0' });
    for (const a of acked) {
      const res: Response = await fetch(`${server.url}/api/v1/files/${a.fileNo}`, { headers });
      const record = (await res.json()) as any;
      assert.equal(res.status, 200, `${a.name} is missing`);
      const url: string = String(record.url ?? record.data?.url).replace(/^http:\/\/[^/]+/, server.url);
      const bytes: Buffer = Buffer.from(await (await fetch(url)).arrayBuffer());
      assert.equal(sha(bytes), a.sha256, `${a.name} is not byte-exact`);
    }
    await new Promise((r) => setTimeout(r, 1500));
    const blobs = await db.kysely.selectFrom('blobs').select('storage_key').execute();
    assert.deepEqual(
      storedObjects(dataDir),
      blobs.map((b) => b.storage_key).sort(),
      'no orphaned bytes in storage after one sweep',
    );
    assert.deepEqual(leftoverTemp(dataDir), [], 'no temporary files left');
    const intents = await db.kysely.selectFrom('storage_intents').select(['reason']).execute();
    assert.ok(
      intents.every((i) => i.reason === 'multipart'),
      `only unfinished multipart sessions (alive until they expire) hold intents: ${JSON.stringify(intents)}`,
    );
  } finally {
    await db.close();
  }
});
