// Prometheus metrics. One registry per service container (tests build several in a process).
// Counters are fed by events; gauges that live in the database are read at scrape time.
import type { DomainEvents } from '../events.ts';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Db } from '../db/database.ts';
import { UploadSessionRepository } from '../db/upload-sessions.ts';
import { WebhookDeliveries } from '../db/webhooks.ts';

export class Metrics {
  readonly registry = new Registry();
  readonly requests: Counter<'method' | 'route' | 'status'>;
  readonly duration: Histogram<'method' | 'route' | 'status'>;

  constructor(db: Db, events: DomainEvents) {
    collectDefaultMetrics({ register: this.registry, prefix: 'stowage_' });
    const sessions = new UploadSessionRepository(db.kysely);
    const deliveries = new WebhookDeliveries(db);
    const registers = [this.registry];
    this.requests = new Counter({
      name: 'stowage_http_requests_total',
      help: 'HTTP requests by route and status',
      labelNames: ['method', 'route', 'status'],
      registers,
    });
    this.duration = new Histogram({
      name: 'stowage_http_request_duration_seconds',
      help: 'HTTP request latency by route and status',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
    const uploaded = new Counter({
      name: 'stowage_uploaded_bytes_total',
      help: 'Bytes of finished uploads, by how they came in',
      labelNames: ['source'],
      registers,
    });
    const uploads = new Counter({
      name: 'stowage_uploads_total',
      help: 'Finished uploads, by how they came in',
      labelNames: ['source'],
      registers,
    });
    const renditions = new Counter({
      name: 'stowage_rendition_cache_total',
      help: 'Rendition requests answered from the cache (hit) or made (miss)',
      labelNames: ['result'],
      registers,
    });
    events.on('upload.completed', (e) => {
      uploaded.inc({ source: e.source }, e.size);
      uploads.inc({ source: e.source });
    });
    events.on('rendition', (hit: boolean) => renditions.inc({ result: hit ? 'hit' : 'miss' }));
    new Gauge({
      name: 'stowage_multipart_sessions_active',
      help: 'Multipart sessions open for parts',
      registers,
      async collect() {
        this.set(await sessions.activeSessionCount());
      },
    });
    new Gauge({
      name: 'stowage_webhook_deliveries',
      help: 'Webhook deliveries by state: pending is the queue depth, failed gave up after every retry',
      labelNames: ['status'],
      registers,
      async collect() {
        const counts = await deliveries.counts();
        for (const status of ['pending', 'failed'] as const) this.set({ status }, counts[status]);
      },
    });
  }
}
