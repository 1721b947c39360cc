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
  /** Why a probe gave nothing (debug level: a failed probe is an ordinary outcome). */
  debug?: (obj: object, msg: string) => void;
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
  const started = Date.now();
  let stream: Readable | undefined;
  let timer: NodeJS.Timeout | undefined;
  try {
    const work = (async () => {
      const localPath = deps.storage.localPath?.(key);
      let input: MediaInput;
      if (localPath) input = { path: localPath };
      else {
        stream = await deps.storage.get(key);
        input = { stream, size };
      }
      // Opening the object took part of the budget.
      const left = () => Math.max(1, timeoutMs - (Date.now() - started));
      const result = await probeMedia(deps.engine, input, { demuxer, timeoutMs: left() });
      if (result.duration === null && !localPath && deps.engine.ffmpeg) {
        // A pipe cannot seek to where some formats keep their length: read it through once more.
        stream?.destroy();
        stream = await deps.storage.get(key);
        const duration = await measureDuration(deps.engine, stream, { demuxer, timeoutMs: left() });
        if (duration !== null) {
          result.duration = duration;
          result.media.duration = duration;
        }
      }
      return result;
    })();
    // The storage read itself is bounded too (an object store that does not answer).
    const expired = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`probe budget of ${timeoutMs} ms spent`)), timeoutMs + 250);
    });
    work.catch(() => {});
    return await Promise.race([work, expired]);
  } catch (err) {
    deps.debug?.({ key, mimeType: baseType, err: (err as Error).message }, 'media probe gave nothing');
    return null;
  } finally {
    clearTimeout(timer);
    stream?.destroy();
  }
}
