import type { Knex } from 'knex';
import type { Db } from '../db/knex';
import { runList, type ListQuery, type ListSpec } from '../db/list';
import { isoDate } from '../db/timestamps';
import { recordEvent } from '../events/record';
import { conflict, invalidParams, notFoundItem } from '../http/errors';
import { appendToTicket, copyTranscript, createTicketForSession, type FallbackReason, type TicketPriority } from './tickets';
import { makeToken } from './tokens';

/**
 * Sessions and their messages.
 * Status: waiting (no agent yet) -> assigned (an agent took it) -> active (an agent answered)
 * -> resolved (the agent considers it done; a new customer message reopens it) -> closed
 * (final: no more messages).
 */
export type SessionStatus = 'waiting' | 'assigned' | 'active' | 'resolved' | 'closed';
export type SenderType = 'customer' | 'agent' | 'system';

export interface SessionRow {
  id: number;
  status: SessionStatus;
  customer_id: number | null;
  customer_name: string;
  customer_email: string;
  site_id: number | null;
  identity_verified: boolean;
  page_url: string | null;
  page_title: string | null;
  referrer: string | null;
  locale: string | null;
  metadata: Record<string, string>;
  assigned_agent_id: number | null;
  ticket_id: number | null;
  fallback_reason: FallbackReason | null;
  token_sha256: string;
  token_expires_at: Date;
  follow_up_workflow_id: string | null;
  assigned_at: Date | null;
  first_response_at: Date | null;
  resolved_at: Date | null;
  closed_at: Date | null;
  last_message_at: Date | null;
  date_created: Date;
  date_modified: Date;
}

export interface MessageRow {
  id: number;
  session_id: number;
  sender_type: SenderType;
  agent_id: number | null;
  sender_name: string;
  body: string;
  attachment_id: number | null;
  date_created: Date;
}

export interface AttachmentRow {
  id: number;
  session_id: number;
  uploader_type: 'customer' | 'agent';
  name: string;
  mime_type: string;
  size: number;
  sha256: string;
  width: number | null;
  height: number | null;
  storage_name: string;
  thumbnail_storage_name: string | null;
  date_created: Date;
}

export function sessionRecord(session: SessionRow) {
  return {
    id: Number(session.id),
    status: session.status,
    customer_id: session.customer_id === null ? null : Number(session.customer_id),
    customer_name: session.customer_name,
    customer_email: session.customer_email,
    site_id: session.site_id === null ? null : Number(session.site_id),
    identity_verified: session.identity_verified,
    context: { page_url: session.page_url, page_title: session.page_title, referrer: session.referrer, locale: session.locale },
    metadata: session.metadata ?? {},
    assigned_agent_id: session.assigned_agent_id === null ? null : Number(session.assigned_agent_id),
    ticket_id: session.ticket_id === null ? null : Number(session.ticket_id),
    fallback_reason: session.fallback_reason,
    follow_up_workflow_id: session.follow_up_workflow_id,
    assigned_at: isoDate(session.assigned_at),
    first_response_at: isoDate(session.first_response_at),
    resolved_at: isoDate(session.resolved_at),
    closed_at: isoDate(session.closed_at),
    last_message_at: isoDate(session.last_message_at),
    date_created: isoDate(session.date_created)!,
    date_modified: isoDate(session.date_modified)!,
  };
}
export type SessionRecord = ReturnType<typeof sessionRecord>;

export const AGENT_ONLY_FIELDS = ['metadata', 'follow_up_workflow_id', 'site_id', 'identity_verified'] as const;

/**
 * What a caller sees of a session: agents everything; customers (and anonymous callers creating
 * one) not the metadata agents keep on it, the follow-up workflow id, nor the site and whether
 * the identity is verified (an unknown site_id from a visitor is dropped: showing the site
 * would tell whether it exists).
 */
export function sessionView(session: SessionRow, caller: { kind: string }) {
  const record = sessionRecord(session);
  if (caller.kind === 'agent') return record;
  const customerView: Partial<SessionRecord> = { ...record };
  for (const k of AGENT_ONLY_FIELDS) delete customerView[k];
  return customerView as Omit<SessionRecord, (typeof AGENT_ONLY_FIELDS)[number]>;
}

export function attachmentRecord(a: AttachmentRow, chatBase: string) {
  const download = `${chatBase}/chat/attachments/${a.id}/download`;
  return {
    id: Number(a.id),
    session_id: Number(a.session_id),
    name: a.name,
    type: a.mime_type,
    size: Number(a.size),
    sha256: a.sha256,
    width: a.width,
    height: a.height,
    download_url: download,
    thumbnail_url: a.thumbnail_storage_name ? `${download}?variant=thumbnail` : null,
    date_created: isoDate(a.date_created)!,
  };
}

export function messageRecord(m: MessageRow, attachment: AttachmentRow | undefined, chatBase: string) {
  return {
    id: Number(m.id),
    session_id: Number(m.session_id),
    sender_type: m.sender_type,
    agent_id: m.agent_id === null ? null : Number(m.agent_id),
    sender_name: m.sender_name,
    body: m.body,
    attachment: attachment ? attachmentRecord(attachment, chatBase) : null,
    date_created: isoDate(m.date_created)!,
  };
}
export type MessageRecord = ReturnType<typeof messageRecord>;

/**
 * Inserts a message and keeps the session (status, first response, last message) and its
 * ticket in step, in the caller's transaction. The session row must be locked by the caller.
 */
export async function insertMessage(
  trx: Knex,
  session: SessionRow,
  m: { sender_type: SenderType; agent_id?: number | null; sender_name: string; body: string; attachment_id?: number | null },
): Promise<{ message: MessageRow; session: SessionRow }> {
  const [message] = await trx('chat_messages')
    .insert({ session_id: session.id, sender_type: m.sender_type, agent_id: m.agent_id ?? null, sender_name: m.sender_name, body: m.body, attachment_id: m.attachment_id ?? null })
    .returning('*');
  const changes: Record<string, unknown> = { last_message_at: message.date_created, date_modified: trx.fn.now() };
  if (m.sender_type === 'agent') {
    if (!session.first_response_at) changes.first_response_at = message.date_created;
    if (session.status !== 'closed') changes.status = 'active';
    if (session.status === 'resolved') changes.resolved_at = null;
  } else if (m.sender_type === 'customer' && session.status === 'resolved') {
    changes.status = 'active';
    changes.resolved_at = null;
  }
  const [updated] = await trx('chat_sessions').where({ id: session.id }).update(changes).returning('*');
  if (session.ticket_id) await appendToTicket(trx, Number(session.ticket_id), message);
  return { message, session: updated };
}

export async function lockSession(trx: Knex, id: number): Promise<SessionRow> {
  const session = await trx('chat_sessions').where({ id }).forUpdate().first();
  if (!session) throw notFoundItem('chat_session');
  return session;
}

export function assertOpen(session: SessionRow): void {
  if (session.status === 'closed') throw conflict('chat_session_closed', 'The session is closed.');
}

export const sessionListSpec: ListSpec = {
  idColumn: 'chat_sessions.id',
  dateCreatedColumn: 'chat_sessions.date_created',
  searchable: ['chat_sessions.customer_name', 'chat_sessions.customer_email', 'chat_sessions.page_url', 'chat_sessions.page_title'],
  searchTable: 'chat_sessions',
  sortable: {
    id: 'chat_sessions.id',
    date_created: 'chat_sessions.date_created',
    date_modified: 'chat_sessions.date_modified',
    last_message_at: 'chat_sessions.last_message_at',
    status: 'chat_sessions.status',
  },
  filters: {
    status: { column: 'chat_sessions.status', type: { enum: ['waiting', 'assigned', 'active', 'resolved', 'closed'] } },
    assigned_agent_id: { column: 'chat_sessions.assigned_agent_id', type: 'int' },
    customer_id: { column: 'chat_sessions.customer_id', type: 'int' },
    customer_email: { column: 'chat_sessions.customer_email', type: 'ci' },
    site_id: { column: 'chat_sessions.site_id', type: 'int' },
    ticket_id: { column: 'chat_sessions.ticket_id', type: 'int' },
  },
};

export interface CreateSessionInput {
  customer_id?: number;
  customer_name?: string;
  customer_email?: string;
  site_id?: number;
  page_url?: string;
  page_title?: string;
  referrer?: string;
  locale?: string;
  metadata?: Record<string, string>;
  message?: string;
}

/** Which sessions an agent's list holds, by assignment. */
export type AssignmentScope = { op: 'any' } | { op: 'unassigned' } | { op: 'assigned' } | { op: 'agent'; agentId: number };

export class SessionStore {
  constructor(
    private readonly db: Db,
    private readonly tokenTtlSeconds: number,
    /** Absolute lifetime of the session's tokens from its creation (CHAT_SESSION_TOKEN_MAX_AGE_SECONDS). */
    private readonly tokenMaxAgeSeconds: number,
  ) {}

  async get(id: number): Promise<SessionRow> {
    const session = await this.find(id);
    if (!session) throw notFoundItem('chat_session');
    return session;
  }

  async find(id: number): Promise<SessionRow | undefined> {
    return this.db('chat_sessions').where({ id }).first();
  }

  /**
   * Creates a session (and its opening message). With a fallback reason, the session gets a
   * ticket holding the conversation at once, with a system message saying so.
   * `by.agent`: an unknown site_id is refused (400); for anyone else it is dropped, so the
   * answer does not tell which sites exist. `by.verified`: the customer is proven (an agent, or
   * customer_id with a matching customer_hash).
   */
  async create(
    input: CreateSessionInput,
    fallback: { reason: FallbackReason; notice: string } | null,
    by: { agent: boolean; verified: boolean },
  ): Promise<{ session: SessionRow; token: string; messages: MessageRow[] }> {
    return this.db.transaction(async (trx) => {
      const errors: Record<string, string> = {};
      let name = input.customer_name ?? '';
      let email = input.customer_email ?? '';
      if (input.customer_id !== undefined) {
        const customer = await trx('customers').join('users', 'users.id', 'customers.user_id').where('customers.id', input.customer_id).first('users.display_name', 'users.username', 'users.email');
        if (!customer) errors.customer_id = 'customer_id is not an existing customer.';
        else {
          name ||= customer.display_name || customer.username;
          email ||= customer.email;
        }
      }
      let siteId = input.site_id ?? null;
      if (siteId !== null && !(await trx('sites').where({ id: siteId }).first('id'))) {
        if (by.agent) errors.site_id = 'site_id is not an existing site.';
        siteId = null;
      }
      if (Object.keys(errors).length) throw invalidParams(errors);

      const [row] = await trx('chat_sessions')
        .insert({
          customer_id: input.customer_id ?? null,
          customer_name: name,
          customer_email: email,
          site_id: siteId,
          identity_verified: by.verified,
          page_url: input.page_url ?? null,
          page_title: input.page_title ?? null,
          referrer: input.referrer ?? null,
          locale: input.locale ?? null,
          metadata: JSON.stringify(input.metadata ?? {}),
          token_sha256: 'pending',
          token_expires_at: new Date(Date.now() + Math.min(this.tokenTtlSeconds, this.tokenMaxAgeSeconds) * 1000),
        })
        .returning('*');
      const { token, digest } = makeToken('customer', Number(row.id));
      let session: SessionRow = (await trx('chat_sessions').where({ id: row.id }).update({ token_sha256: digest }).returning('*'))[0];
      const messages: MessageRow[] = [];
      if (input.message) {
        const opening = await insertMessage(trx, session, { sender_type: 'customer', sender_name: name || 'Customer', body: input.message });
        messages.push(opening.message);
        session = opening.session;
      }
      if (!fallback) await recordEvent(trx, { slug: 'chat_session_waiting', objectId: Number(session.id), payload: sessionRecord(session) });
      if (fallback) {
        const ticketId = await createTicketForSession(trx, session, fallback.reason);
        session = await lockSession(trx, session.id);
        const notice = await insertMessage(trx, session, { sender_type: 'system', sender_name: 'System', body: fallback.notice.replace('{{ticket_id}}', String(ticketId)) });
        messages.push(notice.message);
        session = notice.session;
      }
      return { session, token, messages };
    });
  }

  async setFollowUp(id: number, workflowId: string): Promise<SessionRow> {
    const [session] = await this.db('chat_sessions').where({ id }).update({ follow_up_workflow_id: workflowId }).returning('*');
    return session;
  }

  async list(q: ListQuery, assignment: AssignmentScope) {
    const base = () => {
      const qb = this.db('chat_sessions').select('chat_sessions.*');
      if (assignment.op === 'unassigned') qb.whereNull('chat_sessions.assigned_agent_id');
      else if (assignment.op === 'assigned') qb.whereNotNull('chat_sessions.assigned_agent_id');
      else if (assignment.op === 'agent') qb.where('chat_sessions.assigned_agent_id', assignment.agentId);
      return qb;
    };
    return runList<SessionRow>(this.db, base, q, sessionListSpec);
  }

  async messages(sessionId: number, after: number, limit: number): Promise<{ rows: MessageRow[]; attachments: Map<number, AttachmentRow>; hasMore: boolean }> {
    const rows: MessageRow[] = await this.db('chat_messages').where({ session_id: sessionId }).where('id', '>', after).orderBy('id', 'asc').limit(limit + 1);
    const hasMore = rows.length > limit;
    if (hasMore) rows.pop();
    const ids = rows.map((message) => message.attachment_id).filter((x): x is number => x !== null);
    const attachments: AttachmentRow[] = ids.length ? await this.db('chat_attachments').whereIn('id', ids) : [];
    return { rows, attachments: new Map(attachments.map((attachment) => [Number(attachment.id), attachment])), hasMore };
  }

  async attachmentsOf(rows: MessageRow[]): Promise<Map<number, AttachmentRow>> {
    const ids = rows.map((message) => message.attachment_id).filter((x): x is number => x !== null);
    const attachments: AttachmentRow[] = ids.length ? await this.db('chat_attachments').whereIn('id', ids) : [];
    return new Map(attachments.map((attachment) => [Number(attachment.id), attachment]));
  }

  async message(id: number): Promise<MessageRow | undefined> {
    return this.db('chat_messages').where({ id }).first();
  }

  /** A message as the API shows it, with its attachment (`chatBase`: the namespace's path, for the download URLs). */
  async messageOut(message: MessageRow, chatBase: string): Promise<MessageRecord> {
    return messageRecord(message, (await this.attachmentsOf([message])).get(Number(message.attachment_id)), chatBase);
  }

  /**
   * Gives the session a ticket now (the one it has, or a new one holding the conversation),
   * with a system message saying so: `notice`, its {{ticket_id}} filled.
   */
  async fallBackToTicket(id: number, reason: FallbackReason, notice: string): Promise<{ message: MessageRow; session: SessionRow }> {
    return this.db.transaction(async (trx) => {
      const locked = await lockSession(trx, id);
      const ticketId = locked.ticket_id ? Number(locked.ticket_id) : await createTicketForSession(trx, locked, reason);
      const session = await lockSession(trx, id);
      return insertMessage(trx, session, { sender_type: 'system', sender_name: 'System', body: notice.replace('{{ticket_id}}', String(ticketId)) });
    });
  }

  async post(sessionId: number, m: Parameters<typeof insertMessage>[2]): Promise<{ message: MessageRow; session: SessionRow; before: SessionRow }> {
    return this.db.transaction(async (trx) => {
      const before = await lockSession(trx, sessionId);
      assertOpen(before);
      const inserted = await insertMessage(trx, before, m);
      return { ...inserted, before };
    });
  }

  /** An agent replying to an unassigned session takes it. */
  async takeIfUnassigned(sessionId: number, agentId: number): Promise<boolean> {
    const taken = await this.db('chat_sessions').where({ id: sessionId }).whereNull('assigned_agent_id').update({ assigned_agent_id: agentId, assigned_at: this.db.fn.now() });
    return taken > 0;
  }

  async updateContext(id: number, ctx: { page_url?: string | null; page_title?: string | null; referrer?: string | null; locale?: string | null }): Promise<SessionRow> {
    return this.db.transaction(async (trx) => {
      const session = await lockSession(trx, id);
      assertOpen(session);
      const [row] = await trx('chat_sessions').where({ id }).update({ ...ctx, date_modified: trx.fn.now() }).returning('*');
      return row;
    });
  }

  async mergeMetadata(id: number, patch: Record<string, string | null>): Promise<SessionRow> {
    return this.db.transaction(async (trx) => {
      const session = await lockSession(trx, id);
      const next: Record<string, string> = { ...(session.metadata ?? {}) };
      for (const [k, v] of Object.entries(patch)) {
        if (v === null) delete next[k];
        else next[k] = v;
      }
      if (Object.keys(next).length > 50) throw invalidParams({ metadata: 'metadata must hold at most 50 keys in all.' });
      const [row] = await trx('chat_sessions').where({ id }).update({ metadata: JSON.stringify(next), date_modified: trx.fn.now() }).returning('*');
      return row;
    });
  }

  /** Assigns (agentId) or unassigns (null). Returns the session before and after. */
  async assign(id: number, agent: { id: number; name: string } | null, by: string): Promise<{ before: SessionRow; session: SessionRow; notice: MessageRow | null }> {
    return this.db.transaction(async (trx) => {
      const before = await lockSession(trx, id);
      assertOpen(before);
      const changes: Record<string, unknown> = { date_modified: trx.fn.now() };
      if (agent) {
        changes.assigned_agent_id = agent.id;
        if (!before.assigned_at) changes.assigned_at = trx.fn.now();
        if (before.status === 'waiting') changes.status = 'assigned';
      } else {
        changes.assigned_agent_id = null;
        if (before.status === 'assigned') changes.status = 'waiting';
      }
      let [session] = await trx('chat_sessions').where({ id }).update(changes).returning('*');
      if (session.status === 'waiting' && before.status !== 'waiting') await recordEvent(trx, { slug: 'chat_session_waiting', objectId: id, payload: sessionRecord(session) });
      let notice: MessageRow | null = null;
      if (agent && Number(before.assigned_agent_id) !== agent.id) {
        const joined = await insertMessage(trx, session, { sender_type: 'system', sender_name: 'System', body: `${agent.name} joined the chat${by !== agent.name ? ` (assigned by ${by})` : ''}.` });
        notice = joined.message;
        session = joined.session;
      }
      return { before, session, notice };
    });
  }

  async setStatus(id: number, status: 'active' | 'resolved' | 'closed'): Promise<{ before: SessionRow; session: SessionRow }> {
    return this.db.transaction(async (trx) => {
      const before = await lockSession(trx, id);
      if (before.status === 'closed' && status !== 'closed') throw conflict('chat_session_closed', 'The session is closed.');
      const changes: Record<string, unknown> = { status, date_modified: trx.fn.now() };
      if (status === 'resolved') changes.resolved_at = before.resolved_at ?? trx.fn.now();
      if (status === 'closed') {
        changes.closed_at = before.closed_at ?? trx.fn.now();
        // Closing counts as resolving for the resolution time when it was not resolved before.
        if (!before.resolved_at) changes.resolved_at = trx.fn.now();
      }
      if (status === 'active') changes.resolved_at = null;
      const [session] = await trx('chat_sessions').where({ id }).update(changes).returning('*');
      return { before, session };
    });
  }

  async linkTicket(id: number, ticketId: number): Promise<{ session: SessionRow; copied: number }> {
    return this.db.transaction(async (trx) => {
      const before = await lockSession(trx, id);
      if (!(await trx('tickets').where({ id: ticketId }).first('id'))) throw invalidParams({ ticket_id: 'ticket_id is not an existing ticket.' });
      if (before.ticket_id && Number(before.ticket_id) !== ticketId) {
        throw conflict('chat_session_has_ticket', `The session is already linked to ticket ${before.ticket_id}.`, { ticket_id: Number(before.ticket_id) });
      }
      const copied = await copyTranscript(trx, ticketId, id);
      const [session] = await trx('chat_sessions')
        .where({ id })
        .update({ ticket_id: ticketId, fallback_reason: before.fallback_reason ?? 'linked', date_modified: trx.fn.now() })
        .returning('*');
      return { session, copied };
    });
  }

  async convertToTicket(id: number, opts: { subject?: string; priority?: TicketPriority; category?: string; note?: string }, agentId: number | null): Promise<{ session: SessionRow; ticketId: number }> {
    return this.db.transaction(async (trx) => {
      const session = await lockSession(trx, id);
      if (session.ticket_id) throw conflict('chat_session_has_ticket', `The session already has ticket ${session.ticket_id}.`, { ticket_id: Number(session.ticket_id) });
      const ticketId = await createTicketForSession(trx, session, 'converted', opts);
      if (opts.note) await trx('ticket_notes').insert({ ticket_id: ticketId, agent_id: agentId, note: opts.note });
      return { session: await trx('chat_sessions').where({ id }).first(), ticketId };
    });
  }

  async logTime(id: number, agentId: number, minutes: number, note: string) {
    await this.get(id);
    const agent = await this.db('chat_agents').where({ id: agentId }).first('id');
    if (!agent) throw invalidParams({ agent_id: 'agent_id is not an existing agent.' });
    const [entry] = await this.db('chat_agent_time').insert({ session_id: id, agent_id: agentId, minutes, note }).returning('*');
    const total = await this.db('chat_agent_time').where({ session_id: id }).sum({ minutes: 'minutes' }).first();
    return {
      entry: { id: Number(entry.id), session_id: id, agent_id: agentId, minutes: entry.minutes, note: entry.note, date_created: isoDate(entry.date_created)! },
      session_total_minutes: Number(total?.minutes ?? 0),
    };
  }

  async rate(id: number, rating: number, comment: string | null) {
    await this.get(id);
    const rows = await this.db('chat_satisfaction').insert({ session_id: id, rating, comment }).onConflict('session_id').ignore().returning('*');
    if (rows.length === 0) throw conflict('chat_satisfaction_exists', 'This session has already been rated.');
    return { session_id: id, rating: rows[0].rating, comment: rows[0].comment, date_created: isoDate(rows[0].date_created)! };
  }

  /**
   * A new session token (the old one stops working), never for a closed session (409), and
   * never valid past the session's absolute lifetime.
   */
  async refreshToken(id: number): Promise<{ token: string; expires: Date }> {
    const { token, digest } = makeToken('customer', id);
    const [row] = await this.db('chat_sessions')
      .where({ id })
      .whereNot({ status: 'closed' })
      .update({
        token_sha256: digest,
        token_expires_at: this.db.raw('LEAST(now() + make_interval(secs => ?), date_created + make_interval(secs => ?))', [this.tokenTtlSeconds, this.tokenMaxAgeSeconds]),
      })
      .returning('token_expires_at');
    if (!row) {
      await this.get(id);
      throw conflict('chat_session_closed', 'The session is closed: its token cannot be refreshed.');
    }
    return { token, expires: new Date(row.token_expires_at) };
  }

  async rating(id: number) {
    return this.db('chat_satisfaction').where({ session_id: id }).first();
  }
}

