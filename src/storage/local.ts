// Local disk. Layout under the root:
//   objects/<key>                 finished objects
//   tmp/<uuid>                    puts in progress (renamed into objects/ when complete)
//   multipart/<uploadId>/data     the multipart file, each part written at its own offset
//   multipart/<uploadId>/meta.json, part-<n>.json   what is known and which parts are done
// Every finished object appears by rename(2), so a crash never leaves half a file visible,
// and completing a multipart upload is a rename, never a copy.
import { createHash, randomUUID } from 'node:crypto';
import { createWriteStream, type Dirent, fdatasync, open as fsOpen } from 'node:fs';
import { mkdir, open, readdir, readFile, rename, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import { type Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  assertKey,
  type ByteRange,
  type MultipartStorage,
  type ObjectInfo,
  ObjectNotFoundError,
  type PartInfo,
  type StorageDriver,
} from './driver.ts';

export class PartLengthError extends Error {
  readonly code = 'EPARTLENGTH';
  constructor(
    public readonly expected: number,
    public readonly received: number,
  ) {
    super(`part must be exactly ${expected} bytes; ${received > expected ? 'more' : `only ${received}`} arrived`);
    this.name = 'PartLengthError';
  }
}

/**
 * A write stream that is durable when it finishes (fsync before close) and flushes in the
 * background as it goes, so that the final fsync has only the tail left: the disk works while
 * the network does, instead of after it.
 */
async function durableWriteStream(path: string, flags: string, start?: number, durable = true) {
  const fd = await new Promise<number>((resolve, reject) => fsOpen(path, flags, 0o640, (err, fd) => (err ? reject(err) : resolve(fd))));
  const stream = createWriteStream(path, { fd, start, flush: durable, autoClose: true, highWaterMark: 1024 * 1024 });
  if (!durable) return stream;
  let unflushed = 0;
  let flushing = false;
  const FLUSH_EVERY = 64 * 1024 * 1024;
  const original = stream.write.bind(stream);
  stream.write = ((chunk: Buffer, ...rest: unknown[]) => {
    unflushed += chunk.length;
    if (unflushed >= FLUSH_EVERY && !flushing) {
      unflushed = 0;
      flushing = true;
      fdatasync(fd, () => {
        flushing = false;
      });
    }
    return (original as (c: Buffer, ...r: unknown[]) => boolean)(chunk, ...rest);
  }) as typeof stream.write;
  return stream;
}

interface UploadMeta {
  key: string;
  size: number;
  partSize: number;
}

const UPLOAD_ID_RE = /^[0-9a-f-]{36}$/;

export class LocalStorage implements StorageDriver, MultipartStorage {
  readonly name = 'local' as const;
  private readonly objects: string;
  private readonly tmp: string;
  private readonly multipart: string;

  constructor(private readonly root: string) {
    this.objects = join(root, 'objects');
    this.tmp = join(root, 'tmp');
    this.multipart = join(root, 'multipart');
  }

  async init(): Promise<void> {
    await Promise.all([this.objects, this.tmp, this.multipart].map((d) => mkdir(d, { recursive: true })));
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

  async put(key: string, body: Readable, opts: { signal?: AbortSignal; durable?: boolean } = {}): Promise<{ size: number }> {
    const target = this.path(key);
    const temp = join(this.tmp, randomUUID());
    let size = 0;
    const counter = new Transform({
      transform(chunk: Buffer, _enc, cb) {
        size += chunk.length;
        cb(null, chunk);
      },
    });
    try {
      // flush: fsync before close, so the rename below never publishes unwritten bytes.
      await pipeline(body, counter, await durableWriteStream(temp, 'wx', undefined, opts.durable !== false), { signal: opts.signal });
      await mkdir(dirname(target), { recursive: true });
      await rename(temp, target);
      return { size };
    } catch (err) {
      await rm(temp, { force: true });
      throw err;
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
    try {
      return JSON.parse(await readFile(join(this.uploadDir(uploadId), 'meta.json'), 'utf8')) as UploadMeta;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new ObjectNotFoundError(`multipart ${uploadId}`);
      throw err;
    }
  }

  async createMultipart(key: string, opts: { size: number; partSize: number }): Promise<string> {
    assertKey(key);
    const uploadId = randomUUID();
    const dir = this.uploadDir(uploadId);
    await mkdir(dir, { recursive: true });
    // A sparse file of the final size: each part lands at its own offset.
    const fh = await open(join(dir, 'data'), 'w', 0o640);
    await fh.truncate(opts.size);
    await fh.close();
    await writeAtomic(join(dir, 'meta.json'), JSON.stringify({ key, size: opts.size, partSize: opts.partSize } satisfies UploadMeta));
    return uploadId;
  }

  async writePart(key: string, uploadId: string, partNumber: number, body: Readable, length: number, signal?: AbortSignal): Promise<PartInfo> {
    const meta = await this.meta(uploadId);
    if (meta.key !== key) throw new ObjectNotFoundError(`multipart ${uploadId}`);
    const dir = this.uploadDir(uploadId);
    const offset = (partNumber - 1) * meta.partSize;
    if (partNumber < 1 || offset + length > meta.size) throw new PartLengthError(Math.max(0, meta.size - offset), length);
    // The part is not done until its record is written again, so a failed re-upload never
    // leaves an old record describing new, half-written bytes.
    await rm(join(dir, `part-${partNumber}.json`), { force: true });
    // The ETag is a content hash of the part: SHA-256 (hardware-accelerated on most CPUs, unlike
    // MD5), cut to the 32 hex digits S3 clients expect.
    const digest = createHash('sha256');
    let received = 0;
    const limiter = new Transform({
      transform(chunk: Buffer, _enc, cb) {
        received += chunk.length;
        if (received > length) return cb(new PartLengthError(length, received));
        digest.update(chunk);
        cb(null, chunk);
      },
    });
    await pipeline(body, limiter, await durableWriteStream(join(dir, 'data'), 'r+', offset), { signal });
    if (received !== length) throw new PartLengthError(length, received);
    const part: PartInfo = { partNumber, size: length, etag: `"${digest.digest('hex').slice(0, 32)}"` };
    await writeAtomic(join(dir, `part-${partNumber}.json`), JSON.stringify(part));
    return part;
  }

  /** The bytes of one finished part (for hashing in order after parts arrived out of order). */
  async readPart(_key: string, uploadId: string, partNumber: number): Promise<Readable> {
    const meta = await this.meta(uploadId);
    const dir = this.uploadDir(uploadId);
    const part = JSON.parse(await readFile(join(dir, `part-${partNumber}.json`), 'utf8')) as PartInfo;
    const start = (partNumber - 1) * meta.partSize;
    const fh = await open(join(dir, 'data'), 'r');
    return fh.createReadStream({ start, end: start + part.size - 1 });
  }

  async listParts(_key: string, uploadId: string): Promise<PartInfo[]> {
    const dir = this.uploadDir(uploadId);
    await this.meta(uploadId);
    const names = (await readdir(dir)).filter((n) => /^part-\d+\.json$/.test(n));
    const parts = await Promise.all(names.map(async (n) => JSON.parse(await readFile(join(dir, n), 'utf8')) as PartInfo));
    return parts.sort((a, b) => a.partNumber - b.partNumber);
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
    await rm(dir, { recursive: true, force: true });
  }

  async abortMultipart(_key: string, uploadId: string): Promise<void> {
    await rm(this.uploadDir(uploadId), { recursive: true, force: true });
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

async function writeAtomic(path: string, text: string): Promise<void> {
  const temp = `${path}.${randomUUID()}.tmp`;
  const fh = await open(temp, 'w', 0o640);
  try {
    await fh.writeFile(text);
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(temp, path);
}

