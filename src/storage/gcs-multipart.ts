// Multipart uploads on Google Cloud Storage, parts through the service. Each part is an object of
// its own, uploaded atomically (a part sent again replaces it whole), under .multipart/<uploadId>/
// (hidden from list) next to a `meta` object (the key, size, part size and content type).
// Complete composes the parts into the final object inside storage: at most 32 sources per
// compose, so larger uploads are composed in rounds. A part's ETag is the MD5 storage computed.
import { randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Bucket, File } from '@google-cloud/storage';
import { ObjectNotFoundError, type PartInfo } from './driver.ts';
import {
  checkPart,
  MetaCache,
  multipartDir,
  PartWriteGate,
  padPart,
  partMeter,
  type UploadMeta,
} from './part-writes.ts';

/** GCS composes at most this many sources at once. */
const COMPOSE_MAX = 32;

const isMissing = (err: unknown) => (err as { code?: unknown }).code === 404;

function partOf(file: File, dir: string): PartInfo | null {
  const partNumber = Number(file.name.slice(`${dir}part-`.length));
  const md5 = file.metadata.md5Hash;
  if (!Number.isInteger(partNumber) || typeof md5 !== 'string') return null;
  return { partNumber, size: Number(file.metadata.size ?? 0), etag: `"${Buffer.from(md5, 'base64').toString('hex')}"` };
}

export class GcsMultipart {
  readonly gate = new PartWriteGate();
  private readonly metas = new MetaCache();

  constructor(private readonly bucket: Bucket) {}

  private dir(uploadId: string): string {
    return multipartDir(uploadId);
  }

  private async meta(uploadId: string): Promise<UploadMeta> {
    const known = this.metas.get(uploadId);
    if (known) return known;
    let text: Buffer;
    try {
      [text] = await this.bucket.file(`${this.dir(uploadId)}meta`).download();
    } catch (err) {
      if (isMissing(err)) throw new ObjectNotFoundError(`multipart ${uploadId}`);
      throw err;
    }
    return this.metas.set(uploadId, JSON.parse(text.toString('utf8')) as UploadMeta);
  }

  async create(key: string, opts: { contentType?: string; size: number; partSize: number }): Promise<string> {
    const uploadId = randomUUID();
    const meta: UploadMeta = { key, size: opts.size, partSize: opts.partSize, contentType: opts.contentType };
    await this.bucket
      .file(`${this.dir(uploadId)}meta`)
      .save(JSON.stringify(meta), { resumable: false, contentType: 'application/json' });
    this.metas.set(uploadId, meta);
    return uploadId;
  }

  writePart(
    key: string,
    uploadId: string,
    partNumber: number,
    body: Readable,
    length: number,
    signal?: AbortSignal,
  ): Promise<PartInfo> {
    return this.gate.run(uploadId, signal, async (cut) => {
      const meta = await this.meta(uploadId);
      checkPart(meta, uploadId, key, partNumber, length);
      const dir = this.dir(uploadId);
      const file = this.bucket.file(`${dir}part-${padPart(partNumber)}`);
      const meter = partMeter(length);
      const sink = file.createWriteStream({
        resumable: false,
        validation: 'md5',
        contentType: 'application/octet-stream',
      });
      try {
        await pipeline(body, meter.stream, sink, { signal: cut });
      } catch (err) {
        throw meter.error ?? err;
      }
      cut.throwIfAborted();
      const part = partOf(file, dir);
      if (!part) throw new Error(`storage returned no MD5 for part ${partNumber}`);
      return part;
    });
  }

  async listParts(uploadId: string): Promise<PartInfo[]> {
    const dir = this.dir(uploadId);
    await this.meta(uploadId);
    const parts: PartInfo[] = [];
    for (const file of await this.files(`${dir}part-`)) {
      const part = partOf(file, dir);
      if (part) parts.push(part);
    }
    return parts.sort((a, b) => a.partNumber - b.partNumber);
  }

  async complete(key: string, uploadId: string, parts: PartInfo[]): Promise<void> {
    const meta = await this.meta(uploadId);
    if (meta.key !== key) throw new ObjectNotFoundError(`multipart ${uploadId}`);
    const total = parts.reduce((n, p) => n + p.size, 0);
    if (total !== meta.size) throw new Error(`parts hold ${total} bytes, expected ${meta.size}`);
    const dir = this.dir(uploadId);
    let sources = parts.map((p) => `${dir}part-${padPart(p.partNumber)}`);
    // Rounds of 32 into intermediate objects (removed with the parts), until one compose is left.
    for (let round = 1; sources.length > COMPOSE_MAX; round++) {
      const next: string[] = [];
      for (let i = 0; i < sources.length; i += COMPOSE_MAX) {
        const name = `${dir}round-${round}-${padPart(next.length)}`;
        await this.bucket.combine(sources.slice(i, i + COMPOSE_MAX), name);
        next.push(name);
      }
      sources = next;
    }
    const target = this.bucket.file(key);
    target.metadata = { contentType: meta.contentType ?? 'application/octet-stream' };
    await this.bucket.combine(sources, target);
    await this.forget(uploadId);
  }

  async abort(uploadId: string): Promise<void> {
    await this.gate.seal(uploadId);
    await this.forget(uploadId);
  }

  private async files(prefix: string): Promise<File[]> {
    const all: File[] = [];
    let pageToken: string | undefined;
    do {
      const [files, next] = await this.bucket.getFiles({ prefix, autoPaginate: false, pageToken });
      all.push(...files);
      pageToken = (next as { pageToken?: string } | null)?.pageToken;
    } while (pageToken);
    return all;
  }

  /** Removes an upload's parts and intermediates, meta last (it is what says the upload exists). */
  private async forget(uploadId: string): Promise<void> {
    const dir = this.dir(uploadId);
    const names = (await this.files(dir)).map((f) => f.name).filter((n) => n !== `${dir}meta`);
    for (let i = 0; i < names.length; i += 16)
      await Promise.all(names.slice(i, i + 16).map((n) => this.bucket.file(n).delete({ ignoreNotFound: true })));
    await this.bucket.file(`${dir}meta`).delete({ ignoreNotFound: true });
    this.metas.delete(uploadId);
    this.gate.unseal(uploadId);
  }
}
