// Signed transformations (docs/api/delivery.md#signed-transformations): a delivery URL with
// tokens carries `tsig` (and optionally `texp`), an HMAC-SHA256 under the workspace's delivery
// key. The customer's own backend makes them without asking the service, as with imgproxy's
// signed paths. The names differ from the private-file `expires`/`signature` so that both can
// sit on one URL and neither is mistaken for the other. sdk/src/sign.ts is the same algorithm
// on Web Crypto; test/signed-transformations.test.ts checks that the two agree.
import { createHmac, timingSafeEqual } from 'node:crypto';

export const SIGNATURE_PARAM = 'tsig';
export const EXPIRES_PARAM = 'texp';

const SIGNATURE_SHAPE = /^[A-Za-z0-9_-]{43}$/;
const EXPIRES_SHAPE = /^\d{1,12}$/;

/** The query's `name=value` pairs other than tsig and texp, in the order sent. */
function otherPairs(query: string | undefined): string[] {
  if (!query) return [];
  return query.split('&').filter((pair) => {
    const name = pair.slice(0, pair.includes('=') ? pair.indexOf('=') : undefined);
    return pair !== '' && name !== SIGNATURE_PARAM && name !== EXPIRES_PARAM;
  });
}

/**
 * What is signed: the path exactly as sent (percent-escapes as they are, workspace and tokens
 * included); for a source's path (`/{workspace_id}-{source}/…`) also the query, which reaches
 * the origin and so decides what is rendered; then the expiry, when there is one. A query on a
 * workspace's own files changes nothing served, so it is left out there: a CDN may add one.
 */
export function signedText(pathname: string, query: string | undefined, expires: string | undefined): string {
  const first = pathname.split('/').find((s) => s !== '') ?? '';
  const rest = first.includes('-') ? otherPairs(query).join('&') : '';
  return `${pathname}${rest ? `?${rest}` : ''}${expires === undefined ? '' : `\n${expires}`}`;
}

export function transformMac(key: string, text: string): string {
  return createHmac('sha256', key).update(text).digest('base64url');
}

/** `url` (absolute) with tsig (and texp when `expires`, Unix seconds, is given) appended. */
export function signTransformUrl(key: string, url: string, expires?: number): string {
  const u = new URL(url);
  const query = u.search.slice(1);
  const kept = otherPairs(query);
  const exp = expires === undefined ? undefined : String(Math.floor(expires));
  const mac = transformMac(key, signedText(u.pathname, query, exp));
  const added = [...(exp === undefined ? [] : [`${EXPIRES_PARAM}=${exp}`]), `${SIGNATURE_PARAM}=${mac}`];
  u.search = `?${[...kept, ...added].join('&')}`;
  return u.toString();
}

export type Verdict = 'ok' | 'missing' | 'bad' | 'expired';

/** Checks tsig/texp of a request (its raw path and raw query) against the workspace's key. */
export function verifyTransformSignature(
  key: string | null,
  pathname: string,
  query: string | undefined,
  nowSeconds: number,
): Verdict {
  const sigs: string[] = [];
  const exps: string[] = [];
  for (const pair of query ? query.split('&') : []) {
    const eq = pair.indexOf('=');
    const name = eq === -1 ? pair : pair.slice(0, eq);
    const value = eq === -1 ? '' : pair.slice(eq + 1);
    if (name === SIGNATURE_PARAM) sigs.push(value);
    else if (name === EXPIRES_PARAM) exps.push(value);
  }
  if (sigs.length === 0 && exps.length === 0) return 'missing';
  // One of each at most: a repeated parameter is read differently by different parsers.
  if (sigs.length !== 1 || exps.length > 1 || !key) return 'bad';
  const [sig] = sigs;
  const exp = exps[0];
  if (!SIGNATURE_SHAPE.test(sig) || (exp !== undefined && !EXPIRES_SHAPE.test(exp))) return 'bad';
  const expected = Buffer.from(transformMac(key, signedText(pathname, query, exp)));
  if (!timingSafeEqual(Buffer.from(sig), expected)) return 'bad';
  return exp !== undefined && Number(exp) < nowSeconds ? 'expired' : 'ok';
}

/** The query without tsig/texp (undefined when nothing else is left): what an origin is sent. */
export function withoutTransformSignature(query: string | undefined): string | undefined {
  if (query === undefined) return undefined;
  const kept = otherPairs(query);
  // Untouched unless a signature was there: the origin sees the query as sent.
  if (kept.length === query.split('&').filter((p) => p !== '').length) return query;
  return kept.length > 0 ? kept.join('&') : undefined;
}
