// File records: the flat shape of docs/api/uploads.md#the-file-record, their delivery URLs, and the
// create-or-replace an upload commits.
import type { Kysely } from 'kysely';
import type { FileRecord } from '../contract/files.ts';
import type { DeliverySigner } from '../crypto/delivery-url.ts';
import { newShortId, newUuid } from '../crypto/ids.ts';
import { nowIso } from '../db/database.ts';
import { FileRepository, type PlacedFile } from '../db/files.ts';
import type { BlobRow, Database, FileRow, FolderRow } from '../db/schema.ts';
import { errors } from '../errors.ts';
import { isTokenSegment } from '../media/transform/tokens.ts';
import type { MediaDetails } from '../media/video/probe.ts';
import { demuxerFor } from '../media/video/containers.ts';
import { POSTER_TOKEN } from '../media/video/poster-tokens.ts';
import { signTransformUrl } from '../crypto/transform-url.ts';
import type { TransformPolicy } from './workspaces.ts';

/** docs/api/uploads.md#the-file-record: the contract's shape. */
export type { FileRecord };

export interface NewFile {
  workspaceId: string;
  folder: FolderRow | null;
  name: string;
  blob: BlobRow;
  duplicate: boolean;
  mime_type: string;
  extension: string | null;
  format: string | null;
  width: number | null;
  height: number | null;
  /** Video and audio: seconds and the probe's details (media/video/probe.ts); null otherwise. */
  duration: number | null;
  media: MediaDetails | null;
  tags: string[];
  metadata: Record<string, unknown>;
  custom_id: string | null;
  upload_source: FileRow['upload_source'];
  /** A file of that name is already in the folder: give it the new content, or use another name. */
  onNameTaken: 'replace' | ((name: string) => string);
}

/**
 * The delivery path of a file: the one encoder behind every record `url`, `thumbnail` and
 * signed URL. Each segment (folder names, then the file name) is percent-encoded exactly once,
 * which the delivery route undoes exactly once (`decodeDeliveryPath`), so "50% off.png" and a
 * name holding a literal "%20" or "%2F" come back as themselves. Delivery reads leading segments
 * as transformation tokens when, as requested, they start with a token name and an unescaped
 * underscore (media/transform/tokens.ts), so a first folder shaped like tokens ("w_100", "c_fill",
 * "my_photos") gets its underscore escaped ("w%5F100"): the URL names the folder, never a rendition.
 */
export function deliveryPath(folderPath: string, name: string): string {
  return folderPath ? folderPrefix(folderPath) + encodeURIComponent(name) : encodeURIComponent(name);
}

/** Encoded folder paths ("a/b" → "a/b/"), remembered: a page's files share a few folders. */
const folderPrefixes = new Map<string, string>();
const FOLDER_PREFIXES = 2000;

function folderPrefix(folderPath: string): string {
  let prefix = folderPrefixes.get(folderPath);
  if (prefix !== undefined) return prefix;
  const segments = folderPath.split('/').map(encodeURIComponent);
  // By shape, as the signed-transformations gate reads it: "my_photos" is no transformation, but
  // a workspace that requires signatures would still ask one of its URL, so it is escaped too.
  if (isTokenSegment(segments[0])) segments[0] = segments[0].replace('_', '%5F');
  prefix = `${segments.join('/')}/`;
  if (folderPrefixes.size >= FOLDER_PREFIXES) folderPrefixes.clear();
  folderPrefixes.set(folderPath, prefix);
  return prefix;
}

/**
 * A delivery path that `new URL` takes as it is: only what encodeURIComponent leaves (and the
 * tokens' commas and the slashes), and no "." or ".." segment, which it would resolve.
 */
const VERBATIM_PATH = /^[A-Za-z0-9\-_.!~*'()%,/]*$/;
const DOT_SEGMENT = /(?:^|\/)\.\.?(?:\/|$)/;

/**
 * The transformation of a record's `thumbnail`: an image fitted in 200 x 200; a video's poster
 * (its first frame, docs/api/delivery.md#video-posters) fitted in the same box, for videos the
 * probe found a picture in (no displayed size: no frame to show, or no ffprobe on the node that
 * took the upload). Anything else has none.
 */
function thumbnailTokens(row: Pick<FileRow, 'mime_type' | 'width'>): string | null {
  if (row.mime_type.startsWith('image/')) return 'w_200,h_200,c_fit';
  if (row.mime_type.startsWith('video/') && row.width !== null && demuxerFor(row.mime_type))
    return `${POSTER_TOKEN},w_200,h_200`;
  return null;
}

export interface FileRecordsDeps {
  publicUrl: string;
  /** Required: without it, private files would be handed out as plain URLs. */
  signer: DeliverySigner;
  /** Private files get signed URLs valid this long (seconds); 3600 when not given. */
  privateUrlTtl?: number;
  /** The workspace's signed-transformations setting and key (cached by WorkspaceService). */
  transformPolicy?: (workspaceId: string) => Promise<TransformPolicy>;
}

export class FileRecords {
  private readonly publicUrl: string;
  private readonly signer: DeliverySigner;
  private readonly privateUrlTtl: number;
  private readonly transformPolicy?: (workspaceId: string) => Promise<TransformPolicy>;
  /** basePathname's answers, by base. */
  private readonly basePaths = new Map<string, string | null>();

  constructor(deps: FileRecordsDeps) {
    this.publicUrl = deps.publicUrl;
    this.signer = deps.signer;
    this.privateUrlTtl = deps.privateUrlTtl ?? 3600;
    this.transformPolicy = deps.transformPolicy;
  }

  /**
   * The key `view` signs thumbnails with: the workspace's delivery key when it requires signed
   * transformations, else null. Asked once per answer (a page of records shares it).
   */
  async transformKey(workspaceId: string): Promise<string | null> {
    if (!this.transformPolicy) return null;
    const policy = await this.transformPolicy(workspaceId);
    return policy.required ? policy.key : null;
  }

  /** A delivery URL; for a private file, signed and expiring. */
  deliveryUrl(workspaceId: string, path: string, isPrivate: boolean, ttlSeconds = this.privateUrlTtl): string {
    const base = `${this.publicUrl}/${workspaceId}/`;
    const url = base + path;
    if (!isPrivate) return url;
    const expires = Math.floor(Date.now() / 1000) + ttlSeconds;
    // What signer.sign gives, without parsing the URL each time: when the base is a URL as
    // `new URL` writes it and the path one it keeps as it is, the URL's pathname is the base's
    // plus the path, and the signed URL the same URL with its query.
    const basePath = this.basePathname(base);
    if (basePath === null || !VERBATIM_PATH.test(path) || DOT_SEGMENT.test(path)) return this.signer.sign(url, expires);
    return `${url}?expires=${expires}&signature=${this.signer.signature(basePath + path, expires)}`;
  }

  /** The pathname of `base` (publicUrl/workspace/), or null when `new URL` would rewrite it. */
  private basePathname(base: string): string | null {
    let known = this.basePaths.get(base);
    if (known === undefined) {
      let u: URL | undefined;
      try {
        u = new URL(base);
      } catch {
        u = undefined;
      }
      known = u && u.href === base && u.search === '' && u.hash === '' ? u.pathname : null;
      if (this.basePaths.size >= 1000) this.basePaths.clear();
      this.basePaths.set(base, known);
    }
    return known;
  }

  /** The row of a new file `f` named `name`, as `createOrReplace` inserts it. */
  newRow(f: NewFile, name = f.name): FileRow {
    const now = nowIso();
    return { ...this.identity(f, name, now), ...this.content(f, now) };
  }

  private identity(f: NewFile, name: string, now: string) {
    return {
      id: newUuid(),
      file_no: newShortId(),
      workspace_id: f.workspaceId,
      folder_id: f.folder?.id ?? null,
      name,
      is_private: 0,
      created_at: now,
    };
  }

  /** What a file's content sets: inserted with a new file, or over the one that had the name. */
  private content(f: NewFile, now: string) {
    return {
      blob_id: f.blob.id,
      size: f.blob.size,
      mime_type: f.mime_type,
      extension: f.extension,
      format: f.format,
      width: f.width,
      height: f.height,
      duration: f.duration,
      media: f.media ? JSON.stringify(f.media) : null,
      tags: JSON.stringify(f.tags),
      metadata: JSON.stringify(f.metadata),
      custom_id: f.custom_id,
      is_duplicate: f.duplicate ? 1 : 0,
      upload_source: f.upload_source,
      updated_at: now,
    };
  }

  /**
   * Inserts the file, or, when the folder already holds that name, gives the existing record
   * the new content (it keeps its id and file_no). Returns the row and the blob the old
   * content used, for the caller to release.
   */
  async createOrReplace(
    trx: Kysely<Database>,
    f: NewFile,
  ): Promise<{ row: PlacedFile; replacedBlobId: string | null }> {
    const folderPath = f.folder?.path ?? '';
    const now = nowIso();
    const content = this.content(f, now);
    // Inserted unless the name is taken (ON CONFLICT DO NOTHING, on both dialects), so two
    // uploads of one name at once never fail on the unique index: the second one sees the
    // first and replaces it, or takes another name. The insert comes first, so a free name
    // (the usual case) costs one statement; only a taken one is looked up.
    const files = new FileRepository(trx);
    let name = f.name;
    for (let attempt = 0; attempt < 8; attempt++) {
      const row: FileRow = { ...this.identity(f, name, now), ...content };
      if (await files.insertIfNameFree(row)) return { row: { ...row, folder_path: folderPath }, replacedBlobId: null };
      const existing = await files.byName(f.workspaceId, f.folder?.id ?? null, name);
      // Gone again since (deleted or renamed meanwhile), or the new row's id or file_no was the
      // one taken: the next round inserts afresh.
      if (!existing) continue;
      if (f.onNameTaken === 'replace') {
        await files.update(existing.id, content);
        return {
          row: { ...existing, ...content, folder_path: folderPath },
          replacedBlobId: existing.blob_id === f.blob.id ? null : existing.blob_id,
        };
      }
      name = f.onNameTaken(f.name);
    }
    throw errors.fileNameTaken();
  }

  /**
   * `transformKey` (from `transformKey()`): the thumbnail of a public file is signed with it,
   * without expiry, so it stays one cacheable URL. A private file's is signed by the service,
   * which also opens its transformation.
   */
  view(row: PlacedFile, folderNo: string | null, sha256: string, transformKey: string | null = null): FileRecord {
    const path = deliveryPath(row.folder_path, row.name);
    const tokens = thumbnailTokens(row);
    let thumbnail = tokens ? this.deliveryUrl(row.workspace_id, `${tokens}/${path}`, Boolean(row.is_private)) : null;
    if (thumbnail && transformKey && !row.is_private) thumbnail = signTransformUrl(transformKey, thumbnail);
    const metadata = JSON.parse(row.metadata) as Record<string, unknown>;
    return {
      id: row.id,
      file_no: row.file_no,
      workspace_id: row.workspace_id,
      name: row.name,
      path: `/${row.folder_path ? `${row.folder_path}/` : ''}${row.name}`,
      url: this.deliveryUrl(row.workspace_id, path, Boolean(row.is_private)),
      width: row.width,
      height: row.height,
      duration: row.duration === null ? null : Number(row.duration),
      media: row.media ? (JSON.parse(row.media) as MediaDetails) : null,
      size: Number(row.size),
      mime_type: row.mime_type,
      tags: JSON.parse(row.tags) as string[],
      metadata,
      custom_id: row.custom_id,
      folder_no: folderNo,
      is_duplicate: Boolean(row.is_duplicate),
      created_at: row.created_at,
      upload_source: row.upload_source,
      thumbnail,
      extension: row.extension,
      format: row.format,
      hash: sha256,
      is_private: Boolean(row.is_private),
      file_size: Number(row.size),
      workspace_no: row.workspace_id,
      source: row.upload_source,
      folder_name: row.folder_path ? row.folder_path.slice(row.folder_path.lastIndexOf('/') + 1) : null,
      updated_at: row.updated_at,
      thumbanil: thumbnail,
      meta_data: metadata,
      folder_id: row.folder_id,
    };
  }
}
