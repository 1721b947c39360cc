// What the caller may ask of an upload: whether it may replace a file, and which webhook it may
// name (by the key's grant, and by the outbound guard).
import { errors } from '../errors.ts';
import { OutboundBlockedError, type OutboundGuard } from '../outbound/guard.ts';
import { originAllowed } from '../services/origins.ts';
import type { Principal } from '../services/workspaces.ts';
import type { UploadOptions } from './options.ts';

/**
 * What the caller's key lets an upload do. A public key may add files, never replace them, and
 * may name a webhook_url only at an origin the workspace listed in `webhook_origins`, so a key
 * copied from a web page cannot make the service send signed requests to strangers.
 */
export function applyGrant<T extends UploadOptions | { webhookUrl: string | null; mayReplace?: boolean }>(
  opts: T,
  principal: Principal,
): T {
  const trusted = principal.keyType === 'private';
  if (!trusted && opts.webhookUrl && !originAllowed(principal.webhookOrigins, opts.webhookUrl))
    throw errors.webhookNotAllowed();
  opts.mayReplace = trusted;
  return opts;
}

/**
 * A webhook target is checked like a remote URL, when the upload is accepted (and again on
 * every delivery). A name that does not resolve yet is let through: delivery retries.
 */
export async function checkWebhookTarget(guard: OutboundGuard | undefined, url: string | null): Promise<void> {
  if (!url || !guard) return;
  try {
    await guard.checkUrl(url);
  } catch (err) {
    if (err instanceof OutboundBlockedError) throw errors.urlRefused(err.message).withField('webhook_url');
  }
}
