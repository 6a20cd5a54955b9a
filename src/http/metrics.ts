import client from 'prom-client';
import type { RequestHandler } from 'express';
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

  /** Records every response under its route pattern (not the raw URL, to bound cardinality). */
  middleware(): RequestHandler {
    return (req, res, next) => {
      const start = process.hrtime.bigint();
      res.on('finish', () => {
        // Routers record their mount path in res.locals: req.baseUrl is reset once an error leaves the router.
        const mount = (res.locals.mountPath as string | undefined) ?? req.baseUrl;
        const route = req.route?.path ? `${mount}${req.route.path}` : 'unmatched';
        const seconds = Number(process.hrtime.bigint() - start) / 1e9;
        this.requests.inc({ method: req.method, route, status: String(res.statusCode) });
        this.latency.observe({ method: req.method, route }, seconds);
      });
      next();
    };
  }
}
