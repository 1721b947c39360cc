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

export interface SettingTable {
  key: string;
  value: string;
}

export interface Database {
  workspaces: WorkspaceTable;
  api_keys: ApiKeyTable;
  sources: SourceTable;
  settings: SettingTable;
}

export type Workspace = Selectable<WorkspaceTable>;
export type ApiKeyRow = Selectable<ApiKeyTable>;
export type SourceRow = Selectable<SourceTable>;
export type NewSourceRow = Insertable<SourceTable>;
export type { Generated };
