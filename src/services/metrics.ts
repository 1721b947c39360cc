// Prometheus metrics. One registry per service container (tests build several in a process).
// Counters are fed by events; gauges that live in the database are read at scrape time.
import type { DomainEvents } from '../events.ts';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Db } from '../db/database.ts';
import { UploadSessionRepository } from '../db/upload-sessions.ts';
import { WebhookDeliveries } from '../db/webhooks.ts';
import { RenditionRepository } from '../db/renditions.ts';
import type { RenderQueue } from '../media/render-queue.ts';

export class Metrics {
  readonly registry = new Registry();
  readonly requests: Counter<'method' | 'route' | 'status'>;
  readonly duration: Histogram<'method' | 'route' | 'status'>;

  /** `loopResolutionMs`: how often the event-loop delay is sampled (prom-client's default, 10 ms). */
  constructor(db: Db, events: DomainEvents, renders?: RenderQueue, loopResolutionMs = 10) {
    collectDefaultMetrics({
      register: this.registry,
      prefix: 'stowage_',
      eventLoopMonitoringPrecision: loopResolutionMs,
    });
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
    if (renders) this.watchRenders(renders, registers);
    const renditionLedger = new RenditionRepository(db.kysely);
    new Gauge({
      name: 'stowage_rendition_cache_bytes',
      help: 'Bytes of renditions in storage, counted against STOWAGE_RENDITION_CACHE_BYTES (all nodes)',
      registers,
      async collect() {
        this.set((await renditionLedger.total()).bytes);
      },
    });
    const evictions = new Counter({
      name: 'stowage_rendition_evictions_total',
      help: 'Renditions deleted by the rendition cache eviction on this node',
      registers,
    });
    const evictedBytes = new Counter({
      name: 'stowage_rendition_evicted_bytes_total',
      help: 'Bytes of renditions deleted by the rendition cache eviction on this node',
      registers,
    });
    events.on('renditions.evicted', (count, bytes) => {
      evictions.inc(count);
      evictedBytes.inc(bytes);
    });
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

  /** The render queue: its depth and running renders, how long renders take, and what was refused. */
  private watchRenders(queue: RenderQueue, registers: Registry[]): void {
    new Gauge({
      name: 'stowage_render_queue_depth',
      help: 'Renditions waiting for a render slot on this node',
      registers,
      collect() {
        this.set(queue.depth);
      },
    });
    new Gauge({
      name: 'stowage_renders_running',
      help: 'Renditions being made on this node',
      registers,
      collect() {
        this.set(queue.active);
      },
    });
    const duration = new Histogram({
      name: 'stowage_render_duration_seconds',
      help: 'Time a render held its slot, by outcome (ok or the error code)',
      labelNames: ['outcome'],
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    const rejects = new Counter({
      name: 'stowage_render_rejects_total',
      help: 'Renditions refused because the queue was full (queue_full) or abandoned at the time budget (timeout)',
      labelNames: ['reason'],
      registers,
    });
    queue.observe({
      finished: (seconds, outcome) => duration.observe({ outcome }, seconds),
      rejected: (reason) => rejects.inc({ reason }),
    });
  }
}
