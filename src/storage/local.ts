// Local disk. Layout under the root:
//   objects/<key>                 finished objects
//   tmp/<uuid>                    puts in progress (renamed into objects/ when complete)
//   multipart/<uploadId>/data     the multipart file, each part written at its own offset
//   multipart/<uploadId>/meta.json, part-<n>.json   what is known and which parts are done
// Every finished object appears by rename(2), so a crash never leaves half a file visible,
// and completing a multipart upload is a rename, never a copy.
import { randomUUID } from 'node:crypto';
import { close, type Dirent, fdatasync, open as fsOpen, writev } from 'node:fs';
import { mkdir, open, readdir, readFile, rename, rm, stat, statfs, truncate, writeFile } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import { type Readable, Transform, Writable } from 'node:stream';
import { errors } from '../errors.ts';
import type { FileHasher } from '../uploads/hashing/file-hasher.ts';
import { pipeline } from 'node:stream/promises';
import { PartWriteGate, partMeter } from './part-writes.ts';
import {
  assertKey,
  type ByteRange,
  type MultipartStorage,
  type ObjectInfo,
  ObjectNotFoundError,
  type PartInfo,
  PartLengthError,
  type StorageDriver,
} from './driver.ts';

/**
 * Writes a stream to an open file from `start` on, in batches (writev), reporting each written
 * range (for hashing off the main thread). With `sync`, it is durable when it finishes
 * (fdatasync before it ends) and flushes in the background as it goes, so that the final sync
 * has only the tail left: the disk works while the network does, instead of after it.
 */
class FileSink extends Writable {
  private pos: number;
  private unflushed = 0;
  private flushing = false;
  /**
   * Chunks taken but not yet written. Request bodies arrive in pieces of up to 64 KiB; they are
   * written in batches of BATCH_BYTES (one system call, one trip through the thread pool each)
   * and, so that a slow client's bytes never wait long in memory, at the latest HOLD_MS after
   * they came.
   */
  private held: Buffer[] = [];
  private heldBytes = 0;
  private holdTimer: NodeJS.Timeout | undefined;
  /** A write started by the timer, which the next chunk (or the end) waits for. */
  private timedWrite: Promise<void> | null = null;

  /** Operations on the descriptor still running in the thread pool; it is closed only after them. */
  private inflight = 0;
  private idleWaiters: (() => void)[] = [];

  constructor(
    private readonly fd: number,
    start: number,
    private readonly sync: boolean,
    private readonly onWritten?: (from: number, to: number) => void,
  ) {
    super({ highWaterMark: 1024 * 1024 });
    this.pos = start;
  }

  static async open(
    path: string,
    flags: string,
    start: number,
    sync: boolean,
    onWritten?: (from: number, to: number) => void,
  ): Promise<FileSink> {
    const fd = await new Promise<number>((resolve, reject) =>
      fsOpen(path, flags, 0o640, (err, fd) => (err ? reject(err) : resolve(fd))),
    );
    return new FileSink(fd, start, sync, onWritten);
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    this.take([chunk], cb);
  }

  override _writev(chunks: { chunk: Buffer }[], cb: (err?: Error | null) => void): void {
    this.take(
      chunks.map((c) => c.chunk),
      cb,
    );
  }

  private take(buffers: Buffer[], cb: (err?: Error | null) => void): void {
    if (this.timedWrite) return void this.timedWrite.then(() => this.take(buffers, cb), cb);
    for (const b of buffers) {
      this.held.push(b);
      this.heldBytes += b.length;
    }
    if (this.heldBytes >= BATCH_BYTES) {
      this.writeHeld(cb);
      return;
    }
    this.holdTimer ??= setTimeout(() => {
      this.holdTimer = undefined;
      if (this.heldBytes === 0 || this.destroyed) return;
      this.timedWrite = new Promise<void>((resolve, reject) =>
        this.writeHeld((err) => (err ? reject(err) : resolve())),
      );
      this.timedWrite.then(
        () => (this.timedWrite = null),
        (err: Error) => this.destroy(err),
      );
    }, HOLD_MS);
    cb();
  }

  private writeHeld(cb: (err?: Error | null) => void): void {
    clearTimeout(this.holdTimer);
    this.holdTimer = undefined;
    const batch = this.held;
    this.held = [];
    this.heldBytes = 0;
    if (batch.length === 0) {
      cb();
      return;
    }
    this.writeAll(batch, cb);
  }

  private io(): () => void {
    this.inflight++;
    return () => {
      if (--this.inflight > 0) return;
      for (const w of this.idleWaiters.splice(0)) w();
    };
  }

  private writeAll(buffers: Buffer[], cb: (err?: Error | null) => void): void {
    const from = this.pos;
    const total = buffers.reduce((n, b) => n + b.length, 0);
    const done = this.io();
    writev(this.fd, buffers, from, (err, written) => {
      if (err) {
        done();
        return cb(err);
      }
      this.pos += written;
      this.onWritten?.(from, this.pos);
      if (written < total) {
        // A short write: the rest, started before this one counts as done, so the descriptor stays open.
        this.writeAll([Buffer.concat(buffers).subarray(written)], cb);
        return done();
      }
      if (this.sync) {
        this.unflushed += written;
        if (this.unflushed >= FLUSH_EVERY && !this.flushing) {
          this.unflushed = 0;
          this.flushing = true;
          this.datasync(() => {
            this.flushing = false;
          });
        }
      }
      done();
      cb();
    });
  }

  private datasync(cb: (err?: Error | null) => void): void {
    const done = this.io();
    fdatasync(this.fd, (err) => {
      done();
      cb(err);
    });
  }

  override _final(cb: (err?: Error | null) => void): void {
    if (this.timedWrite) return void this.timedWrite.then(() => this._final(cb), cb);
    this.writeHeld((err) => {
      if (err) return cb(err);
      if (this.sync) this.datasync(cb);
      else cb();
    });
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    clearTimeout(this.holdTimer);
    // A write or sync still running would otherwise land on whatever file reuses the number.
    const closeFd = () => close(this.fd, (closeErr) => cb(err ?? closeErr));
    if (this.inflight > 0) this.idleWaiters.push(closeFd);
    else closeFd();
  }
}

/**
 * A full disk (ENOSPC) or an exhausted disk quota (EDQUOT) becomes 507 INSUFFICIENT_STORAGE,
 * with the system error kept as its cause; anything else is passed on as it is.
 */
export function mapDiskFull(err: unknown): unknown {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code !== 'ENOSPC' && code !== 'EDQUOT') return err;
  const full = errors.insufficientStorage();
  full.cause = err;
  return full;
}

const FLUSH_EVERY = 64 * 1024 * 1024;
const BATCH_BYTES = 1024 * 1024;
const HOLD_MS = 100;

interface UploadMeta {
  key: string;
  size: number;
  partSize: number;
}

const UPLOAD_ID_RE = /^[0-9a-f-]{36}$/;

export class LocalStorage implements StorageDriver, MultipartStorage {
  readonly name = 'local' as const;
  readonly description = 'files are on local disk';
  private readonly objects: string;
  private readonly tmp: string;
  private readonly multipart: string;

  /** Uploads hash off the main thread when the driver has a hasher (see BlobStore.stage). */
  readonly hashesOnPut: boolean;
  private readonly fsync: boolean;
  private readonly hasher?: FileHasher;
  /** Sessions' meta, read once per upload rather than once per part. */
  private readonly metas = new Map<string, UploadMeta>();

  /**
   * `fsync: false` acknowledges writes once the kernel has them (as tusd and a plain pipe to a
   * file do): they survive a crash of the process, not of the machine.
   */
  constructor(
    readonly root: string,
    opts: { fsync?: boolean; hasher?: FileHasher } = {},
  ) {
    this.fsync = opts.fsync !== false;
    this.hasher = opts.hasher;
    this.hashesOnPut = opts.hasher !== undefined;
    this.objects = join(root, 'objects');
    this.tmp = join(root, 'tmp');
    this.multipart = join(root, 'multipart');
  }

  async init(): Promise<void> {
    await Promise.all([this.objects, this.tmp, this.multipart].map((d) => mkdir(d, { recursive: true })));
  }

  async freeSpace(): Promise<number> {
    const s = await statfs(this.root);
    return s.bavail * s.bsize;
  }

  async check(): Promise<void> {
    const probe = join(this.tmp, `.ready-${randomUUID()}`);
    await writeFile(probe, '');
    await rm(probe, { force: true });
  }

  private path(key: string): string {
    assertKey(key);
    return join(this.objects, ...key.split('/'));
  }

  localPath(key: string): string {
    return this.path(key);
  }

  async put(
    key: string,
    body: Readable,
    opts: { signal?: AbortSignal; durable?: boolean; hash?: boolean } = {},
  ): Promise<{ size: number; sha256?: string }> {
    const target = this.path(key);
    const temp = join(this.tmp, randomUUID());
    let size = 0;
    const counter = new Transform({
      transform(chunk: Buffer, _enc, cb) {
        size += chunk.length;
        cb(null, chunk);
      },
    });
    const job = opts.hash ? this.hasher?.start() : undefined;
    try {
      // With fsync, the bytes are on disk before the rename below publishes them.
      const sink = await FileSink.open(
        temp,
        'wx',
        0,
        this.fsync && opts.durable !== false,
        job ? (from, to) => job.feed(temp, from, to) : undefined,
      );
      await pipeline(body, counter, sink, { signal: opts.signal });
      // The thread reads the file by its temporary name: done before the rename.
      const sha256 = await job?.digest();
      await mkdir(dirname(target), { recursive: true });
      await rename(temp, target);
      return { size, sha256 };
    } catch (err) {
      job?.drop();
      await rm(temp, { force: true });
      throw mapDiskFull(err);
    }
  }

  async get(key: string, range?: ByteRange): Promise<Readable> {
    const path = this.path(key);
    // Open first, so a missing object is an error here rather than on the stream.
    const fh = await open(path, 'r').catch((err) => {
      if (err.code === 'ENOENT') throw new ObjectNotFoundError(key);
      throw err;
    });
    return fh.createReadStream(range ? { start: range.start, end: range.end } : {});
  }

  async stat(key: string): Promise<ObjectInfo | null> {
    try {
      const s = await stat(this.path(key));
      return s.isFile() ? { key, size: s.size, lastModified: s.mtime } : null;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
  }

  async delete(key: string): Promise<void> {
    await rm(this.path(key), { force: true });
  }

  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    const walk = async function* (this: LocalStorage, dir: string): AsyncIterable<ObjectInfo> {
      let entries: Dirent[];
      try {
        entries = await readdir(dir, { withFileTypes: true });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
        throw err;
      }
      for (const entry of entries.sort((a, b) => a.name.localeCompare(b.name))) {
        const full = join(dir, entry.name);
        if (entry.isDirectory()) yield* walk.call(this, full);
        else if (entry.isFile()) {
          const key = relative(this.objects, full).split(sep).join('/');
          if (key.startsWith(prefix)) {
            const s = await stat(full);
            yield { key, size: s.size, lastModified: s.mtime };
          }
        }
      }
    };
    yield* walk.call(this, this.objects);
  }

  // --- multipart -------------------------------------------------------------------------

  private uploadDir(uploadId: string): string {
    if (!UPLOAD_ID_RE.test(uploadId)) throw new ObjectNotFoundError(`multipart ${uploadId}`);
    return join(this.multipart, uploadId);
  }

  private async meta(uploadId: string): Promise<UploadMeta> {
    const known = this.metas.get(uploadId);
    if (known) return known;
    try {
      const meta = JSON.parse(await readFile(join(this.uploadDir(uploadId), 'meta.json'), 'utf8')) as UploadMeta;
      if (this.metas.size >= 10_000) this.metas.delete(this.metas.keys().next().value!);
      this.metas.set(uploadId, meta);
      return meta;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new ObjectNotFoundError(`multipart ${uploadId}`);
      throw err;
    }
  }

  /** Where a session's bytes are, each part at (partNumber - 1) * partSize: for hashing in place. */
  multipartDataPath(uploadId: string): string {
    return join(this.uploadDir(uploadId), 'data');
  }

  async createMultipart(key: string, opts: { size: number; partSize: number }): Promise<string> {
    assertKey(key);
    const uploadId = randomUUID();
    const dir = this.uploadDir(uploadId);
    const meta: UploadMeta = { key, size: opts.size, partSize: opts.partSize };
    try {
      await mkdir(dir, { recursive: true });
      // A sparse file of the final size: each part lands at its own offset.
      const fh = await open(join(dir, 'data'), 'w', 0o640);
      await fh.truncate(opts.size).finally(() => fh.close());
      // Not fsynced: a session holds no acknowledged bytes yet, and the folder it lives in is not
      // either. Should a power cut lose it, its part URLs answer 404 and the client starts again.
      await writeAtomic(join(dir, 'meta.json'), JSON.stringify(meta), false);
    } catch (err) {
      await rm(dir, { recursive: true, force: true });
      throw mapDiskFull(err);
    }
    this.metas.set(uploadId, meta);
    return uploadId;
  }

  private readonly gate = new PartWriteGate();

  async sealMultipart(uploadId: string): Promise<void> {
    await this.gate.seal(uploadId);
  }

  unsealMultipart(uploadId: string): void {
    this.gate.unseal(uploadId);
  }

  async writePart(
    key: string,
    uploadId: string,
    partNumber: number,
    body: Readable,
    length: number,
    signal?: AbortSignal,
  ): Promise<PartInfo> {
    // A part the disk had no room for is not recorded (it counts as missing); the bytes it got
    // to write stay in the session's file, where its retry writes them again, until the
    // session is completed, aborted or expires.
    return this.gate.run(
      uploadId,
      signal,
      (cut) => this.writePartUnsealed(key, uploadId, partNumber, body, length, cut),
      mapDiskFull,
    );
  }

  private async writePartUnsealed(
    key: string,
    uploadId: string,
    partNumber: number,
    body: Readable,
    length: number,
    signal: AbortSignal,
  ): Promise<PartInfo> {
    const meta = await this.meta(uploadId);
    if (meta.key !== key) throw new ObjectNotFoundError(`multipart ${uploadId}`);
    const dir = this.uploadDir(uploadId);
    const offset = (partNumber - 1) * meta.partSize;
    if (partNumber < 1 || offset + length > meta.size)
      throw new PartLengthError(Math.max(0, meta.size - offset), length);
    // The part is not done until its record is written again, so a failed re-upload never
    // leaves an old record describing new, half-written bytes.
    await rm(join(dir, `part-${partNumber}.json`), { force: true });
    // The ETag is a content hash of the part: XXH3-64 in hex, computed as the bytes pass (about
    // 10 GB/s, so it costs the event loop next to nothing; a second SHA-256 pass over every part
    // cost multipart a quarter of its throughput here). The file's SHA-256 is the hashing
    // thread's (see MultipartService).
    const meter = partMeter(length);
    signal.throwIfAborted();
    const sink = await FileSink.open(join(dir, 'data'), 'r+', offset, this.fsync);
    // Settled only once the descriptor is closed, i.e. after its last write: a seal that waits
    // for this knows no byte of this part can still reach the file.
    const closed = new Promise<void>((resolve) => sink.once('close', resolve));
    try {
      await pipeline(body, meter.stream, sink, { signal });
    } finally {
      if (!sink.closed) sink.destroy();
      await closed;
    }
    signal.throwIfAborted();
    meter.check();
    const part: PartInfo = { partNumber, size: length, etag: meter.etag() };
    await writeAtomic(join(dir, `part-${partNumber}.json`), JSON.stringify(part), this.fsync);
    return part;
  }

  async listParts(_key: string, uploadId: string): Promise<PartInfo[]> {
    const dir = this.uploadDir(uploadId);
    await this.meta(uploadId);
    const names = (await readdir(dir)).filter((n) => /^part-\d+\.json$/.test(n));
    // A record can vanish between readdir and read: its part is being uploaded again, so it is
    // missing for now (this race answered 500 before).
    const parts = await Promise.all(
      names.map(async (n) => {
        try {
          return JSON.parse(await readFile(join(dir, n), 'utf8')) as PartInfo;
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
          throw err;
        }
      }),
    );
    return parts.filter((p): p is PartInfo => p !== null).sort((a, b) => a.partNumber - b.partNumber);
  }

  async completeMultipart(key: string, uploadId: string, parts: PartInfo[]): Promise<void> {
    const meta = await this.meta(uploadId);
    if (meta.key !== key) throw new ObjectNotFoundError(`multipart ${uploadId}`);
    const total = parts.reduce((n, p) => n + p.size, 0);
    if (total !== meta.size) throw new Error(`parts hold ${total} bytes, expected ${meta.size}`);
    const dir = this.uploadDir(uploadId);
    const target = this.path(key);
    await truncate(join(dir, 'data'), meta.size);
    await mkdir(dirname(target), { recursive: true });
    await rename(join(dir, 'data'), target);
    this.metas.delete(uploadId);
    await rm(dir, { recursive: true, force: true });
    this.gate.unseal(uploadId);
  }

  async abortMultipart(_key: string, uploadId: string): Promise<void> {
    await this.sealMultipart(uploadId);
    this.metas.delete(uploadId);
    await rm(this.uploadDir(uploadId), { recursive: true, force: true });
    this.gate.unseal(uploadId);
  }

  /**
   * Removes what a crash can leave on disk: temporary files of puts older than `olderThanMs`
   * (a live put writes to its file continuously), and multipart folders older than
   * `multipartOlderThanMs` (no session lives that long).
   */
  async sweepTemp(olderThanMs: number, multipartOlderThanMs: number): Promise<number> {
    let removed = 0;
    const sweep = async (dir: string, cutoff: number) => {
      for (const name of await readdir(dir).catch(() => [] as string[])) {
        const path = join(dir, name);
        const s = await stat(path).catch(() => null);
        if (s && s.mtimeMs < cutoff) {
          this.metas.delete(name);
          await rm(path, { recursive: true, force: true });
          removed++;
        }
      }
    };
    await sweep(this.tmp, Date.now() - olderThanMs);
    await sweep(this.multipart, Date.now() - multipartOlderThanMs);
    return removed;
  }
}

async function writeAtomic(path: string, text: string, sync: boolean): Promise<void> {
  const temp = `${path}.${randomUUID()}.tmp`;
  const fh = await open(temp, 'w', 0o640);
  try {
    try {
      await fh.writeFile(text);
      if (sync) await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(temp, path);
  } catch (err) {
    // A full disk must not leave half-written records behind.
    await rm(temp, { force: true });
    throw err;
  }
}
