// Probing at upload: a video or audio file is looked at by ffprobe before its record is
// written, so the record carries its displayed size, duration and `media` details. A probe that
// fails, is refused or runs out of time is not an upload failure: the file is stored as it
// came, with those fields null. Nothing here waits longer than the probe budget.
//
// Where the bytes come from: a local path when the storage has one (ffprobe seeks and reads
// only the headers it needs); otherwise the object streamed from storage to ffprobe's stdin. We
// chose the stream over a presigned GET URL for object stores: ffprobe then has no network
// protocol at all (only `pipe`), so no byte of an upload can make it open a connection, and no
// credential-bearing URL appears in a process's arguments. The cost is that a file whose index
// sits at its end (MP4 without faststart) is read through to it, within the same time budget.
import type { Readable } from 'node:stream';
import { demuxerFor, isTimedMedia } from '../media/video/containers.ts';
import type { VideoEngine } from '../media/video/engine.ts';
import { type MediaInput, measureDuration, type ProbeResult, probeMedia } from '../media/video/probe.ts';
import type { StorageDriver } from '../storage/driver.ts';

export interface MediaProbeDeps {
  engine: VideoEngine;
  storage: StorageDriver;
  /** Probes at once on this node; an upload waits for a slot within its probe budget. */
  slots?: ProbeSlots;
  /** Why a probe gave nothing (debug level: a failed probe is an ordinary outcome). */
  debug?: (obj: object, msg: string) => void;
}

/** A counting semaphore whose waits end at a deadline: a burst of uploads cannot start a burst of ffprobes. */
export class ProbeSlots {
  private running = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly max: number) {}

  /** A release function, or null when no slot freed up before `deadline` (ms since the epoch). */
  acquire(deadline: number): Promise<(() => void) | null> {
    if (this.running < this.max) {
      this.running++;
      return Promise.resolve(this.releaser());
    }
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.running++;
        resolve(this.releaser());
      };
      const timer = setTimeout(
        () => {
          const i = this.waiting.indexOf(wake);
          if (i >= 0) this.waiting.splice(i, 1);
          resolve(null);
        },
        Math.max(0, deadline - Date.now()),
      );
      this.waiting.push(wake);
    });
  }

  private releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.running--;
      this.waiting.shift()?.();
    };
  }
}

/** The probe of a stored object, or null: not media, no ffprobe, refused, failed or timed out. */
export async function probeStored(
  deps: MediaProbeDeps,
  key: string,
  mimeType: string,
  /** The object's size, for estimates ffprobe cannot make on a pipe. */
  size?: number,
): Promise<ProbeResult | null> {
  const baseType = mimeType.split(';')[0].trim().toLowerCase();
  if (!isTimedMedia(baseType) || !deps.engine.ffprobe) return null;
  const demuxer = demuxerFor(baseType);
  if (!demuxer) return null;
  const timeoutMs = deps.engine.settings.probeTimeoutMs;
  const deadline = Date.now() + timeoutMs;
  const left = () => deadline - Date.now();
  let stream: Readable | undefined;
  let timer: NodeJS.Timeout | undefined;
  let abandoned = false;
  const release = deps.slots ? await deps.slots.acquire(deadline) : () => {};
  if (!release) {
    deps.debug?.({ key, mimeType: baseType }, 'media probe skipped: no probe slot within the budget');
    return null;
  }
  /** A storage read that ended after the budget is let go at once, never handed to ffprobe. */
  const open = async (): Promise<Readable> => {
    const s = await deps.storage.get(key);
    if (abandoned || left() <= 0) {
      s.destroy();
      throw new Error('the storage read ended after the probe budget');
    }
    stream = s;
    return s;
  };
  try {
    const work = (async () => {
      const localPath = deps.storage.localPath?.(key);
      const input: MediaInput = localPath ? { path: localPath } : { stream: await open(), size };
      const result = await probeMedia(deps.engine, input, { demuxer, timeoutMs: Math.max(1, left()) });
      if (result.duration === null && !localPath && deps.engine.ffmpeg && left() > 0) {
        // A pipe cannot seek to where some formats keep their length: read it through once more.
        stream?.destroy();
        const again = await open();
        const duration = await measureDuration(deps.engine, again, { demuxer, timeoutMs: Math.max(1, left()) });
        if (duration !== null) {
          result.duration = duration;
          result.media.duration = duration;
        }
      }
      return result;
    })();
    // ffprobe is bounded by its own timer; this one bounds the storage read (an object store
    // that does not answer), with a margin for the child's exit.
    const expired = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`probe budget of ${timeoutMs} ms spent`)), timeoutMs + 250);
    });
    // The slot is held until the work has really ended, even when the answer went without it.
    work.then(release, release);
    return await Promise.race([work, expired]);
  } catch (err) {
    deps.debug?.({ key, mimeType: baseType, err: (err as Error).message }, 'media probe gave nothing');
    return null;
  } finally {
    abandoned = true;
    clearTimeout(timer);
    stream?.destroy();
  }
}
