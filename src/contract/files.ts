// Files: the record every upload and listing answers with (docs/api/uploads.md#the-file-record), its details, and
// the requests of /api/v1/files.
import { type Static, type TSchema, Type } from 'typebox';
import { AnyObject, nullable, PAGE, TagsInput } from './common.ts';
import { EXAMPLE_FILE, EXAMPLE_FILE_DETAILS, EXAMPLE_SIGNED_URL } from './examples.ts';

const nullInt = (description?: string) => Type.Union([Type.Integer(), Type.Null()], description ? { description } : {});
const nullNum = (description?: string) => Type.Union([Type.Number(), Type.Null()], description ? { description } : {});
const nullStr = (description?: string) => Type.Union([Type.String(), Type.Null()], description ? { description } : {});

/** What ffprobe found in a video or audio file (src/media/video/probe.ts). */
export const MediaDetails = Type.Object(
  {
    container: Type.String({ description: "ffprobe's demuxer name, e.g. mov,mp4,m4a,3gp,3g2,mj2 or matroska,webm" }),
    duration: nullNum('Seconds'),
    bit_rate: nullInt('Overall bits per second'),
    video_codec: nullStr('e.g. h264, hevc, vp9, av1'),
    video_profile: nullStr(),
    pixel_format: nullStr(),
    frame_rate: nullNum('Average frames per second'),
    coded_width: nullInt('The stored frame width, before rotation'),
    coded_height: nullInt('The stored frame height, before rotation'),
    rotation: Type.Integer({
      description: 'Degrees counterclockwise the frames are turned for display: 0, 90, 180 or 270',
    }),
    video_bit_rate: nullInt(),
    audio_codec: nullStr('e.g. aac, opus, mp3'),
    audio_channels: nullInt(),
    audio_channel_layout: nullStr(),
    audio_sample_rate: nullInt('Hz'),
    audio_bit_rate: nullInt(),
    streams: Type.Integer({ description: 'Streams in the container, of every kind' }),
  },
  // Inlined where used (no $id): the record's properties are spread into several schemas.
  { description: 'What ffprobe found in a video or audio file' },
);
export type MediaDetails = Static<typeof MediaDetails>;

/** docs/api/uploads.md#the-file-record: every field present, null where unknown. */
export const FileRecord = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    file_no: Type.String(),
    workspace_id: Type.String(),
    name: Type.String(),
    path: Type.String(),
    url: Type.String(),
    width: Type.Union([Type.Integer(), Type.Null()], { description: 'Pixels as displayed (video: rotation applied)' }),
    height: Type.Union([Type.Integer(), Type.Null()], { description: 'Pixels as displayed (video: rotation applied)' }),
    duration: nullNum('Video and audio: seconds (null when not probed)'),
    media: Type.Union([MediaDetails, Type.Null()], {
      description: 'Video and audio: codecs, rates and rotation as probed at upload (null when not probed)',
    }),
    size: Type.Integer(),
    mime_type: Type.String(),
    tags: Type.Array(Type.String()),
    metadata: AnyObject(),
    custom_id: nullable(Type.String()),
    folder_no: nullable(Type.String()),
    is_duplicate: Type.Boolean(),
    created_at: Type.String({ format: 'date-time' }),
    upload_source: Type.String(),
    thumbnail: nullable(Type.String()),
    extension: nullable(Type.String()),
    format: nullable(Type.String()),
    hash: Type.String(),
    is_private: Type.Boolean(),
    file_size: Type.Integer({ description: 'The same as size (the hosted SDKs read this name)' }),
    workspace_no: Type.String({ description: 'The same as workspace_id' }),
    source: Type.String({ description: 'The same as upload_source' }),
    folder_name: nullable(Type.String()),
    updated_at: Type.String({ format: 'date-time' }),
    thumbanil: nullable(Type.String({ description: 'The same as thumbnail (the hosted docs spell it so)' })),
    meta_data: AnyObject('The same as metadata'),
    folder_id: nullable(Type.String({ description: "The folder's id; null at the root" })),
  },
  { $id: 'FileRecord', examples: [EXAMPLE_FILE] },
);
export type FileRecord = Static<typeof FileRecord>;

/** GET /api/v1/files/{file_no}: the record plus the details the hosted docs list. */
export const FileDetails = Type.Object(
  {
    ...FileRecord.properties,
    dimensions: Type.Object({
      width: Type.Union([Type.Integer(), Type.Null()]),
      height: Type.Union([Type.Integer(), Type.Null()]),
    }),
    workspace: Type.Object({ name: Type.String(), workspace_no: Type.String() }),
    folder: Type.Union([
      Type.Object({ folder_no: Type.String(), name: Type.String(), path: Type.String() }),
      Type.Null(),
    ]),
    uploaded_by: Type.Null({ description: 'Stowage does not record who uploaded: always null' }),
    uploaded_at: Type.String({ format: 'date-time' }),
    asset_key: Type.String({ description: 'The file_no' }),
    asset_url: Type.String({ description: 'The same as url' }),
  },
  { $id: 'FileDetails', examples: [EXAMPLE_FILE_DETAILS] },
);
export type FileDetails = Static<typeof FileDetails>;

/** The record's properties, each with its value in the example record. */
const exampleProperties = <P extends Record<string, TSchema>>(properties: P, example: Record<string, unknown>): P =>
  Object.fromEntries(
    Object.entries(properties).map(([key, schema]) => [key, { ...schema, examples: [example[key]] }]),
  ) as unknown as P;

/**
 * A file record as upload answers give it: both documented shapes at once (docs/api/uploads.md).
 * Its example is given field by field: one example object holding the record twice trips JSON
 * Schema validators that read an `id` member as a schema id (draft 4, as OpenAPI 3.0 linters use).
 */
export const UploadAnswer = Type.Object(
  {
    success: Type.Literal(true),
    ...exampleProperties(FileRecord.properties, EXAMPLE_FILE),
    data: Type.Object(FileRecord.properties, { examples: [EXAMPLE_FILE] }),
  },
  {
    $id: 'UploadAnswer',
    description:
      'The flat file record, plus success and data (the record again), so readers of either documented shape work.',
  },
);
export type UploadAnswer = Static<typeof UploadAnswer>;
/** Upload answers, and file rename and update: the record flat (older hosted SDKs read it there) plus success and data. */
export const UploadAnswerRef = Type.Ref('UploadAnswer');

export const FileParams = Type.Object({ file_no: Type.String({ maxLength: 64 }) });

export const FileSort = Type.Union([
  Type.Literal('created_at_desc'),
  Type.Literal('created_at_asc'),
  Type.Literal('name_asc'),
  Type.Literal('name_desc'),
  Type.Literal('size_asc'),
  Type.Literal('size_desc'),
]);
export type FileSort = Static<typeof FileSort>;

export const FileListQuery = Type.Object({
  page: PAGE(),
  limit: Type.Integer({ minimum: 1, maximum: 100, default: 20, description: 'Default 20, as the hosted API' }),
  folder_no: Type.Optional(Type.String({ maxLength: 64 })),
  folderNo: Type.Optional(Type.String({ maxLength: 64, description: 'The same as folder_no' })),
  search: Type.Optional(Type.String({ maxLength: 256 })),
  name: Type.Optional(Type.String({ maxLength: 256, description: 'The same as search: part of the name, any case' })),
  path: Type.Optional(
    Type.String({
      maxLength: 4096,
      description: 'A folder path (a/b; / for the root): the files directly in it',
    }),
  ),
  tags: Type.Optional(Type.String({ maxLength: 4096 })),
  type: Type.Optional(
    Type.Union(
      [
        Type.Literal('image'),
        Type.Literal('video'),
        Type.Literal('audio'),
        Type.Literal('document'),
        Type.Literal('other'),
      ],
      { description: 'By MIME type: image/*, video/*, audio/*, document (text, PDF, office, e-book), or other' },
    ),
  ),
  created_after: Type.Optional(
    Type.String({ maxLength: 40, description: 'Created at or after: a date (2026-03-14, UTC) or a date-time' }),
  ),
  created_before: Type.Optional(
    Type.String({ maxLength: 40, description: 'Created before: a date (2026-03-14, UTC) or a date-time' }),
  ),
  custom_id: Type.Optional(Type.String({ maxLength: 255, description: 'The custom id, exactly' })),
  sort: Type.Optional(FileSort),
  sort_field: Type.Optional(
    Type.Union([
      Type.Literal('created_at'),
      Type.Literal('updated_at'),
      Type.Literal('name'),
      Type.Literal('file_size'),
    ]),
  ),
  sort_order: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')])),
  snapshot: Type.Optional(Type.String({ maxLength: 40 })),
  cursor: Type.Optional(
    Type.String({
      maxLength: 2048,
      description:
        'meta.nextCursor of the previous page: the next page by key, as fast at any depth (page is then ignored)',
    }),
  ),
  aliases: Type.Optional(
    Type.Literal('none', {
      description:
        "none: the page in Stowage's own names only, files and meta, without the copies the hosted SDKs read (items, data, next_cursor, page, total_count, …): a quarter of the bytes of a 100-file page. Stowage's SDK sends it",
    }),
  ),
});
export type FileListQuery = Static<typeof FileListQuery>;

const Record = Type.Ref('FileRecord');

/** A page of files, in the names of every hosted SDK generation at once. */
export const FilePage = Type.Object(
  {
    files: Type.Array(Record),
    meta: Type.Object({
      page: Type.Integer(),
      limit: Type.Integer(),
      total: Type.Integer(),
      totalEstimated: Type.Boolean({
        description:
          'True when total is an estimate: a filtered list matched more than 1,000 files (10,000 for a single tag)',
      }),
      hasNext: Type.Boolean(),
      hasPrev: Type.Boolean(),
      nextCursor: Type.Union([Type.String(), Type.Null()], {
        description: 'Send as cursor for the next page; null on the last page',
      }),
    }),
    next_cursor: Type.Union([Type.String(), Type.Null()], { description: 'The same as meta.nextCursor' }),
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
  },
  {
    examples: [
      {
        files: [EXAMPLE_FILE],
        meta: { page: 1, limit: 20, total: 1, totalEstimated: false, hasNext: false, hasPrev: false, nextCursor: null },
        next_cursor: null,
        items: [EXAMPLE_FILE],
        page: 1,
        limit: 20,
        total_count: 1,
        total_pages: 1,
        is_page_next: false,
        data: [EXAMPLE_FILE],
        current_page: 1,
        total_results: 1,
        has_next: false,
        has_next_page: false,
      },
    ],
  },
);
export type FilePage = Static<typeof FilePage>;

export const FileDetailsAnswer = Type.Object({ success: Type.Literal(true), data: Type.Ref('FileDetails') });

/** Rename (files and folders): the new name. */
export const NameBody = Type.Object(
  { name: Type.String({ minLength: 1, maxLength: 1024 }) },
  { examples: [{ name: 'summer-2026' }] },
);
export type NameBody = Static<typeof NameBody>;

export const FileUpdateBody = Type.Object(
  {
    add_tags: Type.Optional(TagsInput()),
    remove_tags: Type.Optional(TagsInput()),
    metadata: Type.Optional(AnyObject()),
    custom_id: Type.Optional(Type.Union([Type.String(), Type.Null()])),
    folder_no: Type.Optional(Type.Union([Type.String(), Type.Null()])),
    is_private: Type.Optional(Type.Boolean()),
  },
  {
    examples: [
      {
        add_tags: ['clearance'],
        remove_tags: ['summer'],
        metadata: { sku: 'SH-1042', colour: 'red' },
        is_private: false,
      },
    ],
  },
);
export type FileUpdateBody = Static<typeof FileUpdateBody>;

export const SignedUrlBody = Type.Object(
  {
    expires_in: Type.Optional(Type.Integer({ minimum: 1, maximum: 7 * 24 * 3600, default: 3600 })),
    transform: Type.Optional(Type.String({ maxLength: 512 })),
  },
  { examples: [{ expires_in: 3600, transform: 'w_800' }] },
);
export type SignedUrlBody = Static<typeof SignedUrlBody>;

export const SignedUrl = Type.Object(
  { url: Type.String(), expires_at: Type.Integer() },
  { examples: [EXAMPLE_SIGNED_URL] },
);
export type SignedUrl = Static<typeof SignedUrl>;
export const SignedUrlAnswer = Type.Object({ success: Type.Literal(true), data: SignedUrl });

/** File and folder deletes. */
export const Deleted = Type.Object(
  { success: Type.Literal(true), message: Type.String() },
  { examples: [{ success: true, message: 'file deleted successfully' }] },
);
