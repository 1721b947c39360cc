// Shapes of the Stowage API. The wire types (records, sessions, sources, tokens, the error
// codes) are generated from the server's contract into types.gen.ts (`npm run gen:sdk`); the
// client's own options are here.
import type { TokenPolicy, WorkspacePatchBody } from './types.gen.ts';

export type * from './types.gen.ts';

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

export interface WorkspaceSettingsPatch {
  /** e.g. `https://shop.example.com`, `https://*.example.com`, `http://localhost:5173`; `[]` or `null` clears. */
  allowedOrigins?: WorkspacePatchBody['allowed_origins'];
  webhookOrigins?: WorkspacePatchBody['webhook_origins'];
  /** Serve transformations only from signed URLs (delivery key, or signed by the service). */
  signedTransformations?: boolean;
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
  allowOverride?: Partial<TokenPolicy['allow_override']>;
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
