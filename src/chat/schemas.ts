import { z } from 'zod';
import { type ListQuery } from '../db/list';
import { ApiError, invalidParams } from '../http/errors';
import { parseListQuery } from '../http/list';
import { fields } from '../http/validation';
import { DAYS, TIME_ZONES, validTimeZone } from './availability';
import type { DownloadVariant } from './downloads';
import { AGENT_ONLY_FIELDS, sessionListSpec, type AssignmentScope } from './sessions';

/**
 * Request bodies and queries of the chat routes (strict: unknown keys are refused) and the
 * records they answer. Every rule the server applies is written so that the OpenAPI document
 * generated from these schemas states it too (a pattern rather than a refine; `meta` for what
 * zod cannot say itself: object-level minProperties, oneOf); rules across fields that JSON
 * Schema cannot say are in the operations' descriptions (docs.ts).
 */

/** The values the tickets table allows (CHECK constraints of the chat migration). */
export const TICKET_STATUSES = ['open', 'pending', 'resolved', 'closed'] as const;
export const TICKET_PRIORITIES = ['low', 'normal', 'high', 'urgent'] as const;

const url = () => fields.text(2000).regex(/^https?:\/\/\S+$/, 'is not a valid http(s) URL.');
const locale = () => z.string().regex(/^[A-Za-z]{2,3}([_-][A-Za-z0-9]{2,8})*$/, 'is not a locale such as en_GB.');
const metadataKey = z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'keys must be 1-64 letters, digits, _, . or -');
const MAX_METADATA_KEYS = 50;
const metadataValues = z
  .record(metadataKey, fields.text(1000))
  .refine((m) => Object.keys(m).length <= MAX_METADATA_KEYS, { message: `must hold at most ${MAX_METADATA_KEYS} keys.` })
  .meta({ maxProperties: MAX_METADATA_KEYS });
/** At least one of the object's fields (the document says minProperties: 1). */
const notEmpty = <T extends z.ZodObject>(schema: T) =>
  schema.refine((b) => Object.keys(b).length > 0, { message: `give at least one of ${Object.keys(schema.shape).join(', ')}.`, path: ['body'] }).meta({ minProperties: 1 });

export const createSessionSchema = z
  .object({
    customer_id: fields.id().optional().describe('A customer of the platform. Anonymous callers must add customer_hash (identity verification).'),
    customer_hash: z
      .string()
      .regex(/^[a-fA-F0-9]{64}$/, 'is not 64 hexadecimal digits.')
      .optional()
      .describe('HMAC-SHA256 of the customer id with the chat secret (`npm run cli -- chat identity-hash <id>`). Required with customer_id unless the caller is an agent.'),
    customer_name: fields.text(200).trim().optional().describe('Unverified unless customer_id is proven (identity_verified).'),
    customer_email: z.email().max(254).optional().describe('Unverified unless customer_id is proven (identity_verified).'),
    site_id: fields.id().optional().describe('The site the chat is about. From callers other than agents it is an unverified claim, dropped when no such site exists (agents get 400).'),
    page_url: url().optional(),
    page_title: fields.text(500).optional(),
    referrer: url().optional(),
    locale: locale().optional(),
    metadata: metadataValues.optional(),
    message: fields.label(10_000).optional().describe('The opening message.'),
    realtime: z.boolean().optional().describe('false: the widget cannot use the realtime channel (the session then also gets a ticket).'),
  })
  .strict();

export const postMessageSchema = z
  .object({
    body: fields.label(10_000).optional(),
    canned_reply_id: fields.id().optional().describe('Agents: send this canned reply, placeholders filled.'),
  })
  .strict()
  .refine((b) => (b.body === undefined) !== (b.canned_reply_id === undefined), { message: 'give either body or canned_reply_id.', path: ['body'] })
  .meta({ oneOf: [{ required: ['body'] }, { required: ['canned_reply_id'] }] });

export const contextSchema = notEmpty(
  z
    .object({
      page_url: url().nullable().optional(),
      page_title: fields.text(500).nullable().optional(),
      referrer: url().nullable().optional(),
      locale: locale().nullable().optional(),
    })
    .strict(),
);

export const tokenSchema = z
  .object({ refresh_session_token: z.boolean().optional().describe('Customers: also replace the session token (the old one stops working).') })
  .strict();

export const metadataSchema = z
  .object({
    metadata: z
      .record(metadataKey, fields.text(1000).nullable())
      .refine((m) => Object.keys(m).length >= 1 && Object.keys(m).length <= MAX_METADATA_KEYS, { message: `must hold 1 to ${MAX_METADATA_KEYS} keys.` })
      .meta({ minProperties: 1, maxProperties: MAX_METADATA_KEYS })
      .describe(`Keys to set (string values) or remove (null); other keys are kept. The session holds at most ${MAX_METADATA_KEYS} keys in all.`),
  })
  .strict();

export const assignSchema = z
  .object({ agent_id: fields.id().nullable().optional().describe('Default: the calling agent. null unassigns.') })
  .strict();

export const statusSchema = z.object({ status: z.enum(['active', 'resolved', 'closed']) }).strict();

export const linkTicketSchema = z.object({ ticket_id: fields.id() }).strict();

export const convertTicketSchema = z
  .object({
    subject: fields.label(200).optional(),
    priority: z.enum(TICKET_PRIORITIES).optional(),
    category: fields.label(100).optional(),
    note: fields.label(10_000).optional().describe('A private staff note on the ticket.'),
  })
  .strict();

export const agentTimeSchema = z
  .object({
    minutes: fields.int().min(1).max(1440),
    note: fields.text(2000).optional(),
    agent_id: fields.id().optional().describe('Admins only: log the time of another agent (required with the API credentials).'),
  })
  .strict();

export const satisfactionSchema = z.object({ rating: fields.int().min(1).max(5), comment: fields.text(2000).trim().optional() }).strict();

const hhmm = z.string().regex(/^([01]\d|2[0-3]):[0-5]\d$|^24:00$/, 'is not a time HH:MM');
export const businessHoursSchema = z
  .object({
    enabled: z.boolean().optional(),
    timezone: z
      .string()
      .refine(validTimeZone, { message: 'is not a valid IANA time zone, e.g. Europe/Paris.' })
      // The document lists the canonical names; older aliases the runtime knows (US/Eastern) work too.
      .meta({ enum: TIME_ZONES })
      .optional()
      .describe('An IANA time zone, e.g. Europe/Paris.'),
    schedule: z
      .partialRecord(z.enum(DAYS), z.array(z.array(hhmm).length(2).refine(([a, b]) => a < b, { message: 'must end after it starts.' })).max(10))
      .optional()
      .describe('Per weekday (sun..sat): open intervals [["09:00","17:00"]] in the time zone; each ends after it starts ("24:00" for midnight).'),
    holidays: z.array(z.iso.date({ error: 'is not a date YYYY-MM-DD' })).max(366).optional(),
    offline_message: fields.text(1000).optional(),
  })
  .strict();

export const agentAvailabilitySchema = z
  .object({
    presence: z.enum(['online', 'away', 'offline']).optional(),
    agent_id: fields.id().optional().describe('Admins only: set the presence of another agent (required with the API credentials).'),
    business_hours: businessHoursSchema.optional().describe('Admins only.'),
  })
  .strict()
  .refine((b) => b.presence !== undefined || b.business_hours !== undefined, { message: 'give presence and/or business_hours.', path: ['body'] })
  .meta({ anyOf: [{ required: ['presence'] }, { required: ['business_hours'] }] });

export const createAgentSchema = z.object({ name: fields.label(200), email: z.email().max(254), is_admin: z.boolean().optional() }).strict();
export const updateAgentSchema = z
  .object({ name: fields.label(200).optional(), email: z.email().max(254).optional(), is_admin: z.boolean().optional(), active: z.boolean().optional() })
  .strict();

const shortcut = () => z.string().regex(/^[a-z0-9][a-z0-9_-]{0,49}$/, 'must be 1-50 lower-case letters, digits, _ or -');
export const createCannedSchema = z.object({ shortcut: shortcut(), title: fields.label(200), body: fields.label(10_000) }).strict();
export const updateCannedSchema = z.object({ shortcut: shortcut().optional(), title: fields.label(200).optional(), body: fields.label(10_000).optional() }).strict();

export const ticketNoteSchema = z.object({ note: fields.label(10_000) }).strict();

export const updateTicketSchema = notEmpty(
  z
    .object({
      status: z.enum(TICKET_STATUSES).optional(),
      priority: z.enum(TICKET_PRIORITIES).optional(),
      subject: fields.label(200).optional(),
      category: fields.label(100).nullable().optional().describe('null removes the category.'),
    })
    .strict(),
);

// ---- queries ----------------------------------------------------------------------------
export const messagesQuery = z
  .object({
    after: z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER).default(0).describe('Only messages with an id greater than this.'),
    limit: z.coerce.number().int().min(1).max(100).default(50).describe('At most this many messages.'),
  })
  .strict();

const dateOrDateTime = () => z.iso.datetime({ offset: true }).or(z.iso.date());
export const reportQuery = z
  .object({
    from: dateOrDateTime().optional().describe('Start (ISO 8601 date or date-time with a zone). Default: 30 days before to. Not later than to.'),
    to: dateOrDateTime().optional().describe('End, exclusive (ISO 8601). Default: now.'),
  })
  .strict();

export const cannedQuery = z
  .object({
    search: fields.text(200).optional().describe('Substring of shortcut, title or body.'),
    session_id: z.coerce.number().int().positive().max(Number.MAX_SAFE_INTEGER).optional().describe('Fill the placeholders for this session (an existing one).'),
  })
  .strict();

/**
 * The agent console's session list: the list parameters and `assignment` (any, assigned,
 * unassigned, or mine: the calling agent's, `agentId`), their problems answered together.
 */
export function parseSessionListQuery(query: Record<string, unknown>, agentId: number | null): { list: ListQuery; scope: AssignmentScope } {
  const { assignment, ...rest } = query;
  let scope: AssignmentScope = { op: 'any' };
  const errors: Record<string, string> = {};
  if (assignment !== undefined) {
    if (assignment === 'unassigned') scope = { op: 'unassigned' };
    else if (assignment === 'assigned') scope = { op: 'assigned' };
    else if (assignment === 'mine') {
      if (agentId === null) errors.assignment = 'assignment=mine needs an agent token (the API credentials are no agent).';
      else scope = { op: 'agent', agentId };
    } else if (assignment !== 'any') errors.assignment = 'assignment is not one of any, assigned, unassigned, and mine.';
  }
  let list: ListQuery;
  try {
    list = parseListQuery(rest, sessionListSpec);
  } catch (err) {
    if (err instanceof ApiError && Object.keys(errors).length) throw invalidParams({ ...(err.extra.params as Record<string, string>), ...errors });
    throw err;
  }
  if (Object.keys(errors).length) throw invalidParams(errors);
  return { list, scope };
}

/** An attachment download's `variant` query parameter. */
export function parseDownloadVariant(variant: unknown): DownloadVariant | undefined {
  if (variant !== undefined && variant !== 'original' && variant !== 'thumbnail') throw invalidParams({ variant: 'variant is not one of original and thumbnail.' });
  return variant;
}

// ---- records (documentation; the contract tests check every response against them) ----
const iso = { type: 'string', format: 'date-time' };
const isoOrNull = { type: ['string', 'null'], format: 'date-time' };
const intOrNull = { type: ['integer', 'null'] };
const strOrNull = { type: ['string', 'null'] };
const obj = (properties: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  type: 'object',
  required: Object.keys(properties),
  properties,
  additionalProperties: false,
  ...extra,
});

const sessionProperties = {
  id: { type: 'integer' },
  status: { enum: ['waiting', 'assigned', 'active', 'resolved', 'closed'] },
  customer_id: intOrNull,
  customer_name: { type: 'string' },
  customer_email: { type: 'string' },
  site_id: intOrNull,
  identity_verified: {
    type: 'boolean',
    description: 'true when the customer is proven (customer_id with a matching customer_hash, or a session an agent started); false: customer_name, customer_email and site_id are what the visitor typed, unverified.',
  },
  context: obj({ page_url: strOrNull, page_title: strOrNull, referrer: strOrNull, locale: strOrNull }),
  metadata: { type: 'object', additionalProperties: { type: 'string' } },
  assigned_agent_id: intOrNull,
  ticket_id: intOrNull,
  fallback_reason: { enum: [null, 'offline', 'realtime_unavailable', 'wait_timeout', 'follow_up_unavailable', 'converted', 'linked'] },
  follow_up_workflow_id: strOrNull,
  assigned_at: isoOrNull,
  first_response_at: isoOrNull,
  resolved_at: isoOrNull,
  closed_at: isoOrNull,
  last_message_at: isoOrNull,
  date_created: iso,
  date_modified: iso,
};
const AGENT_ONLY: readonly string[] = AGENT_ONLY_FIELDS;
export const sessionJson = {
  ...obj(sessionProperties),
  required: Object.keys(sessionProperties).filter((k) => !AGENT_ONLY.includes(k)),
  description: `A chat session. ${AGENT_ONLY.join(', ')} are shown to agents only.`,
};

export const attachmentJson = obj({
  id: { type: 'integer' },
  session_id: { type: 'integer' },
  name: { type: 'string' },
  type: { enum: ['image/png', 'image/jpeg', 'image/gif', 'image/webp', 'application/pdf', 'text/plain'] },
  size: { type: 'integer' },
  sha256: { type: 'string', pattern: '^[a-f0-9]{64}$' },
  width: intOrNull,
  height: intOrNull,
  download_url: { type: 'string' },
  thumbnail_url: strOrNull,
  date_created: iso,
});

export const messageJson = obj({
  id: { type: 'integer' },
  session_id: { type: 'integer' },
  sender_type: { enum: ['customer', 'agent', 'system'] },
  agent_id: intOrNull,
  sender_name: { type: 'string' },
  body: { type: 'string' },
  attachment: { oneOf: [{ $ref: '#/components/schemas/ChatAttachment' }, { type: 'null' }] },
  date_created: iso,
});

export const agentJson = obj({
  id: { type: 'integer' },
  name: { type: 'string' },
  email: { type: 'string' },
  is_admin: { type: 'boolean' },
  active: { type: 'boolean' },
  presence: { enum: ['online', 'away', 'offline'] },
  presence_changed_at: isoOrNull,
  date_created: iso,
  date_modified: iso,
});

export const cannedJson = {
  type: 'object',
  required: ['id', 'shortcut', 'title', 'body', 'date_created', 'date_modified'],
  properties: {
    id: { type: 'integer' },
    shortcut: { type: 'string' },
    title: { type: 'string' },
    body: { type: 'string' },
    rendered: { type: 'string', description: 'The body with the placeholders filled for session_id.' },
    date_created: iso,
    date_modified: iso,
  },
  additionalProperties: false,
};

const hoursJson = {
  type: 'object',
  required: ['enabled', 'timezone', 'schedule', 'holidays'],
  properties: {
    enabled: { type: 'boolean' },
    timezone: { type: 'string' },
    schedule: { type: 'object', additionalProperties: { type: 'array', items: { type: 'array', items: { type: 'string' } } } },
    holidays: { type: 'array', items: { type: 'string' } },
    open_now: { type: 'boolean' },
    offline_message: { type: 'string' },
    date_modified: isoOrNull,
  },
  additionalProperties: false,
};

export const availabilityJson = obj({
  online: { type: 'boolean' },
  status: { enum: ['online', 'offline'] },
  reason: { enum: ['agents_available', 'holiday', 'outside_business_hours', 'no_agent_online'] },
  message: { type: 'string' },
  agents_online: { type: 'integer' },
  waiting_sessions: { type: 'integer' },
  expected_wait_seconds: intOrNull,
  realtime_available: { type: 'boolean' },
  poll_interval_seconds: { type: 'integer' },
  business_hours: hoursJson,
});

export const agentAvailabilityJson = obj({
  status: { $ref: '#/components/schemas/ChatAvailability' },
  business_hours: hoursJson,
  agents: { type: 'array', items: { $ref: '#/components/schemas/ChatAgent' } },
});

const durationJson = obj({ count: { type: 'integer' }, average_seconds: { type: ['number', 'null'] }, p90_seconds: { type: ['number', 'null'] } });
export const reportJson = obj({
  from: iso,
  to: iso,
  sessions: obj({ total: { type: 'integer' }, by_status: obj(Object.fromEntries(['waiting', 'assigned', 'active', 'resolved', 'closed'].map((s) => [s, { type: 'integer' }]))) }),
  first_response: durationJson,
  wait: durationJson,
  resolution: durationJson,
  satisfaction: obj({ count: { type: 'integer' }, average: { type: ['number', 'null'] } }),
  agent_time: {
    type: 'array',
    items: obj({ agent_id: { type: 'integer' }, agent_name: { type: 'string' }, minutes: { type: 'integer' }, entries: { type: 'integer' }, sessions: { type: 'integer' } }),
  },
});

export const realtimeJson = obj({
  token: { type: 'string' },
  expires_at: iso,
  url: { type: 'string', description: 'WebSocket URL (ws:// or wss://) with the token.' },
});

const ticketSummaryFields = {
  id: { type: 'integer' },
  subject: { type: 'string' },
  status: { enum: [...TICKET_STATUSES] },
  priority: { enum: [...TICKET_PRIORITIES] },
  category: strOrNull,
  source: { type: 'string' },
  customer_id: intOrNull,
  customer_name: { type: 'string' },
  customer_email: { type: 'string' },
  site_id: intOrNull,
  identity_verified: { type: 'boolean', description: 'Copied from the session it was made from: false when its customer name and e-mail are unverified claims.' },
  chat_session_ids: { type: 'array', items: { type: 'integer' } },
  date_created: iso,
  date_modified: iso,
};
/** A ticket in the list (GET /chat/agent/tickets): no conversation, no notes. */
export const ticketSummaryJson = obj(ticketSummaryFields);

/** A ticket whole: the summary's fields, its conversation and its notes. */
export const ticketJson = obj({
  ...ticketSummaryFields,
  messages: {
    type: 'array',
    items: obj({ id: { type: 'integer' }, sender_type: { enum: ['customer', 'agent', 'system'] }, sender_name: { type: 'string' }, body: { type: 'string' }, chat_message_id: intOrNull, date_created: iso }),
  },
  notes: { type: 'array', items: obj({ id: { type: 'integer' }, agent_id: intOrNull, note: { type: 'string' }, date_created: iso }) },
});
