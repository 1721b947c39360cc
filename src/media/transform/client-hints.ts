// Defaults a delivery request's headers decide (docs/transformations.md#defaults): the width of a
// rendition whose tokens give no w_, h_ or ar_ (from Sec-CH-Width/Width, Save-Data, else the
// User-Agent's kind of device, as the hosted docs list them), rounded up to a width bucket, and
// dpr_auto (Sec-CH-DPR/DPR). The answer then varies on those headers, and the cache key holds the
// width and ratio chosen, never the headers themselves.
import type { TransformSpec } from './spec.ts';

type Headers = Record<string, string | string[] | undefined>;

/** The widths a default width is rounded up to. */
export const WIDTH_BUCKETS = [320, 480, 720, 1080, 1440, 1920] as const;
const WIDTH_HEADERS = ['Sec-CH-Width', 'Width', 'Save-Data', 'User-Agent'];
const DPR_HEADERS = ['Sec-CH-DPR', 'DPR'];

export interface ClientHints {
  /** The width a rendition without w_/h_/ar_ gets; none for a client that is no known browser. */
  width?: number;
  /** What dpr_auto becomes (1 to 4). */
  dpr: number;
  /** A short text for lookup caches keyed by request: equal hints, equal text. */
  key: string;
}

const one = (h: Headers, name: string) => {
  const v = h[name.toLowerCase()];
  return (Array.isArray(v) ? v[0] : v)?.trim();
};

/** The smallest bucket at least `width` wide (the largest bucket beyond it). */
export function bucket(width: number): number {
  return WIDTH_BUCKETS.find((b) => b >= width) ?? WIDTH_BUCKETS[WIDTH_BUCKETS.length - 1];
}

/**
 * The hosted docs' default width per kind of device. A client that names no known device (a
 * script, a server, a crawler) gets the image at its own size, where the hosted service guesses 720.
 */
function deviceWidth(ua: string): number | undefined {
  if (/Opera Mini|UCBrowser|UCWEB|KaiOS/i.test(ua)) return 480;
  if (/iPhone|iPad/.test(ua)) return 1080;
  if (/Android/.test(ua)) {
    if (!/Mobile/.test(ua) || /SM-|Pixel|OnePlus/.test(ua)) return 1080;
    return 720;
  }
  if (/Macintosh|Windows NT|CrOS/.test(ua)) return 1080;
  if (/Mobile|Opera|Firefox/.test(ua)) return 720;
  return undefined;
}

export function clientHints(headers: Headers): ClientHints {
  const hinted = Number(one(headers, 'Sec-CH-Width') ?? one(headers, 'Width'));
  const width =
    Number.isInteger(hinted) && hinted > 0
      ? bucket(hinted)
      : one(headers, 'Save-Data')?.toLowerCase() === 'on'
        ? 480
        : deviceWidth(one(headers, 'User-Agent') ?? '');
  const ratio = Number(one(headers, 'Sec-CH-DPR') ?? one(headers, 'DPR'));
  const dpr = Number.isFinite(ratio) && ratio > 0 ? Math.min(4, Math.max(1, Math.round(ratio * 100) / 100)) : 1;
  return { width, dpr, key: `${width ?? 'own'}x${dpr}` };
}

/**
 * `spec` with what the hints decide filled in, and the request headers the answer then depends
 * on (for Vary). Without hints (an upload, a caller that has none): dpr_auto is 1, and no default width.
 */
export function withHints(spec: TransformSpec, hints?: ClientHints): { spec: TransformSpec; vary: string[] } {
  const out = { ...spec };
  const vary: string[] = [];
  if (out.dpr === 'auto') {
    if (hints && hints.dpr !== 1) out.dpr = hints.dpr;
    else delete out.dpr;
    if (hints) vary.push(...DPR_HEADERS);
  }
  if (hints && out.width === undefined && out.height === undefined && !out.aspectRatio) {
    if (hints.width !== undefined) out.width = hints.width;
    vary.push(...WIDTH_HEADERS);
  }
  return { spec: out, vary };
}
