// Multipart sessions (docs/api/uploads.md#multipart-upload): start (fields checked, quota reserved, storage's
// multipart upload opened, part URLs handed out), status, abort, and freeing a session's
// parts. The session row and storage hold all state, so every step survives a restart.
import type { MultipartSession, MultipartStartBody, SessionStatus } from '../../contract/multipart.ts';
import { newUuid, randomBase62 } from '../../crypto/ids.ts';
import { nowIso } from '../../db/database.ts';
import type { MultipartSessionRow } from '../../db/schema.ts';
import { appError, errors } from '../../errors.ts';
import type { PartInfo } from '../../storage/driver.ts';
import { checkName, parseCustomId, parseFolderPath, parseMetadata, parseTags, withRandomPrefix } from '../names.ts';
import { type MultipartContext, nowSeconds } from './context.ts';
import { MIN_PART_SIZE, partLength, partSizeFor } from './part-layout.ts';

const DEFAULT_TTL = 3600;

export class Sessions {
  constructor(private readonly ctx: MultipartContext) {}

  /** `mayReplace`: started with a private key (see UploadOptions.mayReplace). */
  async start(
    workspaceId: string,
    publicKey: string,
    input: MultipartStartBody,
    mayReplace = true,
  ): Promise<MultipartSession> {
    const { blobs, storage, uploads } = this.ctx;
    const name = checkName(input.file_name, 'file_name');
    const folder = parseFolderPath(input.folder);
    const tags = parseTags(input.tags);
    const metadata = parseMetadata(input.metadata);
    const customId = parseCustomId(input.custom_id);
    if (input.webhook_url !== undefined) {
      const u = /^https?:\/\//.test(input.webhook_url) ? input.webhook_url : null;
      if (!u) throw errors.validation('webhook_url must be an http(s) URL');
      await uploads.checkWebhookTarget(u);
    }
    const limits = await uploads.limits(workspaceId);
    if (input.size > limits.maxFileSize) throw errors.fileTooLarge(limits.maxFileSize);

    const ttl = Math.min(input.ttl_seconds ?? DEFAULT_TTL, this.ctx.settings.maxTtlSeconds);
    const expireAt = nowSeconds() + ttl;
    const partSize = partSizeFor(input.size);
    const partCount = Math.max(1, Math.ceil(input.size / partSize));
    const storedName = input.random_prefix ? withRandomPrefix(name) : name;
    const key = blobs.newKey(workspaceId);
    // The intent comes first: if this session is abandoned, its bytes are found and freed.
    await blobs.recordIntent(workspaceId, key, 'multipart');
    // The declared size is reserved now, so parallel starts can never together pass the quota;
    // the reservation goes with the intent (abort, expiry, sweep) or becomes usage at complete.
    if (limits.quotaBytes !== null && !(await blobs.reserve(workspaceId, key, input.size, limits.quotaBytes))) {
      await blobs.forget(workspaceId, key);
      throw errors.storageLimitExceeded();
    }
    let uploadId: string;
    try {
      uploadId = await storage.createMultipart(key, { size: input.size, partSize, contentType: input.format });
    } catch (err) {
      await blobs.forget(workspaceId, key); // the intent (and its reservation) go now, not at the next sweep
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
    await this.ctx.sessions.insert(session);
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
    const { storage, signer, settings } = this.ctx;
    const lengths = Array.from({ length: s.part_count }, (_, i) => partLength(s, i + 1));
    if (storage.presignParts)
      return storage.presignParts(
        s.storage_key,
        s.upload_id,
        lengths.map((length, i) => ({ partNumber: i + 1, length })),
        ttl,
      );
    return signer.urls(settings.publicUrl, s.id, lengths, Number(s.expire_at));
  }

  /** The workspace's session of that id; 404 for anything else (including ids of the wrong shape). */
  async find(workspaceId: string, sessionId: string): Promise<MultipartSessionRow> {
    if (typeof sessionId !== 'string' || !/^[0-9A-Za-z]{24}$/.test(sessionId)) throw errors.sessionNotFound();
    const s = await this.ctx.sessions.inWorkspace(workspaceId, sessionId);
    if (!s) throw errors.sessionNotFound();
    return s;
  }

  async status(workspaceId: string, sessionId: string): Promise<SessionStatus> {
    const s = await this.find(workspaceId, sessionId);
    let status: SessionStatus['status'] = s.status === 'completing' ? 'active' : s.status;
    if (status === 'active' && Number(s.expire_at) < nowSeconds()) status = 'expired';
    let parts: PartInfo[] = [];
    if (s.status === 'active' || s.status === 'completing')
      parts = await this.ctx.storage.listParts(s.storage_key, s.upload_id).catch(() => []);
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
    const s = await this.find(workspaceId, sessionId);
    if (s.status === 'completed' || s.status === 'completing') throw appError('SESSION_COMPLETED');
    if (s.status !== 'active') return;
    // Only the abort that moved the session frees its parts and intent: a complete that claimed
    // it first ('completing') owns them, and may already have made them a file.
    if (!(await this.ctx.sessions.move(s.id, 'active', 'aborted'))) {
      const now = await this.find(workspaceId, sessionId);
      if (now.status === 'completed' || now.status === 'completing') throw appError('SESSION_COMPLETED');
      return;
    }
    await this.release(s);
  }

  /** Frees a session's stored parts and its intent. */
  async release(s: MultipartSessionRow): Promise<void> {
    this.ctx.hashes.forget(s.id);
    await this.ctx.storage.abortMultipart(s.storage_key, s.upload_id);
    await this.ctx.blobs.forget(s.workspace_id, s.storage_key);
  }
}
