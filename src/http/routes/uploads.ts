// Uploads with a key: direct (multipart/form-data, streamed) and remote (from a URL).
import type { EventEmitter } from 'node:events';
import type { IncomingMessage } from 'node:http';
import multipart from '@fastify/multipart';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { errorResponses } from '../../contract/errors.ts';
import { UploadAnswerRef } from '../../contract/files.ts';
import { RemoteUploadBody, UPLOAD_FORM_FIELDS } from '../../contract/uploads.ts';
import { AppError, errors } from '../../errors.ts';
import { applyGrant } from '../../uploads/grants.ts';
import { parseUploadFields, type UploadOptions } from '../../uploads/options.ts';
import type { RemoteUploadService } from '../../uploads/remote.ts';
import { IncompleteBodyError, type Staged } from '../../uploads/staging.ts';
import type { UploadService } from '../../uploads/upload-service.ts';
import { principalOf } from '../auth.ts';
import { uploadAnswer } from './upload-answer.ts';

const FORM_FIELDS = new Set<string>(UPLOAD_FORM_FIELDS);

export async function uploadRoutes(app: FastifyInstance, opts: { uploads: UploadService }): Promise<void> {
  const { uploads } = opts;
  // multipart/form-data is parsed only in this plugin's routes, as a stream: the file part is
  // never buffered, and form fields are small.
  await app.register(multipart, {
    // File size is enforced by the upload pipeline (per workspace), not here.
    limits: {
      fieldNameSize: 100,
      fieldSize: 64 * 1024,
      fields: 20,
      files: 1,
      parts: 25,
      headerPairs: 100,
      fileSize: Number.MAX_SAFE_INTEGER,
    },
  });

  app.post(
    '/api/v1/uploads',
    {
      config: { auth: 'any' },
      schema: {
        tags: ['uploads'],
        summary: 'Direct upload',
        description:
          'multipart/form-data with `file` and `file_name`; optional folder, tags (comma-separated), transform, metadata (JSON object), custom_id, random_prefix (true/false), webhook_url. The file streams to storage.',
        consumes: ['multipart/form-data'],
        response: { 201: UploadAnswerRef, ...errorResponses(400, 401, 402, 413, 415) },
      },
    },
    async (request, reply) => {
      const principal = principalOf(request);
      const { workspaceId } = principal;
      if (!request.isMultipart()) throw errors.validation('send the upload as multipart/form-data');
      const fields: Record<string, string> = {};
      let staged: Staged | undefined;
      const form = watchFormEnd(request.raw);
      try {
        for await (const part of request.parts()) {
          if (part.type === 'file') {
            if (part.fieldname !== 'file' || staged) {
              part.file.resume();
              throw errors.validation(
                staged
                  ? 'send exactly one file'
                  : `the file goes in the "file" field, not "${part.fieldname.slice(0, 64)}"`,
              );
            }
            // Fields sent before the file are checked before any byte is stored.
            if (fields.file_name !== undefined) applyGrant(parseUploadFields(fields), principal);
            // The whole request's length bounds the file: with a quota, it is reserved up front.
            staged = await uploads.stage(workspaceId, part.file, {
              expectedBytes: Number(request.headers['content-length']) || undefined,
              known: principal.quota,
            });
          } else {
            if (part.valueTruncated || part.fieldnameTruncated) throw errors.fieldTooLarge(part.fieldname);
            if (!FORM_FIELDS.has(part.fieldname)) continue;
            if (part.fieldname in fields) throw errors.validation(`${part.fieldname} is sent twice`);
            fields[part.fieldname] = String(part.value);
          }
        }
        // The parts can end quietly although the form did not (see watchFormEnd), or because
        // the connection closed: nothing is kept from a body that did not arrive whole.
        if (form.endedEarly || request.raw.complete === false) throw new IncompleteBodyError();
        if (!staged) throw errors.fileRequired();
      } catch (err) {
        if (staged) await uploads.discard(staged);
        // Whatever broke while the form was ending early (the file stream's own "terminated
        // early", a pipeline closed prematurely) is that early end.
        const cut = form.endedEarly || (request.raw.destroyed && request.raw.complete === false);
        throw mapMultipartError(cut && !(err instanceof AppError) ? new IncompleteBodyError() : err);
      } finally {
        form.stop();
      }
      let options: UploadOptions;
      try {
        options = applyGrant(parseUploadFields(fields), principal);
      } catch (err) {
        await uploads.discard(staged);
        throw err;
      }
      const record = await uploads.finish(staged, options, 'direct');
      return reply.code(201).send(uploadAnswer(record));
    },
  );
}

export async function remoteUploadRoute(app: FastifyInstance, remote: RemoteUploadService): Promise<void> {
  app.withTypeProvider<TypeBoxTypeProvider>().post(
    '/api/v1/uploads/remote',
    {
      config: { auth: 'any' },
      schema: {
        tags: ['uploads'],
        summary: 'Upload from a URL',
        description:
          'The service downloads remote_url (http or https, public addresses only, at most 5 redirects) and stores it like a direct upload.',
        body: RemoteUploadBody,
        response: { 201: UploadAnswerRef, ...errorResponses(400, 401, 402, 413, 502) },
      },
    },
    async (request, reply) =>
      reply.code(201).send(uploadAnswer(await remote.upload(principalOf(request), request.body))),
  );
}

/** @fastify/multipart's own limit errors, in the documented shape. */
function mapMultipartError(err: unknown): unknown {
  const code = (err as { code?: string }).code;
  switch (code) {
    case 'FST_FILES_LIMIT':
      return errors.validation('send exactly one file');
    case 'FST_PARTS_LIMIT':
    case 'FST_FIELDS_LIMIT':
      return errors.validation('too many form fields');
    case 'FST_INVALID_MULTIPART_CONTENT_TYPE':
      return errors.validation('send the upload as multipart/form-data');
    case 'EINCOMPLETE':
      return FORM_ENDED_EARLY();
    default:
      if (
        err instanceof Error &&
        /terminated early due to unexpected end of multipart data|Unexpected end of multipart data/i.test(err.message)
      )
        return FORM_ENDED_EARLY();
      if (
        err instanceof Error &&
        /Multipart: Boundary not found|Unexpected end of form|Malformed part header/i.test(err.message)
      ) {
        return errors.validation('the multipart body is malformed');
      }
      return err;
  }
}

const FORM_ENDED_EARLY = () =>
  errors.validation('the form ended before its closing boundary: send the whole multipart body');

/** Busboy's word for a form without its closing boundary (@fastify/multipart keys on it too). */
const UNEXPECTED_END = 'Unexpected end of multipart data';

/**
 * Tells whether the form ended before its closing boundary. When busboy reports that, as an
 * 'error' event, @fastify/multipart ends the parts as if the form were whole: a part cut in
 * its headers or its value is dropped, so a file could be stored without the fields still to
 * come (or with none at all). Only busboy knows, so its 'error' events are listened to: the
 * plugin pipes the request into it, and that one pipe call is where it is handed over.
 */
function watchFormEnd(raw: IncomingMessage): { readonly endedEarly: boolean; stop(): void } {
  const state = {
    endedEarly: false,
    stop: () => {
      if (Object.hasOwn(raw, 'pipe')) delete (raw as { pipe?: unknown }).pipe;
    },
  };
  const pipe = raw.pipe;
  raw.pipe = function (this: IncomingMessage, dest: NodeJS.WritableStream, options?: { end?: boolean }) {
    state.stop();
    (dest as unknown as EventEmitter).on('error', (err: unknown) => {
      if ((err as Error | undefined)?.message === UNEXPECTED_END) state.endedEarly = true;
    });
    return pipe.call(this, dest, options);
  } as typeof raw.pipe;
  return state;
}
