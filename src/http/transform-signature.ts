// Signed transformations at the door of delivery (docs/api/delivery.md#signed-transformations):
// when a workspace requires them, a URL whose first segment reads as tokens is refused before
// anything is looked up or rendered, unless it carries a valid tsig (the workspace's delivery
// key) or a valid expires/signature (a URL the service signed: private files, signed-url,
// record thumbnails of private files). Originals cost nothing here: no token segment, no read.
// Named presets alone (`t_{name}`) pass unsigned: they are the workspace's own transformations.
import type { DeliverySigner } from '../crypto/delivery-url.ts';
import { streamSuffix } from '../media/video/stream.ts';
import { verifyTransformSignature, withoutTransformSignature } from '../crypto/transform-url.ts';
import { appError } from '../errors.ts';
import { isPresetsOnly, MAX_UNSIGNED_PRESETS } from '../media/presets.ts';
import { isTokenSegment, tokenSegmentCount } from '../media/transform/tokens.ts';
import type { TransformPolicy } from '../services/workspaces.ts';

const WORKSPACE_ID = /^[0-9A-Za-z]{10,16}$/;

/** How many trailing segments of `pathname` name a streaming package's file; 0 when it does not end like one. */
export function streamDepth(pathname: string): number {
  const parts = pathname.split('/').filter((s) => s !== '');
  // Past the workspace: at least the video's name stays before the package's file.
  return streamSuffix(parts.slice(1))?.count ?? 0;
}

/** The path a streaming package's signature covers: up to the video's name, with its "/". */
export function streamScope(pathname: string, depth: number): string {
  const parts = pathname.split('/');
  return `${parts.slice(0, parts.length - depth).join('/')}/`;
}

export interface TransformGateDeps {
  /** Cached per node (WorkspaceService.transformPolicy). */
  policy(workspaceId: string): Promise<TransformPolicy>;
  signer: DeliverySigner;
}

/**
 * Whether the path names a rendition as delivery would read it: a first segment after the
 * workspace shaped like tokens as requested (media/transform/tokens.ts, the rule delivery uses),
 * with a path after it. Shape, not a full parse: a folder literally named like tokens is gated
 * too (record URLs escape such folders: "w%5F200").
 */
export function hasTokens(pathname: string): boolean {
  const parts = pathname.split('/').filter((s) => s !== '');
  return parts.length > 2 && isTokenSegment(parts[1]);
}

/** One value of a query parameter, or undefined when absent or repeated (which never verifies). */
function single(query: string | undefined, name: string): string | undefined {
  if (!query) return undefined;
  const values = new URLSearchParams(query).getAll(name);
  return values.length === 1 ? values[0] : values.length > 1 ? '' : undefined;
}

/**
 * Throws 403 unless the request may have its transformation. `workspaceSegment` is the route's
 * decoded first segment (`{workspace_id}` or `{workspace_id}-{source}`); `pathname` the raw path. Returns the query delivery should
 * use: without tsig/texp once they have been checked, so an origin never sees them and they do
 * not split its cache.
 */
export async function checkTransformSignature(
  deps: TransformGateDeps,
  workspaceSegment: string,
  pathname: string,
  query: string | undefined,
  nowSeconds: number,
): Promise<string | undefined> {
  // A streaming package's file (media/video/stream.ts) is a rendition with or without `st_`.
  const stream = streamDepth(pathname);
  if (!hasTokens(pathname) && !stream) return query;
  // Presets only (`t_a`, `t_a,t_b`), in every segment delivery could read as tokens (a shorter
  // reading is a part of these): the workspace's owner wrote every transformation such a URL can
  // ask for, so it needs no signature (an unknown name is delivery's 400, whoever asks).
  const parts = pathname
    .split('/')
    .filter((s) => s !== '')
    .slice(1);
  const tokens = parts.slice(0, tokenSegmentCount(parts)).join(',');
  if (isPresetsOnly(tokens, MAX_UNSIGNED_PRESETS)) return withoutTransformSignature(query);
  // The segment as the router decoded it, which is what delivery serves: read from the raw path,
  // "/%71Vb…/w_1/a.jpg" would name no workspace here and the workspace there.
  const dash = workspaceSegment.indexOf('-');
  const workspaceId = dash === -1 ? workspaceSegment : workspaceSegment.slice(0, dash);
  // Not a workspace id: delivery answers 404 as it always did.
  if (!WORKSPACE_ID.test(workspaceId)) return query;
  const policy = await deps.policy(workspaceId);
  if (!policy.required) return query;
  const own = verifyTransformSignature(policy.key, pathname, query, nowSeconds);
  if (own === 'ok') return withoutTransformSignature(query);
  const expires = single(query, 'expires');
  const signature = single(query, 'signature');
  let served = deps.signer.verify(pathname, { expires, signature }, nowSeconds);
  // The package's signature, which the playlists delivery answers carry (routes/delivery.ts).
  if (served === 'bad' && stream)
    served = deps.signer.verify(streamScope(pathname, stream), { expires, signature }, nowSeconds);
  if (served === 'ok') return withoutTransformSignature(query);
  if (own === 'missing' && served === 'missing') throw appError('TRANSFORMATION_SIGNATURE_REQUIRED');
  if (own === 'expired' || (own === 'missing' && served === 'expired')) throw appError('URL_EXPIRED');
  throw appError('INVALID_SIGNATURE');
}
