// Multipart uploads on local disk (see storage/local.ts for the layout under multipart/). A
// session is one sparse file of the final size, each part written in place at
// (partNumber - 1) * partSize, followed by a table of part records (storage/part-table.ts); a
// part is done once its record is written and flushed, so listing parts reads records, never
// data. (Sessions started before the table kept one part-<n>.json per part; they still work.)
// Complete truncates and renames the file into objects/ (no copy); abort seals the upload and
// removes its folder. Sealing is the shared PartWriteGate (storage/part-writes.ts).
import { randomUUID } from 'node:crypto';
import { type FileHandle, mkdir, open, readdir, readFile, rename, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { mapDiskFull } from './disk-full.ts';
import { ObjectNotFoundError, type PartInfo, PartLengthError } from './driver.ts';
import { FileSink, renameMakingDirs, SharedFlush, syncDirs } from './file-sink.ts';
import { decodeSlot, decodeTable, EMPTY_SLOT, encodeSlot, partCountOf, SLOT, slotOffset } from './part-table.ts';
import { PartWriteGate, partMeter } from './part-writes.ts';

interface UploadMeta {
  key: string;
  size: number;
  partSize: number;
  /** Part records in the data file's table; absent in sessions from before it (part-<n>.json). */
  table?: true;
}

/** A session's data file while parts are being written to it: one descriptor and one flush for all. */
interface OpenSession {
  file: Promise<FileHandle>;
  flush: SharedFlush;
  users: number;
}

const UPLOAD_ID_RE = /^[0-9a-f-]{36}$/;

export class LocalMultipart {
  readonly gate = new PartWriteGate();
  /** Sessions' meta, read once per upload rather than once per part. */
  private readonly metas = new Map<string, UploadMeta>();
  private readonly open = new Map<string, OpenSession>();

  /**
   * `root` is the multipart/ folder; `objectPath` maps a key to its file under objects/ (where
   * complete renames the session's file to).
   */
  constructor(
    private readonly root: string,
    private readonly fsync: boolean,
    private readonly objectPath: (key: string) => string,
  ) {}

  private uploadDir(uploadId: string): string {
    if (!UPLOAD_ID_RE.test(uploadId)) throw new ObjectNotFoundError(`multipart ${uploadId}`);
    return join(this.root, uploadId);
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
  dataPath(uploadId: string): string {
    return join(this.uploadDir(uploadId), 'data');
  }

  /** The caller has checked the key. */
  async create(key: string, opts: { size: number; partSize: number }): Promise<string> {
    const uploadId = randomUUID();
    const dir = this.uploadDir(uploadId);
    const meta: UploadMeta = { key, size: opts.size, partSize: opts.partSize, table: true };
    try {
      await mkdir(dir, { recursive: true });
      // A sparse file of the final size and the (empty) table: each part lands at its own offset.
      const fh = await open(join(dir, 'data'), 'w', 0o640);
      await fh.truncate(slotOffset(opts.size, partCountOf(opts.size, opts.partSize) + 1)).finally(() => fh.close());
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

  /** Forgets a session's cached meta (its folder was swept). */
  forget(uploadId: string): void {
    this.metas.delete(uploadId);
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
    return this.withOpen(uploadId, join(dir, 'data'), async (fh, flush) => {
      const slot = meta.table ? slotOffset(meta.size, partNumber) : undefined;
      const recordPath = join(dir, `part-${partNumber}.json`);
      // The part is not done until its record is written again, so a failed re-upload never
      // leaves an old record describing new, half-written bytes (flushed first: a power cut
      // must not find the old record over new bytes).
      if (slot === undefined) await rm(recordPath, { force: true });
      else if (decodeSlot((await fh.read(Buffer.alloc(SLOT), 0, SLOT, slot)).buffer, partNumber)) {
        await writeSlot(fh, EMPTY_SLOT, slot);
        if (this.fsync) await flush.flush(fh.fd);
      }
      // The ETag is a content hash of the part: XXH3-64 in hex, computed as the bytes pass (about
      // 10 GB/s, so it costs the event loop next to nothing; a second SHA-256 pass over every part
      // cost multipart a quarter of its throughput here). The file's SHA-256 is the hashing
      // thread's (see MultipartService).
      const meter = partMeter(length);
      signal.throwIfAborted();
      const sink = await FileSink.open(join(dir, 'data'), 'r+', offset, this.fsync, undefined, flush);
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
      // The record after the bytes are durable, then flushed itself: it never names bytes a
      // power cut could take.
      if (slot === undefined) await writeAtomic(recordPath, JSON.stringify(part), this.fsync);
      else {
        await writeSlot(fh, encodeSlot(part), slot);
        if (this.fsync) await flush.flush(fh.fd);
      }
      return part;
    });
  }

  /**
   * Runs `fn` with the session's data file open: the parts in flight share one descriptor (for
   * their records) and one flush (see SharedFlush); it is closed when the last of them ends.
   */
  private async withOpen<T>(
    uploadId: string,
    path: string,
    fn: (fh: FileHandle, flush: SharedFlush) => Promise<T>,
  ): Promise<T> {
    let session = this.open.get(uploadId);
    if (!session) {
      session = { file: open(path, 'r+'), flush: new SharedFlush(), users: 0 };
      session.file.catch(() => {}); // awaited below; this only keeps a failed open from going unhandled
      this.open.set(uploadId, session);
    }
    session.users++;
    try {
      return await fn(await session.file, session.flush);
    } finally {
      if (--session.users === 0) {
        this.open.delete(uploadId);
        await session.file.then(
          (fh) => fh.close(),
          () => {},
        );
      }
    }
  }

  async listParts(uploadId: string): Promise<PartInfo[]> {
    const dir = this.uploadDir(uploadId);
    const meta = await this.meta(uploadId);
    if (meta.table) {
      const count = partCountOf(meta.size, meta.partSize);
      let fh: FileHandle;
      try {
        fh = await open(join(dir, 'data'), 'r');
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new ObjectNotFoundError(`multipart ${uploadId}`);
        throw err;
      }
      try {
        const table = Buffer.alloc(count * SLOT);
        const { bytesRead } = await fh.read(table, 0, table.length, slotOffset(meta.size, 1));
        return decodeTable(table.subarray(0, bytesRead), count);
      } finally {
        await fh.close();
      }
    }
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

  async complete(key: string, uploadId: string, parts: PartInfo[]): Promise<void> {
    const meta = await this.meta(uploadId);
    if (meta.key !== key) throw new ObjectNotFoundError(`multipart ${uploadId}`);
    const total = parts.reduce((n, p) => n + p.size, 0);
    if (total !== meta.size) throw new Error(`parts hold ${total} bytes, expected ${meta.size}`);
    const dir = this.uploadDir(uploadId);
    const target = this.objectPath(key);
    // Cuts the part table off; flushed, so a power cut cannot bring the table back as the
    // object's last bytes.
    const fh = await open(join(dir, 'data'), 'r+');
    try {
      await fh.truncate(meta.size);
      if (this.fsync) await fh.datasync();
    } finally {
      await fh.close();
    }
    const created = await renameMakingDirs(join(dir, 'data'), target);
    if (this.fsync) await syncDirs(dirname(target), created);
    this.metas.delete(uploadId);
    await rm(dir, { recursive: true, force: true });
    this.gate.unseal(uploadId);
  }

  async abort(uploadId: string): Promise<void> {
    await this.gate.seal(uploadId);
    this.metas.delete(uploadId);
    await rm(this.uploadDir(uploadId), { recursive: true, force: true });
    this.gate.unseal(uploadId);
  }
}

/** Writes a small file whole or not at all: a temporary file renamed into place. */
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

async function writeSlot(fh: FileHandle, slot: Buffer, position: number): Promise<void> {
  const { bytesWritten } = await fh.write(slot, 0, slot.length, position);
  if (bytesWritten < slot.length) throw new Error('short write of a part record');
}
