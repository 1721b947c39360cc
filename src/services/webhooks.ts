// Webhooks (docs/api/webhooks.md): an outbox in the database, written in the same
// transaction as the file record, so an upload that succeeded always has its notification
// queued and a restart loses nothing. Workers on any number of nodes claim due deliveries
// (SKIP LOCKED on PostgreSQL), sign them the Standard Webhooks way and retry with exponential
// backoff; the message id stays the same on every attempt (at-least-once).
import { createHmac } from 'node:crypto';
import { type Kysely, sql } from 'kysely';
import { randomBase62 } from '../crypto/ids.ts';
import { type Db, nowIso } from '../db/database.ts';
import type { Database, WebhookDeliveryRow } from '../db/schema.ts';
import type { OutboundGuard } from '../outbound/guard.ts';
import { outboundRequest } from '../outbound/http-client.ts';
import type { FileRecord } from './files.ts';
import type { WorkspaceService } from './workspaces.ts';

/** Seconds to wait before attempts 2, 3, …: the Standard Webhooks reference schedule, ~27.5 h in all. */
export const DEFAULT_RETRY_SCHEDULE = [5, 300, 1800, 7200, 18000, 36000, 36000];

export interface WebhookSettings {
  retrySchedule: number[];
  timeoutMs: number;
  pollIntervalMs: number;
  /** How long a claimed delivery stays with its node before another may take it. */
  claimMs: number;
}

/** The Standard Webhooks signature: v1,base64(HMAC-SHA256(secret, `${id}.${timestamp}.${body}`)). */
export function signWebhook(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.startsWith('whsec_') ? secret.slice(6) : secret, 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

export class WebhookService {
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;

  constructor(
    private readonly db: Db,
    private readonly workspaces: WorkspaceService,
    private readonly guard: OutboundGuard,
    private readonly settings: WebhookSettings,
    private readonly log: (msg: string, data?: Record<string, unknown>) => void = () => {},
  ) {}

  /** Queues `upload.completed` in the caller's transaction. */
  async enqueueUpload(trx: Kysely<Database>, url: string, record: FileRecord): Promise<string> {
    const id = `msg_${randomBase62(27)}`;
    const now = nowIso();
    const payload = JSON.stringify({
      id,
      type: 'upload.completed',
      created_at: now,
      workspace_id: record.workspace_id,
      data: record,
    });
    await trx
      .insertInto('webhook_deliveries')
      .values({
        id,
        workspace_id: record.workspace_id,
        url,
        payload,
        status: 'pending',
        attempts: 0,
        next_attempt_at: now,
        locked_until: null,
        last_status: null,
        last_error: null,
        created_at: now,
        updated_at: now,
      })
      .execute();
    return id;
  }

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      if (this.running) return;
      this.running = this.runOnce()
        .then(
          () => undefined,
          (err) => this.log('webhook worker failed', { err: String(err) }),
        )
        .finally(() => (this.running = undefined));
    }, this.settings.pollIntervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }

  /** Claims what is due (on every node at once without overlap) and delivers it. */
  async runOnce(limit = 20): Promise<number> {
    const claimed = await this.claim(limit);
    await Promise.all(claimed.map((d) => this.deliver(d)));
    return claimed.length;
  }

  private async claim(limit: number): Promise<WebhookDeliveryRow[]> {
    const now = nowIso();
    const until = new Date(Date.now() + this.settings.claimMs).toISOString();
    const due = (db: Kysely<Database>) =>
      db
        .selectFrom('webhook_deliveries')
        .select('id')
        .where('status', '=', 'pending')
        .where('next_attempt_at', '<=', now)
        .where((eb) => eb.or([eb('locked_until', 'is', null), eb('locked_until', '<', now)]))
        .orderBy('next_attempt_at')
        .limit(limit);
    if (this.db.dialect === 'postgres') {
      return this.db.kysely.transaction().execute(async (trx) => {
        const ids = (await due(trx).forUpdate().skipLocked().execute()).map((r) => r.id);
        if (ids.length === 0) return [];
        return trx
          .updateTable('webhook_deliveries')
          .set({ locked_until: until })
          .where('id', 'in', ids)
          .returningAll()
          .execute();
      });
    }
    // SQLite: one writer at a time, so the update is the claim.
    return this.db.kysely
      .updateTable('webhook_deliveries')
      .set({ locked_until: until })
      .where('id', 'in', due(this.db.kysely))
      .returningAll()
      .execute();
  }

  private async deliver(d: WebhookDeliveryRow): Promise<void> {
    const timestamp = Math.floor(Date.now() / 1000);
    let status: number | null = null;
    let error: string | null = null;
    try {
      const secret = await this.workspaces.webhookSecret(d.workspace_id);
      const res = await outboundRequest(this.guard, d.url, {
        method: 'POST',
        body: d.payload,
        timeoutMs: this.settings.timeoutMs,
        maxRedirects: 0,
        headers: {
          'content-type': 'application/json',
          'webhook-id': d.id,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': signWebhook(secret, d.id, timestamp, d.payload),
        },
      });
      res.body.resume();
      status = res.status;
      if (status < 200 || status > 299) error = `HTTP ${status}`;
    } catch (err) {
      error =
        (err as NodeJS.ErrnoException).code === 'EOUTBOUNDBLOCKED'
          ? `address refused: ${(err as Error).message}`
          : (err as Error).message.slice(0, 300);
    }
    const attempts = d.attempts + 1;
    const now = nowIso();
    if (!error) {
      await this.db.kysely
        .updateTable('webhook_deliveries')
        .set({
          status: 'delivered',
          attempts,
          last_status: status,
          last_error: null,
          locked_until: null,
          updated_at: now,
        })
        .where('id', '=', d.id)
        .execute();
      return;
    }
    const wait = this.settings.retrySchedule[attempts - 1];
    const next =
      wait === undefined ? null : new Date(Date.now() + wait * 1000 * (0.9 + Math.random() * 0.2)).toISOString();
    await this.db.kysely
      .updateTable('webhook_deliveries')
      .set({
        status: next ? 'pending' : 'failed',
        attempts,
        last_status: status,
        last_error: error,
        locked_until: null,
        next_attempt_at: next ?? d.next_attempt_at,
        updated_at: now,
      })
      .where('id', '=', d.id)
      .execute();
    this.log('webhook attempt failed', { id: d.id, attempts, error, retry: next });
  }

  /** Queue depth and failures, for readiness and metrics. */
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
