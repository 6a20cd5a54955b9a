import { useEffect } from 'preact/hooks';
import type { Api } from '../api';
import { setTitleCount } from '../components';
import { useLoad } from '../hooks';
import type { ChatSession } from './types';

/** Sessions waiting for an agent and not handed to a ticket (those wait for an e-mail instead). */
export function waitingChats(sessions: ChatSession[]): ChatSession[] {
  return sessions.filter((s) => s.status === 'waiting' && s.ticket_id === null && s.assigned_agent_id === null);
}

export const WAITING_QUERY = '/chat/agent/sessions?status=waiting&assignment=unassigned&orderby=id&order=desc&per_page=100';

/**
 * The chats waiting for an agent, polled with backoff (every 3 s while the queue changes, slower
 * to 20 s while it does not, paused in a hidden tab): the API has no agent-wide realtime channel,
 * its WebSocket is per session. Their count goes first in the tab's title.
 */
export function useWaitingChats(api: Api | null): { count: number; newest: ChatSession | null } {
  const data = useLoad((signal) => (api ? api.chat<ChatSession[]>(WAITING_QUERY, { signal }) : Promise.resolve([])), api ? 'waiting' : 'none', api ? { minMs: 3000, maxMs: 20_000 } : undefined);
  const waiting = waitingChats(data.data ?? []);
  const count = waiting.length;
  useEffect(() => setTitleCount(count), [count]);
  useEffect(() => () => setTitleCount(0), []);
  return { count, newest: waiting[0] ?? null };
}
