// The webhook_deliveries table: one row per message, the record of its status and attempts
// that users, metrics and tests read. Every write of an attempt's outcome is conditional on the
// attempt count, so a stale or repeated job changes nothing.
import { type Kysely, sql } from 'kysely';
import type { Database, WebhookDeliveryRow } from './schema.ts';
import type { Db } from './database.ts';

export interface AttemptOutcome {
  /** The receiver's HTTP status, when it answered. */
  status: number | null;
  /** Why the attempt failed; null when it succeeded. */
  error: string | null;
  /** When the next attempt is due; null when none is left (failed) or none is needed (delivered). */
  nextAttemptAt: string | null;
}

export class WebhookDeliveries {
  constructor(private readonly db: Db) {}

  async insert(
    trx: Kysely<Database>,
    row: { id: string; workspace_id: string; url: string; payload: string; now: string },
  ): Promise<void> {
    await trx
      .insertInto('webhook_deliveries')
      .values({
        id: row.id,
        workspace_id: row.workspace_id,
        url: row.url,
        payload: row.payload,
        status: 'pending',
        attempts: 0,
        next_attempt_at: row.now,
        locked_until: null,
        last_status: null,
        last_error: null,
        created_at: row.now,
        updated_at: row.now,
      })
      .execute();
  }

  /** The delivery when attempt number `attempt` is the one to make now; undefined otherwise (done, or a stale job). */
  async forAttempt(id: string, attempt: number): Promise<WebhookDeliveryRow | undefined> {
    return this.db.kysely
      .selectFrom('webhook_deliveries')
      .selectAll()
      .where('id', '=', id)
      .where('status', '=', 'pending')
      .where('attempts', '=', attempt - 1)
      .executeTakeFirst();
  }

  /** Records attempt `attempt`; false when another run recorded it first. */
  async record(trx: Kysely<Database>, id: string, attempt: number, outcome: AttemptOutcome): Promise<boolean> {
    const status = outcome.error === null ? 'delivered' : outcome.nextAttemptAt ? 'pending' : 'failed';
    const result = await trx
      .updateTable('webhook_deliveries')
      .set({
        status,
        attempts: attempt,
        last_status: outcome.status,
        last_error: outcome.error,
        locked_until: null,
        ...(outcome.nextAttemptAt ? { next_attempt_at: outcome.nextAttemptAt } : {}),
        updated_at: new Date().toISOString(),
      })
      .where('id', '=', id)
      .where('status', '=', 'pending')
      .where('attempts', '=', attempt - 1)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /** Pending deliveries in due order, `limit` at a time after `after` (the last of the previous page). */
  async pending(
    limit: number,
    after?: { next_attempt_at: string; id: string },
  ): Promise<Pick<WebhookDeliveryRow, 'id' | 'attempts' | 'next_attempt_at'>[]> {
    let q = this.db.kysely
      .selectFrom('webhook_deliveries')
      .select(['id', 'attempts', 'next_attempt_at'])
      .where('status', '=', 'pending');
    if (after)
      q = q.where((eb) =>
        eb.or([
          eb('next_attempt_at', '>', after.next_attempt_at),
          eb.and([eb('next_attempt_at', '=', after.next_attempt_at), eb('id', '>', after.id)]),
        ]),
      );
    return q.orderBy('next_attempt_at').orderBy('id').limit(limit).execute();
  }

  /** A workspace's deliveries, newest first, `limit` at a time after `before` (the last of the previous page). */
  async listOf(
    workspaceId: string,
    opts: { status?: WebhookDeliveryRow['status']; limit: number; before?: { created_at: string; id: string } },
  ): Promise<WebhookDeliveryRow[]> {
    let q = this.db.kysely.selectFrom('webhook_deliveries').selectAll().where('workspace_id', '=', workspaceId);
    if (opts.status) q = q.where('status', '=', opts.status);
    const before = opts.before;
    if (before)
      q = q.where((eb) =>
        eb.or([
          eb('created_at', '<', before.created_at),
          eb.and([eb('created_at', '=', before.created_at), eb('id', '<', before.id)]),
        ]),
      );
    return q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(opts.limit).execute();
  }

  async byId(workspaceId: string, id: string): Promise<WebhookDeliveryRow | undefined> {
    return this.db.kysely
      .selectFrom('webhook_deliveries')
      .selectAll()
      .where('workspace_id', '=', workspaceId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  /**
   * Makes the delivery due now again, whatever its status: pending (its next attempt moves to
   * now), delivered or failed (one more attempt, numbered after the last). Returns the number of
   * the attempt to queue, or undefined when there is no such delivery in the workspace.
   */
  async reopen(trx: Kysely<Database>, workspaceId: string, id: string, now: string): Promise<number | undefined> {
    const row = await trx
      .updateTable('webhook_deliveries')
      .set({ status: 'pending', next_attempt_at: now, locked_until: null, updated_at: now })
      .where('workspace_id', '=', workspaceId)
      .where('id', '=', id)
      .returning('attempts')
      .executeTakeFirst();
    return row ? row.attempts + 1 : undefined;
  }

  async counts(): Promise<{ pending: number; failed: number }> {
    const rows = await this.db.kysely
      .selectFrom('webhook_deliveries')
      .select(['status', sql<number>`count(*)`.as('n')])
      .where('status', 'in', ['pending', 'failed'])
      .groupBy('status')
      .execute();
    const of = (s: string) => Number(rows.find((r) => r.status === s)?.n ?? 0);
    return { pending: of('pending'), failed: of('failed') };
  }
}
