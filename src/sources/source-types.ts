// The four source types: which configuration fields each takes, which are secret, and how each
// is checked. Every configuration problem answers with the one documented message; which field
// was wrong is logged at debug level only (values are never logged).
import { createPrivateKey } from 'node:crypto';
import { errors } from '../errors.ts';
import { CONTROL, isWellFormed } from '../text.ts';

export const SOURCE_TYPES = ['s3', 'azure', 'google_cloud', 'image_source'] as const;
export type SourceType = (typeof SOURCE_TYPES)[number];
export const isSourceType = (t: unknown): t is SourceType =>
  typeof t === 'string' && (SOURCE_TYPES as readonly string[]).includes(t);

/** What every response shows in place of a stored secret. */
export const MASK = '********';

export type ConfigValue = string | boolean | string[];
export type Configuration = Record<string, ConfigValue>;

type Kind = 'string' | 'boolean' | 'array';
const kindOf = (value: unknown): string => (Array.isArray(value) ? 'array' : typeof value);

interface FieldSpec {
  /** The JSON type(s) the field takes. */
  kind: Kind | Kind[];
  required?: boolean;
  secret?: boolean;
  /** Returns the normalised value, or undefined when the value is not acceptable. */
  /** A method, so a check written for its kind's type (string, number, ...) fits. */
  check?(value: unknown): ConfigValue | undefined;
}

const MAX_STRING = 64 * 1024;

/**
 * What no configuration text may hold, whatever it becomes (a request URL, a Link header, an
 * Authorization header, a JWT claim): C0 controls (CR and LF would split a header), DEL, C1
 * controls, the line and paragraph separators, and the bidi embeddings, overrides and isolates.
 */
/** Well-formed Unicode (no lone surrogate) without any CONTROL character. */
const isCleanText = (s: string): boolean => isWellFormed(s) && !CONTROL.test(s);

/**
 * Characters a URL is never written with here: every control and every kind of white space (the
 * URL parser silently drops tabs and newlines, so "https://a.example.com\r\nX-Evil:1" would parse
 * as another host while the text kept its CR LF), zero-width and other invisible format
 * characters, and what RFC 3986 leaves out of URLs (<, >, ", `, {, }, |, \\, ^), which would also
 * break out of the `<…>` of a Link header.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is this pattern's job
const NOT_IN_URL = /[\s\u0000-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff<>"`{}|\\^]/;

const httpUrl = (allowPath: boolean) => (value: string) => {
  if (!isWellFormed(value) || NOT_IN_URL.test(value)) return undefined;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
  // Credentials in a URL would be shown unmasked; query and fragment have no meaning here.
  if (url.username || url.password || url.search || url.hash || value.includes('?') || value.includes('#'))
    return undefined;
  if (!allowPath && url.pathname !== '/') return undefined;
  if (value.endsWith('/')) return undefined;
  return value;
};

const pattern = (re: RegExp) => (value: string) => (re.test(value) ? value : undefined);

/** key=value;key=value as Azure writes it (a value may itself contain '='). */
export function parseConnectionString(value: string): Record<string, string> | undefined {
  const out: Record<string, string> = {};
  for (const part of value.split(';')) {
    if (!part.trim()) continue;
    const eq = part.indexOf('=');
    if (eq <= 0) return undefined;
    out[part.slice(0, eq).trim()] = part.slice(eq + 1).trim();
  }
  return out;
}

const azureConnectionString = (value: string) => {
  // The SDK reads the string itself: no part of it may carry a control character.
  if (!isCleanText(value)) return undefined;
  const cs = parseConnectionString(value);
  if (!cs) return undefined;
  if (cs.UseDevelopmentStorage === 'true') return value;
  const hasKey = Boolean(cs.AccountName && cs.AccountKey);
  const hasSas = Boolean(cs.SharedAccessSignature && cs.BlobEndpoint);
  if (!hasKey && !hasSas) return undefined;
  if (cs.AccountKey && !/^[A-Za-z0-9+/]+={0,2}$/.test(cs.AccountKey)) return undefined;
  // The endpoint requests go to, as the SDK (and clients.ts azureBlobEndpoint) builds it.
  const endpoint = cs.BlobEndpoint
    ? cs.BlobEndpoint.replace(/\/+$/, '')
    : `${cs.DefaultEndpointsProtocol ?? 'https'}://${cs.AccountName}.blob.${cs.EndpointSuffix ?? 'core.windows.net'}`;
  if (httpUrl(true)(endpoint) === undefined) return undefined;
  return value;
};

export interface ServiceAccount {
  type: 'service_account';
  project_id?: string;
  client_email: string;
  private_key: string;
}

export function parseServiceAccount(value: string): ServiceAccount | undefined {
  let parsed: Partial<Record<keyof ServiceAccount | 'type', unknown>>;
  try {
    parsed = JSON.parse(value);
  } catch {
    return undefined;
  }
  if (!parsed || typeof parsed !== 'object' || parsed.type !== 'service_account') return undefined;
  if (typeof parsed.client_email !== 'string' || !parsed.client_email.includes('@')) return undefined;
  if (typeof parsed.private_key !== 'string') return undefined;
  try {
    createPrivateKey(parsed.private_key);
  } catch {
    return undefined;
  }
  return parsed as ServiceAccount;
}

/**
 * A service account as configuration accepts it: parseServiceAccount's checks, and the fields
 * that reach requests (client_email in the token request, project_id in URLs) clean text.
 */
function acceptServiceAccount(text: string): boolean {
  const account = parseServiceAccount(text);
  if (!account) return false;
  if (!isCleanText(account.client_email) || /\s/.test(account.client_email) || account.client_email.length > 1024)
    return false;
  const projectId: unknown = account.project_id;
  if (
    projectId !== undefined &&
    (typeof projectId !== 'string' || !isCleanText(projectId) || /\s/.test(projectId) || projectId.length > 1024)
  )
    return false;
  return true;
}

/** Whether an object nests at most `max` levels (walked without recursion, so any depth is safe to ask about). */
function nestsAtMost(value: object, max: number): boolean {
  const pending: [unknown, number][] = [[value, 1]];
  while (pending.length > 0) {
    const [node, level] = pending.pop()!;
    for (const child of Object.values(node as object)) {
      if (child === null || typeof child !== 'object') continue;
      if (level + 1 > max) return false;
      pending.push([child, level + 1]);
    }
  }
  return true;
}

/** An HTTP field name: an RFC 7230 token (`tchar`s only), so it can never carry CR, LF, ":" or a space. */
const HEADER_TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,100}$/;

/**
 * Request headers no source may have forwarded to an origin, whatever its configuration names:
 * Stowage's own credentials (`authorization`, `x-api-key`, `proxy-*`, cookies), `host` (the
 * origin is reached by base_url, never by a name a client picks), the hop-by-hop and framing
 * headers of RFC 7230 (they describe the client's connection, not the origin's; a forwarded
 * `content-length` on a GET would leave the origin waiting for a body), and what Stowage answers
 * itself (`range`, the conditionals and `accept-encoding`: the origin's answer must be the whole,
 * unencoded object, since renditions and Range are made from it). Configurations naming one are
 * refused, so what is stored is what is sent.
 */
const NEVER_FORWARDED = new Set([
  'authorization',
  'proxy-authorization',
  'x-api-key',
  'cookie',
  'cookie2',
  'set-cookie',
  'host',
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'http2-settings',
  'content-length',
  'expect',
  'range',
  'if-range',
  'if-match',
  'if-none-match',
  'if-modified-since',
  'if-unmodified-since',
  'accept-encoding',
]);

/** Whether a client's request header may be passed to an origin at all (lower-case name). */
export const mayForward = (name: string): boolean => !NEVER_FORWARDED.has(name) && !name.startsWith('proxy-');

/** A header name as configuration accepts it: a token Stowage may forward, stored in lower case. */
const headerName = (value: string): string | undefined => {
  if (!HEADER_TOKEN.test(value)) return undefined;
  const name = value.toLowerCase();
  return mayForward(name) ? name : undefined;
};

/** At most this many names in a forward_header list. */
export const MAX_FORWARDED_HEADERS = 20;

/**
 * canonical_header: `true` (Link: <origin URL>; rel="canonical" on delivery), `false` (off), or
 * the name of the request header whose value (a host) is passed to the origin under that name.
 */
const canonicalHeader = (value: unknown): ConfigValue | undefined =>
  typeof value === 'boolean' ? value : typeof value === 'string' ? headerName(value) : undefined;

/**
 * forward_header: `true` (Accept, Accept-Language, User-Agent, Referer), `false` (none), or the
 * names of the request headers to pass on (lower-cased, each once, in the order given).
 */
const forwardHeader = (value: unknown): ConfigValue | undefined => {
  if (typeof value === 'boolean') return value;
  if (!Array.isArray(value) || value.length > MAX_FORWARDED_HEADERS) return undefined;
  const names: string[] = [];
  for (const item of value) {
    const name = typeof item === 'string' ? headerName(item) : undefined;
    if (name === undefined) return undefined;
    if (!names.includes(name)) names.push(name);
  }
  return names;
};

/** An access key is sent in the Authorization header: visible ASCII only. */
const ACCESS_KEY = /^[\x21-\x7e]{1,256}$/;
/** A secret key only signs: anything visible, no white space, no control character. */
const secretKey = (value: string) => (isCleanText(value) && /^\S{1,512}$/.test(value) ? value : undefined);

const FIELDS: Record<SourceType, Record<string, FieldSpec>> = {
  s3: {
    access_key: { kind: 'string', secret: true, check: pattern(ACCESS_KEY) },
    secret_key: { kind: 'string', secret: true, check: secretKey },
    region: { kind: 'string', required: true, check: pattern(/^[A-Za-z0-9_-]{1,64}$/) },
    bucket: { kind: 'string', required: true, check: pattern(/^[A-Za-z0-9][A-Za-z0-9._-]{1,254}$/) },
    endpoint: { kind: 'string', check: httpUrl(true) },
  },
  azure: {
    connection_string: { kind: 'string', required: true, secret: true, check: azureConnectionString },
    container_name: {
      kind: 'string',
      required: true,
      check: pattern(/^(\$root|[a-z0-9](?!.*--)[a-z0-9-]{1,61}[a-z0-9])$/),
    },
  },
  google_cloud: {
    service_account_json: {
      kind: 'string',
      required: true,
      secret: true,
      // Accepted as the JSON text or as the object itself (a key file nests 1 level; 8 is
      // plenty, and keeps JSON.stringify clear of a body nested thousands deep); stored as text.
      check: (v) => {
        const text =
          typeof v === 'string'
            ? v
            : v && typeof v === 'object' && !Array.isArray(v) && nestsAtMost(v, 8)
              ? JSON.stringify(v)
              : undefined;
        return text !== undefined && acceptServiceAccount(text) ? text : undefined;
      },
    },
    bucket_name: { kind: 'string', required: true, check: pattern(/^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$/) },
  },
  image_source: {
    base_url: { kind: 'string', required: true, check: httpUrl(true) },
    canonical_header: { kind: ['boolean', 'string'], check: canonicalHeader },
    forward_header: { kind: ['boolean', 'array'], check: forwardHeader },
  },
};

export const secretFields = (type: SourceType): string[] =>
  Object.entries(FIELDS[type])
    .filter(([, f]) => f.secret)
    .map(([k]) => k);

/** The fields of every type that are masked in responses. */
export const ALL_SECRET_FIELDS = [...new Set(SOURCE_TYPES.flatMap(secretFields))];

/**
 * Checks a complete configuration for `type` and returns it normalised. Throws the documented
 * 400 ("Configuration is invalid for the specified type") on any problem; `reason` receives
 * the field at fault (never its value) for debug logs.
 */
export function validateConfiguration(type: SourceType, input: unknown, reason?: (why: string) => void): Configuration {
  const fail = (why: string) => {
    reason?.(why);
    return errors.invalidConfiguration();
  };
  if (!input || typeof input !== 'object' || Array.isArray(input)) throw fail('configuration is not an object');
  const spec = FIELDS[type];
  const out: Configuration = {};
  for (const [key, value] of Object.entries(input as Record<string, unknown>)) {
    const field = spec[key];
    if (!field) throw fail(`unknown field ${key} for type ${type}`);
    if (value === undefined || value === null) continue;
    if (field.secret && value === MASK) throw fail(`${key} holds the mask, not a value`);
    const isObjectAllowed = key === 'service_account_json' && typeof value === 'object';
    const kinds: string[] = Array.isArray(field.kind) ? field.kind : [field.kind];
    if (!isObjectAllowed && !kinds.includes(kindOf(value))) throw fail(`${key} must be a ${kinds.join(' or ')}`);
    if (typeof value === 'string' && value.length > MAX_STRING) throw fail(`${key} is too long`);
    const normalised = field.check ? field.check(value) : (value as ConfigValue);
    if (normalised === undefined) throw fail(`${key} is not valid`);
    out[key] = normalised;
  }
  for (const [key, field] of Object.entries(spec)) {
    if (field.required && out[key] === undefined) throw fail(`${key} is required`);
  }
  if (type === 's3' && (out.access_key === undefined) !== (out.secret_key === undefined)) {
    throw fail('access_key and secret_key go together');
  }
  return out;
}

/** Splits a configuration into what may be stored in the clear and what must be sealed. */
export function splitSecrets(
  type: SourceType,
  config: Configuration,
): { visible: Configuration; secret: Configuration } {
  const secrets = new Set(secretFields(type));
  const visible: Configuration = {};
  const secret: Configuration = {};
  for (const [k, v] of Object.entries(config)) (secrets.has(k) ? secret : visible)[k] = v;
  return { visible, secret };
}

/** The configuration as responses show it: every stored secret replaced by the mask. */
export function maskConfiguration(type: SourceType, visible: Configuration, secretKeys: string[]): Configuration {
  const out: Configuration = { ...visible };
  for (const key of secretFields(type)) if (secretKeys.includes(key)) out[key] = MASK;
  return out;
}

/**
 * PATCH semantics: fields of `patch` replace stored ones, `null` removes an optional field, and
 * a secret sent back as the mask keeps the stored value.
 */
export function mergeConfiguration(stored: Configuration, patch: unknown): Record<string, unknown> {
  if (!patch || typeof patch !== 'object' || Array.isArray(patch)) throw errors.invalidConfiguration();
  const merged: Record<string, unknown> = { ...stored };
  for (const [key, value] of Object.entries(patch as Record<string, unknown>)) {
    if (value === MASK && key in stored && ALL_SECRET_FIELDS.includes(key)) continue;
    if (value === null) delete merged[key];
    else merged[key] = value;
  }
  return merged;
}
