// Upload tokens: minted by a backend with its private key, spent by a browser with no key.
import { Readable } from 'node:stream';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import contentDisposition from 'content-disposition';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { errorResponses } from '../../contract/errors.ts';
import { UploadAnswerRef } from '../../contract/files.ts';
import { TokenMintBody, TokenParams, UploadToken } from '../../contract/uploads.ts';
import { errors } from '../../errors.ts';
import type { UploadTokenService } from '../../uploads/tokens.ts';
import type { WorkspaceService } from '../../services/workspaces.ts';
import { checkBrowserOrigin, principalOf } from '../auth.ts';
import { uploadAnswer } from './upload-answer.ts';
import { takeRawBodies } from '../raw-body.ts';

const tags = ['uploads'];

/** A header value, once; a header sent twice is refused rather than guessed at. */
function header(request: FastifyRequest, name: string): string | undefined {
  const v = request.headers[name];
  if (Array.isArray(v)) throw errors.validation(`send the ${name} header once`);
  return v === undefined || v === '' ? undefined : v;
}

/**
 * A text header (`X-File-Name`, `X-Folder`, `X-Tags`, `X-Transform`): header values are bytes,
 * so clients send UTF-8 percent-encoded (as encodeURIComponent writes it). Decoded once; a
 * value that is not valid percent-encoding is taken as it is.
 */
function textHeader(request: FastifyRequest, name: string): string | undefined {
  const raw = header(request, name);
  if (raw === undefined) return undefined;
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

/** The file name an uploader sent: `X-File-Name`, else `Content-Disposition`'s filename (RFC 6266, `filename*` preferred). */
export function sentFileName(request: FastifyRequest): string | undefined {
  const named = textHeader(request, 'x-file-name');
  if (named !== undefined) return named;
  const disposition = header(request, 'content-disposition');
  if (disposition === undefined) return undefined;
  try {
    return contentDisposition.parse(disposition).parameters.filename || undefined;
  } catch {
    throw errors.validation('Content-Disposition is malformed; send the name in X-File-Name');
  }
}

export async function tokenRoutes(
  app: FastifyInstance,
  opts: { tokens: UploadTokenService; workspaces: WorkspaceService; publicUrl: string },
): Promise<void> {
  const { tokens, workspaces } = opts;
  const ownOrigin = new URL(opts.publicUrl).origin;

  app.withTypeProvider<TypeBoxTypeProvider>().post(
    '/api/v1/generate-token',
    {
      config: { auth: 'private' },
      schema: {
        tags,
        summary: 'Mint an upload token for a browser',
        description:
          'A short-lived, single-use token that lets a web page upload one file with POST /api/v1/uploads/{token} and no API key. The policy (folder, tags, transform, size limit, metadata) is fixed here; the uploader may override folder, tags or transform only where allow_override says so.',
        body: TokenMintBody,
        response: {
          201: UploadToken,
          ...errorResponses(400, 401, 403),
        },
      },
    },
    async (request, reply) => {
      const principal = principalOf(request);
      const minted = await tokens.mint(principal, await workspaces.publicKeyHint(principal.workspaceId), request.body);
      return reply.code(201).send(minted);
    },
  );

  // The body is the file itself, whatever its Content-Type: streamed, never parsed.
  await app.register(async (scope) => {
    takeRawBodies(scope);
    scope.withTypeProvider<TypeBoxTypeProvider>().post(
      '/api/v1/uploads/:token',
      {
        config: { auth: 'none' },
        schema: {
          tags,
          summary: 'Upload one file with an upload token (no API key)',
          description:
            "The body is the raw file. Content-Type: the file type. X-File-Name: the name, percent-encoded UTF-8 (else Content-Disposition filename, else the token's file_name). X-Folder, X-Tags (comma-separated) and X-Transform (each percent-encoded UTF-8 too) override the policy where the token allows it. A token uploads one file; a failed upload leaves it usable until it expires.",
          params: TokenParams,
          response: { 201: UploadAnswerRef, ...errorResponses(400, 401, 402, 403, 413) },
        },
      },
      async (request, reply) => {
        const resolved = await tokens.resolve(request.params.token);
        checkBrowserOrigin(request, resolved.principal.allowedOrigins, ownOrigin);
        // Free space and a slot of the workspace's concurrent uploads, before the token is claimed.
        await request.admitUpload(resolved.principal.workspaceId);
        const length = header(request, 'content-length');
        // The raw-body parser hands the request stream on; no body at all leaves it unread.
        const body = request.body instanceof Readable ? request.body : request.raw;
        const record = await tokens.upload(resolved, body, {
          fileName: sentFileName(request),
          folder: textHeader(request, 'x-folder'),
          tags: textHeader(request, 'x-tags'),
          transform: textHeader(request, 'x-transform'),
          contentLength: length === undefined ? undefined : Number(length),
        });
        return reply.code(201).send(uploadAnswer(record));
      },
    );
  });
}
