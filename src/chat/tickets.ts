import type { Knex } from 'knex';
import type { Db } from '../db/knex';
import { runList, type ListQuery, type ListSpec } from '../db/list';
import { isoDate } from '../db/timestamps';
import { recordEvent } from '../events/record';
import { notFoundItem } from '../http/errors';

/**
 * Tickets: what a chat falls back to (support offline, realtime down, waiting too long) or is
 * converted to. A ticket holds the conversation (ticket_messages, each chat message copied at
 * most once) and private staff notes that customers never see.
 */
export type TicketPriority = 'low' | 'normal' | 'high' | 'urgent';
export type TicketStatus = 'open' | 'pending' | 'resolved' | 'closed';
export type FallbackReason = 'offline' | 'realtime_unavailable' | 'wait_timeout' | 'follow_up_unavailable' | 'converted' | 'linked';

export interface SessionForTicket {
  id: number;
  customer_id: number | null;
  customer_name: string;
  customer_email: string;
  site_id: number | null;
  identity_verified: boolean;
  ticket_id: number | null;
}

/** Copies the session's chat messages the ticket does not hold yet (in order). */
export async function copyTranscript(trx: Knex, ticketId: number, sessionId: number): Promise<number> {
  const result = await trx.raw(
    `INSERT INTO ticket_messages (ticket_id, sender_type, sender_name, body, chat_message_id, date_created)
     SELECT ?, m.sender_type, m.sender_name, m.body, m.id, m.date_created FROM chat_messages m
     WHERE m.session_id = ? AND NOT EXISTS (SELECT 1 FROM ticket_messages t WHERE t.ticket_id = ? AND t.chat_message_id = m.id)
     ORDER BY m.id`,
    [ticketId, sessionId, ticketId],
  );
  return result.rowCount ?? 0;
}

/** Copies one chat message to the session's ticket (no-op when it is already there). */
export async function appendToTicket(trx: Knex, ticketId: number, message: { id: number; sender_type: string; sender_name: string; body: string; date_created: Date }): Promise<void> {
  await trx.raw(
    `INSERT INTO ticket_messages (ticket_id, sender_type, sender_name, body, chat_message_id, date_created)
     SELECT ?, ?, ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM ticket_messages WHERE ticket_id = ? AND chat_message_id = ?)`,
    [ticketId, message.sender_type, message.sender_name, message.body, message.id, message.date_created, ticketId, message.id],
  );
}

/** A new ticket holding the session's conversation; the session is linked to it. */
export async function createTicketForSession(
  trx: Knex,
  session: SessionForTicket,
  reason: FallbackReason,
  opts: { subject?: string; priority?: TicketPriority; category?: string | null } = {},
): Promise<number> {
  const subject = opts.subject ?? `Chat #${session.id}${session.customer_name ? ` with ${session.customer_name}` : ''}`;
  const [ticket] = await trx('tickets')
    .insert({
      subject,
      priority: opts.priority ?? 'normal',
      category: opts.category ?? null,
      source: 'chat',
      customer_id: session.customer_id,
      customer_name: session.customer_name,
      customer_email: session.customer_email,
      site_id: session.site_id,
      identity_verified: session.identity_verified,
    })
    .returning('id');
  const ticketId = Number(ticket.id);
  await trx('chat_sessions').where({ id: session.id }).update({ ticket_id: ticketId, fallback_reason: reason, date_modified: trx.fn.now() });
  await copyTranscript(trx, ticketId, session.id);
  await recordEvent(trx, { slug: 'chat_ticket_created', objectId: ticketId, payload: await ticketDetail(trx, ticketId) });
  return ticketId;
}

export async function ticketDetail(db: Knex, id: number) {
  const ticket = await db('tickets').where({ id }).first();
  if (!ticket) throw notFoundItem('ticket');
  // Knex builders run when awaited. A transaction is one connection, so its queries go one
  // after another (pg refuses to queue them); on the pool they run at once.
  const queries = [
    db('ticket_messages').where({ ticket_id: id }).orderBy('id'),
    db('ticket_notes').where({ ticket_id: id }).orderBy('id'),
    db('chat_sessions').where({ ticket_id: id }).orderBy('id').pluck('id'),
  ] as const;
  const [messages, notes, sessions] = db.isTransaction ? [await queries[0], await queries[1], await queries[2]] : await Promise.all(queries);
  return ticketRecord(ticket, messages, notes, sessions);
}

/** A ticket as the API answers it, from its row, its messages, its notes and its sessions' ids. */
export function ticketRecord(ticket: Record<string, any>, messages: Record<string, any>[], notes: Record<string, any>[], sessionIds: (number | string)[]) {
  return {
    id: Number(ticket.id),
    subject: ticket.subject,
    status: ticket.status,
    priority: ticket.priority,
    category: ticket.category,
    source: ticket.source,
    customer_id: ticket.customer_id,
    customer_name: ticket.customer_name,
    customer_email: ticket.customer_email,
    site_id: ticket.site_id,
    identity_verified: ticket.identity_verified,
    chat_session_ids: sessionIds.map(Number),
    messages: messages.map((message) => ({ id: message.id, sender_type: message.sender_type, sender_name: message.sender_name, body: message.body, chat_message_id: message.chat_message_id, date_created: isoDate(message.date_created)! })),
    notes: notes.map((note) => ({ id: note.id, agent_id: note.agent_id, note: note.note, date_created: isoDate(note.date_created)! })),
    date_created: isoDate(ticket.date_created)!,
    date_modified: isoDate(ticket.date_modified)!,
  };
}

export interface TicketChanges {
  status?: TicketStatus;
  priority?: TicketPriority;
  subject?: string;
  category?: string | null;
}

const describeValue = (v: unknown) => (v === null || v === undefined || v === '' ? 'none' : `"${String(v)}"`);

/**
 * Works a ticket: changes its status, priority, subject and/or category (locked, in one
 * transaction) and records what changed, and who changed it, as a system line of its
 * conversation. Fields given with their current value change nothing and are not recorded.
 * Answers the names of the fields that changed; throws 404 for an unknown ticket.
 */
export async function updateTicket(db: Knex, id: number, changes: TicketChanges, by: string): Promise<string[]> {
  return db.transaction(async (trx) => {
    const ticket = await trx('tickets').where({ id }).forUpdate().first();
    if (!ticket) throw notFoundItem('ticket');
    const update: Record<string, unknown> = {};
    const lines: string[] = [];
    for (const field of ['status', 'priority', 'subject', 'category'] as const) {
      const value = changes[field];
      if (value === undefined || value === ticket[field]) continue;
      update[field] = value;
      lines.push(`${field} from ${describeValue(ticket[field])} to ${describeValue(value)}`);
    }
    if (lines.length === 0) return [];
    await trx('tickets').where({ id }).update({ ...update, date_modified: trx.fn.now() });
    await trx('ticket_messages').insert({ ticket_id: id, sender_type: 'system', sender_name: 'System', body: `${by} changed the ${lines.join(', the ')}.`, chat_message_id: null });
    return Object.keys(update);
  });
}

/** The ticket list's filters, search and orders (GET /chat/agent/tickets). */
export const ticketListSpec: ListSpec = {
  idColumn: 'tickets.id',
  dateCreatedColumn: 'tickets.date_created',
  searchable: ['tickets.subject', 'tickets.customer_name', 'tickets.customer_email'],
  sortable: { id: 'tickets.id', date_created: 'tickets.date_created', date_modified: 'tickets.date_modified', status: 'tickets.status', priority: 'tickets.priority' },
  filters: {
    status: { column: 'tickets.status', type: { enum: ['open', 'pending', 'resolved', 'closed'] } },
    priority: { column: 'tickets.priority', type: { enum: ['low', 'normal', 'high', 'urgent'] } },
    category: { column: 'tickets.category', type: 'string' },
    source: { column: 'tickets.source', type: 'string' },
    customer_id: { column: 'tickets.customer_id', type: 'int' },
    customer_email: { column: 'tickets.customer_email', type: 'ci' },
    site_id: { column: 'tickets.site_id', type: 'int' },
  },
  dateRanges: { date_modified: 'tickets.date_modified' },
};

/** A ticket in a list: its fields and its sessions' ids, without the conversation and notes. */
export function ticketSummary(ticket: Record<string, any>) {
  return {
    id: Number(ticket.id),
    subject: ticket.subject as string,
    status: ticket.status as TicketStatus,
    priority: ticket.priority as TicketPriority,
    category: ticket.category as string | null,
    source: ticket.source as string,
    customer_id: ticket.customer_id === null ? null : Number(ticket.customer_id),
    customer_name: ticket.customer_name as string,
    customer_email: ticket.customer_email as string,
    site_id: ticket.site_id === null ? null : Number(ticket.site_id),
    identity_verified: ticket.identity_verified as boolean,
    chat_session_ids: ((ticket.chat_session_ids ?? []) as (number | string)[]).map(Number),
    date_created: isoDate(ticket.date_created)!,
    date_modified: isoDate(ticket.date_modified)!,
  };
}

/** Tickets as the agent console works them. */
export class Tickets {
  constructor(private readonly db: Db) {}

  /** A page of tickets (filters, search, order and paging as the other lists), without their conversations. */
  async list(q: ListQuery) {
    const base = () =>
      this.db('tickets').select(
        'tickets.*',
        this.db.raw('coalesce((SELECT array_agg(s.id::bigint ORDER BY s.id) FROM chat_sessions s WHERE s.ticket_id = tickets.id), ARRAY[]::bigint[]) AS chat_session_ids'),
      );
    const page = await runList<Record<string, any>>(this.db, base, q, ticketListSpec);
    return { ...page, rows: page.rows.map(ticketSummary) };
  }

  /** The ticket with its conversation, notes and sessions; 404 for an unknown one. */
  async detail(id: number) {
    return ticketDetail(this.db, id);
  }

  /** Works the ticket (see updateTicket) and answers it as it is now. */
  async update(id: number, changes: TicketChanges, by: string) {
    await updateTicket(this.db, id, changes, by);
    return ticketDetail(this.db, id);
  }

  /** A private staff note; answers the ticket as it is now. */
  async addNote(id: number, agentId: number | null, note: string) {
    await ticketDetail(this.db, id);
    await this.db('ticket_notes').insert({ ticket_id: id, agent_id: agentId, note });
    await this.db('tickets').where({ id }).update({ date_modified: this.db.fn.now() });
    return ticketDetail(this.db, id);
  }
}
