/** The chat API's records as the desk reads them (README "Support chat"). */
export type SessionStatus = 'waiting' | 'assigned' | 'active' | 'resolved' | 'closed';

export interface ChatSession {
  id: number;
  status: SessionStatus;
  customer_id: number | null;
  customer_name: string;
  customer_email: string;
  site_id: number | null;
  identity_verified: boolean;
  context: { page_url: string | null; page_title: string | null; referrer: string | null; locale: string | null };
  metadata: Record<string, string>;
  assigned_agent_id: number | null;
  ticket_id: number | null;
  fallback_reason: string | null;
  last_message_at: string | null;
  date_created: string;
}

export interface ChatAttachment {
  id: number;
  name: string;
  type: string;
  size: number;
  width: number | null;
  height: number | null;
  download_url: string;
  thumbnail_url: string | null;
}

export interface ChatMessage {
  id: number;
  sender_type: 'customer' | 'agent' | 'system';
  agent_id: number | null;
  sender_name: string;
  body: string;
  attachment: ChatAttachment | null;
  date_created: string;
}

export interface MessagesPage {
  messages: ChatMessage[];
  next_after: number;
  has_more: boolean;
  session_status: SessionStatus;
  poll_interval_seconds: number;
}

export interface CannedReply {
  id: number;
  shortcut: string;
  title: string;
  body: string;
  rendered?: string;
}

export const TICKET_STATUSES = ['open', 'pending', 'resolved', 'closed'] as const;
export const TICKET_PRIORITIES = ['low', 'normal', 'high', 'urgent'] as const;

export interface TicketSummary {
  id: number;
  subject: string;
  status: (typeof TICKET_STATUSES)[number];
  priority: (typeof TICKET_PRIORITIES)[number];
  category: string | null;
  source: string;
  customer_id: number | null;
  customer_name: string;
  customer_email: string;
  site_id: number | null;
  identity_verified: boolean;
  chat_session_ids: number[];
  date_created: string;
  date_modified: string;
}

export interface Ticket extends TicketSummary {
  messages: { id: number; sender_type: string; sender_name: string; body: string; date_created: string }[];
  notes: { id: number; agent_id: number | null; note: string; date_created: string }[];
}

export interface Durations {
  count: number;
  average_seconds: number | null;
  p90_seconds: number | null;
}

export interface Report {
  from: string;
  to: string;
  sessions: { total: number; by_status: Record<SessionStatus, number> };
  first_response: Durations;
  wait: Durations;
  resolution: Durations;
  satisfaction: { count: number; average: number | null };
  agent_time: { agent_id: number; agent_name: string; minutes: number; entries: number; sessions: number }[];
}
