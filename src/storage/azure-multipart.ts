// Multipart uploads on Azure Blob Storage, parts through the service. Each part is staged as an
// uncommitted block of the final blob (block id from the part number, so a re-upload replaces
// it); complete commits the block list in order, which makes the blob appear whole and copies
// nothing. Azure keeps no content hash of a block, so what is known about an upload lives next
// to it under .multipart/<uploadId>/ (hidden from list):
//   meta        JSON: the key, size, part size and content type
//   part-<n>    empty blob whose metadata holds the part's size and ETag, written once the
//               block is staged (removed first when a part is sent again)
import { randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { ContainerClient } from '@azure/storage-blob';
import { ObjectNotFoundError, type PartInfo } from './driver.ts';
import {
  checkPart,
  MetaCache,
  meterBody,
  multipartDir,
  PartWriteGate,
  padPart,
  type UploadMeta,
} from './part-writes.ts';

/** All block ids of a blob must have the same length: the part number, zero-padded. */
const blockId = (partNumber: number) => Buffer.from(`stowage-part-${padPart(partNumber)}`).toString('base64');

const isStatus = (err: unknown, ...codes: number[]) => codes.includes((err as { statusCode?: number }).statusCode ?? 0);

/** Runs `fn` over `items`, `width` at a time. */
async function eachLimited<T>(items: T[], width: number, fn: (item: T) => Promise<unknown>): Promise<void> {
  for (let i = 0; i < items.length; i += width) await Promise.all(items.slice(i, i + width).map(fn));
}

export class AzureMultipart {
  readonly gate = new PartWriteGate();
  private readonly metas = new MetaCache();

  constructor(private readonly container: ContainerClient) {}

  private dir(uploadId: string): string {
    return multipartDir(uploadId);
  }

  private async meta(uploadId: string): Promise<UploadMeta> {
    const known = this.metas.get(uploadId);
    if (known) return known;
    let text: Buffer;
    try {
      text = await this.container.getBlobClient(`${this.dir(uploadId)}meta`).downloadToBuffer();
    } catch (err) {
      if (isStatus(err, 404)) throw new ObjectNotFoundError(`multipart ${uploadId}`);
      throw err;
    }
    return this.metas.set(uploadId, JSON.parse(text.toString('utf8')) as UploadMeta);
  }

  async create(key: string, opts: { contentType?: string; size: number; partSize: number }): Promise<string> {
    const uploadId = randomUUID();
    const meta: UploadMeta = { key, size: opts.size, partSize: opts.partSize, contentType: opts.contentType };
    const text = JSON.stringify(meta);
    await this.container.getBlockBlobClient(`${this.dir(uploadId)}meta`).upload(text, Buffer.byteLength(text));
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
      // The part is not done until its record is written again, so a failed re-upload never
      // leaves an old record describing a block that was replaced.
      const record = this.container.getBlockBlobClient(`${this.dir(uploadId)}part-${padPart(partNumber)}`);
      await record.deleteIfExists({ abortSignal: cut });
      // A body that fails or has the wrong length ends the request: Azure must not wait for the rest.
      const { meter, failed } = meterBody(body, length);
      let sent = false;
      try {
        await this.container.getBlockBlobClient(key).stageBlock(
          blockId(partNumber),
          () => {
            // A stream cannot be sent twice: a retry of the SDK fails instead of sending nothing.
            if (sent) throw new Error('a part body cannot be sent again');
            sent = true;
            return meter.stream;
          },
          length,
          { abortSignal: AbortSignal.any([cut, failed]) },
        );
      } catch (err) {
        throw meter.error ?? err;
      }
      cut.throwIfAborted();
      const etag = meter.etag();
      await record.upload('', 0, { metadata: { size: String(length), etag: etag.slice(1, -1) } });
      return { partNumber, size: length, etag };
    });
  }

  async listParts(uploadId: string): Promise<PartInfo[]> {
    const dir = this.dir(uploadId);
    await this.meta(uploadId);
    const parts: PartInfo[] = [];
    for await (const b of this.container.listBlobsFlat({ prefix: `${dir}part-`, includeMetadata: true })) {
      const partNumber = Number(b.name.slice(dir.length + 'part-'.length));
      const size = Number(b.metadata?.size);
      if (!Number.isInteger(partNumber) || !Number.isFinite(size) || !b.metadata?.etag) continue;
      parts.push({ partNumber, size, etag: `"${b.metadata.etag}"` });
    }
    return parts.sort((a, b) => a.partNumber - b.partNumber);
  }

  async complete(key: string, uploadId: string, parts: PartInfo[]): Promise<void> {
    const meta = await this.meta(uploadId);
    if (meta.key !== key) throw new ObjectNotFoundError(`multipart ${uploadId}`);
    const total = parts.reduce((n, p) => n + p.size, 0);
    if (total !== meta.size) throw new Error(`parts hold ${total} bytes, expected ${meta.size}`);
    await this.container.getBlockBlobClient(key).commitBlockList(
      parts.map((p) => blockId(p.partNumber)),
      { blobHTTPHeaders: meta.contentType ? { blobContentType: meta.contentType } : undefined },
    );
    await this.forget(uploadId);
  }

  async abort(key: string, uploadId: string): Promise<void> {
    await this.gate.seal(uploadId);
    const known = await this.meta(uploadId).catch((err) => {
      if (err instanceof ObjectNotFoundError) return null;
      throw err;
    });
    if (known && known.key === key) await this.discardBlocks(key);
    await this.forget(uploadId);
  }

  /**
   * Azure has no call that drops uncommitted blocks (it does so itself after a week). Committing
   * an empty list drops them now; only when no blob exists at the key (a completed upload's blob
   * is never touched), and the empty blob goes at once (nobody knows this key yet).
   */
  private async discardBlocks(key: string): Promise<void> {
    const blob = this.container.getBlockBlobClient(key);
    try {
      const res = await blob.commitBlockList([], { conditions: { ifNoneMatch: '*' } });
      await blob.deleteIfExists({ conditions: { ifMatch: res.etag } });
    } catch (err) {
      if (!isStatus(err, 409, 412)) throw err;
    }
  }

  /** Removes an upload's bookkeeping, meta last (it is what says the upload exists). */
  private async forget(uploadId: string): Promise<void> {
    const dir = this.dir(uploadId);
    const names: string[] = [];
    for await (const b of this.container.listBlobsFlat({ prefix: `${dir}part-` })) names.push(b.name);
    await eachLimited(names, 16, (name) => this.container.getBlobClient(name).deleteIfExists());
    await this.container.getBlobClient(`${dir}meta`).deleteIfExists();
    this.metas.delete(uploadId);
    this.gate.unseal(uploadId);
  }
}
