// Shapes of the Stowage API (INTERFACE.md and EXTENSIONS.md).

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
  configuration: Record<string, string | boolean>;
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
