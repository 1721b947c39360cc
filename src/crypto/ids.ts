import { createHash, randomBytes, randomUUID } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** Uniformly random base62 string (rejection sampling, so no character is favoured). */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248) out += BASE62[byte % 62];
      if (out.length === length) break;
    }
  }
  return out;
}

export const newUuid = (): string => randomUUID();

/** Workspace ids, file_no and folder_no: short URL-safe ids (base62, 12 characters, ~71 bits). */
export const newShortId = (): string => randomBase62(12);

export type KeyType = 'public' | 'private';

export const KEY_PREFIX: Record<KeyType, string> = { public: 'stw_pk_', private: 'stw_sk_' };

/** An API key: its type in the prefix, then 43 base62 characters (over 256 random bits). */
export function newApiKey(type: KeyType): string {
  return KEY_PREFIX[type] + randomBase62(43);
}

/** API keys are stored only as this hash. They are long random strings, so a fast hash is enough. */
export function hashApiKey(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

/** What may be shown of a key after it is created: its prefix and last four characters. */
export function keyHint(key: string): string {
  const type = key.startsWith(KEY_PREFIX.public) ? KEY_PREFIX.public : KEY_PREFIX.private;
  return `${type}…${key.slice(-4)}`;
}

/**
 * A workspace's delivery key (signed transformations): "stw_dk_" and 43 base62 characters. The
 * whole text, as UTF-8, is the HMAC key, so any language can use it as it is.
 */
export function newDeliveryKey(): string {
  return `stw_dk_${randomBase62(43)}`;
}

/** Standard Webhooks secret: "whsec_" and base64 of 32 random bytes. */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const isUuid = (value: string): boolean => UUID_RE.test(value);
