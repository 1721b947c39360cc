// File and folder names (EXTENSIONS.md "Folders"): no "/", no "..", no control characters, at
// most 255 bytes. Names are stored NFC-normalised, so "é" typed two ways is one name.
import { randomBase62 } from '../crypto/ids.ts';
import { errors } from '../errors.ts';

// C0, DEL, C1, and the bidirectional overrides that make a name display as another.
const FORBIDDEN = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069\\/]/;

export function checkName(raw: string, field: string): string {
  const name = raw.normalize('NFC');
  if (name.length === 0) throw errors.validation(`${field} must not be empty`);
  if (name.trim() !== name) throw errors.validation(`${field} must not start or end with spaces`);
  if (FORBIDDEN.test(name)) throw errors.validation(`${field} must not contain "/", "\\" or control characters`);
  if (name.includes('..') || name === '.') throw errors.validation(`${field} must not contain ".."`);
  if (Buffer.byteLength(name, 'utf8') > 255) throw errors.validation(`${field} must be at most 255 bytes`);
  return name;
}

/** "a/b/c" (leading and trailing slashes ignored) as checked segments; "" or "/" is the root. */
export function parseFolderPath(raw: string | undefined): string[] {
  if (raw === undefined) return [];
  const trimmed = raw.replace(/^\/+|\/+$/g, '');
  if (trimmed === '') return [];
  const segments = trimmed.split('/');
  if (segments.length > 32) throw errors.validation('folder is nested more than 32 levels deep');
  return segments.map((s) => {
    if (s === '') throw errors.validation('folder must not contain empty segments ("a//b")');
    return checkName(s, 'folder');
  });
}

function splitExtension(name: string): [string, string] {
  const dot = name.lastIndexOf('.');
  return dot > 0 ? [name.slice(0, dot), name.slice(dot)] : [name, ''];
}

/** Direct and remote uploads: "photo.jpg" → "photo_Ab12Cd34.jpg" (INTERFACE.md 4.3). */
export function withRandomSuffix(name: string): string {
  const [base, ext] = splitExtension(name);
  return checkName(`${base.slice(0, 200)}_${randomBase62(8)}${ext}`, 'file_name');
}

/** Multipart uploads: "photo.jpg" → "Ab12Cd34_photo.jpg" (INTERFACE.md 4.1). */
export function withRandomPrefix(name: string): string {
  return checkName(`${randomBase62(8)}_${name}`.slice(0, 250), 'file_name');
}

/** The name with its extension replaced, for a transform that changed the format. */
export function withExtension(name: string, ext: string): string {
  const [base] = splitExtension(name);
  return `${base}.${ext}`;
}

/** Tags from an array or a comma-separated string: trimmed, non-empty, unique, bounded. */
export function parseTags(raw: unknown): string[] {
  if (raw === undefined || raw === null || raw === '') return [];
  const list = Array.isArray(raw) ? raw : typeof raw === 'string' ? raw.split(',') : undefined;
  if (!list || list.some((t) => typeof t !== 'string')) throw errors.validation('tags must be a string or an array of strings');
  const tags = [...new Set((list as string[]).map((t) => t.normalize('NFC').trim()).filter(Boolean))];
  if (tags.length > 50) throw errors.validation('at most 50 tags');
  if (tags.some((t) => t.length > 100 || FORBIDDEN.test(t.replace(/[\\/]/g, '')))) throw errors.validation('each tag must be at most 100 characters, without control characters');
  return tags;
}

/** Metadata: an object (or its JSON text), at most 16 KiB as JSON. */
export function parseMetadata(raw: unknown): Record<string, unknown> {
  if (raw === undefined || raw === null || raw === '') return {};
  let value = raw;
  if (typeof raw === 'string') {
    try {
      value = JSON.parse(raw);
    } catch {
      throw errors.validation('metadata must be a JSON object');
    }
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw errors.validation('metadata must be a JSON object');
  if (JSON.stringify(value).length > 16 * 1024) throw errors.validation('metadata must be at most 16 KiB as JSON');
  return value as Record<string, unknown>;
}

export function parseCustomId(raw: unknown): string | null {
  if (raw === undefined || raw === null || raw === '') return null;
  if (typeof raw !== 'string' || raw.length > 255 || FORBIDDEN.test(raw.replace(/[\\/]/g, ''))) {
    throw errors.validation('custom_id must be a string of at most 255 characters');
  }
  return raw;
}

export function parseBooleanFlag(raw: unknown, field: string): boolean {
  if (raw === undefined || raw === null || raw === '' || raw === false || raw === 'false') return false;
  if (raw === true || raw === 'true') return true;
  throw errors.validation(`${field} must be true or false`);
}
