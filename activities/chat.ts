import { notifyChatEvent } from '../src/chat/realtime';
import { insertMessage, type SessionRow } from '../src/chat/sessions';
import { createTicketForSession } from '../src/chat/tickets';
import type { Db } from '../src/db/knex';

export interface FallbackOutcome {
  /** ticket: converted now; not_waiting: an agent took it or it ended meanwhile; gone: deleted. */
  outcome: 'ticket' | 'not_waiting' | 'gone';
  ticketId: number | null;
}

export interface ChatActivities {
  chatFallBackToTicket(input: { sessionId: number }): Promise<FallbackOutcome>;
}

export const WAIT_TIMEOUT_NOTICE =
  'No agent was free to answer in time. Your conversation is saved as ticket #{{ticket_id}}; we will answer it by email, and you can keep writing here.';

/**
 * The session waited too long: when it is still waiting without an agent, it gets a ticket
 * holding the conversation (or keeps the one it has) and a system message saying so, pushed
 * to connected clients. Idempotent: a retry finds the ticket in place.
 */
export function createChatActivities(deps: { db: Db }): ChatActivities {
  const { db } = deps;
  return {
    async chatFallBackToTicket({ sessionId }) {
      const r = await db.transaction(async (trx) => {
        const s: SessionRow | undefined = await trx('chat_sessions').where({ id: sessionId }).forUpdate().first();
        if (!s) return { outcome: 'gone' as const, ticketId: null, message: null };
        if (s.status !== 'waiting' || s.assigned_agent_id !== null) return { outcome: 'not_waiting' as const, ticketId: s.ticket_id === null ? null : Number(s.ticket_id), message: null };
        if (s.fallback_reason === 'wait_timeout' && s.ticket_id) return { outcome: 'ticket' as const, ticketId: Number(s.ticket_id), message: null };
        let ticketId = s.ticket_id === null ? null : Number(s.ticket_id);
        if (ticketId === null) ticketId = await createTicketForSession(trx, s, 'wait_timeout');
        else await trx('chat_sessions').where({ id: sessionId }).update({ fallback_reason: 'wait_timeout' });
        const locked: SessionRow = await trx('chat_sessions').where({ id: sessionId }).first();
        const { message } = await insertMessage(trx, locked, { sender_type: 'system', sender_name: 'System', body: WAIT_TIMEOUT_NOTICE.replace('{{ticket_id}}', String(ticketId)) });
        return { outcome: 'ticket' as const, ticketId, message };
      });
      if (r.message) {
        const m = r.message;
        await notifyChatEvent(db, {
          type: 'message',
          session_id: sessionId,
          message: { id: Number(m.id), session_id: sessionId, sender_type: m.sender_type, agent_id: null, sender_name: m.sender_name, body: m.body, attachment: null, date_created: new Date(m.date_created).toISOString() },
        }).catch(() => undefined);
        await notifyChatEvent(db, { type: 'session', session_id: sessionId, ticket_id: r.ticketId, fallback_reason: 'wait_timeout' }).catch(() => undefined);
      }
      return { outcome: r.outcome, ticketId: r.ticketId };
    },
  };
}
