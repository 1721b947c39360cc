// Upload tokens (POST /api/v1/generate-token, POST /api/v1/uploads/{token}), as the hosted
// service documents them: a backend mints a short-lived token with its private key and hands it
// to a browser, which uploads one file with it and needs no key at all.
//
// Decisions the hosted docs leave open (README "Browser uploads"):
// - Format: `stw_ut_<22 base62 id>.<HMAC-SHA256 of the id, base64url>`. The HMAC key is derived
//   from the master key, so a token carries no secret and cannot be forged; everything else
//   (workspace, policy, expiry) is the token's row. Garbage is refused before any database read.
// - Single use. The row moves unused → uploading → used with conditional updates, so of two
//   uploads at once exactly one proceeds. A failed upload (too large, connection lost, bad
//   image for its transform) puts the token back, so the page can try again until it expires.
// - Revocable: a token works only while the private key that minted it does (revoking or
//   rotating that key ends its tokens; `key rotate --grace` keeps them for the grace period).
// - Clocks: the service both mints and checks, so a browser's clock never matters. Nodes
//   compare against their own clocks (run NTP), with no leeway.
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { TokenMintBody, UploadToken } from '../contract/uploads.ts';
import { randomBase62 } from '../crypto/ids.ts';
import { type Db, nowIso } from '../db/database.ts';
import type { UploadTokenRow } from '../db/schema.ts';
import { UploadTokenRepository } from '../db/upload-tokens.ts';
import { errors } from '../errors.ts';
import type { FileRecord } from '../services/files.ts';
import type { Principal, WorkspaceService } from '../services/workspaces.ts';
import { parsePolicy, positiveInt, type TokenPolicy, type TokenUpload, tokenUploadOptions } from './token-policy.ts';
import type { UploadService } from './upload-service.ts';

const PREFIX = 'stw_ut_';
const TOKEN_SHAPE = /^stw_ut_([0-9A-Za-z]{22})\.([A-Za-z0-9_-]{43})$/;
const DEFAULT_TTL = 300;
/** Used tokens and expired ones are kept this long (for support questions), then swept. */
const KEEP_AFTER_EXPIRY_S = 24 * 3600;

export interface UploadTokenDeps {
  db: Db;
  uploads: UploadService;
  workspaces: WorkspaceService;
  masterKey: Buffer;
  /** `graceMs`: an upload holding a token that has shown no sign of life this long has died (sweep). */
  settings: { publicUrl: string; maxTtlSeconds: number; graceMs: number };
}

const nowSeconds = () => Math.floor(Date.now() / 1000);

export class UploadTokenService {
  private readonly key: Buffer;
  private readonly repo: UploadTokenRepository;
  private readonly uploads: UploadService;
  private readonly workspaces: WorkspaceService;
  private readonly settings: UploadTokenDeps['settings'];

  constructor(deps: UploadTokenDeps) {
    this.repo = new UploadTokenRepository(deps.db.kysely);
    this.uploads = deps.uploads;
    this.workspaces = deps.workspaces;
    this.settings = deps.settings;
    // A key of its own, derived from the master key, like the part and delivery URL keys.
    this.key = createHmac('sha256', deps.masterKey).update('stowage/upload-token/v1').digest();
  }

  private mac(id: string): string {
    return createHmac('sha256', this.key).update(`${PREFIX}${id}`).digest('base64url');
  }

  /** POST /api/v1/generate-token: every field checked now, so a bad policy fails here and not in a browser. */
  async mint(principal: Principal, publicKeyShown: string, input: TokenMintBody): Promise<UploadToken> {
    const policy = parsePolicy(input);
    const ttl = Math.min(positiveInt(input.ttl_seconds, 'ttl_seconds', DEFAULT_TTL), this.settings.maxTtlSeconds);
    const id = randomBase62(22);
    const expireAt = nowSeconds() + ttl;
    await this.repo.insert({
      id,
      workspace_id: principal.workspaceId,
      key_id: principal.keyId,
      policy: JSON.stringify(policy),
      expire_at: expireAt,
      state: 'unused',
      used_at: null,
      file_id: null,
      created_at: nowIso(),
    });
    const signature = this.mac(id);
    const token = `${PREFIX}${id}.${signature}`;
    const { file_name, folder, tags, max_file_size, transform, allow_override } = policy;
    return {
      token,
      signature,
      expire_at: expireAt,
      public_key: publicKeyShown,
      workspace_id: principal.workspaceId,
      upload_url: `${this.settings.publicUrl}/api/v1/uploads/${token}`,
      policy: { file_name, folder, tags, max_file_size, transform, allow_override },
    };
  }

  /**
   * The token's row and the minting key's principal, when the token is genuine, unexpired,
   * unused and its key still in force; otherwise the documented 401.
   */
  async resolve(token: string): Promise<{ row: UploadTokenRow; policy: TokenPolicy; principal: Principal }> {
    const m = TOKEN_SHAPE.exec(token);
    if (!m) throw errors.invalidToken('TOKEN_INVALID');
    const expected = Buffer.from(this.mac(m[1]));
    const given = Buffer.from(m[2]);
    if (given.length !== expected.length || !timingSafeEqual(given, expected))
      throw errors.invalidToken('TOKEN_INVALID');
    const row = await this.repo.byId(m[1]);
    if (!row) throw errors.invalidToken('TOKEN_INVALID');
    if (Number(row.expire_at) < nowSeconds()) throw errors.invalidToken('TOKEN_EXPIRED');
    if (row.state !== 'unused') throw errors.invalidToken('TOKEN_USED');
    const principal = await this.workspaces.keyPrincipal(row.key_id);
    if (!principal || principal.workspaceId !== row.workspace_id) throw errors.invalidToken('TOKEN_INVALID');
    return { row, policy: JSON.parse(row.policy) as TokenPolicy, principal };
  }

  /**
   * Spends the token on a resumable (tus) upload, whose bytes come in later requests: unused →
   * used at once, so the token can start no second upload however long this one takes. False
   * when another upload got it first. `putBack` gives it back if the upload cannot start.
   */
  async spend(row: UploadTokenRow): Promise<boolean> {
    if (!(await this.repo.claim(row.id, nowSeconds()))) return false;
    await this.repo.markUsedPending(row.id);
    return true;
  }

  async putBack(row: UploadTokenRow): Promise<void> {
    await this.repo.putBackUsed(row.id);
  }

  /**
   * A genuine token's id and workspace, whatever its state: the later requests of a tus upload
   * it started carry it still (spent by then). Null for anything forged or unknown.
   */
  async identify(token: string): Promise<{ id: string; workspaceId: string } | null> {
    const m = TOKEN_SHAPE.exec(token);
    if (!m) return null;
    const expected = Buffer.from(this.mac(m[1]));
    const given = Buffer.from(m[2]);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
    const row = await this.repo.byId(m[1]);
    return row ? { id: row.id, workspaceId: row.workspace_id } : null;
  }

  /**
   * POST /api/v1/uploads/{token}: the policy decides everything but the name, and the fields
   * it lets the uploader override (token-policy.ts). The upload adds a file, never replaces one.
   */
  async upload(
    resolved: { row: UploadTokenRow; policy: TokenPolicy; principal?: Principal },
    body: Readable,
    sent: TokenUpload,
  ): Promise<FileRecord> {
    const { row, policy } = resolved;
    const options = tokenUploadOptions(policy, sent);
    // The workspace's figures came with the minting key's check (resolve): not read again.
    const known = resolved.principal?.quota;
    const limits = await this.uploads.limits(row.workspace_id, known);
    const maxFileSize = Math.min(limits.maxFileSize, Number(policy.max_file_size));
    if (sent.contentLength !== undefined && sent.contentLength > maxFileSize) throw errors.fileTooLarge(maxFileSize);

    // Exactly one upload at a time holds the token.
    if (!(await this.repo.claim(row.id, nowSeconds())))
      throw errors.invalidToken(Number(row.expire_at) < nowSeconds() ? 'TOKEN_EXPIRED' : 'TOKEN_USED');
    // However long the upload takes, it shows it is alive; a node that dies mid-upload leaves a
    // token the sweeper gives back once this stops.
    const heartbeat = setInterval(
      () => {
        this.repo.touch(row.id).catch(() => {});
      },
      Math.max(1000, Math.floor(this.settings.graceMs / 3)),
    );
    heartbeat.unref();
    try {
      const staged = await this.uploads.stage(row.workspace_id, body, {
        maxFileSize,
        expectedBytes: sent.contentLength,
        known,
      });
      return await this.uploads.finish(staged, options, 'token', {
        inTransaction: (trx, file) => this.repo.in(trx).markUsed(row.id, file.id),
      });
    } catch (err) {
      // Nothing was stored: the page may try again with the same token while it lasts. (If the
      // database is what failed, the sweeper gives the token back once the heartbeat stops.)
      await this.repo.putBack(row.id).catch(() => {});
      throw err;
    } finally {
      clearInterval(heartbeat);
    }
  }

  /**
   * Gives back tokens whose upload died without a word (its node crashed, or the database was
   * gone when it failed), and drops tokens a day past their expiry, used or not.
   */
  async sweep(graceMs = this.settings.graceMs): Promise<number> {
    await this.repo.reviveStale(new Date(Date.now() - graceMs).toISOString());
    return this.repo.deleteExpired(nowSeconds() - KEEP_AFTER_EXPIRY_S);
  }
}
