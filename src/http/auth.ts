// API key authentication (docs/api.md#authentication): `Authorization: Bearer <key>` or `x-api-key`.
// Each route declares what it needs in its config: 'none', 'any' (public or private key) or
// 'private'. The principal is attached to the request for the handler.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { errors } from '../errors.ts';
import { originAllowed } from '../services/origins.ts';
import type { Principal, WorkspaceService } from '../services/workspaces.ts';

export type AuthRequirement = 'none' | 'any' | 'private';

declare module 'fastify' {
  interface FastifyContextConfig {
    auth?: AuthRequirement;
    /** List sources answers 401 with its own texts (docs/api/sources.md#list-sources). */
    authErrorStyle?: 'list-sources';
  }
  interface FastifyRequest {
    principal?: Principal;
  }
}

/**
 * The key a request carries: `Authorization: Bearer <key>`, `Authorization: Basic <key>` (as
 * the hosted docs also accept it: the key itself, or base64 of it, or of `key:` / `:key` as
 * HTTP clients write user and password), or `x-api-key`.
 */
export function presentedKey(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  if (typeof header === 'string' && header.length > 0) {
    const match = /^(Bearer|Basic)\s+(\S+)\s*$/i.exec(header);
    if (!match) return '';
    return match[1].toLowerCase() === 'basic' ? basicKey(match[2]) : match[2];
  }
  const x = request.headers['x-api-key'];
  return typeof x === 'string' ? x.trim() : undefined;
}

/**
 * A browser page may use a workspace's public key or upload tokens only from the origins the
 * workspace allows (any, when it lists none). The service's own pages (dashboard, examples)
 * are always allowed. Requests without an Origin header do not come from a web page.
 */
export function checkBrowserOrigin(request: FastifyRequest, allowed: readonly string[], ownOrigin: string): void {
  const origin = request.headers.origin;
  if (typeof origin !== 'string' || allowed.length === 0 || origin === ownOrigin) return;
  if (!originAllowed(allowed, origin)) throw errors.originNotAllowed(origin);
}

const KEYISH = /^stw_[ps]k_[0-9A-Za-z]{43}$/;

function basicKey(credentials: string): string {
  if (KEYISH.test(credentials)) return credentials;
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(credentials) || credentials.length > 256) return '';
  const decoded = Buffer.from(credentials, 'base64').toString('utf8');
  // "key", "key:" or ":key" (user or password left empty), or "anything:key".
  return decoded.split(':').find((part) => KEYISH.test(part)) ?? '';
}

export function installAuth(app: FastifyInstance, workspaces: WorkspaceService, publicUrl: string): void {
  const ownOrigin = new URL(publicUrl).origin;
  app.decorateRequest('principal', undefined);
  app.addHook('onRequest', async (request) => {
    const config = request.routeOptions.config;
    const need = config?.auth ?? 'none';
    if (need === 'none') return;
    const principal = await workspaces.authenticate(presentedKey(request));
    if (!principal) throw config.authErrorStyle === 'list-sources' ? errors.invalidApiKey() : errors.unauthorized();
    if (need === 'private' && principal.keyType !== 'private') throw errors.privateKeyRequired();
    if (principal.keyType === 'public') checkBrowserOrigin(request, principal.allowedOrigins, ownOrigin);
    request.principal = principal;
  });
}

/** The authenticated principal; routes that declare auth always have one. */
export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw errors.unauthorized();
  return request.principal;
}
