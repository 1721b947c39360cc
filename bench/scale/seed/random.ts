// Randomness for the seeder: a seeded generator for the shape of the data (which folder, which
// tags, what size), so two seeds of one size look alike, and fast ids from a pool of random
// bytes (file_no, folder_no, SHA-256), shaped as the service makes them.
import { randomBytes } from 'node:crypto';

/** sfc32: small, fast and good enough for picking data; `seed` makes it repeatable. */
export class Rng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(seed: number) {
    this.a = 0x9e3779b9;
    this.b = 0x243f6a88;
    this.c = 0xb7e15162;
    this.d = seed >>> 0;
    for (let i = 0; i < 15; i++) this.next();
  }

  /** A float in [0, 1). */
  next(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return (t >>> 0) / 4294967296;
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)];
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  /** Log-normal around `median` (sigma in natural-log units), as file sizes are. */
  logNormal(median: number, sigma: number): number {
    const u = 1 - this.next();
    const v = this.next();
    const z = Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
    return median * Math.exp(sigma * z);
  }
}

/** Picks index i with weight w[i], in O(log n) (cumulative weights, binary search). */
export class Weighted {
  private readonly cumulative: number[] = [];

  constructor(weights: readonly number[]) {
    let sum = 0;
    for (const w of weights) this.cumulative.push((sum += w));
  }

  pick(rng: Rng): number {
    const x = rng.next() * this.cumulative[this.cumulative.length - 1];
    let lo = 0;
    let hi = this.cumulative.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.cumulative[mid] > x) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  }
}

/** Zipf weights 1/rank^s for `n` items: a few very common, a long tail of rare ones. */
export const zipf = (n: number, s = 1): number[] => Array.from({ length: n }, (_, i) => 1 / (i + 1) ** s);

/**
 * Cryptographic random bytes drawn from a refilled pool: ids at millions per second. Ids are
 * written into a buffer and decoded once, so each is one flat string (concatenating characters
 * would leave a rope of small strings per id for the garbage collector to copy).
 */
class BytePool {
  private pool = randomBytes(1 << 16);
  private at = 0;

  /** `n` random bytes' offset in `this.pool` (valid until the next call). */
  private take(n: number): number {
    if (this.at + n > this.pool.length) {
      this.pool = randomBytes(1 << 16);
      this.at = 0;
    }
    this.at += n;
    return this.at - n;
  }

  hex(bytes: number): string {
    const at = this.take(bytes);
    return this.pool.toString('hex', at, at + bytes);
  }

  base62(length: number): string {
    const out = Buffer.allocUnsafe(length);
    let n = 0;
    while (n < length) {
      const at = this.take(length);
      for (let i = at; i < at + length && n < length; i++) {
        const b = this.pool[i];
        if (b < 248) out[n++] = BASE62[b % 62];
      }
    }
    return out.toString('latin1');
  }
}

const BASE62 = Buffer.from('0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz', 'latin1');
const bytes = new BytePool();

/** 12 base62 characters, uniformly (as crypto/ids.ts newShortId). */
export const shortId = (): string => bytes.base62(12);

/** 64 hex characters: stands in for the SHA-256 of bytes that are never written. */
export const fakeSha256 = (): string => bytes.hex(32);
