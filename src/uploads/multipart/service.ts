// Multipart uploads (INTERFACE.md 4.1-4.2, EXTENSIONS.md "Multipart"): a session in the
// database, parts straight to storage (S3 presigned URLs) or through the service (local disk,
// signed URLs), and a complete that asks storage which parts it holds, so clients never need
// to send ETags. Every step survives a restart: the session row and storage hold all state.
import { createHash } from 'node:crypto';
import { PassThrough, type Readable } from 'node:stream';
import type { FileHasher, HashJob } from '../hashing/file-hasher.ts';
import type { PartUrlSigner } from '../../crypto/part-url.ts';
import { newUuid, randomBase62 } from '../../crypto/ids.ts';
import { type Db, nowIso } from '../../db/database.ts';
import type { MultipartSessionRow } from '../../db/schema.ts';
import { AppError, errors } from '../../errors.ts';
import { HEAD_BYTES } from '../../media/detect.ts';
import {
  MultipartSealedError,
  type MultipartStorage,
  ObjectNotFoundError,
  type PartInfo,
  type StorageDriver,
  supportsMultipart,
} from '../../storage/driver.ts';
import { PartLengthError } from '../../storage/local.ts';
import type { BlobStore } from '../blob-store.ts';
import type { FileRecord, FileRecords } from '../../services/files.ts';
import { checkName, parseCustomId, parseFolderPath, parseMetadata, parseTags, withRandomPrefix } from '../names.ts';
import type { UploadService } from '../upload-service.ts';

const MiB = 1024 * 1024;
export const MIN_PART_SIZE = 5 * MiB;
const BASE_PART_SIZE = 8 * MiB;
const MAX_PARTS = 10_000;
const DEFAULT_TTL = 3600;
/** A 'completing' session untouched this long is taken to have lost its completer. */
const STALE_COMPLETE_MS = 2 * 60 * 1000;
/** How long a complete waits for another one of the same session (on another node) to finish. */
const JOIN_COMPLETE_MS = 60 * 1000;

const sessionSealed = () =>
  new AppError(
    409,
    'SESSION_COMPLETING',
    'Session is being completed',
    'This upload is being completed or aborted; its parts can no longer change',
  );

export interface MultipartSettings {
  publicUrl: string;
  maxTtlSeconds: number;
}

export interface StartInput {
  file_name: string;
  size: number;
  format: string;
  folder?: string;
  tags?: string[] | string;
  metadata?: Record<string, unknown>;
  custom_id?: string;
  random_prefix?: boolean;
  ttl_seconds?: number;
  webhook_url?: string;
}

export interface StartedSession {
  session_id: string;
  uuid: string;
  part_size: number;
  min_part_size: number;
  parts: string[];
  expire_at: number;
  public_key: string;
  workspace_id: string;
  policy: { folder: string; tags: string[]; size: number; format: string };
}

export interface SessionStatus {
  session_id: string;
  status: 'active' | 'completed' | 'aborted' | 'expired';
  part_size: number;
  size: number;
  expire_at: number;
  uploaded_parts: { part_number: number; size: number; etag: string }[];
}

/** Part size: 8 MiB, or more (whole MiB) so that no file needs over 10,000 parts. */
export function partSizeFor(size: number): number {
  return Math.max(BASE_PART_SIZE, Math.ceil(size / MAX_PARTS / MiB) * MiB);
}

export function partLength(s: { size: number; part_size: number; part_count: number }, partNumber: number): number {
  return partNumber < s.part_count ? Number(s.part_size) : Number(s.size) - (s.part_count - 1) * Number(s.part_size);
}

const nowSeconds = () => Math.floor(Date.now() / 1000);

/**
 * SHA-256 of a session's file, computed while the parts arrive, so that complete need not read
 * the whole file again. Parts are hashed in place, in file order, on the hashing thread
 * (FileHasher): each part as soon as it and every part before it are written. Lost on restart,
 * on a re-upload of a part already hashed or being written, or on another node: complete then
 * reads the file once.
 */
class SessionHash {
  private next = 1;
  private readonly written = new Set<number>();
  private readonly writing = new Map<number, number>();
  private broken = false;

  constructor(
    private readonly job: HashJob,
    private readonly path: string,
    private readonly s: { size: number; part_size: number; part_count: number },
    readonly expireAt: number,
  ) {}

  /** Part n starts arriving; `done` is called when it is written (or failed). */
  begin(n: number): (ok: boolean) => void {
    // The same bytes twice, or two writers at once: the hash can no longer be trusted.
    if (n < this.next || this.written.has(n) || this.writing.has(n)) this.broken = true;
    this.writing.set(n, (this.writing.get(n) ?? 0) + 1);
    return (ok) => {
      const left = this.writing.get(n)! - 1;
      if (left === 0) this.writing.delete(n);
      else this.writing.set(n, left);
      if (!ok) return;
      this.written.add(n);
      while (!this.broken && this.written.has(this.next)) {
        const start = (this.next - 1) * Number(this.s.part_size);
        this.job.feed(this.path, start, start + partLength(this.s, this.next));
        this.written.delete(this.next);
        this.next++;
      }
    };
  }

  /** The file's hash when every part was hashed in order. */
  async digest(partCount: number): Promise<string | undefined> {
    if (this.broken || this.writing.size > 0 || this.next !== partCount + 1) {
      this.job.drop();
      return undefined;
    }
    return this.job.digest().catch(() => undefined);
  }

  drop(): void {
    this.job.drop();
  }
}

class RunningHashes {
  private readonly sessions = new Map<string, SessionHash>();

  constructor(
    private readonly hasher: FileHasher | undefined,
    private readonly dataPath: ((uploadId: string) => string) | undefined,
  ) {}

  begin(s: MultipartSessionRow, n: number): (ok: boolean) => void {
    let hash = this.sessions.get(s.id);
    if (!hash && this.hasher && this.dataPath) {
      // Started by whichever part arrives first; it still hashes from part 1 on, in order. (After
      // a restart, parts sent before it are missing here, and complete reads the file instead.)
      hash = new SessionHash(this.hasher.start(), this.dataPath(s.upload_id), s, Number(s.expire_at));
      this.sessions.set(s.id, hash);
    }
    return hash ? hash.begin(n) : () => {};
  }

  async take(sessionId: string, partCount: number): Promise<string | undefined> {
    const hash = this.sessions.get(sessionId);
    this.sessions.delete(sessionId);
    return hash?.digest(partCount);
  }

  forget(sessionId: string): void {
    this.sessions.get(sessionId)?.drop();
    this.sessions.delete(sessionId);
  }

  /** Drops hashes of sessions past their expiry (abandoned, or finished on another node). */
  prune(nowSecondsValue: number): void {
    for (const [id, hash] of this.sessions) if (hash.expireAt < nowSecondsValue) this.forget(id);
  }

  get size(): number {
    return this.sessions.size;
  }
}

/** Another completer wrote the session's record first (see `record`). */
class CompletedElsewhere extends Error {}

export class MultipartService {
  private readonly hashes: RunningHashes;
  private readonly storage: StorageDriver & MultipartStorage;
  /** Completes running on this node, by session id: a second complete joins the first. */
  private readonly completing = new Map<string, Promise<FileRecord>>();

  constructor(
    private readonly db: Db,
    private readonly blobs: BlobStore,
    private readonly uploads: UploadService,
    private readonly records: FileRecords,
    private readonly signer: PartUrlSigner,
    private readonly settings: MultipartSettings,
    hasher?: FileHasher,
  ) {
    if (!supportsMultipart(blobs.storage))
      throw new Error(`storage driver ${blobs.storage.name} has no multipart support`);
    this.storage = blobs.storage;
    this.hashes = new RunningHashes(hasher, this.storage.multipartDataPath?.bind(this.storage));
  }

  /** `mayReplace`: started with a private key (see UploadOptions.mayReplace). */
  async start(workspaceId: string, publicKey: string, input: StartInput, mayReplace = true): Promise<StartedSession> {
    const name = checkName(input.file_name, 'file_name');
    const folder = parseFolderPath(input.folder);
    const tags = parseTags(input.tags);
    const metadata = parseMetadata(input.metadata);
    const customId = parseCustomId(input.custom_id);
    if (input.webhook_url !== undefined) {
      const u = /^https?:\/\//.test(input.webhook_url) ? input.webhook_url : null;
      if (!u) throw errors.validation('webhook_url must be an http(s) URL');
      await this.uploads.checkWebhookTarget(u);
    }
    const limits = await this.uploads.limits(workspaceId);
    if (input.size > limits.maxFileSize) throw errors.fileTooLarge(limits.maxFileSize);

    const ttl = Math.min(input.ttl_seconds ?? DEFAULT_TTL, this.settings.maxTtlSeconds);
    const expireAt = nowSeconds() + ttl;
    const partSize = partSizeFor(input.size);
    const partCount = Math.max(1, Math.ceil(input.size / partSize));
    const storedName = input.random_prefix ? withRandomPrefix(name) : name;
    const key = this.blobs.newKey(workspaceId);
    // The intent comes first: if this session is abandoned, its bytes are found and freed.
    await this.blobs.recordIntent(workspaceId, key, 'multipart');
    // The declared size is reserved now, so parallel starts can never together pass the quota;
    // the reservation goes with the intent (abort, expiry, sweep) or becomes usage at complete.
    if (limits.quotaBytes !== null && !(await this.blobs.reserve(workspaceId, key, input.size, limits.quotaBytes))) {
      await this.blobs.forget(workspaceId, key);
      throw errors.storageLimitExceeded();
    }
    let uploadId: string;
    try {
      uploadId = await this.storage.createMultipart(key, { size: input.size, partSize, contentType: input.format });
    } catch (err) {
      await this.blobs.forget(workspaceId, key); // the intent (and its reservation) go now, not at the next sweep
      throw err;
    }
    const now = nowIso();
    const session: MultipartSessionRow = {
      id: randomBase62(24),
      uuid: newUuid(),
      workspace_id: workspaceId,
      status: 'active',
      file_name: storedName,
      folder: folder.join('/'),
      tags: JSON.stringify(tags),
      metadata: JSON.stringify(metadata),
      custom_id: customId,
      format: input.format,
      size: input.size,
      part_size: partSize,
      part_count: partCount,
      storage_key: key,
      upload_id: uploadId,
      expire_at: expireAt,
      file_id: null,
      webhook_url: input.webhook_url ?? null,
      may_replace: mayReplace ? 1 : 0,
      created_at: now,
      updated_at: now,
    };
    await this.db.kysely.insertInto('multipart_sessions').values(session).execute();
    const parts = await this.partUrls(session, ttl);
    return {
      session_id: session.id,
      uuid: session.uuid,
      part_size: partSize,
      min_part_size: MIN_PART_SIZE,
      parts,
      expire_at: expireAt,
      public_key: publicKey,
      workspace_id: workspaceId,
      policy: { folder: session.folder, tags, size: input.size, format: input.format },
    };
  }

  /** The upload URL of every part, in order: presigned by storage (S3) or signed here. */
  private partUrls(s: MultipartSessionRow, ttl: number): Promise<string[]> {
    const lengths = Array.from({ length: s.part_count }, (_, i) => partLength(s, i + 1));
    if (this.storage.presignParts)
      return this.storage.presignParts(
        s.storage_key,
        s.upload_id,
        lengths.map((length, i) => ({ partNumber: i + 1, length })),
        ttl,
      );
    return this.signer.urls(this.settings.publicUrl, s.id, lengths, Number(s.expire_at));
  }

  /** A part through the service (local disk): the URL is the authorisation. */
  async putPart(
    sessionId: string,
    partNumber: number,
    query: { length?: string; expires?: string; signature?: string },
    contentType: string | undefined,
    contentLength: string | undefined,
    body: Readable,
  ): Promise<PartInfo> {
    const verdict = this.signer.verify(sessionId, partNumber, query, nowSeconds());
    if (verdict === 'bad')
      throw new AppError(403, 'INVALID_SIGNATURE', 'Forbidden', 'The part URL signature is not valid');
    if (verdict === 'expired') throw new AppError(403, 'URL_EXPIRED', 'Forbidden', 'The part URL has expired');
    const s = await this.db.kysely
      .selectFrom('multipart_sessions')
      .selectAll()
      .where('id', '=', sessionId)
      .executeTakeFirst();
    if (s?.status === 'completing') throw sessionSealed();
    if (s?.status !== 'active' || partNumber < 1 || partNumber > s.part_count) throw errors.sessionNotFound();
    if ((contentType ?? '').split(';')[0].trim().toLowerCase() !== 'application/octet-stream') {
      throw new AppError(
        400,
        'INVALID_CONTENT_TYPE',
        'Content-Type must be application/octet-stream',
        'Send the part with Content-Type: application/octet-stream',
      );
    }
    const expected = partLength(s, partNumber);
    if (Number(query.length) !== expected)
      throw new AppError(403, 'INVALID_SIGNATURE', 'Forbidden', 'The part URL does not match this part');
    if (contentLength !== undefined && Number(contentLength) !== expected) {
      throw new AppError(
        400,
        'PART_SIZE_MISMATCH',
        `Part ${partNumber} must be exactly ${expected} bytes`,
        `Part ${partNumber} must be exactly ${expected} bytes; Content-Length says ${contentLength}`,
      );
    }
    // Piped through, so that a refused part ends the driver's pipeline but not the request,
    // which still gets its answer.
    const pass = new PassThrough();
    pass.on('error', () => {}); // kept for the driver's pipeline, as in BlobStore.stage
    body.once('error', (err) => pass.destroy(err));
    body.pipe(pass);
    const done = this.hashes.begin(s, partNumber);
    try {
      const part = await this.storage.writePart!(s.storage_key, s.upload_id, partNumber, pass, expected);
      done(true);
      return part;
    } catch (err) {
      done(false);
      body.unpipe(pass);
      if (err instanceof PartLengthError)
        throw new AppError(
          400,
          'PART_SIZE_MISMATCH',
          `Part ${partNumber} must be exactly ${expected} bytes`,
          err.message,
        );
      if (err instanceof MultipartSealedError) throw sessionSealed();
      if (err instanceof ObjectNotFoundError) throw errors.sessionNotFound();
      throw err;
    }
  }

  private async session(workspaceId: string, sessionId: string): Promise<MultipartSessionRow> {
    if (typeof sessionId !== 'string' || !/^[0-9A-Za-z]{24}$/.test(sessionId)) throw errors.sessionNotFound();
    const s = await this.db.kysely
      .selectFrom('multipart_sessions')
      .selectAll()
      .where('id', '=', sessionId)
      .where('workspace_id', '=', workspaceId)
      .executeTakeFirst();
    if (!s) throw errors.sessionNotFound();
    return s;
  }

  async status(workspaceId: string, sessionId: string): Promise<SessionStatus> {
    const s = await this.session(workspaceId, sessionId);
    let status: SessionStatus['status'] = s.status === 'completing' ? 'active' : s.status;
    if (status === 'active' && Number(s.expire_at) < nowSeconds()) status = 'expired';
    let parts: PartInfo[] = [];
    if (s.status === 'active' || s.status === 'completing')
      parts = await this.storage.listParts(s.storage_key, s.upload_id).catch(() => []);
    if (s.status === 'completed') {
      parts = Array.from({ length: s.part_count }, (_, i) => ({
        partNumber: i + 1,
        size: partLength(s, i + 1),
        etag: '',
      }));
    }
    return {
      session_id: s.id,
      status,
      part_size: Number(s.part_size),
      size: Number(s.size),
      expire_at: Number(s.expire_at),
      uploaded_parts: parts.map((p) => ({ part_number: p.partNumber, size: p.size, etag: p.etag })),
    };
  }

  async abort(workspaceId: string, sessionId: string): Promise<void> {
    const s = await this.session(workspaceId, sessionId);
    if (s.status === 'completed' || s.status === 'completing')
      throw new AppError(
        409,
        'SESSION_COMPLETED',
        'Session completed',
        'A completed upload cannot be aborted; delete the file instead',
      );
    if (s.status !== 'active') return;
    await this.db.kysely
      .updateTable('multipart_sessions')
      .set({ status: 'aborted', updated_at: nowIso() })
      .where('id', '=', s.id)
      .where('status', '=', 'active')
      .execute();
    await this.release(s);
  }

  /** Frees a session's stored parts and its intent. */
  private async release(s: MultipartSessionRow): Promise<void> {
    this.hashes.forget(s.id);
    await this.storage.abortMultipart(s.storage_key, s.upload_id);
    await this.blobs.forget(s.workspace_id, s.storage_key);
  }

  /**
   * Completes a session; idempotent. A complete already running for the session (a client
   * retry, a double click, an SDK retrying after a lost answer) is joined, not refused: on this
   * node its promise is awaited, on another node the session row is watched until it is done.
   */
  async complete(
    workspaceId: string,
    input: { session_id: string; uuid?: string; parts?: { part_number: number; etag: string }[] },
  ): Promise<FileRecord> {
    const s = await this.session(workspaceId, input.session_id);
    if (input.uuid !== undefined && input.uuid !== s.uuid) throw errors.sessionNotFound();
    const running = this.completing.get(s.id);
    if (running) return running;
    if (s.status === 'completed') return this.recordOf(s);
    if (s.status === 'aborted') throw errors.sessionNotFound();
    if (s.status === 'expired' || (s.status === 'active' && Number(s.expire_at) < nowSeconds()))
      throw errors.sessionExpired();
    if (s.status === 'completing') {
      if (Date.now() - Date.parse(s.updated_at) >= STALE_COMPLETE_MS) return this.finishStale(s);
      return this.joinCompletion(workspaceId, s, input);
    }
    const promise = this.completeActive(workspaceId, s, input);
    this.completing.set(s.id, promise);
    try {
      return await promise;
    } finally {
      this.completing.delete(s.id);
    }
  }

  private async completeActive(
    workspaceId: string,
    s: MultipartSessionRow,
    input: { session_id: string; parts?: { part_number: number; etag: string }[] },
  ): Promise<FileRecord> {
    const listed = await this.storage.listParts(s.storage_key, s.upload_id).catch((err) => {
      if (err instanceof ObjectNotFoundError) throw errors.sessionNotFound();
      throw err;
    });
    this.checkParts(s, listed, input.parts);
    const claimed = await this.db.kysely
      .updateTable('multipart_sessions')
      .set({ status: 'completing', updated_at: nowIso() })
      .where('id', '=', s.id)
      .where('status', '=', 'active')
      .executeTakeFirst();
    if (Number(claimed.numUpdatedRows) === 0) return this.complete(workspaceId, { session_id: s.id });
    let runningHash: string | undefined;
    try {
      // From here no byte of a part may change (local disk: writes in flight are cut). What
      // storage holds now is what the record's hash describes.
      let parts = listed;
      if (this.storage.sealMultipart) {
        await this.storage.sealMultipart(s.upload_id);
        parts = await this.storage.listParts(s.storage_key, s.upload_id);
        this.checkParts(s, parts, input.parts);
      }
      // Settle the running hash while the parts are still where it reads them.
      runningHash = await this.hashes.take(s.id, s.part_count);
      await this.storage.completeMultipart(s.storage_key, s.upload_id, parts);
    } catch (err) {
      // Nothing was assembled: the session is the client's again (a part cut by the seal is missing now).
      await this.db.kysely
        .updateTable('multipart_sessions')
        .set({ status: 'active', updated_at: nowIso() })
        .where('id', '=', s.id)
        .where('status', '=', 'completing')
        .execute();
      this.storage.unsealMultipart?.(s.upload_id);
      throw err;
    }
    return this.record({ ...s, status: 'completing' }, runningHash);
  }

  /** Another node is completing the session: wait for its outcome (bounded), then answer as it did. */
  private async joinCompletion(
    workspaceId: string,
    s: MultipartSessionRow,
    input: { session_id: string; parts?: { part_number: number; etag: string }[] },
  ): Promise<FileRecord> {
    const deadline = Date.now() + JOIN_COMPLETE_MS;
    for (let delay = 50; Date.now() < deadline; delay = Math.min(delay * 2, 1000)) {
      await new Promise((r) => setTimeout(r, delay));
      const now = await this.session(workspaceId, s.id);
      if (now.status === 'completed') return this.recordOf(now);
      if (now.status !== 'completing') return this.complete(workspaceId, input);
    }
    throw errors.completeInProgress();
  }

  /** A 'completing' session whose completer died: take it over (one taker wins) and finish it. */
  private async finishStale(s: MultipartSessionRow): Promise<FileRecord> {
    const now = nowIso();
    const taken = await this.db.kysely
      .updateTable('multipart_sessions')
      .set({ updated_at: now })
      .where('id', '=', s.id)
      .where('status', '=', 'completing')
      .where('updated_at', '=', s.updated_at)
      .executeTakeFirst();
    if (Number(taken.numUpdatedRows) === 0) throw errors.completeInProgress();
    if (!(await this.storage.stat(s.storage_key))) {
      // The completer died before storage assembled the file: do that part again.
      await this.storage.sealMultipart?.(s.upload_id);
      const parts = await this.storage.listParts(s.storage_key, s.upload_id);
      this.checkParts(s, parts, undefined);
      await this.storage.completeMultipart(s.storage_key, s.upload_id, parts);
    }
    return this.record({ ...s, updated_at: now });
  }

  private checkParts(
    s: MultipartSessionRow,
    stored: PartInfo[],
    sent: { part_number: number; etag: string }[] | undefined,
  ): void {
    const byNumber = new Map(stored.map((p) => [p.partNumber, p]));
    const missing: number[] = [];
    for (let n = 1; n <= s.part_count; n++) {
      const p = byNumber.get(n);
      if (!p || p.size !== partLength(s, n)) missing.push(n);
    }
    if (missing.length > 0) throw errors.uploadIncomplete(missing);
    for (const p of sent ?? []) {
      const held = byNumber.get(p.part_number);
      if (!held || held.etag.replace(/"/g, '') !== String(p.etag).replace(/"/g, ''))
        throw errors.partMismatch(p.part_number);
    }
  }

  /** The assembled object becomes a file record; the session is marked completed with it. */
  private async record(s: MultipartSessionRow, runningHash?: string): Promise<FileRecord> {
    const size = Number(s.size);
    let sha256 = runningHash;
    if (!sha256) {
      const hash = createHash('sha256');
      for await (const chunk of await this.storage.get(s.storage_key)) hash.update(chunk as Buffer);
      sha256 = hash.digest('hex');
    }
    const head = await readHead(
      await this.storage.get(s.storage_key, { start: 0, end: Math.min(size, HEAD_BYTES) - 1 }),
    );
    const staged = { workspaceId: s.workspace_id, key: s.storage_key, size, sha256, head };
    try {
      return await this.uploads.finish(
        staged,
        {
          name: s.file_name,
          folder: s.folder ? s.folder.split('/') : [],
          tags: JSON.parse(s.tags),
          metadata: JSON.parse(s.metadata),
          custom_id: s.custom_id,
          randomPrefix: false,
          transform: null,
          webhookUrl: s.webhook_url,
          mayReplace: Boolean(s.may_replace),
        },
        'multipart',
        {
          inTransaction: async (trx, row) => {
            // Only one completer writes the record: a second one (a client retry racing the
            // sweeper's take-over) rolls back here and returns the winner's record, never
            // touching the bytes that are now the winner's.
            const won = await trx
              .updateTable('multipart_sessions')
              .set({ status: 'completed', file_id: row.id, updated_at: nowIso() })
              .where('id', '=', s.id)
              .where('status', '=', 'completing')
              .executeTakeFirst();
            if (Number(won.numUpdatedRows) === 0) throw new CompletedElsewhere();
          },
          // A passing failure (database down) must not lose the assembled file: a retry of
          // complete picks it up. A refusal (quota) ends the session.
          keepOnError: (err) => !(err instanceof AppError),
        },
      );
    } catch (err) {
      // Lost the race (here, or on PostgreSQL at the blob's unique index, which waits for the
      // winner to commit): the winner's record is the answer.
      const now = await this.db.kysely
        .selectFrom('multipart_sessions')
        .selectAll()
        .where('id', '=', s.id)
        .executeTakeFirst()
        .catch(() => undefined);
      if (now?.status === 'completed' && now.file_id) return this.recordOf(now);
      if (err instanceof CompletedElsewhere) throw errors.completeInProgress();
      if (err instanceof AppError) {
        await this.db.kysely
          .updateTable('multipart_sessions')
          .set({ status: 'aborted', updated_at: nowIso() })
          .where('id', '=', s.id)
          .where('status', '=', 'completing')
          .execute();
      }
      throw err;
    }
  }

  private async recordOf(s: MultipartSessionRow): Promise<FileRecord> {
    const row = await this.db.kysely
      .selectFrom('files')
      .innerJoin('blobs', 'blobs.id', 'files.blob_id')
      .leftJoin('folders', 'folders.id', 'files.folder_id')
      .selectAll('files')
      .select(['blobs.sha256 as sha256', 'folders.folder_no as folder_no'])
      .where('files.id', '=', s.file_id!)
      .executeTakeFirst();
    if (!row) throw errors.sessionNotFound();
    const { sha256, folder_no, ...file } = row;
    const record = this.records.view(file, folder_no, sha256);
    if (!s.may_replace) record.is_duplicate = false;
    return record;
  }

  /**
   * The sweeper: expires active sessions past their time and frees their parts; finishes
   * what crashed completers left; and drops bytes that crashed uploads left behind.
   */
  async sweep(graceMs?: number): Promise<{ expired: number; intents: number; finished: number }> {
    this.hashes.prune(nowSeconds());
    // Completes whose completer died (a crash between assembling the file and writing its
    // record) are finished here, so their bytes become the file the client asked for instead
    // of staying behind unowned. Before the intents sweep, which leaves them alone.
    const staleBefore = new Date(Date.now() - Math.min(STALE_COMPLETE_MS, graceMs ?? this.blobs.graceMs)).toISOString();
    const stuck = await this.db.kysely
      .selectFrom('multipart_sessions')
      .selectAll()
      .where('status', '=', 'completing')
      .where('updated_at', '<=', staleBefore)
      .limit(100)
      .execute();
    let finished = 0;
    for (const s of stuck) {
      if (
        await this.finishStale(s).then(
          () => true,
          () => false,
        )
      )
        finished++;
    }
    const due = await this.db.kysely
      .selectFrom('multipart_sessions')
      .selectAll()
      .where('status', '=', 'active')
      .where('expire_at', '<', nowSeconds())
      .limit(500)
      .execute();
    let expired = 0;
    for (const s of due) {
      const res = await this.db.kysely
        .updateTable('multipart_sessions')
        .set({ status: 'expired', updated_at: nowIso() })
        .where('id', '=', s.id)
        .where('status', '=', 'active')
        .executeTakeFirst();
      if (Number(res.numUpdatedRows) === 0) continue;
      await this.release(s).catch(() => {});
      expired++;
    }
    const intents = await this.blobs.sweepIntents(graceMs, (this.settings.maxTtlSeconds + 24 * 3600) * 1000);
    return { expired, intents, finished };
  }
}

async function readHead(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const chunk of stream) {
    chunks.push(chunk as Buffer);
    n += (chunk as Buffer).length;
    if (n >= HEAD_BYTES) break;
  }
  stream.destroy();
  return Buffer.concat(chunks).subarray(0, HEAD_BYTES);
}
