// createUploader: a drop-in upload widget on Uppy's Dashboard (drag and drop, paste, file
// picker, camera, progress, pause and resume, retries, restrictions), uploading to Stowage
// through the helpers of ./uppy.ts. It mounts into any element, so the dashboard and other
// pages can reuse it. Uppy is imported here, and only here and in the React component: the
// SDK's main entry stays free of it.
import AwsS3 from '@uppy/aws-s3';
import Uppy, { type Body, type UppyFile } from '@uppy/core';
import Dashboard from '@uppy/dashboard';
import GoldenRetriever from '@uppy/golden-retriever';
import Tus from '@uppy/tus';
import Webcam from '@uppy/webcam';
import { browserCredential, type MultipartSessions, type StowageMeta, stowageMultipart, stowageTus } from './uppy.ts';
import type { FileRecord } from './types.ts';

export interface UploaderRestrictions {
  /** MIME types (`image/*`, `video/mp4`) or extensions (`.pdf`). */
  allowedFileTypes?: string[];
  /** Bytes. Stowage also enforces the workspace's largest file (413) and an upload token's `max_file_size`. */
  maxFileSize?: number;
  minFileSize?: number;
  maxNumberOfFiles?: number;
  maxTotalFileSize?: number;
}

export interface UploaderProgress {
  /** Bytes sent, over every file of this upload. */
  loaded: number;
  total: number;
  /** 0 to 100. */
  percent: number;
}

export interface CreateUploaderOptions {
  /** The service's base URL, e.g. https://media.example.com */
  baseUrl: string;
  /** The workspace public key (`stw_pk_…`); `publicKey` is the same. Never the private key: it is refused. */
  apiKey?: string;
  publicKey?: string;
  /** An upload token (`stw_ut_…`) from your backend instead of a key: one file, through tus. */
  uploadToken?: string;
  /**
   * Instead of a key: your own multipart session calls (start, status, complete, abort), e.g. a
   * `Stowage` client your app already signed in with, or functions that ask your backend. The
   * uploader then holds no credential at all; parts go to their presigned URLs. Multipart only.
   * Stowage's dashboard uses it with the signed-in user's client: a private key is still refused
   * as `apiKey`, and must never be put in a third-party page in any form.
   */
  sessions?: MultipartSessions;
  /** Where the uploader goes: an element or a CSS selector. For `type: 'modal'`, the element that opens it. */
  target: string | HTMLElement;
  /** `inline` (default) draws the uploader in `target`; `modal` opens it over the page when `target` is clicked. */
  type?: 'inline' | 'modal';
  /**
   * `multipart` (default with a public key): parts straight to storage, Stowage's multipart
   * endpoints. `tus`: the tus endpoint, through Stowage (the only way with an upload token).
   */
  protocol?: 'multipart' | 'tus';
  /** More than one file (default true). */
  allowMultiple?: boolean;
  /** `local` (files: pick, drop, paste) and `camera` (photos and video from a webcam). Default `['local']`. */
  sources?: Array<'local' | 'camera'>;
  theme?: 'light' | 'dark' | 'system';
  restrictions?: UploaderRestrictions;
  /**
   * Folder, tags and custom metadata of every file. `folder` may be a function, asked as each
   * file is added (e.g. the folder a page shows at that moment).
   */
  folder?: string | (() => string | undefined);
  /**
   * A dropped or picked folder keeps its structure: each file goes into its path below `folder`
   * (`site/img/a.jpg` dropped into `uploads` → `uploads/site/img`), and the Dashboard offers
   * "browse folders" beside "browse files". Default false (every file into `folder`).
   */
  keepFolders?: boolean;
  tags?: string[];
  metadata?: Record<string, unknown>;
  /** Start uploading as soon as files are added (default false: the Upload button). */
  autoProceed?: boolean;
  /** Keep the selection and resume unfinished uploads after a reload or crash (Golden Retriever). Default true. */
  resume?: boolean;
  /** Inline size; default 100% wide, 400 px high. */
  width?: string | number;
  height?: string | number;
  /** A line under the drop zone, e.g. "Images up to 10 MB". */
  note?: string;
  /** Names this uploader's saved state; give each uploader of a page its own. Default `stowage`. */
  id?: string;
  /** Each file once it is stored, with Stowage's record. */
  onFileUploaded?: (record: FileRecord, file: UppyFile<StowageMeta, Body>) => void;
  /** After an upload run: the records of the files stored, and the ones that failed. */
  onSuccess?: (result: { files: FileRecord[]; failed: Array<{ name: string; error: string }> }) => void;
  onError?: (error: Error, file?: UppyFile<StowageMeta, Body>) => void;
  onProgress?: (progress: UploaderProgress) => void;
}

export interface Uploader {
  /** The Uppy instance underneath, for everything else (events: `uppy.on('upload-success', …)`). */
  uppy: Uppy<StowageMeta, Body>;
  /** Uploads what is selected; resolves with the records of the files stored. */
  upload(): Promise<FileRecord[]>;
  open(): void;
  close(): void;
  /** Removes the uploader from the page and stops its uploads (their sessions stay resumable). */
  destroy(): void;
}

function resolveTarget(target: string | HTMLElement): HTMLElement {
  if (typeof target !== 'string') return target;
  const el = document.querySelector<HTMLElement>(target);
  if (!el) throw new TypeError(`Stowage: no element matches ${target}`);
  return el;
}

/** The record of a tus upload: GET on its URL, with the credential that made it. */
async function tusRecord(url: string, credential: string): Promise<FileRecord> {
  const res = await fetch(url, { headers: { authorization: `Bearer ${credential}` } });
  const body = (await res.json()) as { data?: FileRecord; message?: string; error?: string };
  if (!res.ok || !body.data) throw new Error(`Stowage: ${body.message ?? body.error ?? `HTTP ${res.status}`}`);
  return body.data;
}

export function createUploader(options: CreateUploaderOptions): Uploader {
  if (options.apiKey !== undefined && options.publicKey !== undefined && options.apiKey !== options.publicKey)
    throw new TypeError('Stowage: apiKey and publicKey name the same key; pass one');
  const publicKey = options.publicKey ?? options.apiKey;
  const auth = { baseUrl: options.baseUrl, publicKey, uploadToken: options.uploadToken };
  const sessions = options.sessions;
  if (sessions && (publicKey !== undefined || options.uploadToken !== undefined)) {
    browserCredential(auth); // a private key is refused with its own message
    throw new TypeError('Stowage: pass sessions or a key (or an upload token), not both');
  }
  // A key, when the uploader is given one, is checked here (a private key is refused).
  const credential = sessions ? '' : browserCredential(auth);
  const protocol = options.protocol ?? (options.uploadToken ? 'tus' : 'multipart');
  if (sessions && protocol !== 'multipart')
    throw new TypeError('Stowage: sessions are multipart session calls; leave protocol out or set it to multipart');
  if (protocol === 'multipart' && options.uploadToken)
    throw new TypeError('Stowage: an upload token uploads through tus; leave protocol out or set it to tus');
  const element = resolveTarget(options.target);
  const modal = options.type === 'modal';
  const r = options.restrictions ?? {};

  const uppy = new Uppy<StowageMeta, Body>({
    id: options.id ?? 'stowage',
    autoProceed: options.autoProceed ?? false,
    restrictions: {
      allowedFileTypes: r.allowedFileTypes ?? null,
      maxFileSize: r.maxFileSize ?? null,
      minFileSize: r.minFileSize ?? null,
      maxTotalFileSize: r.maxTotalFileSize ?? null,
      // A token stores one file.
      maxNumberOfFiles: options.uploadToken || options.allowMultiple === false ? 1 : (r.maxNumberOfFiles ?? null),
    },
    meta: {
      ...(typeof options.folder === 'string' ? { folder: options.folder } : {}),
      ...(options.tags?.length ? { tags: options.tags.join(',') } : {}),
      // tus carries meta as text: the object goes as JSON, which multipart reads as well.
      ...(options.metadata ? { metadata: JSON.stringify(options.metadata) } : {}),
    },
  });

  let host: HTMLElement | undefined;
  if (!modal) {
    // Its own child, so that destroy() leaves the caller's element as it was.
    host = document.createElement('div');
    element.appendChild(host);
  }
  const theme = options.theme === 'system' ? 'auto' : (options.theme ?? 'light');
  const sources = options.sources ?? ['local'];
  uppy.use(Dashboard<StowageMeta, Body>, {
    ...(modal
      ? { inline: false as const, trigger: element, closeAfterFinish: false }
      : {
          inline: true as const,
          target: host!,
          width: options.width ?? '100%',
          height: options.height ?? 400,
        }),
    theme,
    note: options.note ?? null,
    disableLocalFiles: !sources.includes('local'),
    fileManagerSelectionType: options.keepFolders ? 'both' : 'files',
    proudlyDisplayPoweredByUppy: false,
  });
  if (sources.includes('camera'))
    // Uppy's own pattern (a plugin class as target); its typings want a wider class.
    uppy.use(Webcam<StowageMeta, Body>, { target: Dashboard as never, modes: ['picture', 'video-only'] });
  if (protocol === 'tus') uppy.use(Tus<StowageMeta, Body>, stowageTus<StowageMeta, Body>(auth));
  else
    uppy.use(
      AwsS3<StowageMeta, Body>,
      stowageMultipart<StowageMeta, Body>(sessions ? { baseUrl: options.baseUrl, sessions } : auth),
    );
  if (options.resume !== false) uppy.use(GoldenRetriever<StowageMeta, Body>, {});

  if (typeof options.folder === 'function' || options.keepFolders) {
    const folderOption = options.folder;
    uppy.on('file-added', (file) => {
      const base = (typeof folderOption === 'function' ? folderOption() : folderOption) ?? '';
      // Uppy's path of a file below the folder dropped or picked: `site/img/a.jpg`.
      const relative = typeof file.meta.relativePath === 'string' ? file.meta.relativePath : '';
      const dir = options.keepFolders ? relative.split('/').filter(Boolean).slice(0, -1).join('/') : '';
      const folder = [base.replace(/^\/+|\/+$/g, ''), dir].filter(Boolean).join('/');
      uppy.setFileMeta(file.id, { folder: folder || undefined });
    });
  }

  const recordOf = async (
    file: UppyFile<StowageMeta, Body> | undefined,
    response: { body?: unknown; uploadURL?: string },
  ) => {
    const body = response.body as Partial<FileRecord> | undefined;
    if (body && typeof body.file_no !== 'undefined') return body as FileRecord;
    if (protocol === 'tus' && response.uploadURL) return tusRecord(response.uploadURL, credential);
    throw new Error(`Stowage: no file record for ${file?.name ?? 'a file'}`);
  };
  const records = new Map<string, Promise<FileRecord>>();
  uppy.on('upload-success', (file, response) => {
    if (!file) return;
    const record = recordOf(file, response as { body?: unknown; uploadURL?: string });
    records.set(file.id, record);
    record.then(
      (rec) => options.onFileUploaded?.(rec, file),
      (err: Error) => options.onError?.(err, file),
    );
  });
  uppy.on('upload-error', (file, error) => options.onError?.(error, file));
  uppy.on('progress', () => {
    if (!options.onProgress) return;
    let loaded = 0;
    let total = 0;
    for (const f of uppy.getFiles()) {
      loaded += f.progress.bytesUploaded || 0;
      total += f.progress.bytesTotal || f.size || 0;
    }
    options.onProgress({ loaded, total, percent: total ? Math.round((loaded / total) * 100) : 0 });
  });

  const collect = async (successful: UppyFile<StowageMeta, Body>[] = []) => {
    const files: FileRecord[] = [];
    for (const f of successful) {
      const rec = await records.get(f.id)?.catch(() => undefined);
      if (rec) files.push(rec);
    }
    return files;
  };
  uppy.on('complete', async (result) => {
    const files = await collect(result.successful);
    const failed = (result.failed ?? []).map((f) => ({ name: f.name ?? '', error: String(f.error ?? '') }));
    options.onSuccess?.({ files, failed });
  });

  const dashboard = () => uppy.getPlugin<Dashboard<StowageMeta, Body>>('Dashboard');
  return {
    uppy,
    async upload() {
      const result = await uppy.upload();
      return collect(result?.successful);
    },
    open: () => dashboard()?.openModal(),
    close: () => dashboard()?.closeModal(),
    destroy() {
      uppy.destroy();
      host?.remove();
    },
  };
}
