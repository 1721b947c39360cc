// Multipart uploads on local disk (see storage/local.ts for the layout under multipart/). A
// session is one sparse file of the final size, each part written in place at
// (partNumber - 1) * partSize; a part is done once its record part-<n>.json is written, so
// listing parts reads records, never data. Complete truncates and renames the file into
// objects/ (no copy); abort seals the upload and removes its folder. Sealing is the shared
// PartWriteGate (storage/part-writes.ts).
import { randomUUID } from 'node:crypto';
import { mkdir, open, readdir, readFile, rename, rm, truncate } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { mapDiskFull } from './disk-full.ts';
import { ObjectNotFoundError, type PartInfo, PartLengthError } from './driver.ts';
import { FileSink } from './file-sink.ts';
import { PartWriteGate, partMeter } from './part-writes.ts';

interface UploadMeta {
  key: string;
  size: number;
  partSize: number;
}

const UPLOAD_ID_RE = /^[0-9a-f-]{36}$/;

export class LocalMultipart {
  readonly gate = new PartWriteGate();
  /** Sessions' meta, read once per upload rather than once per part. */
  private readonly metas = new Map<string, UploadMeta>();

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

  async listParts(uploadId: string): Promise<PartInfo[]> {
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

  async complete(key: string, uploadId: string, parts: PartInfo[]): Promise<void> {
    const meta = await this.meta(uploadId);
    if (meta.key !== key) throw new ObjectNotFoundError(`multipart ${uploadId}`);
    const total = parts.reduce((n, p) => n + p.size, 0);
    if (total !== meta.size) throw new Error(`parts hold ${total} bytes, expected ${meta.size}`);
    const dir = this.uploadDir(uploadId);
    const target = this.objectPath(key);
    await truncate(join(dir, 'data'), meta.size);
    await mkdir(dirname(target), { recursive: true });
    await rename(join(dir, 'data'), target);
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
