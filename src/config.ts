// Configuration is read once, at start, from the environment into one typed object that is
// passed to everything that needs it. Nothing else in the code reads process.env.
import { randomBytes } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';

import { type VideoSettings, videoDefaults } from './media/video/engine.ts';
import { type TranscodeSettings, type TranscodeSpeed, transcodeDefaults } from './media/video/transcode.ts';
import type { AzureSettings } from './storage/azure.ts';
import type { GcsSettings } from './storage/gcs.ts';
import type { S3Settings } from './storage/s3.ts';

export interface RateLimit {
  max: number;
  windowMs: number;
}

/** `fsync: false` acknowledges local writes once the kernel has them (STOWAGE_FSYNC=false). */
export type StorageConfig =
  | { driver: 'local'; fsync: boolean }
  | { driver: 's3'; s3: S3Settings }
  | { driver: 'azure'; azure: AzureSettings }
  | { driver: 'gcs'; gcs: GcsSettings };

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

export interface Config {
  host: string;
  port: number;
  /** Base of every URL the service hands out, without a trailing slash. */
  publicUrl: string;
  dataDir: string;
  /** postgres://... or undefined for the embedded SQLite database in dataDir. */
  databaseUrl?: string;
  /** PostgreSQL: the upload path's statements as named prepared statements (STOWAGE_PG_PREPARED_STATEMENTS). */
  pgPreparedStatements: boolean;
  /** 32 bytes; encrypts source secrets and webhook secrets at rest. */
  masterKey: Buffer;
  /** Older master keys still accepted for decryption while secrets are re-encrypted. */
  previousMasterKeys: Buffer[];
  logLevel: LogLevel;
  /** `pretty`: coloured one-line logs for a person; `json`: one JSON object per line; `auto`: pretty on a terminal. */
  logFormat: 'auto' | 'json' | 'pretty';
  /** Largest JSON body accepted, in bytes. */
  jsonBodyLimit: number;
  /** CIDRs and host names exempt from the outbound address checks. */
  outboundAllow: string[];
  /** Timeout of one outbound request (source tests, origin fetches), in milliseconds. */
  outboundTimeoutMs: number;
  /** Google Cloud Storage JSON API endpoint; unset = Google's. Set for an emulator. */
  gcsApiEndpoint?: string;
  /** Where file bytes go: local disk under dataDir/storage, an S3-compatible bucket, Azure or GCS. */
  storage: StorageConfig;
  /** Largest file a workspace may upload unless it has its own limit (413 above). */
  maxFileSize: number;
  /** Images above this many pixels are not decoded (decompression bombs). */
  maxImagePixels: number;
  /** Bytes of small files and renditions delivery keeps in memory (0 = none). */
  deliveryHotCacheBytes: number;
  /** Bytes of renditions kept in storage; past it the least recently used are deleted (0 = no limit). */
  renditionCacheBytes: number;
  /** How long a delivery lookup is reused without the database; other nodes see a change within it (0 = never reused). */
  deliveryLookupTtlMs: number;
  /** Seconds between webhook attempts (attempt 2, 3, …); after the last, a delivery fails. */
  webhookRetrySchedule: number[];
  webhookTimeoutMs: number;
  /**
   * 0: this node sends no webhooks. Otherwise, on PostgreSQL, how often idle job workers look for
   * jobs that became due (retries; new jobs are announced at once); on SQLite attempts run at
   * their due time and this only turns delivery on. See docs/deploy.md, "Background jobs".
   */
  webhookPollMs: number;
  /** Per API key: upload endpoints, and everything else; null = no limit. */
  rateLimitUpload: RateLimit | null;
  rateLimitApi: RateLimit | null;
  /** /metrics only on this port (its own listener on HOST), not on PORT; undefined = on PORT. */
  metricsPort?: number;
  /** /metrics answers only with `Authorization: Bearer <token>` when set. */
  metricsToken?: string;
  /**
   * The event-loop delay metrics' sampling interval (STOWAGE_METRICS_LOOP_RESOLUTION_MS): a
   * stall of B ms reads as B to B + this, and an idle loop as about this.
   */
  metricsLoopResolutionMs: number;
  /** At start: how long to keep retrying an unreachable database, Redis or storage (startup/patience.ts). */
  startupWaitMs: number;
  /**
   * Whether this server process runs background jobs (STOWAGE_JOBS=on, the default) or leaves
   * them to `stowage worker` processes (off; PostgreSQL only, where the queue is shared).
   */
  runJobs: boolean;
  /** On SIGTERM: how long /readyz says 503 before the listener closes (for load balancers). */
  shutdownDelayMs: number;
  /** On SIGTERM: how long in-flight requests (uploads) may take to finish before the exit. */
  shutdownTimeoutMs: number;
  /** redis://… shares rate limits across nodes; unset = in memory (one node). */
  redisUrl?: string;
  /** Lifetime of the signed URLs in the records of private files, in seconds. */
  privateUrlTtl: number;
  /** Longest a remote URL upload may take to download, in milliseconds. */
  remoteTimeoutMs: number;
  /** Longest lifetime of a multipart session and its part URLs, in seconds. */
  multipartMaxTtl: number;
  /**
   * Milliseconds from the end of one sweep (expired sessions, abandoned bytes, old tokens) to the
   * start of the next (0 = never on this node). On PostgreSQL the nodes share one schedule.
   */
  sweepIntervalMs: number;
  /** How long bytes nobody is writing must sit before the sweeper takes them for abandoned. */
  sweepGraceMs: number;
  /**
   * Local storage: below this many free bytes /readyz answers 503 and uploads that would go
   * below it are refused 507 before a byte is written (0 = no floor).
   */
  minFreeBytes: number;
  /** SQLite: threads that run plain reads, so a long one never stalls the event loop (0 = all on the main thread). */
  sqliteReaders: number;
  /** A request body that sends nothing for this long is cut (0 = never). Idle time, not total time. */
  bodyIdleTimeoutMs: number;
  /** Longest a client may take to send a request's headers (Node's headersTimeout). */
  headersTimeoutMs: number;
  /** How long an idle keep-alive connection stays open (Node's keepAliveTimeout). */
  keepAliveTimeoutMs: number;
  /** Uploads in progress per workspace on this node (429 above; 0 = no cap). */
  maxConcurrentUploads: number;
  /** Bounds on making renditions (docs/api/delivery.md#limits). */
  render: RenderSettings;
  /**
   * nginx's internal location for files on local disk (e.g. `/_stowage_internal/`): delivery then
   * answers an authorised GET with `X-Accel-Redirect` and no body, and nginx sends the file
   * (docs/deploy.md). Unset = Stowage sends the bytes itself.
   */
  accelRedirect?: string;
  /** ffmpeg/ffprobe and the bounds on every run of them (src/media/video/). */
  video: VideoSettings;
  /** Video renditions made by the `video.transcode` job: time, size and length caps (docs/video.md). */
  transcode: TranscodeSettings;
}

export interface RenderSettings {
  /** Largest rendition, in megapixels (width x height); 400 above. */
  maxMegapixels: number;
  /** Longest side of a rendition, in pixels; 400 above. */
  maxSide: number;
  /** One render's time budget; over it the render is abandoned and answered 503. */
  timeoutMs: number;
  /** Renders at once on this node. */
  concurrency: number;
  /** Renders waiting for a slot; one more is answered 503. */
  queue: number;
  /** libvips worker threads per render (sharp.concurrency). */
  threads: number;
  /** The face finder's share of a render's budget (p_face, fo_face); past it, attention decides. */
  faceTimeoutMs?: number;
}

/** The render bounds when nothing is configured: concurrency = cores, each render one libvips thread. */
export function renderDefaults(cores = availableParallelism()): RenderSettings {
  return { maxMegapixels: 25, maxSide: 8192, timeoutMs: 10_000, concurrency: cores, queue: 8 * cores, threads: 1 };
}

/** Standard Webhooks' reference schedule: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (~27.5 h). */
const DEFAULT_WEBHOOK_SCHEDULE = [5, 300, 1800, 7200, 18000, 36000, 36000];

export class ConfigError extends Error {
  constructor(public readonly problems: string[]) {
    super(`Invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

const LOG_LEVELS: LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/**
 * Reads the configuration from `env`. Every variable may instead be given as `NAME_FILE`, the
 * path of a file holding the value (for secrets mounted by an orchestrator). All problems are
 * collected and reported together, each naming its variable.
 */
export function loadConfig(env: Env = process.env, cwd = process.cwd()): Config {
  const problems: string[] = [];

  const read = (name: string): string | undefined => {
    const direct = env[name];
    const file = env[`${name}_FILE`];
    if (direct !== undefined && direct !== '' && file) {
      problems.push(`${name} and ${name}_FILE are both set; set only one`);
      return undefined;
    }
    if (file) {
      try {
        return readFileSync(file, 'utf8').trim();
      } catch (err) {
        problems.push(`${name}_FILE: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
        return undefined;
      }
    }
    return direct === '' ? undefined : direct;
  };

  const integer = (name: string, fallback: number, min: number, max: number): number => {
    const raw = read(name);
    if (raw === undefined) return fallback;
    if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
      problems.push(`${name} must be a whole number from ${min} to ${max} (got "${raw}")`);
      return fallback;
    }
    return Number(raw);
  };

  const host = read('HOST') ?? '127.0.0.1';
  const port = integer('PORT', 3000, 0, 65535);

  const dataDirRaw = read('STOWAGE_DATA_DIR') ?? './data';
  const dataDir = isAbsolute(dataDirRaw) ? dataDirRaw : resolve(cwd, dataDirRaw);

  let publicUrl = read('STOWAGE_PUBLIC_URL') ?? `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  try {
    const u = new URL(publicUrl);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('scheme');
    if (u.search || u.hash) throw new Error('query');
    publicUrl = publicUrl.replace(/\/+$/, '');
  } catch {
    problems.push(`STOWAGE_PUBLIC_URL must be an http(s) URL without query or fragment (got "${publicUrl}")`);
  }

  const databaseUrl = read('DATABASE_URL');
  if (databaseUrl !== undefined && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    // Never echo the value: it usually carries a password.
    problems.push(
      'DATABASE_URL must start with postgres:// or postgresql:// (unset it to use the embedded SQLite database)',
    );
  }

  const logLevel = (read('LOG_LEVEL') ?? 'info') as LogLevel;
  if (!LOG_LEVELS.includes(logLevel))
    problems.push(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')} (got "${logLevel}")`);
  const logFormat = (read('STOWAGE_LOG_FORMAT') ?? 'auto') as Config['logFormat'];
  if (!['auto', 'json', 'pretty'].includes(logFormat))
    problems.push(`STOWAGE_LOG_FORMAT must be auto, json or pretty (got "${logFormat}")`);

  const jsonBodyLimit = integer('STOWAGE_JSON_BODY_LIMIT', 1024 * 1024, 1024, 64 * 1024 * 1024);
  const outboundTimeoutMs = integer('STOWAGE_OUTBOUND_TIMEOUT_MS', 10_000, 100, 600_000);
  const outboundAllow = (read('STOWAGE_OUTBOUND_ALLOW') ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

  const gcsApiEndpoint = read('STOWAGE_GCS_API_ENDPOINT');
  if (gcsApiEndpoint !== undefined && !/^https?:\/\/[^\s]+$/.test(gcsApiEndpoint))
    problems.push(`STOWAGE_GCS_API_ENDPOINT must be an http(s) URL (got "${gcsApiEndpoint}")`);

  const storage = readStorage(read, problems);
  const maxFileSize = integer('STOWAGE_MAX_FILE_SIZE', 5 * 1024 ** 4, 1, Number.MAX_SAFE_INTEGER);
  const maxImagePixels = integer('STOWAGE_MAX_IMAGE_PIXELS', 100_000_000, 1, 1_000_000_000);
  const deliveryHotCacheBytes = integer('STOWAGE_DELIVERY_HOT_CACHE_BYTES', 64 * 1024 * 1024, 0, 64 * 1024 ** 3);
  const renditionCacheBytes = integer('STOWAGE_RENDITION_CACHE_BYTES', 10 * 1024 ** 3, 0, Number.MAX_SAFE_INTEGER);
  const deliveryLookupTtlMs = integer('STOWAGE_DELIVERY_LOOKUP_TTL_MS', 1000, 0, 60_000);
  const scheduleText = read('STOWAGE_WEBHOOK_RETRY_SCHEDULE');
  let webhookRetrySchedule = DEFAULT_WEBHOOK_SCHEDULE;
  if (scheduleText !== undefined) {
    const parts = scheduleText.split(',').map((x) => x.trim());
    if (parts.length === 0 || parts.length > 50 || parts.some((x) => !/^\d{1,7}$/.test(x))) {
      problems.push(`STOWAGE_WEBHOOK_RETRY_SCHEDULE must be comma-separated whole seconds (got "${scheduleText}")`);
    } else webhookRetrySchedule = parts.map(Number);
  }
  const webhookTimeoutMs = integer('STOWAGE_WEBHOOK_TIMEOUT_MS', 10_000, 100, 120_000);
  const webhookPollMs = integer('STOWAGE_WEBHOOK_POLL_MS', 1000, 0, 3_600_000);
  const rate = (name: string, fallback: RateLimit): RateLimit | null => {
    const raw = read(name);
    if (raw === undefined) return fallback;
    if (raw === 'off') return null;
    const m = /^(\d{1,9})\/(\d{1,6})(s|m|h)$/.exec(raw);
    if (!m || Number(m[1]) < 1 || Number(m[2]) < 1) {
      problems.push(`${name} must look like 60/10s, 600/1m or off (got "${raw}")`);
      return fallback;
    }
    return {
      max: Number(m[1]),
      windowMs: Number(m[2]) * { s: 1000, m: 60_000, h: 3_600_000 }[m[3] as 's' | 'm' | 'h'],
    };
  };
  const rateLimitUpload = rate('STOWAGE_RATE_LIMIT_UPLOAD', { max: 60, windowMs: 10_000 });
  const rateLimitApi = rate('STOWAGE_RATE_LIMIT_API', { max: 600, windowMs: 60_000 });
  const startupWaitMs = integer('STOWAGE_STARTUP_WAIT_MS', 60_000, 0, 3_600_000);
  const metricsPortText = read('STOWAGE_METRICS_PORT');
  const metricsPort = metricsPortText === undefined ? undefined : integer('STOWAGE_METRICS_PORT', 0, 0, 65_535);
  if (metricsPort !== undefined && metricsPort === port && port !== 0)
    problems.push('STOWAGE_METRICS_PORT must differ from PORT');
  const metricsToken = read('STOWAGE_METRICS_TOKEN');
  if (metricsToken !== undefined && metricsToken.length < 16)
    problems.push('STOWAGE_METRICS_TOKEN must be at least 16 characters');
  const metricsLoopResolutionMs = integer('STOWAGE_METRICS_LOOP_RESOLUTION_MS', 10, 1, 1000);
  const shutdownDelayMs = integer('STOWAGE_SHUTDOWN_DELAY_MS', 0, 0, 600_000);
  const shutdownTimeoutMs = integer('STOWAGE_SHUTDOWN_TIMEOUT_MS', 30_000, 0, 3_600_000);
  const jobsText = read('STOWAGE_JOBS') ?? 'on';
  if (jobsText !== 'on' && jobsText !== 'off') problems.push(`STOWAGE_JOBS must be on or off (got "${jobsText}")`);
  const runJobs = jobsText !== 'off';
  if (!runJobs && databaseUrl === undefined)
    problems.push(
      "STOWAGE_JOBS=off needs PostgreSQL (DATABASE_URL): on the embedded SQLite no other process can run this one's jobs",
    );
  const redisUrl = read('REDIS_URL');
  if (redisUrl !== undefined && !/^rediss?:\/\//.test(redisUrl))
    problems.push('REDIS_URL must start with redis:// or rediss://');
  const privateUrlTtl = integer('STOWAGE_PRIVATE_URL_TTL', 3600, 1, 7 * 24 * 3600);
  const remoteTimeoutMs = integer('STOWAGE_REMOTE_TIMEOUT_MS', 10 * 60 * 1000, 100, 24 * 3600 * 1000);
  const multipartMaxTtl = integer('STOWAGE_MULTIPART_MAX_TTL', 7 * 24 * 3600, 60, 7 * 24 * 3600);
  const sweepIntervalMs = integer('STOWAGE_SWEEP_INTERVAL_MS', 60_000, 0, 24 * 3600 * 1000);
  const sweepGraceMs = integer('STOWAGE_SWEEP_GRACE_MS', 15 * 60 * 1000, 0, 7 * 24 * 3600 * 1000);
  const minFreeBytes = integer('STOWAGE_MIN_FREE_BYTES', 256 * 1024 * 1024, 0, Number.MAX_SAFE_INTEGER);
  const sqliteReaders = integer('STOWAGE_SQLITE_READERS', 2, 0, 64);
  const prepare = read('STOWAGE_PG_PREPARED_STATEMENTS');
  if (prepare !== undefined && prepare !== 'true' && prepare !== 'false')
    problems.push(`STOWAGE_PG_PREPARED_STATEMENTS must be true or false (got "${prepare}")`);
  const bodyIdleTimeoutMs = integer('STOWAGE_BODY_IDLE_TIMEOUT_MS', 60_000, 0, 3_600_000);
  if (bodyIdleTimeoutMs > 0 && bodyIdleTimeoutMs < 100)
    problems.push(`STOWAGE_BODY_IDLE_TIMEOUT_MS must be 0 (never) or at least 100 (got "${bodyIdleTimeoutMs}")`);
  const headersTimeoutMs = integer('STOWAGE_HEADERS_TIMEOUT_MS', 30_000, 100, 600_000);
  const keepAliveTimeoutMs = integer('STOWAGE_KEEP_ALIVE_TIMEOUT_MS', 72_000, 1, 3_600_000);
  const maxConcurrentUploads = integer('STOWAGE_MAX_CONCURRENT_UPLOADS', 32, 0, 1_000_000);
  const renderFallback = renderDefaults();
  const render: RenderSettings = {
    maxMegapixels: integer('STOWAGE_RENDER_MAX_MEGAPIXELS', renderFallback.maxMegapixels, 1, 1000),
    maxSide: integer('STOWAGE_RENDER_MAX_SIDE', renderFallback.maxSide, 16, 10_000),
    timeoutMs: integer('STOWAGE_RENDER_TIMEOUT_MS', renderFallback.timeoutMs, 1, 600_000),
    concurrency: integer('STOWAGE_RENDER_CONCURRENCY', renderFallback.concurrency, 1, 1024),
    queue: integer('STOWAGE_RENDER_QUEUE', renderFallback.queue, 0, 100_000),
    threads: integer('STOWAGE_RENDER_THREADS', renderFallback.threads, 1, 1024),
    faceTimeoutMs: integer('STOWAGE_RENDER_FACE_TIMEOUT_MS', 1500, 1, 600_000),
  };

  // Only a plain path: nginx decodes the header and matches it against its locations, so no
  // escapes, query, empty segments or segments starting with "." (no "." or "..").
  const accelRedirect = read('STOWAGE_ACCEL_REDIRECT');
  if (accelRedirect !== undefined && !/^\/([A-Za-z0-9_~-][A-Za-z0-9._~-]*\/)+$/.test(accelRedirect))
    problems.push(
      `STOWAGE_ACCEL_REDIRECT must be a location prefix such as /_stowage_internal/: starting and ending with "/", letters, digits and . _ ~ - only (got "${accelRedirect}")`,
    );
  const videoFallback = videoDefaults();
  const binary = (name: string): string | undefined => {
    const raw = read(name);
    if (raw !== undefined && (!isAbsolute(raw) || raw.includes('\0')))
      problems.push(`${name} must be an absolute path to the binary (got "${raw}")`);
    return raw;
  };
  const video: VideoSettings = {
    ffmpegPath: binary('STOWAGE_FFMPEG_PATH'),
    ffprobePath: binary('STOWAGE_FFPROBE_PATH'),
    searchPath: env.PATH,
    probeTimeoutMs: integer('STOWAGE_PROBE_TIMEOUT_MS', videoFallback.probeTimeoutMs, 100, 600_000),
    probeConcurrency: integer('STOWAGE_PROBE_CONCURRENCY', videoFallback.probeConcurrency, 1, 1024),
    maxPixels: integer('STOWAGE_VIDEO_MAX_PIXELS', videoFallback.maxPixels, 1, 1_000_000_000),
    maxStreams: integer('STOWAGE_VIDEO_MAX_STREAMS', videoFallback.maxStreams, 1, 1000),
    maxDurationSeconds: integer('STOWAGE_VIDEO_MAX_DURATION', videoFallback.maxDurationSeconds, 1, 30 * 24 * 3600),
  };
  const transcodeFallback = transcodeDefaults();
  const speed = (read('STOWAGE_TRANSCODE_SPEED') ?? transcodeFallback.speed) as TranscodeSpeed;
  if (!['fastest', 'fast', 'balanced'].includes(speed))
    problems.push(`STOWAGE_TRANSCODE_SPEED must be fastest, fast or balanced (got "${speed}")`);
  const transcode: TranscodeSettings = {
    timeoutMs: integer('STOWAGE_TRANSCODE_TIMEOUT_MS', transcodeFallback.timeoutMs, 1000, 24 * 3600_000),
    maxOutputSeconds: integer('STOWAGE_TRANSCODE_MAX_SECONDS', transcodeFallback.maxOutputSeconds, 1, 24 * 3600),
    maxOutputBytes: integer('STOWAGE_TRANSCODE_MAX_BYTES', transcodeFallback.maxOutputBytes, 1024 * 1024, 2 ** 50),
    concurrency: integer('STOWAGE_TRANSCODE_CONCURRENCY', transcodeFallback.concurrency, 1, 64),
    maxQueued: integer('STOWAGE_TRANSCODE_QUEUE', transcodeFallback.maxQueued, 1, 100_000),
    speed,
    gifMaxSeconds: integer('STOWAGE_GIF_MAX_SECONDS', transcodeFallback.gifMaxSeconds, 1, 600),
    gifMaxSide: integer('STOWAGE_GIF_MAX_SIDE', transcodeFallback.gifMaxSide, 16, 4320),
    gifFps: integer('STOWAGE_GIF_FPS', transcodeFallback.gifFps, 1, 50),
  };

  let masterKey: Buffer | undefined;
  const masterRaw = read('STOWAGE_MASTER_KEY');
  if (masterRaw !== undefined) {
    masterKey = parseMasterKey(masterRaw);
    if (!masterKey) problems.push('STOWAGE_MASTER_KEY must be 32 bytes, as 64 hex characters or base64');
  }
  const previousMasterKeys: Buffer[] = [];
  for (const part of (read('STOWAGE_MASTER_KEY_PREVIOUS') ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const key = parseMasterKey(part);
    if (key) previousMasterKeys.push(key);
    else problems.push('STOWAGE_MASTER_KEY_PREVIOUS must be a comma-separated list of 32-byte keys (hex or base64)');
  }

  if (problems.length > 0) throw new ConfigError(problems);

  return {
    host,
    port,
    publicUrl,
    dataDir,
    databaseUrl,
    pgPreparedStatements: prepare !== 'false',
    masterKey: masterKey ?? loadOrCreateMasterKey(dataDir),
    previousMasterKeys,
    logLevel,
    logFormat,
    jsonBodyLimit,
    outboundAllow,
    outboundTimeoutMs,
    gcsApiEndpoint: gcsApiEndpoint?.replace(/\/+$/, ''),
    storage,
    maxFileSize,
    maxImagePixels,
    deliveryHotCacheBytes,
    renditionCacheBytes,
    deliveryLookupTtlMs,
    multipartMaxTtl,
    sweepIntervalMs,
    sweepGraceMs,
    minFreeBytes,
    sqliteReaders,
    bodyIdleTimeoutMs,
    headersTimeoutMs,
    keepAliveTimeoutMs,
    maxConcurrentUploads,
    render,
    accelRedirect,
    video,
    transcode,
    remoteTimeoutMs,
    privateUrlTtl,
    webhookRetrySchedule,
    webhookTimeoutMs,
    webhookPollMs,
    rateLimitUpload,
    rateLimitApi,
    redisUrl,
    startupWaitMs,
    metricsPort,
    metricsToken,
    metricsLoopResolutionMs,
    shutdownDelayMs,
    shutdownTimeoutMs,
    runJobs,
  };
}

function readStorage(read: (name: string) => string | undefined, problems: string[]): StorageConfig {
  const driver = read('STOWAGE_STORAGE') ?? 'local';
  const fsync = read('STOWAGE_FSYNC');
  if (fsync !== undefined && fsync !== 'true' && fsync !== 'false')
    problems.push(`STOWAGE_FSYNC must be true or false (got "${fsync}")`);
  if (driver === 'local') return { driver: 'local', fsync: fsync !== 'false' };
  if (driver === 'azure') return { driver: 'azure', azure: readAzure(read, problems) };
  if (driver === 'gcs') return { driver: 'gcs', gcs: readGcs(read, problems) };
  if (driver !== 's3') {
    problems.push(`STOWAGE_STORAGE must be "local", "s3", "azure" or "gcs" (got "${driver}")`);
    return { driver: 'local', fsync: true };
  }
  const endpoint = read('S3_ENDPOINT');
  if (endpoint !== undefined && !/^https?:\/\/[^\s/]+(\/[^\s]*)?$/.test(endpoint))
    problems.push(`S3_ENDPOINT must be an http(s) URL (got "${endpoint}")`);
  const publicEndpoint = read('S3_PUBLIC_ENDPOINT');
  if (publicEndpoint !== undefined && !/^https?:\/\/[^\s/]+(\/[^\s]*)?$/.test(publicEndpoint))
    problems.push(`S3_PUBLIC_ENDPOINT must be an http(s) URL (got "${publicEndpoint}")`);
  const bucket = read('S3_BUCKET');
  if (!bucket) problems.push('S3_BUCKET is required when STOWAGE_STORAGE=s3');
  const accessKeyId = read('S3_ACCESS_KEY_ID');
  const secretAccessKey = read('S3_SECRET_ACCESS_KEY');
  if ((accessKeyId === undefined) !== (secretAccessKey === undefined)) {
    problems.push(
      'S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY go together (leave both unset to use the AWS default credential chain)',
    );
  }
  const pathStyle = read('S3_FORCE_PATH_STYLE');
  if (pathStyle !== undefined && pathStyle !== 'true' && pathStyle !== 'false')
    problems.push(`S3_FORCE_PATH_STYLE must be true or false (got "${pathStyle}")`);
  return {
    driver: 's3',
    s3: {
      endpoint: endpoint?.replace(/\/+$/, ''),
      publicEndpoint: publicEndpoint?.replace(/\/+$/, ''),
      region: read('S3_REGION') ?? 'us-east-1',
      bucket: bucket ?? '',
      accessKeyId,
      secretAccessKey,
      // Path-style by default for a custom endpoint (MinIO, Swift); virtual-hosted for AWS.
      forcePathStyle: pathStyle === undefined ? endpoint !== undefined : pathStyle === 'true',
    },
  };
}

/** Azure Blob Storage: a connection string (a secret: never echoed) and a container. */
function readAzure(read: (name: string) => string | undefined, problems: string[]): AzureSettings {
  const connectionString = read('AZURE_STORAGE_CONNECTION_STRING');
  if (!connectionString) problems.push('AZURE_STORAGE_CONNECTION_STRING is required when STOWAGE_STORAGE=azure');
  else if (!/(^|;)\s*(AccountName|BlobEndpoint|UseDevelopmentStorage)=/i.test(connectionString))
    problems.push(
      'AZURE_STORAGE_CONNECTION_STRING must be a connection string (AccountName=…;AccountKey=…;…) as the Azure portal shows it',
    );
  const container = read('AZURE_STORAGE_CONTAINER');
  // Azure's rule: 3 to 63 lowercase letters, digits and single hyphens, starting with a letter or digit.
  if (!container) problems.push('AZURE_STORAGE_CONTAINER is required when STOWAGE_STORAGE=azure');
  else if (!/^(?=.{3,63}$)[a-z0-9]+(-[a-z0-9]+)*$/.test(container))
    problems.push(
      `AZURE_STORAGE_CONTAINER must be 3 to 63 lowercase letters, digits and single hyphens (got "${container}")`,
    );
  return { connectionString: connectionString ?? '', container: container ?? '' };
}

/**
 * Google Cloud Storage: a bucket, and a service account key (JSON, a secret: never echoed) or,
 * without one, Google's application default credentials. STOWAGE_GCS_API_ENDPOINT (shared with
 * google_cloud sources) points it at an emulator.
 */
function readGcs(read: (name: string) => string | undefined, problems: string[]): GcsSettings {
  const bucket = read('GCS_BUCKET');
  if (!bucket) problems.push('GCS_BUCKET is required when STOWAGE_STORAGE=gcs');
  const keyJson = read('GCS_CREDENTIALS');
  let credentials: GcsSettings['credentials'];
  if (keyJson !== undefined) {
    try {
      const key = JSON.parse(keyJson) as { client_email?: unknown; private_key?: unknown };
      if (typeof key.client_email !== 'string' || typeof key.private_key !== 'string') throw new Error('fields');
      credentials = { client_email: key.client_email, private_key: key.private_key };
    } catch {
      problems.push(
        'GCS_CREDENTIALS must be a service account key (JSON with client_email and private_key); unset it to use application default credentials',
      );
    }
  }
  const apiEndpoint = read('STOWAGE_GCS_API_ENDPOINT');
  return {
    bucket: bucket ?? '',
    projectId: read('GCS_PROJECT_ID'),
    credentials,
    apiEndpoint: apiEndpoint && /^https?:\/\/[^\s]+$/.test(apiEndpoint) ? apiEndpoint.replace(/\/+$/, '') : undefined,
  };
}

export function parseMasterKey(raw: string): Buffer | undefined {
  const text = raw.trim();
  if (/^[0-9a-fA-F]{64}$/.test(text)) return Buffer.from(text, 'hex');
  if (/^[A-Za-z0-9+/_-]+={0,2}$/.test(text)) {
    const buf = Buffer.from(text.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
    if (buf.length === 32) return buf;
  }
  return undefined;
}

/**
 * Without STOWAGE_MASTER_KEY the key is generated once into the data directory, readable by
 * the owner only. Several nodes sharing a database must be given the same key explicitly.
 */
function loadOrCreateMasterKey(dataDir: string): Buffer {
  const path = join(dataDir, 'master.key');
  mkdirSync(dataDir, { recursive: true });
  try {
    writeFileSync(path, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  const key = parseMasterKey(readFileSync(path, 'utf8'));
  if (!key)
    throw new ConfigError([
      `${path} does not hold a 32-byte key; restore it from a backup or remove it only if no secrets were stored under it`,
    ]);
  if ((statSync(path).mode & 0o077) !== 0) {
    throw new ConfigError([`${path} is readable by other users; run: chmod 600 ${path}`]);
  }
  return key;
}
