import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { FileListQuery, FileService, FileUpdate } from '../../services/files.ts';
import { bothShapes, uploadAnswer } from './upload-answer.ts';
import type { FolderService } from '../../services/folders.ts';
import { principalOf } from '../auth.ts';
import { errorResponses } from '../schemas.ts';

const Record = Type.Ref('FileRecord');
/** Rename and update: the record flat (older hosted SDKs read it there) plus success and data. */
const FileEnvelope = Type.Ref('UploadAnswer');
const FileParams = Type.Object({ file_no: Type.String({ maxLength: 64 }) });
const FolderParams = Type.Object({ folder_no: Type.String({ maxLength: 64 }) });
const Page = {
  page: Type.Integer({ minimum: 1, maximum: 10_000_000, default: 1 }),
  limit: Type.Integer({ minimum: 1, maximum: 100, default: 20, description: 'Default 20, as the hosted API' }),
};
const nameBody = Type.Object({ name: Type.String({ minLength: 1, maxLength: 1024 }) });

const Folder = Type.Object({
  id: Type.String(),
  folder_no: Type.String(),
  name: Type.String(),
  parent_folder_no: Type.Union([Type.String(), Type.Null()]),
  parent_folder: Type.Union([Type.String(), Type.Null()], {
    description: "The parent's id (a UUID); null at the root",
  }),
  workspace_id: Type.String(),
  workspace_no: Type.String({ description: 'The same as workspace_id' }),
  workspace: Type.Object({ workspace_no: Type.String() }),
  is_active: Type.Boolean({ description: 'Always true: deleted folders are gone' }),
  is_delete: Type.Boolean({ description: 'Always false' }),
  path: Type.String(),
  total_items: Type.Integer(),
  total_size: Type.Integer(),
  created_at: Type.String(),
  updated_at: Type.String(),
});
/** Folder create and rename: the folder's fields at the top level (the hosted SDKs read them there) plus success and data. */
const FolderAnswer = Type.Object({ success: Type.Literal(true), ...Folder.properties, data: Folder });

export async function fileRoutes(
  app: FastifyInstance,
  opts: { files: FileService; folders: FolderService },
): Promise<void> {
  const { files, folders } = opts;
  const ws = (request: Parameters<typeof principalOf>[0]) => principalOf(request).workspaceId;

  app.get(
    '/api/v1/files',
    {
      config: { auth: 'private' },
      schema: {
        tags: ['files'],
        summary: 'List files',
        description:
          'Filters: folder_no, search (name, case-insensitive), tags (comma list, all must match). Order is total: ties are broken by id. ' +
          'Every answer carries X-Snapshot; send it back as snapshot to page without files added since shifting the pages.',
        querystring: Type.Object({
          ...Page,
          folder_no: Type.Optional(Type.String({ maxLength: 64 })),
          folderNo: Type.Optional(Type.String({ maxLength: 64, description: 'The same as folder_no' })),
          search: Type.Optional(Type.String({ maxLength: 256 })),
          name: Type.Optional(
            Type.String({ maxLength: 256, description: 'The same as search: part of the name, any case' }),
          ),
          path: Type.Optional(
            Type.String({
              maxLength: 4096,
              description: 'A folder path (a/b; / for the root): the files directly in it',
            }),
          ),
          tags: Type.Optional(Type.String({ maxLength: 4096 })),
          sort: Type.Optional(
            Type.Union(
              ['created_at_desc', 'created_at_asc', 'name_asc', 'name_desc', 'size_asc', 'size_desc'].map((v) =>
                Type.Literal(v),
              ),
            ),
          ),
          sort_field: Type.Optional(
            Type.Union(['created_at', 'updated_at', 'name', 'file_size'].map((v) => Type.Literal(v))),
          ),
          sort_order: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')])),
          snapshot: Type.Optional(Type.String({ maxLength: 40 })),
        }),
        response: {
          200: Type.Object({
            files: Type.Array(Record),
            meta: Type.Object({
              page: Type.Integer(),
              limit: Type.Integer(),
              total: Type.Integer(),
              hasNext: Type.Boolean(),
              hasPrev: Type.Boolean(),
            }),
            // The same page in the names the hosted SDKs read.
            items: Type.Array(Record, { description: 'The same as files' }),
            page: Type.Integer(),
            limit: Type.Integer(),
            total_count: Type.Integer({ description: 'The same as meta.total' }),
            total_pages: Type.Integer(),
            is_page_next: Type.Boolean({ description: 'The same as meta.hasNext' }),
            // And in the names later hosted SDK versions page by (Node 0.3, Ruby).
            data: Type.Array(Record, { description: 'The same as files' }),
            current_page: Type.Integer(),
            total_results: Type.Integer(),
            has_next: Type.Boolean(),
            has_next_page: Type.Boolean(),
          }),
          ...errorResponses(400, 401, 403, 404),
        },
      },
    },
    async (request, reply) => {
      // The instant this page describes (taken before the query, which uses it too); a later
      // page sent with it ignores newer files.
      const query = request.query as { snapshot?: string };
      const snapshot = query.snapshot ?? new Date().toISOString();
      const result = await files.list(ws(request), { ...(request.query as FileListQuery), snapshot });
      reply.header('x-snapshot', new Date(Date.parse(snapshot)).toISOString());
      const { page, limit, total, hasNext } = result.meta;
      return {
        ...result,
        items: result.files,
        data: result.files,
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
    },
  );

  app.get(
    '/api/v1/files/:file_no',
    {
      config: { auth: 'private' },
      schema: {
        tags: ['files'],
        summary: 'Get a file, with the details the hosted API gives',
        params: FileParams,
        response: {
          200: Type.Object({ success: Type.Literal(true), data: Type.Ref('FileDetails') }),
          ...errorResponses(401, 403, 404),
        },
      },
    },
    async (request) => ({
      success: true,
      data: await files.details(ws(request), (request.params as { file_no: string }).file_no),
    }),
  );

  app.patch(
    '/api/v1/files/:file_no/rename',
    {
      config: { auth: 'private' },
      schema: {
        tags: ['files'],
        summary: 'Rename a file',
        description:
          'The name without its extension, which is kept (boot on shoe.png gives boot.png); a name already ending in it is taken as it is. 409 when the folder holds that name.',
        params: FileParams,
        body: nameBody,
        response: { 200: FileEnvelope, ...errorResponses(400, 401, 403, 404, 409) },
      },
    },
    async (request) =>
      uploadAnswer(
        await files.rename(
          ws(request),
          (request.params as { file_no: string }).file_no,
          (request.body as { name: string }).name,
        ),
      ),
  );

  app.patch(
    '/api/v1/files/:file_no',
    {
      config: { auth: 'private' },
      schema: {
        tags: ['files'],
        summary: 'Update a file',
        description:
          'Tags added and removed, metadata merged (null removes a key), custom_id, folder_no (move; null for the root), is_private.',
        params: FileParams,
        body: Type.Object({
          add_tags: Type.Optional(Type.Union([Type.Array(Type.String()), Type.String()])),
          remove_tags: Type.Optional(Type.Union([Type.Array(Type.String()), Type.String()])),
          metadata: Type.Optional(Type.Object({}, { additionalProperties: true })),
          custom_id: Type.Optional(Type.Union([Type.String(), Type.Null()])),
          folder_no: Type.Optional(Type.Union([Type.String(), Type.Null()])),
          is_private: Type.Optional(Type.Boolean()),
        }),
        response: { 200: FileEnvelope, ...errorResponses(400, 401, 403, 404, 409) },
      },
    },
    async (request) =>
      uploadAnswer(
        await files.update(ws(request), (request.params as { file_no: string }).file_no, request.body as FileUpdate),
      ),
  );

  app.post(
    '/api/v1/files/:file_no/signed-url',
    {
      config: { auth: 'private' },
      schema: {
        tags: ['files'],
        summary: 'A signed, expiring delivery URL (for private files)',
        params: FileParams,
        body: Type.Object({
          expires_in: Type.Optional(Type.Integer({ minimum: 1, maximum: 7 * 24 * 3600, default: 3600 })),
          transform: Type.Optional(Type.String({ maxLength: 512 })),
        }),
        response: {
          200: Type.Object({
            success: Type.Literal(true),
            data: Type.Object({ url: Type.String(), expires_at: Type.Integer() }),
          }),
          ...errorResponses(400, 401, 403, 404),
        },
      },
    },
    async (request) => {
      const body = (request.body ?? {}) as { expires_in?: number; transform?: string };
      return {
        success: true,
        data: await files.signedUrl(
          ws(request),
          (request.params as { file_no: string }).file_no,
          body.expires_in ?? 3600,
          body.transform,
        ),
      };
    },
  );

  app.delete(
    '/api/v1/files/:file_no',
    {
      config: { auth: 'private' },
      schema: {
        tags: ['files'],
        summary: 'Delete a file',
        params: FileParams,
        response: {
          200: Type.Object({ success: Type.Literal(true), message: Type.String() }),
          ...errorResponses(401, 403, 404),
        },
      },
    },
    async (request) => {
      await files.delete(ws(request), (request.params as { file_no: string }).file_no);
      return { success: true, message: 'file deleted successfully' };
    },
  );

  app.get(
    '/api/v1/folders',
    {
      config: { auth: 'private' },
      schema: {
        tags: ['folders'],
        summary: 'List folders',
        description:
          'Children of parent_folder_no (absent: the root), by name. total_items and total_size count every file below the folder. ' +
          'Without limit, every child folder is returned, up to 1,000 (meta.limit is then 1000 and hasMore says whether more exist).',
        querystring: Type.Object({
          page: Page.page,
          limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
          parent_folder_no: Type.Optional(Type.String({ maxLength: 64 })),
          search: Type.Optional(Type.String({ maxLength: 256 })),
          sort: Type.Optional(
            Type.Union(
              ['name_asc', 'name_desc', 'created_at_asc', 'created_at_desc'].map((v) => Type.Literal(v)),
              { description: 'Default name_asc' },
            ),
          ),
        }),
        response: {
          200: Type.Object({
            folders: Type.Array(Folder),
            meta: Type.Object({
              page: Type.Integer(),
              limit: Type.Integer(),
              total: Type.Integer(),
              hasMore: Type.Boolean(),
            }),
          }),
          ...errorResponses(400, 401, 403, 404),
        },
      },
    },
    async (request) => folders.list(ws(request), request.query as any),
  );

  app.post(
    '/api/v1/folders',
    {
      config: { auth: 'private' },
      schema: {
        tags: ['folders'],
        summary: 'Create a folder',
        description:
          'name (or folder_name, as older hosted SDKs send it) and the parent: parent_folder_no, or path (the parent\'s folder path, "" or "/" for the root).',
        body: Type.Object({
          name: Type.Optional(Type.String({ minLength: 1, maxLength: 1024 })),
          folder_name: Type.Optional(Type.String({ minLength: 1, maxLength: 1024, description: 'The same as name' })),
          parent_folder_no: Type.Optional(Type.Union([Type.String(), Type.Null()])),
          path: Type.Optional(
            Type.String({ maxLength: 4096, description: "The parent's folder path (instead of parent_folder_no)" }),
          ),
        }),
        response: { 201: FolderAnswer, ...errorResponses(400, 401, 403, 404, 409) },
      },
    },
    async (request, reply) =>
      reply
        .code(201)
        .send(
          bothShapes(
            await folders.create(
              ws(request),
              request.body as { name?: unknown; folder_name?: unknown; parent_folder_no?: unknown; path?: unknown },
            ),
          ),
        ),
  );

  app.post(
    '/api/v1/folders/rename/:folder_no',
    {
      config: { auth: 'private' },
      schema: {
        tags: ['folders'],
        summary: 'Rename a folder (paths below follow)',
        params: FolderParams,
        body: nameBody,
        response: { 200: FolderAnswer, ...errorResponses(400, 401, 403, 404, 409) },
      },
    },
    async (request) =>
      bothShapes(
        await folders.rename(
          ws(request),
          (request.params as { folder_no: string }).folder_no,
          (request.body as { name: string }).name,
        ),
      ),
  );

  app.delete(
    '/api/v1/folders/:folder_no',
    {
      config: { auth: 'private' },
      schema: {
        tags: ['folders'],
        summary: 'Delete a folder',
        description:
          'An empty folder is deleted. A folder holding files or folders answers 409 FOLDER_NOT_EMPTY unless recursive=true, which deletes it and everything in it.',
        params: FolderParams,
        querystring: Type.Object({ recursive: Type.Optional(Type.Boolean()) }),
        response: {
          200: Type.Object({ success: Type.Literal(true), message: Type.String() }),
          ...errorResponses(401, 403, 404, 409),
        },
      },
    },
    async (request) => {
      await folders.delete(ws(request), (request.params as { folder_no: string }).folder_no, {
        recursive: (request.query as { recursive?: boolean }).recursive === true,
      });
      return { success: true, message: 'folder deleted' };
    },
  );
}
