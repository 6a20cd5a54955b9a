import express, { Router, type NextFunction, type Request, type Response } from 'express';
import { refuseCrossSite } from '../http/cross-site';
import { sendStoredFile } from '../http/download';
import { invalidParams, notFoundHandler } from '../http/errors';
import { afterAuthentication, readBody } from '../http/input';
import { parseListQuery, setPagingHeaders } from '../http/list';
import { publicBase } from '../http/public-url';
import { parseId } from '../http/resource';
import type { RouteRegistry } from '../http/route-registry';
import { bodyObject, parseOrThrow } from '../http/validation';
import { agentRecord } from './agents';
import { callerOf, requireAdmin, requireAgent, requireSessionAgent, requireSessionCaller, unauthorized } from './auth';
import { cannedRecord } from './canned';
import { documentChat } from './docs';
import type { ChatRealtime } from './realtime';
import * as schemas from './schemas';
import { createChatServices, type ChatDeps, type ChatServices } from './services';
import { sessionRecord } from './sessions';
import { ticketListSpec } from './tickets';
import type { ChatSecret } from './tokens';
import { mountWidget } from './widget';

export interface ChatHandle {
  namespace: string;
  realtime: ChatRealtime;
  secret: ChatSecret;
  /** Serves the WebSocket endpoint on the HTTP server. */
  attach(server: import('node:http').Server): void;
  close(): Promise<void>;
}

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
  return Object.fromEntries(Object.entries(req.query).filter(([key]) => !key.startsWith('_') && !/^api[_-](key|secret)$/.test(key)));
}

const sessionId = (req: Request) => parseId(req, 'chat_session', 'session_id');

/** A session, its messages and attachments: its customer (with the session token) and agents. */
function mountSessionRoutes(router: Router, chat: ChatServices): void {
  const { actions, sessions } = chat;

  router.post('/chat/sessions', async (req, res) => {
    const caller = callerOf(req);
    await actions.admitStart(caller, req.ip ?? 'unknown');
    const input = parseOrThrow(schemas.createSessionSchema, jsonBody(req));
    res.status(201).json(await actions.start(input, caller, publicBase(req)));
  });

  router.get('/chat/sessions/:session_id', async (req, res) => {
    const caller = requireSessionCaller(req, req.params.session_id, { customer: true, agent: true });
    res.json(await actions.view(sessionId(req), caller));
  });

  router.get('/chat/sessions/:session_id/messages', async (req, res) => {
    requireSessionCaller(req, req.params.session_id, { customer: true, agent: true });
    const id = sessionId(req);
    const query = parseOrThrow(schemas.messagesQuery, ownQuery(req));
    res.json(await actions.messages(id, query.after, query.limit));
  });

  router.post('/chat/sessions/:session_id/messages', async (req, res) => {
    const caller = requireSessionCaller(req, req.params.session_id, { customer: true, agent: true });
    const id = sessionId(req);
    const input = parseOrThrow(schemas.postMessageSchema, jsonBody(req));
    res.status(201).json(await actions.post(id, caller, input));
  });

  router.post('/chat/sessions/:session_id/attachments', async (req, res) => {
    const caller = requireSessionCaller(req, req.params.session_id, { customer: true, agent: true });
    res.status(201).json(await actions.attach(sessionId(req), caller, req, req.ip ?? 'unknown'));
  });

  router.get('/chat/attachments/:attachment_id/download', async (req, res) => {
    const caller = callerOf(req);
    if (caller.kind === 'anonymous') throw unauthorized();
    const id = parseId(req, 'chat_attachment', 'attachment_id');
    const variant = schemas.parseDownloadVariant(req.query.variant);
    const download = await chat.downloads.open(caller, id, variant);
    await sendStoredFile(req, res, download.objects, download.key, { headers: download.headers, missing: download.missing });
  });

  router.post('/chat/sessions/:session_id/context', async (req, res) => {
    const caller = requireSessionCaller(req, req.params.session_id, { customer: true, agent: true });
    const id = sessionId(req);
    const input = parseOrThrow(schemas.contextSchema, jsonBody(req));
    res.json(await actions.updateContext(id, caller, input));
  });

  router.post('/chat/sessions/:session_id/token', async (req, res) => {
    const caller = requireSessionCaller(req, req.params.session_id, { customer: true, agent: true });
    const id = sessionId(req);
    const input = parseOrThrow(schemas.tokenSchema, jsonBody(req, { optional: true }));
    res.json(await actions.access(id, caller, input.refresh_session_token, publicBase(req)));
  });

  router.post('/chat/sessions/:session_id/status', async (req, res) => {
    const caller = requireSessionCaller(req, req.params.session_id, { customer: true, agent: true });
    const id = sessionId(req);
    const input = parseOrThrow(schemas.statusSchema, jsonBody(req));
    res.json(await actions.setStatus(id, caller, input.status));
  });

  router.post('/chat/sessions/:session_id/satisfaction', async (req, res) => {
    requireSessionCaller(req, req.params.session_id, { customer: true, agent: false });
    const id = sessionId(req);
    const input = parseOrThrow(schemas.satisfactionSchema, jsonBody(req));
    res.status(201).json(await sessions.rate(id, input.rating, input.comment || null));
  });

  // ---- agents' actions on a session ------------------------------------------------------
  router.post('/chat/sessions/:session_id/assign', async (req, res) => {
    const caller = requireSessionAgent(req, req.params.session_id);
    const id = sessionId(req);
    const input = parseOrThrow(schemas.assignSchema, jsonBody(req, { optional: true }));
    res.json(await actions.assign(id, caller, input.agent_id));
  });

  router.post('/chat/sessions/:session_id/metadata', async (req, res) => {
    requireSessionAgent(req, req.params.session_id);
    const id = sessionId(req);
    const input = parseOrThrow(schemas.metadataSchema, jsonBody(req));
    res.json(sessionRecord(await sessions.mergeMetadata(id, input.metadata)));
  });

  router.post('/chat/sessions/:session_id/link-ticket', async (req, res) => {
    requireSessionAgent(req, req.params.session_id);
    const id = sessionId(req);
    const input = parseOrThrow(schemas.linkTicketSchema, jsonBody(req));
    res.json(await actions.linkTicket(id, input.ticket_id));
  });

  router.post('/chat/sessions/:session_id/convert-ticket', async (req, res) => {
    const caller = requireSessionAgent(req, req.params.session_id);
    const id = sessionId(req);
    const input = parseOrThrow(schemas.convertTicketSchema, jsonBody(req, { optional: true }));
    res.status(201).json(await actions.convertToTicket(id, caller, input));
  });

  router.post('/chat/sessions/:session_id/agent-time', async (req, res) => {
    const caller = requireSessionAgent(req, req.params.session_id);
    const id = sessionId(req);
    const input = parseOrThrow(schemas.agentTimeSchema, jsonBody(req));
    res.status(201).json(await actions.logTime(id, caller, input));
  });
}

/** The agent console: session list, availability, reports, canned replies, agents. */
function mountConsoleRoutes(router: Router, chat: ChatServices): void {
  router.get('/chat/agent/sessions', async (req, res) => {
    const caller = requireAgent(req);
    const { list, scope } = schemas.parseSessionListQuery(ownQuery(req), caller.agentId);
    const page = await chat.sessions.list(list, scope);
    setPagingHeaders(req, res, list, page);
    res.json(page.rows.map(sessionRecord));
  });

  router.get('/chat/agent/availability', async (req, res) => {
    requireAgent(req);
    res.json(await chat.agentAvailability.overview());
  });
  router.post('/chat/agent/availability', async (req, res) => {
    const caller = requireAgent(req);
    const input = parseOrThrow(schemas.agentAvailabilitySchema, jsonBody(req));
    res.json(await chat.agentAvailability.update(caller, input));
  });

  router.get('/chat/agent/reports', async (req, res) => {
    requireAgent(req);
    const query = parseOrThrow(schemas.reportQuery, ownQuery(req));
    res.json(await chat.reports.report(query));
  });

  router.get('/chat/agent/canned-replies', async (req, res) => {
    const caller = requireAgent(req);
    const query = parseOrThrow(schemas.cannedQuery, ownQuery(req));
    res.json(await chat.actions.cannedReplies(caller, query));
  });
  router.post('/chat/agent/canned-replies', async (req, res) => {
    requireAdmin(req);
    const input = parseOrThrow(schemas.createCannedSchema, jsonBody(req));
    res.status(201).json(cannedRecord(await chat.canned.create(input)));
  });
  router.put('/chat/agent/canned-replies/:reply_id', async (req, res) => {
    requireAdmin(req);
    const id = parseId(req, 'chat_canned_reply', 'reply_id');
    const input = parseOrThrow(schemas.updateCannedSchema, jsonBody(req));
    res.json(cannedRecord(await chat.canned.update(id, input)));
  });
  router.delete('/chat/agent/canned-replies/:reply_id', async (req, res) => {
    requireAdmin(req);
    const id = parseId(req, 'chat_canned_reply', 'reply_id');
    res.json(cannedRecord(await chat.canned.remove(id)));
  });

  router.get('/chat/agent/agents', async (req, res) => {
    requireAgent(req);
    res.json((await chat.agents.list()).map(agentRecord));
  });
  router.post('/chat/agent/agents', async (req, res) => {
    requireAdmin(req);
    const input = parseOrThrow(schemas.createAgentSchema, jsonBody(req));
    const created = await chat.agents.create(input);
    res.status(201).json({ agent: agentRecord(created.agent), token: created.token });
  });
  router.put('/chat/agent/agents/:agent_id', async (req, res) => {
    requireAdmin(req);
    const id = parseId(req, 'chat_agent', 'agent_id');
    const input = parseOrThrow(schemas.updateAgentSchema, jsonBody(req));
    res.json(agentRecord(await chat.agents.update(id, input)));
  });
  router.post('/chat/agent/agents/:agent_id/token', async (req, res) => {
    requireAdmin(req);
    const id = parseId(req, 'chat_agent', 'agent_id');
    jsonBody(req, { optional: true });
    const rotated = await chat.agents.rotateToken(id);
    res.json({ agent: agentRecord(rotated.agent), token: rotated.token });
  });
}

/** Tickets as agents work them. */
function mountTicketRoutes(router: Router, chat: ChatServices): void {
  const ticketId = (req: Request) => parseId(req, 'ticket', 'ticket_id');
  router.get('/chat/agent/tickets', async (req, res) => {
    requireAgent(req);
    const list = parseListQuery(ownQuery(req), ticketListSpec);
    const page = await chat.tickets.list(list);
    setPagingHeaders(req, res, list, page);
    res.json(page.rows);
  });
  router.get('/chat/agent/tickets/:ticket_id', async (req, res) => {
    requireAgent(req);
    res.json(await chat.tickets.detail(ticketId(req)));
  });
  // Working a ticket: POST, PUT and PATCH (as WordPress' editable routes), partial bodies.
  const workTicket = async (req: Request, res: Response) => {
    const caller = requireAgent(req);
    const id = ticketId(req);
    const input = parseOrThrow(schemas.updateTicketSchema, jsonBody(req));
    res.json(await chat.tickets.update(id, input, caller.name));
  };
  router.post('/chat/agent/tickets/:ticket_id', workTicket);
  router.put('/chat/agent/tickets/:ticket_id', workTicket);
  router.patch('/chat/agent/tickets/:ticket_id', workTicket);
  router.post('/chat/agent/tickets/:ticket_id/notes', async (req, res) => {
    const caller = requireAgent(req);
    const id = ticketId(req);
    const input = parseOrThrow(schemas.ticketNoteSchema, jsonBody(req));
    res.status(201).json(await chat.tickets.addNote(id, caller.agentId, input.note));
  });
}

/** The support chat namespace: its own CORS, body reading and callers in front of the routes. */
export function mountChat(app: express.Express, registry: RouteRegistry, deps: ChatDeps): ChatHandle {
  const { config } = deps;
  const chat = createChatServices(deps);
  const { namespace, realtime } = chat;
  documentChat(registry, namespace);

  const router = Router();
  router.use((req, res, next) => {
    res.locals.mountPath = req.baseUrl;
    next();
  });
  router.use(chatCors(config.CHAT_ALLOWED_ORIGINS));
  router.use(refuseCrossSite(config.CHAT_ALLOWED_ORIGINS, 'Pages of other sites may call the chat when their origin is in CHAT_ALLOWED_ORIGINS.'));
  router.use(readBody(config, { form: false }));
  router.use(chat.authenticate);

  // ---- public ---------------------------------------------------------------------------
  // The namespace index, as WordPress serves one per namespace.
  router.get('/', (_req, res) => {
    const routes = Object.fromEntries(registry.routes.filter((route) => route.namespace === namespace).map((route) => [route.path, { namespace, methods: route.methods }]));
    res.json({ namespace, routes, realtime: { path: chat.realtimePath } });
  });

  router.get('/chat/availability', async (_req, res) => {
    res.json(await chat.availability.status());
  });

  router.use(afterAuthentication);
  mountSessionRoutes(router, chat);
  mountConsoleRoutes(router, chat);
  mountTicketRoutes(router, chat);

  router.use(notFoundHandler);
  app.use(chat.base, router);
  // The customers' widget (/chat/widget.js) and its demo page, talking to the routes above.
  mountWidget(app, { dir: config.CHAT_WIDGET_DIR, chatBase: chat.base });

  return {
    namespace,
    realtime,
    secret: chat.secret,
    attach: (server) => realtime.attach(server),
    close: () => realtime.close(),
  };
}
