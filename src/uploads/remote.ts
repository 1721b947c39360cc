// Remote URL upload: the service fetches the file itself, through the guarded outbound
// client (public addresses only, checked on every redirect hop), streaming it into the same
// upload pipeline as a direct upload.
import type { RemoteUploadBody } from '../contract/uploads.ts';
import { OutboundBlockedError, type OutboundGuard } from '../outbound/guard.ts';
import { outboundRequest, OutboundTimeoutError } from '../outbound/http-client.ts';
import { AppError, errors } from '../errors.ts';
import type { FileRecord } from '../services/files.ts';
import { checkName } from './names.ts';
import { applyGrant } from './grants.ts';
import { parseUploadFields } from './options.ts';
import type { Staged } from './staging.ts';
import type { UploadService } from './upload-service.ts';
import type { Principal } from '../services/workspaces.ts';

export interface RemoteTimeouts {
  /** Until the response headers arrive (all redirect hops together). */
  timeoutMs: number;
  /** For reading the whole body once the headers are in. */
  bodyTimeoutMs: number;
}

export interface RemoteDeps {
  uploads: UploadService;
  guard: OutboundGuard;
  timeouts: RemoteTimeouts;
}

/** The last path segment of a URL, if it makes a valid file name. */
export function nameFromUrl(url: string): string | undefined {
  try {
    const last = new URL(url).pathname.split('/').filter(Boolean).pop();
    return last ? checkName(decodeURIComponent(last), 'file_name') : undefined;
  } catch {
    return undefined;
  }
}

export class RemoteUploadService {
  constructor(private readonly deps: RemoteDeps) {}

  async upload(principal: Principal, input: RemoteUploadBody): Promise<FileRecord> {
    const { workspaceId } = principal;
    const url = typeof input.remote_url === 'string' ? input.remote_url : undefined;
    let parsed: URL | undefined;
    try {
      parsed = url ? new URL(url) : undefined;
    } catch {
      parsed = undefined;
    }
    if (!url || !parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') || url.length > 4096) {
      throw errors.validation('remote_url must be an http(s) URL');
    }
    if (parsed.username || parsed.password) throw errors.validation('remote_url must not carry credentials');
    const options = applyGrant(parseUploadFields(input, nameFromUrl(url) ?? 'download'), principal);
    const limits = await this.deps.uploads.limits(workspaceId);

    let res: Awaited<ReturnType<typeof outboundRequest>>;
    try {
      res = await outboundRequest(this.deps.guard, url, {
        timeoutMs: this.deps.timeouts.timeoutMs,
        bodyTimeoutMs: this.deps.timeouts.bodyTimeoutMs,
        maxRedirects: 5,
      });
    } catch (err) {
      throw this.describe(err);
    }
    if (res.status < 200 || res.status > 299) {
      res.body.resume();
      throw errors.remoteFailed(`the remote server answered HTTP ${res.status}`);
    }
    const declared = Number(res.headers['content-length']);
    if (Number.isFinite(declared) && declared > limits.maxFileSize) {
      res.body.destroy();
      throw errors.fileTooLarge(limits.maxFileSize);
    }
    let staged: Staged;
    try {
      staged = await this.deps.uploads.stage(workspaceId, res.body, {
        expectedBytes: Number.isFinite(declared) ? declared : undefined,
      });
    } catch (err) {
      res.body.destroy();
      throw err instanceof AppError ? err : this.describe(err);
    }
    return this.deps.uploads.finish(staged, options, 'remote');
  }

  private describe(err: unknown): AppError {
    if (err instanceof AppError) return err;
    if (err instanceof OutboundBlockedError) return errors.urlRefused(err.message);
    if (err instanceof OutboundTimeoutError) return errors.remoteFailed('the remote server did not answer in time');
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOTFOUND' || code === 'EAI_AGAIN')
      return errors.remoteFailed('the remote host name could not be resolved');
    if (code === 'ECONNREFUSED') return errors.remoteFailed('the remote server refused the connection');
    if (/too many redirects/.test(String((err as Error).message)))
      return errors.remoteFailed('the remote server redirected too many times');
    return errors.remoteFailed('the remote server could not be reached');
  }
}
