// Signed delivery URLs for private files: HMAC-SHA256 over the exact path (workspace, tokens,
// file) and the expiry, under a key derived from the master key. A URL for one file or one
// rendition opens nothing else, and nothing after it expires.
import { createHmac, timingSafeEqual } from 'node:crypto';

export class DeliverySigner {
  private readonly key: Buffer;

  constructor(masterKey: Buffer) {
    this.key = createHmac('sha256', masterKey).update('stowage/delivery-url/v1').digest();
  }

  private mac(pathname: string, expires: number): string {
    return createHmac('sha256', this.key).update(`${pathname}\n${expires}`).digest('base64url');
  }

  /** The signature of `pathname` until `expires` (a streaming package's prefix: routes/delivery.ts). */
  signature(pathname: string, expires: number): string {
    return this.mac(pathname, expires);
  }

  /** `url` is absolute; its pathname is what gets signed. */
  sign(url: string, expires: number): string {
    const u = new URL(url);
    u.searchParams.set('expires', String(expires));
    u.searchParams.set('signature', this.mac(u.pathname, expires));
    return u.toString();
  }

  verify(
    pathname: string,
    q: { expires?: string; signature?: string },
    nowSeconds: number,
  ): 'ok' | 'missing' | 'bad' | 'expired' {
    if (!q.expires && !q.signature) return 'missing';
    if (!q.expires || !q.signature || !/^\d{1,12}$/.test(q.expires)) return 'bad';
    const expected = Buffer.from(this.mac(pathname, Number(q.expires)));
    const given = Buffer.from(q.signature);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return 'bad';
    return Number(q.expires) < nowSeconds ? 'expired' : 'ok';
  }
}
