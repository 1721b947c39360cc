// Read-only questions about work under way, asked by admission control and metrics: open
// multipart sessions and queued webhook deliveries. The rows themselves are written by the
// repositories of their own aggregates.
import type { Kysely } from 'kysely';
import type { Database } from './schema.ts';

export class InFlightWork {
  constructor(private readonly db: Kysely<Database>) {}

  /** The workspace of a multipart session still open for parts; undefined for any other id. */
  async activeSessionWorkspace(sessionId: string): Promise<string | undefined> {
    const row = await this.db
      .selectFrom('multipart_sessions')
      .select('workspace_id')
      .where('id', '=', sessionId)
      .where('status', '=', 'active')
      .executeTakeFirst();
    return row?.workspace_id;
  }

  /** How many multipart sessions are open for parts. */
  async activeSessionCount(): Promise<number> {
    const row = await this.db
      .selectFrom('multipart_sessions')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('status', '=', 'active')
      .executeTakeFirst();
    return Number(row?.n ?? 0);
  }

  /** Webhook deliveries still to send (pending) and given up on (failed). */
  async webhookDeliveryCounts(): Promise<{ pending: number; failed: number }> {
    const rows = await this.db
      .selectFrom('webhook_deliveries')
      .select(['status', (eb) => eb.fn.countAll<number>().as('n')])
      .where('status', 'in', ['pending', 'failed'])
      .groupBy('status')
      .execute();
    const count = (status: string) => Number(rows.find((r) => r.status === status)?.n ?? 0);
    return { pending: count('pending'), failed: count('failed') };
  }
}
