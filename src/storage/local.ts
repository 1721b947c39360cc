// Local disk. Layout under the root:
//   objects/<key>                 finished objects
//   tmp/<uuid>                    puts in progress (renamed into objects/ when complete)
//   multipart/<uploadId>/data     the multipart file, each part written at its own offset, then
//                                 the table of done parts (storage/part-table.ts)
//   multipart/<uploadId>/meta.json   what is known (sessions from before the table: part-<n>.json too)
// Every finished object appears by rename(2), so a crash never leaves half a file visible,
// and completing a multipart upload is a rename, never a copy. This file is the driver and its
// objects; multipart sessions are storage/local-multipart.ts, the batching and syncing writer
// both use is storage/file-sink.ts.
import { randomUUID } from 'node:crypto';
import type { Dirent } from 'node:fs';
import { mkdir, open, readdir, rm, stat, statfs, writeFile } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import { type Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { FileHasher } from '../uploads/hashing/file-hasher.ts';
import { mapDiskFull } from './disk-full.ts';
import {
  assertKey,
  type ByteRange,
  type MultipartStorage,
  type ObjectInfo,
  ObjectNotFoundError,
  type PartInfo,
  type StorageDriver,
} from './driver.ts';
import { FileSink, renameMakingDirs, syncDirs } from './file-sink.ts';
import { LocalMultipart } from './local-multipart.ts';

/** Kept here as well: where code and comments have long found it. */
export { mapDiskFull } from './disk-full.ts';

/** The largest read of a file being sent (see get()). */
const READ_CHUNK_MAX = 256 * 1024;

export class LocalStorage implements StorageDriver, MultipartStorage {
  readonly name = 'local' as const;
  readonly description = 'files are on local disk';
  private readonly objects: string;
  private readonly tmp: string;
  private readonly multipartDir: string;
  private readonly multipart: LocalMultipart;

  /** Uploads hash off the main thread when the driver has a hasher (see BlobStore.stage). */
  readonly hashesOnPut: boolean;
  /** Puts write a temporary file and rename it into place: `after` is awaited before the rename. */
  readonly publishesLate = true;
  private readonly fsync: boolean;
  private readonly hasher?: FileHasher;

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
    this.multipartDir = join(root, 'multipart');
    this.multipart = new LocalMultipart(this.multipartDir, this.fsync, (key) => this.path(key));
  }

  async init(): Promise<void> {
    await Promise.all([this.objects, this.tmp, this.multipartDir].map((d) => mkdir(d, { recursive: true })));
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
    opts: { signal?: AbortSignal; durable?: boolean; hash?: boolean; after?: Promise<unknown> } = {},
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
    // `after` failing stops the write at once: no reason to take the rest of the body first.
    const stop = new AbortController();
    opts.after?.catch((err) => stop.abort(err));
    const signal = opts.signal ? AbortSignal.any([opts.signal, stop.signal]) : stop.signal;
    try {
      // With fsync, the bytes are on disk before the rename below publishes them.
      const sink = await FileSink.open(
        temp,
        'wx',
        0,
        this.fsync && opts.durable !== false,
        job ? (from, to) => job.feed(temp, from, to) : undefined,
      );
      await pipeline(body, counter, sink, { signal });
      // The thread reads the file by its temporary name: done before the rename.
      const sha256 = await job?.digest();
      // Whatever the caller records before the object may exist (an upload's storage intent).
      await opts.after;
      const created = await renameMakingDirs(temp, target);
      if (this.fsync && opts.durable !== false) await syncDirs(dirname(target), created);
      return { size, sha256 };
    } catch (err) {
      job?.drop();
      await rm(temp, { force: true });
      throw mapDiskFull(stop.signal.aborted ? stop.signal.reason : err);
    }
  }

  async get(key: string, range?: ByteRange): Promise<Readable> {
    const path = this.path(key);
    // Open first, so a missing object is an error here rather than on the stream.
    const fh = await open(path, 'r').catch((err) => {
      if (err.code === 'ENOENT') throw new ObjectNotFoundError(key);
      throw err;
    });
    // Reads as large as the file (or range) up to 256 KiB: a 3 MB original goes out in 12 writes
    // instead of 47 of the default 64 KiB (larger reads measured no better: the socket takes
    // them in pieces), and a small one gets a buffer of its own size, read in one go. The length
    // comes from the open descriptor, so it is the file actually being read.
    let size: number;
    try {
      size = (await fh.stat()).size;
    } catch (err) {
      await fh.close();
      throw err;
    }
    const start = range?.start ?? 0;
    const end = range ? range.end : size - 1;
    const highWaterMark = Math.max(16 * 1024, Math.min(READ_CHUNK_MAX, end - start + 1));
    // An empty file has no last byte to name (end may not precede start).
    return fh.createReadStream(end < start ? { start, highWaterMark } : { start, end, highWaterMark });
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
    // Only the prefix's folder is walked (not every object on the disk): a blob's renditions
    // and a workspace's objects are each one folder.
    const dirs = prefix
      .slice(0, prefix.lastIndexOf('/') + 1)
      .split('/')
      .filter(Boolean);
    const safe = dirs.every((d) => d !== '.' && d !== '..');
    yield* walk.call(this, safe ? join(this.objects, ...dirs) : this.objects);
  }

  // --- multipart: one sparse file per session (storage/local-multipart.ts) -------------------

  /** Where a session's bytes are, each part at (partNumber - 1) * partSize: for hashing in place. */
  multipartDataPath(uploadId: string): string {
    return this.multipart.dataPath(uploadId);
  }

  async createMultipart(key: string, opts: { size: number; partSize: number }): Promise<string> {
    assertKey(key);
    return this.multipart.create(key, opts);
  }

  async sealMultipart(uploadId: string): Promise<void> {
    await this.multipart.gate.seal(uploadId);
  }

  unsealMultipart(uploadId: string): void {
    this.multipart.gate.unseal(uploadId);
  }

  async writePart(
    key: string,
    uploadId: string,
    partNumber: number,
    body: Readable,
    length: number,
    signal?: AbortSignal,
  ): Promise<PartInfo> {
    return this.multipart.writePart(key, uploadId, partNumber, body, length, signal);
  }

  async listParts(_key: string, uploadId: string): Promise<PartInfo[]> {
    return this.multipart.listParts(uploadId);
  }

  async completeMultipart(key: string, uploadId: string, parts: PartInfo[]): Promise<void> {
    return this.multipart.complete(key, uploadId, parts);
  }

  async abortMultipart(_key: string, uploadId: string): Promise<void> {
    return this.multipart.abort(uploadId);
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
          this.multipart.forget(name);
          await rm(path, { recursive: true, force: true });
          removed++;
        }
      }
    };
    await sweep(this.tmp, Date.now() - olderThanMs);
    await sweep(this.multipartDir, Date.now() - multipartOlderThanMs);
    return removed;
  }
}
