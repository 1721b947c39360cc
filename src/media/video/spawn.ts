// Running ffmpeg and ffprobe: an argument array (never a shell), a process group of its own so
// a time limit can end it and anything it started, and output kept up to a cap so a chatty or
// hostile input cannot grow our memory.
import { spawn } from 'node:child_process';
import type { Readable } from 'node:stream';

export interface RunOptions {
  /** Wall-clock limit; past it the process group gets SIGKILL. */
  timeoutMs: number;
  /** Bytes of stdout kept; the rest is read and dropped (the child is then killed: its answer is unusable). */
  maxStdout: number;
  /** Bytes of stderr kept (diagnostics only); the rest is dropped. */
  maxStderr?: number;
  /** Bytes piped to the child's stdin; without it stdin is closed at once. */
  stdin?: Readable;
  /** Extra environment; the child otherwise gets a minimal one. */
  env?: Record<string, string>;
  /** Takes stdout as it comes (ffmpeg's `-progress pipe:1`) instead of keeping it: `stdout` is then empty. */
  onStdout?: (chunk: Buffer) => void;
  /** Kills the process group when aborted (a caller's own limit, e.g. a stream's folder size). */
  signal?: AbortSignal;
}

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: Buffer;
  stderr: string;
  timedOut: boolean;
  /** stdout passed maxStdout. */
  overflow: boolean;
}

/**
 * Runs `file` with `args` and resolves when it has exited and its pipes are closed, whatever
 * happened (a spawn failure rejects). The child runs in a new process group (`detached`), so
 * the kill on expiry reaches anything it forked too.
 */
export function runBounded(file: string, args: string[], opts: RunOptions): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, {
      shell: false,
      detached: true,
      stdio: [opts.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'],
      // No inherited secrets (database URLs, keys) in a process that parses hostile bytes.
      env: { PATH: '/usr/local/bin:/usr/bin:/bin', LC_ALL: 'C', ...opts.env },
      windowsHide: true,
    });
    const out: Buffer[] = [];
    let outBytes = 0;
    let errText = '';
    const maxStderr = opts.maxStderr ?? 16 * 1024;
    let timedOut = false;
    let overflow = false;
    let settled = false;

    const killGroup = () => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup();
    }, opts.timeoutMs);
    timer.unref();
    opts.signal?.addEventListener('abort', killGroup, { once: true });

    child.stdout?.on('data', (chunk: Buffer) => {
      if (opts.onStdout) {
        // Streamed to the caller, not kept: a long run's progress lines are no answer to hold.
        opts.onStdout(chunk);
        return;
      }
      if (outBytes + chunk.length > opts.maxStdout) {
        if (!overflow) {
          overflow = true;
          killGroup();
        }
        return;
      }
      out.push(chunk);
      outBytes += chunk.length;
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      if (errText.length < maxStderr)
        errText += chunk.toString('utf8', 0, Math.min(chunk.length, maxStderr - errText.length));
    });
    if (opts.stdin && child.stdin) {
      const input = opts.stdin;
      // The child may stop reading early (it has what it needs, or it was killed): not an error.
      child.stdin.on('error', () => {});
      input.on('error', () => {
        child.stdin?.destroy();
      });
      input.pipe(child.stdin);
      child.once('close', () => {
        input.unpipe(child.stdin ?? undefined);
        input.destroy();
      });
    }
    child.once('error', (err) => {
      clearTimeout(timer);
      if (settled) return;
      settled = true;
      reject(err);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      if (settled) return;
      settled = true;
      // The group may hold children that outlived the leader.
      killGroup();
      resolve({ code, signal, stdout: Buffer.concat(out), stderr: errText, timedOut, overflow });
    });
  });
}

/**
 * An `onStdout` for ffmpeg's `-progress pipe:1`: calls `onSeconds` with each `out_time_us` line's
 * time (seconds of output written so far), a line split across chunks included.
 */
export function progressReader(onSeconds: (seconds: number) => void): (chunk: Buffer) => void {
  let pending = '';
  return (chunk) => {
    pending += chunk.toString('latin1');
    const lines = pending.split('\n');
    pending = lines.pop() ?? '';
    for (const line of lines) {
      const m = /^out_time_us=(\d+)/.exec(line);
      if (m) onSeconds(Number(m[1]) / 1e6);
    }
  };
}
