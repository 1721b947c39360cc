// The tus data store (@tus/server's DataStore) over Stowage's multipart sessions: a tus upload
// IS a multipart session (src/uploads/multipart/), so its quota reservation, intent, expiry
// (the session TTL and the sweeper), running hash and final commit are the ones every other
// upload uses. tus bytes arrive at any offset and in any chunk size; sessions take whole
// parts. So a PATCH writes each part it completes straight to storage (`writePart`, streamed),
// and the bytes of a part it leaves unfinished go to a "tail" object beside the session
// (`<key>.tus-<part>`), which the next PATCH joins before the part is written. The offset is
// always read back from storage: whole parts held, plus the tail. A part cut off by a dropped
// connection is simply not there, and the client resumes from the offset HEAD gives it.
import { AsyncLocalStorage } from 'node:async_hooks';
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { type Readable, Transform } from 'node:stream';
import { DataStore, ERRORS, Upload } from '@tus/utils';
import type { MultipartSessionRow } from '../../db/schema.ts';
import { AppError, appError, errors } from '../../errors.ts';
import type { FileRecord } from '../../services/files.ts';
import type { Principal } from '../../services/workspaces.ts';
import type { StorageDriver } from '../../storage/driver.ts';
import { type BlobStore, TUS_SIDE_REASON } from '../blob-store.ts';
import { applyGrant } from '../grants.ts';
import type { MultipartService } from '../multipart/service.ts';
import { partLength } from '../multipart/part-layout.ts';
import { tokenUploadOptions, type TokenPolicy } from '../token-policy.ts';
import type { UploadTokenRow } from '../../db/schema.ts';
import type { UploadTokenService } from '../tokens.ts';
import type { UploadService } from '../upload-service.ts';
import { ByteReader, joined } from './byte-reader.ts';

/** Who makes a tus request: a key's principal, or an upload token (resolved for creation, identified after). */
export type TusCaller =
  | { kind: 'key'; principal: Principal }
  | { kind: 'token'; id: string; workspaceId: string; create?: { row: UploadTokenRow; policy: TokenPolicy } };

/** What a request tells the store that @tus/server does not pass on. */
export interface TusCall {
  caller: TusCaller;
  /** Upload-Checksum, parsed: the PATCH body must hash to it or nothing of it is kept (460). */
  checksum?: { algorithm: 'sha1' | 'sha256' | 'md5'; digest: Buffer };
  /** Content-Length of the PATCH or POST body, when sent. */
  contentLength?: number;
}

export const tusCalls = new AsyncLocalStorage<TusCall>();

export const CHECKSUM_ALGORITHMS = ['sha1', 'sha256', 'md5'] as const;

/** tus's own status for a checksum mismatch (checksum extension). */
const checksumMismatch = () => ({
  status_code: 460,
  body: 'Upload-Checksum does not match the body; nothing of it was kept\n',
});

const SESSION_ID = /^([0-9A-Za-z]{24})-([A-Za-z0-9_-]{22})$/;

export interface TusStoreDeps {
  multipart: MultipartService;
  uploads: UploadService;
  tokens: UploadTokenService;
  blobs: BlobStore;
  storage: StorageDriver;
  masterKey: Buffer;
  /** How long a tus upload may take, in seconds (capped by the multipart maximum). */
  ttlSeconds: number;
  publicKeyHint(workspaceId: string): Promise<string>;
}

export class StowageTusStore extends DataStore {
  private readonly key: Buffer;

  constructor(private readonly deps: TusStoreDeps) {
    super();
    this.extensions = ['creation', 'creation-with-upload', 'termination', 'expiration', 'checksum'];
    this.key = createHmac('sha256', deps.masterKey).update('stowage/tus-upload/v1').digest();
  }

  private call(): TusCall {
    const call = tusCalls.getStore();
    if (!call) throw errors.unauthorized();
    return call;
  }

  /** The upload id: the session's, and a tag binding it to its creator (a token, or the workspace). */
  private idFor(sessionId: string, caller: TusCaller): string {
    return `${sessionId}-${this.tag(sessionId, caller)}`;
  }

  private tag(sessionId: string, caller: TusCaller): string {
    const scope = caller.kind === 'key' ? `ws:${caller.principal.workspaceId}` : `tok:${caller.id}`;
    return createHmac('sha256', this.key).update(`${sessionId}:${scope}`).digest('base64url').slice(0, 22);
  }

  /**
   * The session behind an upload id, for this caller: a key of the upload's workspace, or the
   * token that started it. Anything else is 404, as if the upload did not exist.
   */
  async session(id: string): Promise<MultipartSessionRow> {
    const { caller } = this.call();
    const m = SESSION_ID.exec(id);
    if (!m) throw errors.sessionNotFound();
    if (caller.kind === 'token') {
      const given = Buffer.from(m[2]);
      const expected = Buffer.from(this.tag(m[1], caller));
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw errors.sessionNotFound();
    }
    const workspaceId = caller.kind === 'key' ? caller.principal.workspaceId : caller.workspaceId;
    return this.deps.multipart.session(workspaceId, m[1]);
  }

  getExpiration(): number {
    return this.deps.ttlSeconds * 1000;
  }

  /** The sweeper expires sessions (src/jobs/sweep.ts); nothing of tus's own to clean. */
  async deleteExpired(): Promise<number> {
    return 0;
  }

  async create(upload: Upload): Promise<Upload> {
    const call = this.call();
    const { caller } = call;
    if (upload.size === undefined) throw ERRORS.INVALID_LENGTH;
    // A session holds at least one byte; an empty file goes through POST /api/v1/uploads.
    if (upload.size === 0) throw errors.validation('Upload-Length must be at least 1');
    const meta = upload.metadata ?? {};
    const text = (k: string) => (meta[k] === null || meta[k] === undefined ? undefined : meta[k]!);
    const { multipart, uploads } = this.deps;
    let started: { session_id: string; expire_at: number };
    if (caller.kind === 'key') {
      const { mayReplace } = applyGrant({ webhookUrl: null, mayReplace: true }, caller.principal);
      const ws = caller.principal.workspaceId;
      started = await multipart.start(
        ws,
        await this.deps.publicKeyHint(ws),
        {
          file_name: text('filename') ?? text('name') ?? '',
          size: upload.size,
          format: text('filetype') ?? text('type') ?? 'application/octet-stream',
          folder: text('folder'),
          tags: text('tags'),
          metadata: parseJsonMeta(text('metadata')),
          ttl_seconds: this.deps.ttlSeconds,
        },
        mayReplace,
      );
    } else {
      if (!caller.create) throw errors.invalidToken('TOKEN_USED');
      const { row, policy } = caller.create;
      const options = tokenUploadOptions(policy, {
        fileName: text('filename') ?? text('name'),
        folder: text('folder'),
        tags: text('tags'),
      });
      if (options.transform)
        throw errors.validation('a tus upload cannot apply a transform; mint the token without one');
      const limits = await uploads.limits(row.workspace_id);
      const max = Math.min(limits.maxFileSize, Number(policy.max_file_size));
      if (upload.size > max) throw errors.fileTooLarge(max);
      // Spent now: the token starts this upload and no other, however long it takes.
      if (!(await this.deps.tokens.spend(row))) throw errors.invalidToken('TOKEN_USED');
      try {
        started = await multipart.start(
          row.workspace_id,
          await this.deps.publicKeyHint(row.workspace_id),
          {
            file_name: options.name,
            size: upload.size,
            format: text('filetype') ?? text('type') ?? 'application/octet-stream',
            folder: options.folder.join('/'),
            tags: options.tags,
            metadata: options.metadata,
            custom_id: options.custom_id ?? undefined,
            random_prefix: options.randomPrefix,
            ttl_seconds: this.deps.ttlSeconds,
          },
          false,
        );
      } catch (err) {
        await this.deps.tokens.putBack(row).catch(() => {});
        throw err;
      }
    }
    upload.id = this.idFor(started.session_id, caller);
    upload.offset = 0;
    upload.creation_date = this.creationDate(started.expire_at);
    return upload;
  }

  /** tus computes expiry as creation + getExpiration(); the session's expire_at is the truth. */
  private creationDate(expireAt: number): string {
    return new Date(expireAt * 1000 - this.getExpiration()).toISOString();
  }

  async getUpload(id: string): Promise<Upload> {
    const s = await this.session(id);
    return this.uploadOf(id, s, await this.offsetOf(s));
  }

  private uploadOf(id: string, s: MultipartSessionRow, offset: number): Upload {
    return new Upload({
      id,
      size: Number(s.size),
      offset,
      metadata: { filename: s.file_name, filetype: s.format },
      creation_date: this.creationDate(Number(s.expire_at)),
    });
  }

  /** Whole parts held (in order from the first) and the tail of the next one. */
  private async state(s: MultipartSessionRow): Promise<{ parts: number; tail: number }> {
    const listed = await this.deps.multipart.listParts(s);
    const held = new Map(listed.map((p) => [p.partNumber, p.size]));
    let parts = 0;
    while (parts < s.part_count && held.get(parts + 1) === partLength(s, parts + 1)) parts++;
    if (parts === s.part_count) return { parts, tail: 0 };
    const tail = await this.deps.storage.stat(tailKey(s, parts + 1));
    return { parts, tail: Math.min(tail?.size ?? 0, partLength(s, parts + 1)) };
  }

  private async offsetOf(s: MultipartSessionRow): Promise<number> {
    if (s.status === 'completed' || s.status === 'completing') return Number(s.size);
    if (s.status === 'aborted') throw ERRORS.FILE_NOT_FOUND;
    if (s.status === 'expired' || Number(s.expire_at) * 1000 < Date.now()) throw ERRORS.FILE_NO_LONGER_EXISTS;
    const { parts, tail } = await this.state(s);
    return parts === s.part_count ? Number(s.size) : parts * Number(s.part_size) + tail;
  }

  async write(body: Readable, id: string, offset: number): Promise<number> {
    const call = this.call();
    const s = await this.session(id);
    if (s.status !== 'active') throw ERRORS.INVALID_OFFSET;
    let { parts, tail } = await this.state(s);
    let at = parts * Number(s.part_size) + tail;
    if (at !== offset) throw ERRORS.INVALID_OFFSET;
    const { storage, blobs, multipart } = this.deps;

    // With a checksum, the body is held aside until it proves whole (460 otherwise, nothing kept).
    let source: Readable = body;
    let known = call.contentLength;
    let checked: string | undefined;
    if (call.checksum) {
      checked = `${s.storage_key}.tus-check`;
      // Dropped below; the intent covers a crash in between.
      await blobs.recordIntent(s.workspace_id, checked, TUS_SIDE_REASON).catch(() => {});
      const hash = createHash(call.checksum.algorithm);
      const tee = new Transform({
        transform(chunk: Buffer, _e, cb) {
          hash.update(chunk);
          cb(null, chunk);
        },
      });
      body.once('error', (err) => tee.destroy(err));
      body.pipe(tee);
      const { size } = await storage.put(checked, tee, { durable: false });
      if (!hash.digest().equals(call.checksum.digest)) {
        await blobs.forget(s.workspace_id, checked).catch(() => {});
        checked = undefined;
        throw checksumMismatch();
      }
      source = await storage.get(checked);
      known = size;
    }

    const reader = new ByteReader(source);
    let left = known;
    try {
      while (parts < s.part_count) {
        const n = parts + 1;
        const need = partLength(s, n) - tail;
        const key = tailKey(s, n);
        if (left !== undefined && left >= need) {
          // A whole part: straight to storage, joined to its tail.
          const head = tail > 0 ? await storage.get(key) : null;
          try {
            await multipart.writePart(s, n, joined(head, reader.take(need)));
          } catch (err) {
            // The body ended short (the client went away): that part is not there; resume from here.
            if (err instanceof AppError && err.errorCode === 'PART_SIZE_MISMATCH') return at;
            throw err;
          }
          if (tail > 0) await blobs.forget(s.workspace_id, key);
          parts++;
          at += need;
          tail = 0;
          left -= need;
          continue;
        }
        if (!(await reader.hasMore())) break;
        // Less than a part remains (or its length is unknown): the tail grows. Put is atomic, so
        // a cut connection leaves the tail as it was.
        const head = tail > 0 ? await storage.get(key) : null;
        // Its intent lets the sweeper drop a tail its session left behind (not while the session lives).
        if (tail === 0) await blobs.recordIntent(s.workspace_id, key, TUS_SIDE_REASON).catch(() => {});
        else await blobs.touchIntent(key).catch(() => {});
        const { size } = await storage.put(key, joined(head, reader.take(need)));
        const added = size - tail;
        at += added;
        if (left !== undefined) left -= added;
        tail = size;
        if (tail < partLength(s, n)) break;
        // Filled (a body of unknown length): the tail becomes the part.
        await multipart.writePart(s, n, await storage.get(key));
        await blobs.forget(s.workspace_id, key);
        parts++;
        tail = 0;
      }
      return at;
    } finally {
      source.resume();
      if (checked) await blobs.forget(s.workspace_id, checked).catch(() => {});
    }
  }

  /** Every byte is here: the session completes through the one commit step (names, dedupe, quota, record, webhook). */
  async finish(id: string): Promise<FileRecord> {
    const s = await this.session(id);
    return this.deps.multipart.complete(s.workspace_id, { session_id: s.id });
  }

  /** The record of a finished upload, or null while it is still in progress. */
  async record(id: string): Promise<FileRecord | null> {
    const s = await this.session(id);
    if (s.status !== 'completed') return null;
    return this.deps.multipart.complete(s.workspace_id, { session_id: s.id });
  }

  async remove(id: string): Promise<void> {
    const s = await this.session(id);
    if (s.status === 'completed' || s.status === 'completing') throw appError('SESSION_COMPLETED');
    if (s.status !== 'active') throw ERRORS.FILE_NOT_FOUND;
    const { parts } = await this.state(s).catch(() => ({ parts: -1 }));
    await this.deps.multipart.abort(s.workspace_id, s.id);
    if (parts >= 0 && parts < s.part_count) await this.deps.blobs.forget(s.workspace_id, tailKey(s, parts + 1));
  }
}

/** Where the unfinished bytes of part `n` wait. */
export function tailKey(s: MultipartSessionRow, n: number): string {
  return `${s.storage_key}.tus-${n}`;
}

/** The `metadata` entry of Upload-Metadata: a JSON object. */
function parseJsonMeta(raw: string | undefined): Record<string, unknown> | undefined {
  if (raw === undefined || raw === '') return undefined;
  try {
    const v = JSON.parse(raw);
    if (v && typeof v === 'object' && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch {
    // refused below
  }
  throw errors.validation('the metadata entry of Upload-Metadata must be a JSON object');
}
