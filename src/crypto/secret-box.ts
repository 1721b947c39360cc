// Authenticated encryption of secrets at rest: AES-256-GCM under the master key. Each sealed
// value names the key that sealed it, so a master key can be rotated while old values are
// still readable, and is bound to its owner (`aad`) so it cannot be copied onto another row.
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

const VERSION = 'v1';

export class SecretBox {
  private readonly keys = new Map<string, Buffer>();
  private readonly currentId: string;

  constructor(current: Buffer, previous: Buffer[] = []) {
    if (current.length !== 32) throw new Error('master key must be 32 bytes');
    this.currentId = keyId(current);
    this.keys.set(this.currentId, current);
    for (const key of previous) this.keys.set(keyId(key), key);
  }

  seal(plaintext: string, aad: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.keys.get(this.currentId)!, iv);
    cipher.setAAD(Buffer.from(aad, 'utf8'));
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return [
      VERSION,
      this.currentId,
      iv.toString('base64url'),
      cipher.getAuthTag().toString('base64url'),
      body.toString('base64url'),
    ].join('.');
  }

  open(sealed: string, aad: string): string {
    const [version, id, iv, tag, body] = sealed.split('.');
    if (version !== VERSION || !id || !iv || !tag || body === undefined) throw new Error('sealed value is malformed');
    const key = this.keys.get(id);
    if (!key) throw new Error(`sealed value was made with master key ${id}, which is not configured`);
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
    decipher.setAAD(Buffer.from(aad, 'utf8'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString('utf8');
  }

  /** True when `sealed` was made with a key other than the current one. */
  isStale(sealed: string): boolean {
    return sealed.split('.')[1] !== this.currentId;
  }
}

/** A short public fingerprint of a key; reveals nothing useful about the key itself. */
export function keyId(key: Buffer): string {
  return createHash('sha256').update('stowage-master-key-id').update(key).digest('hex').slice(0, 12);
}
