// A full disk, on a real small filesystem: a 16 MiB tmpfs mounted over the data directory (the
// SQLite database and local storage both live there, as they do by default), filled by a
// ballast file as another program would fill it. Uploads that find it full while writing get
// 507 INSUFFICIENT_STORAGE and leave nothing behind (no temporary file, no intent, no row);
// uploads that would take it below STOWAGE_MIN_FREE_BYTES are refused 507 before a byte is
// written; /readyz says 503 below the floor while /healthz stays 200; reads and deletes go on;
// once space is freed, uploads work again.
//
// Mounting needs root (CI runs as root). Where mounting is impossible, the suite says why and
// the smaller suite at the end runs instead: it injects ENOSPC into the real driver's file
// writes (node:fs writev) and a small statfs answer, and checks the same answers.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs, { mkdtempSync, readdirSync, rmSync, statfsSync, unlinkSync, writeFileSync } from 'node:fs';
import fsp from 'node:fs/promises';
import http from 'node:http';
import { syncBuiltinESMExports } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import sharp from 'sharp';
import { ConfigError, loadConfig } from '../src/config.ts';
import { DISK_AMPLE_BYTES, DISK_READING_MS, DiskSpace } from '../src/http/upload-slots.ts';
import { type Harness, makeHarness } from './helpers/harness.ts';

const MiB = 1024 * 1024;
const FLOOR = 2 * MiB;

/** Mounts a tmpfs of `size` at `dir`; the reason it cannot, or null when mounted. */
function mountTmpfs(dir: string, size: string): string | null {
  if (process.env.STOWAGE_TEST_NO_MOUNT) return 'STOWAGE_TEST_NO_MOUNT is set';
  if (process.platform !== 'linux') return `tmpfs mounts need Linux (this is ${process.platform})`;
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0700`, 'tmpfs', dir], { stdio: 'pipe' });
    return null;
  } catch (err) {
    const e = err as { stderr?: Buffer; message: string };
    return `mount -t tmpfs failed (root is needed): ${(e.stderr?.toString() || e.message).trim()}`;
  }
}

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: any;
}

/**
 * One request over a real socket, its body sent from `chunks` (chunked when no content-length
 * is given). The server may answer before the body is all sent and close the connection: the
 * answer counts, the failed writes after it do not.
 */
function send(
  base: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  chunks: Iterable<Buffer> | AsyncIterable<Buffer> = [],
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    let answered = false;
    const req = http.request(`${base}${path}`, { method, headers }, (res) => {
      answered = true;
      const got: Buffer[] = [];
      res.on('data', (d) => got.push(d));
      res.on('error', () => {});
      res.on('end', () => {
        const text = Buffer.concat(got).toString();
        let body: any;
        try {
          body = text ? JSON.parse(text) : undefined;
        } catch {
          body = text;
        }
        resolve({ status: res.statusCode!, headers: res.headers, body });
      });
    });
    req.on('error', (err) => {
      if (!answered) reject(err);
    });
    (async () => {
      for await (const c of chunks) {
        if (req.destroyed || answered) return;
        if (!req.write(c)) {
          await new Promise<void>((r) => {
            const done = () => {
              req.off('drain', done).off('close', done);
              r();
            };
            req.on('drain', done).on('close', done);
          });
        }
      }
      req.end();
    })().catch(() => {});
  });
}

function* pieces(data: Buffer, size = 64 * 1024): Iterable<Buffer> {
  for (let i = 0; i < data.length; i += size) yield data.subarray(i, i + size);
}

/** A multipart/form-data upload body: file_name, then the file. */
function form(name: string, data: Buffer): { type: string; parts: Buffer[]; length: number } {
  const boundary = `b-${randomBytes(8).toString('hex')}`;
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="file_name"\r\n\r\n${name}\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${name}"\r\nContent-Type: application/octet-stream\r\n\r\n`,
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  return {
    type: `multipart/form-data; boundary=${boundary}`,
    parts: [head, ...pieces(data), tail],
    length: head.length + data.length + tail.length,
  };
}

function assertInsufficientStorage(res: Answer): void {
  assert.equal(res.status, 507, JSON.stringify(res.body));
  assert.equal(res.body.success, false);
  assert.equal(res.body.errorCode, 'INSUFFICIENT_STORAGE');
  assert.equal(res.body.error, 'Insufficient storage');
  assert.equal(typeof res.body.message, 'string');
}

test('STOWAGE_MIN_FREE_BYTES: whole bytes, 256 MiB by default; a bad value names the variable', () => {
  const dir = mkdtempSync(join(tmpdir(), 'stowage-diskcfg-'));
  try {
    assert.equal(loadConfig({ STOWAGE_DATA_DIR: dir }).minFreeBytes, 256 * MiB);
    assert.equal(loadConfig({ STOWAGE_DATA_DIR: dir, STOWAGE_MIN_FREE_BYTES: '0' }).minFreeBytes, 0);
    for (const bad of ['1GB', '-1', '1.5']) {
      assert.throws(
        () => loadConfig({ STOWAGE_DATA_DIR: dir, STOWAGE_MIN_FREE_BYTES: bad }),
        (err: unknown) =>
          err instanceof ConfigError && err.problems.some((p) => p.startsWith('STOWAGE_MIN_FREE_BYTES')),
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

const mountDir = mkdtempSync(join(tmpdir(), 'stowage-diskfull-'));
const cannotMount = mountTmpfs(mountDir, '16m');
if (cannotMount) after(() => rmSync(mountDir, { recursive: true, force: true }));

describe('a full disk: a 16 MiB tmpfs under the data directory', { skip: cannotMount ?? false }, () => {
  let h: Harness;
  let base: string;
  let ballast = 0;
  const free = () => {
    const s = statfsSync(mountDir);
    return s.bavail * s.bsize;
  };
  /** Fills the disk with a ballast file until `leave` bytes are free. */
  const fill = (leave: number) => {
    const size = free() - leave;
    if (size > 0) writeFileSync(join(mountDir, `ballast-${ballast++}`), Buffer.alloc(size));
  };
  const emptyBallast = () => {
    for (const name of readdirSync(mountDir)) if (name.startsWith('ballast-')) unlinkSync(join(mountDir, name));
  };
  const db = () => h.services.db.kysely;
  const tmpFiles = () => readdirSync(join(mountDir, 'storage', 'tmp'));
  const counts = async () => ({
    files: (await db().selectFrom('files').select('id').execute()).length,
    blobs: (await db().selectFrom('blobs').select('id').execute()).length,
    intents: (await db().selectFrom('storage_intents').selectAll().execute()).length,
  });
  const upload = (name: string, data: Buffer, declare = true) => {
    const f = form(name, data);
    const headers: Record<string, string> = { ...h.auth, 'content-type': f.type };
    if (declare) headers['content-length'] = String(f.length);
    return send(base, 'POST', '/api/v1/uploads', headers, f.parts);
  };
  const json = (method: string, path: string, body?: unknown) =>
    send(
      base,
      method,
      path,
      body === undefined ? h.auth : { ...h.auth, 'content-type': 'application/json' },
      body === undefined ? [] : [Buffer.from(JSON.stringify(body))],
    );
  const partPath = (url: string) => {
    const u = new URL(url);
    return `${u.pathname}${u.search}`;
  };
  const seeded: Record<string, { file_no: string; data: Buffer }> = {};
  let session: { session_id: string; parts: string[] };

  before(async () => {
    h = await makeHarness('sqlite', { config: { dataDir: mountDir, minFreeBytes: FLOOR } });
    base = await h.app.listen({ host: '127.0.0.1', port: 0 });
    const png = await sharp({ create: { width: 64, height: 48, channels: 3, background: '#3366cc' } })
      .png()
      .toBuffer();
    for (const [name, data] of [
      ['keep.bin', randomBytes(512 * 1024)],
      ['gone.bin', randomBytes(3 * MiB)],
      ['pic.png', png],
    ] as const) {
      const res = await upload(name, data);
      assert.equal(res.status, 201, JSON.stringify(res.body));
      seeded[name] = { file_no: res.body.file_no, data };
    }
  });
  after(async () => {
    await h?.close();
    execFileSync('umount', ['-l', mountDir]);
    rmSync(mountDir, { recursive: true, force: true });
  });

  test('above the floor: ready', async () => {
    fill(5 * MiB);
    const ready = await send(base, 'GET', '/readyz', {});
    assert.equal(ready.status, 200, JSON.stringify(ready.body));
  });

  test('an upload that finds the disk full while writing: 507 in the error shape; no temporary file, intent, blob or row; the space is back', async () => {
    const before = await counts();
    const freeBefore = free();
    // Sent chunked, with no length to judge it by: it is let in and fills the disk.
    const res = await upload('big.bin', randomBytes(8 * MiB), false);
    assertInsufficientStorage(res);
    assert.deepEqual(tmpFiles(), []);
    assert.deepEqual(await counts(), before);
    assert.equal((await db().selectFrom('files').select('id').where('name', '=', 'big.bin').execute()).length, 0);
    // The partial file is gone (the database may have grown by a few pages). Its space comes back
    // once the last descriptor on it closes: the hashing thread may still be reading a range of
    // it when the answer goes out (seen on a loaded machine), so allow it a moment.
    for (let i = 0; i < 50 && free() <= freeBefore - 256 * 1024; i++) await new Promise((r) => setTimeout(r, 100));
    assert.ok(free() > freeBefore - 256 * 1024, `free ${free()} after, ${freeBefore} before`);
  });

  test('an upload whose declared length would take the disk below the floor: 507 before a byte is written', async () => {
    const before = await counts();
    const freeBefore = free();
    assertInsufficientStorage(await upload('four.bin', randomBytes(4 * MiB)));
    assert.deepEqual(await counts(), before);
    assert.deepEqual(tmpFiles(), []);
    assert.ok(free() > freeBefore - 64 * 1024);
  });

  test('a multipart part that would take the disk below the floor: 507, the session stays usable', async () => {
    const started = await json('POST', '/api/v1/multipart/start', {
      file_name: 'parts.bin',
      size: 6 * MiB,
      format: 'application/octet-stream',
    });
    assert.equal(started.status, 201, JSON.stringify(started.body));
    session = started.body;
    const part = randomBytes(6 * MiB);
    const res = await send(
      base,
      'PUT',
      partPath(session.parts[0]),
      { 'content-type': 'application/octet-stream', 'content-length': String(part.length) },
      pieces(part),
    );
    assertInsufficientStorage(res);
    const status = await json('GET', `/api/v1/multipart/${session.session_id}`);
    assert.equal(status.body.data.status, 'active');
    assert.deepEqual(status.body.data.uploaded_parts, []);
  });

  test('below the floor: /readyz 503 (storage "low"), /healthz 200, every upload refused 507 up front', async () => {
    fill(FLOOR / 2);
    const ready = await send(base, 'GET', '/readyz', {});
    assert.equal(ready.status, 503);
    assert.deepEqual(ready.body, { status: 'not ready', checks: { database: 'ok', storage: 'low' } });
    assert.equal((await send(base, 'GET', '/healthz', {})).status, 200);
    const before = await counts();
    assertInsufficientStorage(await upload('tiny.txt', Buffer.from('hello')));
    assert.deepEqual(await counts(), before);
  });

  test('below the floor, reads go on: files and their records are served', async () => {
    const keep = seeded['keep.bin'];
    const got = await fetch(`${base}/${h.ws.workspace_id}/keep.bin`);
    assert.equal(got.status, 200);
    assert.ok(Buffer.from(await got.arrayBuffer()).equals(keep.data));
    assert.equal((await json('GET', `/api/v1/files/${keep.file_no}`)).status, 200);
    assert.equal((await json('GET', '/api/v1/files')).status, 200);
  });

  test('below the floor, deletes go on and free their bytes: ready again once above it', async () => {
    const freeBefore = free();
    const res = await json('DELETE', `/api/v1/files/${seeded['gone.bin'].file_no}`);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.ok(free() >= freeBefore + 3 * MiB - 256 * 1024, `free ${free()} after, ${freeBefore} before`);
    assert.equal((await fetch(`${base}/${h.ws.workspace_id}/gone.bin`)).status, 404);
    assert.equal((await send(base, 'GET', '/readyz', {})).status, 200);
  });

  test('a part that finds the disk full while writing: 507; it is not recorded and no record file is left', async () => {
    // Let in (it fits above the floor), then another program fills the disk while it is sent.
    emptyBallast();
    fill(10 * MiB);
    const part = randomBytes(6 * MiB);
    const start = free();
    async function* meanwhile(): AsyncIterable<Buffer> {
      yield* pieces(part.subarray(0, 2 * MiB));
      // Once the part's first bytes are on disk:
      for (let i = 0; i < 100 && free() > start - MiB; i++) await new Promise((r) => setTimeout(r, 50));
      fill(512 * 1024);
      yield* pieces(part.subarray(2 * MiB));
    }
    assert.ok(free() - part.length >= FLOOR, `room for the part above the floor (${free()} bytes free)`);
    const res = await send(
      base,
      'PUT',
      partPath(session.parts[0]),
      { 'content-type': 'application/octet-stream', 'content-length': String(part.length) },
      meanwhile(),
    );
    assertInsufficientStorage(res);
    assert.ok(free() < 64 * 1024, `the part filled the disk (${free()} bytes free)`);
    const status = await json('GET', `/api/v1/multipart/${session.session_id}`);
    assert.equal(status.status, 200);
    assert.deepEqual(status.body.data.uploaded_parts, []);
    const [upload] = readdirSync(join(mountDir, 'storage', 'multipart'));
    assert.deepEqual(
      readdirSync(join(mountDir, 'storage', 'multipart', upload)).sort(),
      ['data', 'meta.json'],
      'no part record, whole or half-written',
    );
    // With no byte free, reads still go on.
    const got = await fetch(`${base}/${h.ws.workspace_id}/keep.bin`);
    assert.equal(got.status, 200);
    await got.arrayBuffer();
  });

  test('a rendition that cannot be cached for lack of space: 507 in the error shape, nothing cached', async () => {
    const res = await send(base, 'GET', `/${h.ws.workspace_id}/w_10/pic.png`, {});
    assertInsufficientStorage(res);
    for await (const o of h.services.storage.list('')) assert.ok(!o.key.includes('.renditions/'), `cached: ${o.key}`);
  });

  test('once space is freed (the ballast removed, the session aborted), uploads work again', async () => {
    emptyBallast();
    const aborted = await json('DELETE', `/api/v1/multipart/${session.session_id}`);
    assert.equal(aborted.status, 200, JSON.stringify(aborted.body));
    assert.equal((await send(base, 'GET', '/readyz', {})).status, 200);
    const data = randomBytes(4 * MiB);
    const res = await upload('after.bin', data);
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const got = await fetch(`${base}/${h.ws.workspace_id}/after.bin`);
    assert.ok(Buffer.from(await got.arrayBuffer()).equals(data));
    assert.deepEqual(tmpFiles(), []);
    assert.equal((await counts()).intents, 0);
  });
});

// Only where no tmpfs can be mounted: ENOSPC injected into the real driver's writes.
describe('a full disk, injected (no tmpfs could be mounted)', {
  skip: cannotMount ? false : 'a real tmpfs was mounted: the suite above ran',
}, () => {
  let h: Harness;
  let base: string;
  let dataDir: string;
  const realWritev = fs.writev;
  const realStatfs = fsp.statfs;
  let full = false;
  let tinyFree = false;

  before(async () => {
    if (cannotMount) process.stderr.write(`disk-full: no tmpfs (${cannotMount}); injecting ENOSPC instead\n`);
    // The driver writes file data with fs.writev: it fails as a full disk makes it fail.
    (fs as { writev: unknown }).writev = (
      fd: number,
      buffers: unknown,
      position: unknown,
      cb: (...args: unknown[]) => void,
    ) => {
      if (!full) return (realWritev as (...args: unknown[]) => void)(fd, buffers, position, cb);
      const err = Object.assign(new Error('ENOSPC: no space left on device, write'), {
        code: 'ENOSPC',
        errno: -28,
        syscall: 'write',
      });
      process.nextTick(cb, err);
    };
    fsp.statfs = (async (path: string) => {
      const s = await realStatfs(path);
      return tinyFree ? { ...s, bavail: 1, bsize: 4096 } : s;
    }) as typeof fsp.statfs;
    syncBuiltinESMExports();
    dataDir = mkdtempSync(join(tmpdir(), 'stowage-diskfull-injected-'));
    h = await makeHarness('sqlite', { config: { dataDir, minFreeBytes: FLOOR } });
    base = await h.app.listen({ host: '127.0.0.1', port: 0 });
  });
  after(async () => {
    (fs as { writev: unknown }).writev = realWritev;
    fsp.statfs = realStatfs;
    syncBuiltinESMExports();
    await h?.close();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  test('upload and part on a full disk: 507, nothing left behind; readyz 503 below the floor; reads go on', async () => {
    const data = randomBytes(2 * MiB);
    const f = form('kept.bin', data);
    const kept = await send(base, 'POST', '/api/v1/uploads', { ...h.auth, 'content-type': f.type }, f.parts);
    assert.equal(kept.status, 201);
    full = true;
    const g = form('big.bin', randomBytes(2 * MiB));
    assertInsufficientStorage(
      await send(base, 'POST', '/api/v1/uploads', { ...h.auth, 'content-type': g.type }, g.parts),
    );
    assert.deepEqual(readdirSync(join(h.config.dataDir, 'storage', 'tmp')), []);
    assert.equal((await h.services.db.kysely.selectFrom('storage_intents').selectAll().execute()).length, 0);
    const started = await send(
      base,
      'POST',
      '/api/v1/multipart/start',
      { ...h.auth, 'content-type': 'application/json' },
      [Buffer.from(JSON.stringify({ file_name: 'p.bin', size: MiB, format: 'application/octet-stream' }))],
    );
    const u = new URL(started.body.parts[0]);
    assertInsufficientStorage(
      await send(
        base,
        'PUT',
        `${u.pathname}${u.search}`,
        { 'content-type': 'application/octet-stream' },
        pieces(randomBytes(MiB)),
      ),
    );
    tinyFree = true;
    assert.equal((await send(base, 'GET', '/readyz', {})).status, 503);
    assert.equal((await send(base, 'GET', '/healthz', {})).status, 200);
    const got = await fetch(`${base}/${h.ws.workspace_id}/kept.bin`);
    assert.ok(Buffer.from(await got.arrayBuffer()).equals(data));
    full = false;
    tinyFree = false;
  });
});

describe('free-space readings for upload admission (DiskSpace.roomFor)', () => {
  /** A DiskSpace whose disk says `free` bytes, counting how often it was read. */
  class Counted extends DiskSpace {
    reads = 0;
    constructor(
      public space: number,
      floor: number,
    ) {
      super('/nonexistent', floor);
    }
    override async free(): Promise<number> {
      this.reads++;
      return this.space;
    }
  }
  const GiB = 1024 * MiB;

  test('ample room: one reading serves a second of uploads; near the floor, every upload reads the disk', async () => {
    const ample = new Counted(100 * GiB, 256 * MiB);
    for (let i = 0; i < 50; i++) assert.equal(await ample.roomFor(100_000, 1_000 + i), true);
    assert.equal(ample.reads, 1, 'one statfs for 50 small uploads within a second');
    assert.equal(await ample.roomFor(100_000, 1_000 + DISK_READING_MS), true);
    assert.equal(ample.reads, 2, 'read again once the reading is a second old');

    const tight = new Counted(DISK_AMPLE_BYTES, 256 * MiB);
    for (let i = 0; i < 5; i++) assert.equal(await tight.roomFor(1_000, 5_000 + i), true);
    assert.equal(tight.reads, 5, 'under the ample margin: a reading per upload');
    tight.space = 256 * MiB + 500;
    assert.equal(await tight.roomFor(1_000, 5_010), false, 'the floor holds at once');
  });

  test('bytes admitted since a reading count against it: a burst that eats the margin gets the disk read again', async () => {
    const disk = new Counted(DISK_AMPLE_BYTES + 256 * MiB + 3 * GiB, 256 * MiB);
    assert.equal(await disk.roomFor(0, 0), true);
    assert.equal(await disk.roomFor(2 * GiB, 1), true);
    assert.equal(disk.reads, 1, '2 GiB admitted: still ample');
    // The disk filled meanwhile (another writer): the next declared upload crosses the margin
    // and reads the disk, which refuses it.
    disk.space = 256 * MiB + 10 * MiB;
    assert.equal(await disk.roomFor(2 * GiB, 2), false);
    assert.equal(disk.reads, 2);
  });
});
