// Folders: the folder as the API shows it, and the requests of /api/v1/folders.
import { type Static, Type } from 'typebox';
import { PAGE } from './common.ts';
import { EXAMPLE_FOLDER } from './examples.ts';

export const Folder = Type.Object(
  {
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
  },
  { examples: [EXAMPLE_FOLDER] },
);
export type Folder = Static<typeof Folder>;

/** Folder create and rename: the folder's fields at the top level (the hosted SDKs read them there) plus success and data. */
export const FolderAnswer = Type.Object(
  { success: Type.Literal(true), ...Folder.properties, data: Folder },
  { examples: [{ success: true, ...EXAMPLE_FOLDER, data: EXAMPLE_FOLDER }] },
);
export type FolderAnswer = Static<typeof FolderAnswer>;

export const FolderParams = Type.Object({ folder_no: Type.String({ maxLength: 64 }) });

export const FolderListQuery = Type.Object({
  page: PAGE(),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
  parent_folder_no: Type.Optional(Type.String({ maxLength: 64 })),
  search: Type.Optional(Type.String({ maxLength: 256 })),
  sort: Type.Optional(
    Type.Union(
      [
        Type.Literal('name_asc'),
        Type.Literal('name_desc'),
        Type.Literal('created_at_asc'),
        Type.Literal('created_at_desc'),
      ],
      { description: 'Default name_asc' },
    ),
  ),
});
export type FolderListQuery = Static<typeof FolderListQuery>;

export const FolderPage = Type.Object({
  folders: Type.Array(Folder),
  meta: Type.Object(
    {
      page: Type.Integer(),
      limit: Type.Integer(),
      total: Type.Integer(),
      hasMore: Type.Boolean(),
    },
    { examples: [{ page: 1, limit: 100, total: 1, hasMore: false }] },
  ),
});
export type FolderPage = Static<typeof FolderPage>;

export const FolderCreateBody = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 1024 })),
    folder_name: Type.Optional(Type.String({ minLength: 1, maxLength: 1024, description: 'The same as name' })),
    parent_folder_no: Type.Optional(Type.Union([Type.String(), Type.Null()])),
    path: Type.Optional(
      Type.String({ maxLength: 4096, description: "The parent's folder path (instead of parent_folder_no)" }),
    ),
  },
  { examples: [{ name: 'boots', path: 'products' }] },
);
export type FolderCreateBody = Static<typeof FolderCreateBody>;

export const FolderMoveBody = Type.Object(
  {
    parent_folder_no: Type.Union([Type.String({ maxLength: 64 }), Type.Null()], {
      description: 'The new parent; null for the root',
    }),
  },
  { examples: [{ parent_folder_no: 'f8Kq2Lm9' }] },
);
export type FolderMoveBody = Static<typeof FolderMoveBody>;

export const FolderDeleteQuery = Type.Object({ recursive: Type.Optional(Type.Boolean()) });
export type FolderDeleteQuery = Static<typeof FolderDeleteQuery>;
