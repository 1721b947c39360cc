// Workspaces and their API keys. Keys are random, typed by prefix and stored only as hashes.
import {
  type KeyType,
  KEY_PREFIX,
  hashApiKey,
  keyHint,
  newApiKey,
  newShortId,
  newUuid,
  newWebhookSecret,
} from '../crypto/ids.ts';
import type { SecretBox } from '../crypto/secret-box.ts';
import { type Db, isUniqueViolation, nowIso } from '../db/database.ts';
import type { Database } from '../db/schema.ts';
import { errors } from '../errors.ts';
import type { CompiledQuery, Kysely } from 'kysely';
import { loadOrigins, parseOriginList, storeOrigins } from './origins.ts';

export interface Principal {
  workspaceId: string;
  keyId: string;
  keyType: KeyType;
  /** Web origins that may use this workspace's public key and tokens; empty = any. */
  allowedOrigins: string[];
  /** Origins public-key uploads may send webhooks to; empty = none. */
  webhookOrigins: string[];
}

/** GET/PATCH /api/v1/workspace: the settings a private key may read and change. */
export interface WorkspaceSettings {
  workspace_id: string;
  name: string;
  allowed_origins: string[];
  webhook_origins: string[];
  quota_bytes: number | null;
  max_file_size: number | null;
  used_bytes: number;
  /** Bytes promised to uploads in progress; quota decisions count used + reserved. */
  reserved_bytes: number;
}

interface AuthRow {
  id: string;
  workspace_id: string;
  type: KeyType;
  allowed_origins: string | null;
  webhook_origins: string | null;
}

export interface CreatedWorkspace {
  workspace_id: string;
  public_key: string;
  private_key: string;
  webhook_secret: string;
}

export interface KeyInfo {
  id: string;
  workspace_id: string;
  type: KeyType;
  hint: string;
  created_at: string;
  revoked_at: string | null;
}

const KEY_SHAPE = new RegExp(`^(${KEY_PREFIX.public}|${KEY_PREFIX.private})[0-9A-Za-z]{43}$`);

export class WorkspaceService {
  private authQuery?: CompiledQuery<AuthRow>;

  constructor(
    private readonly db: Db,
    private readonly box: SecretBox,
  ) {}

  async create(name: string): Promise<CreatedWorkspace> {
    return this.db.kysely.transaction().execute((trx) => this.createIn(trx, name));
  }

  private async createIn(trx: Kysely<Database>, name: string): Promise<CreatedWorkspace> {
    const trimmed = name.trim();
    if (!trimmed || trimmed.length > 255) throw errors.validation('name must be 1 to 255 characters');
    const id = newShortId();
    const webhookSecret = newWebhookSecret();
    const now = nowIso();
    const publicKey = newApiKey('public');
    const privateKey = newApiKey('private');
    await trx
      .insertInto('workspaces')
      .values({
        id,
        name: trimmed,
        webhook_secret: this.box.seal(webhookSecret, webhookAad(id)),
        quota_bytes: null,
        max_file_size: null,
        used_bytes: 0,
        reserved_bytes: 0,
        allowed_origins: null,
        webhook_origins: null,
        created_at: now,
        updated_at: now,
      })
      .execute();
    for (const [type, key] of [
      ['public', publicKey],
      ['private', privateKey],
    ] as const) {
      await trx
        .insertInto('api_keys')
        .values({
          id: newUuid(),
          workspace_id: id,
          type,
          key_hash: hashApiKey(key),
          key_hint: keyHint(key),
          created_at: now,
          revoked_at: null,
        })
        .execute();
    }
    return { workspace_id: id, public_key: publicKey, private_key: privateKey, webhook_secret: webhookSecret };
  }

  /**
   * On the very first start, creates a workspace so the service is usable at once. Safe when
   * several nodes start together: the settings row decides which one does it.
   */
  async bootstrapIfEmpty(): Promise<CreatedWorkspace | null> {
    try {
      // One transaction: a node that dies half-way leaves the bootstrap to the next start.
      return await this.db.kysely.transaction().execute(async (trx) => {
        await trx.insertInto('settings').values({ key: 'bootstrapped_at', value: nowIso() }).execute();
        const row = await trx
          .selectFrom('workspaces')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .executeTakeFirstOrThrow();
        if (Number(row.n) > 0) return null;
        return this.createIn(trx, 'Default workspace');
      });
    } catch (err) {
      if (isUniqueViolation(err)) return null;
      throw err;
    }
  }

  async get(id: string) {
    const ws = await this.db.kysely.selectFrom('workspaces').selectAll().where('id', '=', id).executeTakeFirst();
    if (!ws) throw errors.workspaceNotFound(id);
    return ws;
  }

  async list() {
    return this.db.kysely
      .selectFrom('workspaces')
      .select(['id', 'name', 'created_at'])
      .orderBy('created_at')
      .orderBy('id')
      .execute();
  }

  /** Storage quota and maximum file size; null means unlimited / the server default. */
  async setLimits(workspaceId: string, limits: { quotaBytes?: number | null; maxFileSize?: number | null }) {
    await this.get(workspaceId);
    const changes: { quota_bytes?: number | null; max_file_size?: number | null; updated_at: string } = {
      updated_at: nowIso(),
    };
    if (limits.quotaBytes !== undefined) changes.quota_bytes = limits.quotaBytes;
    if (limits.maxFileSize !== undefined) changes.max_file_size = limits.maxFileSize;
    await this.db.kysely.updateTable('workspaces').set(changes).where('id', '=', workspaceId).execute();
    const ws = await this.get(workspaceId);
    return {
      workspace_id: ws.id,
      quota_bytes: ws.quota_bytes,
      max_file_size: ws.max_file_size,
      used_bytes: Number(ws.used_bytes),
      reserved_bytes: Number(ws.reserved_bytes),
    };
  }

  async settings(workspaceId: string): Promise<WorkspaceSettings> {
    const ws = await this.get(workspaceId);
    return {
      workspace_id: ws.id,
      name: ws.name,
      allowed_origins: loadOrigins(ws.allowed_origins),
      webhook_origins: loadOrigins(ws.webhook_origins),
      quota_bytes: ws.quota_bytes === null ? null : Number(ws.quota_bytes),
      max_file_size: ws.max_file_size === null ? null : Number(ws.max_file_size),
      used_bytes: Number(ws.used_bytes),
      reserved_bytes: Number(ws.reserved_bytes),
    };
  }

  /** Origins lists: a list replaces the stored one; null or [] clears it; absent keeps it. */
  async updateSettings(
    workspaceId: string,
    patch: { allowed_origins?: unknown; webhook_origins?: unknown },
  ): Promise<WorkspaceSettings> {
    const changes: { allowed_origins?: string | null; webhook_origins?: string | null; updated_at: string } = {
      updated_at: nowIso(),
    };
    if (patch.allowed_origins !== undefined)
      changes.allowed_origins = storeOrigins(parseOriginList(patch.allowed_origins, 'allowed_origins'));
    if (patch.webhook_origins !== undefined)
      changes.webhook_origins = storeOrigins(parseOriginList(patch.webhook_origins, 'webhook_origins'));
    await this.get(workspaceId);
    await this.db.kysely.updateTable('workspaces').set(changes).where('id', '=', workspaceId).execute();
    return this.settings(workspaceId);
  }

  async webhookSecret(workspaceId: string): Promise<string> {
    const ws = await this.get(workspaceId);
    return this.box.open(ws.webhook_secret, webhookAad(workspaceId));
  }

  async createKey(workspaceId: string, type: KeyType): Promise<KeyInfo & { key: string }> {
    await this.get(workspaceId);
    const key = newApiKey(type);
    const info: KeyInfo = {
      id: newUuid(),
      workspace_id: workspaceId,
      type,
      hint: keyHint(key),
      created_at: nowIso(),
      revoked_at: null,
    };
    await this.db.kysely
      .insertInto('api_keys')
      .values({
        id: info.id,
        workspace_id: workspaceId,
        type,
        key_hash: hashApiKey(key),
        key_hint: info.hint,
        created_at: info.created_at,
        revoked_at: null,
      })
      .execute();
    return { ...info, key };
  }

  async listKeys(workspaceId: string): Promise<KeyInfo[]> {
    await this.get(workspaceId);
    const rows = await this.db.kysely
      .selectFrom('api_keys')
      .select(['id', 'workspace_id', 'type', 'key_hint', 'created_at', 'revoked_at'])
      .where('workspace_id', '=', workspaceId)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
    return rows.map(({ key_hint, ...r }) => ({ ...r, hint: key_hint }));
  }

  async revokeKey(keyId: string): Promise<KeyInfo> {
    const now = nowIso();
    await this.db.kysely
      .updateTable('api_keys')
      .set({ revoked_at: now })
      .where('id', '=', keyId)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    const row = await this.db.kysely.selectFrom('api_keys').selectAll().where('id', '=', keyId).executeTakeFirst();
    if (!row) throw errors.keyNotFound(keyId);
    return {
      id: row.id,
      workspace_id: row.workspace_id,
      type: row.type,
      hint: row.key_hint,
      created_at: row.created_at,
      revoked_at: row.revoked_at,
    };
  }

  /**
   * A new key of the same type for the same workspace; the old one stops working after
   * `graceSeconds` (0: at once), so clients can switch over without an outage.
   */
  async rotateKey(keyId: string, graceSeconds = 0): Promise<{ old: KeyInfo; new: KeyInfo & { key: string } }> {
    const row = await this.db.kysely.selectFrom('api_keys').selectAll().where('id', '=', keyId).executeTakeFirst();
    if (!row) throw errors.keyNotFound(keyId);
    if (row.revoked_at && row.revoked_at <= nowIso()) throw errors.validation('this key is already revoked');
    const created = await this.createKey(row.workspace_id, row.type);
    const revokedAt = new Date(Date.now() + graceSeconds * 1000).toISOString();
    await this.db.kysely.updateTable('api_keys').set({ revoked_at: revokedAt }).where('id', '=', keyId).execute();
    return {
      old: {
        id: row.id,
        workspace_id: row.workspace_id,
        type: row.type,
        hint: row.key_hint,
        created_at: row.created_at,
        revoked_at: revokedAt,
      },
      new: created,
    };
  }

  /** Re-seals every webhook secret under the current master key; returns how many changed. */
  async resealAll(): Promise<number> {
    const rows = await this.db.kysely.selectFrom('workspaces').select(['id', 'webhook_secret']).execute();
    let changed = 0;
    for (const row of rows) {
      if (!this.box.isStale(row.webhook_secret)) continue;
      const resealed = this.box.seal(this.box.open(row.webhook_secret, webhookAad(row.id)), webhookAad(row.id));
      await this.db.kysely
        .updateTable('workspaces')
        .set({ webhook_secret: resealed })
        .where('id', '=', row.id)
        .where('webhook_secret', '=', row.webhook_secret)
        .execute();
      changed++;
    }
    return changed;
  }

  /** What multipart start shows as `public_key` to a private-key caller: a hint, never a key. */
  async publicKeyHint(workspaceId: string): Promise<string> {
    const row = await this.db.kysely
      .selectFrom('api_keys')
      .select('key_hint')
      .where('workspace_id', '=', workspaceId)
      .where('type', '=', 'public')
      .where('revoked_at', 'is', null)
      .orderBy('created_at', 'desc')
      .executeTakeFirst();
    return row?.key_hint ?? '';
  }

  /** The principal a raw key stands for, or null when it is malformed, unknown or revoked. */
  async authenticate(rawKey: string | undefined): Promise<Principal | null> {
    if (!rawKey || !KEY_SHAPE.test(rawKey)) return null;
    // Asked on every request: the query is built once and only its parameters change.
    this.authQuery ??= this.keysInForce('$now').where('api_keys.key_hash', '=', '$hash').compile();
    const values: Record<string, unknown> = { $hash: hashApiKey(rawKey), $now: nowIso() };
    const parameters = this.authQuery.parameters.map((p) => (typeof p === 'string' && p in values ? values[p] : p));
    const { rows } = await this.db.kysely.executeQuery<AuthRow>({ ...this.authQuery, parameters });
    const row = rows[0];
    return row ? principalFrom(row) : null;
  }

  /** Whether the key with this id is still in force (upload tokens die with the key that minted them). */
  async keyPrincipal(keyId: string): Promise<Principal | null> {
    const row = await this.keysInForce(nowIso()).where('api_keys.id', '=', keyId).executeTakeFirst();
    return row ? principalFrom(row) : null;
  }

  /** Keys not revoked at `now` (a revocation may be scheduled: rotation with a grace period), with what a Principal needs. */
  private keysInForce(now: string) {
    return this.db.kysely
      .selectFrom('api_keys')
      .innerJoin('workspaces', 'workspaces.id', 'api_keys.workspace_id')
      .select([
        'api_keys.id',
        'api_keys.workspace_id',
        'api_keys.type',
        'workspaces.allowed_origins',
        'workspaces.webhook_origins',
      ])
      .where((eb) => eb.or([eb('api_keys.revoked_at', 'is', null), eb('api_keys.revoked_at', '>', now)]));
  }
}

function principalFrom(row: AuthRow): Principal {
  return {
    workspaceId: row.workspace_id,
    keyId: row.id,
    keyType: row.type,
    allowedOrigins: loadOrigins(row.allowed_origins),
    webhookOrigins: loadOrigins(row.webhook_origins),
  };
}

export const webhookAad = (workspaceId: string) => `workspace:${workspaceId}:webhook`;
