// Face detection for face focus (fo_face): where the faces are in an image, in the pixel
// coordinates of the image as displayed (after EXIF orientation). The delivery pipeline uses
// faceFocus(findFaces(...)) as the crop centre and falls back to libvips `attention` when this
// returns [] - which it does when no face is found, when the call runs over its time budget, and
// when the detector itself fails. An input that cannot be decoded (corrupt, over the pixel
// limit) throws FaceInputError instead, so the caller answers it like any other bad image.
//
// The model (TinyFaceDetector, see faces-thread.mjs) runs on one worker thread that loads it
// once per process and then stays warm. Jobs go to it one at a time; a job over its budget gets
// [] at once and, if the thread is busy with it, the thread is terminated (WebAssembly cannot be
// interrupted otherwise) and a fresh one is started for the jobs behind it.
import { Worker } from 'node:worker_threads';
import sharp from 'sharp';

export interface FaceBox {
  left: number;
  top: number;
  width: number;
  height: number;
  /** The detector's confidence, 0..1. */
  score: number;
}

export interface FindFacesOptions {
  /** Budget for the whole call, decoding included; over it, the call resolves to []. */
  timeoutMs: number;
  /** Images with more pixels than this are refused (FaceInputError) before they are decoded. */
  maxPixels: number;
}

/** The image could not be decoded. The message says why, for logs: it may name the file. */
export class FaceInputError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'FaceInputError';
  }
}

/**
 * The model's square input, in pixels: a multiple of 32. At 416 it finds faces about a tenth of
 * the image's long side wide; 320 missed one of three such faces in a group photo, and 608 costs
 * about twice the work (608² / 416²) to find faces a little smaller.
 */
export const FACE_INPUT_SIZE = 416;
const SCORE_THRESHOLD = 0.5;

interface RawBox {
  x: number;
  y: number;
  w: number;
  h: number;
  score: number;
}
interface Job {
  id: number;
  data: Uint8Array<ArrayBuffer>;
  width: number;
  height: number;
  resolve(boxes: RawBox[]): void;
}
type Reply = { ready: true } | { fatal: string } | { id: number; boxes?: RawBox[]; error?: string };

class FaceThread {
  private worker: Worker | null = null;
  private ready = false;
  private failed = false;
  private running: Job | null = null;
  private readonly queue: Job[] = [];
  private nextId = 1;
  /** Threads started so far, each loading the model once: for tests and metrics. */
  starts = 0;
  private whenReady: Array<() => void> = [];

  /** Starts the thread (and so the model load) if it is not running. */
  warm(): Promise<void> {
    this.spawn();
    if (this.ready || this.failed) return Promise.resolve();
    return new Promise((resolve) => this.whenReady.push(resolve));
  }

  detect(data: Uint8Array<ArrayBuffer>, width: number, height: number): { result: Promise<RawBox[]>; cancel(): void } {
    let job!: Job;
    const result = new Promise<RawBox[]>((resolve) => {
      job = { id: this.nextId++, data, width, height, resolve };
    });
    if (this.failed) {
      job.resolve([]);
      return { result, cancel: () => {} };
    }
    this.queue.push(job);
    this.spawn();
    this.pump();
    const cancel = () => {
      const at = this.queue.indexOf(job);
      if (at >= 0) this.queue.splice(at, 1);
      else if (this.running === job) this.restart();
      job.resolve([]);
    };
    return { result, cancel };
  }

  private spawn(): void {
    if (this.worker || this.failed) return;
    const worker = new Worker(new URL('./faces-thread.mjs', import.meta.url), {
      // A plain module: it needs neither tsx nor the test runner's flags.
      execArgv: [],
      workerData: { inputSize: FACE_INPUT_SIZE, scoreThreshold: SCORE_THRESHOLD },
    });
    this.starts++;
    worker.unref();
    worker.on('message', (msg: Reply) => this.onMessage(worker, msg));
    const gone = (err?: Error) => {
      if (this.worker !== worker) return;
      if (!this.ready) {
        // It died before the model was loaded, and would again: same as a failed load.
        this.onMessage(worker, { fatal: err ? String(err.stack ?? err) : 'the thread exited while starting' });
        return;
      }
      this.worker = null;
      this.ready = false;
      this.finish([]);
    };
    worker.on('error', (err) => gone(err));
    worker.on('exit', () => gone());
    this.worker = worker;
  }

  private onMessage(worker: Worker, msg: Reply): void {
    if (this.worker !== worker) return;
    if ('ready' in msg) {
      this.ready = true;
      for (const f of this.whenReady.splice(0)) f();
      this.pump();
    } else if ('fatal' in msg) {
      // The model cannot load in this process (a broken install): every later call gets []
      // at once rather than a thread restart per request.
      this.failed = true;
      for (const f of this.whenReady.splice(0)) f();
      for (const job of this.queue.splice(0)) job.resolve([]);
      this.finish([]);
      void worker.terminate();
      this.worker = null;
      process.emitWarning(`face detection is unavailable: ${msg.fatal}`);
    } else if (this.running?.id === msg.id) {
      this.finish(msg.boxes ?? []);
    }
  }

  private finish(boxes: RawBox[]): void {
    const job = this.running;
    this.running = null;
    job?.resolve(boxes);
    this.pump();
  }

  private pump(): void {
    if (!this.worker) {
      if (this.queue.length > 0) this.spawn();
      return;
    }
    if (!this.ready || this.running) {
      if (this.queue.length === 0 && !this.running) this.worker.unref();
      return;
    }
    const job = this.queue.shift();
    if (!job) {
      this.worker.unref();
      return;
    }
    this.running = job;
    // Held open while a job runs, so a caller awaiting it is not cut short by the process exiting.
    this.worker.ref();
    this.worker.postMessage({ id: job.id, data: job.data, width: job.width, height: job.height }, [job.data.buffer]);
  }

  /** Drops the busy thread and starts a warm one for the jobs still queued. */
  private restart(): void {
    const old = this.worker;
    this.worker = null;
    this.ready = false;
    this.running = null;
    if (old) void old.terminate();
    // Not in the caller's turn: its [] is due now, the new thread can start a moment later.
    setImmediate(() => this.spawn());
  }
}

let thread: FaceThread | undefined;
const faceThread = () => {
  thread ??= new FaceThread();
  return thread;
};

/** Loads the model now rather than on the first call, so that call is not over its budget. */
export function preloadFaceDetector(): Promise<void> {
  return faceThread().warm();
}

/** Longest a call waits for the model to load the first time. */
const MODEL_LOAD_BUDGET_MS = 10_000;

async function warmWithin(ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    faceThread().warm(),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, ms);
      timer.unref();
    }),
  ]);
  clearTimeout(timer);
}

/** How many detector threads this process has started (one, unless budgets ran out mid-detection). */
export function faceDetectorStarts(): number {
  return thread?.starts ?? 0;
}

/** Where the faces are, largest first; [] when there are none or the budget runs out. */
export async function findFaces(input: string | Buffer, opts: FindFacesOptions): Promise<FaceBox[]> {
  // The budget bounds detection, not the one-time model load: otherwise the first p_face of a
  // process would always miss its budget, and its attention-cropped rendition would be cached
  // for good. The load itself is bounded (a thread that never becomes ready is given up).
  await warmWithin(MODEL_LOAD_BUDGET_MS);
  let timer: NodeJS.Timeout | undefined;
  let cancel = () => {};
  let expired = false;
  const budget = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), Math.max(0, opts.timeoutMs));
  });
  const work = (async () => {
    const image = await decode(input, opts);
    if (expired) return { image, boxes: [] };
    const job = faceThread().detect(image.data, image.width, image.height);
    cancel = job.cancel;
    return { image, boxes: await job.result };
  })();
  try {
    const first = await Promise.race([work, budget]);
    if (first === 'timeout') {
      expired = true;
      cancel();
      // Whatever the decode or the detection still does is bounded (sharp's own timeout, the
      // thread's termination); its outcome, an error included, no longer concerns anyone.
      work.catch(() => {});
      return [];
    }
    const { image, boxes } = first;
    const sx = image.sourceWidth / image.width;
    const sy = image.sourceHeight / image.height;
    return boxes
      .map((b) => clampBox({ left: b.x * sx, top: b.y * sy, width: b.w * sx, height: b.h * sy, score: b.score }, image))
      .filter((b) => b.width > 0 && b.height > 0)
      .sort((a, b) => b.width * b.height - a.width * a.height);
  } finally {
    clearTimeout(timer);
  }
}

interface Decoded {
  data: Uint8Array<ArrayBuffer>;
  width: number;
  height: number;
  sourceWidth: number;
  sourceHeight: number;
}

async function decode(input: string | Buffer, opts: FindFacesOptions): Promise<Decoded> {
  const options = { limitInputPixels: opts.maxPixels, sequentialRead: true, failOn: 'error' as const };
  try {
    const meta = await sharp(input, options).metadata();
    if (!meta.width || !meta.height) throw new Error('the image has no dimensions');
    if (meta.width * meta.height > opts.maxPixels) {
      throw new Error(`the image has ${meta.width}x${meta.height} pixels, over the limit of ${opts.maxPixels}`);
    }
    // Orientations 5-8 turn the image a quarter: width and height swap once it is upright.
    const turned = (meta.orientation ?? 1) >= 5;
    const sourceWidth = turned ? meta.height : meta.width;
    const sourceHeight = turned ? meta.width : meta.height;
    const { data, info } = await sharp(input, options)
      .rotate()
      // JPEG and WebP shrink on load here, so a huge photo is never decoded at full size.
      .resize(FACE_INPUT_SIZE, FACE_INPUT_SIZE, { fit: 'inside' })
      .removeAlpha()
      .toColourspace('srgb')
      .timeout({ seconds: Math.max(1, Math.ceil(opts.timeoutMs / 1000)) })
      .raw()
      .toBuffer({ resolveWithObject: true });
    if (info.channels !== 3) throw new Error(`the image decoded to ${info.channels} channels, not 3`);
    return {
      // A copy of its own, so it can be moved to the thread without touching sharp's memory.
      data: new Uint8Array(data),
      width: info.width,
      height: info.height,
      sourceWidth,
      sourceHeight,
    };
  } catch (err) {
    throw new FaceInputError(`cannot decode the image for face detection: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

function clampBox(b: FaceBox, image: Decoded): FaceBox {
  const left = Math.max(0, Math.min(b.left, image.sourceWidth));
  const top = Math.max(0, Math.min(b.top, image.sourceHeight));
  const right = Math.max(left, Math.min(b.left + b.width, image.sourceWidth));
  const bottom = Math.max(top, Math.min(b.top + b.height, image.sourceHeight));
  return { left, top, width: right - left, height: bottom - top, score: b.score };
}

/**
 * The point a crop should centre on, in the same pixels as the boxes: the centre of the box
 * around the faces that matter. A face counts when its area is at least a quarter of the
 * largest face's (so a passer-by far behind the subject does not pull the crop off it); all
 * faces of a group photo are about the same size and all count. Undefined when there is none.
 */
export function faceFocus(faces: FaceBox[], width: number, height: number): { x: number; y: number } | undefined {
  const area = (f: FaceBox) => f.width * f.height;
  const largest = Math.max(0, ...faces.map(area));
  if (largest <= 0) return undefined;
  const kept = faces.filter((f) => area(f) >= largest / 4);
  const left = Math.min(...kept.map((f) => f.left));
  const top = Math.min(...kept.map((f) => f.top));
  const right = Math.max(...kept.map((f) => f.left + f.width));
  const bottom = Math.max(...kept.map((f) => f.top + f.height));
  const clamp = (v: number, max: number) => Math.max(0, Math.min(max, v));
  return { x: clamp((left + right) / 2, width), y: clamp((top + bottom) / 2, height) };
}
