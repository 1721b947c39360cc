// Files and folders: list, details, rename, update, signed URLs, delete (/api/v1/files, /api/v1/folders).
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { errorResponses } from '../../contract/errors.ts';
import {
  Deleted,
  FileDetailsAnswer,
  FileListQuery,
  FilePage,
  FileParams,
  FileUpdateBody,
  NameBody,
  SignedUrlAnswer,
  SignedUrlBody,
  UploadAnswerRef,
} from '../../contract/files.ts';
import {
  FolderAnswer,
  FolderCreateBody,
  FolderDeleteQuery,
  FolderListQuery,
  FolderMoveBody,
  FolderPage,
  FolderParams,
} from '../../contract/folders.ts';
import type { FileService } from '../../services/files.ts';
import { bothShapes, uploadAnswer } from './upload-answer.ts';
import type { FolderService } from '../../services/folders.ts';
import { principalOf } from '../auth.ts';

export async function fileRoutes(
  app: FastifyInstance,
  opts: { files: FileService; folders: FolderService },
): Promise<void> {
  const { files, folders } = opts;
  const api = app.withTypeProvider<TypeBoxTypeProvider>();
  const ws = (request: Parameters<typeof principalOf>[0]) => principalOf(request).workspaceId;

  api.get(
    '/api/v1/files',
    {
      config: { auth: 'private' },
      schema: {
        tags: ['files'],
        summary: 'List files',
        description:
          'Filters: folder_no, path, search (name, case-insensitive), tags (comma list, all must match), type (image, video, audio, document, other), created_after/created_before, custom_id. Order is total: ties are broken by id. ' +
          'Every answer carries X-Snapshot; send it back as snapshot to page without files added since shifting the pages. ' +
          'aliases=none answers files and meta only (no items, data, page, total_count, …).',
        querystring: FileListQuery,
        response: {
          200: FilePage,
          ...errorResponses(400, 401, 403, 404),
        },
      },
    },
    async (request, reply) => {
      // X-Snapshot: the instant this page describes; a later page sent with it ignores newer files.
      const { snapshot, files: records, meta } = await files.list(ws(request), request.query);
      reply.header('x-snapshot', snapshot);
      // The records are built field by field to the FileRecord schema (file-records.ts `view`)
      // and encoded once, sent as bytes.
      const list = Buffer.from(JSON.stringify(records));
      if (request.query.aliases === 'none')
        return sendJsonBytes(
          reply,
          Buffer.concat([Buffer.from('{"files":'), list, Buffer.from(`,"meta":${JSON.stringify(meta)}}`)]),
        );
      const { page, limit, total, hasNext } = meta;
      const rest: Omit<FilePage, 'files' | 'items' | 'data'> = {
        meta,
        next_cursor: meta.nextCursor,
        page,
        current_page: page,
        limit,
        total_count: total,
        total_results: total,
        total_pages: Math.ceil(total / limit),
        is_page_next: hasNext,
        has_next: hasNext,
        has_next_page: hasNext,
      };
      // The page's records go out three times (files, items, data: the names different SDK
      // generations read), about 3.5 KB each: encoded once and sent as bytes, which took a 100-file
      // page from two serialisations and a UTF-8 pass over ~350 KB to one of ~115 KB.
      const body = Buffer.concat([
        Buffer.from('{"files":'),
        list,
        Buffer.from(',"items":'),
        list,
        Buffer.from(',"data":'),
        list,
        Buffer.from(`,${JSON.stringify(rest).slice(1)}`),
      ]);
      return sendJsonBytes(reply, body);
    },
  );

  api.get(
    '/api/v1/files/:file_no',
    {
      config: { auth: 'private' },
      schema: {
        tags: ['files'],
        summary: 'Get a file, with the details the hosted API gives',
        params: FileParams,
        response: {
          200: FileDetailsAnswer,
          ...errorResponses(401, 403, 404),
        },
      },
    },
    async (request) => ({
      success: true as const,
      data: await files.details(ws(request), request.params.file_no),
    }),
  );

  api.patch(
    '/api/v1/files/:file_no/rename',
    {
      config: { auth: 'private' },
      schema: {
        tags: ['files'],
        summary: 'Rename a file',
        description:
          'The name without its extension, which is kept (boot on shoe.png gives boot.png); a name already ending in it is taken as it is. 409 when the folder holds that name.',
        params: FileParams,
        body: NameBody,
        response: { 200: UploadAnswerRef, ...errorResponses(400, 401, 403, 404, 409) },
      },
    },
    async (request) => uploadAnswer(await files.rename(ws(request), request.params.file_no, request.body.name)),
  );

  api.patch(
    '/api/v1/files/:file_no',
    {
      config: { auth: 'private' },
      schema: {
        tags: ['files'],
        summary: 'Update a file',
        description:
          'Tags added and removed, metadata merged (null removes a key), custom_id, folder_no (move; null for the root), is_private.',
        params: FileParams,
        body: FileUpdateBody,
        response: { 200: UploadAnswerRef, ...errorResponses(400, 401, 403, 404, 409) },
      },
    },
    async (request) => uploadAnswer(await files.update(ws(request), request.params.file_no, request.body)),
  );

  api.post(
    '/api/v1/files/:file_no/signed-url',
    {
      config: { auth: 'private' },
      schema: {
        tags: ['files'],
        summary: 'A signed, expiring delivery URL (for private files)',
        params: FileParams,
        body: SignedUrlBody,
        response: {
          200: SignedUrlAnswer,
          ...errorResponses(400, 401, 403, 404),
        },
      },
    },
    async (request) => {
      const body = request.body ?? {};
      return {
        success: true as const,
        data: await files.signedUrl(ws(request), request.params.file_no, body.expires_in ?? 3600, body.transform),
      };
    },
  );

  api.delete(
    '/api/v1/files/:file_no',
    {
      config: { auth: 'private' },
      schema: {
        tags: ['files'],
        summary: 'Delete a file',
        params: FileParams,
        response: {
          200: Deleted,
          ...errorResponses(401, 403, 404),
        },
      },
    },
    async (request) => {
      await files.delete(ws(request), request.params.file_no);
      return { success: true as const, message: 'file deleted successfully' };
    },
  );

  api.get(
    '/api/v1/folders',
    {
      config: { auth: 'private' },
      schema: {
        tags: ['folders'],
        summary: 'List folders',
        description:
          'Children of parent_folder_no (absent: the root), by name. total_items and total_size count every file below the folder. ' +
          'Without limit, every child folder is returned, up to 1,000 (meta.limit is then 1000 and hasMore says whether more exist).',
        querystring: FolderListQuery,
        response: {
          200: FolderPage,
          ...errorResponses(400, 401, 403, 404),
        },
      },
    },
    async (request) => folders.list(ws(request), request.query),
  );

  api.post(
    '/api/v1/folders',
    {
      config: { auth: 'private' },
      schema: {
        tags: ['folders'],
        summary: 'Create a folder',
        description:
          'name (or folder_name, as older hosted SDKs send it) and the parent: parent_folder_no, or path (the parent\'s folder path, "" or "/" for the root).',
        body: FolderCreateBody,
        response: { 201: FolderAnswer, ...errorResponses(400, 401, 403, 404, 409) },
      },
    },
    async (request, reply) => reply.code(201).send(bothShapes(await folders.create(ws(request), request.body))),
  );

  api.post(
    '/api/v1/folders/rename/:folder_no',
    {
      config: { auth: 'private' },
      schema: {
        tags: ['folders'],
        summary: 'Rename a folder (paths below follow)',
        params: FolderParams,
        body: NameBody,
        response: { 200: FolderAnswer, ...errorResponses(400, 401, 403, 404, 409) },
      },
    },
    async (request) => bothShapes(await folders.rename(ws(request), request.params.folder_no, request.body.name)),
  );

  api.post(
    '/api/v1/folders/move/:folder_no',
    {
      config: { auth: 'private' },
      schema: {
        tags: ['folders'],
        summary: 'Move a folder under another parent (paths below follow)',
        description:
          'parent_folder_no: the new parent, or null for the root. 409 FOLDER_INTO_ITSELF when the new parent is the folder or inside it; 409 FOLDER_EXISTS when the new parent holds a folder of that name.',
        params: FolderParams,
        body: FolderMoveBody,
        response: { 200: FolderAnswer, ...errorResponses(400, 401, 403, 404, 409) },
      },
    },
    async (request) =>
      bothShapes(await folders.move(ws(request), request.params.folder_no, request.body.parent_folder_no)),
  );

  api.delete(
    '/api/v1/folders/:folder_no',
    {
      config: { auth: 'private' },
      schema: {
        tags: ['folders'],
        summary: 'Delete a folder',
        description:
          'An empty folder is deleted. A folder holding files or folders answers 409 FOLDER_NOT_EMPTY unless recursive=true, which deletes it and everything in it.',
        params: FolderParams,
        querystring: FolderDeleteQuery,
        response: {
          200: Deleted,
          ...errorResponses(401, 403, 404, 409),
        },
      },
    },
    async (request) => {
      await folders.delete(ws(request), request.params.folder_no, { recursive: request.query.recursive === true });
      return { success: true as const, message: 'folder deleted' };
    },
  );
}

/** Sends JSON already encoded (the schema documents it; the bytes skip the serializer). */
function sendJsonBytes(reply: FastifyReply, body: Buffer): FastifyReply {
  return reply.type('application/json; charset=utf-8').send(body);
}
