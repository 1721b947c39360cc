// Prometheus metrics per job name, registered with the service's registry (GET /metrics).
import { Counter, Histogram, type Registry } from 'prom-client';

export class JobMetrics {
  readonly runs: Counter<'job'>;
  readonly failures: Counter<'job'>;
  readonly duration: Histogram<'job'>;

  constructor(registry?: Registry) {
    const registers = registry ? [registry] : [];
    this.runs = new Counter({
      name: 'stowage_job_runs_total',
      help: 'Background job runs, by job name',
      labelNames: ['job'],
      registers,
    });
    this.failures = new Counter({
      name: 'stowage_job_failures_total',
      help: 'Background job runs that threw (retried with backoff), by job name',
      labelNames: ['job'],
      registers,
    });
    this.duration = new Histogram({
      name: 'stowage_job_duration_seconds',
      help: 'Background job run time, by job name',
      labelNames: ['job'],
      buckets: [0.005, 0.025, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
      registers,
    });
  }
}
