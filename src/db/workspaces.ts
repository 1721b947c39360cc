// Workspaces and their API keys in the database: the rows, the settings row that marks the
// first start, and the lookup of keys in force that every authenticated request makes.
import type { CompiledQuery, Insertable, Kysely, Updateable } from 'kysely';
import type { ApiKeyRow, ApiKeyTable, Database, Workspace, WorkspaceTable } from './schema.ts';
import { asPointRead } from './sqlite-readers.ts';
import { prepared } from './pg-prepared.ts';

/** A key in force with what a principal needs: its workspace and that workspace's origins. */
export interface KeyInForce {
  id: string;
  workspace_id: string;
  type: ApiKeyRow['type'];
  allowed_origins: string | null;
  webhook_origins: string | null;
  /** The workspace's limits and counters as read with the key (an upload's first check uses them). */
  quota_bytes: number | string | null;
  max_file_size: number | string | null;
  used_bytes: number | string;
  reserved_bytes: number | string;
}

export type WorkspaceChanges = Omit<Updateable<WorkspaceTable>, 'id' | 'created_at'>;

export class WorkspaceRepository {
  /** The lookup by key hash, compiled once: it is asked on every request, only its parameters change. */
  private byHashQuery?: CompiledQuery<KeyInForce>;

  /** `db` may be a transaction: then every method takes part in it. */
  constructor(private readonly db: Kysely<Database>) {}

  async insert(row: Insertable<WorkspaceTable>): Promise<void> {
    await this.db.insertInto('workspaces').values(row).execute();
  }

  /** Marks the first start; throws a unique violation when another node (or start) already did. */
  async markBootstrapped(at: string): Promise<void> {
    await this.db.insertInto('settings').values({ key: 'bootstrapped_at', value: at }).execute();
  }

  async count(): Promise<number> {
    const row = await this.db
      .selectFrom('workspaces')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  async byId(id: string): Promise<Workspace | undefined> {
    return this.db.selectFrom('workspaces').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /** Every workspace, oldest first. */
  async list(): Promise<{ id: string; name: string; created_at: string }[]> {
    return this.db
      .selectFrom('workspaces')
      .select(['id', 'name', 'created_at'])
      .orderBy('created_at')
      .orderBy('id')
      .execute();
  }

  async update(id: string, changes: WorkspaceChanges): Promise<void> {
    await this.db.updateTable('workspaces').set(changes).where('id', '=', id).execute();
  }

  /** Every workspace's sealed webhook secret (for re-sealing under a new master key). */
  async sealedSecrets(): Promise<{ id: string; webhook_secret: string }[]> {
    return this.db.selectFrom('workspaces').select(['id', 'webhook_secret']).execute();
  }

  /** Replaces the sealed secret only if it is still `old`; returns whether it did. */
  async replaceSecret(id: string, old: string, sealed: string): Promise<boolean> {
    const res = await this.db
      .updateTable('workspaces')
      .set({ webhook_secret: sealed })
      .where('id', '=', id)
      .where('webhook_secret', '=', old)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  }

  /** Whether transformations must be signed, and the sealed delivery key (null until made). */
  async transformPolicy(
    id: string,
  ): Promise<{ signed_transformations: number; delivery_key: string | null } | undefined> {
    return this.db
      .selectFrom('workspaces')
      .select(['signed_transformations', 'delivery_key'])
      .where('id', '=', id)
      .executeTakeFirst();
  }

  /**
   * Stores a sealed delivery key where there is none yet, or only in place of `old` when given
   * (rotation, re-sealing); returns whether it did, so two nodes making the first key at once
   * keep one.
   */
  async setDeliveryKey(id: string, sealed: string, old: string | null): Promise<boolean> {
    const res = await this.db
      .updateTable('workspaces')
      .set({ delivery_key: sealed })
      .where('id', '=', id)
      .where('delivery_key', old === null ? 'is' : '=', old)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  }

  /** Every sealed delivery key (for re-sealing under a new master key). */
  async sealedDeliveryKeys(): Promise<{ id: string; delivery_key: string }[]> {
    const rows = await this.db
      .selectFrom('workspaces')
      .select(['id', 'delivery_key'])
      .where('delivery_key', 'is not', null)
      .execute();
    return rows.map((r) => ({ id: r.id, delivery_key: r.delivery_key as string }));
  }

  /**
   * Holds the workspace's row until the transaction ends (PostgreSQL takes the row lock of an
   * update; SQLite has one writer at a time anyway), so that two writers counting the
   * workspace's presets take turns. False when there is no such workspace.
   */
  async lockWorkspace(workspaceId: string): Promise<boolean> {
    const res = await this.db
      .updateTable('workspaces')
      .set((eb) => ({ updated_at: eb.ref('updated_at') }))
      .where('id', '=', workspaceId)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  }

  /**
   * Revokes a private key unless it is the workspace's last one in force at `now`, under the
   * workspace's lock (call inside a transaction), so two revocations at once cannot together
   * leave none. 'last' when it would; false when there is no such key in force.
   */
  async revokeUnlessLastPrivate(workspaceId: string, id: string, now: string): Promise<boolean | 'last'> {
    const others = await this.db
      .selectFrom('api_keys')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('workspace_id', '=', workspaceId)
      .where('type', '=', 'private')
      .where('id', '<>', id)
      .where((eb) => eb.or([eb('revoked_at', 'is', null), eb('revoked_at', '>', now)]))
      .executeTakeFirstOrThrow();
    if (Number(others.n) === 0) return 'last';
    return this.revokeNow(id, now);
  }

  /** Revokes a key at `now`, also one whose rotation grace has not run out; false when it is not in force. */
  async revokeNow(id: string, now: string): Promise<boolean> {
    const res = await this.db
      .updateTable('api_keys')
      .set({ revoked_at: now })
      .where('id', '=', id)
      .where((eb) => eb.or([eb('revoked_at', 'is', null), eb('revoked_at', '>', now)]))
      .executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  }

  async insertKey(row: Insertable<ApiKeyTable>): Promise<void> {
    await this.db.insertInto('api_keys').values(row).execute();
  }

  async keyById(id: string): Promise<ApiKeyRow | undefined> {
    return this.db.selectFrom('api_keys').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /** A workspace's keys, revoked ones too, oldest first. */
  async keysOf(workspaceId: string): Promise<Omit<ApiKeyRow, 'key_hash'>[]> {
    return this.db
      .selectFrom('api_keys')
      .select(['id', 'workspace_id', 'type', 'key_hint', 'created_at', 'revoked_at'])
      .where('workspace_id', '=', workspaceId)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
  }

  /** Revokes a key not yet revoked (a scheduled revocation stays as it is); returns whether it did. */
  async revokeKey(id: string, at: string): Promise<boolean> {
    const res = await this.db
      .updateTable('api_keys')
      .set({ revoked_at: at })
      .where('id', '=', id)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  }

  /** Sets when a key stops working, whatever was set before (rotation with a grace period). */
  async setKeyRevokedAt(id: string, at: string): Promise<void> {
    await this.db.updateTable('api_keys').set({ revoked_at: at }).where('id', '=', id).execute();
  }

  /** The hint of the newest unrevoked public key, if any. */
  async publicKeyHint(workspaceId: string): Promise<string | undefined> {
    const row = await this.db
      .selectFrom('api_keys')
      .select('key_hint')
      .where('workspace_id', '=', workspaceId)
      .where('type', '=', 'public')
      .where('revoked_at', 'is', null)
      .orderBy('created_at', 'desc')
      .executeTakeFirst();
    return row?.key_hint;
  }

  /** The key with this hash, if it is in force at `now`. */
  async keyInForceByHash(hash: string, now: string): Promise<KeyInForce | undefined> {
    this.byHashQuery ??= prepared(
      asPointRead(this.keysInForce('$now').where('api_keys.key_hash', '=', '$hash').compile()),
    );
    const values: Record<string, unknown> = { $hash: hash, $now: now };
    const parameters = this.byHashQuery.parameters.map((p) => (typeof p === 'string' && p in values ? values[p] : p));
    const { rows } = await this.db.executeQuery<KeyInForce>({ ...this.byHashQuery, parameters });
    return rows[0];
  }

  /** The key with this id, if it is in force at `now`. */
  async keyInForceById(id: string, now: string): Promise<KeyInForce | undefined> {
    return this.keysInForce(now).where('api_keys.id', '=', id).executeTakeFirst();
  }

  /** Keys not revoked at `now` (a revocation may be scheduled: rotation with a grace period). */
  private keysInForce(now: string) {
    return this.db
      .selectFrom('api_keys')
      .innerJoin('workspaces', 'workspaces.id', 'api_keys.workspace_id')
      .select([
        'api_keys.id',
        'api_keys.workspace_id',
        'api_keys.type',
        'workspaces.allowed_origins',
        'workspaces.webhook_origins',
        'workspaces.quota_bytes',
        'workspaces.max_file_size',
        'workspaces.used_bytes',
        'workspaces.reserved_bytes',
      ])
      .where((eb) => eb.or([eb('api_keys.revoked_at', 'is', null), eb('api_keys.revoked_at', '>', now)]));
  }
}
