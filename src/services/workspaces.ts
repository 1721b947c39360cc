// Workspaces and their API keys. Keys are random, typed by prefix and stored only as hashes.
import type { WorkspacePatchBody, WorkspaceSettings } from '../contract/workspace.ts';
import {
  type KeyType,
  KEY_PREFIX,
  hashApiKey,
  keyHint,
  newApiKey,
  newDeliveryKey,
  newShortId,
  newUuid,
  newWebhookSecret,
} from '../crypto/ids.ts';
import type { SecretBox } from '../crypto/secret-box.ts';
import { quotaOf, type WorkspaceQuota } from '../db/blobs.ts';
import { type Db, inTransaction, isUniqueViolation, nowIso } from '../db/database.ts';
import type { ApiKeyRow } from '../db/schema.ts';
import { type KeyInForce, WorkspaceRepository } from '../db/workspaces.ts';
import { errors } from '../errors.ts';
import { loadOrigins, parseOriginList, storeOrigins } from './origins.ts';

export interface Principal {
  workspaceId: string;
  keyId: string;
  keyType: KeyType;
  /** Web origins that may use this workspace's public key and tokens; empty = any. */
  allowedOrigins: string[];
  /** Origins public-key uploads may send webhooks to; empty = none. */
  webhookOrigins: string[];
  /**
   * The workspace's quota settings and counters as read with the key, in the same statement: an
   * upload's first check ("already full?", the size limit) uses them instead of reading them
   * again. Every check that must hold is made again atomically when bytes are reserved and charged.
   */
  quota?: WorkspaceQuota;
}

/** GET/PATCH /api/v1/workspace: the settings a private key may read and change (the contract's). */
export type { WorkspaceSettings };

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

/** What delivery needs per request: whether tokens must be signed, and the key to check them with. */
export interface TransformPolicy {
  required: boolean;
  /** The delivery key; null until first asked for (then no signature of the workspace verifies). */
  key: string | null;
}

/** How long a node trusts its copy of a workspace's TransformPolicy (another node's change shows within it). */
export const TRANSFORM_POLICY_TTL_MS = 5000;
/** Entries kept: enough for every active workspace, bounded against requests naming random ids. */
const TRANSFORM_POLICY_ENTRIES = 10_000;

const KEY_SHAPE = new RegExp(`^(${KEY_PREFIX.public}|${KEY_PREFIX.private})[0-9A-Za-z]{43}$`);

export class WorkspaceService {
  private readonly repo: WorkspaceRepository;
  /** TransformPolicy per workspace, read at most once per TTL per node (delivery asks per request). */
  private readonly policies = new Map<string, { at: number; policy: Promise<TransformPolicy> }>();

  constructor(
    private readonly db: Db,
    private readonly box: SecretBox,
    private readonly policyTtlMs = TRANSFORM_POLICY_TTL_MS,
  ) {
    this.repo = new WorkspaceRepository(db.kysely);
  }

  async create(name: string): Promise<CreatedWorkspace> {
    return inTransaction(this.db.kysely, (trx) => this.createIn(new WorkspaceRepository(trx), name));
  }

  private async createIn(repo: WorkspaceRepository, name: string): Promise<CreatedWorkspace> {
    const trimmed = name.trim();
    if (!trimmed || trimmed.length > 255) throw errors.validation('name must be 1 to 255 characters');
    const id = newShortId();
    const webhookSecret = newWebhookSecret();
    const now = nowIso();
    const publicKey = newApiKey('public');
    const privateKey = newApiKey('private');
    await repo.insert({
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
    });
    for (const [type, key] of [
      ['public', publicKey],
      ['private', privateKey],
    ] as const) {
      await repo.insertKey({
        id: newUuid(),
        workspace_id: id,
        type,
        key_hash: hashApiKey(key),
        key_hint: keyHint(key),
        created_at: now,
        revoked_at: null,
      });
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
      return await inTransaction(this.db.kysely, async (trx) => {
        const repo = new WorkspaceRepository(trx);
        await repo.markBootstrapped(nowIso());
        if ((await repo.count()) > 0) return null;
        return this.createIn(repo, 'Default workspace');
      });
    } catch (err) {
      if (isUniqueViolation(err)) return null;
      throw err;
    }
  }

  async get(id: string) {
    const ws = await this.repo.byId(id);
    if (!ws) throw errors.workspaceNotFound(id);
    return ws;
  }

  async list() {
    return this.repo.list();
  }

  /** Storage quota and maximum file size; null means unlimited / the server default. */
  async setLimits(workspaceId: string, limits: { quotaBytes?: number | null; maxFileSize?: number | null }) {
    await this.get(workspaceId);
    const changes: { quota_bytes?: number | null; max_file_size?: number | null; updated_at: string } = {
      updated_at: nowIso(),
    };
    if (limits.quotaBytes !== undefined) changes.quota_bytes = limits.quotaBytes;
    if (limits.maxFileSize !== undefined) changes.max_file_size = limits.maxFileSize;
    await this.repo.update(workspaceId, changes);
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
      signed_transformations: Boolean(ws.signed_transformations),
      quota_bytes: ws.quota_bytes === null ? null : Number(ws.quota_bytes),
      max_file_size: ws.max_file_size === null ? null : Number(ws.max_file_size),
      used_bytes: Number(ws.used_bytes),
      reserved_bytes: Number(ws.reserved_bytes),
    };
  }

  /** Origins lists: a list replaces the stored one; null or [] clears it; absent keeps it. */
  async updateSettings(workspaceId: string, patch: WorkspacePatchBody): Promise<WorkspaceSettings> {
    const changes: {
      allowed_origins?: string | null;
      webhook_origins?: string | null;
      signed_transformations?: number;
      updated_at: string;
    } = {
      updated_at: nowIso(),
    };
    if (patch.allowed_origins !== undefined)
      changes.allowed_origins = storeOrigins(parseOriginList(patch.allowed_origins, 'allowed_origins'));
    if (patch.webhook_origins !== undefined)
      changes.webhook_origins = storeOrigins(parseOriginList(patch.webhook_origins, 'webhook_origins'));
    if (patch.signed_transformations !== undefined)
      changes.signed_transformations = patch.signed_transformations ? 1 : 0;
    await this.get(workspaceId);
    // The key exists before signatures are required: the service signs record thumbnails with it.
    if (patch.signed_transformations) await this.deliveryKey(workspaceId);
    await this.repo.update(workspaceId, changes);
    this.policies.delete(workspaceId);
    return this.settings(workspaceId);
  }

  /** The workspace's delivery key, made (once, whichever node asks first) when there is none. */
  async deliveryKey(workspaceId: string): Promise<string> {
    const ws = await this.get(workspaceId);
    if (ws.delivery_key) return this.box.open(ws.delivery_key, deliveryKeyAad(workspaceId));
    await this.repo.setDeliveryKey(workspaceId, this.box.seal(newDeliveryKey(), deliveryKeyAad(workspaceId)), null);
    this.policies.delete(workspaceId);
    // Whichever key won the race is the one.
    const sealed = (await this.get(workspaceId)).delivery_key;
    if (!sealed) throw errors.workspaceNotFound(workspaceId);
    return this.box.open(sealed, deliveryKeyAad(workspaceId));
  }

  /**
   * A new delivery key; URLs signed with the old one stop working at once on this node, and
   * within TRANSFORM_POLICY_TTL_MS on others.
   */
  async rotateDeliveryKey(workspaceId: string): Promise<string> {
    await this.get(workspaceId);
    const key = newDeliveryKey();
    // Two rotations at once: the later write stands, as with any setting.
    await this.repo.update(workspaceId, {
      delivery_key: this.box.seal(key, deliveryKeyAad(workspaceId)),
      updated_at: nowIso(),
    });
    this.policies.delete(workspaceId);
    return key;
  }

  /** Whether tokens must be signed and the key to check them: cached per node for policyTtlMs. */
  transformPolicy(workspaceId: string): Promise<TransformPolicy> {
    const now = Date.now();
    const hit = this.policies.get(workspaceId);
    if (hit && now - hit.at < this.policyTtlMs) return hit.policy;
    const policy = this.loadPolicy(workspaceId);
    // Insertion order is age: the oldest entry goes first when the map is full.
    this.policies.delete(workspaceId);
    if (this.policies.size >= TRANSFORM_POLICY_ENTRIES) {
      const oldest = this.policies.keys().next().value;
      if (oldest !== undefined) this.policies.delete(oldest);
    }
    this.policies.set(workspaceId, { at: now, policy });
    // A failed read (database outage) is not kept: the next request asks again.
    policy.catch(() => {
      if (this.policies.get(workspaceId)?.policy === policy) this.policies.delete(workspaceId);
    });
    return policy;
  }

  private async loadPolicy(workspaceId: string): Promise<TransformPolicy> {
    const row = await this.repo.transformPolicy(workspaceId);
    if (!row) return { required: false, key: null };
    return {
      required: Boolean(row.signed_transformations),
      key: row.delivery_key ? this.box.open(row.delivery_key, deliveryKeyAad(workspaceId)) : null,
    };
  }

  async webhookSecret(workspaceId: string): Promise<string> {
    const ws = await this.get(workspaceId);
    return this.box.open(ws.webhook_secret, webhookAad(workspaceId));
  }

  async createKey(workspaceId: string, type: KeyType): Promise<KeyInfo & { key: string }> {
    await this.get(workspaceId);
    return this.insertNewKey(this.repo, workspaceId, type);
  }

  /** Makes a key of `type` and stores its hash through `repo` (a transaction's, or not). */
  private async insertNewKey(
    repo: WorkspaceRepository,
    workspaceId: string,
    type: KeyType,
  ): Promise<KeyInfo & { key: string }> {
    const key = newApiKey(type);
    const info: KeyInfo = {
      id: newUuid(),
      workspace_id: workspaceId,
      type,
      hint: keyHint(key),
      created_at: nowIso(),
      revoked_at: null,
    };
    await repo.insertKey({
      id: info.id,
      workspace_id: workspaceId,
      type,
      key_hash: hashApiKey(key),
      key_hint: info.hint,
      created_at: info.created_at,
      revoked_at: null,
    });
    return { ...info, key };
  }

  async listKeys(workspaceId: string): Promise<KeyInfo[]> {
    await this.get(workspaceId);
    const rows = await this.repo.keysOf(workspaceId);
    return rows.map(keyInfoOf);
  }

  async revokeKey(keyId: string): Promise<KeyInfo> {
    await this.repo.revokeKey(keyId, nowIso());
    const row = await this.repo.keyById(keyId);
    if (!row) throw errors.keyNotFound(keyId);
    return keyInfoOf(row);
  }

  /**
   * A new key of the same type for the same workspace; the old one stops working after
   * `graceSeconds` (0: at once), so clients can switch over without an outage.
   */
  async rotateKey(keyId: string, graceSeconds = 0): Promise<{ old: KeyInfo; new: KeyInfo & { key: string } }> {
    const seen = await this.repo.keyById(keyId);
    if (!seen) throw errors.keyNotFound(keyId);
    // Under the workspace's lock, as a revocation: the key is read again inside, so a revocation
    // that landed in between is seen (400), and the grace period never moves a revocation later
    // (a second rotation with a longer grace keeps the first one's time).
    return inTransaction(this.db.kysely, async (trx) => {
      const repo = new WorkspaceRepository(trx);
      await repo.lockWorkspace(seen.workspace_id);
      const row = await repo.keyById(keyId);
      if (!row) throw errors.keyNotFound(keyId);
      if (row.revoked_at && row.revoked_at <= nowIso()) throw errors.validation('this key is already revoked');
      const created = await this.insertNewKey(repo, row.workspace_id, row.type);
      const wanted = new Date(Date.now() + graceSeconds * 1000).toISOString();
      const revokedAt = row.revoked_at && row.revoked_at < wanted ? row.revoked_at : wanted;
      await repo.setKeyRevokedAt(keyId, revokedAt);
      return { old: { ...keyInfoOf(row), revoked_at: revokedAt }, new: created };
    });
  }

  /** A key of this workspace; another workspace's key id is answered as unknown, like a made-up one. */
  private async keyOf(workspaceId: string, keyId: string) {
    const row = await this.repo.keyById(keyId);
    if (!row || row.workspace_id !== workspaceId) throw errors.keyNotFound(keyId);
    return row;
  }

  /**
   * Revokes one of the workspace's keys now (also one in a rotation's grace period). The last
   * private key in force is refused (409 LAST_PRIVATE_KEY): without one, nobody could manage the
   * workspace through the API any more. Checked under the workspace's lock, so two revocations
   * at once cannot together remove the last two.
   */
  async revokeWorkspaceKey(workspaceId: string, keyId: string): Promise<KeyInfo> {
    const row = await this.keyOf(workspaceId, keyId);
    await inTransaction(this.db.kysely, async (trx) => {
      const repo = new WorkspaceRepository(trx);
      await repo.lockWorkspace(workspaceId);
      const now = nowIso();
      if (row.type === 'private') {
        if ((await repo.revokeUnlessLastPrivate(workspaceId, keyId, now)) === 'last') throw errors.lastPrivateKey();
      } else await repo.revokeNow(keyId, now);
    });
    return keyInfoOf(await this.keyOf(workspaceId, keyId));
  }

  /** rotateKey for a key of this workspace only. */
  async rotateWorkspaceKey(workspaceId: string, keyId: string, graceSeconds = 0) {
    await this.keyOf(workspaceId, keyId);
    return this.rotateKey(keyId, graceSeconds);
  }

  /** Re-seals every webhook secret under the current master key; returns how many changed. */
  async resealAll(): Promise<number> {
    const rows = await this.repo.sealedSecrets();
    let changed = 0;
    for (const row of rows) {
      if (!this.box.isStale(row.webhook_secret)) continue;
      const resealed = this.box.seal(this.box.open(row.webhook_secret, webhookAad(row.id)), webhookAad(row.id));
      // Counted even when another node re-sealed it first: it was stale when read.
      await this.repo.replaceSecret(row.id, row.webhook_secret, resealed);
      changed++;
    }
    return changed;
  }

  /** Re-seals every delivery key under the current master key; returns how many changed. */
  async resealDeliveryKeys(): Promise<number> {
    let changed = 0;
    for (const row of await this.repo.sealedDeliveryKeys()) {
      if (!this.box.isStale(row.delivery_key)) continue;
      const aad = deliveryKeyAad(row.id);
      await this.repo.setDeliveryKey(
        row.id,
        this.box.seal(this.box.open(row.delivery_key, aad), aad),
        row.delivery_key,
      );
      changed++;
    }
    return changed;
  }

  /** What multipart start shows as `public_key` to a private-key caller: a hint, never a key. */
  async publicKeyHint(workspaceId: string): Promise<string> {
    return (await this.repo.publicKeyHint(workspaceId)) ?? '';
  }

  /** The principal a raw key stands for, or null when it is malformed, unknown or revoked. */
  async authenticate(rawKey: string | undefined): Promise<Principal | null> {
    if (!rawKey || !KEY_SHAPE.test(rawKey)) return null;
    const row = await this.repo.keyInForceByHash(hashApiKey(rawKey), nowIso());
    return row ? principalFrom(row) : null;
  }

  /** Whether the key with this id is still in force (upload tokens die with the key that minted them). */
  async keyPrincipal(keyId: string): Promise<Principal | null> {
    const row = await this.repo.keyInForceById(keyId, nowIso());
    return row ? principalFrom(row) : null;
  }
}

function principalFrom(row: KeyInForce): Principal {
  return {
    workspaceId: row.workspace_id,
    keyId: row.id,
    keyType: row.type,
    allowedOrigins: loadOrigins(row.allowed_origins),
    webhookOrigins: loadOrigins(row.webhook_origins),
    quota: quotaOf(row),
  };
}

export const webhookAad = (workspaceId: string) => `workspace:${workspaceId}:webhook`;
export const deliveryKeyAad = (workspaceId: string) => `workspace:${workspaceId}:delivery-key`;

/** What is shown of a key: never its hash, only its hint (prefix and last four characters). */
function keyInfoOf(row: Omit<ApiKeyRow, 'key_hash'>): KeyInfo {
  return {
    id: row.id,
    workspace_id: row.workspace_id,
    type: row.type,
    hint: row.key_hint,
    created_at: row.created_at,
    revoked_at: row.revoked_at,
  };
}
