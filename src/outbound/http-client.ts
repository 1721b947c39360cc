// The one outbound HTTP client: guarded addresses on every hop, bounded time and redirects.
import http from 'node:http';
import https from 'node:https';
import type { Readable } from 'node:stream';
import type { OutboundGuard } from './guard.ts';

export interface OutboundRequest {
  method?: 'GET' | 'HEAD' | 'POST';
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** Until the response headers arrive (each hop). */
  timeoutMs: number;
  /** For reading the whole body once headers are in; default timeoutMs. */
  bodyTimeoutMs?: number;
  maxRedirects?: number;
  signal?: AbortSignal;
}

export interface OutboundResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  url: string;
  body: Readable;
}

export class OutboundTimeoutError extends Error {
  readonly code = 'ETIMEDOUT';
  constructor(url: string) {
    super(`${new URL(url).host}: no answer in time`);
    this.name = 'OutboundTimeoutError';
  }
}

export async function outboundRequest(
  guard: OutboundGuard,
  url: string,
  opts: OutboundRequest,
): Promise<OutboundResponse> {
  let current = url;
  let method = opts.method ?? 'GET';
  let body = opts.body;
  const maxRedirects = opts.maxRedirects ?? 5;
  const deadline = Date.now() + opts.timeoutMs;
  for (let hop = 0; ; hop++) {
    const target = await guard.checkUrl(current);
    const res = await once(
      guard,
      target,
      method,
      opts.headers ?? {},
      body,
      Math.max(1, deadline - Date.now()),
      opts.bodyTimeoutMs ?? opts.timeoutMs,
      opts.signal,
    );
    const location = res.headers.location;
    if ([301, 302, 303, 307, 308].includes(res.status) && location) {
      res.body.resume();
      if (hop >= maxRedirects) throw new Error(`too many redirects (more than ${maxRedirects})`);
      current = new URL(location, target).toString();
      if (res.status === 303 || ((res.status === 301 || res.status === 302) && method === 'POST')) {
        method = 'GET';
        body = undefined;
      }
      continue;
    }
    return res;
  }
}

function once(
  guard: OutboundGuard,
  url: URL,
  method: string,
  headers: Record<string, string>,
  body: string | Buffer | undefined,
  timeoutMs: number,
  bodyTimeoutMs: number,
  signal?: AbortSignal,
): Promise<OutboundResponse> {
  return new Promise((resolve, reject) => {
    const mod = url.protocol === 'https:' ? https : http;
    const req = mod.request(url, {
      method,
      headers: { 'user-agent': 'Stowage/1', ...headers },
      agent: url.protocol === 'https:' ? guard.httpsAgent : guard.httpAgent,
      signal,
    });
    const timer = setTimeout(() => req.destroy(new OutboundTimeoutError(url.toString())), timeoutMs);
    req.on('response', (res) => {
      clearTimeout(timer);
      // The caller reads the body; a stalled body is bounded by the same deadline.
      const bodyTimer = setTimeout(() => res.destroy(new OutboundTimeoutError(url.toString())), bodyTimeoutMs);
      res.on('close', () => clearTimeout(bodyTimer));
      resolve({ status: res.statusCode ?? 0, headers: res.headers, url: url.toString(), body: res });
    });
    req.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    req.end(body);
  });
}
