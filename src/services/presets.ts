// Transformation presets: a workspace's named transformations (docs/api/presets.md). Written
// through the API with the private key, checked by the transformation parser when written (a
// broken preset is a 400 then, never at delivery), and expanded by delivery from a short-lived
// per-node copy of the workspace's presets.
import type { Preset } from '../contract/presets.ts';
import { type Db, inTransaction, nowIso } from '../db/database.ts';
import { PresetRepository } from '../db/presets.ts';
import type { PresetRow } from '../db/schema.ts';
import { WorkspaceRepository } from '../db/workspaces.ts';
import { AppError, appError, errors } from '../errors.ts';
import type { DomainEvents } from '../events.ts';
import { expandPresets, isPresetToken, normalizePresetText, PRESET_NAME } from '../media/presets.ts';
import { checkAnyGrammar } from '../media/grammars.ts';
/** How long a node uses its copy of a workspace's presets: another node's change shows within it. */
export const PRESET_TTL_MS = 5000;
/** Presets a workspace may have. */
export const MAX_PRESETS = 100;
/** Workspaces whose presets a node keeps, bounded against URLs that name random workspace ids. */
const CACHED_WORKSPACES = 10_000;

export interface PresetServiceOptions {
  events?: DomainEvents;
  ttlMs?: number;
  maxPresets?: number;
}

function shown(row: PresetRow): Preset {
  return {
    name: row.name,
    transformation: row.transformation,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

function notFound(name: string): AppError {
  return appError('PRESET_NOT_FOUND', `No preset named ${name} in this workspace`);
}

/**
 * The text as it will be stored, or a 400 saying what is wrong: the parser's word on each
 * token, under the field's name. A preset may be for images, videos or posters: any grammar that
 * reads it will do (media/grammars.ts).
 */
function checked(text: string): string {
  const normal = normalizePresetText(text);
  try {
    checkAnyGrammar(normal);
  } catch (err) {
    if (
      err instanceof AppError &&
      (err.errorCode === 'VALIDATION_FAILED' || err.errorCode === 'TRANSFORM_NOT_APPLICABLE')
    )
      throw errors.validation(`transformation: ${err.message.replace(/^(video )?transform:?\s*/, '')}`);
    throw err;
  }
  return normal;
}

export class PresetService {
  private readonly repo: PresetRepository;
  private readonly events?: DomainEvents;
  private readonly ttlMs: number;
  readonly maxPresets: number;
  /** Each workspace's presets (name → text), read at most once per TTL per node; oldest first. */
  private readonly cache = new Map<string, { at: number; texts: Promise<Map<string, string>> }>();
  /** Reads of the database for delivery (tests check the cache with it). */
  readonly stats = { loads: 0 };

  constructor(
    private readonly db: Db,
    opts: PresetServiceOptions = {},
  ) {
    this.repo = new PresetRepository(db.kysely);
    this.events = opts.events;
    this.ttlMs = opts.ttlMs ?? PRESET_TTL_MS;
    this.maxPresets = opts.maxPresets ?? MAX_PRESETS;
  }

  async list(workspaceId: string): Promise<Preset[]> {
    return (await this.repo.list(workspaceId)).map(shown);
  }

  async get(workspaceId: string, name: string): Promise<Preset> {
    const row = PRESET_NAME.test(name) ? await this.repo.byName(workspaceId, name) : undefined;
    if (!row) throw notFound(name);
    return shown(row);
  }

  /**
   * Creates the preset, or replaces its text (PUT semantics: the same request twice leaves the
   * same state). `created` says which. 409 PRESET_LIMIT_REACHED when a new one would pass the cap.
   */
  async put(workspaceId: string, name: string, text: string): Promise<{ preset: Preset; created: boolean }> {
    if (!PRESET_NAME.test(name))
      throw errors.validation(
        'name: lower-case letters, digits, "_" and "-", starting with a letter or digit; at most 64',
      );
    const transformation = checked(text);
    const created = await inTransaction(this.db.kysely, async (trx) => {
      const repo = new PresetRepository(trx);
      const now = nowIso();
      if (await repo.update(workspaceId, name, transformation, now)) return false;
      // A new preset: the count and the insert under the workspace's lock, so that parallel
      // creates cannot together pass the cap.
      if (!(await new WorkspaceRepository(trx).lockWorkspace(workspaceId))) throw errors.workspaceNotFound(workspaceId);
      if (await repo.update(workspaceId, name, transformation, now)) return false;
      if ((await repo.count(workspaceId)) >= this.maxPresets)
        throw appError(
          'PRESET_LIMIT_REACHED',
          `This workspace already has ${this.maxPresets} presets; delete one before adding another`,
        );
      const row = { workspace_id: workspaceId, name, transformation, created_at: now, updated_at: now };
      if (!(await repo.insert(row))) throw appError('PRESET_LIMIT_REACHED');
      return true;
    });
    this.changed(workspaceId);
    return { preset: await this.get(workspaceId, name), created };
  }

  async delete(workspaceId: string, name: string): Promise<void> {
    const gone = PRESET_NAME.test(name) && (await this.repo.delete(workspaceId, name));
    if (!gone) throw notFound(name);
    this.changed(workspaceId);
  }

  /**
   * `tokens` with its `t_{name}` references replaced by the workspace's presets
   * (media/presets.ts: expandPresets); unchanged, and no read, when it names none.
   */
  async expand(workspaceId: string, tokens: string): Promise<string> {
    if (!tokens.split(',').some(isPresetToken)) return tokens;
    const texts = await this.texts(workspaceId);
    return expandPresets(tokens, (name) => texts.get(name));
  }

  /** This node forgets its copy at once; delivery's remembered lookups go with it (the event). */
  private changed(workspaceId: string): void {
    this.cache.delete(workspaceId);
    this.events?.emit('presets.changed', { workspaceId });
  }

  private texts(workspaceId: string): Promise<Map<string, string>> {
    const now = Date.now();
    const hit = this.cache.get(workspaceId);
    if (hit && now - hit.at < this.ttlMs) return hit.texts;
    this.stats.loads++;
    const texts = this.repo.texts(workspaceId);
    // Insertion order is age: the oldest entry goes first when the map is full.
    this.cache.delete(workspaceId);
    if (this.cache.size >= CACHED_WORKSPACES) {
      const oldest = this.cache.keys().next().value;
      if (oldest !== undefined) this.cache.delete(oldest);
    }
    const entry = { at: now, texts };
    this.cache.set(workspaceId, entry);
    // A failed read (database outage) is not kept: the next request asks again.
    texts.catch(() => {
      if (this.cache.get(workspaceId) === entry) this.cache.delete(workspaceId);
    });
    return texts;
  }
}
