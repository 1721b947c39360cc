// Sending a body while counting its bytes as they go out, for progress that moves inside a part
// rather than when a whole part (8 MiB or more) is done. fetch reports nothing of an upload, so:
// in browsers XMLHttpRequest's upload events; elsewhere (Node) a counted stream as the body, read
// by fetch only as fast as the socket takes it, so the count runs at most a socket buffer ahead.

export type SendBody = (
  url: string,
  init: { method: string; body: Blob; headers: Record<string, string>; signal?: AbortSignal },
  /** The bytes of this attempt that have gone out so far (it starts again at 0 on a retry). */
  onBytes: (sent: number) => void,
) => Promise<Response>;

/** The way to send bodies here: XHR in a browser, a counted stream through `fetchImpl` otherwise. */
export function bodySender(fetchImpl: typeof fetch, custom: boolean): SendBody {
  // A fetch the caller gave (a test double, a proxy agent) is honoured as it is: only its own
  // start and end are known then.
  if (custom)
    return async (url, init, onBytes) => {
      onBytes(0);
      const res = await fetchImpl(url, init);
      onBytes(init.body.size);
      return res;
    };
  if (typeof XMLHttpRequest !== 'undefined') return sendWithXhr;
  return (url, init, onBytes) => sendCounted(fetchImpl, url, init, onBytes);
}

/** Bytes handed to fetch per pull of a counted body. */
const SLICE = 64 * 1024;

function sendCounted(
  fetchImpl: typeof fetch,
  url: string,
  init: Parameters<SendBody>[1],
  onBytes: (sent: number) => void,
): Promise<Response> {
  let sent = 0;
  onBytes(0);
  const source = init.body.stream().getReader();
  // A Blob in memory may come out as one chunk of the whole part: it is handed on in slices,
  // one per pull, so the count follows what the socket has taken.
  let pending: Uint8Array | undefined;
  const counted = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (!pending?.byteLength) {
        const { done, value } = await source.read();
        if (done) {
          controller.close();
          return;
        }
        pending = value;
      }
      const slice = pending.subarray(0, SLICE);
      pending = pending.subarray(slice.byteLength);
      sent += slice.byteLength;
      onBytes(sent);
      controller.enqueue(slice);
    },
    cancel(reason) {
      return source.cancel(reason);
    },
  });
  return fetchImpl(url, {
    method: init.method,
    headers: { ...init.headers, 'content-length': String(init.body.size) },
    body: counted,
    signal: init.signal,
    // Node's fetch needs it for a stream body (the request is sent before the answer is read).
    duplex: 'half',
  } as RequestInit);
}

function sendWithXhr(url: string, init: Parameters<SendBody>[1], onBytes: (sent: number) => void): Promise<Response> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open(init.method, url);
    for (const [k, v] of Object.entries(init.headers)) xhr.setRequestHeader(k, v);
    xhr.responseType = 'arraybuffer';
    onBytes(0);
    xhr.upload.onprogress = (e) => onBytes(e.loaded);
    xhr.onload = () => {
      onBytes(init.body.size);
      const headers = new Headers();
      for (const line of xhr
        .getAllResponseHeaders()
        .trim()
        .split(/[\r\n]+/)) {
        const at = line.indexOf(':');
        if (at > 0) headers.append(line.slice(0, at).trim(), line.slice(at + 1).trim());
      }
      const empty = xhr.status === 204 || xhr.status === 205 || xhr.status === 304;
      resolve(new Response(empty ? null : xhr.response, { status: xhr.status, headers }));
    };
    // As fetch does: a network failure is a TypeError, a cancel an AbortError.
    xhr.onerror = () => reject(new TypeError('Failed to fetch'));
    xhr.ontimeout = () => reject(new TypeError('Failed to fetch'));
    xhr.onabort = () => reject(new DOMException('The operation was aborted.', 'AbortError'));
    if (init.signal) {
      if (init.signal.aborted) {
        reject(new DOMException('The operation was aborted.', 'AbortError'));
        return;
      }
      init.signal.addEventListener('abort', () => xhr.abort(), { once: true });
    }
    xhr.send(init.body);
  });
}
