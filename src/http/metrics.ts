import type { Request, RequestHandler, Response } from 'express';
import client from 'prom-client';
import { poolStats, type Db } from '../db/knex';

/** Prometheus metrics of one process. Each app instance owns its registry (tests build several). */
export class Metrics {
  readonly registry = new client.Registry();
  readonly requests: client.Counter<'method' | 'route' | 'status'>;
  readonly latency: client.Histogram<'method' | 'route'>;
  readonly workflowsStarted: client.Counter<'workflow_type'>;

  constructor(db?: Db) {
    client.collectDefaultMetrics({ register: this.registry });
    this.requests = new client.Counter({
      name: 'http_requests_total',
      help: 'HTTP requests by route and status',
      labelNames: ['method', 'route', 'status'],
      registers: [this.registry],
    });
    this.latency = new client.Histogram({
      name: 'http_request_duration_seconds',
      help: 'HTTP request latency by route',
      labelNames: ['method', 'route'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [this.registry],
    });
    this.workflowsStarted = new client.Counter({
      name: 'temporal_workflows_started_total',
      help: 'Temporal workflows started by this process, by workflow type',
      labelNames: ['workflow_type'],
      registers: [this.registry],
    });
    if (db) {
      const stat = (name: string, help: string, pick: (s: ReturnType<typeof poolStats>) => number) =>
        new client.Gauge({
          name,
          help,
          registers: [this.registry],
          collect() {
            this.set(pick(poolStats(db)));
          },
        });
      stat('db_pool_connections_used', 'Database connections in use', (s) => s.used);
      stat('db_pool_connections_free', 'Idle database connections', (s) => s.free);
      stat('db_pool_pending_acquires', 'Requests waiting for a database connection', (s) => s.pending);
      stat('db_pool_connections_max', 'Pool size limit', (s) => s.max);
    }
  }

  /**
   * The labelled series of one method, route pattern and status, looked up once: prom-client
   * otherwise builds and sorts a label key on every call. Bounded: the routes are a fixed set
   * (unmatched URLs share one), and at most MAX_SERIES are kept.
   */
  private readonly series = new Map<string, { count: client.Counter.Internal; latency: client.Histogram.Internal<'method' | 'route'> }>();
  private static readonly MAX_SERIES = 10_000;

  private seriesOf(method: string, route: string, status: number) {
    const key = `${method} ${status} ${route}`;
    let s = this.series.get(key);
    if (!s) {
      s = { count: this.requests.labels(method, route, String(status)), latency: this.latency.labels(method, route) };
      if (this.series.size < Metrics.MAX_SERIES) this.series.set(key, s);
    }
    return s;
  }

  /** Records a finished response under its route pattern (not the raw URL, to bound cardinality); `start` from process.hrtime.bigint(). */
  record(req: Request, res: Response, start: bigint): void {
    // Routers record their mount path in res.locals: req.baseUrl is reset once an error leaves the router.
    const mount = (res.locals.mountPath as string | undefined) ?? req.baseUrl;
    const route = req.route?.path ? `${mount}${req.route.path}` : 'unmatched';
    const seconds = Number(process.hrtime.bigint() - start) / 1e9;
    const s = this.seriesOf(req.method, route, res.statusCode);
    s.count.inc();
    s.latency.observe(seconds);
  }

  /** Records every response (the app does it in its first middleware, with the access log). */
  middleware(): RequestHandler {
    return (req, res, next) => {
      const start = process.hrtime.bigint();
      res.on('finish', () => this.record(req, res, start));
      next();
    };
  }
}
