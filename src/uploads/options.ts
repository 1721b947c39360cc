// What an upload asks for besides its bytes: the fields of a direct or remote upload (form
// fields or JSON values), checked and turned into the options the commit step uses.
import type { UPLOAD_FORM_FIELDS } from '../contract/uploads.ts';
import { errors } from '../errors.ts';
import { parseTransform } from '../media/transform/parse.ts';
import type { TransformSpec } from '../media/transform/spec.ts';
import { checkName, parseBooleanFlag, parseCustomId, parseFolderPath, parseMetadata, parseTags } from './names.ts';

/**
 * Upload options as they arrive: the contract's form fields, any value each, since form fields
 * (strings) and JSON values (a remote upload's body) are both checked here.
 */
export type UploadFields = Partial<Record<(typeof UPLOAD_FORM_FIELDS)[number], unknown>>;

export interface UploadOptions {
  /**
   * Whether a file of the same name in the folder may be replaced: private keys only. A public
   * key or an upload token (which sit in web pages) adds a file under a new unique name instead,
   * and is never shown whether the bytes were already stored (no record of another upload, no
   * signed URL of a private file, no `is_duplicate` oracle).
   */
  mayReplace?: boolean;
  name: string;
  folder: string[];
  tags: string[];
  metadata: Record<string, unknown>;
  custom_id: string | null;
  randomPrefix: boolean;
  transform: TransformSpec | null;
  webhookUrl: string | null;
}

export type UploadSource = 'direct' | 'multipart' | 'remote' | 'token' | 'dashboard';

const str = (v: unknown, field: string): string | undefined => {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw errors.validation(`${field} must be a string`);
  return v;
};

/** Checks every field that is present; `file_name` must be (or come from `defaultName`). */
export function parseUploadFields(fields: UploadFields, defaultName?: string): UploadOptions {
  const rawName = str(fields.file_name, 'file_name') || defaultName;
  if (!rawName) throw errors.fileNameRequired();
  const transformText = str(fields.transform, 'transform');
  const webhook = str(fields.webhook_url, 'webhook_url');
  if (webhook) {
    let u: URL | undefined;
    try {
      u = new URL(webhook);
    } catch {
      u = undefined;
    }
    if (!u || (u.protocol !== 'http:' && u.protocol !== 'https:') || webhook.length > 2048)
      throw errors.validation('webhook_url must be an http(s) URL');
  }
  return {
    name: checkName(rawName, 'file_name'),
    folder: parseFolderPath(str(fields.folder, 'folder')),
    tags: parseTags(fields.tags),
    metadata: parseMetadata(fields.metadata),
    custom_id: parseCustomId(fields.custom_id),
    randomPrefix: parseBooleanFlag(fields.random_prefix, 'random_prefix'),
    transform: transformText ? parseTransform(transformText) : null,
    webhookUrl: webhook || null,
  };
}
