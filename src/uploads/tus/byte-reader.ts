// Cuts one request body into consecutive pieces of chosen lengths, each a stream of its own, so
// that a tus PATCH can be written as whole multipart parts without holding a part in memory.
import { Readable } from 'node:stream';

export class ByteReader {
  private readonly it: AsyncIterator<Buffer>;
  private pending: Buffer | null = null;
  private done = false;

  constructor(source: AsyncIterable<Buffer | Uint8Array>) {
    const inner = source[Symbol.asyncIterator]();
    this.it = {
      next: async () => {
        const r = await inner.next();
        return r.done ? r : { done: false, value: Buffer.isBuffer(r.value) ? r.value : Buffer.from(r.value) };
      },
      return: async () => {
        await inner.return?.();
        return { done: true, value: undefined };
      },
    };
  }

  /** True once the body has ended and every byte was handed out. */
  get ended(): boolean {
    return this.done && this.pending === null;
  }

  /** The next bytes of the body, at most `n` (fewer when the body ends first). */
  async *take(n: number): AsyncGenerator<Buffer> {
    let left = n;
    while (left > 0) {
      let chunk = this.pending;
      this.pending = null;
      if (!chunk) {
        if (this.done) return;
        const r = await this.it.next();
        if (r.done) {
          this.done = true;
          return;
        }
        chunk = r.value;
      }
      if (chunk.length > left) {
        this.pending = chunk.subarray(left);
        chunk = chunk.subarray(0, left);
      }
      left -= chunk.length;
      if (chunk.length > 0) yield chunk;
    }
  }

  /** Whether any byte is left, reading ahead one chunk if needed. */
  async hasMore(): Promise<boolean> {
    while (this.pending === null || this.pending.length === 0) {
      if (this.done) return false;
      const r = await this.it.next();
      if (r.done) {
        this.done = true;
        this.pending = null;
        return false;
      }
      this.pending = r.value;
    }
    return true;
  }
}

/** One stream of `first` (if any) and then `rest`. */
export function joined(first: Readable | null, rest: AsyncIterable<Buffer>): Readable {
  return Readable.from(
    (async function* () {
      if (first) for await (const chunk of first) yield chunk as Buffer;
      yield* rest;
    })(),
    { objectMode: false },
  );
}
