import crypto from 'node:crypto';
import express, { Router, type NextFunction, type Request, type Response } from 'express';
import { version as PACKAGE_VERSION } from './../package.json';
import { mountChat, type ChatHandle } from './chat/routes';
import { sessionListSpec } from './chat/sessions';
import { WU_NAMESPACE, type Config } from './config';
import { mountCustomers } from './customers/routes';
import { customerListSpec } from './customers/service';
import type { Db } from './db/knex';
import { searchTableOf, useCursorKey } from './db/list';
import { mountDiscountCodes } from './discount-codes/routes';
import { mountDomains } from './domains/routes';
import { mountEvents } from './events/routes';
import { requireApiAuth } from './http/auth';
import { defineCachedQuery } from './http/cached-query';
import { mountConsole } from './http/console';
import { refuseCrossSite } from './http/cross-site';
import { errorHandler, notFoundHandler } from './http/errors';
import { checkFirstSegment } from './http/first-segment';
import { idempotencyKeys } from './http/idempotency';
import { inSequence } from './http/in-sequence';
import { afterAuthentication, heldBackBodyError, readBody } from './http/input';
import { RateLimits } from './http/limits';
import type { Metrics } from './http/metrics';
import { publicBase, setPublicBase } from './http/public-url';
import { RouteRegistry, type RouteInfo } from './http/route-registry';
import { createObjectStorage, type ObjectStorage } from './infra/object-storage';
import { logger, logRequest, type Logger } from './logger';
import { lifecycleHorizonMs, MembershipLifecycles } from './memberships/lifecycle';
import { mountMemberships } from './memberships/routes';
import { membershipListSpec } from './memberships/service';
import { mountDocsPage } from './openapi/docs-page';
import { buildOpenApiDocument } from './openapi/document';
import { indexEndpoints, routeIndex, type IndexEndpoint } from './openapi/route-args';
import { mountPayments } from './payments/routes';
import { paymentListSpec } from './payments/service';
import { mountProducts } from './products/routes';
import { productListSpec } from './products/service';
import { mountRegister } from './register/routes';
import { mountSettings } from './settings/routes';
import { StoredSecret, type SettingsStore } from './settings/store';
import { mountSites } from './sites/routes';
import { siteListSpec } from './sites/service';
import type { TemporalHandle } from './temporal/client';
import { TemporalGateway } from './temporal/gateway';
import { WorkflowIds } from './temporal/workflow-ids';
import { mountTenants } from './tenants/routes';
import { jobListSpec } from './translations/jobs';
import { projectListSpec } from './translations/projects';
import { mountTranslationDownloads, mountTranslations } from './translations/routes';
import { mountWebhooks } from './webhooks/routes';


export interface AppDeps {
  config: Config;
  db: Db;
  settings: SettingsStore;
  temporal: TemporalHandle | null;
  metrics: Metrics;
  /** Shared file storage (chat attachments, language packs); built from the config when not given, and then closed by whoever closes the app (locals.storage). */
  storage?: ObjectStorage;
  /** Sees every JSON response with its route pattern (the contract tests validate them). */
  observeResponse?: (r: { method: string; route: string | null; status: number; body: unknown; query: Record<string, unknown> }) => void;
}

export interface AppWithRegistry extends express.Express {
  locals: express.Express['locals'] & {
    registry: RouteRegistry;
    chat: ChatHandle;
    temporal: TemporalGateway;
    storage: ObjectStorage;
    /** The tables the lists search through one trigram index each (their common trigrams: src/db/search-trigrams.ts). */
    searchTables: { table: string; columns: string[] }[];
  };
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const OVERRIDABLE = new Set(['PUT', 'PATCH', 'DELETE', 'GET', 'HEAD']);
/** How long /readyz waits for the file store (a folder check, or an S3 HeadBucket). */
const READINESS_STORAGE_TIMEOUT_MS = 2000;

declare module 'express-serve-static-core' {
  interface Request {
    /** The request's logger: every line carries request_id. */
    log: Logger;
  }
}

const REQUEST_ID_OF = Symbol('requestId');
const LOG_OF = Symbol('log');
type Tracked = Request & { [REQUEST_ID_OF]?: string; [LOG_OF]?: Logger };

/**
 * `req.log`, on the app's request prototype: the child logger carrying the request id is made
 * when something logs (most requests never do below info). A per-request child logger rather
 * than AsyncLocalStorage, which on Node 20 slows every promise of the request.
 */
function defineRequestLog(app: express.Express): void {
  Object.defineProperty(app.request, 'log', {
    configurable: true,
    get(this: Tracked) {
      return (this[LOG_OF] ??= logger.child({ request_id: this[REQUEST_ID_OF] }));
    },
    set(this: Tracked, value: Logger) {
      this[LOG_OF] = value;
    },
  });
}

/**
 * What every request goes through first, in one middleware: its id (taken from X-Request-Id
 * when sane), one listener at its end for the metrics and the access log line, and the method
 * override.
 */
function requestStart(metrics: Metrics) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const incoming = req.headers['x-request-id'];
    const requestId = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : crypto.randomUUID();
    (req as Tracked)[REQUEST_ID_OF] = requestId;
    res.setHeader('X-Request-Id', requestId);
    const start = process.hrtime.bigint();
    const accessLog = logger.isLevelEnabled('info');
    res.on('finish', () => {
      metrics.record(req, res, start);
      if (!accessLog) return;
      // The path only: query strings may carry credentials.
      logRequest({ request_id: requestId, method: req.method, path: req.originalUrl.split('?')[0], status: res.statusCode, duration_ms: Number(process.hrtime.bigint() - start) / 1e6 });
    });
    methodOverride(req, res, next);
  };
}

/**
 * WordPress clients send PUT/PATCH/DELETE as POST with X-HTTP-Method-Override or ?_method=.
 * `_method` only on requests declaring a JSON body: a page on another site can post a form (or
 * an empty body) to any URL, but cannot send that Content-Type, nor the header, without a CORS
 * preflight.
 */
function methodOverride(req: Request, _res: Response, next: NextFunction): void {
  if (req.method === 'POST') {
    const json = /^application\/([\w.-]+\+)?json\s*(;|$)/i.test(req.get('content-type') ?? '');
    const fromQuery = json && typeof req.query._method === 'string' ? req.query._method : undefined;
    const raw = req.get('x-http-method-override') ?? fromQuery;
    const method = raw?.toUpperCase();
    if (method && OVERRIDABLE.has(method)) req.method = method;
  }
  next();
}

export function createApp(deps: AppDeps): AppWithRegistry {
  const { config, db, settings, metrics } = deps;
  const app = express();
  // Every feature reaches Temporal through this one gateway (deadline, circuit, 503).
  const gateway = new TemporalGateway(deps.temporal, metrics, { callTimeoutMs: config.TEMPORAL_CALL_TIMEOUT_MS, ids: new WorkflowIds(db, config.WORKFLOW_ID_PREFIX) });
  app.locals.temporal = gateway;
  const storage = deps.storage ?? createObjectStorage(config);
  app.locals.storage = storage;
  app.locals.searchTables = [customerListSpec, membershipListSpec, paymentListSpec, siteListSpec, productListSpec, sessionListSpec, projectListSpec, jobListSpec]
    .map(searchTableOf)
    .filter((t) => t !== undefined);
  // List cursors are signed with a key every replica reads from the database.
  const cursorSecret = new StoredSecret(db, 'list_cursor_secret');
  useCursorKey(db, () => cursorSecret.get());
  // Rate limits every replica shares (counters in PostgreSQL).
  const limits = new RateLimits(db, config.RATE_LIMIT_STORE_TIMEOUT_MS);
  app.disable('x-powered-by');
  app.set('trust proxy', config.TRUST_PROXY);
  app.set('query parser', 'simple');
  app.set('json replacer', undefined);
  // No weak ETag hashed over every JSON body: wu/v2 answers are Cache-Control: no-store, and
  // the routes that serve files (language packs, uploads) set their own.
  app.set('etag', false);

  defineRequestLog(app);
  defineCachedQuery(app);
  app.use(requestStart(metrics));
  const observe = deps.observeResponse;
  if (observe) {
    app.use((req, res, next) => {
      const json = res.json.bind(res);
      res.json = (body: unknown) => {
        const mount = (res.locals.mountPath as string | undefined) ?? req.baseUrl;
        const route = req.route?.path ? `${mount}${req.route.path === '/' ? '' : req.route.path}` || '/' : null;
        observe({ method: req.method === 'HEAD' ? 'GET' : req.method, route, status: res.statusCode, body, query: req.query as Record<string, unknown> });
        return json(body);
      };
      next();
    });
  }

  const prefix = config.REST_PREFIX;
  const registry = new RouteRegistry(prefix);
  app.locals.registry = registry;
  setPublicBase(app, config);

  const anyObject = { type: 'object', additionalProperties: true };
  // The OpenAPI document and the index's arguments, built on first use, when every router has registered its operations.
  let document: Record<string, unknown> | undefined;
  const openApi = () => (document ??= buildOpenApiDocument(registry, { serverUrl: config.PUBLIC_URL, version: PACKAGE_VERSION }));
  let endpoints: Map<string, IndexEndpoint[]> | undefined;
  const routesOf = (req: Request, routes: RouteInfo[]) => routeIndex(routes, (endpoints ??= indexEndpoints(openApi(), registry)), (path) => `${publicBase(req)}${prefix}${path}`);
  const indexRoutes = {
    type: 'object',
    description: 'By WordPress path: namespace, methods, and endpoints (methods with their args, as WordPress describes arguments).',
    additionalProperties: {
      type: 'object',
      required: ['namespace', 'methods', 'endpoints'],
      properties: {
        namespace: { type: 'string' },
        methods: { type: 'array', items: { type: 'string' } },
        endpoints: {
          type: 'array',
          items: {
            type: 'object',
            required: ['methods', 'args'],
            properties: {
              methods: { type: 'array', items: { type: 'string' } },
              args: {
                type: 'object',
                description: 'Argument name -> its schema (type, description, enum, default, minimum…) and required (a boolean).',
                additionalProperties: { type: 'object', required: ['required'], properties: { required: { type: 'boolean' } } },
              },
            },
          },
        },
        public: { const: true },
        _links: anyObject,
      },
      additionalProperties: false,
    },
  };
  // Discovery, as WordPress: a Link header pointing at the REST index.
  registry.service('GET', '/', {
    summary: 'Site root: points at the REST index (Link rel="https://api.w.org/")',
    tags: ['service'],
    responses: { 200: { description: 'Where the REST index is.', schema: { type: 'object', required: ['name', 'rest_index'], properties: { name: { type: 'string' }, rest_index: { type: 'string' } } } } },
  });
  app.get('/', (req, res) => {
    res.setHeader('Link', `<${publicBase(req)}${prefix}/>; rel="https://api.w.org/"`);
    res.json({ name: 'hostflow', rest_index: `${publicBase(req)}${prefix}/` });
  });

  registry.service('GET', '/healthz', {
    summary: 'Liveness: the process is up',
    tags: ['service'],
    responses: { 200: { description: 'Up.', schema: { type: 'object', required: ['status'], properties: { status: { const: 'ok' } } } } },
  });
  const readiness = {
    type: 'object',
    required: ['status', 'checks'],
    properties: { status: { enum: ['ready', 'not_ready'] }, checks: anyObject },
  };
  registry.service('GET', '/readyz', {
    summary: 'Readiness: database, Temporal and the file store reachable (and how many workers poll the task queue)',
    tags: ['service'],
    responses: { 200: { description: 'Ready.', schema: readiness }, 503: { description: 'Not ready; checks say which part failed.', schema: readiness } },
  });
  registry.service('GET', '/metrics', {
    summary: 'Prometheus metrics (text exposition format)',
    tags: ['service'],
    responses: { 200: { description: 'Metrics in text/plain.' } },
  });
  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });

  app.get('/readyz', async (_req, res) => {
    const dbCheck = await db
      .raw('select 1')
      .then(() => ({ ok: true }))
      .catch((err: Error) => ({ ok: false, error: err.message }));
    const [temporal, storageCheck] = await Promise.all([
      gateway.readiness(),
      storage
        .check(READINESS_STORAGE_TIMEOUT_MS)
        .then(() => ({ ok: true, driver: storage.driver }))
        .catch((err: Error) => ({ ok: false, driver: storage.driver, error: err.message })),
    ]);
    const ready = dbCheck.ok && temporal.reachable && storageCheck.ok;
    res.status(ready ? 200 : 503).json({
      status: ready ? 'ready' : 'not_ready',
      checks: {
        database: dbCheck,
        temporal: { ok: temporal.reachable, workers_polling: temporal.pollers, ...(temporal.error ? { error: temporal.error } : {}) },
        storage: storageCheck,
      },
    });
  });

  app.get('/metrics', async (_req, res) => {
    res.setHeader('Content-Type', metrics.registry.contentType);
    res.send(await metrics.registry.metrics());
  });

  // ---- wu/v2 ----------------------------------------------------------------------------
  const wu = Router();
  // What every wu/v2 request goes through first, as one layer of the router (src/http/in-sequence.ts).
  wu.use(
    inSequence(
      (req, res, next) => {
        res.locals.mountPath = req.baseUrl;
        next();
      },
      refuseCrossSite([], 'Call the API from a server, not from a page on another site.'),
      // JSON and form bodies; their errors are held back until the caller has authenticated.
      readBody(config, { form: true }),
    ),
  );
  registry.acceptFormBodies(WU_NAMESPACE);

  registry.operation(WU_NAMESPACE, 'GET', '/', {
    summary: 'Namespace index: the routes of wu/v2 and their methods',
    tags: ['service'],
    public: true,
    responses: { 200: { description: 'The namespace and its routes.', schema: { type: 'object', required: ['namespace', 'routes'], properties: { namespace: { type: 'string' }, routes: indexRoutes } } } },
  });
  wu.get('/', (req, res) => {
    res.json({
      namespace: WU_NAMESPACE,
      routes: routesOf(req, registry.routes.filter((r) => r.namespace === WU_NAMESPACE)),
      _links: { up: [{ href: `${publicBase(req)}${prefix}/` }] },
    });
  });

  registry.operation(WU_NAMESPACE, 'GET', '/openapi.json', {
    summary: 'This OpenAPI 3.1 document',
    tags: ['service'],
    public: true,
    responses: { 200: { description: 'The document.', schema: anyObject } },
  });
  wu.get('/openapi.json', (_req, res) => {
    res.json(openApi());
  });

  // Language packs are public downloads (WordPress fetches them without credentials).
  mountTranslationDownloads(wu, registry, WU_NAMESPACE, { db, temporal: gateway, config, storage });

  const authFailures = limits.perAddress({ name: 'auth_failures', limit: config.AUTH_FAILURE_LIMIT, windowSeconds: config.AUTH_FAILURE_WINDOW_SECONDS });
  // Every write takes an Idempotency-Key (/register keeps its own, in its registrations row).
  const idempotencySecret = new StoredSecret(db, 'idempotency_request_secret');
  // Authentication and what comes right after it, as one layer of the router.
  wu.use(
    inSequence(
      requireApiAuth(settings, authFailures),
      afterAuthentication,
      heldBackBodyError,
      idempotencyKeys({ db, ttlHours: config.IDEMPOTENCY_KEY_TTL_HOURS, secret: () => idempotencySecret.get(), skip: (req) => req.path === '/register' }),
    ),
  );
  registry.acceptIdempotencyKeys(WU_NAMESPACE);

  registry.operation(WU_NAMESPACE, 'GET', '/auth', {
    summary: 'Test the credentials',
    tags: ['service'],
    responses: {
      200: {
        description: 'The credentials are valid.',
        schema: { type: 'object', required: ['success', 'label', 'message'], properties: { success: { const: true }, label: { type: 'string' }, message: { type: 'string' } }, additionalProperties: false },
      },
    },
  });
  wu.get('/auth', async (_req, res) => {
    res.json({ success: true, label: await settings.get<string>('network_name'), message: 'Welcome to our API' });
  });
  mountSettings(wu, registry, WU_NAMESPACE, settings);
  // Resources, each from its own folder.
  mountCustomers(wu, registry, WU_NAMESPACE, db);
  mountProducts(wu, registry, WU_NAMESPACE, db);
  mountDiscountCodes(wu, registry, WU_NAMESPACE, db);
  // Every membership write asks the lifecycle rule (renewals: src/memberships/lifecycle.ts).
  const lifecycles = new MembershipLifecycles(gateway.ids, gateway, db, lifecycleHorizonMs(config));
  mountMemberships(wu, registry, WU_NAMESPACE, db, lifecycles);
  mountPayments(wu, registry, WU_NAMESPACE, db, lifecycles);
  const domains = mountDomains(wu, registry, WU_NAMESPACE, db, gateway, config, settings);
  mountSites(wu, registry, WU_NAMESPACE, db, domains.checks);
  mountRegister(wu, registry, WU_NAMESPACE, { db, settings, temporal: gateway, metrics, config, lifecycles });
  mountTenants(wu, registry, WU_NAMESPACE, { db, temporal: gateway, config });
  mountTranslations(wu, registry, WU_NAMESPACE, { db, temporal: gateway, config, storage });
  mountEvents(wu, registry, WU_NAMESPACE, db);
  mountWebhooks(wu, registry, WU_NAMESPACE, db, config);
  wu.use(notFoundHandler);
  // A layer whose path starts with another segment than the request's is skipped without running its pattern.
  checkFirstSegment(wu);

  app.use(`${prefix}/${WU_NAMESPACE}`, wu);

  registry.service('GET', prefix, {
    summary: 'REST index: namespaces and routes, as WordPress',
    tags: ['service'],
    responses: { 200: { description: 'The index.', schema: { type: 'object', required: ['namespaces', 'routes'], properties: { namespaces: { type: 'array', items: { type: 'string' } }, routes: indexRoutes } } } },
  });
  // Non-strict routing: /wp-json and /wp-json/ both match.
  app.get(prefix, (req, res) => {
    res.setHeader('Link', `<${publicBase(req)}${prefix}/>; rel="https://api.w.org/"`);
    res.json({
      name: 'hostflow',
      description: 'Multi-site hosting and billing platform',
      url: publicBase(req),
      home: publicBase(req),
      namespaces: [...registry.namespaces],
      authentication: { basic: { description: 'HTTP Basic with api_key:api_secret, or api_key/api_secret parameters' } },
      routes: routesOf(req, registry.routes),
    });
  });

  // ---- {product}-support-tickets/v1: the support chat, with its own callers and CORS ------
  app.locals.chat = mountChat(app, registry, { config, db, settings, temporal: gateway, metrics, limits, storage });

  mountDocsPage(app, `${prefix}/${WU_NAMESPACE}/openapi.json`);
  // The admins' and agents' pages (web/console), talking to the two APIs above.
  mountConsole(app, {
    dir: config.CONSOLE_DIR,
    temporalUiUrl: config.TEMPORAL_UI_URL ?? null,
    temporalNamespace: config.TEMPORAL_NAMESPACE,
    realtimePath: `${prefix}/${app.locals.chat.namespace}/chat/realtime`,
  });

  app.use(notFoundHandler);
  app.use(errorHandler);
  return app as AppWithRegistry;
}
