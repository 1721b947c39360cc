// Part upload URLs for storage without presigning of its own (local disk): signed by the
// service (HMAC-SHA256 over session, part number, exact length and expiry), so a URL is
// useless for any other part, session, length or time.
import { createHmac, timingSafeEqual } from 'node:crypto';

export class PartUrlSigner {
  private readonly key: Buffer;

  constructor(masterKey: Buffer) {
    // A key of its own, derived from the master key: URLs never expose anything else.
    this.key = createHmac('sha256', masterKey).update('stowage/part-url/v1').digest();
  }

  private mac(sessionId: string, partNumber: number, length: number, expires: number): string {
    return createHmac('sha256', this.key).update(`${sessionId}\n${partNumber}\n${length}\n${expires}`).digest('base64url');
  }

  url(publicUrl: string, sessionId: string, partNumber: number, length: number, expires: number): string {
    const sig = this.mac(sessionId, partNumber, length, expires);
    return `${publicUrl}/api/v1/multipart/${sessionId}/parts/${partNumber}?length=${length}&expires=${expires}&signature=${sig}`;
  }

  /** 'ok', 'bad' (tampered or malformed) or 'expired'. */
  verify(sessionId: string, partNumber: number, q: { length?: string; expires?: string; signature?: string }, nowSeconds: number): 'ok' | 'bad' | 'expired' {
    if (!q.length || !q.expires || !q.signature || !/^\d{1,16}$/.test(q.length) || !/^\d{1,12}$/.test(q.expires)) return 'bad';
    const expected = Buffer.from(this.mac(sessionId, partNumber, Number(q.length), Number(q.expires)));
    const given = Buffer.from(q.signature);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return 'bad';
    return Number(q.expires) < nowSeconds ? 'expired' : 'ok';
  }
}
