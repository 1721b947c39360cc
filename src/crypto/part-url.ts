// Part upload URLs for storage without presigning of its own (local disk): signed by the
// service (HMAC-SHA256 over session, part number, exact length and expiry), so a URL is
// useless for any other part, session, length or time.
//
// The signed message is `${session}\n${length}\n${expires}\n` followed by the part number as a
// 4-byte big-endian integer. That is the layout of a PBKDF2 block (RFC 8018, 5.2): with one
// iteration, block i of PBKDF2-HMAC-SHA256(key, salt) is exactly HMAC-SHA256(key, salt ||
// INT32BE(i)). So the URLs of all the parts that share a length (every part but perhaps the
// last) come from one native call, on the thread pool, instead of one HMAC object per part on
// the event loop: 200 parts take about a third of the time, and a 10,000-part start no longer
// holds the event loop for tens of milliseconds. Each URL is still checked on its own, with
// one plain HMAC.
import { createHmac, pbkdf2, timingSafeEqual } from 'node:crypto';
import { promisify } from 'node:util';

const pbkdf2Async = promisify(pbkdf2);
const MAC_BYTES = 32;

const salt = (sessionId: string, length: number, expires: number) => `${sessionId}\n${length}\n${expires}\n`;

function int32be(n: number): Buffer {
  const b = Buffer.allocUnsafe(4);
  b.writeUInt32BE(n);
  return b;
}

export class PartUrlSigner {
  private readonly key: Buffer;

  constructor(masterKey: Buffer) {
    // A key of its own, derived from the master key: URLs never expose anything else.
    this.key = createHmac('sha256', masterKey).update('stowage/part-url/v1').digest();
  }

  private mac(sessionId: string, partNumber: number, length: number, expires: number): string {
    return createHmac('sha256', this.key)
      .update(salt(sessionId, length, expires))
      .update(int32be(partNumber))
      .digest('base64url');
  }

  /**
   * The layout signed before part URLs were batched (`session\npart\nlength\nexpires`), still
   * accepted so that a session started before an upgrade can finish. The two layouts cannot
   * be confused: the newer one ends in four bytes that are not all digits.
   */
  private legacyMac(sessionId: string, partNumber: number, length: number, expires: number): string {
    return createHmac('sha256', this.key)
      .update(`${sessionId}\n${partNumber}\n${length}\n${expires}`)
      .digest('base64url');
  }

  private format(
    publicUrl: string,
    sessionId: string,
    partNumber: number,
    length: number,
    expires: number,
    sig: string,
  ): string {
    return `${publicUrl}/api/v1/multipart/${sessionId}/parts/${partNumber}?length=${length}&expires=${expires}&signature=${sig}`;
  }

  url(publicUrl: string, sessionId: string, partNumber: number, length: number, expires: number): string {
    return this.format(
      publicUrl,
      sessionId,
      partNumber,
      length,
      expires,
      this.mac(sessionId, partNumber, length, expires),
    );
  }

  /**
   * The URLs of parts 1..lengths.length, where lengths[i] is the exact length of part i + 1.
   * Each run of parts with the same length from part 1 on is one PBKDF2 call (its block
   * numbers are the part numbers); any part after the first change of length is signed alone.
   */
  async urls(publicUrl: string, sessionId: string, lengths: readonly number[], expires: number): Promise<string[]> {
    let run = 0;
    while (run < lengths.length && lengths[run] === lengths[0]) run++;
    const out: string[] = [];
    if (run > 0) {
      const macs = await pbkdf2Async(this.key, salt(sessionId, lengths[0], expires), 1, run * MAC_BYTES, 'sha256');
      for (let i = 0; i < run; i++) {
        out.push(
          this.format(
            publicUrl,
            sessionId,
            i + 1,
            lengths[0],
            expires,
            macs.toString('base64url', i * MAC_BYTES, (i + 1) * MAC_BYTES),
          ),
        );
      }
    }
    for (let i = run; i < lengths.length; i++) out.push(this.url(publicUrl, sessionId, i + 1, lengths[i], expires));
    return out;
  }

  /** 'ok', 'bad' (tampered or malformed) or 'expired'. */
  verify(
    sessionId: string,
    partNumber: number,
    q: { length?: string; expires?: string; signature?: string },
    nowSeconds: number,
  ): 'ok' | 'bad' | 'expired' {
    if (!q.length || !q.expires || !q.signature || !/^\d{1,16}$/.test(q.length) || !/^\d{1,12}$/.test(q.expires))
      return 'bad';
    if (!Number.isInteger(partNumber) || partNumber < 1 || partNumber > 0xffffffff) return 'bad';
    const given = Buffer.from(q.signature);
    const matches = (mac: string) => {
      const expected = Buffer.from(mac);
      return given.length === expected.length && timingSafeEqual(given, expected);
    };
    const length = Number(q.length);
    const expires = Number(q.expires);
    if (
      !matches(this.mac(sessionId, partNumber, length, expires)) &&
      !matches(this.legacyMac(sessionId, partNumber, length, expires))
    )
      return 'bad';
    return expires < nowSeconds ? 'expired' : 'ok';
  }
}
