// Webhooks (docs/api/webhooks.md): the rules. A delivery is a row written in the same
// transaction as the file record, with its first attempt queued as a job in that transaction,
// so an upload that succeeded always has its notification on the way and a restart loses
// nothing. Each attempt is one job: it signs the message the Standard Webhooks way, sends it,
// records the outcome and, on failure, queues the next attempt after the retry schedule's wait.
// The message id stays the same on every attempt (at-least-once). The SQL is in db/webhooks.ts.
import { createHmac } from 'node:crypto';
import type { WebhookDelivery, WebhookDeliveryPage, WebhookDeliveryQuery } from '../contract/webhooks.ts';
import type { Kysely } from 'kysely';
import { randomBase62 } from '../crypto/ids.ts';
import { type Db, inTransaction, nowIso } from '../db/database.ts';
import type { Database, WebhookDeliveryRow } from '../db/schema.ts';
import { type AttemptOutcome, WebhookDeliveries } from '../db/webhooks.ts';
import type { JobQueue } from '../jobs/index.ts';
import type { JobLogger } from '../jobs/types.ts';
import { errors } from '../errors.ts';
import type { OutboundGuard } from '../outbound/guard.ts';
import { outboundRequest } from '../outbound/http-client.ts';
import type { FileRecord } from './files.ts';
import type { WorkspaceService } from './workspaces.ts';

/** Seconds to wait before attempts 2, 3, …: the Standard Webhooks reference schedule, ~27.5 h in all. */
export const DEFAULT_RETRY_SCHEDULE = [5, 300, 1800, 7200, 18000, 36000, 36000];

export interface WebhookSettings {
  retrySchedule: number[];
  timeoutMs: number;
  /** Whether this node sends deliveries (STOWAGE_WEBHOOK_POLL_MS > 0). */
  deliver: boolean;
  /** An attempt still running after this long is taken for lost (its node died) and queued again. */
  claimMs: number;
}

/** The Standard Webhooks signature: v1,base64(HMAC-SHA256(secret, `${id}.${timestamp}.${body}`)). */
export function signWebhook(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.startsWith('whsec_') ? secret.slice(6) : secret, 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

/** One waiting attempt per delivery. */
const jobKey = (id: string) => `webhook:${id}`;

const silent: JobLogger = { debug() {}, info() {}, warn() {}, error() {} };

export class WebhookService {
  private readonly deliveries: WebhookDeliveries;

  constructor(
    private readonly db: Db,
    private readonly workspaces: WorkspaceService,
    private readonly guard: OutboundGuard,
    private readonly jobs: JobQueue,
    private readonly settings: WebhookSettings,
    private readonly log: JobLogger = silent,
  ) {
    this.deliveries = new WebhookDeliveries(db);
    jobs.define('webhook.deliver', (p) => this.attempt(p.id, p.attempt), { enabled: settings.deliver });
    // At start (the in-process queue starts empty) and then now and then (a node that died mid-attempt).
    jobs.every('webhook.requeue', settings.deliver ? settings.claimMs : 0, () => this.requeue().then(() => {}), {
      atStart: true,
    });
  }

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
    await this.deliveries.insert(trx, { id, workspace_id: record.workspace_id, url, payload, now });
    await this.jobs.add('webhook.deliver', { id, attempt: 1 }, { trx, jobKey: jobKey(id) });
    return id;
  }

  /** Makes the attempts due now on this node (whether or not its job runner was started); returns how many ran. */
  async runOnce(limit = 20): Promise<number> {
    await this.requeue();
    return this.jobs.runDue('webhook.deliver', limit);
  }

  /** Queues again the pending deliveries that have no job (lost in a restart or with a dead node); returns how many. */
  async requeue(): Promise<number> {
    const PAGE = 500;
    let queued = 0;
    let after: { next_attempt_at: string; id: string } | undefined;
    for (;;) {
      const page = await this.deliveries.pending(PAGE, after);
      const lost = await this.jobs.missing(
        page.map((d) => jobKey(d.id)),
        this.settings.claimMs,
      );
      for (const d of page) {
        if (!lost.has(jobKey(d.id))) continue;
        const runAt = new Date(d.next_attempt_at);
        await this.jobs.add('webhook.deliver', { id: d.id, attempt: d.attempts + 1 }, { jobKey: jobKey(d.id), runAt });
        queued++;
      }
      if (page.length < PAGE) break;
      after = page[page.length - 1];
    }
    if (queued > 0) this.log.info({ queued }, 'webhook deliveries queued again');
    return queued;
  }

  /** Attempt number `attempt` of a delivery; nothing when that attempt is no longer the one to make. */
  private async attempt(id: string, attempt: number): Promise<void> {
    const d = await this.deliveries.forAttempt(id, attempt);
    if (!d) return;
    const { status, error } = await this.send(d);
    const wait = error === null ? undefined : this.settings.retrySchedule[attempt - 1];
    const next = wait === undefined ? null : new Date(Date.now() + wait * 1000 * (0.9 + Math.random() * 0.2));
    const outcome: AttemptOutcome = { status, error, nextAttemptAt: next?.toISOString() ?? null };
    // The outcome and the next attempt's job are written together.
    await inTransaction(this.db.kysely, async (trx) => {
      if ((await this.deliveries.record(trx, id, attempt, outcome)) && next)
        await this.jobs.add('webhook.deliver', { id, attempt: attempt + 1 }, { trx, jobKey: jobKey(id), runAt: next });
    });
    if (error !== null)
      this.log.warn({ id, attempts: attempt, error, retry: outcome.nextAttemptAt }, 'webhook attempt failed');
  }

  private async send(d: WebhookDeliveryRow): Promise<{ status: number | null; error: string | null }> {
    const timestamp = Math.floor(Date.now() / 1000);
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
      return { status: res.status, error: res.status < 200 || res.status > 299 ? `HTTP ${res.status}` : null };
    } catch (err) {
      const error =
        (err as NodeJS.ErrnoException).code === 'EOUTBOUNDBLOCKED'
          ? `address refused: ${(err as Error).message}`
          : (err as Error).message.slice(0, 300);
      return { status: null, error };
    }
  }

  /** A workspace's deliveries, newest first, a page at a time (GET /api/v1/webhooks/deliveries). */
  async list(workspaceId: string, query: WebhookDeliveryQuery): Promise<WebhookDeliveryPage> {
    const rows = await this.deliveries.listOf(workspaceId, {
      status: query.status,
      limit: query.limit + 1,
      before: query.cursor === undefined ? undefined : readCursor(query.cursor),
    });
    const page = rows.slice(0, query.limit);
    const last = page[page.length - 1];
    return {
      deliveries: page.map(deliveryView),
      next_cursor: rows.length > query.limit && last ? writeCursor(last) : null,
    };
  }

  /**
   * Sends a delivery again now, whatever its status: a pending one's next attempt moves to now; a
   * delivered or failed one gets one more attempt with the same webhook-id (receivers that
   * dedupe by it see a repeat), and the retry schedule goes on from where it was.
   */
  async redeliver(workspaceId: string, id: string): Promise<WebhookDelivery> {
    await inTransaction(this.db.kysely, async (trx) => {
      const attempt = await this.deliveries.reopen(trx, workspaceId, id, nowIso());
      if (attempt === undefined) throw errors.deliveryNotFound(id);
      await this.jobs.add('webhook.deliver', { id, attempt }, { trx, jobKey: jobKey(id) });
    });
    const row = await this.deliveries.byId(workspaceId, id);
    if (!row) throw errors.deliveryNotFound(id);
    return deliveryView(row);
  }

  /** Queue depth and failures, for readiness and metrics. */
  async counts(): Promise<{ pending: number; failed: number }> {
    return this.deliveries.counts();
  }
}

/** What the API shows of a delivery: its event and file from the payload, never the payload itself. */
function deliveryView(row: WebhookDeliveryRow): WebhookDelivery {
  let event = 'unknown';
  let fileNo: string | null = null;
  try {
    const body = JSON.parse(row.payload) as { type?: unknown; data?: { file_no?: unknown } };
    if (typeof body.type === 'string') event = body.type;
    if (typeof body.data?.file_no === 'string') fileNo = body.data.file_no;
  } catch {
    // Payloads are written by enqueueUpload as JSON; an unreadable one still lists.
  }
  return {
    id: row.id,
    event,
    file_no: fileNo,
    url: row.url,
    status: row.status,
    attempts: row.attempts,
    last_status: row.last_status,
    last_error: row.last_error,
    next_attempt_at: row.status === 'pending' ? row.next_attempt_at : null,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

/** Page cursors: the last row's creation time and id, base64url; anything else is a 400. */
function writeCursor(row: { created_at: string; id: string }): string {
  return Buffer.from(JSON.stringify([row.created_at, row.id])).toString('base64url');
}

function readCursor(cursor: string): { created_at: string; id: string } {
  try {
    const v: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (Array.isArray(v) && v.length === 2 && typeof v[0] === 'string' && typeof v[1] === 'string')
      return { created_at: v[0], id: v[1] };
  } catch {
    // fall through
  }
  throw errors.validation('cursor: not a next_cursor this endpoint gave');
}
