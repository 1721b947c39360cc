// The video engine: the system's ffmpeg and ffprobe, found once at start. Without them Stowage
// still serves everything else; whatever needs them asks `require()` and gets 501
// VIDEO_ENGINE_MISSING, and the node says so once in its log.
import { accessSync, constants, statSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { delimiter, join } from 'node:path';
import { appError } from '../../errors.ts';

export interface VideoSettings {
  /** Explicit binaries (STOWAGE_FFMPEG_PATH, STOWAGE_FFPROBE_PATH); unset = looked up on PATH. */
  ffmpegPath?: string;
  ffprobePath?: string;
  /** Where to look for them otherwise: the process's PATH, as loadConfig read it. */
  searchPath?: string;
  /** One probe's time budget at upload (STOWAGE_PROBE_TIMEOUT_MS). */
  probeTimeoutMs: number;
  /** Probes at once on a node (STOWAGE_PROBE_CONCURRENCY). */
  probeConcurrency: number;
  /** Inputs past these are not probed further or decoded (hostile or absurd media). */
  maxPixels: number;
  maxStreams: number;
  maxDurationSeconds: number;
}

export function videoDefaults(): VideoSettings {
  return {
    probeTimeoutMs: 10_000,
    // ffprobe mostly waits on reads: a few per core.
    probeConcurrency: 2 * availableParallelism(),
    // 8192 x 8192: above 8K UHD (7680 x 4320), far below what a crafted header can claim.
    maxPixels: 8192 * 8192,
    maxStreams: 32,
    maxDurationSeconds: 24 * 3600,
  };
}

export interface EngineLog {
  warn(obj: object, msg: string): void;
}

export interface VideoEngine {
  /** Absolute paths, or null when missing. */
  readonly ffmpeg: string | null;
  readonly ffprobe: string | null;
  readonly settings: VideoSettings;
  /** Both binaries are there. */
  readonly available: boolean;
  /** The binary, or 501 VIDEO_ENGINE_MISSING. */
  require(which: 'ffmpeg' | 'ffprobe'): string;
}

function executable(path: string): boolean {
  try {
    if (!statSync(path).isFile()) return false;
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** `name` in one of PATH's folders (absolute ones only: a relative entry would depend on the cwd). */
function onPath(name: string, pathVar: string | undefined): string | null {
  for (const dir of (pathVar ?? '').split(delimiter)) {
    if (!dir.startsWith('/')) continue;
    const candidate = join(dir, name);
    if (executable(candidate)) return candidate;
  }
  return null;
}

/**
 * Finds the binaries: an explicit path must be an executable file (no PATH fallback, so a typo
 * is not hidden by another ffmpeg); otherwise PATH. Logs once when either is missing.
 */
export function locateVideoEngine(settings: VideoSettings, opts: { log?: EngineLog } = {}): VideoEngine {
  const find = (explicit: string | undefined, name: string) =>
    explicit !== undefined ? (executable(explicit) ? explicit : null) : onPath(name, settings.searchPath);
  const ffmpeg = find(settings.ffmpegPath, 'ffmpeg');
  const ffprobe = find(settings.ffprobePath, 'ffprobe');
  const available = ffmpeg !== null && ffprobe !== null;
  if (!available) {
    const missing = [
      ffmpeg ? null : (settings.ffmpegPath ?? 'ffmpeg on PATH'),
      ffprobe ? null : (settings.ffprobePath ?? 'ffprobe on PATH'),
    ]
      .filter(Boolean)
      .join(' and ');
    opts.log?.warn(
      { video: 'off', missing },
      `video features are off: ${missing} not found (install the ffmpeg package, or set STOWAGE_FFMPEG_PATH and STOWAGE_FFPROBE_PATH)`,
    );
  }
  return {
    ffmpeg,
    ffprobe,
    settings,
    available,
    require(which) {
      const path = which === 'ffmpeg' ? ffmpeg : ffprobe;
      if (!path) throw appError('VIDEO_ENGINE_MISSING');
      return path;
    },
  };
}
