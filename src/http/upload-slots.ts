// Admission of uploads and of request bodies, as Fastify hooks (registered by buildApp):
//
// - Concurrent uploads per workspace on this node (STOWAGE_MAX_CONCURRENT_UPLOADS): direct,
//   remote and token uploads and local multipart part PUTs each hold a slot from admission
//   until their response ends or their connection closes; one more is refused 429 with
//   `retry-after`. The count is checked and taken in one synchronous step, so it holds exactly
//   however many requests arrive at once.
// - Free space (STOWAGE_MIN_FREE_BYTES, local storage): an upload that would take the disk below
//   the floor (by its declared length; by nothing when it declares none) is refused 507 before a
//   byte is written, so uploads never eat the room the database and deletes still need. Uploads
//   that find the disk full while writing get 507 from the driver (storage/local.ts).
// - Stalled bodies (STOWAGE_BODY_IDLE_TIMEOUT_MS): a request body from which nothing has arrived
//   for that long is cut, whatever its total time, so a 50 GB upload at a steady pace runs to its
//   end while a client that stops halfway frees its connection (and its upload is cleaned up).
import { statfs } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Db } from '../db/database.ts';
import { UploadSessionRepository } from '../db/upload-sessions.ts';
import { errors } from '../errors.ts';
import { rawAnswer } from './errors.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /**
     * Admits this request as an upload to `workspaceId`: 507 below the free-space floor, 429 when
     * the workspace has all its upload slots in use on this node. The slot is given back when the
     * response ends or the connection closes. Routes that know the workspace only in their
     * handler (upload tokens) call it there, before any byte is read; a second call is a no-op.
     */
    admitUpload(workspaceId: string): Promise<void>;
  }
  interface FastifyInstance {
    uploadSlots: UploadSlots;
  }
}

/** Free space where local storage writes; `minFreeBytes` is the floor of /readyz and of upload admission. */
export class DiskSpace {
  constructor(
    readonly path: string,
    readonly minFreeBytes: number,
  ) {}

  /** The last reading, and the bytes admitted since (see `roomFor`). */
  private last?: { at: number; free: number; admitted: number };

  /** Bytes an unprivileged writer may still use, read now. */
  async free(): Promise<number> {
    const s = await statfs(this.path);
    return s.bavail * s.bsize;
  }

  /**
   * Whether `declared` more bytes leave at least `minFreeBytes` free. The disk is read on every
   * call, except while the last reading is under a second old and, after everything admitted
   * since, still leaves more than `DISK_AMPLE_BYTES` above the floor: a `statfs` per small
   * upload cost a trip through the thread pool for an answer that cannot change (issue 25).
   * Near the floor every upload reads the disk, as before.
   */
  async roomFor(declared: number, now = Date.now()): Promise<boolean> {
    const last = this.last;
    if (last && now - last.at < DISK_READING_MS) {
      last.admitted += declared;
      if (last.free - last.admitted - this.minFreeBytes > DISK_AMPLE_BYTES) return true;
    }
    const free = await this.free();
    this.last = { at: now, free, admitted: declared };
    return free - declared >= this.minFreeBytes;
  }
}

/** How long a reading of the free space may stand in for a new one while the disk has ample room. */
export const DISK_READING_MS = 1000;
/** Room above the floor, beyond all bytes admitted since the reading, under which the disk is read every time. */
export const DISK_AMPLE_BYTES = 4 * 1024 * 1024 * 1024;

/** Upload slots per workspace, on this node. */
export class UploadSlots {
  private readonly used = new Map<string, number>();

  /** `max` 0 = no cap (slots are still counted). */
  constructor(readonly max: number) {}

  /** Takes a slot: the function that gives it back (once, however often it is called), or null when none is free. */
  take(workspaceId: string): (() => void) | null {
    const n = this.used.get(workspaceId) ?? 0;
    if (this.max > 0 && n >= this.max) return null;
    this.used.set(workspaceId, n + 1);
    let given = false;
    return () => {
      if (given) return;
      given = true;
      const left = (this.used.get(workspaceId) ?? 1) - 1;
      if (left > 0) this.used.set(workspaceId, left);
      else this.used.delete(workspaceId);
    };
  }

  /** Slots in use by one workspace, or by all. */
  inUse(workspaceId?: string): number {
    if (workspaceId !== undefined) return this.used.get(workspaceId) ?? 0;
    let n = 0;
    for (const v of this.used.values()) n += v;
    return n;
  }
}

const PART_ROUTE = 'PUT /api/v1/multipart/:sessionId/parts/:partNumber';
/** Routes whose workspace is the authenticated key's. Token uploads call request.admitUpload themselves. */
const KEY_UPLOAD_ROUTES = new Set(['POST /api/v1/uploads', 'POST /api/v1/uploads/remote']);
/** How long a refused client is asked to wait: uploads take a while to give their slots back. */
const RETRY_AFTER_SECONDS = 5;

const kReply = Symbol('stowage.reply');
const kRelease = Symbol('stowage.uploadSlot');
type Marked = FastifyRequest & { [kReply]?: FastifyReply; [kRelease]?: () => void };

/**
 * Installs the upload slots and the free-space admission. After auth: the key's workspace is
 * known. `disk` only for local storage.
 */
export function installUploadSlots(app: FastifyInstance, opts: { slots: UploadSlots; db: Db; disk?: DiskSpace }): void {
  const { slots, db, disk } = opts;
  const sessions = new UploadSessionRepository(db.kysely);
  app.decorate('uploadSlots', slots);

  const admit = async (request: Marked, workspaceId: string, declared: number): Promise<void> => {
    if (request[kRelease]) return;
    if (disk) {
      // A disk that cannot be asked is no reason to refuse: writing will tell.
      const room = await disk.roomFor(declared).catch(() => true);
      if (!room) throw errors.insufficientStorage();
    }
    const res: ServerResponse | undefined = request[kReply]?.raw;
    // The client left while the checks ran: nothing to hold a slot for.
    if (res?.destroyed || request.raw.socket?.destroyed) return;
    const release = slots.take(workspaceId);
    // The error handler reads a small body to its end before the refusal (drainSmallBody).
    if (!release) throw errors.tooManyUploads(slots.max, RETRY_AFTER_SECONDS);
    request[kRelease] = release;
    // 'close' comes after the response is sent, or when the connection goes, whichever is first.
    res?.once('close', release);
  };

  app.decorateRequest('admitUpload', function (this: FastifyRequest, workspaceId: string) {
    return admit(this as Marked, workspaceId, declaredLength(this));
  });

  app.addHook('onRequest', async (request, reply) => {
    const marked = request as Marked;
    marked[kReply] = reply;
    const route = `${request.method} ${request.routeOptions.url}`;
    if (KEY_UPLOAD_ROUTES.has(route) && request.principal)
      return admit(marked, request.principal.workspaceId, declaredLength(request));
    if (route !== PART_ROUTE) return;
    // A part's workspace is its session's. Unknown sessions are left to the handler (404).
    const { sessionId } = request.params as { sessionId?: string };
    if (typeof sessionId !== 'string' || !/^[0-9A-Za-z]{24}$/.test(sessionId)) return;
    const workspaceId = await sessions.activeSessionWorkspace(sessionId);
    if (!workspaceId) return;
    const length = Number((request.query as { length?: string }).length);
    return admit(
      marked,
      workspaceId,
      declaredLength(request) || (Number.isSafeInteger(length) && length > 0 ? length : 0),
    );
  });
  // Also for responses that never had a real socket (inject).
  app.addHook('onResponse', async (request) => {
    (request as Marked)[kRelease]?.();
  });
}

function declaredLength(request: FastifyRequest): number {
  const n = Number(request.headers['content-length']);
  return Number.isSafeInteger(n) && n > 0 ? n : 0;
}

/**
 * Cuts request bodies that stall: once a body has started, the connection may stay silent for
 * at most `idleMs`. Only silence counts, never total time, and only the client's: while the body
 * waits unread on the server (a slow disk, a database query), the timer starts again.
 */
export function installBodyIdleTimeout(app: FastifyInstance, idleMs: number): void {
  if (idleMs <= 0) return;
  app.addHook('onRequest', async (request, reply) => {
    const req = request.raw;
    const res = reply.raw;
    const socket = req.socket;
    if (req.complete || typeof socket?.setTimeout !== 'function') return;
    const length = req.headers['content-length'];
    if (req.headers['transfer-encoding'] === undefined && !(Number(length) > 0)) return;
    // Node calls this socket's 'timeout' listeners: the request's while its body is incomplete,
    // then the response's. With a listener, it no longer closes the socket itself.
    res.on('timeout', () => {
      // The body is all here: the server is working and may take its time (until the answer,
      // when Node sets the keep-alive timer instead).
      if (req.complete) return void socket.setTimeout(0);
      // Bytes are waiting for the server, not the other way round.
      if (req.readableLength > 0) return void socket.setTimeout(idleMs);
      request.log.info({ idleMs }, 'request body idle: connection closed');
      if (!res.headersSent && socket.writable) socket.write(rawAnswer(408, errors.bodyIdle(idleMs).toBody()));
      socket.destroy();
    });
    socket.setTimeout(idleMs);
  });
}
