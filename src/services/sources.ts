// Sources: named external origins of a workspace. The configuration is stored in two parts:
// the visible fields as JSON, the secret fields sealed with the master key.
import type { Source, SourceCreateBody, SourceListQuery, SourceUpdateBody } from '../contract/sources.ts';
import { isUuid, newUuid } from '../crypto/ids.ts';
import type { SecretBox } from '../crypto/secret-box.ts';
import { type Db, inTransaction, nowIso } from '../db/database.ts';
import type { SourceRow } from '../db/schema.ts';
import { SourceRepository } from '../db/sources.ts';
import { AppError, appError, errors } from '../errors.ts';
import { type ProbeDeps, type ProbeResult, probeSource } from '../sources/probe.ts';
import {
  type Configuration,
  isSourceType,
  maskConfiguration,
  mergeConfiguration,
  SOURCE_TYPES,
  type SourceType,
  splitSecrets,
  validateConfiguration,
} from '../sources/source-types.ts';

/** Delivery's 404 for an unknown source: written out, as its `error` is "Not found" where the catalogue's is "Source not found". */
const noSourceNamed = () =>
  new AppError(404, 'SOURCE_NOT_FOUND', 'Not found', 'No source with this name in this workspace');

export const SOURCE_NAME_RE = /^[A-Za-z0-9_-]{1,64}$/;

export interface SourceServiceDeps {
  db: Db;
  box: SecretBox;
  /** How origins are reached: the outbound guard and time limits. */
  probeDeps: ProbeDeps;
  /** Receives why a configuration was refused (a field name, never a value). */
  debug?: (why: string) => void;
}

export class SourceService {
  private readonly repo: SourceRepository;
  private readonly db: Db;
  private readonly box: SecretBox;
  private readonly probeDeps: ProbeDeps;
  private readonly debug: (why: string) => void;

  constructor(deps: SourceServiceDeps) {
    this.repo = new SourceRepository(deps.db.kysely);
    this.db = deps.db;
    this.box = deps.box;
    this.probeDeps = deps.probeDeps;
    this.debug = deps.debug ?? (() => {});
  }

  async create(workspaceId: string, input: SourceCreateBody): Promise<Source> {
    const name = checkName(input.name);
    if (!isSourceType(input.type)) {
      this.debug(`type must be one of ${SOURCE_TYPES.join(', ')}`);
      throw errors.invalidConfiguration();
    }
    const type = input.type;
    const config = validateConfiguration(type, input.configuration, this.debug);
    const id = newUuid();
    const now = nowIso();
    const { visible, secret } = splitSecrets(type, config);
    const row: SourceRow = {
      id,
      workspace_id: workspaceId,
      name,
      type,
      configuration: visibleJson(visible, secret),
      secrets: this.sealSecrets(id, secret),
      is_active: 1,
      created_at: now,
      updated_at: now,
    };
    if (!(await this.repo.insert(row))) throw errors.sourceNameTaken();
    return this.view(row);
  }

  async list(
    workspaceId: string,
    q: SourceListQuery,
  ): Promise<{ sources: Source[]; meta: { page: number; limit: number; total: number; hasMore: boolean } }> {
    const { rows, total: count } = await this.repo.list(workspaceId, {
      type: q.type,
      nameContains: q.search,
      page: q.page,
      limit: q.limit,
    });
    return {
      sources: rows.map((r) => this.view(r)),
      meta: { page: q.page, limit: q.limit, total: count, hasMore: q.page * q.limit < count },
    };
  }

  async get(workspaceId: string, id: string): Promise<Source> {
    return this.view(await this.row(workspaceId, id));
  }

  async update(
    workspaceId: string,
    id: string,
    // `type` is not in the contract's body, yet read: sent anyway, it is refused unless unchanged.
    input: SourceUpdateBody & { type?: unknown },
  ): Promise<Source> {
    if (!isUuid(id)) throw errors.sourceNotFound();
    // Read, merged and written in one transaction, the row locked on PostgreSQL: two PATCHes at
    // once (a key rotation and a region change) each keep the other's change.
    const updated = await inTransaction(this.db.kysely, async (trx) => {
      const repo = new SourceRepository(trx);
      const row = await repo.byId(workspaceId, id.toLowerCase(), true);
      if (!row) throw errors.sourceNotFound();
      const type = row.type as SourceType;
      if (input.type !== undefined && input.type !== type)
        throw errors.validation('type cannot be changed; create a new source instead');
      const changes: Partial<SourceRow> = {};
      if (input.name !== undefined) changes.name = checkName(input.name);
      if (input.is_active !== undefined) {
        if (typeof input.is_active !== 'boolean') throw errors.validation('is_active must be a boolean');
        changes.is_active = input.is_active ? 1 : 0;
      }
      if (input.configuration !== undefined) {
        const merged = mergeConfiguration(this.configuration(row), input.configuration);
        const config = validateConfiguration(type, merged, this.debug);
        const { visible, secret } = splitSecrets(type, config);
        changes.configuration = visibleJson(visible, secret);
        changes.secrets = this.sealSecrets(row.id, secret);
      }
      // updated_at always moves forward, even within the same millisecond as the last write.
      changes.updated_at = new Date(Math.max(Date.now(), Date.parse(row.updated_at) + 1)).toISOString();
      if (!(await repo.update(workspaceId, row.id, changes))) throw errors.sourceNameTaken();
      return { ...row, ...changes };
    });
    return this.view(updated);
  }

  async delete(workspaceId: string, id: string): Promise<void> {
    if (!isUuid(id)) throw errors.sourceNotFound();
    if (!(await this.repo.delete(workspaceId, id.toLowerCase()))) throw errors.sourceNotFound();
  }

  async test(workspaceId: string, id: string): Promise<ProbeResult> {
    const row = await this.row(workspaceId, id);
    return probeSource(row.type as SourceType, this.configuration(row), this.probeDeps);
  }

  /** The full configuration, secrets included; for origin fetches and probes, never for responses. */
  configuration(row: SourceRow): Configuration {
    const { [SECRET_NAMES]: _names, ...visible } = JSON.parse(row.configuration) as Configuration & {
      [SECRET_NAMES]?: string[];
    };
    const secret = row.secrets ? (JSON.parse(this.box.open(row.secrets, sourceAad(row.id))) as Configuration) : {};
    return { ...visible, ...secret };
  }

  /** The source a delivery URL names: 404 unknown, 410 inactive. */
  async forDelivery(
    workspaceId: string,
    name: string,
  ): Promise<{ id: string; type: SourceType; config: Configuration }> {
    if (!SOURCE_NAME_RE.test(name)) throw noSourceNamed();
    const row = await this.repo.byName(workspaceId, name);
    if (!row) throw noSourceNamed();
    if (!row.is_active) throw appError('SOURCE_INACTIVE');
    return { id: row.id, type: row.type as SourceType, config: this.configuration(row) };
  }

  /** How origins are reached (the guard and time limits of source tests). */
  get originDeps(): ProbeDeps {
    return this.probeDeps;
  }

  /** Re-seals every source secret under the current master key; returns how many changed. */
  async resealAll(): Promise<number> {
    const rows = await this.repo.sealedSecrets();
    let changed = 0;
    for (const row of rows) {
      if (!row.secrets || !this.box.isStale(row.secrets)) continue;
      const resealed = this.box.seal(this.box.open(row.secrets, sourceAad(row.id)), sourceAad(row.id));
      // Counted even when another node re-sealed it first: it was stale when read.
      await this.repo.replaceSecrets(row.id, row.secrets, resealed);
      changed++;
    }
    return changed;
  }

  private async row(workspaceId: string, id: string): Promise<SourceRow> {
    if (!isUuid(id)) throw errors.sourceNotFound();
    const row = await this.repo.byId(workspaceId, id.toLowerCase());
    if (!row) throw errors.sourceNotFound();
    return row;
  }

  private sealSecrets(id: string, secret: Configuration): string | null {
    return Object.keys(secret).length > 0 ? this.box.seal(JSON.stringify(secret), sourceAad(id)) : null;
  }

  private view(row: SourceRow): Source {
    const type = row.type as SourceType;
    const { [SECRET_NAMES]: names, ...visible } = JSON.parse(row.configuration) as Configuration & {
      [SECRET_NAMES]?: string[];
    };
    // The names of the stored secrets are kept beside the visible fields, so masking needs no
    // decryption; rows written before that are opened instead.
    const secretKeys =
      names ?? (row.secrets ? Object.keys(JSON.parse(this.box.open(row.secrets, sourceAad(row.id)))) : []);
    return {
      id: row.id,
      name: row.name,
      type,
      configuration: maskConfiguration(type, visible, secretKeys),
      is_active: Boolean(row.is_active),
      created_at: row.created_at,
      updated_at: row.updated_at,
    };
  }
}

function checkName(name: unknown): string {
  if (typeof name !== 'string' || !SOURCE_NAME_RE.test(name)) {
    throw errors.validation('name must be 1 to 64 letters, digits, underscores or hyphens');
  }
  return name;
}

export const sourceAad = (id: string) => `source:${id}`;

/** Key, in the visible configuration JSON, of the names (never the values) of stored secrets. */
const SECRET_NAMES = '$secret_fields';

function visibleJson(visible: Configuration, secret: Configuration): string {
  return JSON.stringify({ ...visible, [SECRET_NAMES]: Object.keys(secret) });
}
