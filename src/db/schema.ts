// Table types for Kysely. Timestamps are ISO 8601 strings with milliseconds and a Z (the API's
// format, sortable as text on both dialects); booleans are 0/1 integers; JSON is text.
import type { Generated, Insertable, Selectable } from 'kysely';

export interface WorkspaceTable {
  id: string;
  name: string;
  /** Sealed with the master key (SecretBox), aad `workspace:<id>:webhook`. */
  webhook_secret: string;
  /** Bytes; null = unlimited. */
  quota_bytes: number | null;
  /** Bytes; null = the server default. */
  max_file_size: number | null;
  /** Bytes held by this workspace's blobs (each stored once). */
  used_bytes: number;
  /** Bytes promised to uploads in progress (the sum of its intents' reservations). */
  reserved_bytes: number;
  /** How many files the workspace holds, and their sizes summed (kept by triggers: db/derived.ts). */
  file_count: Generated<number>;
  file_bytes: Generated<number>;
  /** JSON array of web origins that may use the public key and upload tokens; null = any. */
  allowed_origins: string | null;
  /** JSON array of origins public-key uploads may send webhooks to; null = none. */
  webhook_origins: string | null;
  /** 1: delivery URLs with transformation tokens must be signed (docs/api/delivery.md#signed-transformations). */
  signed_transformations: Generated<number>;
  /** The delivery key, sealed (SecretBox, aad `workspace:<id>:delivery-key`); null until first asked for. */
  delivery_key: string | null;
  created_at: string;
  updated_at: string;
}

export interface ApiKeyTable {
  id: string;
  workspace_id: string;
  type: 'public' | 'private';
  /** SHA-256 (hex) of the key; the key itself is never stored. */
  key_hash: string;
  key_hint: string;
  created_at: string;
  revoked_at: string | null;
}

export interface SourceTable {
  id: string;
  workspace_id: string;
  name: string;
  type: string;
  /** JSON of the configuration without its secret fields. */
  configuration: string;
  /** Secret fields as JSON, sealed with the master key, aad `source:<id>`; null when there are none. */
  secrets: string | null;
  is_active: number;
  created_at: string;
  updated_at: string;
}

export interface FolderTable {
  id: string;
  folder_no: string;
  workspace_id: string;
  parent_id: string | null;
  name: string;
  /** "a/b/c", no leading or trailing slash. */
  path: string;
  /** Files directly in this folder, and their sizes summed (kept by triggers: db/derived.ts). */
  file_count: Generated<number>;
  file_bytes: Generated<number>;
  created_at: string;
  updated_at: string;
}

export interface BlobTable {
  id: string;
  workspace_id: string;
  sha256: string;
  size: number;
  storage_key: string;
  created_at: string;
}

export interface FileTable {
  id: string;
  file_no: string;
  workspace_id: string;
  /** Null at the root. The folder's path is only in `folders`, so a rename touches no file row. */
  folder_id: string | null;
  name: string;
  blob_id: string;
  size: number;
  mime_type: string;
  extension: string | null;
  format: string | null;
  width: number | null;
  height: number | null;
  /** Seconds, for video and audio that could be probed. */
  duration: number | null;
  /** JSON object (media/video/probe.ts MediaDetails), for video and audio that could be probed. */
  media: string | null;
  /** JSON array of strings. */
  tags: string;
  /** JSON object. */
  metadata: string;
  custom_id: string | null;
  is_private: number;
  is_duplicate: number;
  upload_source: 'direct' | 'multipart' | 'remote' | 'token' | 'dashboard';
  created_at: string;
  updated_at: string;
}

/** One row per tag of each file, so that a tag filter is an index range (kept by triggers: db/derived.ts). */
export interface FileTagTable {
  workspace_id: string;
  tag: string;
  /** The file's created_at: a tag's files come out of the index in the list's default order. */
  created_at: string;
  file_id: string;
}

export interface StorageIntentTable {
  storage_key: string;
  workspace_id: string;
  reason: string;
  /** Quota this upload holds until it commits or goes (0 when the workspace has no quota). */
  reserved_bytes: number;
  created_at: string;
}

export interface MultipartSessionTable {
  id: string;
  uuid: string;
  workspace_id: string;
  /** active → completing → completed; or aborted / expired. */
  status: 'active' | 'completing' | 'completed' | 'aborted' | 'expired';
  /** The stored name (after random_prefix). */
  file_name: string;
  /** Folder path, "" for the root. */
  folder: string;
  tags: string;
  metadata: string;
  custom_id: string | null;
  format: string;
  size: number;
  part_size: number;
  part_count: number;
  storage_key: string;
  upload_id: string;
  /** Unix seconds. */
  expire_at: number;
  file_id: string | null;
  webhook_url: string | null;
  /** 1 when started with a private key: only then may the upload replace a file of the same name. */
  may_replace: number;
  created_at: string;
  updated_at: string;
}

export interface UploadTokenTable {
  /** The token's `jti`. */
  id: string;
  workspace_id: string;
  /** The private key that minted it: revoking or rotating that key ends the token. */
  key_id: string;
  /** JSON of TokenPolicy (uploads/token-policy.ts). */
  policy: string;
  /** Unix seconds. */
  expire_at: number;
  /** unused → uploading → used; back to unused when an upload fails. */
  state: 'unused' | 'uploading' | 'used';
  used_at: string | null;
  file_id: string | null;
  created_at: string;
}

export interface WebhookDeliveryTable {
  /** The Standard Webhooks message id: the same on every attempt. */
  id: string;
  workspace_id: string;
  url: string;
  /** The exact JSON body that is signed and sent. */
  payload: string;
  status: 'pending' | 'delivered' | 'failed';
  attempts: number;
  next_attempt_at: string;
  /** A node working on it holds it until then. */
  locked_until: string | null;
  last_status: number | null;
  last_error: string | null;
  created_at: string;
  updated_at: string;
}

/** A rendition in storage (or being made), for the cache's budget (src/services/rendition-cache.ts). */
export interface RenditionTable {
  /** Its storage key: `<owner>.renditions/<canonical tokens>.<format>`. */
  key: string;
  workspace_id: string;
  /** The blob's storage key, or `{ws}/origins/{source}/{path hash}` for an origin's object. */
  owner: string;
  /** 0 while it is being made. */
  bytes: number;
  created_at: string;
  last_used_at: string;
}

/** One row (id 1): the sum of `renditions.bytes` and their count, kept with every change. */
export interface RenditionTotalsTable {
  id: number;
  bytes: number;
  count: number;
}

export interface SettingTable {
  key: string;
  value: string;
}

/** A named transformation (`t_{name}` in delivery URLs); the primary key is (workspace_id, name). */
export interface TransformationPresetTable {
  workspace_id: string;
  /** `[a-z0-9][a-z0-9_-]{0,63}`. */
  name: string;
  /** Comma-separated tokens, as normalised when written (media/presets.ts). */
  transformation: string;
  created_at: string;
  updated_at: string;
}

export interface Database {
  workspaces: WorkspaceTable;
  api_keys: ApiKeyTable;
  sources: SourceTable;
  settings: SettingTable;
  folders: FolderTable;
  blobs: BlobTable;
  files: FileTable;
  file_tags: FileTagTable;
  storage_intents: StorageIntentTable;
  multipart_sessions: MultipartSessionTable;
  webhook_deliveries: WebhookDeliveryTable;
  upload_tokens: UploadTokenTable;
  renditions: RenditionTable;
  rendition_totals: RenditionTotalsTable;
  transformation_presets: TransformationPresetTable;
}

export type WebhookDeliveryRow = Selectable<WebhookDeliveryTable>;

export type MultipartSessionRow = Selectable<MultipartSessionTable>;
export type UploadTokenRow = Selectable<UploadTokenTable>;

export type FolderRow = Selectable<FolderTable>;
export type BlobRow = Selectable<BlobTable>;
export type FileRow = Selectable<FileTable>;

export type Workspace = Selectable<WorkspaceTable>;
export type PresetRow = Selectable<TransformationPresetTable>;
export type ApiKeyRow = Selectable<ApiKeyTable>;
export type SourceRow = Selectable<SourceTable>;
export type NewSourceRow = Insertable<SourceTable>;
export type { Generated };
