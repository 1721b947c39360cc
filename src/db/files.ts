// File records in the database: lookups by number, by name in a folder and by delivery path,
// filtered and sorted pages, and the writes an upload or the Files API makes.
import { type Expression, type Insertable, type Kysely, type Updateable, sql } from 'kysely';
import { isUniqueViolation } from './database.ts';
import { CREATED_LAG_UNBOUNDED as CREATED_LAG_UNBOUNDED_MS, flavourOf, NAME_FTS } from './derived.ts';
import { likeContains, likeEscaped } from './like.ts';
import type { Database, FileRow, FileTable } from './schema.ts';

/** A file row with its folder's path ("" at the root), which lives in `folders` only. */
export type PlacedFile = FileRow & { folder_path: string };

/** A placed file with its blob's SHA-256 and its folder's number (null at the root). */
export type FileWithRefs = PlacedFile & { sha256: string; folder_no: string | null };

export interface FileFilter {
  /** Only the files directly in this folder. */
  folderId?: string;
  /** Only the files in the folder at this path or below it. */
  under?: string;
  /** Case-insensitive substrings the name must all contain (give them NFC). */
  nameContains?: string[];
  /** Only files created at or before this ISO instant. */
  createdAtMost?: string;
  /** Tags the file must all carry. */
  tags?: string[];
  /** Only files of this kind, by MIME type (MEDIA_KINDS). */
  kind?: MediaKind;
  /** Only files created at or after this ISO instant. */
  createdFrom?: string;
  /** Only files created before this ISO instant. */
  createdBefore?: string;
  /** Only the file(s) with this custom id. */
  customId?: string;
}

/** What the type filter sorts files into: the first three by MIME type's top level. */
export type MediaKind = 'image' | 'video' | 'audio' | 'document' | 'other';

/** MIME types counted as documents: text, PDF, office and e-book formats (patterns for LIKE). */
const DOCUMENT_TYPES = [
  'text/%',
  'application/pdf',
  'application/rtf',
  'application/msword',
  'application/epub+zip',
  'application/vnd.ms-%',
  'application/vnd.openxmlformats-officedocument.%',
  'application/vnd.oasis.opendocument.%',
  'application/vnd.apple.%',
];

/** Whether a file's mime_type is of `kind`, as a condition on files.mime_type. */
function kindCondition(kind: MediaKind) {
  const mime = sql.ref('files.mime_type');
  const anyOf = (patterns: string[]) =>
    sql.join(
      patterns.map((p) => sql`${mime} like ${p}`),
      sql` or `,
    );
  const media = ['image/%', 'video/%', 'audio/%'];
  if (kind === 'document') return sql<boolean>`(${anyOf(DOCUMENT_TYPES)})`;
  if (kind === 'other') return sql<boolean>`not (${anyOf([...media, ...DOCUMENT_TYPES])})`;
  return sql<boolean>`${mime} like ${`${kind}/%`}`;
}

export type FileSortColumn = 'created_at' | 'updated_at' | 'name' | 'size';

/** Where a page starts: the sort value and id of the row before it (keyset pagination). */
export interface PageKey {
  v: string | number;
  id: string;
}

export interface FilePage {
  sort: FileSortColumn;
  direction: 'asc' | 'desc';
  limit: number;
  /** The page starts after this row (or at the start), and then `offset` rows further. */
  after?: PageKey;
  offset?: number;
  /**
   * PostgreSQL, a first page (no `after`, no `offset`): the same walk also counts the matches,
   * up to this many + 1 (`FoundPage.matched`), so that a search's page and its count read the
   * matches once, in one statement, rather than twice (`countUpTo`).
   */
  countTo?: number;
}

/** A page of files: its rows, the key of the row before it, and the key of its last row when more follow. */
export interface FoundPage {
  rows: FileWithRefs[];
  start: PageKey | null;
  next: PageKey | null;
  /** With `countTo`: the matches counted, at most max(limit, countTo) + 1 (more exist when it is that). */
  matched?: { count: number; exact: boolean };
}

/** What delivery needs of a file: its type, dates, privacy and its blob. */
export interface DeliverableFile {
  mime_type: string;
  updated_at: string;
  is_private: number;
  sha256: string;
  size: number;
  storage_key: string;
  /** Seconds, for video and audio (the probe at upload); null when unknown. */
  duration: number | null;
  /** Displayed height of a video (the probe at upload): a stream's ladder is capped at it. */
  height: number | null;
  /** The probe's other fields as JSON (media/video/probe.ts MediaDetails), or null. */
  media: string | null;
}

export type FileChanges = Omit<Updateable<FileTable>, 'id' | 'file_no' | 'workspace_id' | 'created_at'>;

/**
 * SQLite: a name search reads the name index's matches first when there are at most this many
 * (else it walks the tag's rows or the date index, newest first, checking each name).
 */
export const NAME_LEAD_CAP = 5_000;

/**
 * PostgreSQL: a name search in a workspace or folder of at most this many files reads that
 * scope's own rows and checks each name, rather than the trigram index. The index holds every
 * workspace's names, so a fragment common in the installation cost a workspace of 1,243 files
 * 15 to 41 ms a page at 10M files (the planner joined the index's ~120,000 matches to the
 * workspace's rows); its own rows took 2 to 7 ms.
 */
export const NAME_SCAN_MAX = 10_000;

/**
 * SQLite, a name search by date: the most matches the name index's walk in `seq` order reads for
 * one page (its offset, its rows and one more); deeper pages take the date index.
 */
export const NAME_WALK_MAX = 1_000;

/**
 * SQLite, a name search by date: the widest span of `seq` the walk's check may cover (about as
 * many files as its date range holds when files were created in `seq` order); wider, the walk
 * gives way to the date index.
 */
export const NAME_WALK_SPAN = 20_000;

/**
 * SQLite, a name search by date: matches the walk reads past its page, so that a file inserted
 * just before the page's last one but dated after it is in hand rather than a reason to give way;
 * and the seqs it starts past its cursor's row, for files inserted just after that row.
 */
export const NAME_WALK_SLACK = 16;

/**
 * SQLite, a name search by date: while files' dates lag at most this far (ms) behind files
 * inserted before them (`workspaces.created_lag_ms`), the walk's check reads two windows of
 * that width instead of every file its page spans.
 */
export const NAME_WALK_LAG_MAX = 10_000;

/**
 * Added to the lag: the triggers measure it with julianday arithmetic, which rounds to about a
 * millisecond; a second covers that many times over. (Dates are compared as text, which is their
 * time order only while every one is written the same way: a file's date written any other way
 * makes the lag unbounded, and a cursor's makes the walk read the whole span instead.)
 */
const LAG_MARGIN_MS = 1_000;

/**
 * A created_at as Stowage writes it (`toISOString`, a four-digit year): the only form whose text
 * order is time order. Never throws, whatever a client wrote into its cursor.
 */
const canonicalDate = (v: string | number | undefined): v is string => {
  if (typeof v !== 'string' || !/^\d{4}-/.test(v)) return false;
  const t = Date.parse(v);
  return Number.isFinite(t) && new Date(t).toISOString() === v;
};

/** How a search reads names: see `namePlan`. */
interface NamePlan {
  /** SQLite: the name index's few matches drive (see `nameLeads`). */
  leads: boolean;
  /** PostgreSQL: names are checked on the scope's rows, the trigram index left out (NAME_SCAN_MAX). */
  scan: boolean;
}

/** The folder-or-root key of the unique name index (files_folder_name_uq): '' is the root. */
const folderKey = sql<string>`coalesce(${sql.ref('files.folder_id')}, '')`;

/** The ids of the folder at `path` and of every folder below it. */
const subtree = (workspaceId: string, path: string) => sql<string>`(
  with recursive tree(id) as (
    select id from folders where workspace_id = ${workspaceId} and path = ${path}
    union all
    select c.id from folders c join tree on c.parent_id = tree.id
  ) select id from tree)`;

export class FileRepository {
  private readonly sqlite: boolean;

  /**
   * `db` may be a transaction: then every method takes part in it. `nameLeadCap`, `nameScanMax`
   * and `nameWalkMax`: see NAME_LEAD_CAP, NAME_SCAN_MAX and NAME_WALK_MAX (tests change them to
   * try every plan on a few files).
   */
  constructor(
    private readonly db: Kysely<Database>,
    private readonly nameLeadCap = NAME_LEAD_CAP,
    private readonly nameScanMax = NAME_SCAN_MAX,
    private readonly nameWalkMax = NAME_WALK_MAX,
  ) {
    this.sqlite = flavourOf(db) === 'sqlite';
  }

  private withRefs() {
    return this.db
      .selectFrom('files')
      .innerJoin('blobs', 'blobs.id', 'files.blob_id')
      .leftJoin('folders', 'folders.id', 'files.folder_id')
      .selectAll('files')
      .select((eb) => [
        'blobs.sha256 as sha256',
        'folders.folder_no as folder_no',
        eb.fn.coalesce('folders.path', eb.val('')).as('folder_path'),
      ]);
  }

  async byFileNo(workspaceId: string, fileNo: string): Promise<FileWithRefs | undefined> {
    return this.withRefs()
      .where('files.workspace_id', '=', workspaceId)
      .where('files.file_no', '=', fileNo)
      .executeTakeFirst();
  }

  /** The file of that name directly in the folder `folderId` (null for the root). */
  async byName(workspaceId: string, folderId: string | null, name: string): Promise<FileRow | undefined> {
    return this.db
      .selectFrom('files')
      .selectAll()
      .where('workspace_id', '=', workspaceId)
      .where(folderKey, '=', folderId ?? '')
      .where('name', '=', name)
      .executeTakeFirst();
  }

  /** The file at a delivery path (folder path "" for the root), with the blob delivery reads. */
  async deliverable(workspaceId: string, folderPath: string, name: string): Promise<DeliverableFile | undefined> {
    const folder = folderPath
      ? sql<string>`(select id from folders where workspace_id = ${workspaceId} and path = ${folderPath})`
      : sql<string>`''`;
    return this.db
      .selectFrom('files')
      .innerJoin('blobs', 'blobs.id', 'files.blob_id')
      .select([
        'files.mime_type',
        'files.updated_at',
        'files.is_private',
        'files.duration',
        'files.height',
        'files.media',
        'blobs.sha256',
        'blobs.size',
        'blobs.storage_key',
      ])
      .where('files.workspace_id', '=', workspaceId)
      .where(folderKey, '=', folder)
      .where('files.name', '=', name)
      .executeTakeFirst();
  }

  /**
   * The files matching `f`, without joins: a tag filter is driven from file_tags, whose index
   * yields a tag's files in created_at order, so a tagged page costs its own rows only. With
   * `names.leads` (SQLite, see `nameLeads`) the name index's few matches drive instead.
   */
  private matching(
    workspaceId: string,
    f: FileFilter,
    sort: FileSortColumn,
    counting = false,
    names: NamePlan = { leads: false, scan: false },
  ) {
    const nameLeads = names.leads;
    const [first, ...otherTags] = f.tags ?? [];
    const fragment = this.sqlite ? (f.nameContains ?? []).find((t) => [...t].length >= 3) : undefined;
    // A name search with a tag in one folder (SQLite): the folder's files drive, each checked
    // against the matches' list and the tag, rather than every file of the tag (570 ms for a tag
    // on 40% of 1M files, against 4 ms).
    const folderLeads = fragment !== undefined && f.folderId !== undefined;
    const driveByTag = first !== undefined && sort === 'created_at' && !nameLeads && !folderLeads;
    // SQLite plans without statistics: a unary + keeps a term from choosing the index (SQLite's
    // documented way), so that the index fitted to the sort, the folder or the name match drives.
    const plain = (column: string) => (this.sqlite ? sql`+${sql.ref(column)}` : sql.ref(column));
    // Counting a name search on SQLite: the name index is joined and drives, so the count stops
    // at its cap. As `seq in (select rowid …)` SQLite first listed every match (12,000 for a
    // fragment in 1% of 1M names: 3.6 ms, against 0.12 ms for the first 201 through the join).
    // Only workspace-wide: with a tag's rows joined, the tag index would be scanned once per
    // match; in a folder (or tree), its few files are fewer to read than every match (48 ms
    // against 5 ms for a folder of 1,000). When the name leads, its join drives pages too.
    const narrowed = driveByTag || f.folderId !== undefined || f.under !== undefined;
    const ftsDriver = nameLeads || (counting && !narrowed) ? fragment : undefined;
    const byName = ftsDriver !== undefined;
    // The sort column's index walks the page in order, unless the name's matches drive.
    const ordered = sort === 'created_at' && !counting && !byName;
    let q = this.db
      .selectFrom('files')
      .$if(driveByTag, (qb) =>
        qb.innerJoin('file_tags as t', (j) =>
          j
            .onRef('t.file_id', '=', 'files.id')
            .on('t.workspace_id', '=', workspaceId)
            .on('t.tag', '=', first as string),
        ),
      )
      .$if(ftsDriver !== undefined, (qb) =>
        qb.innerJoin(sql`${sql.table(NAME_FTS)}`.as('x'), (j) =>
          j.on(sql<boolean>`${sql.ref('x.rowid')} = ${sql.ref('files.seq')}`),
        ),
      );
    // A folder is in one workspace (the caller looked it up in this one): its index alone drives.
    // (When the name's matches drive, the folder is a check on each of them.)
    if (f.folderId !== undefined)
      q = byName
        ? q.where(sql<boolean>`${plain('files.folder_id')} = ${f.folderId}`)
        : q.where('files.folder_id', '=', f.folderId);
    else if (byName || (counting && fragment !== undefined))
      q = q.where(sql<boolean>`${plain('files.workspace_id')} = ${workspaceId}`);
    else q = q.where('files.workspace_id', '=', workspaceId);
    if (f.under)
      q = byName
        ? q.where(sql<boolean>`${plain('files.folder_id')} in ${subtree(workspaceId, f.under)}`)
        : q.where('files.folder_id', 'in', subtree(workspaceId, f.under));
    // With a tag's rows driving, other fragments are a check on each row (`+seq in …`): as an
    // index term, SQLite looked every listed match up again for each tagged row (19 s at 1M files).
    for (const text of f.nameContains ?? [])
      q = q.where(
        text === ftsDriver
          ? sql<boolean>`${sql.ref(`x.${NAME_FTS}`)} match ${ftsPhrase(text)}`
          : this.nameHas(text, driveByTag, names.scan),
      );
    const createdRef = ordered ? sql.ref('files.created_at') : plain('files.created_at');
    if (f.createdAtMost !== undefined) q = q.where(sql<boolean>`${createdRef} <= ${f.createdAtMost}`);
    if (f.kind) q = q.where(kindCondition(f.kind));
    if (f.customId !== undefined) q = q.where(sql<boolean>`${plain('files.custom_id')} = ${f.customId}`);
    if (f.createdFrom !== undefined) q = q.where(sql<boolean>`${createdRef} >= ${f.createdFrom}`);
    if (f.createdBefore !== undefined) q = q.where(sql<boolean>`${createdRef} < ${f.createdBefore}`);
    for (const tag of driveByTag ? otherTags : (f.tags ?? []))
      q = q.where(({ exists, selectFrom }) =>
        exists(
          selectFrom('file_tags')
            .select('file_tags.file_id')
            .where('file_tags.workspace_id', '=', workspaceId)
            .where('file_tags.tag', '=', tag)
            .whereRef('file_tags.created_at', '=', 'files.created_at')
            .whereRef('file_tags.file_id', '=', 'files.id'),
        ),
      );
    // The order columns: the tag index's own when it drives (the same values as the file's).
    const order = driveByTag ? { v: 't.created_at', id: 't.file_id' } : { v: `files.${sort}`, id: 'files.id' };
    return { q, order };
  }

  /**
   * Case-insensitive substring of the name. SQLite asks its FTS5 trigram index (three characters
   * or more; shorter ones scan); PostgreSQL's planner uses the pg_trgm index on lower(name),
   * unless `scan`: then the expression is not the index's (`|| ''`), so the planner cannot.
   */
  private nameHas(text: string, check = false, scan = false) {
    const seq = check ? sql`+${sql.ref('files.seq')}` : sql.ref('files.seq');
    if (this.sqlite && [...text].length >= 3)
      return sql<boolean>`${seq} in (select rowid from ${sql.table(NAME_FTS)} where ${sql.table(NAME_FTS)} match ${ftsPhrase(text)})`;
    if (scan) return sql<boolean>`lower(${sql.ref('files.name')} || '') like ${likeContains(text)} escape '\\'`;
    return likeEscaped('files.name', likeContains(text));
  }

  /**
   * How this search reads names (both false without a name fragment the indexes can serve). A
   * count of the whole workspace joins the name index whether its matches are few or not, so it
   * does not ask (see `matching`).
   */
  private async namePlan(workspaceId: string, f: FileFilter, counting = false): Promise<NamePlan> {
    const leadsMatter = !counting || Boolean(f.tags?.length) || f.folderId !== undefined || f.under !== undefined;
    return { leads: leadsMatter && (await this.nameLeads(f)), scan: await this.nameScan(workspaceId, f) };
  }

  /**
   * PostgreSQL: whether the search's scope, the workspace or one folder, holds at most
   * `nameScanMax` files (their maintained counts), so that checking its rows' names costs less
   * than reading the trigram index's matches of every workspace. A folder tree is left to the planner.
   */
  private async nameScan(workspaceId: string, f: FileFilter): Promise<boolean> {
    if (this.sqlite || f.under !== undefined || !f.nameContains?.some((t) => [...t].length >= 3)) return false;
    const row =
      f.folderId !== undefined
        ? await this.db.selectFrom('folders').select('file_count').where('id', '=', f.folderId).executeTakeFirst()
        : await this.db.selectFrom('workspaces').select('file_count').where('id', '=', workspaceId).executeTakeFirst();
    return row !== undefined && Number(row.file_count) <= this.nameScanMax;
  }

  /**
   * SQLite, a name search: whether the name index's matches are few (NAME_LEAD_CAP at most), so
   * that reading each of them (checking its tags, if any) and sorting the few beats walking the
   * tag's rows or the date index and checking each name, which for a rare fragment reads every
   * tagged file, or every file (58 ms for a page of 100 at 1M files, against 1.1 ms). Asked of
   * the index itself, counting no further than the cap.
   */
  private async nameLeads(f: FileFilter): Promise<boolean> {
    if (!this.sqlite) return false;
    const text = (f.nameContains ?? []).find((t) => [...t].length >= 3);
    if (text === undefined) return false;
    // Built, not raw: a SELECT of the query builder goes to the reader threads (sqlite-readers.ts).
    const row = await this.db
      .selectFrom(
        this.db
          .selectFrom(sql`${sql.table(NAME_FTS)}`.as('x'))
          .select(sql<number>`1`.as('one'))
          .where(sql<boolean>`${sql.ref(`x.${NAME_FTS}`)} match ${ftsPhrase(text)}`)
          .limit(this.nameLeadCap + 1)
          .as('m'),
      )
      .select(sql<number>`count(*)`.as('n'))
      .executeTakeFirst();
    return row !== undefined && Number(row.n) <= this.nameLeadCap;
  }

  /**
   * A page of the workspace's files matching `f`, in the sort order with ties by id: the rows,
   * and the key of the last one when more follow. An `offset` is walked on the narrowest index
   * (no joins, sort key and id only) to the row before the page, which is then read by key.
   */
  async page(workspaceId: string, f: FileFilter, p: FilePage): Promise<FoundPage> {
    const walked = await this.walkNames(workspaceId, f, p);
    if (walked) return walked;
    const { q, order } = this.matching(workspaceId, f, p.sort, false, await this.namePlan(workspaceId, f));
    const v = sql.ref(order.v);
    const id = sql.ref(order.id);
    const keys = (after: PageKey | undefined) =>
      q
        .$if(after !== undefined, (qb) =>
          qb.where(
            sql<boolean>`(${v}, ${id}) ${sql.raw(p.direction === 'desc' ? '<' : '>')} (${after?.v}, ${after?.id})`,
          ),
        )
        .select([sql<string | number>`${v}`.as('v'), sql<string>`${id}`.as('id')])
        .orderBy(v, p.direction)
        .orderBy(id, p.direction);
    let after = p.after;
    if (p.offset) {
      const boundary = await keys(after)
        .limit(1)
        .offset(p.offset - 1)
        .executeTakeFirst();
      if (!boundary) return { rows: [], start: null, next: null };
      after = { v: boundary.v, id: boundary.id };
    }
    if (p.countTo !== undefined && !this.sqlite && after === undefined && !p.offset)
      return this.countingPage(keys(undefined), p, p.countTo);
    // The page's rows with their blob and folder, in one statement: the keys' walk (one past the
    // page, which says whether more follow) joined to its rows by id, a primary-key lookup each.
    // As two statements it cost a second round trip, on SQLite a reader thread's message each way.
    const found = await this.db
      .selectFrom(
        keys(after)
          .limit(p.limit + 1)
          .as('k'),
      )
      .innerJoin('files', 'files.id', 'k.id')
      .innerJoin('blobs', 'blobs.id', 'files.blob_id')
      .leftJoin('folders', 'folders.id', 'files.folder_id')
      .selectAll('files')
      .select((eb) => [
        'k.v as page_v',
        'blobs.sha256 as sha256',
        'folders.folder_no as folder_no',
        eb.fn.coalesce('folders.path', eb.val('')).as('folder_path'),
      ])
      .orderBy('k.v', p.direction)
      .orderBy('k.id', p.direction)
      .execute();
    const more = found.length > p.limit;
    if (found.length === 0) return { rows: [], start: after ?? null, next: null };
    // (Each row keeps its page_v beside the file's columns: records are built field by field.)
    const rows: FileWithRefs[] = found.slice(0, p.limit);
    const last = found[rows.length - 1];
    return { rows, start: after ?? null, next: more ? { v: last.page_v, id: last.id } : null };
  }

  /**
   * PostgreSQL, a first page that also counts its matches: the keys' walk goes on to
   * max(limit, countTo) + 1 matches (a CTE, materialized as it is read twice), the page's rows are
   * joined for the first limit + 1 of them, and every row carries the number walked. A name
   * search counted apart walked the same matches again: for a fragment in 1% of 5M names, 7,700
   * rows for the page and 22,000 for the count, against 17,000 for both here.
   */
  private async countingPage(
    keys: { limit(n: number): Expression<unknown> },
    p: FilePage,
    countTo: number,
  ): Promise<FoundPage> {
    const walk = Math.max(p.limit, countTo) + 1;
    const dir = sql.raw(p.direction === 'desc' ? 'desc' : 'asc');
    const { rows: found } = await sql<FileWithRefs & { page_v: string | number; matched: number | string }>`
      with k as (${keys.limit(walk)})
      select files.*, kk.v as page_v, blobs.sha256 as sha256, folders.folder_no as folder_no,
             coalesce(folders.path, '') as folder_path, (select count(*) from k) as matched
        from (select v, id from k order by v ${dir}, id ${dir} limit ${p.limit + 1}) kk
        join files on files.id = kk.id
        join blobs on blobs.id = files.blob_id
        left join folders on folders.id = files.folder_id
       order by kk.v ${dir}, kk.id ${dir}`.execute(this.db);
    const count = found.length === 0 ? 0 : Number(found[0].matched);
    const matched = { count: Math.min(count, walk - 1), exact: count < walk };
    if (found.length === 0) return { rows: [], start: null, next: null, matched };
    const more = found.length > p.limit;
    const rows: FileWithRefs[] = found.slice(0, p.limit);
    const last = found[rows.length - 1];
    return { rows, start: null, next: more ? { v: last.page_v, id: last.id } : null, matched };
  }

  /**
   * SQLite, a page of a workspace-wide name search by date: the name index's matches are walked
   * in `seq` order (newest first, or oldest), which is the order files were created in, so a page
   * of a common fragment reads about as many matches as it shows, rather than listing every match
   * (12,000 for a word in 1% of 1M names: 4 ms) to check the date index's files against. The
   * order is checked, not assumed: every file of the workspace whose key lies between the walk's
   * farthest candidate and the page's start must have a `seq` the walk covered, else a match
   * could have been passed over, and the date index answers instead (undefined). While dates lag
   * insertion order by at most NAME_WALK_LAG_MAX (`created_lag_ms`), such a file can only lie
   * within that lag of the farthest candidate's date or of the cursor's, and only those windows
   * are read; else every file in between, if not more than NAME_WALK_SPAN. Any page the walk
   * cannot bound goes to the date index too: other filters, a deep offset, or a walk that ran
   * out of matches after a cursor.
   */
  private async walkNames(workspaceId: string, f: FileFilter, p: FilePage): Promise<FoundPage | undefined> {
    const texts = f.nameContains ?? [];
    const only =
      !f.folderId &&
      !f.under &&
      !f.tags?.length &&
      !hasRowFilters({ ...f, createdAtMost: undefined }) &&
      texts.length === 1 &&
      [...texts[0]].length >= 3;
    const offset = p.offset ?? 0;
    const want = offset + p.limit + 1;
    if (!this.sqlite || p.sort !== 'created_at' || !only || want > this.nameWalkMax) return undefined;
    const desc = p.direction === 'desc';
    const before = sql.raw(desc ? '<' : '>');
    const after = p.after;
    const key = sql`(${sql.ref('files.created_at')}, ${sql.ref('files.id')})`;
    // The walk starts past the cursor row's seq (or that of the nearest row on the cursor's side).
    let bound: number | undefined;
    if (after) {
      const row = await this.db
        .selectFrom('files')
        .select(sql<number>`seq`.as('seq'))
        .where('workspace_id', '=', workspaceId)
        .where(sql<boolean>`${key} ${sql.raw(desc ? '>=' : '<=')} (${after.v}, ${after.id})`)
        .orderBy('created_at', desc ? 'asc' : 'desc')
        .orderBy('id', desc ? 'asc' : 'desc')
        .limit(1)
        .executeTakeFirst();
      // A few seqs past it too (the cursor's key keeps listed rows out): files inserted just after
      // the cursor's row but dated before it are then read rather than a reason to give way.
      bound = row === undefined ? undefined : Number(row.seq) + (desc ? NAME_WALK_SLACK : -NAME_WALK_SLACK);
    }
    const x = sql.table(NAME_FTS);
    const rowid = sql.ref('x.rowid');
    // The index's matches drive, in rowid (seq) order, each file found by its rowid; `+` keeps the
    // workspace and date checks off their indexes (SQLite plans without statistics).
    const found = await this.db
      .selectFrom(sql`${x}`.as('x'))
      .innerJoin('files', (j) => j.on(sql<boolean>`${sql.ref('files.seq')} = ${rowid}`))
      .select([
        sql<number>`${sql.ref('files.seq')}`.as('seq'),
        sql<string>`${sql.ref('files.created_at')}`.as('v'),
        sql<string>`${sql.ref('files.id')}`.as('id'),
        sql<string>`${sql.ref('files.name')}`.as('name'),
        // The other end of the seq range the check covers when no cursor bounds it.
        sql<number>`(select ${sql.raw(desc ? 'max' : 'min')}(seq) from files)`.as('end'),
        // How far a file's date may lag behind one inserted before it (derived.ts, migration 0014).
        sql<number>`(select created_lag_ms from workspaces where id = ${workspaceId})`.as('lag'),
      ])
      .where(sql<boolean>`${sql.ref(`x.${NAME_FTS}`)} match ${ftsPhrase(texts[0])}`)
      .where(sql<boolean>`+${sql.ref('files.workspace_id')} = ${workspaceId}`)
      .$if(bound !== undefined, (qb) => qb.where(sql<boolean>`${rowid} ${before} ${bound}`))
      .$if(after !== undefined, (qb) =>
        qb.where(
          sql<boolean>`(+${sql.ref('files.created_at')}, ${sql.ref('files.id')}) ${before} (${after?.v}, ${after?.id})`,
        ),
      )
      .$if(f.createdAtMost !== undefined, (qb) =>
        qb.where(sql<boolean>`+${sql.ref('files.created_at')} <= ${f.createdAtMost}`),
      )
      .orderBy(rowid, p.direction)
      .limit(want + NAME_WALK_SLACK)
      .execute();
    // Every match on the far side of the walk's start is in hand: none lies beyond it.
    const complete = found.length < want + NAME_WALK_SLACK;
    const ahead = (a: { v: string; id: string }, b: { v: string; id: string }) => {
      const c = a.v < b.v ? -1 : a.v > b.v ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
      return desc ? -c : c;
    };
    const keys = found
      .map((r) => ({ seq: Number(r.seq), v: String(r.v), id: String(r.id), name: String(r.name) }))
      .sort(ahead);
    // That sort compares UTF-16 units, SQLite's compares UTF-8 bytes: the same order for ASCII
    // (dates and uuids are); any other key takes the date index.
    if (keys.some((k) => /[^\x20-\x7e]/.test(k.v) || /[^\x20-\x7e]/.test(k.id))) return undefined;
    // The key before the page, as the date index's plan gives it: the offset's last row, if any.
    const before0 = offset > 0 ? keys[offset - 1] : after;
    const start = before0 ? { v: before0.v, id: before0.id } : null;
    const page = keys.slice(offset, offset + p.limit + 1);
    if (page.length === 0 && bound === undefined) return { rows: [], start, next: null };
    // A file the walk passed over would be one of the workspace's, listed between the page's last
    // key (its extra row's) and its start, that the walk did not reach: inserted before its
    // farthest candidate (`beyond`; none when the walk ran out of matches) or after the cursor's
    // row (`behind`; none without a cursor). The page stands if there is none.
    const g = (column: string) => sql.ref(`g.${column}`);
    const gKey = sql`(${g('created_at')}, ${g('id')})`;
    const last = complete ? undefined : page[page.length - 1];
    const between = sql`${g('workspace_id')} = ${workspaceId}
      ${last ? sql`and ${gKey} ${sql.raw(desc ? '>=' : '<=')} (${last.v}, ${last.id})` : sql``}
      ${after ? sql`and ${gKey} ${before} (${after.v}, ${after.id})` : sql``}
      ${f.createdAtMost !== undefined ? sql`and ${g('created_at')} <= ${f.createdAtMost}` : sql``}`;
    const seqs = keys.map((k) => k.seq);
    const far = desc ? Math.min(...seqs) : Math.max(...seqs);
    const beyond = last ? sql`${g('seq')} ${before} ${far}` : undefined;
    const behind = bound === undefined ? undefined : sql`${g('seq')} ${sql.raw(desc ? '>=' : '<=')} ${bound}`;
    const lag = Number(found[0]?.lag ?? CREATED_LAG_UNBOUNDED_MS);
    // A cursor is the client's to write: any other form of date takes the reading of every file.
    const dated = (v: string | number | undefined) => v === undefined || canonicalDate(v);
    let check = sql<number | null>`null`;
    // A file inserted after another is dated at most `lag` before it: one passed over lies within
    // that (and a margin) of the farthest candidate's date, or of the cursor's, so only those two
    // windows need reading. A window's edge is a date as Stowage writes them, or there is none
    // (an edge past year 9999 is written "+010000-…", which sorts before every date).
    const window = lag + LAG_MARGIN_MS;
    const edge = (v: string, towardStart: boolean) => {
      const e = new Date(Date.parse(v) + (desc === towardStart ? window : -window)).toISOString();
      return canonicalDate(e) ? e : undefined;
    };
    const edges =
      lag <= NAME_WALK_LAG_MAX && dated(last?.v) && dated(after?.v)
        ? {
            last: last && beyond ? edge(last.v, true) : null,
            after: after && behind ? edge(String(after.v), false) : null,
          }
        : undefined;
    if (edges && edges.last !== undefined && edges.after !== undefined) {
      const within = (e: string, towardStart: boolean) =>
        sql`${g('created_at')} ${sql.raw(desc === towardStart ? '<=' : '>=')} ${e}`;
      const windows = [
        edges.last !== null
          ? sql`(select ${g('seq')} from files as g where ${between} and ${within(edges.last, true)} and ${beyond} limit 1)`
          : undefined,
        edges.after !== null
          ? sql`(select ${g('seq')} from files as g where ${between} and ${within(edges.after, false)} and ${behind} limit 1)`
          : undefined,
      ].filter((w) => w !== undefined);
      if (windows.length > 0) check = sql<number | null>`coalesce(${sql.join(windows)}, null)`;
    } else if (beyond || behind) {
      // Dates out of step by more than that: every file in between is read, if not too many.
      const near = bound ?? Number(found[0]?.end);
      if (complete || Math.abs(near - far) > NAME_WALK_SPAN) return undefined;
      check = sql<number | null>`(select ${g('seq')} from files as g where ${between}
        and (${sql.join(
          [beyond, behind].filter((c) => c !== undefined),
          sql` or `,
        )}) limit 1)`;
    }
    if (page.length === 0) {
      // Past the last match: so says the check, on a statement of its own.
      const probe = await this.db.selectFrom(sql`(select 1)`.as('one')).select(check.as('missed')).executeTakeFirst();
      return probe?.missed === null || probe?.missed === undefined ? { rows: [], start, next: null } : undefined;
    }
    // The rows are read by seq (a rowid lookup each; by id, 0.2 ms more a page), and each must
    // still be the file the walk found: a seq freed since the walk (its file deleted) may already
    // hold another file, of any workspace. `+` keeps the workspace off its index, which would
    // read every file of the workspace (157 ms at 1M files).
    const rows = await this.withRefs()
      .select([sql<string>`${sql.ref('files.created_at')}`.as('page_v'), check.as('missed')])
      .where(sql<boolean>`${sql.ref('files.seq')} in (${sql.join(page.map((k) => k.seq))})`)
      .where(sql<boolean>`+${sql.ref('files.workspace_id')} = ${workspaceId}`)
      .orderBy('files.created_at', p.direction)
      .orderBy('files.id', p.direction)
      .execute();
    // A file passed over, or a row gone or moved since the walk: the date index answers.
    const same =
      rows.length === page.length &&
      rows.every((r, i) => r.id === page[i].id && r.created_at === page[i].v && r.name === page[i].name);
    if (!same || (rows[0] as { missed: number | null }).missed !== null) return undefined;
    const more = rows.length > p.limit;
    const shown: FileWithRefs[] = rows.slice(0, p.limit);
    const end = shown[shown.length - 1];
    return { rows: shown, start, next: more ? { v: end.created_at, id: end.id } : null };
  }

  /**
   * How many of the workspace's files carry the tag, from `tag_counts` (kept by triggers,
   * migration 0016): exact, one lookup; with `createdAtMost` (a snapshot), less those created
   * after it, counted on the tag rows' index.
   */
  async tagTotal(workspaceId: string, tag: string, createdAtMost?: string): Promise<number> {
    // One statement, so the count and the newer rows are read as of one moment.
    const kept = sql`coalesce((select n from tag_counts where workspace_id = ${workspaceId} and tag = ${tag}), 0)`;
    const newer =
      createdAtMost === undefined
        ? sql`0`
        : sql`(select count(*) from file_tags where workspace_id = ${workspaceId} and tag = ${tag} and created_at > ${createdAtMost})`;
    const { rows } = await sql<{ n: number }>`select ${kept} - ${newer} as n`.execute(this.db);
    return Math.max(0, Number(rows[0]?.n ?? 0));
  }

  /** How many files match `f`, counting no further than `cap` + 1 (then `exact` is false). */
  async countUpTo(workspaceId: string, f: FileFilter, cap: number): Promise<{ count: number; exact: boolean }> {
    const row = await this.db
      .selectFrom(
        this.matching(workspaceId, f, 'created_at', true, await this.namePlan(workspaceId, f, true))
          .q.select(sql<number>`1`.as('one'))
          .limit(cap + 1)
          .as('m'),
      )
      .select(sql<number>`count(*)`.as('n'))
      .executeTakeFirstOrThrow();
    const count = Number(row.n);
    return { count: Math.min(count, cap), exact: count <= cap };
  }

  /** The planner's guess of how many files match `f` (PostgreSQL only; undefined on SQLite). */
  async estimate(workspaceId: string, f: FileFilter): Promise<number | undefined> {
    if (this.sqlite) return undefined;
    const compiled = this.matching(workspaceId, f, 'created_at').q.select('files.id').compile();
    const { rows } = await this.db.executeQuery<{ 'QUERY PLAN': [{ Plan: { 'Plan Rows': number } }] }>({
      ...compiled,
      sql: `explain (format json) ${compiled.sql}`,
    });
    const plan = rows[0]?.['QUERY PLAN']?.[0]?.Plan;
    return plan ? Math.round(plan['Plan Rows']) : undefined;
  }

  /** Files of the workspace (or directly in one folder) created after `at`: a snapshot's newer files. */
  async countCreatedAfter(workspaceId: string, folderId: string | undefined, at: string): Promise<number> {
    const row = await this.db
      .selectFrom('files')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .$if(folderId === undefined, (qb) => qb.where('workspace_id', '=', workspaceId))
      .$if(folderId !== undefined, (qb) => qb.where('folder_id', '=', folderId as string))
      .where('created_at', '>', at)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /** Inserts the file unless its folder already holds that name; returns whether it did. */
  async insertIfNameFree(row: Insertable<FileTable>): Promise<boolean> {
    // ON CONFLICT DO NOTHING on both dialects: a name taken at the same moment is no error.
    const res = await this.db
      .insertInto('files')
      .values(row)
      .onConflict((oc) => oc.doNothing())
      .executeTakeFirst();
    return Number(res.numInsertedOrUpdatedRows ?? 0) === 1;
  }

  /**
   * Changes the file; false when the change would give it a name its (new) folder already
   * holds. An unknown id changes nothing.
   */
  async update(id: string, changes: FileChanges): Promise<boolean> {
    try {
      await this.db.updateTable('files').set(changes).where('id', '=', id).execute();
      return true;
    } catch (err) {
      if (isUniqueViolation(err)) return false;
      throw err;
    }
  }

  async delete(id: string): Promise<void> {
    await this.db.deleteFrom('files').where('id', '=', id).execute();
  }
}

/** The FTS5 query for a substring: the text as one phrase (the trigram index matches it anywhere). */
const ftsPhrase = (text: string) => `"${text.replaceAll('"', '""')}"`;

/** Whether `f` filters on a file's own columns (dates, type, custom id): then no maintained count answers it. */
export function hasRowFilters(f: FileFilter): boolean {
  return Boolean(f.createdAtMost || f.createdFrom || f.createdBefore || f.kind || f.customId !== undefined);
}
