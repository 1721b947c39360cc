// Migrations live in code so that the service and the CLI run them at start on both dialects.
// Append new ones; never edit one that has shipped.
import { type Kysely, type Migration, type MigrationProvider, Migrator, sql } from 'kysely';
import {
  createFileTriggers,
  createNameIndex,
  createOrderTriggers,
  createTagCounts,
  flavourOf,
  dropOrderTriggers,
  dropTagCountTriggers,
  rebuildCreatedLag,
  rebuildDerived,
} from './derived.ts';
import type { Database } from './schema.ts';
import { withKyselySchemaLock } from './schema-lock.ts';

const migrations: Record<string, Migration> = {
  '0001_foundation': {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('workspaces')
        .addColumn('id', 'varchar(32)', (c) => c.primaryKey())
        .addColumn('name', 'varchar(255)', (c) => c.notNull())
        .addColumn('webhook_secret', 'text', (c) => c.notNull())
        .addColumn('quota_bytes', 'bigint')
        .addColumn('max_file_size', 'bigint')
        .addColumn('created_at', 'varchar(32)', (c) => c.notNull())
        .addColumn('updated_at', 'varchar(32)', (c) => c.notNull())
        .execute();

      await db.schema
        .createTable('api_keys')
        .addColumn('id', 'varchar(36)', (c) => c.primaryKey())
        .addColumn('workspace_id', 'varchar(32)', (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
        .addColumn('type', 'varchar(16)', (c) => c.notNull())
        .addColumn('key_hash', 'varchar(64)', (c) => c.notNull().unique())
        .addColumn('key_hint', 'varchar(64)', (c) => c.notNull())
        .addColumn('created_at', 'varchar(32)', (c) => c.notNull())
        .addColumn('revoked_at', 'varchar(32)')
        .execute();
      await db.schema.createIndex('api_keys_workspace_idx').on('api_keys').column('workspace_id').execute();

      await db.schema
        .createTable('sources')
        .addColumn('id', 'varchar(36)', (c) => c.primaryKey())
        .addColumn('workspace_id', 'varchar(32)', (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
        .addColumn('name', 'varchar(64)', (c) => c.notNull())
        .addColumn('type', 'varchar(32)', (c) => c.notNull())
        .addColumn('configuration', 'text', (c) => c.notNull())
        .addColumn('secrets', 'text')
        .addColumn('is_active', 'integer', (c) => c.notNull().defaultTo(1))
        .addColumn('created_at', 'varchar(32)', (c) => c.notNull())
        .addColumn('updated_at', 'varchar(32)', (c) => c.notNull())
        .addUniqueConstraint('sources_workspace_name_uq', ['workspace_id', 'name'])
        .execute();
      await db.schema
        .createIndex('sources_workspace_created_idx')
        .on('sources')
        .columns(['workspace_id', 'created_at', 'id'])
        .execute();

      await db.schema
        .createTable('settings')
        .addColumn('key', 'varchar(64)', (c) => c.primaryKey())
        .addColumn('value', 'text', (c) => c.notNull())
        .execute();
    },
    async down(db: Kysely<unknown>) {
      for (const t of ['settings', 'sources', 'api_keys', 'workspaces']) await db.schema.dropTable(t).execute();
    },
  },
  '0002_files': {
    async up(db: Kysely<unknown>) {
      await db.schema
        .alterTable('workspaces')
        .addColumn('used_bytes', 'bigint', (c) => c.notNull().defaultTo(0))
        .execute();

      await db.schema
        .createTable('folders')
        .addColumn('id', 'varchar(36)', (c) => c.primaryKey())
        .addColumn('folder_no', 'varchar(32)', (c) => c.notNull().unique())
        .addColumn('workspace_id', 'varchar(32)', (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
        .addColumn('parent_id', 'varchar(36)', (c) => c.references('folders.id').onDelete('cascade'))
        .addColumn('name', 'varchar(255)', (c) => c.notNull())
        .addColumn('path', 'text', (c) => c.notNull())
        .addColumn('created_at', 'varchar(32)', (c) => c.notNull())
        .addColumn('updated_at', 'varchar(32)', (c) => c.notNull())
        .addUniqueConstraint('folders_workspace_path_uq', ['workspace_id', 'path'])
        .execute();

      // Bytes, stored once per workspace per SHA-256. Files point at blobs.
      await db.schema
        .createTable('blobs')
        .addColumn('id', 'varchar(36)', (c) => c.primaryKey())
        .addColumn('workspace_id', 'varchar(32)', (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
        .addColumn('sha256', 'varchar(64)', (c) => c.notNull())
        .addColumn('size', 'bigint', (c) => c.notNull())
        .addColumn('storage_key', 'varchar(255)', (c) => c.notNull())
        .addColumn('created_at', 'varchar(32)', (c) => c.notNull())
        .addUniqueConstraint('blobs_workspace_sha_uq', ['workspace_id', 'sha256'])
        .execute();

      await db.schema
        .createTable('files')
        .addColumn('id', 'varchar(36)', (c) => c.primaryKey())
        .addColumn('file_no', 'varchar(32)', (c) => c.notNull().unique())
        .addColumn('workspace_id', 'varchar(32)', (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
        .addColumn('folder_id', 'varchar(36)', (c) => c.references('folders.id').onDelete('cascade'))
        .addColumn('folder_path', 'text', (c) => c.notNull())
        .addColumn('name', 'varchar(255)', (c) => c.notNull())
        .addColumn('blob_id', 'varchar(36)', (c) => c.notNull().references('blobs.id'))
        .addColumn('size', 'bigint', (c) => c.notNull())
        .addColumn('mime_type', 'varchar(255)', (c) => c.notNull())
        .addColumn('extension', 'varchar(32)')
        .addColumn('format', 'varchar(32)')
        .addColumn('width', 'integer')
        .addColumn('height', 'integer')
        .addColumn('tags', 'text', (c) => c.notNull())
        .addColumn('metadata', 'text', (c) => c.notNull())
        .addColumn('custom_id', 'varchar(255)')
        .addColumn('is_private', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('is_duplicate', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('upload_source', 'varchar(16)', (c) => c.notNull())
        .addColumn('created_at', 'varchar(32)', (c) => c.notNull())
        .addColumn('updated_at', 'varchar(32)', (c) => c.notNull())
        .addUniqueConstraint('files_workspace_folder_name_uq', ['workspace_id', 'folder_path', 'name'])
        .execute();
      await db.schema
        .createIndex('files_workspace_created_idx')
        .on('files')
        .columns(['workspace_id', 'created_at', 'id'])
        .execute();
      await db.schema.createIndex('files_blob_idx').on('files').column('blob_id').execute();

      // Write-ahead intents for storage objects: a row exists from before an object is written
      // until a blob row owns it (or it is deleted). Whatever a crash leaves here, the sweeper
      // deletes: no orphaned bytes, and no row ever points at bytes that are not there.
      await db.schema
        .createTable('storage_intents')
        .addColumn('storage_key', 'varchar(255)', (c) => c.primaryKey())
        .addColumn('workspace_id', 'varchar(32)', (c) => c.notNull())
        .addColumn('reason', 'varchar(32)', (c) => c.notNull())
        .addColumn('created_at', 'varchar(32)', (c) => c.notNull())
        .execute();
    },
    async down(db: Kysely<unknown>) {
      for (const t of ['storage_intents', 'files', 'blobs', 'folders']) await db.schema.dropTable(t).execute();
      await db.schema.alterTable('workspaces').dropColumn('used_bytes').execute();
    },
  },
  '0003_multipart': {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('multipart_sessions')
        .addColumn('id', 'varchar(32)', (c) => c.primaryKey())
        .addColumn('uuid', 'varchar(36)', (c) => c.notNull().unique())
        .addColumn('workspace_id', 'varchar(32)', (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
        .addColumn('status', 'varchar(16)', (c) => c.notNull())
        .addColumn('file_name', 'varchar(255)', (c) => c.notNull())
        .addColumn('folder', 'text', (c) => c.notNull())
        .addColumn('tags', 'text', (c) => c.notNull())
        .addColumn('metadata', 'text', (c) => c.notNull())
        .addColumn('custom_id', 'varchar(255)')
        .addColumn('format', 'varchar(255)', (c) => c.notNull())
        .addColumn('size', 'bigint', (c) => c.notNull())
        .addColumn('part_size', 'bigint', (c) => c.notNull())
        .addColumn('part_count', 'integer', (c) => c.notNull())
        .addColumn('storage_key', 'varchar(255)', (c) => c.notNull())
        .addColumn('upload_id', 'varchar(1024)', (c) => c.notNull())
        .addColumn('expire_at', 'bigint', (c) => c.notNull())
        .addColumn('file_id', 'varchar(36)')
        .addColumn('webhook_url', 'text')
        .addColumn('created_at', 'varchar(32)', (c) => c.notNull())
        .addColumn('updated_at', 'varchar(32)', (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex('multipart_sessions_status_expire_idx')
        .on('multipart_sessions')
        .columns(['status', 'expire_at'])
        .execute();
    },
    async down(db: Kysely<unknown>) {
      await db.schema.dropTable('multipart_sessions').execute();
    },
  },
  '0004_webhooks': {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('webhook_deliveries')
        .addColumn('id', 'varchar(40)', (c) => c.primaryKey())
        .addColumn('workspace_id', 'varchar(32)', (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
        .addColumn('url', 'text', (c) => c.notNull())
        .addColumn('payload', 'text', (c) => c.notNull())
        .addColumn('status', 'varchar(16)', (c) => c.notNull())
        .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('next_attempt_at', 'varchar(32)', (c) => c.notNull())
        .addColumn('locked_until', 'varchar(32)')
        .addColumn('last_status', 'integer')
        .addColumn('last_error', 'text')
        .addColumn('created_at', 'varchar(32)', (c) => c.notNull())
        .addColumn('updated_at', 'varchar(32)', (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex('webhook_deliveries_due_idx')
        .on('webhook_deliveries')
        .columns(['status', 'next_attempt_at'])
        .execute();
    },
    async down(db: Kysely<unknown>) {
      await db.schema.dropTable('webhook_deliveries').execute();
    },
  },
  '0005_browser_uploads': {
    async up(db: Kysely<unknown>) {
      // Origins as JSON arrays of strings; null means none configured.
      await db.schema.alterTable('workspaces').addColumn('allowed_origins', 'text').execute();
      await db.schema.alterTable('workspaces').addColumn('webhook_origins', 'text').execute();
      // Whether the session was started with a private key, which alone may replace a file.
      await db.schema
        .alterTable('multipart_sessions')
        .addColumn('may_replace', 'integer', (c) => c.notNull().defaultTo(1))
        .execute();
      await db.schema
        .createTable('upload_tokens')
        .addColumn('id', 'varchar(36)', (c) => c.primaryKey())
        .addColumn('workspace_id', 'varchar(32)', (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
        .addColumn('key_id', 'varchar(36)', (c) => c.notNull())
        .addColumn('policy', 'text', (c) => c.notNull())
        .addColumn('expire_at', 'bigint', (c) => c.notNull())
        .addColumn('state', 'varchar(16)', (c) => c.notNull())
        .addColumn('used_at', 'varchar(32)')
        .addColumn('file_id', 'varchar(36)')
        .addColumn('created_at', 'varchar(32)', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('upload_tokens_expire_idx').on('upload_tokens').column('expire_at').execute();
    },
    async down(db: Kysely<unknown>) {
      await db.schema.dropTable('upload_tokens').execute();
      await db.schema.alterTable('multipart_sessions').dropColumn('may_replace').execute();
      await db.schema.alterTable('workspaces').dropColumn('webhook_origins').execute();
      await db.schema.alterTable('workspaces').dropColumn('allowed_origins').execute();
    },
  },
  '0006_quota_reservations': {
    async up(db: Kysely<unknown>) {
      // Bytes promised to uploads in progress: a quota decision counts used + reserved, so
      // parallel uploads can never together pass the quota. Each reservation sits on the
      // intent of the bytes it is for, and goes with it (commit, discard, sweep).
      await db.schema
        .alterTable('workspaces')
        .addColumn('reserved_bytes', 'bigint', (c) => c.notNull().defaultTo(0))
        .execute();
      await db.schema
        .alterTable('storage_intents')
        .addColumn('reserved_bytes', 'bigint', (c) => c.notNull().defaultTo(0))
        .execute();
    },
    async down(db: Kysely<unknown>) {
      await db.schema.alterTable('storage_intents').dropColumn('reserved_bytes').execute();
      await db.schema.alterTable('workspaces').dropColumn('reserved_bytes').execute();
    },
  },
  '0007_scale': {
    // Reads that stay fast at millions of files (issue 18, ARCHITECTURE.md "Reads at scale").
    async up(db: Kysely<unknown>) {
      const sqlite = flavourOf(db) === 'sqlite';
      // Files no longer copy their folder's path: a folder rename then rewrites folders only.
      // A name is unique per folder, the root being folder ''.
      if (sqlite) {
        // SQLite cannot drop a column inside a unique constraint: the table is made again, with
        // an explicit rowid (seq) that VACUUM keeps, which the FTS5 name index refers to.
        await sql`create table files_next (
            seq integer primary key,
            id varchar(36) not null unique,
            file_no varchar(32) not null unique,
            workspace_id varchar(32) not null references workspaces(id) on delete cascade,
            folder_id varchar(36) references folders(id) on delete cascade,
            name varchar(255) not null,
            blob_id varchar(36) not null references blobs(id),
            size bigint not null,
            mime_type varchar(255) not null,
            extension varchar(32),
            format varchar(32),
            width integer,
            height integer,
            tags text not null,
            metadata text not null,
            custom_id varchar(255),
            is_private integer not null default 0,
            is_duplicate integer not null default 0,
            upload_source varchar(16) not null,
            created_at varchar(32) not null,
            updated_at varchar(32) not null)`.execute(db);
        await sql`insert into files_next (id, file_no, workspace_id, folder_id, name, blob_id, size, mime_type,
            extension, format, width, height, tags, metadata, custom_id, is_private, is_duplicate, upload_source,
            created_at, updated_at)
          select id, file_no, workspace_id, folder_id, name, blob_id, size, mime_type, extension, format, width,
            height, tags, metadata, custom_id, is_private, is_duplicate, upload_source, created_at, updated_at
            from files order by created_at, id`.execute(db);
        await sql`drop table files`.execute(db);
        await sql`alter table files_next rename to files`.execute(db);
        await db.schema
          .createIndex('files_workspace_created_idx')
          .on('files')
          .columns(['workspace_id', 'created_at', 'id'])
          .execute();
        await db.schema.createIndex('files_blob_idx').on('files').column('blob_id').execute();
      } else {
        await sql`alter table files drop constraint files_workspace_folder_name_uq`.execute(db);
        await sql`alter table files drop column folder_path`.execute(db);
      }
      await sql`create unique index files_folder_name_uq on files (workspace_id, (coalesce(folder_id, '')), name)`.execute(
        db,
      );
      // One index per sort order of the workspace-wide list, and a folder's files in list order.
      for (const column of ['updated_at', 'name', 'size'])
        await db.schema
          .createIndex(`files_workspace_${column}_idx`)
          .on('files')
          .columns(['workspace_id', column, 'id'])
          .execute();
      await db.schema
        .createIndex('files_folder_created_idx')
        .on('files')
        .columns(['folder_id', 'created_at', 'id'])
        .execute();
      // A folder's children (the subtree walks go down parent_id), and a workspace's top level.
      await db.schema.createIndex('folders_parent_idx').on('folders').columns(['parent_id', 'name']).execute();
      await db.schema
        .createIndex('folders_workspace_parent_idx')
        .on('folders')
        .columns(['workspace_id', 'parent_id', 'name'])
        .execute();

      await db.schema
        .createTable('file_tags')
        .addColumn('workspace_id', 'varchar(32)', (c) => c.notNull())
        .addColumn('tag', 'varchar(255)', (c) => c.notNull())
        .addColumn('created_at', 'varchar(32)', (c) => c.notNull())
        .addColumn('file_id', 'varchar(36)', (c) => c.notNull())
        .execute();
      // Its indexes come with its rows, from rebuildDerived below.

      for (const table of ['workspaces', 'folders'])
        for (const column of ['file_count', 'file_bytes'])
          await db.schema
            .alterTable(table)
            .addColumn(column, 'bigint', (c) => c.notNull().defaultTo(0))
            .execute();
      await createNameIndex(db);
      await rebuildDerived(db);
      await createFileTriggers(db);
      // Statistics for the name index's expression (tuneNameStatistics): without them the planner
      // guesses, and a large table that no longer changes much is not analyzed again for a long time.
      if (flavourOf(db) === 'postgres') await sql`analyze files`.execute(db);
    },
  },
  '0008_signed_transformations': {
    // Issue 19 item 5: a workspace may require delivery transformations to be signed with its
    // own delivery key (sealed like the webhook secret; made when first asked for). Off for
    // every existing workspace, so their URLs keep working.
    async up(db: Kysely<unknown>) {
      await db.schema
        .alterTable('workspaces')
        .addColumn('signed_transformations', 'integer', (c) => c.notNull().defaultTo(0))
        .execute();
      await db.schema.alterTable('workspaces').addColumn('delivery_key', 'text').execute();
    },
    async down(db: Kysely<unknown>) {
      await db.schema.alterTable('workspaces').dropColumn('delivery_key').execute();
      await db.schema.alterTable('workspaces').dropColumn('signed_transformations').execute();
    },
  },
  '0009_rendition_cache': {
    // Issue 19 item 4: the rendition cache's ledger. A row per rendition in storage (made, or
    // being made: a row is written before its object, so a crash leaves a row to evict, never
    // an object nobody knows), and one counter of their bytes kept in the same transactions,
    // so the total is one primary-key read at any size. Renditions made before this migration
    // get their rows from the one-time `renditions.backfill` job (services/rendition-backfill.ts).
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('renditions')
        .addColumn('key', 'varchar(1024)', (c) => c.primaryKey())
        .addColumn('workspace_id', 'varchar(32)', (c) => c.notNull())
        // What the rendition is made from: the blob's storage key, or an origin object's prefix.
        .addColumn('owner', 'varchar(1024)', (c) => c.notNull())
        .addColumn('bytes', 'bigint', (c) => c.notNull())
        .addColumn('created_at', 'varchar(32)', (c) => c.notNull())
        .addColumn('last_used_at', 'varchar(32)', (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex('renditions_last_used_idx')
        .on('renditions')
        .columns(['last_used_at', 'key'])
        .execute();
      await db.schema.createIndex('renditions_owner_idx').on('renditions').column('owner').execute();
      await db.schema
        .createTable('rendition_totals')
        .addColumn('id', 'integer', (c) => c.primaryKey())
        .addColumn('bytes', 'bigint', (c) => c.notNull())
        .addColumn('count', 'bigint', (c) => c.notNull())
        .execute();
      await sql`insert into rendition_totals (id, bytes, count) values (1, 0, 0)`.execute(db);
    },
    async down(db: Kysely<unknown>) {
      await db.schema.dropTable('rendition_totals').execute();
      await db.schema.dropTable('renditions').execute();
    },
  },
  '0010_transformation_presets': {
    // Issue 20 item 2: named presets (`t_{name}` in delivery URLs), a workspace's own names for
    // transformation texts. The name is the key within the workspace: URLs name presets, so a
    // rename is a new preset. Deleted with their workspace.
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('transformation_presets')
        .addColumn('workspace_id', 'varchar(32)', (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
        .addColumn('name', 'varchar(64)', (c) => c.notNull())
        .addColumn('transformation', 'text', (c) => c.notNull())
        .addColumn('created_at', 'varchar(32)', (c) => c.notNull())
        .addColumn('updated_at', 'varchar(32)', (c) => c.notNull())
        .addPrimaryKeyConstraint('transformation_presets_pk', ['workspace_id', 'name'])
        .execute();
    },
    async down(db: Kysely<unknown>) {
      await db.schema.dropTable('transformation_presets').execute();
    },
  },
  '0011_media_probe': {
    // Issue 21 item 1: what ffprobe found in a video or audio upload. `duration` in seconds (the
    // record's field); `media` the rest as JSON text (codecs, rates, rotation), null when the file
    // was not probed or the probe gave nothing.
    async up(db: Kysely<unknown>) {
      await db.schema.alterTable('files').addColumn('duration', 'double precision').execute();
      await db.schema.alterTable('files').addColumn('media', 'text').execute();
    },
    async down(db: Kysely<unknown>) {
      await db.schema.alterTable('files').dropColumn('media').execute();
      await db.schema.alterTable('files').dropColumn('duration').execute();
    },
  },
  '0012_webhook_delivery_list': {
    // Issue 24: a workspace's webhook deliveries, newest first, a page at a time (the dashboard's
    // deliveries page and GET /api/v1/webhooks/deliveries), without a scan of every workspace's.
    async up(db: Kysely<unknown>) {
      await db.schema
        .createIndex('webhook_deliveries_workspace_idx')
        .on('webhook_deliveries')
        .columns(['workspace_id', 'created_at', 'id'])
        .execute();
    },
    async down(db: Kysely<unknown>) {
      await db.schema.dropIndex('webhook_deliveries_workspace_idx').execute();
    },
  },
  '0013_undo_function': {
    // Issue 25 item 4, PostgreSQL: an upload of a new file commits in one statement outside a
    // transaction (BlobRepository.adoptWithFile). When one of its steps finds the world changed
    // under it, the statement calls this to raise, which undoes every step it took.
    async up(db: Kysely<unknown>) {
      if (flavourOf(db) !== 'postgres') return;
      await sql`create or replace function stowage_undo(reason text) returns text language plpgsql as $$
        begin
          raise exception using errcode = 'SWUND', message = reason;
        end $$`.execute(db);
    },
    async down(db: Kysely<unknown>) {
      if (flavourOf(db) === 'postgres') await sql`drop function if exists stowage_undo(text)`.execute(db);
    },
  },
  '0014_created_lag': {
    // Issue 18, SQLite: how far a file's date can lag behind a file inserted before it in its
    // workspace, kept by triggers; a name search that walks the trigram table in insertion order
    // checks that order in a window this wide instead of across its whole page (files.ts walkNames).
    async up(db: Kysely<unknown>) {
      if (flavourOf(db) !== 'sqlite') return;
      await sql`alter table workspaces add column created_lag_ms integer not null default 0`.execute(db);
      await rebuildCreatedLag(db);
      await createOrderTriggers(db);
    },
    async down(db: Kysely<unknown>) {
      if (flavourOf(db) !== 'sqlite') return;
      await sql`drop trigger if exists files_created_lag`.execute(db);
      await sql`drop trigger if exists files_created_moved`.execute(db);
      await sql`alter table workspaces drop column created_lag_ms`.execute(db);
    },
  },
  '0015_created_lag_format': {
    // Issue 18, SQLite: the name walk compares dates as text, their time order only while all
    // are written alike; a file dated in any other form (an import, a hand edit) now makes its
    // workspace's lag unbounded, and the lag is recomputed with that rule.
    async up(db: Kysely<unknown>) {
      if (flavourOf(db) !== 'sqlite') return;
      await dropOrderTriggers(db);
      await rebuildCreatedLag(db);
      await createOrderTriggers(db);
    },
    async down() {
      // The stricter triggers stay: they keep 0014's column as 0014's did, and more cautiously.
    },
  },
  '0016_tag_counts': {
    // Issue 18: how many files carry each tag, kept by triggers on the tag rows, so that a list
    // filtered by one tag is totalled by one lookup (derived.ts, createTagCounts).
    async up(db: Kysely<unknown>) {
      await createTagCounts(db);
    },
    async down(db: Kysely<unknown>) {
      await dropTagCountTriggers(db);
      if (flavourOf(db) === 'postgres') await sql`drop function if exists stowage_tag_counts()`.execute(db);
      await sql`drop table if exists tag_counts`.execute(db);
    },
  },
};

class InCodeProvider implements MigrationProvider {
  async getMigrations(): Promise<Record<string, Migration>> {
    return migrations;
  }
}

export async function migrateToLatest(db: Kysely<Database>): Promise<void> {
  const migrator = new Migrator({ db, provider: new InCodeProvider() });
  // SQLite: an index built over millions of rows sorts in temporary files, not in memory
  // (openDatabase keeps temporary data in memory for the small statements of normal running).
  const sqlite = flavourOf(db) === 'sqlite';
  if (sqlite) await sql`pragma temp_store = file`.execute(db);
  const { error, results } = sqlite
    ? await migrator.migrateToLatest().finally(async () => {
        await sql`pragma temp_store = memory`.execute(db);
      })
    : await withKyselySchemaLock(db, () => migrator.migrateToLatest());
  const failed = results?.find((r) => r.status === 'Error');
  if (error || failed) {
    const reason = error instanceof Error ? error.message : String(error ?? 'unknown error');
    throw new Error(`database migration ${failed?.migrationName ?? ''} failed: ${reason}`, { cause: error });
  }
}

/** Migrates up (or down) to the named migration: for tests that build a database as an older release left it. */
export async function migrateTo(db: Kysely<Database>, name: string): Promise<void> {
  const migrator = new Migrator({ db, provider: new InCodeProvider() });
  const { error } = await migrator.migrateTo(name);
  if (error) throw error instanceof Error ? error : new Error(String(error));
}
