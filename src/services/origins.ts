// Web origins a workspace trusts: the pages that may use its public key and upload tokens
// (`allowed_origins`), and the hosts public-key uploads may send webhooks to
// (`webhook_origins`). A pattern is an origin (`https://shop.example.com`,
// `http://localhost:5173`) or an origin whose host starts with one wildcard label
// (`https://*.example.com`: any subdomain, at any depth, but not example.com itself).
//
// An Origin check stops other websites from embedding a copied public key; it cannot stop a
// client that is not a browser, which sends whatever Origin it likes (or none).
import { errors } from '../errors.ts';

const MAX_PATTERNS = 100;

/** `scheme://host[:port]` as browsers send it: lower case, default port dropped. */
function canonicalOrigin(raw: string): string | null {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return null;
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return null;
  return u.origin === 'null' ? null : u.origin;
}

/** One pattern, checked and written the one way it is compared; throws 400 otherwise. */
export function parseOriginPattern(raw: unknown, field: string): string {
  if (typeof raw !== 'string') throw errors.validation(`${field} must be a list of origins (strings)`);
  const text = raw.trim();
  const bad = () =>
    errors.validation(
      `${field}: "${text.slice(0, 100)}" is not an origin like https://app.example.com or https://*.example.com`,
    );
  const m = /^(https?):\/\/(\*\.)?([^/?#*]+)\/?$/i.exec(text);
  if (!m || text.length > 255 || /[@\s\\]/.test(m[3])) throw bad();
  const [, scheme, wildcard, hostPort] = m;
  // Parsed with a concrete label in place of the wildcard, so the host is checked like any other.
  const origin = canonicalOrigin(`${scheme}://${wildcard ? 'x.' : ''}${hostPort}`);
  if (!origin) throw bad();
  const host = new URL(origin).host;
  if (!wildcard) return origin;
  // A wildcard must stand on a registrable name, not on a bare top-level label.
  const parent = host.slice(2);
  if (!parent.includes('.') && !parent.startsWith('localhost')) throw bad();
  return `${scheme.toLowerCase()}://*.${parent}`;
}

/** A list of patterns (or null / [] for none), each checked; duplicates dropped. */
export function parseOriginList(raw: unknown, field: string): string[] {
  if (raw === null || raw === undefined) return [];
  if (!Array.isArray(raw)) throw errors.validation(`${field} must be an array of origins`);
  if (raw.length > MAX_PATTERNS) throw errors.validation(`${field} may list at most ${MAX_PATTERNS} origins`);
  return [...new Set(raw.map((p) => parseOriginPattern(p, field)))];
}

/** Whether `origin` (an Origin header or a URL) matches one of the patterns. */
export function originAllowed(patterns: readonly string[], origin: string): boolean {
  const canonical = canonicalOrigin(origin);
  if (!canonical) return false;
  const { protocol, host } = new URL(canonical);
  for (const p of patterns) {
    if (p === canonical) return true;
    const star = p.indexOf('://*.');
    if (star < 0) continue;
    const suffix = p.slice(star + 4); // ".example.com[:port]"
    if (p.slice(0, star + 1) === protocol && host.endsWith(suffix) && host.length > suffix.length) return true;
  }
  return false;
}

/** Stored form: JSON text, or null when the list is empty. */
export const storeOrigins = (list: string[]): string | null => (list.length ? JSON.stringify(list) : null);
export const loadOrigins = (text: string | null): string[] => (text ? (JSON.parse(text) as string[]) : []);
