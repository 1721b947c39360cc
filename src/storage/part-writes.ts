// Sealing of multipart uploads whose parts are written through the service (local disk, Azure,
// GCS): once complete or abort seals an upload, part writes in flight are cut and awaited, and
// later ones are refused with MultipartSealedError, until it is unsealed. Per process: every
// part write of an upload and its complete run on the node that holds the session.
import { Transform } from 'node:stream';
import { xxh3 } from '@node-rs/xxhash';
import { MultipartSealedError, PartLengthError } from './driver.ts';

export class PartWriteGate {
  /** Part writes in flight, per upload: what sealing cuts and waits for. */
  private readonly writers = new Map<string, Set<{ cut: AbortController; settled: Promise<unknown> }>>();
  /** Uploads being completed or aborted: part writes are refused. */
  private readonly sealed = new Set<string>();

  async seal(uploadId: string): Promise<void> {
    this.sealed.add(uploadId);
    const running = [...(this.writers.get(uploadId) ?? [])];
    for (const w of running) w.cut.abort(new MultipartSealedError());
    await Promise.allSettled(running.map((w) => w.settled));
  }

  unseal(uploadId: string): void {
    this.sealed.delete(uploadId);
  }

  /**
   * Runs one part write with a signal that the caller's `signal` or a seal aborts. A write cut
   * by a seal fails with MultipartSealedError; any other failure goes through `mapError`.
   */
  async run<T>(
    uploadId: string,
    signal: AbortSignal | undefined,
    write: (signal: AbortSignal) => Promise<T>,
    mapError: (err: unknown) => unknown = (err) => err,
  ): Promise<T> {
    // Registered before the seal is checked: a seal either sees this writer (and cuts it) or
    // came first (and this writer is refused). No third order exists.
    const cut = new AbortController();
    let settle!: () => void;
    const entry = { cut, settled: new Promise<void>((resolve) => (settle = resolve)) };
    let set = this.writers.get(uploadId);
    if (!set) {
      set = new Set();
      this.writers.set(uploadId, set);
    }
    set.add(entry);
    try {
      if (this.sealed.has(uploadId)) throw new MultipartSealedError();
      return await write(signal ? AbortSignal.any([signal, cut.signal]) : cut.signal);
    } catch (err) {
      throw cut.signal.aborted ? new MultipartSealedError() : mapError(err);
    } finally {
      set.delete(entry);
      if (set.size === 0) this.writers.delete(uploadId);
      settle();
    }
  }
}

/**
 * Passes a part's bytes on, failing with PartLengthError as soon as more than `length` arrive
 * or when the body ends short, and computes its ETag as they pass: XXH3-64 in hex, quoted
 * (about 10 GB/s, so it costs the event loop next to nothing). A store that sends the part on
 * with a declared length is thus never left waiting for bytes that will not come. `error` is
 * the length error, when there was one (an HTTP client may report it as something else).
 */
export function partMeter(length: number): {
  stream: Transform;
  check(): void;
  etag(): string;
  readonly error: PartLengthError | undefined;
} {
  const hash = xxh3.Xxh3.withSeed();
  let received = 0;
  let error: PartLengthError | undefined;
  const stream = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      received += chunk.length;
      if (received > length) {
        error = new PartLengthError(length, received);
        return cb(error);
      }
      hash.update(chunk);
      cb(null, chunk);
    },
    flush(cb) {
      if (received !== length) error = new PartLengthError(length, received);
      cb(error ?? null);
    },
  });
  return {
    stream,
    check() {
      if (received !== length) throw new PartLengthError(length, received);
    },
    etag: () => `"${hash.digest().toString(16).padStart(16, '0')}"`,
    get error() {
      return error;
    },
  };
}
