// Video renditions (docs/video.md): made by a `video.transcode` job, never within the request.
// Delivery asks `request()` for a rendition not in storage yet; the first ask queues the job
// (keyed by the rendition's storage key, so identical asks on any node coalesce into one job)
// and answers "triggered", later asks "processing" while the job waits or runs, and once the
// job has stored the rendition delivery serves it like any other (Range, ETag, the rendition
// cache's ledger and budget). A transcode that fails for a reason a retry cannot fix (the video,
// a cap, ffmpeg's verdict) leaves a small marker object beside the rendition
// (`<key>.failed`, JSON), so every node answers the same error for an hour instead of
// "processing" forever; a failure of storage or the database throws, and the queue retries.
//
// `run()` is the job's handler: a plain function of its payload, so a separate worker process
// can run it with the same dependencies.
import { randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { AppError, appError, errors } from '../errors.ts';
import type { JobLogger, JobQueue } from '../jobs/types.ts';
import type { VideoEngine } from '../media/video/engine.ts';
import type { MediaInput } from '../media/video/probe.ts';
import { HLS_MASTER, makeStream, streamFileKind, withQuery } from '../media/video/stream.ts';
import type { VideoFormat, VideoSpec } from '../media/video/tokens.ts';
import { type TranscodeSettings, type TrimPlan, transcode } from '../media/video/transcode.ts';
import { spoolToFile } from '../media/spool.ts';
import { ObjectNotFoundError, type StorageDriver } from '../storage/driver.ts';
import type { RenditionCache } from './rendition-cache.ts';

/** The job's payload: everything the transcode needs, as plain JSON (it is stored on PostgreSQL). */
export interface VideoTranscodeJob {
  /** The rendition's storage key (`<blob key>.renditions/video.….mp4`). */
  key: string;
  workspaceId: string;
  /** The source blob. */
  storageKey: string;
  sha256: string;
  size: number;
  /** The one demuxer ffmpeg may use (containers.ts). */
  demuxer: string;
  spec: VideoSpec;
  format: VideoFormat;
  trim: TrimPlan;
}

/**
 * The `video.stream` job's payload: a whole adaptive-streaming package (media/video/stream.ts),
 * keyed by its master playlist's storage key.
 */
export interface VideoStreamJob {
  /** The master playlist's storage key (`<blob key>.renditions/stream.h_…/ar-master.m3u8`): written last. */
  key: string;
  /** The package's folder (`<blob key>.renditions/stream.h_…/`): every file of it is stored under it. */
  prefix: string;
  workspaceId: string;
  storageKey: string;
  sha256: string;
  size: number;
  demuxer: string;
  ladder: number[];
  /** Whether the video has an audio stream to carry (the probe at upload). */
  audio: boolean;
  trim: TrimPlan;
}

/** What a request for a rendition still being made is answered (202). */
export interface PendingAnswer {
  status: 'triggered' | 'processing';
  /** 0 to 1, when this node runs the job and knows the output's length. */
  progress?: number;
}

/** How long a failure is answered before the next request tries again. */
export const FAILURE_TTL_MS = 3600_000;

interface FailureMarker {
  message: string;
  at: string;
}

export interface VideoRenditionDeps {
  storage: StorageDriver;
  jobs: JobQueue;
  engine: VideoEngine;
  settings: TranscodeSettings;
  /** Where sources from object storage and outputs are written while a transcode runs. */
  tmpDir: string;
  renditions?: RenditionCache;
  log?: JobLogger;
}

export const transcodeJobKey = (renditionKey: string) => `video.transcode:${renditionKey}`;
export const streamJobKey = (masterKey: string) => `video.stream:${masterKey}`;
const markerKey = (renditionKey: string) => `${renditionKey}.failed`;

export class VideoRenditions {
  readonly engine: VideoEngine;
  readonly settings: TranscodeSettings;
  /** Transcodes run on this node (tests read it). */
  readonly stats = { transcodes: 0, streams: 0, failures: 0 };
  /** Seconds written per rendition key, while this node transcodes it. */
  private readonly progress = new Map<string, { done: number; total?: number }>();
  private running = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly deps: VideoRenditionDeps) {
    this.engine = deps.engine;
    this.settings = deps.settings;
  }

  /** Defines the job on this node's queue (an API node and a worker alike). */
  define(): void {
    this.deps.jobs.define('video.transcode', (job) => this.run(job), {
      maxAttempts: 3,
      concurrency: this.settings.concurrency,
    });
    this.deps.jobs.define('video.stream', (job) => this.runStream(job), {
      maxAttempts: 3,
      concurrency: this.settings.concurrency,
    });
  }

  /** As `request`, for a streaming package (one job for the whole ladder). */
  requestStream(job: VideoStreamJob): Promise<PendingAnswer> {
    return this.ask(job.key, streamJobKey(job.key), (bound) =>
      this.deps.jobs.addUnlessFull('video.stream', job, bound),
    );
  }

  /**
   * The answer for a rendition not in storage: TRANSCODE_FAILED (422) when its last transcode
   * failed within the hour, else "processing" when its job waits or runs (on any node), else
   * the job is queued and the answer is "triggered".
   */
  request(job: VideoTranscodeJob): Promise<PendingAnswer> {
    return this.ask(job.key, transcodeJobKey(job.key), (bound) =>
      this.deps.jobs.addUnlessFull('video.transcode', job, bound),
    );
  }

  /**
   * `add` queues the job unless its kind already has `maxLive` jobs waiting or running
   * (STOWAGE_TRANSCODE_QUEUE, counted per kind: transcodes and stream packages apart).
   */
  private async ask(
    key: string,
    jobKey: string,
    add: (bound: { jobKey: string; maxLive: number; staleAfterMs: number }) => Promise<boolean>,
  ): Promise<PendingAnswer> {
    const failed = await this.failure(key);
    if (failed) throw appError('TRANSCODE_FAILED', `This video rendition could not be made: ${failed.message}`);
    // A job running for longer than a transcode may is one whose node died: queued again.
    const staleAfterMs = this.settings.timeoutMs * 2 + 60_000;
    if ((await this.deps.jobs.missing([jobKey], staleAfterMs)).size === 0) {
      const p = this.progress.get(key);
      const progress = p?.total ? Math.min(1, Math.round((p.done / p.total) * 1000) / 1000) : undefined;
      return progress === undefined ? { status: 'processing' } : { status: 'processing', progress };
    }
    // Bounded across the deployment: each distinct URL of a public video is a new job, so an
    // anonymous client could otherwise queue hours of transcoding.
    const added = await add({ jobKey, maxLive: this.settings.maxQueued, staleAfterMs });
    if (!added) throw errors.transcodeBusy(30);
    return { status: 'triggered' };
  }

  /** The failure recorded for `key` within FAILURE_TTL_MS; an older one is removed (the next ask tries again). */
  private async failure(key: string): Promise<FailureMarker | undefined> {
    const marker = markerKey(key);
    let text: string;
    try {
      const chunks: Buffer[] = [];
      for await (const chunk of await this.deps.storage.get(marker)) chunks.push(chunk as Buffer);
      text = Buffer.concat(chunks).toString('utf8');
    } catch (err) {
      if (err instanceof ObjectNotFoundError) return undefined;
      throw err;
    }
    let parsed: FailureMarker | undefined;
    try {
      const v = JSON.parse(text) as Partial<FailureMarker>;
      if (typeof v.message === 'string' && typeof v.at === 'string') parsed = { message: v.message, at: v.at };
    } catch {
      // Unreadable: treated as expired.
    }
    if (parsed && Date.now() - Date.parse(parsed.at) < FAILURE_TTL_MS) return parsed;
    await this.deps.storage.delete(marker);
    return undefined;
  }

  /** A slot of this node's STOWAGE_TRANSCODE_CONCURRENCY; the returned function frees it. */
  private async slot(): Promise<() => void> {
    if (this.running < this.settings.concurrency) this.running++;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    return () => {
      const next = this.waiting.shift();
      if (next) next();
      else this.running--;
    };
  }

  /** The job: makes and stores one rendition. Does nothing when it is already stored or its video is gone. */
  run(job: VideoTranscodeJob): Promise<void> {
    return this.produce(job, 'transcodes', async (input, tmp, onProgress) => {
      const outPath = join(this.deps.tmpDir, `${randomUUID()}.${job.format}`);
      tmp.push(outPath);
      const size = await transcode(this.engine, this.settings, {
        input,
        demuxer: job.demuxer,
        spec: job.spec,
        format: job.format,
        trim: job.trim,
        outPath,
        onProgress,
      });
      return () => this.store(job, outPath, size);
    });
  }

  /**
   * The `video.stream` job: makes a whole package with one ffmpeg run into a temporary folder,
   * then stores it (stream.ts). Does nothing when its master is stored or its video is gone.
   */
  runStream(job: VideoStreamJob): Promise<void> {
    return this.produce(job, 'streams', async (input, tmp, onProgress) => {
      const outDir = await mkdtemp(join(this.deps.tmpDir, 'stream-'));
      tmp.push(outDir);
      const files = await makeStream(this.engine, this.settings, {
        input,
        demuxer: job.demuxer,
        ladder: job.ladder,
        audio: job.audio,
        trim: job.trim,
        outDir,
        onProgress,
      });
      return () => this.storePackage(job, outDir, files);
    });
  }

  /**
   * What both jobs do around their ffmpeg run: nothing when `job.key` is stored or the video is
   * gone; else a slot of this node, the source (`input`), progress for `ask`, and `make`, which
   * runs ffmpeg into paths it adds to `tmp` (files or folders, removed at the end whatever
   * happens) and returns the step that stores its output. A refusal (an AppError below 500:
   * ffmpeg's verdict on this video, the same next time) is recorded as the failure marker.
   */
  private async produce(
    job: VideoTranscodeJob | VideoStreamJob,
    counter: 'transcodes' | 'streams',
    make: (input: MediaInput, tmp: string[], onProgress: (done: number) => void) => Promise<() => Promise<void>>,
  ): Promise<void> {
    const { storage } = this.deps;
    if (await storage.stat(job.key)) return;
    const free = await this.slot();
    const tmp: string[] = [];
    try {
      if (await storage.stat(job.key)) return;
      // Deleted since the ask: its renditions went with it, and nothing may be written beside it.
      if (!(await this.blobExists(job))) return;
      await mkdir(this.deps.tmpDir, { recursive: true });
      let input: MediaInput;
      try {
        input = await this.input(job, tmp);
      } catch (err) {
        // The video was deleted since the ask: nothing to make, nobody to tell.
        if (err instanceof ObjectNotFoundError) return;
        throw err;
      }
      const total = job.trim.seconds;
      this.progress.set(job.key, { done: 0, total });
      this.stats[counter]++;
      let store: () => Promise<void>;
      try {
        store = await make(input, tmp, (done) => this.progress.set(job.key, { done, total }));
      } catch (err) {
        // ffmpeg's verdict on this video and these tokens: the same next time, so recorded.
        if (err instanceof AppError && err.status < 500) {
          // A failure of a video deleted meanwhile (its file vanished under ffmpeg) is nobody's.
          if (await this.blobExists(job)) await this.recordFailure(job.key, err.message);
          return;
        }
        throw err;
      }
      await store();
    } finally {
      this.progress.delete(job.key);
      free();
      await Promise.all(tmp.map((p) => rm(p, { recursive: true, force: true })));
    }
  }

  /**
   * A package into storage, each file counted in the rendition cache like any rendition, the
   * master last: a package is visible (served, and "done" to every node) only once every file it
   * names is stored, so a player never meets a partial one. Playlists are stored with `v=` on
   * every address they hold (the blob's hash), so the files a player fetches through them are
   * content-addressed and cached as immutable (routes/delivery.ts contentAddressed).
   */
  private async storePackage(job: VideoStreamJob, dir: string, files: Array<{ name: string; size: number }>) {
    const { storage, renditions } = this.deps;
    const version = `v=${job.sha256.slice(0, 16)}`;
    const storeOne = async (name: string) => {
      const key = `${job.prefix}${name}`;
      const path = join(dir, name);
      const kind = streamFileKind(name);
      const body =
        kind === 'segment' ? undefined : Buffer.from(withQuery(await readFile(path, 'utf8'), kind, version), 'utf8');
      await renditions?.reserve(key);
      try {
        await storage.put(key, body ? Readable.from([body]) : createReadStream(path), { durable: false });
      } catch (err) {
        await renditions?.abandon(key);
        throw err;
      }
      await renditions?.stored(key, body ? body.length : (files.find((f) => f.name === name)?.size ?? 0));
    };
    const rest = files.map((f) => f.name).filter((n) => n !== HLS_MASTER);
    // A few at once: a long video is hundreds of small segments.
    for (let i = 0; i < rest.length; i += 4) await Promise.all(rest.slice(i, i + 4).map(storeOne));
    await storeOne(HLS_MASTER);
    if (!(await this.blobExists(job))) {
      await storage.delete(job.key);
      await Promise.all(rest.map((n) => storage.delete(`${job.prefix}${n}`)));
      await renditions?.repo.removeOwner(job.storageKey);
    }
  }

  private async blobExists(job: Pick<VideoTranscodeJob, 'workspaceId' | 'sha256' | 'storageKey'>): Promise<boolean> {
    const ledger = this.deps.renditions;
    return ledger ? ledger.repo.blobExists(job.workspaceId, job.sha256, job.storageKey) : true;
  }

  private async recordFailure(key: string, message: string): Promise<void> {
    this.stats.failures++;
    this.deps.log?.warn({ rendition: key, reason: message }, 'video transcode failed');
    const body = JSON.stringify({ message, at: new Date().toISOString() } satisfies FailureMarker);
    await this.deps.storage.put(markerKey(key), Readable.from([Buffer.from(body)]), { durable: false });
  }

  /**
   * The source for ffmpeg: the local file, else a temporary copy (an MP4's index is often at its
   * end, which a pipe cannot seek back to; a transcode reads the whole file anyway).
   */
  private async input(job: Pick<VideoTranscodeJob, 'storageKey' | 'size'>, tmp: string[]): Promise<MediaInput> {
    const local = this.deps.storage.localPath?.(job.storageKey);
    if (local) return { path: local };
    const stream = await this.deps.storage.get(job.storageKey);
    const path = await spoolToFile(stream, this.deps.tmpDir, job.size + 1);
    tmp.push(path);
    return { path };
  }

  /**
   * The finished file into storage (a put is whole or nothing on every driver), counted in the
   * rendition cache: the row before the object, its size after; a video deleted meanwhile takes
   * the rendition with it.
   */
  private async store(job: VideoTranscodeJob, outPath: string, size: number): Promise<void> {
    const { storage, renditions } = this.deps;
    await renditions?.reserve(job.key);
    try {
      await storage.put(job.key, createReadStream(outPath), { durable: false });
    } catch (err) {
      await renditions?.abandon(job.key);
      throw err;
    }
    await renditions?.stored(job.key, size);
    if (!(await this.blobExists(job))) {
      await storage.delete(job.key);
      await renditions?.repo.removeOwner(job.storageKey);
    }
  }
}
