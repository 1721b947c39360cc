// Completing a multipart session: storage is asked which parts it holds (clients need not send
// ETags), the session is claimed ('completing'), sealed so no part changes, assembled by
// storage, and recorded (record.ts). Idempotent: a complete already running for the session
// is joined, on this node or another, and one whose completer died is taken over.
import type { MultipartCompleteBody } from '../../contract/multipart.ts';
import type { MultipartSessionRow } from '../../db/schema.ts';
import { nowIso } from '../../db/database.ts';
import { errors } from '../../errors.ts';
import type { FileRecord } from '../../services/files.ts';
import { ObjectNotFoundError, type PartInfo } from '../../storage/driver.ts';
import { type MultipartContext, nowSeconds } from './context.ts';
import { partLength } from './part-layout.ts';
import { recordAssembled, recordOf } from './record.ts';
import type { Sessions } from './sessions.ts';

/** A 'completing' session untouched this long is taken to have lost its completer. */
export const STALE_COMPLETE_MS = 2 * 60 * 1000;
/** How long a complete waits for another one of the same session (on another node) to finish. */
const JOIN_COMPLETE_MS = 60 * 1000;

/** Thrown by completeActive when its claim of the session found it no longer 'active'. */
const MOVED_AWAY = Symbol('the session is no longer active');

export class Completer {
  /** Completes running on this node, by session id: a second complete joins the first. */
  private readonly completing = new Map<string, Promise<FileRecord>>();

  constructor(
    private readonly ctx: MultipartContext,
    private readonly sessions: Sessions,
  ) {}

  /**
   * Completes a session; idempotent. A complete already running for the session (a client
   * retry, a double click, an SDK retrying after a lost answer) is joined, not refused: on this
   * node its promise is awaited, on another node the session row is watched until it is done.
   */
  async complete(workspaceId: string, input: MultipartCompleteBody): Promise<FileRecord> {
    const s = await this.sessions.find(workspaceId, input.session_id);
    if (input.uuid !== undefined && input.uuid !== s.uuid) throw errors.sessionNotFound();
    const running = this.completing.get(s.id);
    if (running) return running;
    if (s.status === 'completed') return recordOf(this.ctx, s);
    if (s.status === 'aborted') throw errors.sessionNotFound();
    if (s.status === 'expired' || (s.status === 'active' && Number(s.expire_at) < nowSeconds()))
      throw errors.sessionExpired();
    if (s.status === 'completing') {
      if (Date.now() - Date.parse(s.updated_at) >= STALE_COMPLETE_MS) return this.finishStale(s);
      return this.joinCompletion(workspaceId, s, input);
    }
    const promise: Promise<FileRecord> = this.completeActive(s, input).catch((err) => {
      if (err !== MOVED_AWAY) throw err;
      // The session left 'active' between the read and the claim (an abort, another node's
      // complete): answer from it as it is now, once this complete no longer stands for it
      // here (else that answer would be this very promise, waiting for itself).
      if (this.completing.get(s.id) === promise) this.completing.delete(s.id);
      return this.complete(workspaceId, input);
    });
    this.completing.set(s.id, promise);
    try {
      return await promise;
    } finally {
      if (this.completing.get(s.id) === promise) this.completing.delete(s.id);
    }
  }

  private async completeActive(s: MultipartSessionRow, input: MultipartCompleteBody): Promise<FileRecord> {
    const { storage, sessions, hashes } = this.ctx;
    const listed = await storage.listParts(s.storage_key, s.upload_id).catch((err) => {
      if (err instanceof ObjectNotFoundError) throw errors.sessionNotFound();
      throw err;
    });
    checkParts(s, listed, input.parts);
    if (!(await sessions.move(s.id, 'active', 'completing'))) throw MOVED_AWAY;
    let runningHash: string | undefined;
    try {
      // From here no byte of a part may change (local disk: writes in flight are cut). What
      // storage holds now is what the record's hash describes.
      let parts = listed;
      if (storage.sealMultipart) {
        await storage.sealMultipart(s.upload_id);
        parts = await storage.listParts(s.storage_key, s.upload_id);
        checkParts(s, parts, input.parts);
      }
      // Settle the running hash while the parts are still where it reads them.
      runningHash = await hashes.take(s.id, s.part_count);
      await storage.completeMultipart(s.storage_key, s.upload_id, parts);
    } catch (err) {
      // Nothing was assembled: the session is the client's again (a part cut by the seal is missing now).
      await sessions.move(s.id, 'completing', 'active');
      storage.unsealMultipart?.(s.upload_id);
      throw err;
    }
    return recordAssembled(this.ctx, { ...s, status: 'completing' }, runningHash);
  }

  /** Another node is completing the session: wait for its outcome (bounded), then answer as it did. */
  private async joinCompletion(
    workspaceId: string,
    s: MultipartSessionRow,
    input: MultipartCompleteBody,
  ): Promise<FileRecord> {
    const deadline = Date.now() + JOIN_COMPLETE_MS;
    for (let delay = 50; Date.now() < deadline; delay = Math.min(delay * 2, 1000)) {
      await new Promise((r) => setTimeout(r, delay));
      const now = await this.sessions.find(workspaceId, s.id);
      if (now.status === 'completed') return recordOf(this.ctx, now);
      if (now.status !== 'completing') return this.complete(workspaceId, input);
    }
    throw errors.completeInProgress();
  }

  /** A 'completing' session whose completer died: take it over (one taker wins) and finish it. */
  async finishStale(s: MultipartSessionRow): Promise<FileRecord> {
    const { storage } = this.ctx;
    const now = nowIso();
    if (!(await this.ctx.sessions.takeOver(s.id, s.updated_at, now))) throw errors.completeInProgress();
    if (!(await storage.stat(s.storage_key))) {
      // The completer died before storage assembled the file: do that part again.
      await storage.sealMultipart?.(s.upload_id);
      const parts = await storage.listParts(s.storage_key, s.upload_id);
      checkParts(s, parts, undefined);
      await storage.completeMultipart(s.storage_key, s.upload_id, parts);
    }
    return recordAssembled(this.ctx, { ...s, updated_at: now });
  }
}

/** Every part is stored at its exact length (else the missing ones are named), and the ETags sent match. */
function checkParts(
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
