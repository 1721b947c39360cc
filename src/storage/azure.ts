// Azure Blob Storage (and Azurite), one container. Objects are block blobs: a put stages blocks
// and commits the list at the end, so readers see no object or the whole object. Multipart
// uploads stage each part as a block of the final blob through the service (see
// storage/azure-multipart.ts); complete commits the block list, so no byte is copied.
import { type Readable, Transform } from 'node:stream';
import { BlobServiceClient, type ContainerClient } from '@azure/storage-blob';
import { AzureMultipart } from './azure-multipart.ts';
import { MULTIPART_PREFIX } from './part-writes.ts';
import {
  assertKey,
  type ByteRange,
  type MultipartStorage,
  type ObjectInfo,
  ObjectNotFoundError,
  type PartInfo,
  type StorageDriver,
} from './driver.ts';

export interface AzureSettings {
  /** As the Azure portal shows it (AccountName, AccountKey, BlobEndpoint or EndpointSuffix, …). */
  connectionString: string;
  container: string;
}

/** The SDK's RestError carries the HTTP status. */
export const isAzureMissing = (err: unknown) => (err as { statusCode?: number }).statusCode === 404;

export class AzureStorage implements StorageDriver, MultipartStorage {
  readonly name = 'azure' as const;
  readonly description = 'files are in an Azure Blob Storage container';
  readonly container: ContainerClient;
  private readonly multipart: AzureMultipart;

  constructor(settings: AzureSettings) {
    this.container = BlobServiceClient.fromConnectionString(settings.connectionString).getContainerClient(
      settings.container,
    );
    this.multipart = new AzureMultipart(this.container);
  }

  async check(): Promise<void> {
    await this.container.getProperties();
  }

  async put(
    key: string,
    body: Readable,
    opts: { contentType?: string; signal?: AbortSignal } = {},
  ): Promise<{ size: number }> {
    assertKey(key);
    let size = 0;
    const counter = new Transform({
      transform(chunk: Buffer, _enc, cb) {
        size += chunk.length;
        cb(null, chunk);
      },
    });
    body.once('error', (err) => counter.destroy(err));
    body.pipe(counter);
    // 8 MiB blocks, 4 in flight: bounded memory whatever the size. The blob appears only when
    // the block list is committed; blocks of a failed put are never committed (Azure drops them).
    await this.container.getBlockBlobClient(key).uploadStream(counter, 8 * 1024 * 1024, 4, {
      blobHTTPHeaders: opts.contentType ? { blobContentType: opts.contentType } : undefined,
      abortSignal: opts.signal,
    });
    return { size };
  }

  async get(key: string, range?: ByteRange): Promise<Readable> {
    assertKey(key);
    try {
      const res = await this.container
        .getBlobClient(key)
        .download(range?.start ?? 0, range ? range.end - range.start + 1 : undefined);
      return res.readableStreamBody as Readable;
    } catch (err) {
      if (isAzureMissing(err)) throw new ObjectNotFoundError(key);
      throw err;
    }
  }

  async stat(key: string): Promise<ObjectInfo | null> {
    assertKey(key);
    try {
      const p = await this.container.getBlobClient(key).getProperties();
      return { key, size: p.contentLength ?? 0, lastModified: p.lastModified ?? new Date(0) };
    } catch (err) {
      if (isAzureMissing(err)) return null;
      throw err;
    }
  }

  async delete(key: string): Promise<void> {
    assertKey(key);
    await this.container.getBlobClient(key).deleteIfExists();
  }

  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    for await (const b of this.container.listBlobsFlat({ prefix })) {
      // Multipart bookkeeping is not an object.
      if (b.name.startsWith(MULTIPART_PREFIX)) continue;
      yield { key: b.name, size: b.properties.contentLength ?? 0, lastModified: b.properties.lastModified };
    }
  }

  // --- multipart: parts through the service, as blocks of the final blob -------------------

  createMultipart(key: string, opts: { contentType?: string; size: number; partSize: number }): Promise<string> {
    assertKey(key);
    return this.multipart.create(key, opts);
  }

  writePart(
    key: string,
    uploadId: string,
    partNumber: number,
    body: Readable,
    length: number,
    signal?: AbortSignal,
  ): Promise<PartInfo> {
    return this.multipart.writePart(key, uploadId, partNumber, body, length, signal);
  }

  listParts(_key: string, uploadId: string): Promise<PartInfo[]> {
    return this.multipart.listParts(uploadId);
  }

  sealMultipart(uploadId: string): Promise<void> {
    return this.multipart.gate.seal(uploadId);
  }

  unsealMultipart(uploadId: string): void {
    this.multipart.gate.unseal(uploadId);
  }

  completeMultipart(key: string, uploadId: string, parts: PartInfo[]): Promise<void> {
    return this.multipart.complete(key, uploadId, parts);
  }

  abortMultipart(key: string, uploadId: string): Promise<void> {
    return this.multipart.abort(key, uploadId);
  }
}
