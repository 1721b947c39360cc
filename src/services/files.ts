// The Files API (list, get, rename, update, delete) over file records (file-records.ts).
import type { FileDetails, FileListQuery, FileUpdateBody } from '../contract/files.ts';
import { type Db, holdWorkspace, inTransaction, nowIso } from '../db/database.ts';
import type { Database } from '../db/schema.ts';
import type { Kysely } from 'kysely';
import {
  type FileFilter,
  type FileSortColumn,
  FileRepository,
  type FileWithRefs,
  hasRowFilters,
  type PageKey,
} from '../db/files.ts';
import { FolderRepository } from '../db/folders.ts';
import type { FileRow } from '../db/schema.ts';
import { WorkspaceRepository } from '../db/workspaces.ts';
import { errors } from '../errors.ts';
import type { DomainEvents } from '../events.ts';
import { checkAnyGrammar } from '../media/grammars.ts';
import type { PresetService } from './presets.ts';
import type { BlobStore } from '../uploads/blob-store.ts';
import { deliveryPath, type FileRecord, type FileRecords } from './file-records.ts';
import { PageBoundaries } from './page-boundaries.ts';
import { checkName, parseCustomId, parseFolderPath, parseMetadata, parseTags } from '../uploads/names.ts';
import { ownTurn } from '../turns.ts';

// Where the upload code and the container have always found them.
export { deliveryPath, type FileRecord, FileRecords, type FileRecordsDeps, type NewFile } from './file-records.ts';

export type { FileDetails, FileListQuery, FileSort } from '../contract/files.ts';

/** `page` reaches this many files deep at most (each deeper file costs an index step); past it, `cursor` pages. */
export const MAX_PAGE_OFFSET = 1_000_000;

/**
 * Filtered lists count their matches up to this many (a single tag is not counted: its kept
 * count is exact); past it their total is an estimate: PostgreSQL's planner's, or on SQLite the
 * count so far, a lower bound (Elasticsearch's track_total_hits does the same at 10,000).
 */
export const COUNT_CAP = 1_000;
/**
 * A name search counts no further than this: each match counted is a name read, and a common
 * fragment ("forest" in 1.2% of 10M names) took 16 to 38 ms to count to 1,000 on PostgreSQL
 * against 5 ms for the page itself. Past it, the planner's estimate (PostgreSQL) or the count so far.
 */
export const SEARCH_COUNT_CAP = 200;

export interface FileList {
  files: FileRecord[];
  /** The instant the page is as of (the X-Snapshot header). */
  snapshot: string;
  meta: {
    page: number;
    limit: number;
    total: number;
    totalEstimated: boolean;
    hasNext: boolean;
    hasPrev: boolean;
    nextCursor: string | null;
  };
}

const SORT_COLUMNS = {
  created_at: 'created_at',
  updated_at: 'updated_at',
  name: 'name',
  file_size: 'size',
  size: 'size',
} as const satisfies Record<string, FileSortColumn>;

export interface FileServiceDeps {
  db: Db;
  blobs: BlobStore;
  records: FileRecords;
  /** `files.changed` after every change (delivery's caches forget the workspace's lookups). */
  events?: DomainEvents;
  /** `t_{name}` in a signed URL's transform is checked against the workspace's presets. */
  presets?: Pick<PresetService, 'expand'>;
}

/** Files API (docs/api/files-folders.md): list, get, rename, update, delete. */
export class FileService {
  private readonly db: Db;
  private readonly blobs: BlobStore;
  private readonly records: FileRecords;
  private readonly files: FileRepository;
  private readonly folders: FolderRepository;
  private readonly workspaces: WorkspaceRepository;
  private readonly boundaries = new PageBoundaries();
  private readonly events?: DomainEvents;
  private readonly presets?: Pick<PresetService, 'expand'>;

  constructor(deps: FileServiceDeps) {
    this.db = deps.db;
    this.events = deps.events;
    this.presets = deps.presets;
    this.blobs = deps.blobs;
    this.records = deps.records;
    this.files = new FileRepository(deps.db.kysely);
    this.folders = new FolderRepository(deps.db.kysely);
    this.workspaces = new WorkspaceRepository(deps.db.kysely);
  }

  private toRecord(row: FileWithRefs, transformKey: string | null): FileRecord {
    // The row as it is: `view` reads the fields it names. (Copying it without sha256 and
    // folder_no, as `{ sha256, folder_no, ...file }`, cost ~10 µs a row: 1 ms a 100-file page.)
    return this.records.view(row, row.folder_no, row.sha256, transformKey);
  }

  async list(workspaceId: string, q: FileListQuery): Promise<FileList> {
    const filter: FileFilter = {};
    let folder: { id: string; file_count: number } | undefined;
    const folderNo = q.folder_no ?? q.folderNo;
    if (folderNo !== undefined) {
      folder = await this.folders.byNo(workspaceId, folderNo);
      if (!folder) throw errors.folderNotFound();
      filter.folderId = folder.id;
    }
    if (q.path !== undefined) {
      // A folder prefix (the hosted SDKs' "products/sku123/"): the files in that folder and below; "/" is everything.
      const prefix = parseFolderPath(q.path).join('/');
      if (prefix) filter.under = prefix;
    }
    filter.nameContains = [q.search, q.name].filter((t): t is string => Boolean(t)).map((t) => t.normalize('NFC'));
    filter.tags = q.tags ? parseTags(q.tags) : [];
    // Without a snapshot the page is as of now: files committed while it is read may or may not be in it.
    const snapshot = q.snapshot === undefined ? undefined : parseSnapshot(q.snapshot);
    filter.createdAtMost = snapshot;
    if (q.type) filter.kind = q.type;
    if (q.custom_id !== undefined) filter.customId = q.custom_id;
    if (q.created_after !== undefined) filter.createdFrom = parseInstant('created_after', q.created_after);
    if (q.created_before !== undefined) filter.createdBefore = parseInstant('created_before', q.created_before);
    const [field, direction] = sortOf(q);
    const sort = SORT_COLUMNS[field];
    const cursor = q.cursor === undefined ? undefined : decodeCursor(q.cursor, sort, direction);
    const page = cursor?.page ?? q.page;
    const offset = (page - 1) * q.limit;
    if (!cursor && offset >= MAX_PAGE_OFFSET)
      throw errors.validation(
        `page ${page} is past the ${MAX_PAGE_OFFSET.toLocaleString('en')}th file; page further with cursor (meta.nextCursor)`,
      );
    const asOf = nowIso();
    const list = JSON.stringify([workspaceId, filter, sort, direction]);
    const from = cursor ? { offset, key: cursor.key } : this.boundaries.nearest(list, offset);
    // A name search's first page on PostgreSQL counts its matches in the page's own walk
    // (FilePage.countTo); a search is always counted, up to SEARCH_COUNT_CAP (see `total`).
    const countTo =
      this.db.dialect === 'postgres' && filter.nameContains.length > 0 && !from && offset === 0
        ? SEARCH_COUNT_CAP
        : undefined;
    const paged = this.files.page(workspaceId, filter, {
      sort,
      direction,
      limit: q.limit,
      after: from?.key,
      offset: offset - (from?.offset ?? 0),
      countTo,
    });
    const [{ rows, start, next }, total] = await Promise.all([
      paged,
      countTo === undefined
        ? this.total(workspaceId, filter, snapshot, folder)
        : paged.then((found) => this.countedTotal(workspaceId, filter, found.matched)),
    ]);
    const transformKey = await this.records.transformKey(workspaceId);
    if (start) this.boundaries.remember(list, offset, start);
    if (next) this.boundaries.remember(list, offset + q.limit, next);
    // Building, encoding and sending the page takes milliseconds: one page per turn of the loop.
    await ownTurn();
    return {
      files: rows.map((r) => this.toRecord(r, transformKey)),
      snapshot: snapshot ?? asOf,
      meta: {
        page,
        limit: q.limit,
        total: total.count,
        totalEstimated: total.estimated,
        hasNext: next !== null,
        hasPrev: page > 1,
        nextCursor: next ? encodeCursor({ sort, direction, page: page + 1, key: next }) : null,
      },
    };
  }

  /**
   * How many files match, without counting them where it can be helped: the maintained counters
   * of the workspace, a folder or a folder tree answer exactly; other filters are counted up to
   * COUNT_CAP, and past that the total is an estimate (PostgreSQL's planner's, or on SQLite the
   * cap itself as a lower bound), flagged in meta.totalEstimated.
   */
  private async total(
    workspaceId: string,
    f: FileFilter,
    snapshot: string | undefined,
    folder: { id: string; file_count: number } | undefined,
  ): Promise<{ count: number; estimated: boolean }> {
    const plain = !f.nameContains?.length && !f.tags?.length && !hasRowFilters({ ...f, createdAtMost: undefined });
    if (plain && !f.under) {
      const held = folder ? folder.file_count : ((await this.workspaces.byId(workspaceId))?.file_count ?? 0);
      const newer = snapshot ? await this.files.countCreatedAfter(workspaceId, folder?.id, snapshot) : 0;
      return { count: Number(held) - newer, estimated: false };
    }
    if (plain && f.under && !snapshot && !f.folderId) {
      const top = await this.folders.byPath(workspaceId, f.under);
      return { count: top ? (await this.folders.contentTotals(top.id)).items : 0, estimated: false };
    }
    if (!f.folderId && !f.under && !f.nameContains?.length && !hasRowFilters({ ...f, createdAtMost: undefined })) {
      // One tag, with or without a snapshot: its kept count (tag_counts, migration 0016), so a
      // listing's later pages, which carry its snapshot, give the same exact total as its first.
      if (f.tags?.length === 1)
        return { count: await this.files.tagTotal(workspaceId, f.tags[0], f.createdAtMost), estimated: false };
    }
    const cap = f.nameContains?.length ? SEARCH_COUNT_CAP : COUNT_CAP;
    return this.countedTotal(workspaceId, f, await this.files.countUpTo(workspaceId, f, cap));
  }

  /** A count up to a cap: exact under it, else the planner's estimate (never below what was counted). */
  private async countedTotal(
    workspaceId: string,
    f: FileFilter,
    counted: { count: number; exact: boolean } | undefined,
  ): Promise<{ count: number; estimated: boolean }> {
    if (!counted) counted = await this.files.countUpTo(workspaceId, f, SEARCH_COUNT_CAP);
    if (counted.exact) return { count: counted.count, estimated: false };
    const guess = await this.files.estimate(workspaceId, f);
    return { count: Math.max(counted.count + 1, guess ?? 0), estimated: true };
  }

  private async row(workspaceId: string, fileNo: string, files = this.files): Promise<FileWithRefs> {
    if (typeof fileNo !== 'string' || !/^[0-9A-Za-z]{10,16}$/.test(fileNo)) throw errors.fileNotFound();
    const row = await files.byFileNo(workspaceId, fileNo);
    if (!row) throw errors.fileNotFound();
    return row;
  }

  async get(workspaceId: string, fileNo: string): Promise<FileRecord> {
    const row = await this.row(workspaceId, fileNo);
    return this.toRecord(row, await this.records.transformKey(workspaceId));
  }

  /** The record with the details the hosted docs give a single file. */
  async details(workspaceId: string, fileNo: string): Promise<FileDetails> {
    const record = await this.get(workspaceId, fileNo);
    const ws = await this.workspaces.byId(workspaceId);
    if (!ws) throw new Error(`workspace ${workspaceId} vanished`);
    const folderPath = record.path.slice(1, record.path.lastIndexOf('/'));
    return {
      ...record,
      dimensions: { width: record.width, height: record.height },
      workspace: { name: ws.name, workspace_no: workspaceId },
      folder:
        record.folder_no && record.folder_name
          ? { folder_no: record.folder_no, name: record.folder_name, path: folderPath }
          : null,
      uploaded_by: null,
      uploaded_at: record.created_at,
      asset_key: record.file_no,
      asset_url: record.url,
    };
  }

  /**
   * Renames a file. The name is given without its extension, which is kept (`boot` on
   * `shoe.png` gives `boot.png`); a name already ending in that extension is taken as it is.
   */
  async rename(workspaceId: string, fileNo: string, rawName: unknown): Promise<FileRecord> {
    if (typeof rawName !== 'string') throw errors.validation('name must be a string');
    const wanted = rawName.normalize('NFC');
    await this.write(workspaceId, fileNo, async (row) => {
      const dot = row.name.lastIndexOf('.');
      const ext = dot > 0 ? row.name.slice(dot) : '';
      const name = checkName(
        ext && !wanted.toLowerCase().endsWith(ext.toLowerCase()) ? `${wanted}${ext}` : wanted,
        'name',
      );
      return name === row.name ? undefined : { name };
    });
    return this.get(workspaceId, fileNo);
  }

  async update(workspaceId: string, fileNo: string, patch: FileUpdateBody): Promise<FileRecord> {
    // Everything that does not depend on the row is checked before its transaction.
    const tagEdit = patch.add_tags !== undefined || patch.remove_tags !== undefined;
    const remove = new Set(parseTags(patch.remove_tags));
    const add = parseTags(patch.add_tags);
    const metadata = patch.metadata === undefined ? undefined : parseMetadata(patch.metadata);
    const fixed: Partial<FileRow> = {};
    if (patch.custom_id !== undefined) fixed.custom_id = parseCustomId(patch.custom_id);
    if (patch.is_private !== undefined) {
      if (typeof patch.is_private !== 'boolean') throw errors.validation('is_private must be a boolean');
      fixed.is_private = patch.is_private ? 1 : 0;
    }
    const folderNo = patch.folder_no === null || patch.folder_no === '' ? null : patch.folder_no;
    if (folderNo !== undefined && folderNo !== null && typeof folderNo !== 'string')
      throw errors.validation('folder_no must be a string, or null for the root');
    // Tags and metadata merge into what the row holds when its transaction reads it, so two
    // PATCHes at once each keep the other's change (no lost update).
    await this.write(workspaceId, fileNo, async (row, trx) => {
      const changes: Partial<FileRow> = { ...fixed };
      if (tagEdit) {
        const tags = [...new Set([...(JSON.parse(row.tags) as string[]), ...add])].filter((t) => !remove.has(t));
        if (tags.length > 50) throw errors.validation('at most 50 tags');
        changes.tags = JSON.stringify(tags);
      }
      if (metadata !== undefined) {
        const merged: Record<string, unknown> = {
          ...(JSON.parse(row.metadata) as Record<string, unknown>),
          ...metadata,
        };
        for (const [k, v] of Object.entries(merged)) if (v === null) delete merged[k];
        changes.metadata = JSON.stringify(parseMetadata(merged));
      }
      if (folderNo === null) changes.folder_id = null;
      else if (folderNo !== undefined) {
        const folder = await new FolderRepository(trx).byNo(workspaceId, folderNo);
        if (!folder) throw errors.folderNotFound();
        changes.folder_id = folder.id;
      }
      return changes;
    });
    return this.get(workspaceId, fileNo);
  }

  /**
   * Reads the file's row and writes what `decide` makes of it (nothing when it gives undefined)
   * in one transaction, behind the workspace's row on PostgreSQL (holdWorkspace), as every write
   * of files. `decide` runs inside that transaction: its queries go through `trx` only (on
   * SQLite the one connection is the transaction's until it ends).
   */
  private async write(
    workspaceId: string,
    fileNo: string,
    decide: (row: FileWithRefs, trx: Kysely<Database>) => Promise<Partial<FileRow> | undefined>,
  ): Promise<void> {
    const written = await inTransaction(this.db.kysely, async (trx) => {
      await holdWorkspace(trx, workspaceId);
      const files = new FileRepository(trx);
      const row = await this.row(workspaceId, fileNo, files);
      const changes = await decide(row, trx);
      if (!changes) return false;
      if (!(await files.update(row.id, { ...changes, updated_at: nowIso() }))) throw errors.fileNameTaken();
      return true;
    });
    if (written) this.events?.emit('files.changed', { workspaceId });
  }

  /** A signed URL for the file (or a rendition of it), valid for `expiresIn` seconds. */
  async signedUrl(
    workspaceId: string,
    fileNo: string,
    expiresIn: number,
    transform?: string,
  ): Promise<{ url: string; expires_at: number }> {
    const row = await this.row(workspaceId, fileNo);
    // Written the one way delivery reads tokens: no spaces around the commas.
    const tokens = transform
      ? transform
          .split(',')
          .map((t) => t.trim())
          .join(',')
      : '';
    // Presets stay named in the URL (delivery expands them when it is used), but must exist now.
    if (tokens) checkAnyGrammar(this.presets ? await this.presets.expand(workspaceId, tokens) : tokens);
    const path = (tokens ? `${tokens}/` : '') + deliveryPath(row.folder_path, row.name);
    return {
      url: this.records.deliveryUrl(workspaceId, path, true, expiresIn),
      expires_at: Math.floor(Date.now() / 1000) + expiresIn,
    };
  }

  async delete(workspaceId: string, fileNo: string): Promise<void> {
    const released = await inTransaction(this.db.kysely, async (trx) => {
      await holdWorkspace(trx, workspaceId);
      const files = new FileRepository(trx);
      const row = await this.row(workspaceId, fileNo, files);
      await files.delete(row.id);
      return this.blobs.releaseIfUnused(trx, row.blob_id);
    });
    this.events?.emit('files.changed', { workspaceId });
    if (released) await this.blobs.forget(workspaceId, released);
  }
}

/** A date (2026-03-14, the day's start in UTC) or a date-time, as the ISO instant created_at is compared with. */
function parseInstant(name: string, text: string): string {
  const at = Date.parse(text);
  if (!/^\d{4}-\d{2}-\d{2}/.test(text) || !Number.isFinite(at))
    throw errors.validation(`${name} must be an ISO 8601 date (2026-03-14) or date-time`);
  return new Date(at).toISOString();
}

function parseSnapshot(text: string): string {
  const at = Date.parse(text);
  if (!Number.isFinite(at))
    throw errors.validation('snapshot must be an ISO 8601 date-time (from the X-Snapshot header of a first page)');
  return new Date(at).toISOString();
}

/** What a cursor carries: the order it is for, the page it starts, and the key of the row before it. */
interface Cursor {
  sort: FileSortColumn;
  direction: 'asc' | 'desc';
  page: number;
  key: PageKey;
}

function encodeCursor(c: Cursor): string {
  return Buffer.from(JSON.stringify([c.sort, c.direction, c.page, c.key.v, c.key.id])).toString('base64url');
}

function decodeCursor(text: string, sort: FileSortColumn, direction: 'asc' | 'desc'): Cursor {
  let parts: unknown;
  try {
    parts = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    parts = undefined;
  }
  const [s, d, page, v, id] = Array.isArray(parts) && parts.length === 5 ? parts : [];
  if (typeof s !== 'string' || !Number.isSafeInteger(page) || page < 2 || typeof id !== 'string' || id.length > 64)
    throw errors.validation('cursor is not one this server gave (pass meta.nextCursor back unchanged)');
  if (s !== sort || d !== direction)
    throw errors.validation('cursor belongs to another sort order: send the sort it was given with');
  if (sort === 'size' ? !Number.isSafeInteger(v) : typeof v !== 'string' || v.length > 1024)
    throw errors.validation('cursor is not one this server gave (pass meta.nextCursor back unchanged)');
  return { sort, direction, page, key: { v, id } };
}

function sortOf(q: FileListQuery): [keyof typeof SORT_COLUMNS, 'asc' | 'desc'] {
  if (q.sort_field) return [q.sort_field, q.sort_order ?? 'desc'];
  const sort = q.sort ?? 'created_at_desc';
  const i = sort.lastIndexOf('_');
  return [sort.slice(0, i) as keyof typeof SORT_COLUMNS, sort.slice(i + 1) as 'asc' | 'desc'];
}
