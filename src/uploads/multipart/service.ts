// Multipart uploads (docs/api/uploads.md#multipart-upload) as the routes and the
// sweeper use them: sessions (sessions.ts), parts through the service (parts.ts), complete
// (complete.ts, record.ts) and the sweep (sweep.ts), over one shared context. Every step
// survives a restart: the session row and storage hold all state.
import type { Readable } from 'node:stream';
import type {
  MultipartCompleteBody,
  MultipartSession,
  MultipartStartBody,
  SessionStatus,
} from '../../contract/multipart.ts';
import type { PartUrlSigner } from '../../crypto/part-url.ts';
import type { Db } from '../../db/database.ts';
import type { MultipartSessionRow } from '../../db/schema.ts';
import { UploadSessionRepository } from '../../db/upload-sessions.ts';
import type { FileRecord, FileRecords } from '../../services/files.ts';
import { type PartInfo, supportsMultipart } from '../../storage/driver.ts';
import type { BlobStore } from '../blob-store.ts';
import type { FileHasher } from '../hashing/file-hasher.ts';
import type { UploadService } from '../upload-service.ts';
import { Completer } from './complete.ts';
import type { MultipartContext, MultipartSettings } from './context.ts';
import { Parts } from './parts.ts';
import { RunningHashes } from './running-hash.ts';
import { Sessions } from './sessions.ts';
import { type SweepResult, sweepMultipart } from './sweep.ts';

export type { MultipartSettings } from './context.ts';

export interface MultipartDeps {
  db: Db;
  blobs: BlobStore;
  uploads: UploadService;
  records: FileRecords;
  signer: PartUrlSigner;
  settings: MultipartSettings;
  /** Hashes parts on local disk as they arrive (running-hash.ts); without it complete reads the file. */
  hasher?: FileHasher;
}

export class MultipartService {
  private readonly ctx: MultipartContext;
  /** Shared with the context: a test server that learns its URL late sets `publicUrl` here. */
  private readonly settings: MultipartSettings;
  /** This node's running hashes (tests look at how many are held). */
  private readonly hashes: RunningHashes;
  private readonly sessions: Sessions;
  private readonly parts: Parts;
  private readonly completer: Completer;

  constructor(deps: MultipartDeps) {
    const { blobs } = deps;
    if (!supportsMultipart(blobs.storage))
      throw new Error(`storage driver ${blobs.storage.name} has no multipart support`);
    const storage = blobs.storage;
    this.settings = deps.settings;
    this.hashes = new RunningHashes(deps.hasher, storage.multipartDataPath?.bind(storage));
    this.ctx = {
      sessions: new UploadSessionRepository(deps.db.kysely),
      storage,
      blobs,
      uploads: deps.uploads,
      records: deps.records,
      signer: deps.signer,
      settings: this.settings,
      hashes: this.hashes,
    };
    this.sessions = new Sessions(this.ctx);
    this.parts = new Parts(this.ctx);
    this.completer = new Completer(this.ctx, this.sessions);
  }

  /** `mayReplace`: started with a private key (see UploadOptions.mayReplace). */
  start(
    workspaceId: string,
    publicKey: string,
    input: MultipartStartBody,
    mayReplace = true,
  ): Promise<MultipartSession> {
    return this.sessions.start(workspaceId, publicKey, input, mayReplace);
  }

  /** A part through the service (local disk): the URL is the authorisation. */
  putPart(
    sessionId: string,
    partNumber: number,
    query: { length?: string; expires?: string; signature?: string },
    contentType: string | undefined,
    contentLength: string | undefined,
    body: Readable,
  ): Promise<PartInfo> {
    return this.parts.put(sessionId, partNumber, query, contentType, contentLength, body);
  }

  /** The workspace's session row (404 for any other); for tus (src/uploads/tus/), which keeps its state there. */
  session(workspaceId: string, sessionId: string): Promise<MultipartSessionRow> {
    return this.sessions.find(workspaceId, sessionId);
  }

  /** Writes one part of an active session for a caller authorised otherwise (tus); drivers with `writePart` only. */
  writePart(s: MultipartSessionRow, partNumber: number, body: Readable): Promise<PartInfo> {
    return this.parts.write(s, partNumber, body);
  }

  /** Parts storage holds for a session. */
  listParts(s: MultipartSessionRow): Promise<PartInfo[]> {
    return this.ctx.storage.listParts(s.storage_key, s.upload_id);
  }

  status(workspaceId: string, sessionId: string): Promise<SessionStatus> {
    return this.sessions.status(workspaceId, sessionId);
  }

  abort(workspaceId: string, sessionId: string): Promise<void> {
    return this.sessions.abort(workspaceId, sessionId);
  }

  /** Completes a session; idempotent (see complete.ts). */
  complete(workspaceId: string, input: MultipartCompleteBody): Promise<FileRecord> {
    return this.completer.complete(workspaceId, input);
  }

  /**
   * The sweeper: expires active sessions past their time and frees their parts; finishes
   * what crashed completers left; and drops bytes that crashed uploads left behind.
   */
  sweep(graceMs?: number): Promise<SweepResult> {
    return sweepMultipart(this.ctx, this.sessions, this.completer, graceMs);
  }
}
