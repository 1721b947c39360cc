// Delivery of stored files: `/{workspace_id}/{path}` serves the original, and
// `/{workspace_id}/{tokens}/{path}` a rendition made by sharp and cached in storage beside the
// blob (`<blob key>.renditions/<canonical tokens>.<format>`), so a second identical request does
// no image work. HTTP concerns (Range, conditional requests) stay in the route.
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import sharp, { type Metadata } from 'sharp';
import { type RenderSettings, renderDefaults } from '../config.ts';
import { RenderQueue, type Slot } from '../media/render-queue.ts';
import type { Db } from '../db/database.ts';
import { FileRepository } from '../db/files.ts';
import { AppError, appError, errors } from '../errors.ts';
import { parseTransform } from '../media/transform/parse.ts';
import { planRendition, type Size } from '../media/transform/plan.ts';
import { formatOfMime, renderImage } from '../media/transform/pipeline.ts';
import { focusedPlan } from '../media/transform/render.ts';
import { canonical, canonicalName } from '../media/transform/canonical.ts';
import { type ClientHints, withHints } from '../media/transform/client-hints.ts';
import { tokenSegmentCount } from '../media/transform/tokens.ts';
import type { OutputFormat, TransformSpec } from '../media/transform/spec.ts';
import { spoolLimit, spoolToFile } from '../media/spool.ts';
import { guardSvgStream, isSvgType } from '../media/svg-guard.ts';
import { type ByteRange, type ObjectInfo, ObjectNotFoundError, type StorageDriver } from '../storage/driver.ts';
import type { RenditionCache } from './rendition-cache.ts';
import { renditionPrefix } from '../uploads/blob-store.ts';
import { createHash } from 'node:crypto';
import { openOrigin, webOriginRequest, webOriginUrl } from '../sources/origin.ts';
import type { SourceService } from './sources.ts';
import type { PresetService } from './presets.ts';
import type { DomainEvents } from '../events.ts';
import type { VideoEngine } from '../media/video/engine.ts';
import { demuxerFor } from '../media/video/containers.ts';
import { extractPoster } from '../media/video/poster.ts';
import { asksForPoster, type PosterSpec, parsePosterTokens, posterName } from '../media/video/poster-tokens.ts';
import type { MediaInput } from '../media/video/probe.ts';
import { defaultVideoFormat, parseVideoTokens, VIDEO_MIME, videoRenditionName } from '../media/video/tokens.ts';
import { planTrim } from '../media/video/transcode.ts';
import {
  capLadder,
  DASH_MANIFEST,
  HLS_MASTER,
  parseLadder,
  STREAM_MIME,
  streamFileKind,
  streamPackageName,
  streamSuffix,
} from '../media/video/stream.ts';
import type { PendingAnswer, VideoRenditions } from './video-renditions.ts';

/** How long a rendition of an origin's object is served before it is made again. */
const ORIGIN_RENDITION_TTL_MS = 24 * 3600 * 1000;

export interface DeliveryTarget {
  /** The first path segment: a workspace id, or `{workspace_id}-{source_name}`. */
  workspaceId: string;
  /** Request headers an origin may see (image_source: canonical_header, forward_header). */
  headers?: Record<string, string | string[] | undefined>;
  /**
   * The query of the delivery URL exactly as requested (without "?"); a web origin gets it
   * (`originQuery`), and it is part of that origin's cache keys. Ignored elsewhere.
   */
  query?: string;
  /**
   * The path after the workspace id exactly as requested: still percent-encoded, without the
   * query. It is decoded here, once (`decodeDeliveryPath`).
   */
  path: string;
  accept: string | undefined;
  /** The request's client hints (clientHints): the default width and dpr_auto of a rendition. */
  hints?: ClientHints;
  /**
   * Called once the file is known and before a rendition of it is made or looked up; throws to
   * refuse (the route: a private file's URL without a valid signature), so that nobody can make
   * the service render what it would then refuse to serve.
   */
  mayRender?: (isPrivate: boolean, streamDepth?: number) => void;
}

export interface Delivered {
  /** Opens the bytes (or a range of them, when `ranges`). */
  open(range?: ByteRange): Promise<Readable>;
  /** Unknown for some origin responses. */
  size?: number;
  ranges: boolean;
  /** An origin's address, for `Link: <…>; rel="canonical"`. */
  canonical?: string;
  contentType: string;
  etag: string;
  lastModified: Date;
  isRendition: boolean;
  /** f_auto answers depend on Accept. */
  varyAccept: boolean;
  /** Other request headers the answer depends on (a web origin's canonical and forwarded headers). */
  vary?: string[];
  isPrivate: boolean;
  /** A rendition's storage key: hits answered from memory are reported to the rendition cache with it. */
  renditionKey?: string;
  /** The stored bytes as a file of this machine (storage with `localPath`), for X-Accel-Redirect. */
  localFile?: string;
  /**
   * A file of a streaming package (media/video/stream.ts): how many trailing path segments name
   * it inside the package (`ar-master.m3u8` 1, `dash/manifest.mpd` 2). A private file's signature
   * may cover the whole package, signed on the path up to the video's name and "/" (routes/delivery.ts).
   */
  streamDepth?: number;
  /** A playlist or manifest: a private file's answer adds its signature to every address in it. */
  playlist?: 'hls' | 'dash';
  /** Cached briefly (a master playlist: what it lists changes when the file is replaced). */
  shortLived?: boolean;
}

const MIME: Record<OutputFormat, string> = {
  webp: 'image/webp',
  avif: 'image/avif',
  jpg: 'image/jpeg',
  png: 'image/png',
  gif: 'image/gif',
  tiff: 'image/tiff',
};
const DECODABLE = /^image\/(jpeg|png|webp|avif|gif|tiff|heic|heif|svg\+xml)$/;
/** A delivery path, each segment percent-decoded exactly once. */
export interface DeliveryPath {
  segments: string[];
  /** The same segments as requested, still percent-encoded: tokens are read there (media/transform/tokens.ts). */
  raw: string[];
}

/**
 * The one decoder of delivery paths (its encoder is `deliveryPath` in file-records.ts). `raw` is the
 * request's own path text (the router has already decoded its copy, so decoding that again
 * would decode twice). Split on "/" first, then each segment decoded once: "%2F" is a
 * character of a segment, never a separator, and as no name holds "/", such a path is
 * nothing stored. Empty segments are skipped; "." and ".." (spelled any way) name nothing.
 */
export function decodeDeliveryPath(raw: string): DeliveryPath {
  const parts = raw.split('/').filter((s) => s !== '');
  let segments: string[];
  try {
    segments = parts.map((s) => decodeURIComponent(s));
  } catch {
    throw appError('BAD_URL', 'The path is not valid percent-encoding');
  }
  if (segments.some((s) => s === '.' || s === '..' || s.includes('/'))) throw notFound();
  return { segments, raw: parts };
}

interface Reading {
  /** The token segments as one comma-separated text, still percent-encoded. */
  text: string;
  /** How many leading segments they are. */
  count: number;
}

/**
 * The ways to read leading segments as transformation tokens (media/transform/tokens.ts), the
 * most segments first. Record URLs escape a first folder whose name would read as tokens
 * ("w_100" → "w%5F100"), so that one is never read so.
 */
function readings(path: DeliveryPath): Reading[] {
  const most = tokenSegmentCount(path.raw);
  // Joined with commas: the segments are one list, and a preset counts once per URL, not per segment.
  return Array.from({ length: most }, (_, i) => ({ text: path.raw.slice(0, most - i).join(','), count: most - i }));
}

/** The rendition's name: its canonical tokens, safe as a storage key and an entity tag (commas become dots). */
function renditionName(spec: TransformSpec, format: OutputFormat): string {
  return canonicalName(canonical(spec, format)).replaceAll(',', '.');
}

/** f_auto: the best format the client says it accepts. */
export function negotiate(accept: string | undefined, originalMime: string): OutputFormat {
  const a = accept ?? '';
  if (/image\/avif/.test(a)) return 'avif';
  if (/image\/webp/.test(a)) return 'webp';
  if (originalMime === 'image/png') return 'png';
  if (originalMime === 'image/gif') return 'gif';
  return 'jpg';
}

export interface DeliveryServiceDeps {
  db: Db;
  storage: StorageDriver;
  /** Images larger than this many pixels are not decoded. */
  maxImagePixels: number;
  /** Sources, for `/{workspace_id}-{source_name}/…`. */
  sources?: SourceService;
  events?: DomainEvents;
  /** Bounds on renders (STOWAGE_RENDER_*); the defaults when not given. */
  render?: RenderSettings;
  /** This node's render queue (shared with metrics); one is made from `render` when not given. */
  queue?: RenderQueue;
  /** Where a source that is not a local file is written before it is rendered. */
  tmpDir?: string;
  /** The rendition cache's ledger and budget; without it renditions are not counted. */
  renditions?: RenditionCache;
  /** Expands `t_{name}` tokens before they are parsed (services/presets.ts); without it they are unknown tokens. */
  presets?: Pick<PresetService, 'expand'>;
  /** ffmpeg, for video posters (`thumb_ar`); without it (or when it is missing) they answer 501. */
  video?: VideoEngine;
  /** Video renditions (transcodes as jobs); without it they answer 501. */
  videos?: VideoRenditions;
}

/**
 * A video rendition is still being made (services/video-renditions.ts): not an error, the route
 * answers 202 with `answer` as JSON. Thrown rather than returned so that no lookup cache keeps it.
 */
export class RenditionPending extends Error {
  constructor(readonly answer: PendingAnswer) {
    super(`rendition ${answer.status}`);
    this.name = 'RenditionPending';
  }
}

/** Tokens that parse as neither grammar: which error a request gets depends on the file they name. */
class TokensInvalid extends Error {
  constructor(
    readonly image: unknown,
    readonly video: unknown,
  ) {
    super('transform tokens');
  }
}

/**
 * What a reading's tokens ask for: an image rendition (whose tokens a video file reads with the
 * video grammar instead), a video's poster (media/video/poster-tokens.ts), or tokens only the
 * video grammar knows (`imageError`: what an image file answers them).
 */
type Asked =
  | { kind: 'image'; spec: TransformSpec; vary: string[]; tokens: string }
  | { kind: 'poster'; poster: PosterSpec }
  | { kind: 'video'; tokens: string; imageError: unknown };

export class DeliveryService {
  private readonly files: FileRepository;
  private readonly storage: StorageDriver;
  private readonly maxPixels: number;
  private readonly sources?: SourceService;
  private readonly events?: DomainEvents;
  private readonly limits: RenderSettings;
  readonly queue: RenderQueue;
  private readonly tmpDir: string;
  private readonly renditions?: RenditionCache;
  private readonly presets?: Pick<PresetService, 'expand'>;
  private readonly video?: VideoEngine;
  private readonly videos?: VideoRenditions;
  /** Counts renditions made, posters among them (tests and metrics read it). */
  readonly stats = { renditionsMade: 0, renditionCacheHits: 0, postersMade: 0 };

  constructor(deps: DeliveryServiceDeps) {
    this.files = new FileRepository(deps.db.kysely);
    this.storage = deps.storage;
    this.maxPixels = deps.maxImagePixels;
    this.sources = deps.sources;
    this.events = deps.events;
    this.limits = deps.render ?? renderDefaults();
    this.queue = deps.queue ?? new RenderQueue({ concurrency: this.limits.concurrency, maxWaiting: this.limits.queue });
    this.tmpDir = deps.tmpDir ?? join(tmpdir(), 'stowage-renders');
    this.renditions = deps.renditions;
    this.presets = deps.presets;
    this.video = deps.video;
    this.videos = deps.videos;
  }

  private expand(workspaceId: string, tokens: string): Promise<string> | string {
    return this.presets ? this.presets.expand(workspaceId, tokens) : tokens;
  }

  /**
   * What a reading's tokens ask for: presets expanded, then a poster when `thumb_ar` is among
   * them, else parsed as an image transformation with the client hints' defaults (a poster's
   * size is never a client hint: one URL, one poster).
   */
  private async specOf(workspaceId: string, reading: Reading, hints?: ClientHints): Promise<Asked> {
    const tokens = await this.expand(workspaceId, reading.text);
    if (asksForPoster(tokens)) return { kind: 'poster', poster: parsePosterTokens(tokens) };
    try {
      return { kind: 'image', ...withHints(parseTransform(tokens), hints), tokens };
    } catch (imageError) {
      try {
        parseVideoTokens(tokens);
      } catch (videoError) {
        throw new TokensInvalid(imageError, videoError);
      }
      return { kind: 'video', tokens, imageError };
    }
  }

  /**
   * Makes the rendition `key` (once on this node however many ask: the render queue joins them).
   * A rendition evicted between being made and being looked at is made again, twice at most.
   */
  private async make(key: string, work: (slot: Slot) => Promise<void>): Promise<ObjectInfo> {
    for (let attempt = 0; ; attempt++) {
      await this.queue.run(key, work);
      const info = await this.storage.stat(key);
      if (info) return info;
      // Evicted again at once: the cache is far too small for what is asked of it.
      if (attempt >= 2) throw errors.renderBusy(2);
    }
  }

  /**
   * The rendition cache's ledger around a render's write: the row before the object (so a crash
   * leaves a row to evict, never an unknown object), its size after, in the render's own work
   * (so a render that outlives its request's time budget is still recorded). `owner`: the blob
   * it is made from, which must still exist once it is stored; a file deleted during the render
   * takes the rendition with it (404).
   */
  private async recorded(key: string, owner: Owner | undefined, write: () => Promise<number>): Promise<number> {
    const ledger = this.renditions;
    if (!ledger) return write();
    await ledgerStep(() => ledger.reserve(key));
    let size: number;
    try {
      size = await write();
    } catch (err) {
      await ledger.abandon(key);
      throw err;
    }
    await ledgerStep(() => ledger.stored(key, size));
    if (owner && !(await ledgerStep(() => ledger.repo.blobExists(owner.workspaceId, owner.sha256, owner.storageKey)))) {
      await this.storage.delete(key);
      await ledgerStep(() => ledger.repo.removeOwner(owner.storageKey));
      throw notFound();
    }
    return size;
  }

  private async file(workspaceId: string, segments: string[]) {
    if (segments.length === 0) return undefined;
    // Names are stored NFC (names.ts), so two names cannot differ only in normalisation: an NFD
    // spelling (macOS file names, pasted text) reaches the one file canonically equal to it,
    // as an upload under that spelling would have. A signature still covers the exact spelling.
    const name = segments[segments.length - 1].normalize('NFC');
    const folderPath = segments
      .slice(0, -1)
      .map((s) => s.normalize('NFC'))
      .join('/');
    return this.files.deliverable(workspaceId, folderPath, name);
  }

  async resolve(target: DeliveryTarget): Promise<Delivered> {
    const dash = target.workspaceId.indexOf('-');
    if (dash > 0 && this.sources) {
      const workspaceId = target.workspaceId.slice(0, dash);
      if (!/^[0-9A-Za-z]{10,16}$/.test(workspaceId)) throw notFound();
      return this.fromOrigin(workspaceId, target.workspaceId.slice(dash + 1), target);
    }
    if (!/^[0-9A-Za-z]{10,16}$/.test(target.workspaceId)) throw notFound();
    const path = decodeDeliveryPath(target.path);
    const streamed = await this.streamTarget(target, path);
    if (streamed) return streamed;
    // Leading token segments name a rendition, read longest first: fewer of them when the tokens
    // do not parse or no file matches that reading (a folder that merely looks like tokens), and
    // the whole path as a file last.
    let asked: Asked | undefined;
    let file: Awaited<ReturnType<DeliveryService['file']>>;
    let invalid: unknown;
    let parsed = false;
    for (const reading of readings(path)) {
      try {
        asked = await this.specOf(target.workspaceId, reading, target.hints);
      } catch (err) {
        if (err instanceof TokensInvalid && invalid === undefined) {
          // Neither grammar: the error of the one the named file would be read with.
          const named = await this.file(target.workspaceId, path.segments.slice(reading.count));
          invalid = named && isVideo(named.mime_type) ? err.video : err.image;
        } else invalid ??= err;
        continue;
      }
      parsed = true;
      file = await this.file(target.workspaceId, path.segments.slice(reading.count));
      if (file) break;
    }
    const whole = file ? undefined : await this.file(target.workspaceId, path.segments);
    if (whole) {
      return {
        open: (range) => this.storage.get(whole.storage_key, range),
        size: Number(whole.size),
        contentType: whole.mime_type,
        etag: `"${whole.sha256}"`,
        lastModified: new Date(whole.updated_at),
        isRendition: false,
        varyAccept: false,
        isPrivate: Boolean(whole.is_private),
        ranges: true,
        localFile: this.storage.localPath?.(whole.storage_key),
      };
    }
    // A parse error only when no reading parsed: else the tokens were fine and the file is missing.
    if (!parsed && invalid) throw invalid;
    if (!asked || !file) throw notFound();
    target.mayRender?.(Boolean(file.is_private));
    if (asked.kind === 'poster') return this.poster(target.workspaceId, file, asked.poster);
    if (isVideo(file.mime_type)) return this.videoRendition(target.workspaceId, file, asked.tokens);
    if (asked.kind === 'video') throw asked.imageError;
    const { spec, vary } = asked;
    if (!DECODABLE.test(file.mime_type))
      throw appError(
        'TRANSFORM_NOT_APPLICABLE',
        file.mime_type.startsWith('audio/')
          ? 'transformations apply to images and videos, not to audio'
          : 'transformations apply to images and videos',
      );
    const format =
      spec.format === 'auto' ? negotiate(target.accept, file.mime_type) : (spec.format ?? formatOfMime(file.mime_type));
    const name = renditionName(spec, format);
    const key = `${renditionPrefix(file.storage_key)}${name}.${format}`;
    let info = await this.storage.stat(key);
    this.events?.emit('rendition', Boolean(info));
    if (info) {
      this.stats.renditionCacheHits++;
      this.renditions?.used(key);
    } else {
      // On local disk the limits are checked before the render queue: a request over them is
      // refused 400 whatever the queue holds, never 503 busy (and never takes a slot).
      const local = isSvgType(file.mime_type) ? undefined : this.storage.localPath?.(file.storage_key);
      const size = local ? await this.dimensions(local) : undefined;
      if (size) planRendition({ ...spec, format }, size, this.limits);
      info = await this.make(key, (slot) =>
        this.render(
          file.storage_key,
          { ...spec, format },
          key,
          file.mime_type,
          target.workspaceId,
          slot,
          { workspaceId: target.workspaceId, sha256: file.sha256, storageKey: file.storage_key },
          size,
        ),
      );
    }
    return {
      ...this.storedRendition(file, key, name, info.size, MIME[format]),
      varyAccept: spec.format === 'auto',
      vary: vary.length > 0 ? vary : undefined,
    };
  }

  /**
   * The answer for a rendition of `file` stored at `key`: served by range from storage, its ETag
   * the file's hash and `name` (what tells its renditions apart), its date the file's.
   */
  private storedRendition(
    file: DeliverableFile,
    key: string,
    name: string,
    size: number,
    contentType: string,
  ): Delivered {
    return {
      open: (range) => this.storage.get(key, range),
      size,
      contentType,
      etag: `"${file.sha256.slice(0, 32)}-${name}"`,
      lastModified: new Date(file.updated_at),
      isRendition: true,
      varyAccept: false,
      isPrivate: Boolean(file.is_private),
      ranges: true,
      renditionKey: key,
      localFile: this.storage.localPath?.(key),
    };
  }

  /**
   * A path ending like a streaming package (`…/video.mp4/ar-master.m3u8`, `…/dash/manifest.mpd`,
   * the playlists and segments they name) whose leading part names a video: that package's file.
   * Undefined otherwise, and the path is read as any other (a real file named `ar-master.m3u8`
   * in a folder named `video.mp4` is still served). The one leading segment, when there is one,
   * is the ladder (`st_240_360`): read only once the video is found, so a bad ladder is a 400.
   */
  private async streamTarget(target: DeliveryTarget, path: DeliveryPath): Promise<Delivered | undefined> {
    const suffix = streamSuffix(path.segments);
    if (!suffix) return undefined;
    const rest = path.segments.slice(0, -suffix.count);
    const raw = path.raw.slice(0, -suffix.count);
    for (const tokens of tokenSegmentCount(raw) > 0 ? [1, 0] : [0]) {
      const file = await this.file(target.workspaceId, rest.slice(tokens));
      if (!file || !isVideo(file.mime_type)) continue;
      const ladder = parseLadder(tokens ? raw[0] : undefined);
      target.mayRender?.(Boolean(file.is_private), suffix.count);
      return this.streamFile(target.workspaceId, file, ladder, suffix);
    }
    return undefined;
  }

  /**
   * One file of a streaming package: served once the package's master is stored (the master is
   * written last, so then every file is there); else the `video.stream` job is asked for and
   * RenditionPending carries the 202, as for any video rendition.
   */
  private async streamFile(
    workspaceId: string,
    file: DeliverableFile,
    asked: number[],
    suffix: { file: string; count: number },
  ): Promise<Delivered> {
    const ladder = capLadder(asked, file.height);
    const name = streamPackageName(ladder);
    const prefix = `${renditionPrefix(file.storage_key)}${name}/`;
    const master = `${prefix}${HLS_MASTER}`;
    const made = await this.storage.stat(master);
    this.events?.emit('rendition', Boolean(made));
    if (!made) {
      if (!this.videos) throw appError('VIDEO_ENGINE_MISSING');
      this.videos.engine.require('ffmpeg');
      const trim = planTrim({}, 'mp4', file.duration, this.videos.settings);
      throw new RenditionPending(
        await this.videos.requestStream({
          key: master,
          prefix,
          workspaceId,
          storageKey: file.storage_key,
          sha256: file.sha256,
          size: Number(file.size),
          demuxer: demuxerFor(file.mime_type)!,
          ladder,
          audio: hasAudio(file.media),
          trim,
        }),
      );
    }
    const key = `${prefix}${suffix.file}`;
    const info = suffix.file === HLS_MASTER ? made : await this.storage.stat(key);
    if (!info) {
      // A file the package lists was evicted by the rendition cache (each file has its own row):
      // the master goes too, so the next ask of it makes the package again instead of a player
      // meeting a hole. A name the package never had is merely not found.
      if (await this.listedInPackage(prefix, suffix.file)) {
        await this.storage.delete(master);
        await this.renditions?.abandon(master);
      }
      throw notFound();
    }
    this.stats.renditionCacheHits++;
    this.renditions?.used(key);
    const kind = streamFileKind(suffix.file);
    return {
      ...this.storedRendition(file, key, `${name}-${suffix.file}`, info.size, STREAM_MIME[kind]),
      streamDepth: suffix.count,
      playlist: kind === 'segment' ? undefined : kind,
      shortLived: suffix.file === HLS_MASTER || suffix.file === DASH_MANIFEST,
    };
  }

  /**
   * Whether the package lists `file` (read only when that file is missing): a media playlist is
   * listed by the master, a stream's segments by that stream's media playlist. A name it never
   * had (`chunk-stream0-99999.m4s`) must not make anyone remake a package.
   */
  private async listedInPackage(prefix: string, file: string): Promise<boolean> {
    const stream = /^(?:init-stream|chunk-stream)(\d+)/.exec(file);
    const listing = stream ? `media_${stream[1]}.m3u8` : file.startsWith('media_') ? HLS_MASTER : undefined;
    if (!listing) return false;
    try {
      const chunks: Buffer[] = [];
      for await (const c of await this.storage.get(`${prefix}${listing}`)) chunks.push(c as Buffer);
      // Listed as the name itself, with the `?v=` it was stored with.
      return Buffer.concat(chunks).toString('utf8').includes(`${file}?`);
    } catch (err) {
      if (err instanceof ObjectNotFoundError) return stream !== null && (await this.listedInPackage(prefix, listing));
      throw err;
    }
  }

  /**
   * A video rendition (media/video/tokens.ts): served from storage when made; else the job that
   * makes it is asked for (services/video-renditions.ts) and RenditionPending carries the 202
   * answer. Checked first, so a bad token or a trim past the caps is a 400 at once, not a job.
   */
  private async videoRendition(workspaceId: string, file: DeliverableFile, tokens: string): Promise<Delivered> {
    const demuxer = demuxerFor(file.mime_type)!;
    const spec = parseVideoTokens(tokens);
    const format = spec.format ?? defaultVideoFormat(file.mime_type);
    const name = videoRenditionName(spec, format);
    const key = `${renditionPrefix(file.storage_key)}${name}.${format}`;
    const info = await this.storage.stat(key);
    this.events?.emit('rendition', Boolean(info));
    if (!info) {
      if (!this.videos) throw appError('VIDEO_ENGINE_MISSING');
      this.videos.engine.require('ffmpeg');
      const trim = planTrim(spec, format, file.duration, this.videos.settings);
      throw new RenditionPending(
        await this.videos.request({
          key,
          workspaceId,
          storageKey: file.storage_key,
          sha256: file.sha256,
          size: Number(file.size),
          demuxer,
          spec,
          format,
          trim,
        }),
      );
    }
    this.stats.renditionCacheHits++;
    this.renditions?.used(key);
    return this.storedRendition(file, key, name, info.size, VIDEO_MIME[format]);
  }

  /**
   * A video's poster (`thumb_ar`): one frame as WebP, made by ffmpeg (media/video/poster.ts) and
   * kept as a rendition beside the blob like any other, so it shares the render queue (slots,
   * single flight, time budget), the rendition cache's ledger and budget, and goes with the file.
   */
  private async poster(workspaceId: string, file: DeliverableFile, poster: PosterSpec): Promise<Delivered> {
    const demuxer = file.mime_type.startsWith('video/') ? demuxerFor(file.mime_type) : null;
    if (!demuxer) throw appError('TRANSFORM_NOT_APPLICABLE', 'posters (thumb_ar) are made of videos');
    const name = posterName(poster);
    const key = `${renditionPrefix(file.storage_key)}${name}.webp`;
    let info = await this.storage.stat(key);
    this.events?.emit('rendition', Boolean(info));
    if (info) {
      this.stats.renditionCacheHits++;
      this.renditions?.used(key);
    } else {
      // Before the queue: a node without ffmpeg answers 501 without taking a slot.
      if (!this.video) throw appError('VIDEO_ENGINE_MISSING');
      const engine = this.video;
      engine.require('ffmpeg');
      const owner = { workspaceId, sha256: file.sha256, storageKey: file.storage_key };
      info = await this.make(key, (slot) => this.renderPoster(engine, file, demuxer, poster, key, slot, owner));
    }
    return this.storedRendition(file, key, name, info.size, 'image/webp');
  }

  /**
   * Extracts and stores one poster within the render time budget (503 RENDER_TIMEOUT past it).
   * ffmpeg's own limit is a second longer, so the budget answers first; the slot stays taken
   * until ffmpeg has been stopped, as a render's does until libvips has.
   */
  private async renderPoster(
    engine: VideoEngine,
    file: DeliverableFile,
    demuxer: string,
    poster: PosterSpec,
    key: string,
    slot: Slot,
    owner: Owner,
  ): Promise<void> {
    const { timeoutMs } = this.limits;
    const work = (async () => {
      const { input, release } = await this.posterInput(file, demuxer);
      try {
        const bytes = await extractPoster(engine, input, {
          atSeconds: poster.atSeconds,
          width: poster.width,
          height: poster.height,
          quality: poster.quality,
          timeoutMs: timeoutMs + 1000,
          demuxer,
        });
        await this.recorded(key, owner, async () => {
          const stored = await this.storage.put(key, Readable.from([bytes]), { durable: false });
          return stored.size;
        });
      } finally {
        await release();
      }
    })();
    slot.hold(
      work.then(
        () => undefined,
        () => undefined,
      ),
    );
    let budget: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => {
      budget = setTimeout(() => resolve('late'), timeoutMs);
    });
    try {
      if ((await Promise.race([work, late])) === 'late') {
        this.queue.timedOut();
        throw errors.renderTimeout(timeoutMs, Math.max(1, Math.ceil(timeoutMs / 1000)));
      }
    } catch (err) {
      if (err instanceof AppError) throw err;
      if (err instanceof LedgerFailure) throw err.cause;
      // ffmpeg's refusals are AppErrors already (400); what is left is storage's, mapped as such.
      throw err;
    } finally {
      clearTimeout(budget);
    }
    this.stats.renditionsMade++;
    this.stats.postersMade++;
  }

  /**
   * What ffmpeg reads a video from: the local file; else, for an MP4/QuickTime file (whose index
   * is often at its end, which a stream cannot seek back from) up to POSTER_SPOOL_BYTES, a copy
   * in the temporary folder; else the object streamed to ffmpeg's stdin. Never a URL: no network
   * protocol is given to ffmpeg, whatever the storage.
   */
  private async posterInput(
    file: DeliverableFile,
    demuxer: string,
  ): Promise<{ input: MediaInput; release: () => Promise<void> }> {
    const local = this.storage.localPath?.(file.storage_key);
    if (local) return { input: { path: local }, release: async () => {} };
    const stream = await this.storage.get(file.storage_key);
    if (demuxer !== 'mov' || Number(file.size) > POSTER_SPOOL_BYTES)
      return { input: { stream, size: Number(file.size) }, release: async () => void stream.destroy() };
    let path: string;
    try {
      path = await spoolToFile(stream, this.tmpDir, POSTER_SPOOL_BYTES);
    } catch {
      throw appError('VIDEO_REFUSED', 'the video could not be read from storage');
    }
    return { input: { path }, release: () => rm(path, { force: true }) };
  }

  /**
   * `/{workspace_id}-{source_name}/[tokens/]path`: the object at `path` in the source. A first
   * segment shaped like tokens is taken as tokens (asking the origin first would cost a
   * round trip per request). Renditions are cached for a day. A web origin also gets the
   * delivery URL's query and the headers its configuration names (`webOriginRequest`); all of
   * that is part of the cache key, so two requests the origin could answer differently never
   * share a cached rendition.
   */
  private async fromOrigin(workspaceId: string, sourceName: string, target: DeliveryTarget): Promise<Delivered> {
    const source = await this.sources!.forDelivery(workspaceId, sourceName);
    const deps = this.sources!.originDeps;
    const requested = decodeDeliveryPath(target.path);
    // Nothing to look up at an origin: the longest reading that parses (the longest's error if none).
    let parsed: { reading: Reading; spec: TransformSpec; vary: string[] } | undefined;
    let invalid: unknown;
    for (const reading of readings(requested)) {
      try {
        const asked = await this.specOf(workspaceId, reading, target.hints);
        // An origin's object is fetched per request and never probed: posters and transcodes are
        // of stored videos.
        if (asked.kind === 'poster')
          throw appError('TRANSFORM_NOT_APPLICABLE', "posters (thumb_ar) are made of a workspace's own videos");
        if (asked.kind === 'video') throw asked.imageError;
        parsed = { reading, spec: asked.spec, vary: asked.vary };
        break;
      } catch (err) {
        invalid ??= err instanceof TokensInvalid ? err.image : err;
      }
    }
    if (!parsed && invalid) throw invalid;
    const hinted = parsed ?? null;
    const tokens = hinted?.spec ?? null;
    const segments = parsed ? requested.segments.slice(parsed.reading.count) : requested.segments;
    if (segments.length === 0) throw notFound();
    // Decoded once above; a web origin gets each segment re-encoded exactly once, a bucket the key.
    const web =
      source.type === 'image_source' ? webOriginRequest(source.config, target.headers ?? {}, target.query) : undefined;
    const path = web ? segments.map(encodeURIComponent).join('/') : segments.join('/');
    const canonicalLink =
      web && source.config.canonical_header === true ? webOriginUrl(source.config, path, web.query) : undefined;
    // What identifies the origin's answer: the path, and for a web origin the query and the
    // headers sent. Without either it is the path alone, as before (cached renditions stay valid).
    const identity =
      web && (web.query !== undefined || web.keyed.length > 0)
        ? `${path}\u0000${JSON.stringify([web.query ?? null, web.keyed])}`
        : path;
    const originVary = web && web.vary.length > 0 ? web.vary : [];
    const varyAll = [...originVary, ...(hinted?.vary ?? [])];
    const vary = varyAll.length > 0 ? varyAll : undefined;
    if (!tokens) {
      const origin = await openOrigin(source.type, source.config, path, deps, web);
      return {
        open: async () => origin.body,
        size: origin.size,
        ranges: false,
        contentType: origin.contentType ?? 'application/octet-stream',
        etag: origin.etag ?? `"${createHash('sha256').update(`${source.id}/${identity}`).digest('hex').slice(0, 32)}"`,
        lastModified: origin.lastModified ?? new Date(),
        isRendition: false,
        varyAccept: false,
        vary,
        isPrivate: false,
        canonical: canonicalLink,
      };
    }
    const pathHash = createHash('sha256').update(identity).digest('hex').slice(0, 40);
    // The origin's type is unknown until it is fetched: without f_ a rendition is a JPEG.
    const format: OutputFormat =
      tokens.format === 'auto' ? negotiate(target.accept, 'image/jpeg') : (tokens.format ?? 'jpg');
    const name = renditionName(tokens, format);
    const key = `${workspaceId}/origins/${source.id}/${pathHash}.renditions/${name}.${format}`;
    let info = await this.storage.stat(key);
    const fresh = Boolean(info && Date.now() - info.lastModified.getTime() < ORIGIN_RENDITION_TTL_MS);
    this.events?.emit('rendition', fresh);
    if (fresh && info) {
      this.stats.renditionCacheHits++;
      this.renditions?.used(key);
    } else
      info = await this.make(key, async (slot) => {
        const origin = await openOrigin(source.type, source.config, path, deps, web);
        // SVG guard (svg-guard.ts): an origin's SVG is checked like a stored one.
        const body = isSvgType(origin.contentType) ? await guardSvgStream(origin.body) : origin.body;
        await this.renderStream(body, { ...tokens, format }, key, workspaceId, slot);
      });
    return {
      open: (range) => this.storage.get(key, range),
      size: info.size,
      ranges: true,
      contentType: MIME[format],
      etag: `"${pathHash.slice(0, 24)}-${info.lastModified.getTime().toString(36)}-${name}"`,
      lastModified: info.lastModified,
      isRendition: true,
      varyAccept: tokens.format === 'auto',
      vary,
      isPrivate: false,
      canonical: canonicalLink,
      renditionKey: key,
      localFile: this.storage.localPath?.(key),
    };
  }

  private async render(
    sourceKey: string,
    spec: TransformSpec,
    key: string,
    mimeType: string,
    workspaceId: string,
    slot?: Slot,
    owner?: Owner,
    size?: Size,
  ): Promise<void> {
    // SVG guard (svg-guard.ts): never by path, where librsvg would resolve references against
    // the blob directory; the checked bytes are rendered from memory (10 MiB at most).
    if (isSvgType(mimeType)) {
      const checked = await guardSvgStream(await this.storage.get(sourceKey));
      return this.renderStream(checked, spec, key, workspaceId, slot, owner);
    }
    // On local disk libvips reads the file itself; elsewhere the object is streamed in.
    const path = this.storage.localPath?.(sourceKey);
    return this.renderStream(path ?? (await this.storage.get(sourceKey)), spec, key, workspaceId, slot, owner, size);
  }

  /**
   * An image layer's source (`l_image:{path}`): a public image of the same workspace, read as any
   * input is. A private file never shows through a public rendition.
   */
  private layerLoader(workspaceId: string): (path: string) => Promise<string | Buffer> {
    return async (path) => {
      const refuse = (why: string) => errors.validation(`transform: the image layer "${path.slice(0, 60)}" ${why}`);
      const file = await this.file(
        workspaceId,
        path.split('/').filter((s) => s !== ''),
      );
      if (!file || file.is_private) throw refuse('names no public file of this workspace');
      if (!DECODABLE.test(file.mime_type)) throw refuse('is not an image');
      if (isSvgType(file.mime_type)) return guardSvgStream(await this.storage.get(file.storage_key));
      const local = this.storage.localPath?.(file.storage_key);
      if (local) return local;
      if (Number(file.size) > LAYER_BYTES) throw refuse(`is larger than ${LAYER_BYTES >> 20} MiB`);
      const chunks: Buffer[] = [];
      for await (const chunk of await this.storage.get(file.storage_key)) chunks.push(chunk as Buffer);
      return Buffer.concat(chunks);
    };
  }

  /**
   * Makes the rendition `key` of `source` (a file path; a stream, first written to a file, as
   * sharp gathers a stream whole into memory before decoding it and reads a file in strips; or
   * bytes already checked in memory, for an SVG).
   * Checked against the limits before any pixel is decoded; answered 503 when the time budget
   * runs out. libvips itself stops at the budget rounded up to whole seconds (sharp's timeout),
   * and the slot stays taken until it has.
   */
  private async renderStream(
    source: Readable | string | Buffer,
    spec: TransformSpec,
    key: string,
    workspaceId: string,
    slot?: Slot,
    owner?: Owner,
    /** The source's size when already read (a local file, checked before the queue). */
    known?: Size,
  ): Promise<void> {
    const spooled =
      typeof source === 'string' || Buffer.isBuffer(source)
        ? undefined
        : await spoolToFile(source, this.tmpDir, spoolLimit(this.maxPixels));
    const path = spooled ?? (source as string | Buffer);
    const cleanup = () => (spooled ? rm(spooled, { force: true }) : Promise.resolve());
    let handed = false;
    try {
      const size = known ?? (await this.dimensions(path));
      const checked = planRendition(spec, size, this.limits);
      const { timeoutMs } = this.limits;
      const seconds = Math.ceil(timeoutMs / 1000);
      const abort = new AbortController();
      const work = (async () => {
        const plan = await focusedPlan(spec, checked, path, size, { limits: this.limits, maxPixels: this.maxPixels });
        const img = await renderImage(spec, plan, path, {
          format: spec.format as OutputFormat,
          maxPixels: this.maxPixels,
          timeoutSeconds: seconds,
          loadImage: this.layerLoader(workspaceId),
        });
        const out = new PassThrough();
        const running = pipeline(img, out).catch((err) => {
          out.destroy(err);
          throw err;
        });
        // A cache entry can always be made again: no flush to disk. Recorded in the ledger only
        // once the render passed the limits: a refused request writes nothing.
        await this.recorded(key, owner, async () => {
          const [stored] = await Promise.all([
            this.storage.put(key, out, { durable: false, signal: abort.signal }),
            running,
          ]);
          return stored.size;
        });
      })();
      // Should storage stall after libvips has stopped, the write is cut a second later.
      const stop = setTimeout(() => abort.abort(), seconds * 1000 + 1000);
      const settled = work.then(
        () => undefined,
        () => undefined,
      );
      const finished = settled
        .then(() => {
          clearTimeout(stop);
          return cleanup();
        })
        .catch(() => {});
      slot?.hold(finished);
      handed = true;
      let budget: NodeJS.Timeout | undefined;
      const late = new Promise<'late'>((resolve) => {
        budget = setTimeout(() => resolve('late'), timeoutMs);
      });
      try {
        if ((await Promise.race([work, late])) === 'late') throw TIMED_OUT;
      } finally {
        clearTimeout(budget);
      }
      await finished;
    } catch (err) {
      if (!handed) await cleanup();
      // Already in the documented shape (a limit, a full disk while caching: 507).
      if (err instanceof AppError) throw err;
      // The database, not the image: mapped as any database error is (503 when it is down).
      if (err instanceof LedgerFailure) throw err.cause;
      const message = String((err as Error).message);
      // Ours (the answer's budget), or sharp's ("timeout: 40% complete") when libvips stopped first.
      if (err === TIMED_OUT || /^timeout\b/.test(message)) {
        this.queue.timedOut();
        throw errors.renderTimeout(this.limits.timeoutMs, Math.max(1, Math.ceil(this.limits.timeoutMs / 1000)));
      }
      if (/pixel limit/i.test(message)) throw appError('IMAGE_TOO_LARGE');
      throw appError('TRANSFORM_FAILED', 'the image could not be decoded');
    }
    this.stats.renditionsMade++;
  }

  /** The source's size with its EXIF orientation applied, read from its header only. */
  private async dimensions(path: string | Buffer): Promise<{ width: number; height: number }> {
    let meta: Metadata;
    try {
      meta = await sharp(path, { limitInputPixels: false }).metadata();
    } catch {
      throw appError('TRANSFORM_FAILED', 'the image could not be decoded');
    }
    if (!meta.width || !meta.height) throw appError('TRANSFORM_FAILED', 'the image could not be decoded');
    if (meta.width * meta.height > this.maxPixels) throw appError('IMAGE_TOO_LARGE');
    return meta.autoOrient ?? { width: meta.width, height: meta.height };
  }
}

/** Larger MP4/QuickTime files of object storage are streamed to ffmpeg, not copied first. */
const POSTER_SPOOL_BYTES = 512 * 1024 * 1024;

/** An image layer read into memory (storage without local files) is at most this large. */
const LAYER_BYTES = 32 * 1024 * 1024;

type DeliverableFile = NonNullable<Awaited<ReturnType<FileRepository['deliverable']>>>;

/** A video ffmpeg may read (a detected container with its one demuxer); audio is not transformed. */
const isVideo = (mimeType: string) => mimeType.startsWith('video/') && demuxerFor(mimeType) !== null;

/** Whether the probe at upload found an audio stream (unknown: none, so ffmpeg is never asked to map a missing one). */
function hasAudio(media: string | null): boolean {
  if (!media) return false;
  try {
    return Boolean((JSON.parse(media) as { audio_codec?: unknown }).audio_codec);
  } catch {
    return false;
  }
}

/** The blob a rendition is made from. */
interface Owner {
  workspaceId: string;
  sha256: string;
  storageKey: string;
}

/** A failure of the rendition cache's ledger (the database), kept apart from image errors. */
class LedgerFailure extends Error {
  constructor(readonly cause: unknown) {
    super('rendition ledger');
  }
}

async function ledgerStep<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw new LedgerFailure(err);
  }
}

/** The time budget ran out (a marker, never thrown out of this module). */
const TIMED_OUT = new Error('render time budget');

const notFound = () => errors.nothingStored();
