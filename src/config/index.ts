import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { z } from 'zod';
import { hostNameProblem, normalizeHostName } from './host-names';
import { parseTenantHosts } from './tenant-hosts';

/**
 * All configuration comes from environment variables, validated once at start.
 * A bad value stops the process with a message naming the variable.
 */
const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

/** What a workflow id prefix may be (WORKFLOW_ID_PREFIX, or the generated `h<8 hex>`). */
export const WORKFLOW_ID_PREFIX_PATTERN = /^[A-Za-z0-9_]{1,32}$/;

const port = z.coerce.number().int().min(0).max(65535);

/** Express's names for address ranges (proxy-addr): usable in TRUST_PROXY's list. */
const PROXY_RANGE_NAMES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/**
 * TRUST_PROXY: whom to believe about the client's address (Express's `trust proxy`).
 * - `false` (default): nobody; req.ip is the connection's address.
 * - a hop count, 1 to 10: that many proxies in front (1 = one load balancer): req.ip is the
 *   address the outermost trusted proxy saw, whatever a client wrote further left in
 *   `X-Forwarded-For`.
 * - a comma-separated list of addresses, networks (10.0.0.0/8, fd00::/8) or the names loopback,
 *   linklocal, uniquelocal: the proxies to trust, wherever they are.
 * - `true`: every hop, so req.ip is the leftmost address, which a client can write itself:
 *   only behind a proxy that strips the header a client sends.
 */
const trustProxy = z.string().transform((v, ctx): boolean | number | string[] => {
  const value = v.trim().toLowerCase();
  if (['false', 'no', '0'].includes(value)) return false;
  if (['true', 'yes'].includes(value)) return true;
  if (/^\d{1,2}$/.test(value)) {
    const hops = Number(value);
    if (hops >= 1 && hops <= 10) return hops;
  } else {
    const entries = value.split(',').map((s) => s.trim());
    const bad = entries.filter((entry) => {
      if (!entry) return true;
      if (PROXY_RANGE_NAMES.has(entry)) return false;
      const [address, bits, extra] = entry.split('/');
      const family = net.isIP(address);
      if (!family || extra !== undefined) return true;
      if (bits === undefined) return false;
      return !/^\d{1,3}$/.test(bits) || Number(bits) > (family === 6 ? 128 : 32);
    });
    if (!bad.length) return entries;
  }
  ctx.addIssue({
    code: 'custom',
    message: 'must be false, true, a hop count from 1 to 10, or a comma-separated list of proxy addresses, networks (10.0.0.0/8) or loopback, linklocal, uniquelocal',
  });
  return z.NEVER;
});

/** OUTBOUND_ALLOWED_HOSTS parsed: host names (`*.suffix` for subdomains) and networks. */
export interface OutboundAllowList {
  hosts: string[];
  networks: { address: string; prefix: number; family: 'ipv4' | 'ipv6' }[];
}

const HOST_NAME = /^(\*\.)?[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;

const allowList = z.string().transform((v, ctx): OutboundAllowList => {
  const out: OutboundAllowList = { hosts: [], networks: [] };
  for (const entry of v.split(',').map((s) => s.trim().toLowerCase()).filter(Boolean)) {
    const [address, bits, extra] = entry.split('/');
    const family = net.isIP(address);
    const max = family === 6 ? 128 : 32;
    const prefix = bits === undefined ? max : /^\d{1,3}$/.test(bits) ? Number(bits) : -1;
    if (family && extra === undefined && prefix >= 0 && prefix <= max) out.networks.push({ address, prefix, family: family === 6 ? 'ipv6' : 'ipv4' });
    else if (!family && bits === undefined && HOST_NAME.test(entry)) out.hosts.push(entry);
    else ctx.addIssue({ code: 'custom', message: `"${entry}" is neither a host name nor an IP address or network (e.g. 10.0.0.0/8, fd00::/8)` });
  }
  return out;
});

const schema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  HOST: z.string().min(1).default('127.0.0.1'),
  PORT: port.default(8080),
  REST_PREFIX: z
    .string()
    .regex(/^\/[A-Za-z0-9_\-/]*[A-Za-z0-9_-]$/, 'must start with "/" and not end with "/", e.g. /wp-json')
    .default('/wp-json'),
  PUBLIC_URL: z.string().url().optional(),
  /**
   * Host names (optional :port; `*.example.com` for subdomains) whose Host header may build
   * absolute links when PUBLIC_URL is unset. Default: the loopback names, any port.
   */
  ALLOWED_HOSTS: z
    .string()
    .default('localhost,127.0.0.1,[::1]')
    .transform((v) => v.split(',').map((s) => s.trim().toLowerCase()).filter(Boolean))
    .refine(
      (list) => list.every((h) => /^(\*\.)?([a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*|\[[0-9a-f:.]+\])(:\d{1,5})?$/.test(h)),
      'must be a comma-separated list of host names with an optional port, e.g. api.example.com,*.example.org,localhost:8080',
    ),
  DATA_DIR: z.string().min(1).default(path.resolve(process.cwd(), 'data')),
  // The console's build (web/console, built by `npm run build`), served at /console/.
  CONSOLE_DIR: z.string().min(1).default(path.resolve(process.cwd(), 'dist/web/console')),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  BODY_LIMIT: z
    .string()
    .regex(/^\d+(b|kb|mb)?$/i, 'must be a size such as 1mb or 500kb')
    .default('1mb'),
  TRUST_PROXY: trustProxy.default(false),

  DATABASE_URL: z.string().url().optional(),
  DB_POOL_MAX: z.coerce.number().int().min(1).max(50).default(10),
  EMBEDDED_PG_PORT: port.default(54329),

  TEMPORAL_ADDRESS: z.string().min(1).optional(),
  TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
  TEMPORAL_TASK_QUEUE: z.string().min(1).default('hostflow'),
  // Bulk work (translations, tenants) runs on its own queue (src/temporal/task-queues.ts); default `<TEMPORAL_TASK_QUEUE>-bulk`.
  TEMPORAL_BULK_TASK_QUEUE: z.string().min(1).optional(),
  TEMPORAL_CLI: z.string().min(1).optional(),
  // Put before every workflow id (`<prefix>-translation-…`), so installs sharing a namespace never collide.
  // Unset: a random `h<8 hex>` generated once and kept in the settings table (workflow_id_prefix).
  WORKFLOW_ID_PREFIX: z.string().regex(WORKFLOW_ID_PREFIX_PATTERN, 'must be 1 to 32 letters, digits or _, e.g. prod_eu').optional(),
  TEMPORAL_DEV_PORT: port.default(7233),
  TEMPORAL_UI_PORT: port.default(8233),
  // The Temporal UI the console links workflows to (e.g. https://temporal.example.com); `npm start`
  // uses the dev server's UI when unset; otherwise the console shows workflow ids without links.
  TEMPORAL_UI_URL: z.string().url().regex(/^https?:\/\//, 'must be an http(s) URL').optional(),
  // Deadline of each API call to Temporal that does not wait for a worker (start, signal, describe):
  // past it (or when the circuit is open) a route that starts a workflow answers 503.
  TEMPORAL_CALL_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(1500),
  // What a worker process holds (src/temporal/worker.ts): workflows kept in its cache (each
  // keeps its state in the worker's one V8 context), and how many tasks run at once.
  WORKER_MAX_CACHED_WORKFLOWS: z.coerce.number().int().min(0).max(100_000).default(500),
  WORKER_MAX_WORKFLOW_TASKS: z.coerce.number().int().min(2).max(1000).default(40),
  // Activities at once per queue: each holds one of the process's DB_POOL_MAX connections while it queries.
  WORKER_MAX_ACTIVITIES: z.coerce.number().int().min(1).max(1000).default(10),
  WORKER_MAX_BULK_ACTIVITIES: z.coerce.number().int().min(1).max(1000).default(5),
  // The task queues this worker process polls (names, comma-separated); unset: both.
  WORKER_TASK_QUEUES: z
    .string()
    .transform((v) => v.split(',').map((s) => s.trim()).filter(Boolean))
    .optional(),
  // The SDK's Prometheus metrics (temporal_*), served by the worker at http://HOST:PORT/metrics; 0 turns them off.
  WORKER_METRICS_PORT: port.default(9464),
  WORKER_METRICS_HOST: z.string().min(1).default('127.0.0.1'),
  WORKER_MAX_LOCAL_ACTIVITIES: z.coerce.number().int().min(1).max(1000).default(50),
  // How long a stopping worker (a deploy) lets its running activities finish before it cancels them.
  WORKER_SHUTDOWN_GRACE_SECONDS: z.coerce.number().int().min(0).max(3600).default(60),
  // Worker versioning (src/temporal/versioning.ts): workers register as version <build id> (the
  // workflow bundle's SHA-256) of the worker deployment TEMPORAL_DEPLOYMENT_NAME; `always`: a
  // worker that starts makes its version the current one, `if-unset`: only when the deployment
  // has none, `never`: the deploy pipeline does (`temporal worker deployment set-current-version`).
  WORKER_VERSIONING: bool.default(true),
  TEMPORAL_DEPLOYMENT_NAME: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,200}$/, 'must be 1-200 letters, digits, "-" or "_", e.g. hostflow')
    .default('hostflow'),
  WORKER_VERSIONING_SET_CURRENT: z.enum(['always', 'if-unset', 'never']).default('always'),

  WU_API_KEY: z.string().min(16, 'must be at least 16 characters').optional(),
  WU_API_SECRET: z.string().min(16, 'must be at least 16 characters').optional(),

  AUTH_FAILURE_LIMIT: z.coerce.number().int().min(1).default(10),
  AUTH_FAILURE_WINDOW_SECONDS: z.coerce.number().int().min(1).default(60),
  // How long a rate-limit count (failed authentications, chat session creation) waits for
  // PostgreSQL, where every replica shares the counters, before the process counts on its own.
  RATE_LIMIT_STORE_TIMEOUT_MS: z.coerce.number().int().min(50).max(60_000).default(1000),

  // Domain checks (DNS, then the TLS certificate), run as the domainCheck workflow.
  DOMAIN_DNS_RESOLVER: z
    .string()
    .regex(/^(\d{1,3}(\.\d{1,3}){3}(:\d{1,5})?|\[[0-9A-Fa-f:.]+\](:\d{1,5})?|[0-9A-Fa-f:]*:[0-9A-Fa-f:.]*)$/, 'must be an IP address with an optional port, e.g. 127.0.0.1:53 or [::1]:53')
    .default('127.0.0.1:53'),
  DOMAIN_TLS_ADDRESS: z.string().min(1).optional(),
  DOMAIN_TLS_PORT: port.default(443),
  DOMAIN_TLS_CA_FILE: z.string().min(1).optional(),
  DOMAIN_CHECK_INTERVAL_SECONDS: z.coerce.number().int().min(1).max(86_400).default(300),
  DOMAIN_CHECK_MAX_TRIES: z.coerce.number().int().min(1).max(100).default(5),
  // What a mapped domain must point to (an IP address: an A/AAAA record; a host name: a CNAME); unset: the setting network_domain.
  DOMAIN_MAPPING_TARGET: z
    .string()
    .refine((v) => net.isIP(v) !== 0 || hostNameProblem(normalizeHostName(v)) === null, 'must be an IP address or a host name, e.g. 203.0.113.10 or sites.example.com')
    .transform((v) => (net.isIP(v) ? v : normalizeHostName(v)))
    .optional(),

  // How long an Idempotency-Key of a wu/v2 write, and the answer it replays, are kept.
  IDEMPOTENCY_KEY_TTL_HOURS: z.coerce.number().int().min(1).max(720).default(24),

  // How long events (/events) are kept; older ones are deleted by the sweep beside the worker.
  EVENT_RETENTION_DAYS: z.coerce.number().int().min(1).max(3650).default(90),

  // Webhooks (src/webhooks/): where deliveries may go although the address is internal (as
  // OUTBOUND_ALLOWED_HOSTS, for webhook URLs only), the timeout of one attempt, the retries'
  // backoff (doubling from the first delay up to the largest, with jitter) for up to
  // WEBHOOK_RETRY_HOURS, how many days of failed attempts disable a webhook, how many
  // delivery workflows (shards) each webhook's objects are spread over, and how many deliveries
  // one shard workflow holds at most (the others wait in webhook_deliveries).
  WEBHOOK_ALLOWED_HOSTS: allowList.default({ hosts: [], networks: [] }),
  WEBHOOK_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(10_000),
  WEBHOOK_RETRY_INITIAL_MS: z.coerce.number().int().min(10).max(3_600_000).default(30_000),
  WEBHOOK_RETRY_MAX_MS: z.coerce.number().int().min(10).max(86_400_000).default(3_600_000),
  WEBHOOK_RETRY_HOURS: z.coerce.number().positive().max(720).default(72),
  WEBHOOK_DISABLE_AFTER_DAYS: z.coerce.number().positive().max(365).default(5),
  WEBHOOK_DELIVERY_SHARDS: z.coerce.number().int().min(1).max(256).default(4),
  WEBHOOK_SHARD_MAX_QUEUED: z.coerce.number().int().min(1).max(10_000).default(2000),

  // Billing: renewals (README "Billing: renewals"). BILLING_DUNNING_DAYS: the days after a
  // renewal's due date at which an unpaid renewal is charged again (increasing; after the last
  // one the membership goes on-hold); BILLING_ON_HOLD_DAYS: how long it then stays on-hold,
  // waiting for its payment, before it expires. BILLING_HTTP_GATEWAY_URL: the payment gateway of
  // memberships whose gateway is `http` (POST {url}/charges), and the timeout of one charge.
  BILLING_DUNNING_DAYS: z
    .string()
    .transform((v, ctx) => {
      const days = v.split(',').map((s) => s.trim()).filter(Boolean).map(Number);
      const ok = days.length >= 1 && days.length <= 20 && days.every((d, i) => Number.isFinite(d) && d > 0 && d <= 365 && (i === 0 || d > days[i - 1]));
      if (!ok) ctx.addIssue({ code: 'custom', message: 'must be 1-20 increasing numbers of days (more than 0, at most 365), comma-separated, e.g. 1,3,5' });
      return days;
    })
    .default([1, 3, 5]),
  BILLING_ON_HOLD_DAYS: z.coerce.number().positive().max(365).default(7),
  BILLING_HTTP_GATEWAY_URL: z.string().url().optional(),
  BILLING_HTTP_GATEWAY_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(10_000),
  // How far ahead of its due date a recurring membership gets its lifecycle workflow: a start
  // further out waits (memberships.lifecycle_deferred_due) for the sweep beside the workers, so
  // a bulk import starts only what is coming due, not every membership at once.
  BILLING_LIFECYCLE_HORIZON_HOURS: z.coerce.number().min(1).max(87_600).default(24),

  // /register: how long the request waits for the registration workflow before answering 202.
  REGISTER_WAIT_SECONDS: z.coerce.number().min(0).max(300).default(30),

  // Isolated ("sovereign") tenants.
  // PostgreSQL servers for tenant databases: comma-separated `name=postgres://admin@host:port/postgres`
  // (or bare URLs, named host:port). Default: the main database's server.
  TENANT_DATABASE_HOSTS: z
    .string()
    .min(1)
    .superRefine((v, ctx) => {
      try {
        parseTenantHosts(v);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message.replace(/^TENANT_DATABASE_HOSTS: /, '') });
      }
    })
    .optional(),
  // 32-byte key (64 hex digits or base64) encrypting tenant database credentials at rest.
  // `npm start` creates one in DATA_DIR when unset; start:api/start:worker need it set.
  TENANT_CREDENTIALS_KEY: z
    .string()
    .refine((v) => /^[0-9a-fA-F]{64}$/.test(v) || Buffer.from(v, 'base64').length === 32, 'must be 32 bytes: 64 hex digits or base64')
    .optional(),
  // Where tenants' filesystem roots are created (default DATA_DIR/tenants).
  TENANT_FILES_ROOT: z.string().min(1).optional(),
  // How long POST .../verify and DELETE /tenants/{id} wait for their workflow before answering 202.
  TENANT_WAIT_SECONDS: z.coerce.number().min(0).max(300).default(10),

  // Translations: where human translations come from, and the AI provider that fills the rest.
  TRANSLATION_GLOTPRESS_URL_TEMPLATE: z
    .string()
    .url()
    .default('https://translate.wordpress.org/projects/wp-{type}s/{slug}/stable/{glotpress_locale}/default/export-translations/?format=po'),
  TRANSLATION_AI_BASE_URL: z.string().url().optional(),
  TRANSLATION_AI_MODEL: z.string().min(1).optional(),
  /** Sent as a Bearer token; never logged. */
  TRANSLATION_AI_API_KEY: z.string().min(1).optional(),
  TRANSLATION_AI_BATCH_SIZE: z.coerce.number().int().min(1).max(500).default(50),
  TRANSLATION_AI_MAX_TRIES: z.coerce.number().int().min(1).max(10).default(3),
  // Failures of the AI provider a job may have in all (its batches together) before it fails;
  // a worker stopping or dying mid-batch spends none of it.
  TRANSLATION_AI_ERROR_BUDGET: z.coerce.number().int().min(1).max(1000).default(10),
  TRANSLATION_AI_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(600).default(120),
  TRANSLATION_FETCH_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(600).default(30),
  // How long a job waits for approval before it is `expired` (fractions allowed: 0.5 is 12 hours).
  TRANSLATION_APPROVAL_TIMEOUT_DAYS: z.coerce.number().positive().max(365).default(30),
  // AI batches per workflow run before it continues as new: about 6 history events each, and the
  // server terminates a run past 51,200 (README "Shipping a workflow change").
  TRANSLATION_BATCHES_PER_RUN: z.coerce.number().int().min(1).max(5000).default(500),

  /**
   * Where server-side fetches (pot_url, GlotPress, the AI provider) may go although the address
   * is loopback, private, link-local or otherwise internal: comma-separated host names
   * (`glotpress.internal`, `*.corp.example`) and IP addresses or networks (`10.0.0.0/8`, `::1`).
   */
  OUTBOUND_ALLOWED_HOSTS: allowList.default({ hosts: [], networks: [] }),

  // Files every replica must see (chat attachments, thumbnails, language packs, tenants' uploads):
  // `local` keeps them under DATA_DIR (one host only), `s3` in a bucket of an S3-compatible store.
  STORAGE_DRIVER: z.enum(['local', 's3']).default('local'),
  S3_BUCKET: z
    .string()
    .regex(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/, 'must be a bucket name: 3 to 63 lower-case letters, digits, dots and hyphens')
    .optional(),
  /** Prepended to every key, e.g. `hostflow/` to share a bucket. */
  S3_PREFIX: z
    .string()
    .regex(/^([A-Za-z0-9._-]+\/)*[A-Za-z0-9._-]+\/?$/, 'must be a relative path such as hostflow/ (letters, digits, ".", "_", "-" and "/")')
    .refine((v) => !v.split('/').some((s) => s === '.' || s === '..'), 'must not hold "." or ".." segments')
    .optional(),
  /** Unset: AWS S3 of S3_REGION. Set for MinIO, Ceph, R2 and the like (http://minio.internal:9000). */
  S3_ENDPOINT: z.string().url().optional(),
  S3_REGION: z.string().min(1).default('us-east-1'),
  /** Both or neither; neither: the AWS SDK's default chain (AWS_* variables, instance or pod role). Never logged. */
  S3_ACCESS_KEY_ID: z.string().min(1).optional(),
  S3_SECRET_ACCESS_KEY: z.string().min(1).optional(),
  /** Path-style URLs (endpoint/bucket/key), which most S3-compatible stores other than AWS need. */
  S3_FORCE_PATH_STYLE: bool.default(false),

  // Support chat ({REST_PREFIX}/{CHAT_PRODUCT}-support-tickets/v1).
  CHAT_PRODUCT: z
    .string()
    .regex(/^[a-z0-9]+(-[a-z0-9]+)*$/, 'must be a lower-case slug, e.g. ultimate-multisite')
    .default('ultimate-multisite'),
  /** Comma-separated origins allowed to call the chat routes and open its WebSocket from a browser (`*` for any). */
  CHAT_ALLOWED_ORIGINS: z
    .string()
    .default('')
    .transform((v) => v.split(',').map((s) => s.trim().replace(/\/$/, '')).filter(Boolean))
    .refine((list) => list.every((o) => o === '*' || /^https?:\/\/[^/\s]+$/.test(o)), 'must be a comma-separated list of origins such as https://example.com, or *'),
  /** The chat widget's build (web/widget, built by `npm run build`), served at /chat/widget.js and /chat/demo.html. */
  CHAT_WIDGET_DIR: z.string().min(1).default(path.resolve(process.cwd(), 'dist/web/widget')),
  CHAT_ATTACHMENT_MAX_BYTES: z.coerce.number().int().min(1).max(1024 * 1024 * 1024).default(10 * 1024 * 1024),
  /**
   * Attachment quotas for customers (session tokens; agents are not limited), counted from the
   * rows in PostgreSQL so every API replica enforces the same limit: files and bytes per session
   * and per client address (req.ip) over a rolling window, then 429 with Retry-After.
   */
  CHAT_ATTACHMENT_QUOTA_WINDOW_SECONDS: z.coerce.number().int().min(60).max(30 * 86_400).default(86_400),
  CHAT_ATTACHMENT_SESSION_MAX_FILES: z.coerce.number().int().min(1).default(20),
  CHAT_ATTACHMENT_SESSION_MAX_TOTAL_BYTES: z.coerce.number().int().min(1).default(100 * 1024 * 1024),
  CHAT_ATTACHMENT_ADDRESS_MAX_FILES: z.coerce.number().int().min(1).default(100),
  CHAT_ATTACHMENT_ADDRESS_MAX_TOTAL_BYTES: z.coerce.number().int().min(1).default(500 * 1024 * 1024),
  /**
   * Thumbnail budget (sharp/libvips on libuv's thread pool): images over these input bytes or
   * pixels, or taking longer, get no thumbnail; at most CHAT_THUMBNAIL_CONCURRENCY are made at
   * once per process, and uploads arriving while all are busy get none.
   */
  CHAT_THUMBNAIL_MAX_BYTES: z.coerce.number().int().min(1).default(10 * 1024 * 1024),
  CHAT_THUMBNAIL_MAX_PIXELS: z.coerce.number().int().min(1).max(1_000_000_000).default(16_000_000),
  CHAT_THUMBNAIL_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(60).default(3),
  CHAT_THUMBNAIL_CONCURRENCY: z.coerce.number().int().min(1).max(16).default(2),
  /** Secret for realtime tokens and identity hashes; when unset a random one is kept in the database. */
  CHAT_TOKEN_SECRET: z.string().min(32, 'must be at least 32 characters').optional(),
  CHAT_REALTIME_TOKEN_TTL_SECONDS: z.coerce.number().int().min(10).max(3600).default(300),
  CHAT_SESSION_TOKEN_TTL_SECONDS: z.coerce.number().int().min(60).max(30 * 86_400).default(86_400),
  /** Absolute lifetime of a session's tokens, from the session's creation: no refresh extends past it. */
  CHAT_SESSION_TOKEN_MAX_AGE_SECONDS: z.coerce.number().int().min(60).max(365 * 86_400).default(30 * 86_400),
  /** A session waiting this long without an agent becomes a ticket (chatFollowUp workflow). */
  CHAT_WAIT_BEFORE_TICKET_SECONDS: z.coerce.number().int().min(1).max(7 * 86_400).default(300),
  CHAT_POLL_INTERVAL_SECONDS: z.coerce.number().int().min(10).max(300).default(15),
  /** false turns the WebSocket channel off: new sessions then fall back to a ticket (polling still works). */
  CHAT_REALTIME_ENABLED: bool.default(true),
  /**
   * POST /chat/sessions by callers that are not agents (anonymous, or a customer token): at most
   * this many per client address in the window, then 429 with Retry-After. Agents and the API
   * credentials are not limited.
   */
  CHAT_SESSION_CREATE_LIMIT: z.coerce.number().int().min(1).default(20),
  CHAT_SESSION_CREATE_WINDOW_SECONDS: z.coerce.number().int().min(1).max(86_400).default(60),
}).superRefine((c, ctx) => {
  if (c.WORKER_TASK_QUEUES) {
    const known = [c.TEMPORAL_TASK_QUEUE, c.TEMPORAL_BULK_TASK_QUEUE ?? `${c.TEMPORAL_TASK_QUEUE}-bulk`];
    if (!c.WORKER_TASK_QUEUES.length) ctx.addIssue({ code: 'custom', path: ['WORKER_TASK_QUEUES'], message: `names no queue: give ${known.join(', ')} or one of them` });
    for (const name of c.WORKER_TASK_QUEUES) {
      if (!known.includes(name)) ctx.addIssue({ code: 'custom', path: ['WORKER_TASK_QUEUES'], message: `"${name}" is neither the interactive queue (${known[0]}) nor the bulk queue (${known[1]})` });
    }
  }
  if (c.TEMPORAL_BULK_TASK_QUEUE === c.TEMPORAL_TASK_QUEUE) ctx.addIssue({ code: 'custom', path: ['TEMPORAL_BULK_TASK_QUEUE'], message: 'must differ from TEMPORAL_TASK_QUEUE' });
  if (c.STORAGE_DRIVER === 's3' && !c.S3_BUCKET) ctx.addIssue({ code: 'custom', path: ['S3_BUCKET'], message: 'is required when STORAGE_DRIVER=s3' });
  if (!!c.S3_ACCESS_KEY_ID !== !!c.S3_SECRET_ACCESS_KEY) {
    const missing = c.S3_ACCESS_KEY_ID ? 'S3_SECRET_ACCESS_KEY' : 'S3_ACCESS_KEY_ID';
    ctx.addIssue({ code: 'custom', path: [missing], message: 'S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY go together: set both, or neither for the default credential chain' });
  }
});

export type Config = z.infer<typeof schema>;

export class ConfigError extends Error {}

export interface LoadOptions {
  /** `npm start`: TENANT_CREDENTIALS_KEY, when unset, is the key kept beside the data (created on the first start). */
  credentialsKeyInDataDir?: boolean;
}

/** DATA_DIR/tenant-credentials.key, created (32 random bytes, hex) when missing. */
function credentialsKeyIn(dataDir: string): string {
  const keyFile = path.join(dataDir, 'tenant-credentials.key');
  fs.mkdirSync(dataDir, { recursive: true });
  if (!fs.existsSync(keyFile)) fs.writeFileSync(keyFile, crypto.randomBytes(32).toString('hex'), { mode: 0o600, flag: 'wx' });
  return fs.readFileSync(keyFile, 'utf8').trim();
}

/** The configuration, complete and frozen: built once, never changed afterwards. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, opts: LoadOptions = {}): Readonly<Config> {
  // Empty strings count as unset, as most process managers write them for blank values.
  const cleaned: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined && v !== '') cleaned[k] = v;
  const parsed = schema.safeParse(cleaned);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => {
      const name = String(i.path[0]);
      return `  ${name}=${JSON.stringify(cleaned[name] ?? '')}: ${i.message}`;
    });
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  const config = parsed.data;
  const key = opts.credentialsKeyInDataDir && !config.TENANT_CREDENTIALS_KEY ? { TENANT_CREDENTIALS_KEY: credentialsKeyIn(config.DATA_DIR) } : {};
  return Object.freeze({ ...config, ...key });
}

/** The REST namespace of the main API. */
export const WU_NAMESPACE = 'wu/v2';

/** The REST namespace of the support chat, e.g. ultimate-multisite-support-tickets/v1. */
export function chatNamespace(config: Pick<Config, 'CHAT_PRODUCT'>): string {
  return `${config.CHAT_PRODUCT}-support-tickets/v1`;
}
