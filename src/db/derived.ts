// Data derived from the files table, so that reads at millions of files never scan it:
// - counters: files and bytes per workspace and directly per folder (list totals, folder totals);
// - file_tags: one row per tag of a file (a tag filter is an index range, in list order);
// - a name index for substring search: pg_trgm on PostgreSQL, an FTS5 trigram table on SQLite.
// Triggers keep all of it, so no write path (upload, replace, move, delete, cascade) can forget
// it; `rebuildDerived` recomputes everything from the files (the migration's backfill, and the
// bulk seeder's, which loads with the triggers set aside).
import { type Kysely, SqliteAdapter, sql } from 'kysely';

export type Flavour = 'sqlite' | 'postgres';

export function flavourOf<T>(db: Kysely<T>): Flavour {
  return db.getExecutor().adapter instanceof SqliteAdapter ? 'sqlite' : 'postgres';
}

const run = <T>(db: Kysely<T>, statement: string) => sql.raw(statement).execute(db);

/**
 * The tag rows' keys: the unique one yields a tag's files in list order (created_at, then id);
 * the other finds a file's rows when it changes or goes.
 */
const FILE_TAG_INDEXES: Record<string, { unique: boolean; columns: string }> = {
  file_tags_key: { unique: true, columns: 'workspace_id, tag, created_at, file_id' },
  file_tags_file_idx: { unique: false, columns: 'file_id' },
};

/** The SQLite FTS5 table behind name search; its rowid is the file's `seq`. */
export const NAME_FTS = 'files_name_fts';

const SQLITE_TRIGGERS = [
  `create trigger files_derived_insert after insert on files begin
     update workspaces set file_count = file_count + 1, file_bytes = file_bytes + new.size where id = new.workspace_id;
     update folders set file_count = file_count + 1, file_bytes = file_bytes + new.size where id = new.folder_id;
     insert into file_tags (workspace_id, tag, created_at, file_id)
       select distinct new.workspace_id, value, new.created_at, new.id from json_each(new.tags) where type = 'text';
     insert into ${NAME_FTS} (rowid, name) values (new.seq, new.name);
   end`,
  `create trigger files_derived_delete after delete on files begin
     update workspaces set file_count = file_count - 1, file_bytes = file_bytes - old.size where id = old.workspace_id;
     update folders set file_count = file_count - 1, file_bytes = file_bytes - old.size where id = old.folder_id;
     delete from file_tags where file_id = old.id;
     delete from ${NAME_FTS} where rowid = old.seq;
   end`,
  `create trigger files_derived_place after update of folder_id, size on files
     when old.folder_id is not new.folder_id or old.size <> new.size begin
     update workspaces set file_bytes = file_bytes - old.size + new.size where id = new.workspace_id;
     update folders set file_count = file_count - 1, file_bytes = file_bytes - old.size where id = old.folder_id;
     update folders set file_count = file_count + 1, file_bytes = file_bytes + new.size where id = new.folder_id;
   end`,
  `create trigger files_derived_tags after update of tags, created_at on files
     when old.tags <> new.tags or old.created_at <> new.created_at begin
     delete from file_tags where file_id = old.id;
     insert into file_tags (workspace_id, tag, created_at, file_id)
       select distinct new.workspace_id, value, new.created_at, new.id from json_each(new.tags) where type = 'text';
   end`,
  `create trigger files_derived_name after update of name on files when old.name <> new.name begin
     delete from ${NAME_FTS} where rowid = old.seq;
     insert into ${NAME_FTS} (rowid, name) values (new.seq, new.name);
   end`,
];
const SQLITE_TRIGGER_NAMES = ['insert', 'delete', 'place', 'tags', 'name'].map((n) => `files_derived_${n}`);

// One function for every change of a file row. The workspace row is always updated first, so
// two transactions touching the same workspace's folders queue on it instead of deadlocking.
const PG_FUNCTION = `
create or replace function stowage_files_derived() returns trigger language plpgsql as $$
begin
  if tg_op = 'INSERT' then
    update workspaces set file_count = file_count + 1, file_bytes = file_bytes + new.size where id = new.workspace_id;
    if new.folder_id is not null then
      update folders set file_count = file_count + 1, file_bytes = file_bytes + new.size where id = new.folder_id;
    end if;
    insert into file_tags (workspace_id, tag, created_at, file_id)
      select distinct new.workspace_id, t, new.created_at, new.id from json_array_elements_text(new.tags::json) t;
  elsif tg_op = 'DELETE' then
    update workspaces set file_count = file_count - 1, file_bytes = file_bytes - old.size where id = old.workspace_id;
    if old.folder_id is not null then
      update folders set file_count = file_count - 1, file_bytes = file_bytes - old.size where id = old.folder_id;
    end if;
    delete from file_tags where file_id = old.id;
  else
    if new.folder_id is distinct from old.folder_id or new.size <> old.size then
      update workspaces set file_bytes = file_bytes - old.size + new.size where id = new.workspace_id;
      if old.folder_id is not null then
        update folders set file_count = file_count - 1, file_bytes = file_bytes - old.size where id = old.folder_id;
      end if;
      if new.folder_id is not null then
        update folders set file_count = file_count + 1, file_bytes = file_bytes + new.size where id = new.folder_id;
      end if;
    end if;
    if new.tags <> old.tags or new.created_at <> old.created_at then
      delete from file_tags where file_id = old.id;
      insert into file_tags (workspace_id, tag, created_at, file_id)
        select distinct new.workspace_id, t, new.created_at, new.id from json_array_elements_text(new.tags::json) t;
    end if;
  end if;
  return null;
end $$`;
const PG_TRIGGER = `create trigger files_derived after insert or update or delete on files
  for each row execute function stowage_files_derived()`;

/**
 * SQLite: how far behind an earlier-inserted file of its workspace a file's created_at can be, in
 * ms (`workspaces.created_lag_ms`, migration 0014). Files are inserted in `seq` order, nearly
 * always their date order too; the name search that walks the trigram table in `seq` order
 * (FileRepository.walkNames) checks only a window this wide around its page's ends. A file
 * inserted with an older date than one before it widens the lag to the difference; a created_at
 * changed in place (nothing does so today) makes it unbounded. So does a date written in any
 * form but Stowage's own (`toISOString`, migration 0015): the walk compares dates as text, which
 * is their time order only while all are written alike.
 */
export const CREATED_LAG_UNBOUNDED = 1e15;
const lagBehind = (newest: string, created: string) =>
  `coalesce(cast(round((julianday(${newest}) - julianday(${created})) * 86400000) as integer) + 1, ${CREATED_LAG_UNBOUNDED})`;
/**
 * SQL: whether the date is written as `toISOString` writes it, with a four-digit year. strftime
 * gives null for no date, but writes back some that are not toISOString's as they came (hour
 * 24, a negative year), so those parts are checked too.
 */
const canonical = (created: string) =>
  `(substr(${created}, 1, 1) between '0' and '9' and substr(${created}, 12, 2) < '24'
    and substr(${created}, 15, 2) < '60' and substr(${created}, 18, 2) < '60'
    and ${created} is strftime('%Y-%m-%dT%H:%M:%fZ', ${created}))`;
const newestOf = '(select max(created_at) from files where workspace_id = new.workspace_id)';
const SQLITE_ORDER_TRIGGERS = [
  `create trigger files_created_lag after insert on files
     when not ${canonical('new.created_at')} or new.created_at < ${newestOf} begin
     update workspaces
        set created_lag_ms = case when ${canonical('new.created_at')}
          then max(created_lag_ms, ${lagBehind(newestOf, 'new.created_at')}) else ${CREATED_LAG_UNBOUNDED} end
      where id = new.workspace_id;
   end`,
  `create trigger files_created_moved after update of created_at on files
     when old.created_at <> new.created_at begin
     update workspaces set created_lag_ms = ${CREATED_LAG_UNBOUNDED} where id = new.workspace_id;
   end`,
];
const SQLITE_ORDER_TRIGGER_NAMES = ['files_created_lag', 'files_created_moved'];

/** SQLite: the triggers that keep `created_lag_ms` (migration 0014, and the seeder after a bulk load). */
export async function createOrderTriggers<T>(db: Kysely<T>): Promise<void> {
  if (flavourOf(db) !== 'sqlite') return;
  for (const t of SQLITE_ORDER_TRIGGERS) await run(db, t);
}

/** SQLite: drops the triggers that keep `created_lag_ms`. */
export async function dropOrderTriggers<T>(db: Kysely<T>): Promise<void> {
  if (flavourOf(db) !== 'sqlite') return;
  for (const name of SQLITE_ORDER_TRIGGER_NAMES) await run(db, `drop trigger if exists ${name}`);
}

/** SQLite: computes every workspace's `created_lag_ms` from its files, in `seq` order (one sorted pass). */
export async function rebuildCreatedLag<T>(db: Kysely<T>): Promise<void> {
  if (flavourOf(db) !== 'sqlite') return;
  await run(db, 'update workspaces set created_lag_ms = 0');
  await run(
    db,
    `update workspaces set created_lag_ms = s.lag
       from (select workspace_id,
                    max(case when not ${canonical('created_at')} then ${CREATED_LAG_UNBOUNDED}
                             when created_at < newest then ${lagBehind('newest', 'created_at')} else 0 end) as lag
               from (select workspace_id, created_at,
                            max(created_at) over (partition by workspace_id order by seq) as newest
                       from files)
              group by workspace_id) s
      where workspaces.id = s.workspace_id`,
  );
}

/**
 * How many files of a workspace carry each tag (`tag_counts`, migration 0016), kept from the tag
 * rows by a trigger on them, so that a list filtered by one tag is totalled exactly by one lookup
 * instead of counting up to 10,000 of the tag's rows on every request. A tag's row goes when its
 * count reaches 0. On PostgreSQL two transactions changing tags could take two tags' count rows
 * in opposite orders and deadlock (a test saw it): they don't, because every transaction that
 * writes a workspace's files holds the workspace's row first (holdWorkspace, database.ts), so
 * they change one workspace's counts one at a time.
 */
const SQLITE_TAG_COUNT_TRIGGERS = [
  `create trigger file_tags_count_insert after insert on file_tags begin
     insert into tag_counts (workspace_id, tag, n) values (new.workspace_id, new.tag, 1)
       on conflict (workspace_id, tag) do update set n = n + 1;
   end`,
  `create trigger file_tags_count_delete after delete on file_tags begin
     update tag_counts set n = n - 1 where workspace_id = old.workspace_id and tag = old.tag;
     delete from tag_counts where workspace_id = old.workspace_id and tag = old.tag and n <= 0;
   end`,
];
const SQLITE_TAG_COUNT_TRIGGER_NAMES = ['file_tags_count_insert', 'file_tags_count_delete'];
const PG_TAG_COUNT_FUNCTION = `
create or replace function stowage_tag_counts() returns trigger language plpgsql as $$
begin
  if tg_op = 'INSERT' then
    insert into tag_counts (workspace_id, tag, n) values (new.workspace_id, new.tag, 1)
      on conflict (workspace_id, tag) do update set n = tag_counts.n + 1;
  else
    update tag_counts set n = n - 1 where workspace_id = old.workspace_id and tag = old.tag;
    delete from tag_counts where workspace_id = old.workspace_id and tag = old.tag and n <= 0;
  end if;
  return null;
end $$`;
const PG_TAG_COUNT_TRIGGER = `create trigger file_tags_count after insert or delete on file_tags
  for each row execute function stowage_tag_counts()`;

/**
 * The table of tag counts, filled from the tag rows, and its triggers (migration 0016). In one
 * transaction, the tag rows held against writers on PostgreSQL (a node of the old release may
 * still be writing during a rolling upgrade): no tag row changes between the counting and the
 * triggers that keep the counts from then on, and a crash halfway leaves nothing made.
 */
export async function createTagCounts<T>(db: Kysely<T>): Promise<void> {
  const sqlite = flavourOf(db) === 'sqlite';
  const make = async (trx: Kysely<T>) => {
    if (!sqlite) await run(trx, 'lock table file_tags in share row exclusive mode');
    await run(
      trx,
      `create table if not exists tag_counts (
         workspace_id varchar(32) not null,
         tag varchar(255) not null,
         n bigint not null,
         primary key (workspace_id, tag))${sqlite ? ' without rowid' : ''}`,
    );
    await dropTagCountTriggers(trx);
    await rebuildTagCounts(trx);
    await createTagCountTriggers(trx);
  };
  if (db.isTransaction) await make(db);
  else await db.transaction().execute(make);
}

/** Recomputes every tag count from the tag rows (one pass over their unique index). */
export async function rebuildTagCounts<T>(db: Kysely<T>): Promise<void> {
  await run(db, 'delete from tag_counts');
  await run(
    db,
    'insert into tag_counts (workspace_id, tag, n) select workspace_id, tag, count(*) from file_tags group by workspace_id, tag',
  );
}

/** The triggers that keep `tag_counts` (after `rebuildTagCounts`, for a bulk load). */
export async function createTagCountTriggers<T>(db: Kysely<T>): Promise<void> {
  if (flavourOf(db) === 'sqlite') {
    for (const t of SQLITE_TAG_COUNT_TRIGGERS) await run(db, t);
    return;
  }
  await run(db, PG_TAG_COUNT_FUNCTION);
  await run(db, PG_TAG_COUNT_TRIGGER);
}

/** Drops the triggers that keep `tag_counts` (migration 0016's down, and a bulk load). */
export async function dropTagCountTriggers<T>(db: Kysely<T>): Promise<void> {
  if (flavourOf(db) === 'sqlite') {
    for (const name of SQLITE_TAG_COUNT_TRIGGER_NAMES) await run(db, `drop trigger if exists ${name}`);
    return;
  }
  await run(db, 'drop trigger if exists file_tags_count on file_tags');
}

/** Creates the triggers (the migration, and the seeder after a bulk load). */
export async function createFileTriggers<T>(db: Kysely<T>): Promise<void> {
  if (flavourOf(db) === 'sqlite') {
    for (const t of SQLITE_TRIGGERS) await run(db, t);
    return;
  }
  await run(db, PG_FUNCTION);
  await run(db, PG_TRIGGER);
}

/**
 * Drops the triggers: only for a bulk load that calls `rebuildDerived` and `createFileTriggers`
 * after, `rebuildTagCounts` and `createTagCountTriggers` too, and on SQLite `rebuildCreatedLag` and
 * `createOrderTriggers` (this drops those triggers as well), as the seeder does.
 */
export async function dropFileTriggers<T>(db: Kysely<T>): Promise<void> {
  if (flavourOf(db) === 'sqlite') {
    for (const name of SQLITE_TRIGGER_NAMES) await run(db, `drop trigger if exists ${name}`);
    await dropOrderTriggers(db);
    await dropTagCountTriggers(db);
    return;
  }
  await run(db, 'drop trigger if exists files_derived on files');
  await dropTagCountTriggers(db);
}

/**
 * Recomputes counters, tag rows and (SQLite) the name index from the files, in place; not the
 * tag counts or the date lag (`rebuildTagCounts`, `rebuildCreatedLag`), whose triggers should be
 * dropped first (`dropFileTriggers`).
 */
export async function rebuildDerived<T>(db: Kysely<T>): Promise<void> {
  const sqlite = flavourOf(db) === 'sqlite';
  // The tag rows' indexes are made after the rows, in one sorted pass each: tens of millions of
  // rows inserted under a live index would write it at random, page by page.
  for (const index of Object.keys(FILE_TAG_INDEXES)) await run(db, `drop index if exists ${index}`);
  await run(db, 'delete from file_tags');
  await run(
    db,
    sqlite
      ? `insert into file_tags (workspace_id, tag, created_at, file_id)
           select distinct f.workspace_id, j.value, f.created_at, f.id from files f, json_each(f.tags) j where j.type = 'text'`
      : `insert into file_tags (workspace_id, tag, created_at, file_id)
           select distinct f.workspace_id, t, f.created_at, f.id from files f, json_array_elements_text(f.tags::json) t`,
  );
  for (const [index, definition] of Object.entries(FILE_TAG_INDEXES))
    await run(db, `create ${definition.unique ? 'unique ' : ''}index ${index} on file_tags (${definition.columns})`);
  await run(db, 'update workspaces set file_count = 0, file_bytes = 0');
  await run(db, 'update folders set file_count = 0, file_bytes = 0');
  if (sqlite) {
    await run(
      db,
      `update workspaces set (file_count, file_bytes) =
         (select count(*), coalesce(sum(size), 0) from files where files.workspace_id = workspaces.id)`,
    );
    await run(
      db,
      `update folders set (file_count, file_bytes) =
         (select count(*), coalesce(sum(size), 0) from files where files.folder_id = folders.id)`,
    );
    await run(db, `delete from ${NAME_FTS}`);
    await run(db, `insert into ${NAME_FTS} (rowid, name) select seq, name from files`);
    return;
  }
  await run(
    db,
    `update workspaces w set file_count = s.n, file_bytes = s.b
       from (select workspace_id, count(*) as n, sum(size) as b from files group by workspace_id) s
      where w.id = s.workspace_id`,
  );
  await run(
    db,
    `update folders d set file_count = s.n, file_bytes = s.b
       from (select folder_id, count(*) as n, sum(size) as b from files where folder_id is not null group by folder_id) s
      where d.id = s.folder_id`,
  );
  await run(db, 'analyze file_tags');
}

/**
 * PostgreSQL: a histogram of 1,000 names (not 100) for `lower(name)`. The planner judges how many
 * names hold a fragment from that histogram; with 100 entries every fragment looks rare, and a
 * common one ("forest" in 1.2% of 10M names) was read through the trigram index, 62,000 rows and
 * 770 ms, where walking the newest files and keeping the first 101 matches takes 4.5 ms (issue
 * 18). `analyze files` must follow for the histogram to exist.
 */
export async function tuneNameStatistics<T>(db: Kysely<T>): Promise<void> {
  if (flavourOf(db) === 'sqlite') return;
  await run(
    db,
    `do $$ begin
       if to_regclass('files_name_trgm_idx') is not null then
         alter index files_name_trgm_idx alter column 1 set statistics 1000;
       end if;
     end $$`,
  );
}

/** Whether PostgreSQL could give the name search its trigram index (pg_trgm may not be installable). */
export async function createNameIndex<T>(db: Kysely<T>): Promise<boolean> {
  if (flavourOf(db) === 'sqlite') {
    await run(db, `create virtual table ${NAME_FTS} using fts5(name, tokenize = 'trigram')`);
    return true;
  }
  // A savepoint, so that a server without pg_trgm (or without the right to create it) leaves the
  // migration's transaction usable: search then scans, as before, and the rest still applies.
  await run(db, 'savepoint name_index');
  try {
    await run(db, 'create extension if not exists pg_trgm');
    await run(db, 'create index files_name_trgm_idx on files using gin (lower(name) gin_trgm_ops)');
    await tuneNameStatistics(db);
    await run(db, 'release savepoint name_index');
    return true;
  } catch {
    await run(db, 'rollback to savepoint name_index');
    return false;
  }
}

/**
 * Rows where what the triggers keep differs from what the files say, by check (all zero when the
 * derived data is right). Scans everything: for tests and `npm run seed -- --check`, not requests.
 */
export async function derivedDrift<T>(db: Kysely<T>): Promise<Record<string, number>> {
  const sqlite = flavourOf(db) === 'sqlite';
  const tagsOfFiles = sqlite
    ? `select f.id as file_id, j.value as tag from files f, json_each(f.tags) j where j.type = 'text'`
    : 'select f.id as file_id, t as tag from files f, json_array_elements_text(f.tags::json) t';
  const checks: Record<string, string> = {
    'workspace counters': `select count(*) as n from workspaces w
       where w.file_count <> (select count(*) from files f where f.workspace_id = w.id)
          or w.file_bytes <> (select coalesce(sum(f.size), 0) from files f where f.workspace_id = w.id)`,
    'folder counters': `select count(*) as n from folders d
       where d.file_count <> (select count(*) from files f where f.folder_id = d.id)
          or d.file_bytes <> (select coalesce(sum(f.size), 0) from files f where f.folder_id = d.id)`,
    'tag rows without their file tag': `select count(*) as n from (
       select file_id, tag from file_tags except ${tagsOfFiles}) x`,
    'file tags without their tag row': `select count(*) as n from (
       ${tagsOfFiles} except select file_id, tag from file_tags) x`,
    'tag rows out of step with their file': `select count(*) as n from file_tags t
       where not exists (select 1 from files f
                          where f.id = t.file_id and f.workspace_id = t.workspace_id and f.created_at = t.created_at)`,
  };
  if (sqlite) {
    checks['names missing from the name index'] = `select count(*) as n from files f
       where not exists (select 1 from ${NAME_FTS} x where x.rowid = f.seq and x.name = f.name)`;
    checks['name index rows without a file'] = `select count(*) as n from ${NAME_FTS} x
       where not exists (select 1 from files f where f.seq = x.rowid)`;
  }
  const counted = 'select workspace_id, tag, count(*) as n from file_tags group by workspace_id, tag';
  const kept = 'select workspace_id, tag, n from tag_counts';
  checks['tag counts out of step'] = `select count(*) as n from (
     select * from (${counted} except ${kept}) a
     union all
     select * from (${kept} except ${counted}) b) d`;
  const drift: Record<string, number> = {};
  for (const [name, query] of Object.entries(checks)) {
    const { rows } = await sql<{ n: number }>`${sql.raw(query)}`.execute(db);
    drift[name] = Number(rows[0]?.n ?? 0);
  }
  return drift;
}
