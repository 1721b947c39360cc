// Cuts one request body into consecutive pieces of chosen lengths, each a stream of its own, so
// that a tus PATCH can be written as whole multipart parts without holding a part in memory.
// The body is read in paused mode (`read()`, and `unshift` of what belongs to the next piece):
// no promise per chunk, which an async iterator would cost on every 64 KiB of a large upload.
import { Readable } from 'node:stream';

export class ByteReader {
  private failure: Error | null = null;

  constructor(private readonly source: Readable) {
    source.on('error', (err) => {
      this.failure = err;
    });
  }

  /**
   * The next bytes of the body, at most `n` (fewer when the body ends first), as a stream. Read
   * one piece to its end (or destroy it) before taking the next.
   */
  take(n: number): Readable {
    const { source } = this;
    let left = n;
    let done = false;
    const finish = (err?: Error) => {
      if (done) return;
      done = true;
      source.off('readable', pull);
      source.off('end', onEnd);
      source.off('error', onError);
      if (err) piece.destroy(err);
      else piece.push(null);
    };
    const onEnd = () => finish();
    const onError = (err: Error) => finish(err);
    const pull = () => {
      while (!done) {
        if (left === 0) return finish();
        const chunk = source.read() as Buffer | null;
        if (chunk === null) {
          // More comes with 'readable', or the body is over ('end'; already, if it ended before).
          if (source.readableEnded) finish(this.failure ?? undefined);
          return;
        }
        let mine = chunk;
        if (chunk.length > left) {
          source.unshift(chunk.subarray(left));
          mine = chunk.subarray(0, left);
        }
        left -= mine.length;
        if (left === 0) {
          piece.push(mine);
          return finish();
        }
        if (!piece.push(mine)) return;
      }
    };
    const piece = new Readable({
      read: pull,
      destroy: (err, cb) => {
        done = true;
        source.off('readable', pull);
        source.off('end', onEnd);
        source.off('error', onError);
        cb(err);
      },
    });
    if (this.failure) {
      finish(this.failure);
      return piece;
    }
    source.on('readable', pull);
    source.once('end', onEnd);
    source.once('error', onError);
    return piece;
  }

  /** Whether any byte is left, waiting for the body if needed. */
  hasMore(): Promise<boolean> {
    const { source } = this;
    return new Promise((resolve) => {
      const check = () => {
        if (source.readableLength > 0) return settle(true);
        if (source.readableEnded || source.destroyed || this.failure) return settle(false);
        // read(0) fills the buffer (or reaches the end) without taking a byte.
        source.read(0);
        if (source.readableLength > 0) return settle(true);
        if (source.readableEnded) return settle(false);
      };
      const settle = (more: boolean) => {
        source.off('readable', check);
        source.off('end', check);
        source.off('error', check);
        source.off('close', check);
        resolve(more);
      };
      source.on('readable', check);
      source.on('end', check);
      source.on('error', check);
      source.on('close', check);
      check();
    });
  }
}

/** One stream of `first` (if any) and then `rest`. */
export function joined(first: Readable | null, rest: Readable): Readable {
  if (!first) return rest;
  return Readable.from(
    (async function* () {
      for await (const chunk of first) yield chunk as Buffer;
      for await (const chunk of rest) yield chunk as Buffer;
    })(),
    { objectMode: false },
  );
}
