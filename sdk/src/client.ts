// The Stowage client: every endpoint, for Node (>= 20) and browsers, on plain `fetch`.
import { StowageAbortError, StowageError, StowageNetworkError } from './errors.ts';
import { bodySender, type SendBody } from './send-body.ts';
import { type SignDeliveryUrlOptions, signDeliveryUrl } from './sign.ts';
import type {
  DeliveryKey,
  FileListQuery,
  FilePage,
  FileRecord,
  FileUpdateBody,
  Folder,
  FolderCreateBody,
  FolderMoveBody,
  FolderListQuery,
  FolderPage,
  GenerateTokenOptions,
  MultipartCompleteBody,
  MultipartSession,
  MultipartStartBody,
  ApiKeyInfo,
  ApiKeyRotation,
  NewApiKey,
  Preset,
  PresetList,
  PresetPutBody,
  Progress,
  RemoteUploadBody,
  SessionStatus,
  SignedUrl,
  SignedUrlBody,
  WebhookDelivery,
  WebhookDeliveryPage,
  WebhookDeliveryQuery,
  Source,
  SourceCreateBody,
  SourceListQuery,
  SourcePage,
  SourceTest,
  SourceUpdateBody,
  TokenMintBody,
  TokenUploadOptions,
  UploadOptions,
  UploadToken,
  WorkspacePatchBody,
  WorkspaceSettings,
  WorkspaceSettingsPatch,
} from './types.ts';

export interface ClientOptions {
  /** The service's base URL, e.g. https://media.example.com */
  baseUrl: string;
  /** A public key (uploads only) or a private key (everything). */
  apiKey: string;
  /** Retries of a request that failed for a passing reason (network, 429, 5xx). Default 4. */
  retries?: number;
  /** First backoff delay in ms, doubled each retry (with jitter). Default 300. */
  retryDelayMs?: number;
  /** Longest wait between retries, in ms, even when Retry-After asks for more. Default 30 s. */
  maxRetryDelayMs?: number;
  fetch?: typeof fetch;
  /**
   * The workspace's delivery key (`getDeliveryKey()`), for `signUrl` and `deliveryUrl(…, {sign})`
   * on servers. Never give it to browser code.
   */
  deliveryKey?: string;
}

export interface RequestOptions {
  signal?: AbortSignal;
}

export interface MultipartOptions extends UploadOptions, RequestOptions {
  /** MIME type of the file; default the Blob's type or application/octet-stream. */
  contentType?: string;
  /** Parts in flight at once. Default 4. */
  parallel?: number;
  /** Progress after each acknowledged part. */
  onProgress?: (p: Progress) => void;
  /** Called with the session once it exists: keep it to resume after a crash or reload. */
  onSession?: (session: MultipartSession) => void;
  /** A session saved from `onSession`: only the parts storage does not hold yet are sent. */
  resume?: MultipartSession;
  ttlSeconds?: number;
}

export interface AutoUploadOptions extends MultipartOptions {
  /** Files at least this large go multipart. Default 16 MiB. */
  multipartThreshold?: number;
}

export interface Page<T> {
  items: T[];
  meta: Record<string, unknown>;
}

type Json = Record<string, unknown>;

const RETRYABLE = new Set([408, 425, 429, 500, 502, 503, 504]);

export class Stowage {
  private readonly base: string;
  private readonly fetchImpl: typeof fetch;
  private readonly retries: number;
  private readonly retryDelayMs: number;
  private readonly maxRetryDelayMs: number;

  private readonly sendBody: SendBody;

  constructor(private readonly options: ClientOptions) {
    this.base = options.baseUrl.replace(/\/+$/, '');
    this.fetchImpl = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.sendBody = bodySender(this.fetchImpl, options.fetch !== undefined);
    this.retries = options.retries ?? 4;
    this.retryDelayMs = options.retryDelayMs ?? 300;
    this.maxRetryDelayMs = options.maxRetryDelayMs ?? 30_000;
  }

  // --- plumbing --------------------------------------------------------------------------

  /** One API call with retries for passing failures; answers are unwrapped from `{success,data}`. */
  async request<T>(
    method: string,
    path: string,
    opts: {
      json?: unknown;
      form?: FormData;
      query?: Record<string, unknown>;
      signal?: AbortSignal;
      raw?: boolean;
    } = {},
  ): Promise<T> {
    const url = new URL(this.base + path);
    for (const [k, v] of Object.entries(opts.query ?? {}))
      if (v !== undefined && v !== null) url.searchParams.set(k, String(v));
    const headers: Record<string, string> = { authorization: `Bearer ${this.options.apiKey}` };
    let body: BodyInit | undefined;
    if (opts.json !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(opts.json);
    } else if (opts.form) body = opts.form;
    const res = await this.withRetries(
      url,
      () => this.fetchImpl(url, { method, headers, body, signal: opts.signal }),
      opts.signal,
    );
    const text = await res.text();
    const parsed = text ? safeJson(text) : undefined;
    if (!res.ok) throw toError(res, parsed);
    if (opts.raw) return parsed as T;
    return unwrap(parsed) as T;
  }

  /**
   * Runs `send` until it gives a final answer: network errors and 408/425/429/5xx are retried
   * with exponential backoff and jitter, waiting at least what Retry-After asks.
   */
  private withRetries(url: string | URL, send: () => Promise<Response>, signal?: AbortSignal): Promise<Response> {
    return withRetries(url, send, this.retryPolicy(), signal);
  }

  private retryPolicy(): RetryPolicy {
    return { retries: this.retries, retryDelayMs: this.retryDelayMs, maxRetryDelayMs: this.maxRetryDelayMs };
  }

  // --- uploads ---------------------------------------------------------------------------

  /** Direct upload: one multipart/form-data request. */
  async upload(file: Blob, fileName: string, opts: UploadOptions & RequestOptions = {}): Promise<FileRecord> {
    const form = new FormData();
    form.append('file_name', fileName);
    if (opts.folder !== undefined) form.append('folder', opts.folder);
    if (opts.tags?.length) form.append('tags', opts.tags.join(','));
    if (opts.metadata) form.append('metadata', JSON.stringify(opts.metadata));
    if (opts.customId !== undefined) form.append('custom_id', opts.customId);
    if (opts.randomPrefix !== undefined) form.append('random_prefix', String(opts.randomPrefix));
    if (opts.transform) form.append('transform', opts.transform);
    if (opts.webhookUrl) form.append('webhook_url', opts.webhookUrl);
    form.append('file', file, fileName);
    return this.request<FileRecord>('POST', '/api/v1/uploads', { form, signal: opts.signal });
  }

  /** The service downloads `remoteUrl` itself. */
  uploadFromUrl(
    remoteUrl: string,
    opts: UploadOptions & RequestOptions & { fileName?: string } = {},
  ): Promise<FileRecord> {
    return this.request<FileRecord>('POST', '/api/v1/uploads/remote', {
      json: {
        remote_url: remoteUrl,
        file_name: opts.fileName,
        folder: opts.folder,
        tags: opts.tags,
        metadata: opts.metadata,
        custom_id: opts.customId,
        random_prefix: opts.randomPrefix,
        transform: opts.transform,
        webhook_url: opts.webhookUrl,
      } satisfies RemoteUploadBody,
      signal: opts.signal,
    });
  }

  startMultipart(input: MultipartStartBody, opts: RequestOptions = {}): Promise<MultipartSession> {
    // Either documented answer (200 with the short shape, 201 with the full one) is fine.
    return this.request<MultipartSession>('POST', '/api/v1/multipart/start', {
      json: input,
      signal: opts.signal,
      raw: true,
    });
  }

  multipartStatus(sessionId: string, opts: RequestOptions = {}): Promise<SessionStatus> {
    return this.request<SessionStatus>('GET', `/api/v1/multipart/${encodeURIComponent(sessionId)}`, {
      signal: opts.signal,
    });
  }

  completeMultipart(sessionId: string, opts: RequestOptions & { uuid?: string } = {}): Promise<FileRecord> {
    return this.request<FileRecord>('POST', '/api/v1/multipart/complete', {
      json: { session_id: sessionId, uuid: opts.uuid } satisfies MultipartCompleteBody,
      signal: opts.signal,
    });
  }

  async abortMultipart(sessionId: string, opts: RequestOptions = {}): Promise<void> {
    await this.request('DELETE', `/api/v1/multipart/${encodeURIComponent(sessionId)}`, { signal: opts.signal });
  }

  /**
   * A large file in parts: `parallel` at once, each retried on passing failures, progress after
   * every part. Cancelling through `signal` leaves the session in place so that it can be
   * resumed with `resume`; call `abortMultipart` to give it up.
   */
  async uploadMultipart(file: Blob, fileName: string, opts: MultipartOptions = {}): Promise<FileRecord> {
    let session = opts.resume;
    let done = new Set<number>();
    if (session) {
      const status = await this.multipartStatus(session.session_id, opts).catch((err) => {
        if (err instanceof StowageError && err.status === 404) return undefined;
        throw err;
      });
      if (status?.status === 'completed') return this.completeMultipart(session.session_id, opts);
      if (status?.status !== 'active') session = undefined;
      else
        done = new Set(
          status.uploaded_parts
            .filter((p) => p.size === partLength(session!, file.size, p.part_number))
            .map((p) => p.part_number),
        );
    }
    if (!session) {
      session = await this.startMultipart(
        {
          file_name: fileName,
          size: file.size,
          format: opts.contentType || file.type || 'application/octet-stream',
          folder: opts.folder,
          tags: opts.tags,
          metadata: opts.metadata,
          custom_id: opts.customId,
          random_prefix: opts.randomPrefix,
          ttl_seconds: opts.ttlSeconds,
          webhook_url: opts.webhookUrl,
        },
        opts,
      );
      opts.onSession?.(session);
    }
    const s = session;
    const total = file.size;
    // Progress in bytes: the parts stored, plus what has gone out of each part in flight (a
    // part sent again starts from 0, so a retry shows as a step back).
    let stored = [...done].reduce((n, p) => n + partLength(s, total, p), 0);
    const sending = new Map<number, number>();
    const report = () => {
      let loaded = stored;
      for (const n of sending.values()) loaded += n;
      opts.onProgress?.({ loaded: Math.min(loaded, total), total });
    };
    report();
    const queue = s.parts.map((url, i) => ({ url, n: i + 1 })).filter((p) => !done.has(p.n));
    const workers = Array.from({ length: Math.max(1, Math.min(opts.parallel ?? 4, queue.length)) }, async () => {
      for (let job = queue.shift(); job; job = queue.shift()) {
        const { url, n } = job;
        const start = (n - 1) * s.part_size;
        const chunk = file.slice(start, Math.min(start + s.part_size, total));
        const res = await this.withRetries(
          url,
          () =>
            this.sendBody(
              url,
              {
                method: 'PUT',
                body: chunk,
                headers: { 'content-type': 'application/octet-stream' },
                signal: opts.signal,
              },
              (sent) => {
                sending.set(n, sent);
                report();
              },
            ),
          opts.signal,
        );
        if (!res.ok) {
          sending.delete(n);
          const text = await res.text();
          throw toError(res, text ? safeJson(text) : undefined, `part ${n}`);
        }
        await res.arrayBuffer().catch(() => {});
        sending.delete(n);
        stored += chunk.size;
        report();
      }
    });
    await Promise.all(workers);
    return this.completeMultipart(s.session_id, { signal: opts.signal, uuid: s.uuid });
  }

  /** Direct below `multipartThreshold` (16 MiB), multipart above. */
  uploadFile(file: Blob, fileName: string, opts: AutoUploadOptions = {}): Promise<FileRecord> {
    if (file.size >= (opts.multipartThreshold ?? 16 * 1024 * 1024)) return this.uploadMultipart(file, fileName, opts);
    return this.upload(file, fileName, opts).then((record) => {
      opts.onProgress?.({ loaded: file.size, total: file.size });
      return record;
    });
  }

  // --- upload tokens and workspace settings ----------------------------------------------

  /**
   * An upload token (private key): lets a browser or app upload one file under this policy
   * without any API key, through `uploadWithToken`.
   */
  generateToken(input: GenerateTokenOptions, opts: RequestOptions = {}): Promise<UploadToken> {
    const o = input.allowOverride;
    return this.request<UploadToken>('POST', '/api/v1/generate-token', {
      json: {
        file_name: input.fileName,
        folder: input.folder,
        tags: input.tags,
        transform: input.transform,
        max_file_size: input.maxFileSize,
        ttl_seconds: input.ttlSeconds,
        metadata: input.metadata,
        custom_id: input.customId,
        random_prefix: input.randomPrefix,
        allow_override: o ? { folder: o.folder, tags: o.tags, transform: o.transform } : undefined,
      } satisfies TokenMintBody,
      signal: opts.signal,
      raw: true,
    });
  }

  /**
   * `uploadWithToken` against this client's service (a bare token or an `upload_url`); the
   * client's key is not sent. Not retried, except after 429/503 with Retry-After.
   */
  uploadWithToken(
    tokenOrUploadUrl: string,
    file: Blob,
    opts: Omit<TokenUploadOptions, 'baseUrl' | 'fetch'> = {},
  ): Promise<FileRecord> {
    return sendWithToken(tokenOrUploadUrl, file, { ...opts, baseUrl: this.base }, this.fetchImpl, this.retryPolicy());
  }

  /** The workspace of the key (private key), with its browser settings and usage. */
  getWorkspace(opts: RequestOptions = {}): Promise<WorkspaceSettings> {
    return this.request<WorkspaceSettings>('GET', '/api/v1/workspace', opts);
  }

  /** Changes the lists given; a list left out stays as it is, `[]` (or `null`) empties it. */
  updateWorkspace(patch: WorkspaceSettingsPatch, opts: RequestOptions = {}): Promise<WorkspaceSettings> {
    return this.request<WorkspaceSettings>('PATCH', '/api/v1/workspace', {
      json: {
        allowed_origins: patch.allowedOrigins,
        webhook_origins: patch.webhookOrigins,
        signed_transformations: patch.signedTransformations,
      } satisfies WorkspacePatchBody,
      signal: opts.signal,
    });
  }

  /** The delivery key (private key) that signs transformation URLs offline; made on first request. */
  async getDeliveryKey(opts: RequestOptions = {}): Promise<string> {
    return (await this.request<DeliveryKey>('GET', '/api/v1/workspace/delivery-key', opts)).delivery_key;
  }

  /** A new delivery key; URLs signed with the old one stop working. */
  async rotateDeliveryKey(opts: RequestOptions = {}): Promise<string> {
    return (await this.request<DeliveryKey>('POST', '/api/v1/workspace/delivery-key/rotate', opts)).delivery_key;
  }

  /**
   * A delivery URL signed with the client's `deliveryKey` (signed transformations), computed
   * here without a request. Without an expiry the URL never changes, so caches keep it.
   */
  signUrl(url: string, options: SignDeliveryUrlOptions = {}): Promise<string> {
    if (!this.options.deliveryKey) throw new TypeError('signUrl needs the deliveryKey client option');
    return signDeliveryUrl(url, this.options.deliveryKey, options);
  }

  // --- files and folders -----------------------------------------------------------------

  /**
   * A page of files. Asked with `aliases=none` (the page in Stowage's own names, a quarter of
   * the bytes of the full answer); the other names (`items`, `data`, `total_count`, …) are put
   * back here, so the page reads as the full answer does.
   */
  async listFiles(
    query: Partial<Omit<FileListQuery, 'tags' | 'aliases'>> & { tags?: string[] | string } = {},
    opts: RequestOptions = {},
  ): Promise<FilePage> {
    const tags = Array.isArray(query.tags) ? query.tags.join(',') : query.tags;
    const page = await this.request<Pick<FilePage, 'files' | 'meta'> & Partial<FilePage>>('GET', '/api/v1/files', {
      query: { ...query, tags, aliases: 'none' },
      signal: opts.signal,
      raw: true,
    });
    return withPageAliases(page);
  }

  /**
   * Every file matching the query, page after page by cursor (each page costs the same at any
   * depth, and none repeats or skips a file while others arrive). `limit` is the page size.
   */
  async *eachFile(
    query: Omit<Parameters<Stowage['listFiles']>[0], 'page' | 'cursor'> = {},
    opts: RequestOptions = {},
  ): AsyncGenerator<FileRecord> {
    let cursor: string | undefined;
    do {
      const page = await this.listFiles({ limit: 100, ...query, cursor }, opts);
      yield* page.files;
      cursor = page.meta.nextCursor ?? undefined;
    } while (cursor);
  }

  getFile(fileNo: string, opts: RequestOptions = {}): Promise<FileRecord> {
    return this.request<FileRecord>('GET', `/api/v1/files/${encodeURIComponent(fileNo)}`, opts);
  }

  renameFile(fileNo: string, name: string, opts: RequestOptions = {}): Promise<FileRecord> {
    return this.request<FileRecord>('PATCH', `/api/v1/files/${encodeURIComponent(fileNo)}/rename`, {
      json: { name },
      signal: opts.signal,
    });
  }

  updateFile(fileNo: string, patch: FileUpdateBody, opts: RequestOptions = {}): Promise<FileRecord> {
    return this.request<FileRecord>('PATCH', `/api/v1/files/${encodeURIComponent(fileNo)}`, {
      json: patch,
      signal: opts.signal,
    });
  }

  async deleteFile(fileNo: string, opts: RequestOptions = {}): Promise<void> {
    await this.request('DELETE', `/api/v1/files/${encodeURIComponent(fileNo)}`, opts);
  }

  signedUrl(fileNo: string, input: SignedUrlBody = {}, opts: RequestOptions = {}): Promise<SignedUrl> {
    return this.request('POST', `/api/v1/files/${encodeURIComponent(fileNo)}/signed-url`, {
      json: input,
      signal: opts.signal,
    });
  }

  listFolders(query: Partial<FolderListQuery> = {}, opts: RequestOptions = {}) {
    return this.request<FolderPage>('GET', '/api/v1/folders', { query, signal: opts.signal, raw: true });
  }

  createFolder(name: string, parentFolderNo?: string, opts: RequestOptions = {}): Promise<Folder> {
    return this.request<Folder>('POST', '/api/v1/folders', {
      json: { name, parent_folder_no: parentFolderNo } satisfies FolderCreateBody,
      signal: opts.signal,
    });
  }

  renameFolder(folderNo: string, name: string, opts: RequestOptions = {}): Promise<Folder> {
    return this.request<Folder>('POST', `/api/v1/folders/rename/${encodeURIComponent(folderNo)}`, {
      json: { name },
      signal: opts.signal,
    });
  }

  /** Moves a folder, with everything in it, under another parent (null: the root). */
  moveFolder(folderNo: string, parentFolderNo: string | null, opts: RequestOptions = {}): Promise<Folder> {
    return this.request<Folder>('POST', `/api/v1/folders/move/${encodeURIComponent(folderNo)}`, {
      json: { parent_folder_no: parentFolderNo } satisfies FolderMoveBody,
      signal: opts.signal,
    });
  }

  /** Deletes an empty folder; a folder with files or folders in it needs `recursive: true` (else 409 FOLDER_NOT_EMPTY). */
  async deleteFolder(folderNo: string, opts: RequestOptions & { recursive?: boolean } = {}): Promise<void> {
    await this.request('DELETE', `/api/v1/folders/${encodeURIComponent(folderNo)}`, {
      signal: opts.signal,
      query: opts.recursive ? { recursive: 'true' } : undefined,
    });
  }

  // --- sources ---------------------------------------------------------------------------

  listSources(query: Partial<SourceListQuery> = {}, opts: RequestOptions = {}) {
    return this.request<SourcePage>('GET', '/api/v1/sources', { query, signal: opts.signal, raw: true });
  }

  getSource(id: string, opts: RequestOptions = {}): Promise<Source> {
    return this.request<Source>('GET', `/api/v1/sources/${encodeURIComponent(id)}`, opts);
  }

  createSource(input: SourceCreateBody, opts: RequestOptions = {}): Promise<Source> {
    return this.request<Source>('POST', '/api/v1/sources', { json: input, signal: opts.signal });
  }

  updateSource(id: string, patch: SourceUpdateBody, opts: RequestOptions = {}): Promise<Source> {
    return this.request<Source>('PATCH', `/api/v1/sources/${encodeURIComponent(id)}`, {
      json: patch,
      signal: opts.signal,
    });
  }

  async deleteSource(id: string, opts: RequestOptions = {}): Promise<void> {
    await this.request('DELETE', `/api/v1/sources/${encodeURIComponent(id)}`, opts);
  }

  testSource(id: string, opts: RequestOptions = {}): Promise<SourceTest> {
    return this.request('POST', `/api/v1/sources/${encodeURIComponent(id)}/test`, opts);
  }

  // --- transformation presets --------------------------------------------------------------

  /** The workspace's presets (private key), by name, and how many it may have. */
  listPresets(opts: RequestOptions = {}): Promise<PresetList> {
    return this.request<PresetList>('GET', '/api/v1/presets', opts);
  }

  getPreset(name: string, opts: RequestOptions = {}): Promise<Preset> {
    return this.request<Preset>('GET', `/api/v1/presets/${encodeURIComponent(name)}`, opts);
  }

  /**
   * Creates the preset or replaces its text; delivery URLs then name it as `t_{name}`. A
   * transformation the service cannot read is refused here (400), never at delivery.
   */
  setPreset(name: string, transformation: string, opts: RequestOptions = {}): Promise<Preset> {
    return this.request<Preset>('PUT', `/api/v1/presets/${encodeURIComponent(name)}`, {
      json: { transformation } satisfies PresetPutBody,
      signal: opts.signal,
    });
  }

  async deletePreset(name: string, opts: RequestOptions = {}): Promise<void> {
    await this.request('DELETE', `/api/v1/presets/${encodeURIComponent(name)}`, opts);
  }

  // --- API keys and webhook deliveries (private key) ----------------------------------------

  /** The workspace's keys, oldest first, each by its hint: the keys themselves are never shown again. */
  async listKeys(opts: RequestOptions = {}): Promise<ApiKeyInfo[]> {
    return (await this.request<{ keys: ApiKeyInfo[] }>('GET', '/api/v1/keys', opts)).keys;
  }

  /** A new key; `key` is in this answer only. */
  createKey(type: 'public' | 'private', opts: RequestOptions = {}): Promise<NewApiKey> {
    return this.request<NewApiKey>('POST', '/api/v1/keys', { json: { type }, signal: opts.signal });
  }

  /** A new key of the same type; the old one keeps working for `graceSeconds` (default 0). */
  rotateKey(keyId: string, opts: RequestOptions & { graceSeconds?: number } = {}): Promise<ApiKeyRotation> {
    return this.request<ApiKeyRotation>('POST', `/api/v1/keys/${encodeURIComponent(keyId)}/rotate`, {
      json: { grace_seconds: opts.graceSeconds ?? 0 },
      signal: opts.signal,
    });
  }

  /** Stops a key now. The last private key in force is refused (409 LAST_PRIVATE_KEY). */
  revokeKey(keyId: string, opts: RequestOptions = {}): Promise<ApiKeyInfo> {
    return this.request<ApiKeyInfo>('DELETE', `/api/v1/keys/${encodeURIComponent(keyId)}`, opts);
  }

  /** Webhook deliveries, newest first; pass `next_cursor` back as `cursor` for the next page. */
  listWebhookDeliveries(
    query: Partial<WebhookDeliveryQuery> = {},
    opts: RequestOptions = {},
  ): Promise<WebhookDeliveryPage> {
    return this.request<WebhookDeliveryPage>('GET', '/api/v1/webhooks/deliveries', { ...opts, query });
  }

  /** Sends a delivery again now, with the same webhook-id. */
  redeliverWebhook(deliveryId: string, opts: RequestOptions = {}): Promise<WebhookDelivery> {
    return this.request<WebhookDelivery>(
      'POST',
      `/api/v1/webhooks/deliveries/${encodeURIComponent(deliveryId)}/redeliver`,
      opts,
    );
  }

  /** A delivery URL for a file path with transformation tokens, signed with the client's `deliveryKey`. */
  signedDeliveryUrl(
    workspaceId: string,
    path: string,
    tokens: string,
    options: SignDeliveryUrlOptions = {},
  ): Promise<string> {
    return this.signUrl(this.deliveryUrl(workspaceId, path, tokens), options);
  }

  /** A delivery URL for a file path, optionally with transformation tokens. */
  deliveryUrl(workspaceId: string, path: string, tokens?: string): string {
    const segments = path.replace(/^\/+/, '').split('/').map(encodeURIComponent);
    // A first folder shaped like transformation tokens ("w_100") would be read as tokens:
    // escaping its first "_" keeps it a folder (the service decodes each segment once).
    if (!tokens && segments.length > 1 && /^[a-z]{1,6}_[^,]*(,[a-z]{1,6}_[^,]*)*$/.test(segments[0]))
      segments[0] = segments[0].replace('_', '%5F');
    return `${this.base}/${workspaceId}/${tokens ? `${tokens}/` : ''}${segments.join('/')}`;
  }
}

interface RetryPolicy {
  retries: number;
  retryDelayMs: number;
  maxRetryDelayMs: number;
  /** Which answers are worth another try (network errors come as `undefined`); default the passing ones. */
  retryable?: (res: Response | undefined) => boolean;
}

const passing = (res: Response | undefined) => res === undefined || RETRYABLE.has(res.status);

async function withRetries(
  url: string | URL,
  send: () => Promise<Response>,
  policy: RetryPolicy,
  signal?: AbortSignal,
): Promise<Response> {
  const retryable = policy.retryable ?? passing;
  for (let attempt = 0; ; attempt++) {
    if (signal?.aborted) throw new StowageAbortError();
    let res: Response | undefined;
    let failure: unknown;
    try {
      res = await send();
    } catch (err) {
      if (signal?.aborted || (err as Error).name === 'AbortError') throw new StowageAbortError();
      failure = err;
    }
    if (!retryable(res) || attempt >= policy.retries) {
      if (res) return res;
      // fetch rejects with a bare "fetch failed"; say what could not be reached, and why.
      throw failure instanceof TypeError ? new StowageNetworkError(url, failure) : failure;
    }
    const asked = res ? retryAfterMs(res) : undefined;
    const backoff = policy.retryDelayMs * 2 ** attempt * (0.75 + Math.random() * 0.5);
    await res?.arrayBuffer().catch(() => {});
    await sleep(Math.min(policy.maxRetryDelayMs, Math.max(asked ?? 0, backoff)), signal);
  }
}

/**
 * Upload tokens are single use, so a token upload is sent again only after 429 or 503 with
 * Retry-After: nothing was stored (a proxy's rate limit, or a backing service not answering),
 * and the service gives the token back after a failed upload. A network error may have cut
 * the answer to an upload that was stored, and a second try would then only get 401
 * TOKEN_USED, so it is thrown as it is, like every other answer.
 */
const tokenRetryable = (res: Response | undefined) =>
  res !== undefined && (res.status === 429 || res.status === 503) && res.headers.has('retry-after');

/**
 * Uploads `file` with an upload token from `generateToken`: no API key, so it is the entry
 * point for browser code. `tokenOrUploadUrl` is the token's `upload_url`, or the bare token
 * with `opts.baseUrl`. Returns the stored file record; refusals throw `StowageError`
 * (401 `TOKEN_INVALID`/`TOKEN_EXPIRED`/`TOKEN_USED`, 403 `OVERRIDE_NOT_ALLOWED` or
 * `ORIGIN_NOT_ALLOWED`, 413 `FILE_TOO_LARGE`, …). Never retried except after 429/503 with
 * Retry-After (see `tokenRetryable`).
 */
export function uploadWithToken(
  tokenOrUploadUrl: string,
  file: Blob,
  opts: TokenUploadOptions = {},
): Promise<FileRecord> {
  return sendWithToken(tokenOrUploadUrl, file, opts, opts.fetch ?? globalThis.fetch.bind(globalThis), {
    retries: 4,
    retryDelayMs: 300,
    maxRetryDelayMs: 30_000,
  });
}

async function sendWithToken(
  tokenOrUploadUrl: string,
  file: Blob,
  opts: TokenUploadOptions,
  fetchImpl: typeof fetch,
  policy: RetryPolicy,
): Promise<FileRecord> {
  let url: string;
  if (/^https?:\/\//i.test(tokenOrUploadUrl)) url = tokenOrUploadUrl;
  else if (opts.baseUrl)
    url = `${opts.baseUrl.replace(/\/+$/, '')}/api/v1/uploads/${encodeURIComponent(tokenOrUploadUrl)}`;
  else throw new TypeError("uploadWithToken: pass the token's upload_url, or the token with opts.baseUrl");
  const headers: Record<string, string> = {
    'content-type': opts.contentType || file.type || 'application/octet-stream',
  };
  // Header values are bytes: names, folders and tags go percent-encoded UTF-8 so that any
  // Unicode text survives (the service decodes each of these headers once).
  if (opts.fileName !== undefined) headers['x-file-name'] = encodeURIComponent(opts.fileName);
  if (opts.folder !== undefined) headers['x-folder'] = encodeURIComponent(opts.folder);
  if (opts.tags !== undefined) headers['x-tags'] = encodeURIComponent(opts.tags.join(','));
  if (opts.transform !== undefined) headers['x-transform'] = encodeURIComponent(opts.transform);
  const total = file.size;
  // fetch cannot report upload progress: only the start and the end are known.
  opts.onProgress?.({ loaded: 0, total });
  const res = await withRetries(
    url,
    () => fetchImpl(url, { method: 'POST', headers, body: file, signal: opts.signal }),
    { ...policy, retryable: tokenRetryable },
    opts.signal,
  );
  const text = await res.text();
  const parsed = text ? safeJson(text) : undefined;
  if (!res.ok) throw toError(res, parsed);
  opts.onProgress?.({ loaded: total, total });
  return unwrap(parsed) as FileRecord;
}

function partLength(s: MultipartSession, size: number, n: number): number {
  return Math.min(s.part_size, size - (n - 1) * s.part_size);
}

/** `{success:true, data}` → data; anything else as it is. */
function unwrap(body: unknown): unknown {
  if (body && typeof body === 'object' && (body as Json).success === true && 'data' in (body as Json))
    return (body as Json).data;
  return body;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return { error: text.slice(0, 200) };
  }
}

function toError(res: Response, body: unknown, context?: string): StowageError {
  const b = (body ?? {}) as Json;
  const error = typeof b.error === 'string' ? b.error : res.statusText || `HTTP ${res.status}`;
  const message = typeof b.message === 'string' ? b.message : error;
  const retry = typeof b.retryAfterSeconds === 'number' ? b.retryAfterSeconds : undefined;
  return new StowageError(
    res.status,
    error,
    typeof b.errorCode === 'string' ? b.errorCode : undefined,
    context ? `${context}: ${message}` : message,
    retry,
  );
}

function retryAfterMs(res: Response): number | undefined {
  const h = res.headers.get('retry-after');
  if (!h) return undefined;
  if (/^\d+(\.\d+)?$/.test(h)) return Number(h) * 1000;
  const at = Date.parse(h);
  return Number.isFinite(at) ? Math.max(0, at - Date.now()) : undefined;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new StowageAbortError());
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(new StowageAbortError());
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * The full answer to GET /api/v1/files from the one asked with aliases=none: the names the
 * hosted SDKs read, made from `files` and `meta` as the server makes them. A server that sent
 * them (one older than aliases=none) is taken as it is.
 */
function withPageAliases(page: Pick<FilePage, 'files' | 'meta'> & Partial<FilePage>): FilePage {
  if (page.items !== undefined && page.data !== undefined) return page as FilePage;
  const { files, meta } = page;
  return {
    files,
    items: files,
    data: files,
    meta,
    next_cursor: meta.nextCursor,
    page: meta.page,
    current_page: meta.page,
    limit: meta.limit,
    total_count: meta.total,
    total_results: meta.total,
    total_pages: Math.ceil(meta.total / meta.limit),
    is_page_next: meta.hasNext,
    has_next: meta.hasNext,
    has_next_page: meta.hasNext,
  };
}
