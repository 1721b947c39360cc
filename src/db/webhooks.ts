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
