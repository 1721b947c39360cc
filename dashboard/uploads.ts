// Uploads in the Files view: the SDK's drop-in uploader (createUploader, Uppy's Dashboard), the
// same one third-party pages mount, rather than an upload UI of the dashboard's own.
//
// The uploader is given no key. The dashboard holds the user's private key (session storage), and
// the uploader refuses private keys on purpose; it takes the signed-in client's four multipart
// session calls instead (its `sessions` option), so parts go from the page straight to their
// presigned URLs and no credential is copied anywhere (ARCHITECTURE.md, "The dashboard's uploads").
//
// Uppy shows each file's progress and the total from the bytes of every part in flight, time
// left, pause and resume; Golden Retriever keeps the selection and the sessions in this browser
// (localStorage and IndexedDB: names and part URLs, never the key), so after a reload or a crash
// the upload resumes with the parts Stowage already holds left out. The line under it adds the
// speed. Each file goes into the folder shown when it was added, a dropped folder's files into
// their paths below it.
import type { Body, UppyFile } from '@uppy/core';
import { createUploader, type Uploader } from '../sdk/src/uploader.ts';
import type { MultipartSessions, StowageMeta } from '../sdk/src/uppy.ts';
import { api, lib } from './library.ts';
import { $, human, status } from './ui.ts';

let uploader: Uploader | undefined;

/** The path of the folder shown ("" at the top). */
const shownFolder = () => lib.folders.find((f) => f.folder_no === lib.folderNo)?.path ?? '';

/** Through the signed-in client, whichever it is when the call is made. */
const sessions: MultipartSessions = {
  startMultipart: (input, opts) => api().startMultipart(input, opts),
  multipartStatus: (id, opts) => api().multipartStatus(id, opts),
  completeMultipart: (id, opts) => api().completeMultipart(id, opts),
  abortMultipart: (id, opts) => api().abortMultipart(id, opts),
};

/** Mounts the uploader into #uploader, once, after sign-in (a restored upload needs the client). */
export function mountUploader(): Uploader {
  if (uploader) return uploader;
  const up = createUploader({
    baseUrl: location.origin,
    sessions,
    target: $('uploader'),
    // Its own saved state, apart from any uploader a page of this origin mounts.
    id: 'stowage-dashboard',
    autoProceed: true,
    folder: shownFolder,
    keepFolders: true,
    // Low enough that the grid's first row and the folder tree share a screen (drags onto folders).
    height: 220,
    note: 'Files go into the folder shown; a dropped folder keeps its structure.',
    onSuccess: ({ files, failed }) =>
      void finished(
        files.map((f) => f.name),
        failed,
      ),
  });
  uploader = up;
  const { uppy } = up;
  uppy.on('upload-progress', () => showProgress());
  uppy.on('progress', () => showProgress());
  uppy.on('upload-pause', () => showProgress());
  uppy.on('pause-all', () => showProgress());
  uppy.on('resume-all', () => showProgress());
  uppy.on('restored', () => showProgress());
  uppy.on('upload-error', (file, error) =>
    status(`Upload of ${file?.name ?? 'a file'} failed: ${error.message.replace(/^Stowage: /, '')}`, true),
  );
  return up;
}

/**
 * On sign-out: uploads stop and their saved state goes (sessions aborted, the uploader's list
 * forgotten), so the next person to sign in on this browser does not find them.
 */
export function forgetUploads(): void {
  if (!uploader) return;
  try {
    uploader.uppy.cancelAll();
  } finally {
    localStorage.removeItem('uppyState:stowage-dashboard');
  }
}

/** After a run: say what was stored, take the stored files off the uploader's list, show them in the library. */
async function finished(names: string[], failed: Array<{ name: string; error: string }>): Promise<void> {
  if (names.length === 0 && failed.length === 0) return;
  const uppy = uploader!.uppy;
  for (const f of uppy.getFiles()) if (f.progress.uploadComplete && !f.error) uppy.removeFile(f.id);
  sample = undefined;
  showProgress();
  if (failed.length) status(`Upload of ${failed.map((f) => f.name).join(', ')} failed: ${failed[0].error}`, true);
  else status(names.length === 1 ? `Uploaded ${names[0]}` : `Uploaded ${names.length} files`);
  await lib.refresh();
}

/** The last reading of bytes sent, and the speed smoothed over the readings. */
let sample: { at: number; loaded: number; speed: number | undefined } | undefined;
let lastText = Number.NEGATIVE_INFINITY;

/** The total bar (every progress event) and its line: bytes, speed and time left (a few times a second). */
function showProgress(): void {
  const uppy = uploader!.uppy;
  const started = uppy.getFiles().filter((f: UppyFile<StowageMeta, Body>) => f.progress.uploadStarted != null);
  const running = started.filter((f) => !f.progress.uploadComplete && !f.error);
  const box = $('upload-progress');
  if (running.length === 0) {
    box.hidden = true;
    return;
  }
  let loaded = 0;
  let total = 0;
  for (const f of started) {
    const size = f.progress.bytesTotal || f.size || 0;
    total += size;
    loaded += f.progress.uploadComplete ? size : Math.min(size, f.progress.bytesUploaded || 0);
  }
  const bar = $<HTMLProgressElement>('upload-total');
  bar.max = Math.max(1, total);
  bar.value = loaded;
  box.hidden = false;
  const paused = running.every((f) => f.isPaused);
  // Restored after a reload or crash, and not resumed yet (Uppy's list says what to do).
  const recovered = uppy.getState().recoveredState != null;
  const stopped = paused || recovered;
  const now = performance.now();
  if (stopped || !sample || loaded < sample.loaded) sample = { at: now, loaded, speed: undefined };
  else if (now - sample.at >= 500) {
    const instant = ((loaded - sample.loaded) * 1000) / (now - sample.at);
    const speed = sample.speed === undefined ? instant : 0.6 * sample.speed + 0.4 * instant;
    sample = { at: now, loaded, speed };
  }
  if (!stopped && now - lastText < 250) return;
  lastText = now;
  const files = started.length === 1 ? (started[0].name ?? '1 file') : `${started.length} files`;
  const sent = `${human(loaded)} of ${human(total)}`;
  let text: string;
  if (recovered) text = `Interrupted: ${files}, ${sent}`;
  else if (paused) text = `Paused: ${files}, ${sent}`;
  else if (sample.speed === undefined || sample.speed <= 0) text = `Uploading ${files}: ${sent}`;
  else {
    const left = Math.max(0, Math.ceil((total - loaded) / sample.speed));
    text = `Uploading ${files}: ${sent} at ${human(sample.speed)}/s, ${duration(left)} left`;
  }
  $('upload-summary').textContent = text;
}

/** "45 s", "3 min 5 s", "1 h 2 min". */
function duration(seconds: number): string {
  if (seconds < 60) return `${seconds} s`;
  const m = Math.floor(seconds / 60);
  if (m < 60) return `${m} min ${seconds % 60} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}
