// Option builders that point Uppy's upload plugins at Stowage: `@uppy/aws-s3` (multipart) at
// Stowage's own multipart endpoints, and `@uppy/tus` at its tus endpoint. Nothing here imports
// Uppy at run time (types only), so the builders cost a page only the SDK client they call.
//
// Uppy 5: its @uppy/aws-s3 is the last to take the five multipart callbacks mapped here. Uppy
// 6 rewrote the plugin into an S3 protocol client (`signRequest` presigns S3 requests whose XML
// answers it parses), which Stowage's JSON endpoints do not speak.
import type { AwsS3MultipartOptions, AwsS3Part, AwsS3UploadParameters } from '@uppy/aws-s3';
import type { Body, Meta, UppyFile } from '@uppy/core';
import type { TusOptions } from '@uppy/tus';
import { Stowage } from './client.ts';
import type { FileRecord, MultipartSession } from './types.ts';

/** What a web page may hold: the workspace's public key, or an upload token from your backend. */
export interface BrowserCredentials {
  /** The service's base URL, e.g. https://media.example.com */
  baseUrl: string;
  /** The workspace's public key (`stw_pk_…`). */
  publicKey?: string;
  /** An upload token (`stw_ut_…`) minted by your backend: one file, no key in the page. */
  uploadToken?: string;
}

/** The meta fields Stowage reads from an Uppy file (set them with Uppy's `meta` or `setFileMeta`). */
export interface StowageMeta extends Meta {
  /** Folder path, e.g. `avatars/2026`. */
  folder?: string;
  /** Comma-separated tags, or a list. */
  tags?: string | string[];
  /** Custom metadata: an object, or its JSON text. */
  metadata?: Record<string, unknown> | string;
}

const PRIVATE_KEY = /^stw_sk_/;
const PUBLIC_KEY = /^stw_pk_/;
const UPLOAD_TOKEN = /^stw_ut_/;

/**
 * The credential a page sends, checked by its prefix (`stw_pk_` public key, `stw_ut_` upload
 * token, `stw_sk_` private key). A private key is refused outright: anyone who opens the page
 * can read it, and it can list, change and delete every file of the workspace.
 */
export function browserCredential(auth: BrowserCredentials, allowToken = true): string {
  const given = [auth.publicKey, auth.uploadToken].filter((v): v is string => typeof v === 'string' && v !== '');
  if (given.some((v) => PRIVATE_KEY.test(v.trim())))
    throw new TypeError(
      'Stowage: a private key (stw_sk_…) must never be put in a web page. Use the workspace public key (stw_pk_…), ' +
        'or an upload token (stw_ut_…) minted by your backend with the private key.',
    );
  if (given.length !== 1) throw new TypeError('Stowage: pass exactly one of publicKey or uploadToken');
  const value = given[0].trim();
  if (auth.publicKey !== undefined && !PUBLIC_KEY.test(value))
    throw new TypeError('Stowage: publicKey must be the workspace public key (stw_pk_…)');
  if (auth.uploadToken !== undefined) {
    if (!UPLOAD_TOKEN.test(value)) throw new TypeError('Stowage: uploadToken must be an upload token (stw_ut_…)');
    if (!allowToken)
      throw new TypeError(
        'Stowage: multipart uploads take the public key; an upload token uploads through tus (stowageTus) or uploadWithToken',
      );
  }
  if (!auth.baseUrl) throw new TypeError('Stowage: baseUrl is required, e.g. https://media.example.com');
  return value;
}

// ---------------------------------------------------------------------------------------------
// @uppy/aws-s3 in multipart mode → /api/v1/multipart/*

/**
 * The four calls of a multipart session (start, status, complete, abort), made by your own code
 * instead of with a key the uploader holds: the methods of the same names of a `Stowage` client,
 * or functions that ask your backend. Part bytes still go straight to the presigned part URLs.
 */
export type MultipartSessions = Pick<
  Stowage,
  'startMultipart' | 'multipartStatus' | 'completeMultipart' | 'abortMultipart'
>;

export interface StowageMultipartOptions extends BrowserCredentials {
  /**
   * Instead of `publicKey`: your own session calls. For an app whose signed-in user already holds
   * a key the page is trusted with (Stowage's dashboard, with the user's private key in the tab),
   * or a page whose backend makes the calls; never a private key in a third-party page.
   */
  sessions?: MultipartSessions;
  /** Parts in flight at once (the plugin's `limit`). Default 4. */
  limit?: number;
  /** Where sessions are kept so that an upload resumes after a reload; default `localStorage`. */
  storage?: Pick<Storage, 'getItem' | 'setItem' | 'removeItem'>;
  fetch?: typeof fetch;
}

/** The answer Uppy gets when a multipart upload completes: Stowage's file record, and its URL as `location`. */
export type StowageUploadBody = FileRecord & { location: string };

const MiB = 1024 * 1024;
const SESSION_KEY = 'stowage:multipart:';

/**
 * Stowage's part layout (src/uploads/multipart/part-layout.ts): 8 MiB parts, larger in whole
 * MiB so that no file needs over 10,000. Uppy cuts the file before the session exists, so both
 * sides must agree; createMultipartUpload checks that they did.
 */
export function stowagePartSize(size: number): number {
  return Math.max(8 * MiB, Math.ceil(size / 10_000 / MiB) * MiB);
}

function metaTags(tags: unknown): string[] | undefined {
  if (Array.isArray(tags)) return tags.map(String);
  if (typeof tags === 'string' && tags.trim() !== '')
    return tags
      .split(',')
      .map((t) => t.trim())
      .filter(Boolean);
  return undefined;
}

function metaObject(metadata: unknown): Record<string, unknown> | undefined {
  if (metadata && typeof metadata === 'object' && !Array.isArray(metadata)) return metadata as Record<string, unknown>;
  if (typeof metadata === 'string' && metadata.trim() !== '') {
    const parsed: unknown = JSON.parse(metadata);
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
    throw new TypeError('Stowage: the metadata meta field must be a JSON object');
  }
  return undefined;
}

function defaultStorage(): StowageMultipartOptions['storage'] {
  try {
    return globalThis.localStorage;
  } catch {
    return undefined; // sandboxed frames and some privacy modes forbid it
  }
}

/** Who makes the session calls: the caller's own `sessions`, else a client with the public key. */
function multipartClient(options: StowageMultipartOptions): MultipartSessions {
  if (options.sessions) {
    if (options.publicKey !== undefined || options.uploadToken !== undefined) {
      browserCredential(options); // a private key is refused with its own message
      throw new TypeError('Stowage: pass sessions or a publicKey, not both');
    }
    return options.sessions;
  }
  const apiKey = browserCredential(options, false);
  return new Stowage({ baseUrl: options.baseUrl, apiKey, fetch: options.fetch });
}

/**
 * Options for `uppy.use(AwsS3, stowageMultipart({ baseUrl, publicKey }))`: every file goes
 * multipart to Stowage's endpoints, parts straight to storage (presigned S3 URLs, or Stowage
 * itself on local disk). With @uppy/golden-retriever an upload resumes after a reload: the
 * session (its part URLs) is kept in `localStorage` until it completes or is aborted, and
 * `listParts` asks Stowage which parts storage already holds, so those are not sent again.
 */
export function stowageMultipart<M extends StowageMeta, B extends Body>(
  options: StowageMultipartOptions,
): AwsS3MultipartOptions<M, B> {
  const client = multipartClient(options);
  const store = options.storage ?? defaultStorage();
  const memory = new Map<string, MultipartSession>();

  const keep = (s: MultipartSession) => {
    memory.set(s.session_id, s);
    try {
      store?.setItem(SESSION_KEY + s.session_id, JSON.stringify(s));
    } catch {
      // storage full or refused: resuming after a reload is lost, this upload is not
    }
  };
  const forget = (id: string) => {
    memory.delete(id);
    store?.removeItem(SESSION_KEY + id);
  };
  const sessionOf = (id: string): MultipartSession => {
    let s = memory.get(id);
    if (!s) {
      const text = store?.getItem(SESSION_KEY + id);
      if (text) {
        s = JSON.parse(text) as MultipartSession;
        memory.set(id, s);
      }
    }
    if (!s) throw new Error(`Stowage: multipart session ${id} is not known to this page (its part URLs are lost)`);
    return s;
  };

  return {
    shouldUseMultipart: true,
    limit: options.limit ?? 4,
    getChunkSize: (file: { size: number }) => stowagePartSize(file.size),

    async createMultipartUpload(file: UppyFile<M, B>) {
      const size = file.size ?? (file.data as Blob).size;
      const meta = file.meta as StowageMeta;
      const session = await client.startMultipart({
        file_name: file.name ?? 'file',
        size,
        format: file.type || 'application/octet-stream',
        folder: typeof meta.folder === 'string' ? meta.folder : undefined,
        tags: metaTags(meta.tags),
        metadata: metaObject(meta.metadata),
      });
      if (session.part_size !== stowagePartSize(size)) {
        await client.abortMultipart(session.session_id).catch(() => {});
        throw new Error(
          `Stowage: the service cuts this file into ${session.part_size}-byte parts, this SDK into ${stowagePartSize(size)}; update @stowage/sdk`,
        );
      }
      keep(session);
      // `key` only names the object to Uppy; Stowage finds everything by the session id.
      return { uploadId: session.session_id, key: session.uuid };
    },

    signPart(_file: UppyFile<M, B>, { uploadId, partNumber }: { uploadId: string; partNumber: number }) {
      const url = sessionOf(uploadId).parts[partNumber - 1];
      if (!url) throw new Error(`Stowage: session ${uploadId} has no part ${partNumber}`);
      // The URL is the authorisation: no key goes with a part.
      return {
        method: 'PUT',
        url,
        headers: { 'content-type': 'application/octet-stream' },
      } satisfies AwsS3UploadParameters;
    },

    async listParts(file: UppyFile<M, B>, { uploadId, signal }: { uploadId: string; signal?: AbortSignal }) {
      const status = await client.multipartStatus(uploadId, { signal });
      if (status.status !== 'active' && status.status !== 'completed')
        throw new Error(`Stowage: multipart session ${uploadId} is ${status.status}; add the file again`);
      const size = file.size ?? status.size;
      const last = Math.max(1, Math.ceil(size / status.part_size));
      // Only whole parts count: a part cut short is sent again.
      return status.uploaded_parts
        .filter((p) => p.size === (p.part_number < last ? status.part_size : size - (last - 1) * status.part_size))
        .map((p): AwsS3Part => ({ PartNumber: p.part_number, Size: p.size, ETag: p.etag }));
    },

    async completeMultipartUpload(
      _file: UppyFile<M, B>,
      { uploadId, signal }: { uploadId: string; parts: AwsS3Part[]; signal: AbortSignal },
    ) {
      // Stowage asks storage which parts it holds, so the ETags need not be sent.
      const record = await client.completeMultipart(uploadId, { signal, uuid: memory.get(uploadId)?.uuid });
      forget(uploadId);
      return { ...record, location: record.url } as StowageUploadBody;
    },

    async abortMultipartUpload(
      _file: UppyFile<M, B>,
      { uploadId, signal }: { uploadId: string; signal?: AbortSignal },
    ) {
      forget(uploadId);
      await client.abortMultipart(uploadId, { signal });
    },
  } as AwsS3MultipartOptions<M, B>;
}

// ---------------------------------------------------------------------------------------------
// @uppy/tus → /api/v1/tus

export type StowageTusOptions<M extends Meta, B extends Body> = BrowserCredentials &
  Omit<TusOptions<M, B>, 'endpoint' | 'headers'>;

/**
 * Options for `uppy.use(Tus, stowageTus({ baseUrl, publicKey }))` (or `uploadToken`): the
 * endpoint and the credential header. Uppy sends the file's meta fields: `name` and `type` as
 * tus's `filename` and `filetype`, `folder`, `tags` (comma-separated) and `metadata` (JSON text
 * of an object) as they are. Any other @uppy/tus option passes through.
 */
export function stowageTus<M extends StowageMeta, B extends Body>(options: StowageTusOptions<M, B>): TusOptions<M, B> {
  const { baseUrl, publicKey, uploadToken, ...tus } = options;
  const credential = browserCredential({ baseUrl, publicKey, uploadToken });
  return {
    // Uppy's default sends every meta field present (a list would send absent ones as "undefined");
    // Stowage reads filename, filetype, folder, tags and metadata (JSON text) and ignores the rest.
    ...tus,
    endpoint: `${baseUrl.replace(/\/+$/, '')}/api/v1/tus`,
    headers: { authorization: `Bearer ${credential}` },
  } as TusOptions<M, B>;
}
