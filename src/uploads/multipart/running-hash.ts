// SHA-256 of a session's file, computed while the parts arrive, so that complete need not read
// the whole file again. Parts are hashed in place, in file order, on the hashing thread
// (FileHasher): each part as soon as it and every part before it are written. Lost on restart,
// on a re-upload of a part already hashed or being written, or on another node: complete then
// reads the file once.
import type { MultipartSessionRow } from '../../db/schema.ts';
import type { FileHasher, HashJob } from '../hashing/file-hasher.ts';
import { type PartLayout, partLength } from './part-layout.ts';

class SessionHash {
  private next = 1;
  private readonly written = new Set<number>();
  private readonly writing = new Map<number, number>();
  private broken = false;

  constructor(
    private readonly job: HashJob,
    private readonly path: string,
    private readonly s: PartLayout,
    readonly expireAt: number,
  ) {}

  /** Part n starts arriving; `done` is called when it is written (or failed). */
  begin(n: number): (ok: boolean) => void {
    // The same bytes twice, or two writers at once: the hash can no longer be trusted.
    if (n < this.next || this.written.has(n) || this.writing.has(n)) this.broken = true;
    this.writing.set(n, (this.writing.get(n) ?? 0) + 1);
    return (ok) => {
      const left = this.writing.get(n)! - 1;
      if (left === 0) this.writing.delete(n);
      else this.writing.set(n, left);
      if (!ok) return;
      this.written.add(n);
      while (!this.broken && this.written.has(this.next)) {
        const start = (this.next - 1) * Number(this.s.part_size);
        this.job.feed(this.path, start, start + partLength(this.s, this.next));
        this.written.delete(this.next);
        this.next++;
      }
    };
  }

  /** The file's hash when every part was hashed in order. */
  async digest(partCount: number): Promise<string | undefined> {
    if (this.broken || this.writing.size > 0 || this.next !== partCount + 1) {
      this.job.drop();
      return undefined;
    }
    return this.job.digest().catch(() => undefined);
  }

  drop(): void {
    this.job.drop();
  }
}

/** The running hashes of this node's sessions, by session id. */
export class RunningHashes {
  private readonly sessions = new Map<string, SessionHash>();

  constructor(
    private readonly hasher: FileHasher | undefined,
    private readonly dataPath: ((uploadId: string) => string) | undefined,
  ) {}

  begin(s: MultipartSessionRow, n: number): (ok: boolean) => void {
    let hash = this.sessions.get(s.id);
    if (!hash && this.hasher && this.dataPath) {
      // Started by whichever part arrives first; it still hashes from part 1 on, in order. (After
      // a restart, parts sent before it are missing here, and complete reads the file instead.)
      hash = new SessionHash(this.hasher.start(), this.dataPath(s.upload_id), s, Number(s.expire_at));
      this.sessions.set(s.id, hash);
    }
    return hash ? hash.begin(n) : () => {};
  }

  async take(sessionId: string, partCount: number): Promise<string | undefined> {
    const hash = this.sessions.get(sessionId);
    this.sessions.delete(sessionId);
    return hash?.digest(partCount);
  }

  forget(sessionId: string): void {
    this.sessions.get(sessionId)?.drop();
    this.sessions.delete(sessionId);
  }

  /** Drops hashes of sessions past their expiry (abandoned, or finished on another node). */
  prune(nowSecondsValue: number): void {
    for (const [id, hash] of this.sessions) if (hash.expireAt < nowSecondsValue) this.forget(id);
  }

  get size(): number {
    return this.sessions.size;
  }
}
