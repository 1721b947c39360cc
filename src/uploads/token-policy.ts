// What an upload token allows (see tokens.ts): the policy its backend set when minting it,
// checked field by field at mint time, and the upload options it gives the browser's upload,
// with the fields the policy lets the uploader override.
import type { TokenPolicy as PublicTokenPolicy, TokenMintBody } from '../contract/uploads.ts';
import { errors } from '../errors.ts';
import { parseTransform } from '../media/transform/parse.ts';
import { checkName, parseBooleanFlag, parseCustomId, parseFolderPath, parseMetadata, parseTags } from './names.ts';
import type { UploadOptions } from './options.ts';

export const DEFAULT_TOKEN_MAX_FILE_SIZE = 5 * 1024 * 1024;

/** Stored as JSON in the token's row: the policy answers show, plus what only the upload reads. */
export type TokenPolicy = PublicTokenPolicy & {
  metadata: Record<string, unknown>;
  custom_id: string | null;
  random_prefix: boolean;
};

/** What the uploader sent besides the bytes (headers of POST /api/v1/uploads/{token}). */
export interface TokenUpload {
  fileName?: string;
  folder?: string;
  tags?: string;
  transform?: string;
  contentLength?: number;
}

export function positiveInt(raw: unknown, field: string, fallback: number): number {
  if (raw === undefined || raw === null) return fallback;
  if (typeof raw !== 'number' || !Number.isSafeInteger(raw) || raw < 1)
    throw errors.validation(`${field} must be a whole number of at least 1`);
  return raw;
}

/** Every field checked now, so a bad policy fails at mint time and not in a browser. */
export function parsePolicy(input: TokenMintBody): TokenPolicy {
  if (input.file_name === undefined || input.file_name === null || input.file_name === '')
    throw errors.fileNameRequired();
  if (typeof input.file_name !== 'string') throw errors.validation('file_name must be a string');
  const transform =
    input.transform === undefined || input.transform === null || input.transform === '' ? null : input.transform;
  if (transform !== null) {
    if (typeof transform !== 'string') throw errors.validation('transform must be a string');
    parseTransform(transform);
  }
  if (input.folder !== undefined && input.folder !== null && typeof input.folder !== 'string')
    throw errors.validation('folder must be a string');
  const override = input.allow_override ?? {};
  if (typeof override !== 'object' || Array.isArray(override))
    throw errors.validation('allow_override must be an object of booleans');
  const o = override as Record<string, unknown>;
  return {
    file_name: checkName(input.file_name, 'file_name'),
    folder: parseFolderPath((input.folder as string | null | undefined) ?? undefined).join('/'),
    tags: parseTags(input.tags),
    transform,
    max_file_size: positiveInt(input.max_file_size, 'max_file_size', DEFAULT_TOKEN_MAX_FILE_SIZE),
    metadata: parseMetadata(input.metadata),
    custom_id: parseCustomId(input.custom_id),
    random_prefix: parseBooleanFlag(input.random_prefix, 'random_prefix'),
    allow_override: {
      folder: parseBooleanFlag(o.folder, 'allow_override.folder'),
      tags: parseBooleanFlag(o.tags, 'allow_override.tags'),
      transform: parseBooleanFlag(o.transform, 'allow_override.transform'),
    },
  };
}

/**
 * The policy decides everything but the name, and the fields it lets the uploader override.
 * The upload adds a file, never replaces one (as with a public key), and names no webhook.
 */
export function tokenUploadOptions(policy: TokenPolicy, sent: TokenUpload): UploadOptions {
  for (const field of ['folder', 'tags', 'transform'] as const) {
    if (sent[field] !== undefined && !policy.allow_override[field]) throw errors.overrideNotAllowed(field);
  }
  const transform = sent.transform ?? policy.transform;
  return {
    name: checkName(sent.fileName ?? policy.file_name, 'file_name'),
    folder: parseFolderPath(sent.folder ?? policy.folder),
    tags: sent.tags !== undefined ? parseTags(sent.tags) : policy.tags,
    metadata: policy.metadata,
    custom_id: policy.custom_id,
    randomPrefix: policy.random_prefix,
    transform: transform ? parseTransform(transform) : null,
    webhookUrl: null,
    mayReplace: false,
  };
}
