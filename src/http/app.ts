import crypto from 'node:crypto';
import express, { Router, type NextFunction, type Request, type Response } from 'express';
import { WU_NAMESPACE, type Config } from '../config';
import type { Db } from '../db/knex';
import { mountCustomers } from '../customers/routes';
import { mountProducts } from '../products/routes';
import { mountDomains } from '../domains/routes';
import { mountSites } from '../sites/routes';
import { mountMemberships } from '../memberships/routes';
import { mountPayments } from '../payments/routes';
import { logger, type Logger } from '../logger';
import { mountSettings } from '../settings/routes';
import type { SettingsStore } from '../settings/store';
import { temporalReadiness, type TemporalHandle } from '../temporal/client';
import { AuthFailureLimiter, requireApiAuth } from './auth';
import { errorHandler, notFoundHandler } from './errors';
import type { Metrics } from './metrics';
import { RouteRegistry, type RouteInfo } from './routes';

export interface AppDeps {
  config: Config;
  db: Db;
  settings: SettingsStore;
  temporal: TemporalHandle | null;
  metrics: Metrics;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const OVERRIDABLE = new Set(['PUT', 'PATCH', 'DELETE', 'GET', 'HEAD']);

declare module 'express-serve-static-core' {
  interface Request {
    bodyError?: unknown;
    /** The request's logger: every line carries request_id. */
    log: Logger;
  }
}

/**
 * Request id (taken from X-Request-Id when sane), a request logger carrying it, and an access
 * log line. (A per-request child logger rather than AsyncLocalStorage, which on Node 20 slows
 * every promise of the request.)
 */
function requestIdAndLog(req: Request, res: Response, next: NextFunction): void {
  const incoming = req.get('x-request-id');
  const requestId = incoming && REQUEST_ID.test(incoming) ? incoming : crypto.randomUUID();
  res.setHeader('X-Request-Id', requestId);
  req.log = logger.child({ request_id: requestId });
  const start = process.hrtime.bigint();
  res.on('finish', () => {
    if (!req.log.isLevelEnabled('info')) return;
    // The path only: query strings may carry credentials.
    req.log.info(
      { method: req.method, path: req.originalUrl.split('?')[0], status: res.statusCode, duration_ms: Number(process.hrtime.bigint() - start) / 1e6 },
      'request',
    );
  });
  next();
}

/** WordPress clients send PUT/PATCH/DELETE as POST with X-HTTP-Method-Override or ?_method=. */
function methodOverride(req: Request, _res: Response, next: NextFunction): void {
  if (req.method === 'POST') {
    const raw = req.get('x-http-method-override') ?? (typeof req.query._method === 'string' ? req.query._method : undefined);
    const method = raw?.toUpperCase();
    if (method && OVERRIDABLE.has(method)) req.method = method;
  }
  next();
}

function routeIndex(routes: RouteInfo[]) {
  return Object.fromEntries(
    routes.map((r) => [
      r.path,
      { namespace: r.namespace, methods: r.methods, endpoints: [{ methods: r.methods, args: {} }], ...(r.public ? { public: true } : {}) },
    ]),
  );
}

export function createApp(deps: AppDeps): express.Express {
  const { config, db, settings, metrics } = deps;
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', config.TRUST_PROXY);
  app.set('query parser', 'simple');
  app.set('json replacer', undefined);

  app.use(requestIdAndLog);
  app.use(metrics.middleware());
  app.use(methodOverride);

  const registry = new RouteRegistry();
  const prefix = config.REST_PREFIX;
  const siteUrl = (req: Request) => config.PUBLIC_URL?.replace(/\/$/, '') ?? `${req.protocol}://${req.get('host')}`;

  // Discovery, as WordPress: a Link header pointing at the REST index.
  app.get('/', (req, res) => {
    res.setHeader('Link', `<${siteUrl(req)}${prefix}/>; rel="https://api.w.org/"`);
    res.json({ name: 'hostflow', rest_index: `${siteUrl(req)}${prefix}/` });
  });

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });

  app.get('/readyz', async (_req, res) => {
    const dbCheck = await db
      .raw('select 1')
      .then(() => ({ ok: true }))
      .catch((err: Error) => ({ ok: false, error: err.message }));
    const temporal = deps.temporal
      ? await temporalReadiness(deps.temporal)
      : { reachable: false, pollers: 0, error: 'not configured' };
    const ready = dbCheck.ok && temporal.reachable;
    res.status(ready ? 200 : 503).json({
      status: ready ? 'ready' : 'not_ready',
      checks: { database: dbCheck, temporal: { ok: temporal.reachable, workers_polling: temporal.pollers, ...(temporal.error ? { error: temporal.error } : {}) } },
    });
  });

  app.get('/metrics', async (_req, res) => {
    res.setHeader('Content-Type', metrics.registry.contentType);
    res.send(await metrics.registry.metrics());
  });

  // ---- wu/v2 ----------------------------------------------------------------------------
  const wu = Router();
  const json = express.json({ limit: config.BODY_LIMIT, type: ['application/json', 'application/*+json'] });
  wu.use((req, res, next) => {
    res.locals.mountPath = req.baseUrl;
    next();
  });
  // Body errors are held back until the caller has authenticated.
  wu.use((req, res, next) =>
    json(req, res, (err?: unknown) => {
      if (err) {
        req.bodyError = err;
        req.body = undefined;
      }
      next();
    }),
  );

  registry.add({ namespace: WU_NAMESPACE, path: `/${WU_NAMESPACE}`, methods: ['GET'], public: true });
  wu.get('/', (req, res) => {
    res.json({
      namespace: WU_NAMESPACE,
      routes: routeIndex(registry.routes.filter((r) => r.namespace === WU_NAMESPACE)),
      _links: { up: [{ href: `${siteUrl(req)}${prefix}/` }] },
    });
  });

  const limiter = new AuthFailureLimiter(config.AUTH_FAILURE_LIMIT, config.AUTH_FAILURE_WINDOW_SECONDS * 1000);
  wu.use(requireApiAuth(settings, limiter));
  wu.use((req, _res, next) => next(req.bodyError));

  registry.add({ namespace: WU_NAMESPACE, path: `/${WU_NAMESPACE}/auth`, methods: ['GET'] });
  wu.get('/auth', async (_req, res) => {
    res.json({ success: true, label: await settings.get<string>('network_name'), message: 'Welcome to our API' });
  });
  mountSettings(wu, registry, WU_NAMESPACE, settings);
  // Resources, each from its own folder.
  mountCustomers(wu, registry, WU_NAMESPACE, db);
  mountProducts(wu, registry, WU_NAMESPACE, db);
  mountMemberships(wu, registry, WU_NAMESPACE, db);
  mountPayments(wu, registry, WU_NAMESPACE, db);
  const domains = mountDomains(wu, registry, WU_NAMESPACE, db, deps.temporal, metrics, config);
  mountSites(wu, registry, WU_NAMESPACE, db, domains.checks);
  wu.use(notFoundHandler);

  app.use(`${prefix}/${WU_NAMESPACE}`, wu);

  app.get([`${prefix}`, `${prefix}/`], (req, res) => {
    res.setHeader('Link', `<${siteUrl(req)}${prefix}/>; rel="https://api.w.org/"`);
    res.json({
      name: 'hostflow',
      description: 'Multi-site hosting and billing platform',
      url: siteUrl(req),
      home: siteUrl(req),
      namespaces: [...registry.namespaces],
      authentication: { basic: { description: 'HTTP Basic with api_key:api_secret, or api_key/api_secret parameters' } },
      routes: routeIndex(registry.routes),
    });
  });

  app.use(notFoundHandler);
  app.use(errorHandler);
  return app;
}
