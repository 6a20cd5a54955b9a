import type { z } from 'zod';
import { ACCEPT_RANGES, CONTENT_RANGE, RANGE_NOT_SATISFIABLE } from '../http/download';
import { listQueryParams, LIST_HEADERS } from '../http/list';
import type { HttpMethod, OperationDoc, ParamDoc, RouteRegistry } from '../http/route-registry';
import * as schemas from './schemas';
import { sessionListSpec } from './sessions';
import { ticketListSpec } from './tickets';

type Who = 'public' | 'anyone' | 'session' | 'customer' | 'agent' | 'admin';

const AUTH_TEXT: Record<Who, string> = {
  public: 'Public: no credentials needed.',
  anyone: 'No credentials needed (the widget calls it for a visitor); an agent token or the API credentials may also be used.',
  session: "Callers: the session's customer (Bearer session token) or an agent (Bearer agent token, or the API credentials as an admin agent). Others: 401 without or with wrong credentials, 403 with a token of another session.",
  customer: "Callers: the session's customer only (Bearer session token). Agents get 403.",
  agent: 'Callers: an agent (Bearer agent token) or the API credentials (an admin agent). Customer tokens get 403.',
  admin: 'Callers: an admin agent (Bearer token of an agent with is_admin) or the API credentials. Other agents and customers get 403.',
};

const SECURITY: Record<Who, Record<string, string[]>[]> = {
  public: [],
  anyone: [{}, { bearerAuth: [] }, { basicAuth: [] }, { apiKeyQuery: [], apiSecretQuery: [] }],
  session: [{ bearerAuth: [] }, { basicAuth: [] }, { apiKeyQuery: [], apiSecretQuery: [] }],
  customer: [{ bearerAuth: [] }],
  agent: [{ bearerAuth: [] }, { basicAuth: [] }, { apiKeyQuery: [], apiSecretQuery: [] }],
  admin: [{ bearerAuth: [] }, { basicAuth: [] }, { apiKeyQuery: [], apiSecretQuery: [] }],
};

/** The chat operations in the route index and the OpenAPI document. */
export function documentChat(registry: RouteRegistry, ns: string): void {
  const tags = ['chat'];
  const session = registry.component('ChatSession', schemas.sessionJson);
  registry.component('ChatAttachment', schemas.attachmentJson);
  const message = registry.component('ChatMessage', schemas.messageJson);
  const agent = registry.component('ChatAgent', schemas.agentJson);
  const cannedRef = registry.component('ChatCannedReply', schemas.cannedJson);
  registry.component('ChatAvailability', schemas.availabilityJson);
  const ticket = registry.component('ChatTicket', schemas.ticketJson);
  const realtimeOrNull = { oneOf: [schemas.realtimeJson, { type: 'null' }] };
  const op = (method: HttpMethod, path: string, who: Who, doc: Omit<OperationDoc, 'tags' | 'public' | 'auth' | 'security'>) =>
    registry.operation(ns, method, path, { ...doc, tags, public: who === 'public', auth: AUTH_TEXT[who], security: SECURITY[who] });
  const ok = (description: string, schema: Record<string, unknown>, headers?: OperationDoc['responses'][number]['headers']) => ({ description, schema, ...(headers ? { headers } : {}) });
  const obj = (properties: Record<string, unknown>, required = Object.keys(properties)) => ({ type: 'object', required, properties, additionalProperties: false });
  /** The query parameters of a strict zod object, documented from the schema that validates them. */
  const queryOf = (schema: z.ZodObject): ParamDoc[] => Object.entries(schema.shape).map(([name, field]) => ({ name, description: field.description, schema: field }));

  op('GET', '/', 'public', {
    summary: 'Namespace index: the routes of the chat namespace and the WebSocket path',
    responses: {
      200: ok('The namespace, its routes and the realtime path.', obj({ namespace: { type: 'string' }, routes: { type: 'object', additionalProperties: true }, realtime: obj({ path: { type: 'string' } }) })),
    },
  });
  op('GET', '/chat/availability', 'public', {
    summary: 'Whether support is online now (agents present, business hours, holidays), why not, and the expected wait',
    description: 'Used before showing an online launcher. offline reasons: outside_business_hours, holiday, no_agent_online.',
    responses: { 200: ok('Availability.', { $ref: '#/components/schemas/ChatAvailability' }) },
  });
  op('POST', '/chat/sessions', 'anyone', {
    summary: 'Start a chat session (customer, site and page context); answers the session token',
    description:
      'The token (Bearer) gives access to this session only; it is shown once. ' +
      'The body is required ({} starts an anonymous session). customer_id needs a matching customer_hash unless the caller is an agent (without it: 400; a wrong one: 403). ' +
      'Agents see identity_verified: true only for a customer_id proven that way or a session an agent started; otherwise customer_name, customer_email and site_id are unverified claims. ' +
      'A site_id naming no site is refused (400) for agents only; from anyone else it is dropped and the answer is the same 201, so it does not tell which sites exist. ' +
      'When support is offline, or the realtime channel is unavailable (server side, or realtime:false from the widget), the session gets a ticket holding the conversation at once ' +
      '(fallback_reason offline / realtime_unavailable) and later messages are appended to it. Otherwise the chatFollowUp workflow turns it into a ticket when no agent takes it in time. ' +
      'Callers other than agents (anonymous, customer tokens) may start at most CHAT_SESSION_CREATE_LIMIT sessions per CHAT_SESSION_CREATE_WINDOW_SECONDS from one address (default 20 per 60 s), then 429 chat_too_many_sessions with Retry-After.',
    body: schemas.createSessionSchema,
    responses: {
      201: ok(
        'The session, its token, the realtime channel and the first messages.',
        obj({
          session,
          token: { type: 'string' },
          token_expires_at: { type: 'string', format: 'date-time' },
          realtime: realtimeOrNull,
          poll_interval_seconds: { type: 'integer' },
          availability: obj({ online: { type: 'boolean' }, reason: { type: 'string' }, message: { type: 'string' }, expected_wait_seconds: { type: ['integer', 'null'] } }),
          messages: { type: 'array', items: message },
        }),
      ),
      429: {
        description:
          'Too many sessions started from this address (`chat_too_many_sessions`: callers other than agents, at most CHAT_SESSION_CREATE_LIMIT per CHAT_SESSION_CREATE_WINDOW_SECONDS, every attempt counting), ' +
          'or too many failed authentications (`rest_too_many_auth_failures`). Retry-After says when to try again.',
        schema: { $ref: '#/components/schemas/Error' },
        headers: { 'Retry-After': { description: 'Seconds to wait', schema: { type: 'integer' } } },
      },
    },
  });
  op('GET', '/chat/sessions/:session_id', 'session', {
    summary: 'A session (status, assignment, ticket)',
    responses: { 200: ok('The session.', session) },
  });
  op('GET', '/chat/sessions/:session_id/messages', 'session', {
    summary: 'Messages of a session, oldest first, after a cursor (polling)',
    description: 'Poll with after=<next_after of the previous answer> every poll_interval_seconds (15 s default, 10 s minimum) when the realtime channel is down.',
    query: queryOf(schemas.messagesQuery),
    responses: {
      200: ok(
        'A page of messages.',
        obj({ messages: { type: 'array', items: message }, next_after: { type: 'integer' }, has_more: { type: 'boolean' }, session_status: { type: 'string' }, poll_interval_seconds: { type: 'integer' } }),
      ),
    },
  });
  op('POST', '/chat/sessions/:session_id/messages', 'session', {
    summary: 'Post a message (customer or agent); it reaches connected clients over the realtime channel',
    description:
      'Exactly one of body and canned_reply_id. Only agents may send a canned reply (canned_reply_id, an existing one), its placeholders filled. ' +
      'An agent replying to an unassigned session takes it. A closed session answers 409 chat_session_closed.',
    body: schemas.postMessageSchema,
    responses: { 201: ok('The message.', message) },
  });
  const errorWith = (codes: string, data: Record<string, unknown>) => ({
    type: 'object',
    required: ['code', 'message', 'data'],
    properties: {
      code: { type: 'string', description: codes },
      message: { type: 'string' },
      data: { type: 'object', required: ['status'], properties: { status: { type: 'integer' }, ...data }, additionalProperties: true },
    },
    additionalProperties: false,
  });
  op('POST', '/chat/sessions/:session_id/attachments', 'session', {
    summary: 'Upload a file (multipart/form-data, field "file", optional field "message")',
    description:
      'At most CHAT_ATTACHMENT_MAX_BYTES (default 10 MB; larger: 413 chat_attachment_too_large), streamed to disk. The type is read from the bytes: PNG, JPEG, GIF, WebP, PDF or UTF-8 text; anything else is 415 chat_attachment_type_not_allowed. ' +
      "The stored name takes the detected type's extension (invoice.html holding a GIF is invoice.gif). " +
      'Images get a 250 px PNG thumbnail (thumbnail_url) within a budget (CHAT_THUMBNAIL_MAX_BYTES, CHAT_THUMBNAIL_MAX_PIXELS, CHAT_THUMBNAIL_TIMEOUT_SECONDS, CHAT_THUMBNAIL_CONCURRENCY at once); ' +
      'an image over it, unreadable, interlaced (Adam7 PNG) or arriving while all thumbnail slots are busy is stored with thumbnail_url null. Render thumbnails defensively. ' +
      'Customers (not agents) have quotas of files and bytes per session and per client address within a rolling window (CHAT_ATTACHMENT_QUOTA_WINDOW_SECONDS, default 24 h): over one, 429 chat_attachment_quota_exceeded with Retry-After, and nothing is written. ' +
      'A body cut off before its end is dropped (400 chat_attachment_aborted); a failed upload leaves no file and no row.',
    requestBody: {
      required: true,
      content: {
        'multipart/form-data': {
          schema: { type: 'object', required: ['file'], properties: { file: { type: 'string', contentMediaType: 'application/octet-stream' }, message: { type: 'string', maxLength: 10000 } } },
        },
      },
    },
    responses: {
      201: ok('The attachment metadata and the message carrying it.', obj({ attachment: { $ref: '#/components/schemas/ChatAttachment' }, message })),
      400: {
        description: 'No "file" part, an unreadable multipart body, or a message over 10000 characters or holding NUL (`wu_rest_invalid_parameter`, naming file or message); or a body cut off before its end (`chat_attachment_aborted`).',
        schema: { $ref: '#/components/schemas/Error' },
      },
      409: { description: 'The session is closed (`chat_session_closed`).', schema: { $ref: '#/components/schemas/Error' } },
      413: {
        description: 'The file is over CHAT_ATTACHMENT_MAX_BYTES, or larger than a whole bytes quota (`chat_attachment_too_large`); data.limit is the limit it broke.',
        schema: errorWith('chat_attachment_too_large', { limit: { type: 'integer' } }),
      },
      415: {
        description: 'Not multipart/form-data (`chat_attachment_not_multipart`), or content of a type not allowed (`chat_attachment_type_not_allowed`, with data.allowed_types).',
        schema: errorWith('chat_attachment_not_multipart or chat_attachment_type_not_allowed', { allowed_types: { type: 'array', items: { type: 'string' } } }),
      },
      429: {
        description:
          'An attachment quota is reached (`chat_attachment_quota_exceeded`): data.quota says which (session_files, session_bytes, address_files, address_bytes), with its limit, the usage in the window, the window and retry_after, the seconds until enough of the window\'s uploads age out. ' +
          'Or too many failed authentications (`rest_too_many_auth_failures`). Retry-After says when to try again.',
        schema: errorWith('chat_attachment_quota_exceeded or rest_too_many_auth_failures', {
          quota: { enum: ['session_files', 'session_bytes', 'address_files', 'address_bytes'] },
          limit: { type: 'integer', description: 'Files, or bytes.' },
          usage: { type: 'integer', description: 'Files, or bytes, uploaded in the window before this upload.' },
          window_seconds: { type: 'integer' },
          retry_after: { type: 'integer', minimum: 1 },
        }),
        headers: { 'Retry-After': { description: 'Seconds to wait', schema: { type: 'integer' } } },
      },
    },
  });
  op('GET', '/chat/attachments/:attachment_id/download', 'session', {
    summary: 'Download an attachment (or its thumbnail)',
    description:
      "Only the attachment's session's customer and agents: a customer asking for another session's attachment gets the same 404 as for an id that does not exist. " +
      'Sent with Content-Disposition: attachment and X-Content-Type-Options: nosniff. ' +
      'One byte range (`Range: bytes=a-b`, `bytes=a-`, `bytes=-n`) answers 206; several ranges or a malformed header get the whole file.',
    query: [{ name: 'variant', description: 'original (default) or thumbnail.', schema: { type: 'string', enum: ['original', 'thumbnail'] } }],
    responses: {
      200: { description: 'The file bytes, with the type found at upload.', headers: { 'Accept-Ranges': ACCEPT_RANGES } },
      206: { description: 'The bytes of the range asked for.', headers: { 'Content-Range': CONTENT_RANGE, 'Accept-Ranges': ACCEPT_RANGES } },
      416: RANGE_NOT_SATISFIABLE,
    },
  });
  op('POST', '/chat/sessions/:session_id/context', 'session', {
    summary: 'Update the page context (the page the customer is on)',
    description: 'At least one of page_url, page_title, referrer and locale; null clears one. A closed session answers 409 chat_session_closed.',
    body: schemas.contextSchema,
    responses: { 200: ok('The session.', session) },
  });
  op('POST', '/chat/sessions/:session_id/token', 'session', {
    summary: 'A short-lived signed token for the realtime channel (and, for customers, a new session token)',
    description:
      'Connect a WebSocket to realtime.url (…/chat/realtime?token=…) before realtime.expires_at; it receives {"type":"message","message":{…}} and {"type":"session",…} events of this session. ' +
      'realtime is null when the channel is turned off (CHAT_REALTIME_ENABLED=false): poll the messages instead. ' +
      "A browser may open the socket only from an origin in CHAT_ALLOWED_ORIGINS (or any with *): another Origin is refused with HTTP 403 before the upgrade; clients sending no Origin are let through on the token. " +
      'The body is optional (none: {}). refresh_session_token is for the customer of the session (agents: 400) and is refused for a closed session (409 chat_session_closed). ' +
      'A session token lasts CHAT_SESSION_TOKEN_TTL_SECONDS, and never longer than CHAT_SESSION_TOKEN_MAX_AGE_SECONDS after the session was created (default 30 days), however often it is refreshed; then the customer starts a new session.',
    body: schemas.tokenSchema,
    bodyRequired: false,
    responses: {
      200: ok(
        'Tokens.',
        obj(
          { session_id: { type: 'integer' }, realtime: realtimeOrNull, poll_interval_seconds: { type: 'integer' }, session_token: { type: 'string' }, session_token_expires_at: { type: 'string', format: 'date-time' } },
          ['session_id', 'realtime', 'poll_interval_seconds'],
        ),
      ),
    },
  });
  op('POST', '/chat/sessions/:session_id/status', 'session', {
    summary: 'Resolve, close or reopen a session (customers may only close)',
    description: 'Customers may only give closed (others: 403). A closed session cannot be reopened (409 chat_session_closed).',
    body: schemas.statusSchema,
    responses: { 200: ok('The session.', session) },
  });
  op('POST', '/chat/sessions/:session_id/satisfaction', 'customer', {
    summary: 'Rate the chat (1-5, optional comment), once per session',
    description: 'A second rating answers 409 chat_satisfaction_exists.',
    body: schemas.satisfactionSchema,
    responses: { 201: ok('The rating.', obj({ session_id: { type: 'integer' }, rating: { type: 'integer' }, comment: { type: ['string', 'null'] }, date_created: { type: 'string', format: 'date-time' } })) },
  });
  op('POST', '/chat/sessions/:session_id/assign', 'agent', {
    summary: 'Assign the session to an agent (default: the caller), or unassign (agent_id null)',
    description: 'The body is optional (none: {}, the caller). With the API credentials agent_id is required. agent_id must be an active agent.',
    body: schemas.assignSchema,
    bodyRequired: false,
    responses: { 200: ok('The session.', session) },
  });
  op('POST', '/chat/sessions/:session_id/metadata', 'agent', {
    summary: 'Set or remove metadata keys (string values)',
    description: 'The session holds at most 50 keys after the change (400 otherwise).',
    body: schemas.metadataSchema,
    responses: { 200: ok('The session.', session) },
  });
  op('POST', '/chat/sessions/:session_id/link-ticket', 'agent', {
    summary: 'Link an existing ticket; the transcript is appended to it',
    description: 'A session linked to another ticket answers 409 chat_session_has_ticket.',
    body: schemas.linkTicketSchema,
    responses: { 200: ok('The session and the ticket.', obj({ session, ticket, copied_messages: { type: 'integer' } })) },
  });
  op('POST', '/chat/sessions/:session_id/agent-time', 'agent', {
    summary: 'Log agent time on the session (minutes and a note)',
    description: 'agent_id is required with the API credentials; an agent other than an admin may give only its own id (403).',
    body: schemas.agentTimeSchema,
    responses: {
      201: ok(
        'The entry and the total of the session.',
        obj({
          entry: obj({ id: { type: 'integer' }, session_id: { type: 'integer' }, agent_id: { type: 'integer' }, minutes: { type: 'integer' }, note: { type: 'string' }, date_created: { type: 'string', format: 'date-time' } }),
          session_total_minutes: { type: 'integer' },
        }),
      ),
    },
  });
  op('POST', '/chat/sessions/:session_id/convert-ticket', 'agent', {
    summary: "Create a ticket from the session's transcript",
    description: 'The body is optional (none: {}). A session that already has a ticket answers 409 chat_session_has_ticket (with data.ticket_id).',
    body: schemas.convertTicketSchema,
    bodyRequired: false,
    responses: { 201: ok('The session and the new ticket.', obj({ session, ticket })) },
  });

  const listParams: ParamDoc[] = [
    { name: 'assignment', description: 'any (default), assigned, unassigned, or mine (the calling agent).', schema: { type: 'string', enum: ['any', 'assigned', 'unassigned', 'mine'] } },
    ...listQueryParams(sessionListSpec),
  ];
  op('GET', '/chat/agent/sessions', 'agent', {
    summary: 'The agent queue: sessions filtered by assignment, status, customer, site and date range, sorted and paged',
    query: listParams,
    responses: { 200: ok('A page of sessions.', { type: 'array', items: session }, LIST_HEADERS) },
  });
  const agentAvailability = obj({ status: { $ref: '#/components/schemas/ChatAvailability' }, business_hours: { type: 'object', additionalProperties: true }, agents: { type: 'array', items: agent } });
  op('GET', '/chat/agent/availability', 'agent', {
    summary: 'Presence of every agent, business hours and the public status',
    responses: { 200: ok('Availability for agents.', agentAvailability) },
  });
  op('POST', '/chat/agent/availability', 'agent', {
    summary: 'Set presence (online, away, offline); admins also set business hours',
    description:
      'presence and/or business_hours. business_hours, and agent_id other than the caller, are for admins (403). With the API credentials presence needs agent_id (an existing agent). ' +
      'Each schedule interval ends after it starts.',
    body: schemas.agentAvailabilitySchema,
    responses: { 200: ok('Availability for agents.', agentAvailability) },
  });
  op('GET', '/chat/agent/reports', 'agent', {
    summary: 'Reports over the sessions created in [from, to): by status, first response / wait / resolution times (average, p90), satisfaction, agent time',
    description: 'from must not be later than to (400).',
    query: queryOf(schemas.reportQuery),
    responses: { 200: ok('The report.', schemas.reportJson) },
  });
  op('GET', '/chat/agent/canned-replies', 'agent', {
    summary: 'Canned replies; with session_id each has `rendered`, its placeholders filled for that session',
    description: 'Placeholders: {{customer_name}}, {{customer_first_name}}, {{customer_email}}, {{agent_name}}, {{session_id}}, {{ticket_id}}; any other stays as written. session_id must be an existing session (400).',
    query: queryOf(schemas.cannedQuery),
    responses: { 200: ok('Canned replies.', { type: 'array', items: cannedRef }) },
  });
  op('POST', '/chat/agent/canned-replies', 'admin', { summary: 'Create a canned reply', body: schemas.createCannedSchema, responses: { 201: ok('The reply.', cannedRef) } });
  const partial = 'Only the fields given change; {} changes nothing and answers the record as it is. The body is required.';
  op('PUT', '/chat/agent/canned-replies/:reply_id', 'admin', { summary: 'Update a canned reply', description: `${partial} The shortcut must be free (409).`, body: schemas.updateCannedSchema, responses: { 200: ok('The reply.', cannedRef) } });
  op('DELETE', '/chat/agent/canned-replies/:reply_id', 'admin', { summary: 'Delete a canned reply', responses: { 200: ok('The deleted reply.', cannedRef) } });
  op('GET', '/chat/agent/agents', 'agent', { summary: 'Agents (without their tokens)', responses: { 200: ok('Agents.', { type: 'array', items: agent }) } });
  const agentWithToken = obj({ agent, token: { type: 'string', description: 'Shown only now (only a digest is stored).' } });
  op('POST', '/chat/agent/agents', 'admin', { summary: 'Create an agent; answers its token once', body: schemas.createAgentSchema, responses: { 201: ok('The agent and its token.', agentWithToken) } });
  op('PUT', '/chat/agent/agents/:agent_id', 'admin', { summary: 'Update or disable (active:false) an agent', description: `${partial} The email must be free (409).`, body: schemas.updateAgentSchema, responses: { 200: ok('The agent.', agent) } });
  op('POST', '/chat/agent/agents/:agent_id/token', 'admin', { summary: "Replace an agent's token (the old one stops working)", responses: { 200: ok('The agent and its new token.', agentWithToken) } });
  const ticketSummary = registry.component('ChatTicketSummary', schemas.ticketSummaryJson);
  op('GET', '/chat/agent/tickets', 'agent', {
    summary: 'Tickets (those chats fell back to or were converted to), filtered by status, priority, category, source, customer and site, searched, sorted and paged',
    description: 'Each ticket without its conversation and notes (GET /chat/agent/tickets/{id} has them); chat_session_ids are the sessions it holds.',
    query: listQueryParams(ticketListSpec),
    responses: { 200: ok('A page of tickets.', { type: 'array', items: ticketSummary }, LIST_HEADERS) },
  });
  op('GET', '/chat/agent/tickets/:ticket_id', 'agent', { summary: 'A ticket with its conversation and private staff notes', responses: { 200: ok('The ticket.', ticket) } });
  for (const method of ['POST', 'PUT', 'PATCH'] as const) {
    op(method, '/chat/agent/tickets/:ticket_id', 'agent', {
      summary: "Work a ticket: change its status, priority, subject or category",
      description:
        'A partial body: only the fields given change (category null removes it). status: open, pending, resolved, closed; priority: low, normal, high, urgent. ' +
        'Each change is recorded in the conversation as a system line naming the agent and the old and new values; a value equal to the current one changes nothing. ' +
        'Any invalid field: 400 wu_rest_invalid_parameter naming it, and nothing changes. POST, PUT and PATCH do the same.',
      body: schemas.updateTicketSchema,
      responses: { 200: ok('The ticket.', ticket) },
    });
  }
  op('POST', '/chat/agent/tickets/:ticket_id/notes', 'agent', { summary: 'Add a private staff note to a ticket', body: schemas.ticketNoteSchema, responses: { 201: ok('The ticket.', ticket) } });
}
