// Signed transformations, offline: the workspace's delivery key (GET /api/v1/workspace/delivery-key)
// signs a delivery URL in your own backend, with no request to Stowage per URL. The algorithm is
// the server's (src/crypto/transform-url.ts), on Web Crypto so it also runs in Deno, Bun and
// workers. Keep the key on servers: whoever holds it can make renditions.

export interface SignDeliveryUrlOptions {
  /** The URL stops working this many seconds from now. Default: never (a stable, cacheable URL). */
  expiresIn?: number;
  /** Or: the Unix time (seconds) it stops working. */
  expiresAt?: number;
}

const SIGNATURE_PARAM = 'tsig';
const EXPIRES_PARAM = 'texp';

function otherPairs(query: string): string[] {
  return query.split('&').filter((pair) => {
    const name = pair.includes('=') ? pair.slice(0, pair.indexOf('=')) : pair;
    return pair !== '' && name !== SIGNATURE_PARAM && name !== EXPIRES_PARAM;
  });
}

function base64url(bytes: ArrayBuffer): string {
  let binary = '';
  for (const b of new Uint8Array(bytes)) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/**
 * `url` with `tsig` (and `texp` when an expiry is asked for) added. What is signed: the URL's
 * path as it will be sent; for a source's path (`/{workspace_id}-{source}/…`) its query too;
 * then a newline and the expiry, when there is one. Any earlier tsig/texp is replaced.
 */
export async function signDeliveryUrl(
  url: string,
  deliveryKey: string,
  options: SignDeliveryUrlOptions = {},
): Promise<string> {
  if (!deliveryKey.startsWith('stw_dk_')) throw new TypeError('deliveryKey must be a delivery key (stw_dk_…)');
  const u = new URL(url);
  const kept = otherPairs(u.search.slice(1));
  const expires =
    options.expiresAt !== undefined
      ? Math.floor(options.expiresAt)
      : options.expiresIn !== undefined
        ? Math.floor(Date.now() / 1000) + Math.floor(options.expiresIn)
        : undefined;
  const first = u.pathname.split('/').find((s) => s !== '') ?? '';
  const signedQuery = first.includes('-') ? kept.join('&') : '';
  const text = `${u.pathname}${signedQuery ? `?${signedQuery}` : ''}${expires === undefined ? '' : `\n${expires}`}`;
  const enc = new TextEncoder();
  const key = await crypto.subtle.importKey('raw', enc.encode(deliveryKey), { name: 'HMAC', hash: 'SHA-256' }, false, [
    'sign',
  ]);
  const mac = base64url(await crypto.subtle.sign('HMAC', key, enc.encode(text)));
  const added = [...(expires === undefined ? [] : [`${EXPIRES_PARAM}=${expires}`]), `${SIGNATURE_PARAM}=${mac}`];
  u.search = `?${[...kept, ...added].join('&')}`;
  return u.toString();
}
