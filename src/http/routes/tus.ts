// tus 1.0 (https://tus.io/protocols/resumable-upload) at /api/v1/tus, served by @tus/server
// over Stowage's own data store (src/uploads/tus/store.ts). Fastify authenticates (a key, or an
// upload token), admits the upload (slots, free space) and hands the raw request to @tus/server,
// which owns the protocol: offsets, lengths, metadata, expiry, termination. Checksums are ours
// (@tus/server has no checksum extension): the header is read here and checked by the store.
import { randomUUID } from 'node:crypto';
import { Server } from '@tus/server';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../../config.ts';
import { AppError, errors } from '../../errors.ts';
import type { WorkspaceService } from '../../services/workspaces.ts';
import { capabilitiesOf, type StorageDriver } from '../../storage/driver.ts';
import type { BlobStore } from '../../uploads/blob-store.ts';
import type { MultipartService } from '../../uploads/multipart/service.ts';
import type { UploadTokenService } from '../../uploads/tokens.ts';
import {
  CHECKSUM_ALGORITHMS,
  type TusCall,
  type TusCaller,
  StowageTusStore,
  tusCalls,
} from '../../uploads/tus/store.ts';
import type { UploadService } from '../../uploads/upload-service.ts';
import { checkBrowserOrigin, presentedKey } from '../auth.ts';
import { EXPOSED_HEADERS } from '../cors.ts';
import { takeRawBodies } from '../raw-body.ts';
import { uploadAnswer } from './upload-answer.ts';

export const TUS_PATH = '/api/v1/tus';
/** Headers with the finished upload's file record (the finishing PATCH, HEAD). */
const FILE_NO = 'x-file-no';
const FILE_ID = 'x-file-id';
/** How long a tus upload may take unless STOWAGE_MULTIPART_MAX_TTL is shorter. */
const TUS_TTL_SECONDS = 24 * 3600;

export interface TusRouteDeps {
  config: Config;
  multipart: MultipartService;
  uploads: UploadService;
  tokens: UploadTokenService;
  workspaces: WorkspaceService;
  blobs: BlobStore;
  storage: StorageDriver;
}

export async function tusRoutes(app: FastifyInstance, deps: TusRouteDeps): Promise<void> {
  const { config, workspaces, tokens } = deps;
  const ownOrigin = new URL(config.publicUrl).origin;
  // tus bytes come through the service, so the store needs a driver that takes parts that way
  // (`writePart`: local disk, S3, Azure, GCS all do; a driver added without it refuses here).
  const supported = capabilitiesOf(deps.storage).writePart;
  const store = new StowageTusStore({
    ...deps,
    masterKey: config.masterKey,
    ttlSeconds: Math.min(TUS_TTL_SECONDS, config.multipartMaxTtl),
    publicKeyHint: (ws) => workspaces.publicKeyHint(ws),
  });
  const tus = new Server({
    path: TUS_PATH,
    datastore: store,
    // Location from the configured public URL, never from a Host header a client chose.
    generateUrl: (_req, { id }) => `${config.publicUrl}${TUS_PATH}/${id}`,
    // The store gives the real id (the session's) in create. Unique all the same: @tus/server
    // locks a creation under this name, and a second holder would make it cancel the first.
    namingFunction: () => `new-${randomUUID()}`,
    disableTerminationForFinishedUploads: true,
    // Stowage's CORS (src/http/cors.ts) decides the allowed origin; tus adds its headers to the exposed ones.
    exposedHeaders: [...EXPOSED_HEADERS, 'upload-expires', FILE_NO, FILE_ID],
    onUploadFinish: async (_req, upload) => {
      const record = await store.finish(upload.id);
      return { headers: { [FILE_NO]: String(record.file_no), [FILE_ID]: record.id } };
    },
    // Stowage's errors keep their status and documented body.
    onResponseError: (_req, err) => {
      if (err instanceof AppError) return { status_code: err.status, body: JSON.stringify(err.toBody()) };
      return undefined;
    },
  });

  /** Who is asking: a key (x-api-key or Bearer) or an upload token in the same places. */
  const callerOf = async (request: FastifyRequest, creating: boolean): Promise<TusCaller> => {
    const credential = presentedKey(request);
    if (credential?.startsWith('stw_ut_')) {
      if (creating) {
        const resolved = await tokens.resolve(credential);
        checkBrowserOrigin(request, resolved.principal.allowedOrigins, ownOrigin);
        return {
          kind: 'token',
          id: resolved.row.id,
          workspaceId: resolved.row.workspace_id,
          create: { row: resolved.row, policy: resolved.policy },
        };
      }
      const known = await tokens.identify(credential);
      if (!known) throw errors.invalidToken('TOKEN_INVALID');
      return { kind: 'token', id: known.id, workspaceId: known.workspaceId };
    }
    const principal = await workspaces.authenticate(credential);
    if (!principal) throw errors.unauthorized();
    if (principal.keyType === 'public') checkBrowserOrigin(request, principal.allowedOrigins, ownOrigin);
    return { kind: 'key', principal };
  };

  const handle = async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    if (request.method !== 'OPTIONS') {
      if (!supported)
        throw errors.validation(
          `tus uploads need storage that takes parts through the service; ${deps.storage.description} does not`,
        );
      // @tus/server has no concatenation (its POST only refuses Upload-Concat, with a 501);
      // said here as the client's to change, in Stowage's error shape.
      if (request.headers['upload-concat'] !== undefined)
        throw errors.validation(
          'tus concatenation (Upload-Concat) is not offered: send the file as one tus upload (tus-js-client: parallelUploads 1), or use multipart uploads for parts in parallel',
        );
      const caller = await callerOf(request, request.method === 'POST');
      const call: TusCall = { caller, checksum: parseChecksum(request), contentLength: contentLength(request) };
      const id = (request.params as { id?: string }).id;
      if (request.method === 'POST' || request.method === 'PATCH') {
        const workspaceId = caller.kind === 'key' ? caller.principal.workspaceId : caller.workspaceId;
        await request.admitUpload(workspaceId);
      }
      if (id && (request.method === 'GET' || request.method === 'HEAD')) {
        const record = await tusCalls.run(call, () => store.record(id));
        if (request.method === 'GET') {
          if (!record) {
            const upload = await tusCalls.run(call, () => store.getUpload(id));
            return reply.send({
              success: true,
              status: 'active',
              upload_offset: upload.offset,
              upload_length: upload.size,
            });
          }
          return reply.send(uploadAnswer(record));
        }
        if (record) {
          reply.header(FILE_NO, String(record.file_no));
          reply.header(FILE_ID, record.id);
        }
      }
      return hand(reply, () => tusCalls.run(call, () => tus.handle(request.raw, reply.raw)));
    }
    reply.header('tus-checksum-algorithm', CHECKSUM_ALGORITHMS.join(','));
    return hand(reply, () => tus.handle(request.raw, reply.raw));
  };

  await app.register(async (scope) => {
    takeRawBodies(scope);
    const config = { auth: 'none' as const };
    const schema = { hide: true };
    // Creating an upload counts against the key's upload budget, as a multipart start does;
    // its PATCHes are its parts, which are not counted.
    const upload = deps.config.rateLimitUpload;
    scope.route({
      method: 'POST',
      url: TUS_PATH,
      config: upload
        ? { ...config, rateLimit: { max: upload.max, timeWindow: upload.windowMs, groupId: 'upload' } }
        : config,
      schema,
      handler: handle,
    });
    scope.route({ method: 'OPTIONS', url: TUS_PATH, config, schema, handler: handle });
    scope.route({
      method: ['HEAD', 'GET', 'PATCH', 'DELETE', 'OPTIONS'],
      url: `${TUS_PATH}/:id`,
      config,
      schema,
      exposeHeadRoute: false,
      handler: handle,
    });
  });
}

/** Fastify's headers so far (CORS, request id) go out with tus's answer, which is written raw. */
function hand(reply: FastifyReply, run: () => Promise<unknown>): Promise<void> {
  for (const [name, value] of Object.entries(reply.getHeaders()))
    if (value !== undefined) reply.raw.setHeader(name, value);
  reply.hijack();
  return run().then(
    () => undefined,
    (err) => {
      if (!reply.raw.headersSent) {
        const status = err instanceof AppError ? err.status : 500;
        const body = err instanceof AppError ? err.toBody() : { success: false, error: 'Internal Server Error' };
        reply.raw.writeHead(status, { 'content-type': 'application/json' });
        reply.raw.end(JSON.stringify(body));
      } else reply.raw.destroy();
    },
  );
}

function contentLength(request: FastifyRequest): number | undefined {
  const n = Number(request.headers['content-length']);
  return request.headers['content-length'] !== undefined && Number.isSafeInteger(n) && n >= 0 ? n : undefined;
}

/** `Upload-Checksum: <algorithm> <base64 digest>`; an algorithm not offered is 400, as tus says. */
function parseChecksum(request: FastifyRequest): TusCall['checksum'] {
  const raw = request.headers['upload-checksum'];
  if (raw === undefined || request.method !== 'PATCH') return undefined;
  if (typeof raw !== 'string') throw errors.validation('send Upload-Checksum once');
  const m = /^\s*([a-z0-9-]+)\s+([A-Za-z0-9+/=]+)\s*$/.exec(raw);
  if (!m || !(CHECKSUM_ALGORITHMS as readonly string[]).includes(m[1]))
    throw errors.validation(`Upload-Checksum: use one of ${CHECKSUM_ALGORITHMS.join(', ')} with a base64 digest`);
  return { algorithm: m[1] as (typeof CHECKSUM_ALGORITHMS)[number], digest: Buffer.from(m[2], 'base64') };
}
