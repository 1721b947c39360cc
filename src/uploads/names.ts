// File and folder names (docs/api/uploads.md#names-and-fields): checked as Unicode before anything is
// stored. A name is stored NFC-normalised (so "é" typed two ways is one name) and must be
// well-formed UTF-16 (a lone surrogate has no UTF-8 form: it would be stored as U+FFFD and break
// every URL built from the name), at most 255 bytes as UTF-8, not exactly "." or "..", and free
// of "/", "\\", C0 and C1 control characters, DEL, line and paragraph separators and the
// bidirectional embeddings, overrides and isolates that make a name display as another
// ("evil\u202egnp.exe" shows as "evilexe.png").
// A name that merely contains ".." ("a..b.txt") is a name: names are never filesystem paths
// (storage keys are generated) and delivery URLs percent-encode each segment.
import { randomBase62 } from '../crypto/ids.ts';
import { errors } from '../errors.ts';
import { CONTROL, isWellFormed } from '../text.ts';

const SEPARATOR = /[\\/]/;

/** What tags and custom ids must not hold either: no lone surrogates, no controls, no bidi tricks. */
function unsafeText(s: string): boolean {
  return !isWellFormed(s) || CONTROL.test(s);
}

export const MAX_NAME_BYTES = 255;

/** More than `max` code points (an emoji is one character, not two UTF-16 units); cheap on long text. */
const longerThan = (s: string, max: number): boolean => s.length > max && (s.length > 2 * max || [...s].length > max);

export function checkName(raw: string, field: string): string {
  // Checked before normalising: normalize() keeps lone surrogates, but say what is wrong plainly.
  if (!isWellFormed(raw)) throw errors.validation(`${field} must be valid Unicode (it holds a lone surrogate)`);
  const name = raw.normalize('NFC');
  if (name.length === 0) throw errors.validation(`${field} must not be empty`);
  if (name.trim() !== name) throw errors.validation(`${field} must not start or end with spaces`);
  if (SEPARATOR.test(name)) throw errors.validation(`${field} must not contain "/" or "\\"`);
  if (CONTROL.test(name))
    throw errors.validation(`${field} must not contain control characters, line separators or bidirectional overrides`);
  if (name === '.' || name === '..') throw errors.validation(`${field} must not be "." or ".."`);
  if (Buffer.byteLength(name, 'utf8') > MAX_NAME_BYTES)
    throw errors.validation(`${field} must be at most ${MAX_NAME_BYTES} bytes as UTF-8`);
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

/** The longest start of `s` that fits in `maxBytes` of UTF-8, cut between code points (never inside a surrogate pair). */
function truncateUtf8(s: string, maxBytes: number): string {
  if (Buffer.byteLength(s, 'utf8') <= maxBytes) return s;
  let bytes = 0;
  let end = 0;
  for (const ch of s) {
    const size = Buffer.byteLength(ch, 'utf8');
    if (bytes + size > maxBytes) break;
    bytes += size;
    end += ch.length;
  }
  return s.slice(0, end);
}

/**
 * `before + base + after + ext` within MAX_NAME_BYTES, shortening the base (the extension is
 * kept unless it alone is too long). Used for the random prefix and suffix and for a transform's
 * new extension, which all lengthen a name that may already be at the limit.
 */
function fitName(before: string, base: string, after: string, ext: string): string {
  const fixed = Buffer.byteLength(before + after, 'utf8');
  if (fixed + Buffer.byteLength(ext, 'utf8') >= MAX_NAME_BYTES) {
    base += ext;
    ext = '';
  }
  let cut = truncateUtf8(base, MAX_NAME_BYTES - fixed - Buffer.byteLength(ext, 'utf8'));
  if (cut.length < base.length) cut = cut.trimEnd();
  return `${before}${cut}${after}${ext}`;
}

/** Direct and remote uploads: "photo.jpg" → "photo_Ab12Cd34.jpg" (docs/api/uploads.md#names-and-fields). */
export function withRandomSuffix(name: string): string {
  const [base, ext] = splitExtension(name);
  return checkName(fitName('', base, `_${randomBase62(8)}`, ext), 'file_name');
}

/** Multipart uploads: "photo.jpg" → "Ab12Cd34_photo.jpg" (docs/api/uploads.md#names-and-fields). */
export function withRandomPrefix(name: string): string {
  const [base, ext] = splitExtension(name);
  return checkName(fitName(`${randomBase62(8)}_`, base, '', ext), 'file_name');
}

/** The name with its extension replaced, for a transform that changed the format. */
export function withExtension(name: string, ext: string): string {
  const [base] = splitExtension(name);
  return fitName('', base, '', `.${ext}`);
}

export const MAX_TAGS = 50;
export const MAX_TAG_CHARACTERS = 100;

/**
 * Tags from an array or a comma-separated string: trimmed, NFC, non-empty, unique, bounded. A tag
 * may hold "/" and "\\" ("2026/summer"), never a lone surrogate, a control character, a line
 * separator or a bidi override.
 */
export function parseTags(raw: unknown): string[] {
  if (raw === undefined || raw === null || raw === '') return [];
  const list = Array.isArray(raw) ? raw : typeof raw === 'string' ? raw.split(',') : undefined;
  if (!list || list.some((t) => typeof t !== 'string'))
    throw errors.validation('tags must be a string or an array of strings');
  if ((list as string[]).some((t) => !isWellFormed(t)))
    throw errors.validation('each tag must be valid Unicode (a tag holds a lone surrogate)');
  const tags = [...new Set((list as string[]).map((t) => t.normalize('NFC').trim()).filter(Boolean))];
  if (tags.length > MAX_TAGS) throw errors.validation(`at most ${MAX_TAGS} tags`);
  if (tags.some((t) => CONTROL.test(t)))
    throw errors.validation('a tag must not contain control characters, line separators or bidirectional overrides');
  if (tags.some((t) => longerThan(t, MAX_TAG_CHARACTERS)))
    throw errors.validation(`each tag must be at most ${MAX_TAG_CHARACTERS} characters`);
  return tags;
}

/** Metadata bounds: nesting (the object itself is level 1), object keys at every level, and size. */
export const METADATA_LIMITS = { depth: 32, keys: 1000, bytes: 16 * 1024 } as const;

/**
 * Metadata: an object (or its JSON text), at most 32 levels deep, 1,000 keys in all and 16 KiB
 * as JSON (UTF-8). The shape is measured without recursion before anything serialises it: a
 * JSON body may legally nest thousands of levels (JSON.parse copes), but JSON.stringify and
 * every recursive walk after it would overflow the stack.
 */
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
  if (!value || typeof value !== 'object' || Array.isArray(value))
    throw errors.validation('metadata must be a JSON object');
  const { depth, keys, bytes } = METADATA_LIMITS;
  let seenKeys = 0;
  const pending: [object, number][] = [[value, 1]];
  while (pending.length > 0) {
    const [node, level] = pending.pop()!;
    const children = Array.isArray(node) ? node : Object.values(node);
    if (!Array.isArray(node)) {
      seenKeys += children.length;
      if (seenKeys > keys)
        throw errors.validation(`metadata must have at most ${keys} keys (counting those of nested objects)`);
    }
    for (const child of children) {
      if (child === null || typeof child !== 'object') continue;
      if (level + 1 > depth) throw errors.validation(`metadata must be nested at most ${depth} levels deep`);
      pending.push([child, level + 1]);
    }
  }
  if (Buffer.byteLength(JSON.stringify(value), 'utf8') > bytes)
    throw errors.validation(`metadata must be at most 16 KiB (${bytes} bytes) as JSON`);
  return value as Record<string, unknown>;
}

export const MAX_CUSTOM_ID_CHARACTERS = 255;

/**
 * custom_id: the caller's own reference, opaque to the service, so kept exactly as sent (not
 * normalised) and free to hold "/" ("orders/2026/7"); never a lone surrogate, a control
 * character, a line separator or a bidi override, and at most 255 characters.
 */
export function parseCustomId(raw: unknown): string | null {
  if (raw === undefined || raw === null || raw === '') return null;
  if (typeof raw !== 'string' || longerThan(raw, MAX_CUSTOM_ID_CHARACTERS)) {
    throw errors.validation(`custom_id must be a string of at most ${MAX_CUSTOM_ID_CHARACTERS} characters`);
  }
  if (unsafeText(raw))
    throw errors.validation(
      'custom_id must be valid Unicode without control characters, line separators or bidirectional overrides',
    );
  return raw;
}

export function parseBooleanFlag(raw: unknown, field: string): boolean {
  if (raw === undefined || raw === null || raw === '' || raw === false || raw === 'false') return false;
  if (raw === true || raw === 'true') return true;
  throw errors.validation(`${field} must be true or false`);
}
