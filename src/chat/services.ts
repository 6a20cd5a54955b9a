import type { RequestHandler } from 'express';
import { chatNamespace, type Config } from '../config';
import type { Db } from '../db/knex';
import type { RateLimits } from '../http/limits';
import type { Metrics } from '../http/metrics';
import { hostAllowed } from '../http/public-url';
import type { ObjectStorage } from '../infra/object-storage';
import { logger } from '../logger';
import type { SettingsStore } from '../settings/store';
import type { TemporalGateway } from '../temporal/gateway';
import { AgentStore } from './agents';
import { AttachmentStorage } from './attachments';
import { chatAuth } from './auth';
import { AgentAvailability, Availability } from './availability';
import { CannedReplies } from './canned';
import { AttachmentDownloads } from './downloads';
import { ChatFollowUps } from './followup';
import { ChatRealtime } from './realtime';
import { ChatReports } from './reports';
import { SessionActions } from './session-actions';
import { SessionStore } from './sessions';
import { Tickets } from './tickets';
import { ChatSecret } from './tokens';
import { AttachmentUploads } from './uploads';

export interface ChatDeps {
  config: Config;
  db: Db;
  settings: SettingsStore;
  temporal: TemporalGateway;
  metrics: Metrics;
  limits: RateLimits;
  /** Where attachments and thumbnails are stored (shared by every replica with the s3 driver). */
  storage: ObjectStorage;
}

/** The chat's services, built once per app; the routes only call them. */
export interface ChatServices {
  namespace: string;
  /** The namespace's path (`/wp-json/<namespace>`). */
  base: string;
  realtimePath: string;
  /** Identifies the caller of every chat route (see auth.ts). */
  authenticate: RequestHandler;
  secret: ChatSecret;
  realtime: ChatRealtime;
  sessions: SessionStore;
  actions: SessionActions;
  agents: AgentStore;
  canned: CannedReplies;
  availability: Availability;
  agentAvailability: AgentAvailability;
  reports: ChatReports;
  tickets: Tickets;
  downloads: AttachmentDownloads;
}

export function createChatServices(deps: ChatDeps): ChatServices {
  const { config, db } = deps;
  const namespace = chatNamespace(config);
  const base = `${config.REST_PREFIX}/${namespace}`;
  const realtimePath = `${base}/chat/realtime`;
  const secret = new ChatSecret(db, config);
  const sessions = new SessionStore(db, config.CHAT_SESSION_TOKEN_TTL_SECONDS, config.CHAT_SESSION_TOKEN_MAX_AGE_SECONDS);
  const agents = new AgentStore(db);
  const canned = new CannedReplies(db);
  const tickets = new Tickets(db);
  const storage = new AttachmentStorage(deps.storage, config.DATA_DIR);
  // Uploads a killed process left half-received (a day is far longer than any upload takes).
  void storage.sweepTemp(86_400_000).then(
    (removed) => removed && logger.info({ removed }, 'stale chat upload files removed'),
    (err) => logger.warn({ err }, 'sweeping stale chat upload files failed'),
  );
  // Session creation by non-agents, per client address (req.ip: TRUST_PROXY decides whether
  // X-Forwarded-For counts), shared by every replica as the failed authentications.
  const sessionCreation = deps.limits.perAddress({ name: 'chat_sessions', limit: config.CHAT_SESSION_CREATE_LIMIT, windowSeconds: config.CHAT_SESSION_CREATE_WINDOW_SECONDS });
  // Failed authentications on the chat have a counter of their own (as before the move to PostgreSQL).
  const authFailures = deps.limits.perAddress({ name: 'chat_auth_failures', limit: config.AUTH_FAILURE_LIMIT, windowSeconds: config.AUTH_FAILURE_WINDOW_SECONDS });
  const connection = (db.client.config as { connection?: { connectionString?: string } }).connection;
  const realtime = new ChatRealtime({
    db,
    connectionString: connection?.connectionString,
    enabled: config.CHAT_REALTIME_ENABLED,
    path: realtimePath,
    allowedOrigins: config.CHAT_ALLOWED_ORIGINS,
    ownHost: (host) => (config.PUBLIC_URL ? host === new URL(config.PUBLIC_URL).host : hostAllowed(host, config.ALLOWED_HOSTS)),
    secret,
    loadMessage: async (id) => {
      const message = await sessions.message(id);
      return message ? sessions.messageOut(message, base) : null;
    },
  });
  // The LISTEN connection starts when a server is attached (startHttp) or on ready(): an app
  // serving no WebSocket has no realtime channel, and its sessions fall back to tickets.
  const availability = new Availability(db, () => realtime.available(), config.CHAT_POLL_INTERVAL_SECONDS);
  const actions = new SessionActions({
    config,
    chatBase: base,
    realtimePath,
    sessions,
    agents,
    canned,
    tickets,
    availability,
    realtime,
    followUps: new ChatFollowUps(deps.temporal, config.CHAT_WAIT_BEFORE_TICKET_SECONDS),
    secret,
    uploads: new AttachmentUploads(db, storage, config),
    sessionCreation,
  });
  return {
    namespace,
    base,
    realtimePath,
    authenticate: chatAuth(db, deps.settings, authFailures, config.CHAT_SESSION_TOKEN_MAX_AGE_SECONDS),
    secret,
    realtime,
    sessions,
    actions,
    agents,
    canned,
    availability,
    agentAvailability: new AgentAvailability(availability, agents),
    reports: new ChatReports(db),
    tickets,
    downloads: new AttachmentDownloads(db, storage),
  };
}
