import type { Request } from 'express';
import type { z } from 'zod';
import type { Config } from '../config';
import { ApiError, invalidParams } from '../http/errors';
import type { AddressLimiter } from '../http/limits';
import { logger } from '../logger';
import type { AgentStore } from './agents';
import { forbidden, unauthorized, type AgentCaller, type ChatCaller } from './auth';
import type { Availability } from './availability';
import { cannedRecord, fillPlaceholders, type CannedReplies } from './canned';
import type { ChatFollowUps } from './followup';
import type { ChatRealtime } from './realtime';
import type { agentTimeSchema, cannedQuery, contextSchema, convertTicketSchema, createSessionSchema, postMessageSchema } from './schemas';
import { assertOpen, attachmentRecord, messageRecord, sessionRecord, sessionView, type MessageRow, type SessionRow, type SessionStore } from './sessions';
import type { FallbackReason, Tickets } from './tickets';
import type { ChatSecret } from './tokens';
import type { AttachmentUploads } from './uploads';

const OFFLINE_NOTICE = 'Your conversation is saved as ticket #{{ticket_id}}; we will answer it by email, and you can keep writing here.';

export interface SessionActionsDeps {
  config: Config;
  /** The namespace's path (`/wp-json/<namespace>`): download URLs start with it. */
  chatBase: string;
  /** The WebSocket endpoint's path. */
  realtimePath: string;
  sessions: SessionStore;
  agents: AgentStore;
  canned: CannedReplies;
  tickets: Tickets;
  availability: Availability;
  realtime: ChatRealtime;
  followUps: ChatFollowUps;
  secret: ChatSecret;
  uploads: AttachmentUploads;
  /** Session creation by non-agents, per client address. */
  sessionCreation: AddressLimiter;
}

/** Who a message in the session is from: its customer, or the agent calling. */
function senderOf(caller: ChatCaller, session: SessionRow): { sender_type: 'customer' | 'agent'; agent_id: number | null; sender_name: string } {
  if (caller.kind === 'customer') return { sender_type: 'customer', agent_id: null, sender_name: session.customer_name || 'Customer' };
  if (caller.kind === 'agent') return { sender_type: 'agent', agent_id: caller.agentId, sender_name: caller.name };
  throw unauthorized();
}

/**
 * What customers and agents do in a session, past the routes' caller guards: each action's
 * rules, the follow-up it starts or signals, and the realtime events it publishes. Answers
 * what the routes answer (a session as the caller may see it).
 */
export class SessionActions {
  private readonly config: Config;
  private readonly sessions: SessionStore;

  constructor(private readonly deps: SessionActionsDeps) {
    this.config = deps.config;
    this.sessions = deps.sessions;
  }

  /**
   * Every attempt of a non-agent to start a session counts (valid or not), before anything is
   * read or written. A customer token is limited too: it is what any anonymous caller gets from
   * a first session.
   */
  async admitStart(caller: ChatCaller, address: string): Promise<void> {
    if (caller.kind === 'agent') return;
    const wait = await this.deps.sessionCreation.take(address);
    if (wait > 0) {
      throw new ApiError(
        429,
        'chat_too_many_sessions',
        `Too many chat sessions started from this address. Try again in ${wait} seconds.`,
        { retry_after: wait, limit: this.config.CHAT_SESSION_CREATE_LIMIT, window_seconds: this.config.CHAT_SESSION_CREATE_WINDOW_SECONDS },
        { 'Retry-After': String(wait) },
      );
    }
  }

  /**
   * A new session. Offline support, or a widget without realtime, makes it a ticket at once;
   * otherwise its follow-up starts (and when it cannot, the session becomes a ticket now).
   * `linkBase`: the public base URL the realtime URL is built on.
   */
  async start(input: z.output<typeof createSessionSchema>, caller: ChatCaller, linkBase: string) {
    const byAgent = caller.kind === 'agent';
    if (input.customer_id !== undefined && !byAgent) {
      if (!input.customer_hash) throw invalidParams({ customer_hash: 'customer_hash is required with customer_id (identity verification).' });
      if (!(await this.deps.secret.identityMatches(input.customer_id, input.customer_hash))) throw forbidden('customer_hash does not match customer_id.');
    }
    // Past the check above, a customer_id from a non-agent came with its matching hash.
    const verified = byAgent || input.customer_id !== undefined;
    const status = await this.deps.availability.status();
    const realtimeOk = this.deps.realtime.available() && input.realtime !== false;
    let fallback: { reason: FallbackReason; notice: string } | null = null;
    if (!status.online) fallback = { reason: 'offline', notice: `${status.message} ${OFFLINE_NOTICE}`.trim() };
    else if (!realtimeOk) fallback = { reason: 'realtime_unavailable', notice: `Live chat is not available right now. ${OFFLINE_NOTICE}` };
    const created = await this.sessions.create(input, fallback, { agent: byAgent, verified });
    let session = created.session;
    const messages = created.messages;
    if (!fallback) {
      const workflowId = await this.deps.followUps.start(Number(session.id), { customerId: session.customer_id, siteId: session.site_id });
      if (workflowId) session = await this.sessions.setFollowUp(Number(session.id), workflowId);
      else {
        const now = await this.sessions.fallBackToTicket(Number(session.id), 'follow_up_unavailable', OFFLINE_NOTICE);
        messages.push(now.message);
        session = now.session;
      }
    }
    const sessionId = Number(session.id);
    return {
      session: sessionView(session, caller),
      token: created.token,
      token_expires_at: session.token_expires_at.toISOString(),
      realtime: await this.realtimeFor(linkBase, sessionId, { kind: 'customer', sessionId }),
      poll_interval_seconds: this.config.CHAT_POLL_INTERVAL_SECONDS,
      availability: { online: status.online, reason: status.reason, message: status.message, expected_wait_seconds: status.expected_wait_seconds },
      messages: await Promise.all(messages.map((message) => this.messageOut(message))),
    };
  }

  async view(id: number, caller: ChatCaller) {
    return sessionView(await this.sessions.get(id), caller);
  }

  /** The messages after `after` (polling), with the session's status. */
  async messages(id: number, after: number, limit: number) {
    const session = await this.sessions.get(id);
    const page = await this.sessions.messages(id, after, limit);
    return {
      messages: page.rows.map((message) => messageRecord(message, page.attachments.get(Number(message.attachment_id)), this.deps.chatBase)),
      next_after: page.rows.length ? Number(page.rows[page.rows.length - 1].id) : after,
      has_more: page.hasMore,
      session_status: session.status,
      poll_interval_seconds: this.config.CHAT_POLL_INTERVAL_SECONDS,
    };
  }

  /**
   * A message from the customer or an agent (a canned reply, placeholders filled, for agents).
   * An agent answering takes an unassigned session, and the follow-up stops waiting.
   */
  async post(id: number, caller: ChatCaller, input: z.output<typeof postMessageSchema>) {
    const session = await this.sessions.get(id);
    const sender = senderOf(caller, session);
    let body = input.body;
    if (input.canned_reply_id !== undefined) {
      if (caller.kind !== 'agent') throw invalidParams({ canned_reply_id: 'canned_reply_id is for agents.' });
      const reply = await this.deps.canned.get(input.canned_reply_id).catch(() => {
        throw invalidParams({ canned_reply_id: 'canned_reply_id is not an existing canned reply.' });
      });
      body = fillPlaceholders(reply.body, { customer_name: session.customer_name, customer_email: session.customer_email, agent_name: caller.name, session_id: id, ticket_id: session.ticket_id });
    }
    const posted = await this.sessions.post(id, { ...sender, body: body! });
    const record = await this.publishMessage(posted.message);
    const before = posted.before;
    if (caller.kind === 'agent') {
      let updated = posted.session;
      if (caller.agentId !== null && (await this.sessions.takeIfUnassigned(id, caller.agentId))) updated = await this.sessions.get(id);
      if (before.status === 'waiting' || before.assigned_agent_id === null) await this.deps.followUps.signal(before.follow_up_workflow_id, 'assigned');
      if (updated.status !== before.status || updated.assigned_agent_id !== before.assigned_agent_id) void this.publishSession(updated);
    } else if (posted.session.status !== before.status) void this.publishSession(posted.session);
    return record;
  }

  /** A file sent in the session (the multipart request `upload`), with its message. */
  async attach(id: number, caller: ChatCaller, upload: Request, address: string) {
    const session = await this.sessions.get(id);
    assertOpen(session);
    const out = await this.deps.uploads.upload(upload, { sessionId: id, sender: senderOf(caller, session), address });
    // Committed: from here on the files belong to the rows and are never removed.
    const message = await this.publishMessage(out.message);
    return { attachment: attachmentRecord(out.att, this.deps.chatBase), message };
  }

  async updateContext(id: number, caller: ChatCaller, input: z.output<typeof contextSchema>) {
    const session = await this.sessions.updateContext(id, input);
    void this.publishSession(session);
    return sessionView(session, caller);
  }

  /** A fresh realtime token, and (for the customer, when asked) a new session token. */
  async access(id: number, caller: ChatCaller, refreshSessionToken: boolean | undefined, linkBase: string) {
    if (refreshSessionToken && caller.kind !== 'customer') throw invalidParams({ refresh_session_token: 'refresh_session_token is for the customer of the session.' });
    const session = await this.sessions.get(id);
    const out: Record<string, unknown> = { session_id: id, realtime: await this.realtimeFor(linkBase, id, caller), poll_interval_seconds: this.config.CHAT_POLL_INTERVAL_SECONDS };
    if (refreshSessionToken) {
      const refreshed = await this.sessions.refreshToken(id);
      out.session_token = refreshed.token;
      out.session_token_expires_at = refreshed.expires.toISOString();
    } else if (caller.kind === 'customer') out.session_token_expires_at = session.token_expires_at.toISOString();
    return out;
  }

  /** Customers may only close their session; anything but active ends the follow-up's wait. */
  async setStatus(id: number, caller: ChatCaller, status: 'active' | 'resolved' | 'closed') {
    if (caller.kind === 'customer' && status !== 'closed') throw forbidden('Customers can only close their session.');
    const changed = await this.sessions.setStatus(id, status);
    if (status !== 'active') await this.deps.followUps.signal(changed.session.follow_up_workflow_id, 'closed');
    void this.publishSession(changed.session);
    return sessionView(changed.session, caller);
  }

  /** Assigns the session to an active agent (default: the caller), or unassigns it (null). */
  async assign(id: number, caller: AgentCaller, agentId: number | null | undefined) {
    const targetId = agentId === undefined ? caller.agentId : agentId;
    if (agentId === undefined && targetId === null) throw invalidParams({ agent_id: 'agent_id is required with the API credentials.' });
    let target: { id: number; name: string } | null = null;
    if (targetId !== null) {
      const agent = await this.deps.agents.get(targetId);
      if (!agent || !agent.active) throw invalidParams({ agent_id: 'agent_id is not an active agent.' });
      target = { id: Number(agent.id), name: agent.name };
    }
    const assigned = await this.sessions.assign(id, target, caller.name);
    if (target) await this.deps.followUps.signal(assigned.session.follow_up_workflow_id, 'assigned');
    if (assigned.notice) await this.publishMessage(assigned.notice);
    void this.publishSession(assigned.session);
    return sessionRecord(assigned.session);
  }

  async linkTicket(id: number, ticketId: number) {
    const linked = await this.sessions.linkTicket(id, ticketId);
    void this.publishSession(linked.session);
    return { session: sessionRecord(linked.session), ticket: await this.deps.tickets.detail(ticketId), copied_messages: linked.copied };
  }

  async convertToTicket(id: number, caller: AgentCaller, input: z.output<typeof convertTicketSchema>) {
    const converted = await this.sessions.convertToTicket(id, input, caller.agentId);
    void this.publishSession(converted.session);
    return { session: sessionRecord(converted.session), ticket: await this.deps.tickets.detail(converted.ticketId) };
  }

  /** Time an agent spent on the session: its own, or (administrators) another agent's. */
  async logTime(id: number, caller: AgentCaller, input: z.output<typeof agentTimeSchema>) {
    if (input.agent_id !== undefined && input.agent_id !== caller.agentId && !caller.admin) throw forbidden('Only administrators log time for another agent.');
    const agentId = input.agent_id ?? caller.agentId;
    if (agentId === null) throw invalidParams({ agent_id: 'agent_id is required with the API credentials.' });
    return this.sessions.logTime(id, agentId, input.minutes, input.note ?? '');
  }

  /** The canned replies (matching `search`); with session_id, each rendered for that session and the caller. */
  async cannedReplies(caller: AgentCaller, query: z.output<typeof cannedQuery>) {
    let session: SessionRow | undefined;
    if (query.session_id !== undefined) {
      session = await this.sessions.find(query.session_id);
      if (!session) throw invalidParams({ session_id: 'session_id is not an existing session.' });
    }
    const replies = await this.deps.canned.list(query.search?.trim() || undefined);
    return replies.map((reply) =>
      cannedRecord(
        reply,
        session
          ? fillPlaceholders(reply.body, { customer_name: session.customer_name, customer_email: session.customer_email, agent_name: caller.name, session_id: Number(session.id), ticket_id: session.ticket_id })
          : undefined,
      ),
    );
  }

  /** The caller's signed access to the session's realtime channel; null when realtime is off. */
  private async realtimeFor(linkBase: string, sessionId: number, caller: ChatCaller) {
    if (!this.config.CHAT_REALTIME_ENABLED) return null;
    const exp = Math.floor(Date.now() / 1000) + this.config.CHAT_REALTIME_TOKEN_TTL_SECONDS;
    const token = await this.deps.secret.signRealtime({
      session_id: sessionId,
      role: caller.kind === 'customer' ? 'customer' : 'agent',
      agent_id: caller.kind === 'agent' ? caller.agentId : null,
      exp,
    });
    return { token, expires_at: new Date(exp * 1000).toISOString(), url: `${linkBase.replace(/^http/, 'ws')}${this.deps.realtimePath}?token=${token}` };
  }

  private messageOut(message: MessageRow) {
    return this.sessions.messageOut(message, this.deps.chatBase);
  }

  /** Publishes the message to the session's sockets; answers its record. */
  private async publishMessage(message: MessageRow) {
    const record = await this.messageOut(message);
    await this.deps.realtime
      .publish({ type: 'message', session_id: Number(message.session_id), message: record }, { message_id: Number(message.id) })
      .catch((err) => logger.warn({ err }, 'chat publish failed'));
    return record;
  }

  private publishSession(session: SessionRow): Promise<void> {
    return this.deps.realtime
      .publish({ type: 'session', session_id: Number(session.id), status: session.status, assigned_agent_id: session.assigned_agent_id, ticket_id: session.ticket_id, fallback_reason: session.fallback_reason })
      .catch((err) => logger.warn({ err }, 'chat publish failed'));
  }
}
