// What the parts of a multipart upload share (built once by MultipartService, service.ts):
// the sessions' repository, the storage's multipart side, the upload pipeline, and this
// node's running hashes.
import type { PartUrlSigner } from '../../crypto/part-url.ts';
import type { UploadSessionRepository } from '../../db/upload-sessions.ts';
import type { FileRecords } from '../../services/files.ts';
import type { MultipartStorage, StorageDriver } from '../../storage/driver.ts';
import type { BlobStore } from '../blob-store.ts';
import type { UploadService } from '../upload-service.ts';
import type { RunningHashes } from './running-hash.ts';

export interface MultipartSettings {
  publicUrl: string;
  maxTtlSeconds: number;
}

export interface MultipartContext {
  sessions: UploadSessionRepository;
  storage: StorageDriver & MultipartStorage;
  blobs: BlobStore;
  uploads: UploadService;
  records: FileRecords;
  signer: PartUrlSigner;
  settings: MultipartSettings;
  hashes: RunningHashes;
}

export const nowSeconds = () => Math.floor(Date.now() / 1000);
