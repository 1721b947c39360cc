// What the video suites share: whether Debian's ffmpeg is here (under CI it must be), and a
// temporary folder for the clips a suite makes with it.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { IN_CI } from './services.ts';

const hasFfmpeg = spawnSync('ffmpeg', ['-version']).status === 0 && spawnSync('ffprobe', ['-version']).status === 0;

/** The skip reason for suites that need ffmpeg; false when it is installed. */
export const ffmpegSkip: string | false = hasFfmpeg
  ? false
  : 'ffmpeg and ffprobe are not installed (apt-get install ffmpeg)';
if (!hasFfmpeg && IN_CI)
  test('ffmpeg is installed', () => assert.fail("ffmpeg/ffprobe are missing: .ci/run installs Debian's ffmpeg"));

/** A folder for this suite's clips, removed after it; `at(name)` is a path in it; `ffmpeg(...)` runs quietly. */
export function clipFolder(prefix: string) {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  after(() => rmSync(dir, { recursive: true, force: true }));
  return {
    dir,
    at: (name: string) => join(dir, name),
    ffmpeg: (...args: string[]) => execFileSync('ffmpeg', ['-v', 'error', '-y', ...args]),
  };
}

/** `make` (a suite's clips), run the first time the returned function is called and never again. */
export function once(make: () => void): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    make();
  };
}
