// Bucket CORS for browser multipart uploads. A page on another origin PUTs each part straight to
// a presigned UploadPart URL (S3Storage.presignParts) and reads the part's ETag from the answer,
// so the bucket must allow PUT from that origin and expose ETag. Nothing else in Stowage needs
// bucket CORS: delivery and every other request go through the service.
//
// S3 answers a cross-origin request with the FIRST rule that matches its origin, method and
// headers (https://docs.aws.amazon.com/AmazonS3/latest/userguide/cors.html). So the check looks
// at the rule a browser's part PUT would really get, and `applyBucketCors` puts Stowage's rule
// first. The rule allows PUT only: placed first with GET or HEAD as well, it would take over the
// answers to those requests from a rule of the owner's with other exposed headers.
import { type CORSRule, GetBucketCorsCommand, PutBucketCorsCommand, type S3Client } from '@aws-sdk/client-s3';

/** Lets a later apply replace Stowage's own rule instead of adding a second one. */
export const CORS_RULE_ID = 'stowage-browser-uploads';

/** Headers a part PUT carries beyond the safelisted ones (sdk/src/client.ts sets content-type). */
const PART_REQUEST_HEADERS = ['content-type'];

export type CorsState = 'ok' | 'missing' | 'unsupported' | 'error';

export interface CorsCheck {
  status: CorsState;
  bucket: string;
  /** The origins checked; absent: any origin a rule names (the service does not know its pages' origins). */
  origins?: string[];
  /** One line for people. Never holds credentials. */
  detail: string;
  /** The bucket's rules as read (ok and missing only). */
  rules?: CORSRule[];
  /** The storage server's error code and HTTP status (unsupported and error only). */
  code?: string;
  httpStatus?: number;
}

export interface CorsOptions {
  /** Page origins such as https://app.example ("*" for any). */
  origins?: readonly string[];
  /** Time limit of each call to the storage server. */
  timeoutMs?: number;
  /** Values cut from any message before it is returned (the access key, the secret). */
  secrets?: readonly (string | undefined)[];
}

/** The rule Stowage needs, for the given page origins (any origin by default). */
export function stowageCorsRule(origins: readonly string[] = ['*']): CORSRule {
  return {
    ID: CORS_RULE_ID,
    AllowedMethods: ['PUT'],
    AllowedOrigins: [...origins],
    // "*": a browser may add headers of its own; content-type is the one the SDK sets.
    AllowedHeaders: ['*'],
    ExposeHeaders: ['ETag'],
    // Browsers cache the preflight this long (Chromium caps it at 2 hours), so a 10,000-part
    // upload does not pay a preflight per part.
    MaxAgeSeconds: 3600,
  };
}

/** "*" alone, or scheme://host[:port] where the host may hold one "*" (as S3 allows). */
export function isValidOrigin(origin: string): boolean {
  if (origin === '*') return true;
  if (!/^https?:\/\/[^\s/?#@]+$/i.test(origin)) return false;
  return (origin.match(/\*/g) ?? []).length <= 1;
}

/** S3's matching: case-insensitive for headers, one "*" wildcard per pattern. */
function wildcardMatch(pattern: string, value: string, caseInsensitive: boolean): boolean {
  const p = caseInsensitive ? pattern.toLowerCase() : pattern;
  const v = caseInsensitive ? value.toLowerCase() : value;
  const star = p.indexOf('*');
  if (star < 0) return p === v;
  const head = p.slice(0, star);
  const tail = p.slice(star + 1);
  return v.length >= head.length + tail.length && v.startsWith(head) && v.endsWith(tail);
}

/** The rule S3 would answer a part PUT from `origin` with, if any. */
function ruleForPartPut(rules: readonly CORSRule[], origin: string): CORSRule | undefined {
  return rules.find(
    (r) =>
      (r.AllowedMethods ?? []).some((m) => m.toUpperCase() === 'PUT') &&
      (r.AllowedOrigins ?? []).some((o) => wildcardMatch(o, origin, false)) &&
      PART_REQUEST_HEADERS.every((h) => (r.AllowedHeaders ?? []).some((a) => wildcardMatch(a, h, true))),
  );
}

const exposesEtag = (rule: CORSRule | undefined) =>
  Boolean(rule?.ExposeHeaders?.some((h) => h.toLowerCase() === 'etag'));

/**
 * Whether a browser on each origin could PUT a part and read its ETag under these rules.
 * Without origins: whether some origin named by a rule could.
 */
export function rulesAllowPartUploads(rules: readonly CORSRule[], origins?: readonly string[]): boolean {
  if (origins && origins.length > 0) return origins.every((o) => exposesEtag(ruleForPartPut(rules, o)));
  const named = rules
    .filter((r) => r.AllowedMethods?.some((m) => m.toUpperCase() === 'PUT'))
    .flatMap((r) => r.AllowedOrigins ?? []);
  return named.some((o) => exposesEtag(ruleForPartPut(rules, o)));
}

/** Stowage's rule first (see the top of this file), every other rule kept in its order. */
export function mergeCorsRules(existing: readonly CORSRule[], rule: CORSRule): CORSRule[] {
  return [rule, ...existing.filter((r) => r.ID !== rule.ID)];
}

interface SdkError {
  name?: string;
  Code?: string;
  code?: string;
  message?: string;
  $metadata?: { httpStatusCode?: number };
}

/** Codes S3-compatible servers use for a call they do not implement (MinIO, Swift, B2, …). */
const UNSUPPORTED_CODES = new Set([
  'NotImplemented',
  'XNotImplemented',
  'NotSupported',
  'UnsupportedOperation',
  'MethodNotAllowed',
]);

/** The error's code, HTTP status and a message with every secret and URL userinfo cut out. */
function describeError(
  err: unknown,
  secrets: readonly (string | undefined)[],
): { code: string; httpStatus?: number; message: string } {
  const e = (err ?? {}) as SdkError;
  const httpStatus = e.$metadata?.httpStatusCode;
  const code = e.Code ?? (e.name && e.name !== 'Error' ? e.name : undefined) ?? e.code ?? 'Error';
  let message = String(e.message ?? err).replace(/(\w+:\/\/)[^/\s@]*@/g, '$1[redacted]@');
  for (const s of secrets) if (s && s.length >= 4) message = message.split(s).join('[redacted]');
  if (message.length > 300) message = `${message.slice(0, 300)}…`;
  return { code, httpStatus, message };
}

/** Sorts a GetBucketCors failure into missing, unsupported or error. */
export function classifyCorsError(err: unknown, bucket: string, opts: CorsOptions = {}): CorsCheck {
  const { code, httpStatus, message } = describeError(err, opts.secrets ?? []);
  const origins = opts.origins ? [...opts.origins] : undefined;
  const where = `${code}${httpStatus ? `, HTTP ${httpStatus}` : ''}`;
  if (code === 'NoSuchCORSConfiguration') {
    return { status: 'missing', bucket, origins, rules: [], detail: `bucket "${bucket}" has no CORS configuration` };
  }
  if (httpStatus === 501 || UNSUPPORTED_CODES.has(code)) {
    return {
      status: 'unsupported',
      bucket,
      origins,
      code,
      httpStatus,
      // Swift answers 501 before it looks at the signature or the bucket: this says nothing
      // about either (GET /readyz does).
      detail: `the storage server does not support bucket CORS through the S3 API (${where})`,
    };
  }
  const hint =
    code === 'AbortError' || code === 'TimeoutError'
      ? ` (no answer within ${opts.timeoutMs ?? '?'} ms)`
      : httpStatus === 403
        ? ' (do the credentials allow s3:GetBucketCORS?)'
        : '';
  return {
    status: 'error',
    bucket,
    origins,
    code,
    httpStatus,
    detail: `cannot read the CORS configuration of bucket "${bucket}": ${where}: ${message}${hint}`,
  };
}

const callOptions = (opts: CorsOptions) => (opts.timeoutMs ? { abortSignal: AbortSignal.timeout(opts.timeoutMs) } : {});

/** Reads the bucket's CORS configuration and says whether browser part uploads can work. */
export async function checkBucketCors(client: S3Client, bucket: string, opts: CorsOptions = {}): Promise<CorsCheck> {
  const origins = opts.origins ? [...opts.origins] : undefined;
  let rules: CORSRule[];
  try {
    const res = await client.send(new GetBucketCorsCommand({ Bucket: bucket }), callOptions(opts));
    rules = res.CORSRules ?? [];
  } catch (err) {
    return classifyCorsError(err, bucket, opts);
  }
  const forWhom = origins ? `from ${origins.join(', ')}` : 'from the origins its rules name';
  if (rulesAllowPartUploads(rules, origins)) {
    return {
      status: 'ok',
      bucket,
      origins,
      rules,
      detail: `bucket "${bucket}" allows browser part uploads (PUT, ETag exposed) ${forWhom}`,
    };
  }
  return {
    status: 'missing',
    bucket,
    origins,
    rules,
    detail: `bucket "${bucket}" has ${rules.length} CORS rule(s), none that lets browsers PUT parts and read their ETag ${forWhom}`,
  };
}

export interface CorsApply {
  /** Whether a new configuration was written. */
  applied: boolean;
  /** The state before; `after` is the state read back after writing. */
  before: CorsCheck;
  after: CorsCheck;
  rule: CORSRule;
}

/**
 * Adds Stowage's rule for `origins` (any by default) in front of the bucket's other rules,
 * unless they already allow part uploads from those origins. Writes only after a successful
 * read: PutBucketCors replaces the whole configuration, so rules that could not be read would
 * be lost. Reads back afterwards, because some servers accept a configuration and ignore it.
 */
export async function applyBucketCors(client: S3Client, bucket: string, opts: CorsOptions = {}): Promise<CorsApply> {
  const origins = opts.origins && opts.origins.length > 0 ? [...opts.origins] : ['*'];
  const o = { ...opts, origins };
  const rule = stowageCorsRule(origins);
  const before = await checkBucketCors(client, bucket, o);
  if (before.status !== 'missing') return { applied: false, before, after: before, rule };
  try {
    await client.send(
      new PutBucketCorsCommand({
        Bucket: bucket,
        CORSConfiguration: { CORSRules: mergeCorsRules(before.rules ?? [], rule) },
      }),
      callOptions(o),
    );
  } catch (err) {
    const failed = classifyCorsError(err, bucket, o);
    if (failed.status === 'missing') failed.status = 'error';
    failed.detail = failed.detail.replace('cannot read the CORS configuration', 'cannot write the CORS configuration');
    return { applied: false, before, after: failed, rule };
  }
  const after = await checkBucketCors(client, bucket, o);
  if (after.status !== 'ok')
    after.detail = `the storage server accepted the configuration, but reading it back: ${after.detail}`;
  return { applied: true, before, after, rule };
}

/** The admin command that applies the rule, for messages. */
export const CORS_APPLY_COMMAND = 'npx stowage storage cors --apply';

export interface CorsLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/** The start-up log line for a check (src/main.ts). */
export function logCorsCheck(log: CorsLog, check: CorsCheck): void {
  const base = { bucket: check.bucket, cors: check.status };
  switch (check.status) {
    case 'ok':
      log.info(base, `S3 bucket CORS: ${check.detail}`);
      return;
    case 'missing': {
      const rule = stowageCorsRule();
      log.warn(
        { ...base, cors_rule: rule, command: CORS_APPLY_COMMAND },
        `S3 bucket CORS: ${check.detail}. Browsers on other origins cannot upload multipart parts (PUT to presigned URLs, reading ETag) ` +
          `until the bucket has this rule: ${JSON.stringify(rule)}. Apply it with: ${CORS_APPLY_COMMAND} ` +
          `(add --origins https://your-site.example,… to allow only your pages; see docs/deploy.md)`,
      );
      return;
    }
    case 'unsupported':
      log.warn(
        { ...base, code: check.code, http_status: check.httpStatus },
        `S3 bucket CORS: ${check.detail}. Browser multipart uploads from other origins need the storage server's own CORS setting ` +
          `(for OpenStack Swift: cors_preflight_allow_origin in [filter:s3api] and cors_allow_origin in [app:proxy-server]; see docs/deploy.md)`,
      );
      return;
    default:
      log.warn(
        { ...base, code: check.code, http_status: check.httpStatus },
        `S3 bucket CORS could not be checked: ${check.detail}`,
      );
  }
}
