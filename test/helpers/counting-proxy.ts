// A proxy in front of Stowage that counts what a page sends: every request with the bytes of its
// body as they pass, and the answer's status. Tests hold requests (a part that must not arrive
// before a reload) or cap their bodies (an upload that stalls half way) through it. Used by the
// Uppy and dashboard upload tests; name it in STOWAGE_PUBLIC_URL so part URLs lead through it.
import http from 'node:http';
import { localServer } from './servers.ts';

export interface Seen {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  /** Body bytes passed on to Stowage. */
  bytes: number;
  status?: number;
  responseHeaders?: http.IncomingHttpHeaders;
  held?: boolean;
}

export interface CountingProxy {
  url: string;
  seen: Seen[];
  /** Requests for which this says true are held: read from nobody, answered never. */
  hold: (req: http.IncomingMessage) => boolean;
  /** At most this many body bytes of a request go on to Stowage; then the page's upload stalls. */
  cap: (req: http.IncomingMessage) => number;
  close(): Promise<void>;
}

export async function countingProxy(upstream: string): Promise<CountingProxy> {
  // One object: the tests change hold and cap on it while the server reads them.
  const proxy: CountingProxy = { url: '', seen: [], hold: () => false, cap: () => Infinity, close: async () => {} };
  const server = await localServer((req, res) => {
    const entry: Seen = { method: req.method!, path: req.url!, headers: req.headers, bytes: 0 };
    proxy.seen.push(entry);
    if (req.method !== 'OPTIONS' && proxy.hold(req)) {
      entry.held = true;
      return;
    }
    const cap = proxy.cap(req);
    const up = http.request(`${upstream}${req.url}`, { method: req.method, headers: req.headers }, (answer) => {
      entry.status = answer.statusCode;
      entry.responseHeaders = answer.headers;
      res.writeHead(answer.statusCode!, answer.headers);
      answer.pipe(res);
    });
    up.on('error', () => res.destroy());
    // The page went away (a reload): Stowage sees its request cut, as it would from the page.
    res.on('close', () => {
      if (!res.writableFinished) up.destroy();
    });
    let capped = false;
    req.on('data', (chunk: Buffer) => {
      if (capped) return;
      const part = chunk.length > cap - entry.bytes ? chunk.subarray(0, cap - entry.bytes) : chunk;
      entry.bytes += part.length;
      const flowing = up.write(part);
      if (entry.bytes >= cap) {
        capped = true;
        req.pause();
      } else if (!flowing) {
        req.pause();
        up.once('drain', () => req.resume());
      }
    });
    req.on('end', () => {
      if (!capped) up.end();
    });
  });
  proxy.url = server.url;
  proxy.close = server.close;
  return proxy;
}
