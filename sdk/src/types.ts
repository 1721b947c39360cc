// Shapes of the Stowage API (docs/api.md).

export interface FileRecord {
  id: string;
  file_no: string;
  workspace_id: string;
  name: string;
  path: string;
  url: string;
  width: number | null;
  height: number | null;
  size: number;
  mime_type: string;
  tags: string[];
  metadata: Record<string, unknown>;
  custom_id: string | null;
  folder_no: string | null;
  is_duplicate: boolean;
  created_at: string;
  upload_source: string;
  thumbnail: string | null;
  extension: string | null;
  format: string | null;
  hash: string;
  is_private: boolean;
  /** The hosted API's names for the same facts: file_size = size, workspace_no = workspace_id, source = upload_source. */
  file_size: number;
  workspace_no: string;
  source: string;
  folder_name: string | null;
  updated_at: string;
  /** Older hosted names, sent too: thumbanil = thumbnail, meta_data = metadata; folder_id is the folder's id. */
  thumbanil: string | null;
  meta_data: Record<string, unknown>;
  folder_id: string | null;
}

export interface MultipartSession {
  session_id: string;
  uuid?: string;
  part_size: number;
  min_part_size?: number;
  parts: string[];
  expire_at?: number;
  public_key?: string;
  workspace_id?: string;
  policy?: { folder: string; tags: string[]; size: number; format: string };
}

export interface SessionStatus {
  session_id: string;
  status: 'active' | 'completed' | 'aborted' | 'expired';
  part_size: number;
  size: number;
  expire_at: number;
  uploaded_parts: { part_number: number; size: number; etag: string }[];
}

export interface Folder {
  id: string;
  folder_no: string;
  name: string;
  parent_folder_no: string | null;
  path: string;
  total_items: number;
  total_size: number;
  created_at: string;
  updated_at: string;
}

export type SourceType = 's3' | 'azure' | 'google_cloud' | 'image_source';

export interface Source {
  id: string;
  name: string;
  type: SourceType;
  /** Text, booleans, or a list of header names (image_source forward_header). */
  configuration: Record<string, string | boolean | string[]>;
  is_active: boolean;
  created_at: string;
  updated_at: string;
}

export interface UploadOptions {
  folder?: string;
  tags?: string[];
  metadata?: Record<string, unknown>;
  customId?: string;
  randomPrefix?: boolean;
  transform?: string;
  webhookUrl?: string;
}

export interface Progress {
  /** Bytes the service has acknowledged. */
  loaded: number;
  total: number;
}

/** The workspace as `GET /api/v1/workspace` answers, with its browser settings. */
export interface WorkspaceSettings {
  workspace_id: string;
  name: string;
  /** Web page origins that may use the public key and upload tokens; empty = any origin. */
  allowed_origins: string[];
  /** Origins a public-key upload may send `webhook_url` to; empty = public keys may not set one. */
  webhook_origins: string[];
  quota_bytes: number | null;
  max_file_size: number | null;
  used_bytes: number;
}

export interface WorkspaceSettingsPatch {
  /** e.g. `https://shop.example.com`, `https://*.example.com`, `http://localhost:5173`; `[]` or `null` clears. */
  allowedOrigins?: string[] | null;
  webhookOrigins?: string[] | null;
}

export interface GenerateTokenOptions {
  /** The stored name, unless the uploader sends its own (`fileName` of `uploadWithToken`). */
  fileName: string;
  folder?: string;
  tags?: string[];
  transform?: string;
  /** Largest accepted body in bytes. Service default 5 MiB. */
  maxFileSize?: number;
  /** Life of the token in seconds. Service default 300. */
  ttlSeconds?: number;
  metadata?: Record<string, unknown>;
  customId?: string;
  randomPrefix?: boolean;
  /** What the uploader may change with `uploadWithToken`'s `folder`, `tags`, `transform`. */
  allowOverride?: { folder?: boolean; tags?: boolean; transform?: boolean };
}

export interface UploadToken {
  token: string;
  signature: string;
  /** Unix seconds. */
  expire_at: number;
  public_key: string;
  workspace_id: string;
  /** `${base}/api/v1/uploads/${token}`: POST the raw bytes there, no key needed. */
  upload_url: string;
  policy: {
    file_name: string;
    /** Folder path, "" for the root. */
    folder: string;
    tags: string[];
    max_file_size: number;
    transform: string | null;
    allow_override: { folder: boolean; tags: boolean; transform: boolean };
  };
}

export interface TokenUploadOptions {
  /** The service's base URL; needed when the first argument is a bare token. */
  baseUrl?: string;
  /** The stored name (any Unicode); default the token's `file_name`. */
  fileName?: string;
  /** MIME type sent as Content-Type; default the Blob's type or application/octet-stream. */
  contentType?: string;
  /** Overrides of the token's policy; each is refused (403 OVERRIDE_NOT_ALLOWED) unless the token allows it. */
  folder?: string;
  tags?: string[];
  transform?: string;
  signal?: AbortSignal;
  /** Called with 0 before sending and with the total once stored (fetch reports no upload progress). */
  onProgress?: (p: Progress) => void;
  fetch?: typeof fetch;
}
