import express, { Router, type NextFunction, type Request, type Response } from 'express';
import { chatNamespace, type Config } from '../config';
import type { Db } from '../db/knex';
import { refuseCrossSite } from '../http/cross-site';
import { sendStoredFile } from '../http/download';
import { ApiError, invalidParams, notFoundHandler, notFoundItem } from '../http/errors';
import { afterAuthentication, readBody } from '../http/input';
import type { RateLimits } from '../http/limits';
import { parseListQuery, setPagingHeaders } from '../http/list';
import type { Metrics } from '../http/metrics';
import { publicBase } from '../http/public-url';
import { parseId } from '../http/resource';
import type { RouteRegistry } from '../http/route-registry';
import { bodyObject, parseOrThrow } from '../http/validation';
import type { ObjectStorage } from '../infra/object-storage';
import { logger } from '../logger';
import type { SettingsStore } from '../settings/store';
import type { TemporalGateway } from '../temporal/gateway';
import { agentRecord, AgentStore } from './agents';
import { AttachmentStorage, fileName } from './attachments';
import { callerOf, chatAuth, forbidden, requireAdmin, requireAgent, requireSessionCaller, unauthorized, type ChatCaller } from './auth';
import { Availability } from './availability';
import { cannedRecord, CannedReplies, fillPlaceholders } from './canned';
import { documentChat } from './docs';
import { ChatFollowUps } from './followup';
import { ChatRealtime } from './realtime';
import { chatReport } from './reports';
import * as S from './schemas';
import { assertOpen, attachmentRecord, insertMessage, lockSession, messageRecord, sessionListSpec, sessionRecord, SessionStore, sessionView, type MessageRow, type SessionRow } from './sessions';
import { createTicketForSession, ticketDetail, updateTicket, type FallbackReason } from './tickets';
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

export interface ChatHandle {
  namespace: string;
  realtime: ChatRealtime;
  secret: ChatSecret;
  /** Serves the WebSocket endpoint on the HTTP server. */
  attach(server: import('node:http').Server): void;
  close(): Promise<void>;
}

const OFFLINE_NOTICE = 'Your conversation is saved as ticket #{{ticket_id}}; we will answer it by email, and you can keep writing here.';

/** CORS for the chat namespace only: the widget calls it from customers' browsers. */
function chatCors(origins: string[]) {
  const any = origins.includes('*');
  return (req: Request, res: Response, next: NextFunction) => {
    const origin = req.get('origin');
    const allowed = !!origin && (any || origins.includes(origin));
    if (allowed) {
      res.setHeader('Access-Control-Allow-Origin', any ? '*' : origin!);
      res.append('Vary', 'Origin');
      res.setHeader('Access-Control-Expose-Headers', 'X-WP-Total, X-WP-TotalPages, X-WP-Total-Exact, Link, X-Request-Id, Retry-After');
    }
    if (req.method === 'OPTIONS') {
      if (allowed) {
        res.setHeader('Access-Control-Allow-Methods', 'GET, POST, PUT, PATCH, DELETE, OPTIONS');
        res.setHeader('Access-Control-Allow-Headers', 'Authorization, Content-Type, X-Request-Id, X-HTTP-Method-Override');
        res.setHeader('Access-Control-Max-Age', '600');
      }
      res.status(204).end();
      return;
    }
    next();
  };
}

/**
 * Body of a JSON route, after the caller passed: a held-back parse error first. No body at all
 * is 400 where the document says the body is required, {} where it says `optional`.
 */
function jsonBody(req: Request, opts: { optional?: boolean } = {}): Record<string, unknown> {
  if (req.bodyError) throw req.bodyError;
  if (req.body === undefined && !opts.optional) throw invalidParams({ body: 'body is required: a JSON object (Content-Type: application/json), {} for no fields.' });
  return bodyObject(req.body);
}

/** Query parameters other than WordPress' underscore ones and credentials. */
function ownQuery(req: Request): Record<string, unknown> {
  return Object.fromEntries(Object.entries(req.query).filter(([k]) => !k.startsWith('_') && !/^api[_-](key|secret)$/.test(k)));
}

function senderOf(caller: ChatCaller, session: SessionRow): { sender_type: 'customer' | 'agent'; agent_id: number | null; sender_name: string } {
  if (caller.kind === 'customer') return { sender_type: 'customer', agent_id: null, sender_name: session.customer_name || 'Customer' };
  if (caller.kind === 'agent') return { sender_type: 'agent', agent_id: caller.agentId, sender_name: caller.name };
  throw unauthorized();
}

export function mountChat(app: express.Express, registry: RouteRegistry, deps: ChatDeps): ChatHandle {
  const { config, db, settings } = deps;
  const namespace = chatNamespace(config);
  const base = `${config.REST_PREFIX}/${namespace}`;
  const realtimePath = `${base}/chat/realtime`;
  const secret = new ChatSecret(db, config);
  const sessions = new SessionStore(db, config.CHAT_SESSION_TOKEN_TTL_SECONDS, config.CHAT_SESSION_TOKEN_MAX_AGE_SECONDS);
  const agents = new AgentStore(db);
  const canned = new CannedReplies(db);
  const storage = new AttachmentStorage(deps.storage, config.DATA_DIR);
  // Uploads a killed process left half-received (a day is far longer than any upload takes).
  void storage.sweepTemp(86_400_000).then(
    (n) => n && logger.info({ removed: n }, 'stale chat upload files removed'),
    (err) => logger.warn({ err }, 'sweeping stale chat upload files failed'),
  );
  const uploads = new AttachmentUploads(db, storage, config);
  // Session creation by non-agents, per client address (req.ip: TRUST_PROXY decides whether
  // X-Forwarded-For counts), shared by every replica as the failed authentications.
  const sessionCreation = deps.limits.perAddress({ name: 'chat_sessions', limit: config.CHAT_SESSION_CREATE_LIMIT, windowSeconds: config.CHAT_SESSION_CREATE_WINDOW_SECONDS });
  // Failed authentications on the chat have a counter of their own (as before the move to PostgreSQL).
  const authFailures = deps.limits.perAddress({ name: 'chat_auth_failures', limit: config.AUTH_FAILURE_LIMIT, windowSeconds: config.AUTH_FAILURE_WINDOW_SECONDS });
  const followUps = new ChatFollowUps(deps.temporal, config.CHAT_WAIT_BEFORE_TICKET_SECONDS);
  const connection = (db.client.config as { connection?: { connectionString?: string } }).connection;
  const realtime = new ChatRealtime({
    db,
    connectionString: connection?.connectionString,
    enabled: config.CHAT_REALTIME_ENABLED,
    path: realtimePath,
    allowedOrigins: config.CHAT_ALLOWED_ORIGINS,
    secret,
    loadMessage: async (id) => {
      const m = await sessions.message(id);
      if (!m) return null;
      return messageRecord(m, (await sessions.attachmentsOf([m])).get(Number(m.attachment_id)), base);
    },
  });
  // The LISTEN connection starts when a server is attached (startHttp) or on ready(): an app
  // serving no WebSocket has no realtime channel, and its sessions fall back to tickets.
  const availability = new Availability(db, () => realtime.available(), config.CHAT_POLL_INTERVAL_SECONDS);
  documentChat(registry, namespace);

  const realtimeFor = async (req: Request, sessionId: number, caller: ChatCaller) => {
    if (!config.CHAT_REALTIME_ENABLED) return null;
    const exp = Math.floor(Date.now() / 1000) + config.CHAT_REALTIME_TOKEN_TTL_SECONDS;
    const token = await secret.signRealtime({
      session_id: sessionId,
      role: caller.kind === 'customer' ? 'customer' : 'agent',
      agent_id: caller.kind === 'agent' ? caller.agentId : null,
      exp,
    });
    const httpBase = publicBase(req);
    return { token, expires_at: new Date(exp * 1000).toISOString(), url: `${httpBase.replace(/^http/, 'ws')}${realtimePath}?token=${token}` };
  };
  const messageOut = async (m: MessageRow) => messageRecord(m, (await sessions.attachmentsOf([m])).get(Number(m.attachment_id)), base);
  const publishMessage = async (m: MessageRow) => {
    const record = await messageOut(m);
    await realtime.publish({ type: 'message', session_id: Number(m.session_id), message: record }, { message_id: Number(m.id) }).catch((err) => logger.warn({ err }, 'chat publish failed'));
    return record;
  };
  const publishSession = (s: SessionRow) =>
    realtime
      .publish({ type: 'session', session_id: Number(s.id), status: s.status, assigned_agent_id: s.assigned_agent_id, ticket_id: s.ticket_id, fallback_reason: s.fallback_reason })
      .catch((err) => logger.warn({ err }, 'chat publish failed'));

  /** Gives the session a ticket now, with a system message (no follow-up could be scheduled). */
  const fallBackNow = async (sessionId: number, reason: FallbackReason) =>
    db.transaction(async (trx) => {
      let s = await lockSession(trx, sessionId);
      const ticketId = s.ticket_id ? Number(s.ticket_id) : await createTicketForSession(trx, s, reason);
      s = await lockSession(trx, sessionId);
      const r = await insertMessage(trx, s, { sender_type: 'system', sender_name: 'System', body: OFFLINE_NOTICE.replace('{{ticket_id}}', String(ticketId)) });
      return r;
    });

  const router = Router();
  router.use((req, res, next) => {
    res.locals.mountPath = req.baseUrl;
    next();
  });
  router.use(chatCors(config.CHAT_ALLOWED_ORIGINS));
  router.use(refuseCrossSite(config.CHAT_ALLOWED_ORIGINS, 'Pages of other sites may call the chat when their origin is in CHAT_ALLOWED_ORIGINS.'));
  router.use(readBody(config, { form: false }));
  router.use(chatAuth(db, settings, authFailures, config.CHAT_SESSION_TOKEN_MAX_AGE_SECONDS));

  // ---- public ---------------------------------------------------------------------------
  // The namespace index, as WordPress serves one per namespace.
  router.get('/', (_req, res) => {
    const routes = Object.fromEntries(registry.routes.filter((r) => r.namespace === namespace).map((r) => [r.path, { namespace, methods: r.methods }]));
    res.json({ namespace, routes, realtime: { path: realtimePath } });
  });

  router.get('/chat/availability', async (_req, res) => {
    res.json(await availability.status());
  });

  router.use(afterAuthentication);

  // ---- sessions (customers) -------------------------------------------------------------
  router.post('/chat/sessions', async (req, res) => {
    const caller = callerOf(req);
    // Every attempt of a non-agent counts (valid or not), before anything is read or written.
    // A customer token is limited too: it is what any anonymous caller gets from a first session.
    if (caller.kind !== 'agent') {
      const wait = await sessionCreation.take(req.ip ?? 'unknown');
      if (wait > 0) {
        throw new ApiError(
          429,
          'chat_too_many_sessions',
          `Too many chat sessions started from this address. Try again in ${wait} seconds.`,
          { retry_after: wait, limit: config.CHAT_SESSION_CREATE_LIMIT, window_seconds: config.CHAT_SESSION_CREATE_WINDOW_SECONDS },
          { 'Retry-After': String(wait) },
        );
      }
    }
    const input = parseOrThrow(S.createSessionSchema, jsonBody(req));
    const byAgent = caller.kind === 'agent';
    if (input.customer_id !== undefined && !byAgent) {
      if (!input.customer_hash) throw invalidParams({ customer_hash: 'customer_hash is required with customer_id (identity verification).' });
      if (!(await secret.identityMatches(input.customer_id, input.customer_hash))) throw forbidden('customer_hash does not match customer_id.');
    }
    // Past the check above, a customer_id from a non-agent came with its matching hash.
    const verified = byAgent || input.customer_id !== undefined;
    const status = await availability.status();
    const realtimeOk = realtime.available() && input.realtime !== false;
    let fallback: { reason: FallbackReason; notice: string } | null = null;
    if (!status.online) fallback = { reason: 'offline', notice: `${status.message} ${OFFLINE_NOTICE}`.trim() };
    else if (!realtimeOk) fallback = { reason: 'realtime_unavailable', notice: `Live chat is not available right now. ${OFFLINE_NOTICE}` };
    const created = await sessions.create(input, fallback, { agent: byAgent, verified });
    let session = created.session;
    const messages = created.messages;
    if (!fallback) {
      const workflowId = await followUps.start(Number(session.id), { customerId: session.customer_id, siteId: session.site_id });
      if (workflowId) session = await sessions.setFollowUp(Number(session.id), workflowId);
      else {
        const r = await fallBackNow(Number(session.id), 'follow_up_unavailable');
        messages.push(r.message);
        session = r.session;
      }
    }
    res.status(201).json({
      session: sessionView(session, caller),
      token: created.token,
      token_expires_at: session.token_expires_at.toISOString(),
      realtime: await realtimeFor(req, Number(session.id), { kind: 'customer', sessionId: Number(session.id) }),
      poll_interval_seconds: config.CHAT_POLL_INTERVAL_SECONDS,
      availability: { online: status.online, reason: status.reason, message: status.message, expected_wait_seconds: status.expected_wait_seconds },
      messages: await Promise.all(messages.map(messageOut)),
    });
  });

  router.get('/chat/sessions/:session_id', async (req, res) => {
    const caller = requireSessionCaller(req, req.params.session_id, { customer: true, agent: true });
    res.json(sessionView(await sessions.get(parseId(req, 'chat_session', 'session_id')), caller));
  });

  router.get('/chat/sessions/:session_id/messages', async (req, res) => {
    requireSessionCaller(req, req.params.session_id, { customer: true, agent: true });
    const id = parseId(req, 'chat_session', 'session_id');
    const q = parseOrThrow(S.messagesQuery, ownQuery(req));
    const session = await sessions.get(id);
    const after = q.after;
    const page = await sessions.messages(id, after, q.limit);
    res.json({
      messages: page.rows.map((m) => messageRecord(m, page.attachments.get(Number(m.attachment_id)), base)),
      next_after: page.rows.length ? Number(page.rows[page.rows.length - 1].id) : after,
      has_more: page.hasMore,
      session_status: session.status,
      poll_interval_seconds: config.CHAT_POLL_INTERVAL_SECONDS,
    });
  });

  router.post('/chat/sessions/:session_id/messages', async (req, res) => {
    const caller = requireSessionCaller(req, req.params.session_id, { customer: true, agent: true });
    const id = parseId(req, 'chat_session', 'session_id');
    const input = parseOrThrow(S.postMessageSchema, jsonBody(req));
    const session = await sessions.get(id);
    const sender = senderOf(caller, session);
    let body = input.body;
    if (input.canned_reply_id !== undefined) {
      if (caller.kind !== 'agent') throw invalidParams({ canned_reply_id: 'canned_reply_id is for agents.' });
      const reply = await canned.get(input.canned_reply_id).catch(() => {
        throw invalidParams({ canned_reply_id: 'canned_reply_id is not an existing canned reply.' });
      });
      body = fillPlaceholders(reply.body, { customer_name: session.customer_name, customer_email: session.customer_email, agent_name: caller.name, session_id: id, ticket_id: session.ticket_id });
    }
    const r = await sessions.post(id, { ...sender, body: body! });
    const record = await publishMessage(r.message);
    if (caller.kind === 'agent') {
      let updated = r.session;
      if (caller.agentId !== null && (await sessions.takeIfUnassigned(id, caller.agentId))) updated = await sessions.get(id);
      if (r.before.status === 'waiting' || r.before.assigned_agent_id === null) await followUps.signal(r.before.follow_up_workflow_id, 'assigned');
      if (updated.status !== r.before.status || updated.assigned_agent_id !== r.before.assigned_agent_id) void publishSession(updated);
    } else if (r.session.status !== r.before.status) void publishSession(r.session);
    res.status(201).json(record);
  });

  router.post('/chat/sessions/:session_id/attachments', async (req, res) => {
    const caller = requireSessionCaller(req, req.params.session_id, { customer: true, agent: true });
    const id = parseId(req, 'chat_session', 'session_id');
    const session = await sessions.get(id);
    assertOpen(session);
    const out = await uploads.upload(req, { sessionId: id, sender: senderOf(caller, session), address: req.ip ?? 'unknown' });
    // Committed: from here on the files belong to the rows and are never removed.
    const message = await publishMessage(out.message);
    res.status(201).json({ attachment: attachmentRecord(out.att, base), message });
  });

  router.get('/chat/attachments/:attachment_id/download', async (req, res) => {
    const caller = callerOf(req);
    if (caller.kind === 'anonymous') throw unauthorized();
    const id = parseId(req, 'chat_attachment', 'attachment_id');
    const variant = req.query.variant;
    if (variant !== undefined && variant !== 'original' && variant !== 'thumbnail') throw invalidParams({ variant: 'variant is not one of original and thumbnail.' });
    const att = await db('chat_attachments').where({ id }).first();
    // Another session's attachment answers exactly as a missing one: ids tell nothing.
    if (!att || (caller.kind === 'customer' && Number(att.session_id) !== caller.sessionId)) throw notFoundItem('chat_attachment');
    const thumb = variant === 'thumbnail';
    const storageName: string | null = thumb ? att.thumbnail_storage_name : att.storage_name;
    if (!storageName) throw new ApiError(404, 'chat_attachment_no_thumbnail', 'This attachment has no thumbnail.');
    // fileName: rows stored before names took the detected type's extension are served with it too.
    const filename = thumb ? `thumbnail-${att.name.replace(/\.[^.]*$/, '')}.png` : fileName(att.name, att.mime_type);
    const ascii = filename.replace(/[^\x20-\x7e]/g, '_').replace(/["\\]/g, '_');
    const missing = () => new ApiError(404, 'chat_attachment_missing', 'The file of this attachment is missing.');
    // Only names we generate map to a key: a tampered row reads as a missing file.
    if (!AttachmentStorage.isName(storageName)) throw missing();
    await sendStoredFile(req, res, storage.objects, storage.keyOf(storageName), {
      headers: {
        'Content-Type': thumb ? 'image/png' : att.mime_type === 'text/plain' ? 'text/plain; charset=utf-8' : att.mime_type,
        'Content-Disposition': `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(filename)}`,
        'X-Content-Type-Options': 'nosniff',
        'Content-Security-Policy': "default-src 'none'; sandbox",
        'Cache-Control': 'private, no-store',
      },
      missing,
    });
  });

  router.post('/chat/sessions/:session_id/context', async (req, res) => {
    const caller = requireSessionCaller(req, req.params.session_id, { customer: true, agent: true });
    const id = parseId(req, 'chat_session', 'session_id');
    const input = parseOrThrow(S.contextSchema, jsonBody(req));
    const s = await sessions.updateContext(id, input);
    void publishSession(s);
    res.json(sessionView(s, caller));
  });

  router.post('/chat/sessions/:session_id/token', async (req, res) => {
    const caller = requireSessionCaller(req, req.params.session_id, { customer: true, agent: true });
    const id = parseId(req, 'chat_session', 'session_id');
    const input = parseOrThrow(S.tokenSchema, jsonBody(req, { optional: true }));
    if (input.refresh_session_token && caller.kind !== 'customer') throw invalidParams({ refresh_session_token: 'refresh_session_token is for the customer of the session.' });
    const s = await sessions.get(id);
    const out: Record<string, unknown> = { session_id: id, realtime: await realtimeFor(req, id, caller), poll_interval_seconds: config.CHAT_POLL_INTERVAL_SECONDS };
    if (input.refresh_session_token) {
      const t = await sessions.refreshToken(id);
      out.session_token = t.token;
      out.session_token_expires_at = t.expires.toISOString();
    } else if (caller.kind === 'customer') out.session_token_expires_at = s.token_expires_at.toISOString();
    res.json(out);
  });

  router.post('/chat/sessions/:session_id/status', async (req, res) => {
    const caller = requireSessionCaller(req, req.params.session_id, { customer: true, agent: true });
    const id = parseId(req, 'chat_session', 'session_id');
    const input = parseOrThrow(S.statusSchema, jsonBody(req));
    if (caller.kind === 'customer' && input.status !== 'closed') throw forbidden('Customers can only close their session.');
    const r = await sessions.setStatus(id, input.status);
    if (input.status !== 'active') await followUps.signal(r.session.follow_up_workflow_id, 'closed');
    void publishSession(r.session);
    res.json(sessionView(r.session, caller));
  });

  router.post('/chat/sessions/:session_id/satisfaction', async (req, res) => {
    requireSessionCaller(req, req.params.session_id, { customer: true, agent: false });
    const id = parseId(req, 'chat_session', 'session_id');
    const input = parseOrThrow(S.satisfactionSchema, jsonBody(req));
    res.status(201).json(await sessions.rate(id, input.rating, input.comment || null));
  });

  // ---- session actions (agents) ---------------------------------------------------------
  router.post('/chat/sessions/:session_id/assign', async (req, res) => {
    const caller = requireSessionCaller(req, req.params.session_id, { customer: false, agent: true }) as Extract<ChatCaller, { kind: 'agent' }>;
    const id = parseId(req, 'chat_session', 'session_id');
    const input = parseOrThrow(S.assignSchema, jsonBody(req, { optional: true }));
    const targetId = input.agent_id === undefined ? caller.agentId : input.agent_id;
    if (input.agent_id === undefined && targetId === null) throw invalidParams({ agent_id: 'agent_id is required with the API credentials.' });
    let target: { id: number; name: string } | null = null;
    if (targetId !== null) {
      const a = await agents.get(targetId);
      if (!a || !a.active) throw invalidParams({ agent_id: 'agent_id is not an active agent.' });
      target = { id: Number(a.id), name: a.name };
    }
    const r = await sessions.assign(id, target, caller.name);
    if (target) await followUps.signal(r.session.follow_up_workflow_id, 'assigned');
    if (r.notice) await publishMessage(r.notice);
    void publishSession(r.session);
    res.json(sessionRecord(r.session));
  });

  router.post('/chat/sessions/:session_id/metadata', async (req, res) => {
    requireSessionCaller(req, req.params.session_id, { customer: false, agent: true });
    const id = parseId(req, 'chat_session', 'session_id');
    const input = parseOrThrow(S.metadataSchema, jsonBody(req));
    res.json(sessionRecord(await sessions.mergeMetadata(id, input.metadata)));
  });

  router.post('/chat/sessions/:session_id/link-ticket', async (req, res) => {
    requireSessionCaller(req, req.params.session_id, { customer: false, agent: true });
    const id = parseId(req, 'chat_session', 'session_id');
    const input = parseOrThrow(S.linkTicketSchema, jsonBody(req));
    const r = await sessions.linkTicket(id, input.ticket_id);
    void publishSession(r.session);
    res.json({ session: sessionRecord(r.session), ticket: await ticketDetail(db, input.ticket_id), copied_messages: r.copied });
  });

  router.post('/chat/sessions/:session_id/convert-ticket', async (req, res) => {
    const caller = requireSessionCaller(req, req.params.session_id, { customer: false, agent: true }) as Extract<ChatCaller, { kind: 'agent' }>;
    const id = parseId(req, 'chat_session', 'session_id');
    const input = parseOrThrow(S.convertTicketSchema, jsonBody(req, { optional: true }));
    const r = await sessions.convertToTicket(id, input, caller.agentId);
    void publishSession(r.session);
    res.status(201).json({ session: sessionRecord(r.session), ticket: await ticketDetail(db, r.ticketId) });
  });

  router.post('/chat/sessions/:session_id/agent-time', async (req, res) => {
    const caller = requireSessionCaller(req, req.params.session_id, { customer: false, agent: true }) as Extract<ChatCaller, { kind: 'agent' }>;
    const id = parseId(req, 'chat_session', 'session_id');
    const input = parseOrThrow(S.agentTimeSchema, jsonBody(req));
    if (input.agent_id !== undefined && input.agent_id !== caller.agentId && !caller.admin) throw forbidden('Only administrators log time for another agent.');
    const agentId = input.agent_id ?? caller.agentId;
    if (agentId === null) throw invalidParams({ agent_id: 'agent_id is required with the API credentials.' });
    res.status(201).json(await sessions.logTime(id, agentId, input.minutes, input.note ?? ''));
  });

  // ---- agent console --------------------------------------------------------------------
  router.get('/chat/agent/sessions', async (req, res) => {
    const caller = requireAgent(req);
    const { assignment, ...rest } = ownQuery(req);
    let scope: Parameters<SessionStore['list']>[1] = { op: 'any' };
    const errors: Record<string, string> = {};
    if (assignment !== undefined) {
      if (assignment === 'unassigned') scope = { op: 'unassigned' };
      else if (assignment === 'assigned') scope = { op: 'assigned' };
      else if (assignment === 'mine') {
        if (caller.agentId === null) errors.assignment = 'assignment=mine needs an agent token (the API credentials are no agent).';
        else scope = { op: 'agent', agentId: caller.agentId };
      } else if (assignment !== 'any') errors.assignment = 'assignment is not one of any, assigned, unassigned, and mine.';
    }
    let q;
    try {
      q = parseListQuery(rest, sessionListSpec);
    } catch (err) {
      if (err instanceof ApiError && Object.keys(errors).length) throw invalidParams({ ...(err.extra.params as Record<string, string>), ...errors });
      throw err;
    }
    if (Object.keys(errors).length) throw invalidParams(errors);
    const page = await sessions.list(q, scope);
    setPagingHeaders(req, res, q, page);
    res.json(page.rows.map(sessionRecord));
  });

  const agentAvailability = async () => {
    const [status, hours, list] = await Promise.all([availability.status(), availability.hours(), agents.list()]);
    return { status, business_hours: { ...hours, open_now: status.business_hours.open_now }, agents: list.map(agentRecord) };
  };
  router.get('/chat/agent/availability', async (req, res) => {
    requireAgent(req);
    res.json(await agentAvailability());
  });
  router.post('/chat/agent/availability', async (req, res) => {
    const caller = requireAgent(req);
    const input = parseOrThrow(S.agentAvailabilitySchema, jsonBody(req));
    if (input.business_hours !== undefined && !caller.admin) throw forbidden('Only administrators change the business hours.');
    if (input.agent_id !== undefined && input.agent_id !== caller.agentId && !caller.admin) throw forbidden('Only administrators set the presence of another agent.');
    if (input.presence !== undefined) {
      const target = input.agent_id ?? caller.agentId;
      if (target === null) throw invalidParams({ agent_id: 'agent_id is required with the API credentials.' });
      if (!(await agents.get(target))) throw invalidParams({ agent_id: 'agent_id is not an existing agent.' });
      await agents.setPresence(target, input.presence);
    }
    if (input.business_hours) await availability.setHours(input.business_hours as Parameters<Availability['setHours']>[0]);
    res.json(await agentAvailability());
  });

  router.get('/chat/agent/reports', async (req, res) => {
    requireAgent(req);
    const q = parseOrThrow(S.reportQuery, ownQuery(req));
    const to = q.to ? new Date(q.to) : new Date();
    const from = q.from ? new Date(q.from) : new Date(to.getTime() - 30 * 86_400_000);
    if (from > to) throw invalidParams({ from: 'from must not be later than to.' });
    res.json(await chatReport(db, from, to));
  });

  router.get('/chat/agent/canned-replies', async (req, res) => {
    const caller = requireAgent(req);
    const q = parseOrThrow(S.cannedQuery, ownQuery(req));
    let session: SessionRow | undefined;
    if (q.session_id !== undefined) {
      session = await db('chat_sessions').where({ id: q.session_id }).first();
      if (!session) throw invalidParams({ session_id: 'session_id is not an existing session.' });
    }
    const rows = await canned.list(q.search?.trim() || undefined);
    res.json(
      rows.map((r) =>
        cannedRecord(
          r,
          session
            ? fillPlaceholders(r.body, { customer_name: session.customer_name, customer_email: session.customer_email, agent_name: caller.name, session_id: Number(session.id), ticket_id: session.ticket_id })
            : undefined,
        ),
      ),
    );
  });
  router.post('/chat/agent/canned-replies', async (req, res) => {
    requireAdmin(req);
    const input = parseOrThrow(S.createCannedSchema, jsonBody(req));
    res.status(201).json(cannedRecord(await canned.create(input)));
  });
  router.put('/chat/agent/canned-replies/:reply_id', async (req, res) => {
    requireAdmin(req);
    const id = parseId(req, 'chat_canned_reply', 'reply_id');
    const input = parseOrThrow(S.updateCannedSchema, jsonBody(req));
    res.json(cannedRecord(await canned.update(id, input)));
  });
  router.delete('/chat/agent/canned-replies/:reply_id', async (req, res) => {
    requireAdmin(req);
    const id = parseId(req, 'chat_canned_reply', 'reply_id');
    res.json(cannedRecord(await canned.remove(id)));
  });

  router.get('/chat/agent/agents', async (req, res) => {
    requireAgent(req);
    res.json((await agents.list()).map(agentRecord));
  });
  router.post('/chat/agent/agents', async (req, res) => {
    requireAdmin(req);
    const input = parseOrThrow(S.createAgentSchema, jsonBody(req));
    const r = await agents.create(input);
    res.status(201).json({ agent: agentRecord(r.agent), token: r.token });
  });
  router.put('/chat/agent/agents/:agent_id', async (req, res) => {
    requireAdmin(req);
    const id = parseId(req, 'chat_agent', 'agent_id');
    const input = parseOrThrow(S.updateAgentSchema, jsonBody(req));
    res.json(agentRecord(await agents.update(id, input)));
  });
  router.post('/chat/agent/agents/:agent_id/token', async (req, res) => {
    requireAdmin(req);
    const id = parseId(req, 'chat_agent', 'agent_id');
    jsonBody(req, { optional: true });
    const r = await agents.rotateToken(id);
    res.json({ agent: agentRecord(r.agent), token: r.token });
  });

  router.get('/chat/agent/tickets/:ticket_id', async (req, res) => {
    requireAgent(req);
    res.json(await ticketDetail(db, parseId(req, 'ticket', 'ticket_id')));
  });
  // Working a ticket: POST, PUT and PATCH (as WordPress' editable routes), partial bodies.
  const workTicket = async (req: Request, res: Response) => {
    const caller = requireAgent(req);
    const id = parseId(req, 'ticket', 'ticket_id');
    const input = parseOrThrow(S.updateTicketSchema, jsonBody(req));
    await updateTicket(db, id, input, caller.name);
    res.json(await ticketDetail(db, id));
  };
  router.post('/chat/agent/tickets/:ticket_id', workTicket);
  router.put('/chat/agent/tickets/:ticket_id', workTicket);
  router.patch('/chat/agent/tickets/:ticket_id', workTicket);
  router.post('/chat/agent/tickets/:ticket_id/notes', async (req, res) => {
    const caller = requireAgent(req);
    const id = parseId(req, 'ticket', 'ticket_id');
    const input = parseOrThrow(S.ticketNoteSchema, jsonBody(req));
    await ticketDetail(db, id);
    await db('ticket_notes').insert({ ticket_id: id, agent_id: caller.agentId, note: input.note });
    await db('tickets').where({ id }).update({ date_modified: db.fn.now() });
    res.status(201).json(await ticketDetail(db, id));
  });

  router.use(notFoundHandler);
  app.use(base, router);

  return {
    namespace,
    realtime,
    secret,
    attach: (server) => realtime.attach(server),
    close: () => realtime.close(),
  };
}
