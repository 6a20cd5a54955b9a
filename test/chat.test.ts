import { SA_CUSTOMER_ID } from '../src/temporal/search-attributes';
import { bearer, CHAT, expectError, makeAgent, makeSession, uniqueEmail } from './chat-helpers';
import { makeCustomer } from './estate-helpers';
import { createTestContext, type TestContext } from './helpers';

/**
 * The support chat routes: callers (public, customer session token, agent token, API
 * credentials as admin), sessions, messages, context, tokens, session actions, the agent
 * console (queue, availability, canned replies, agents, tickets), the offline fallback, CORS.
 * Realtime, the waiting-too-long workflow and attachments have their own files.
 */
describe('support chat', () => {
  let ctx: TestContext;
  let agent: { id: number; token: string; name: string };
  let admin: { id: number; token: string; name: string };
  const api = () => ({ Authorization: ctx.basic });

  beforeAll(async () => {
    ctx = await createTestContext({ CHAT_ALLOWED_ORIGINS: 'https://shop.example.com,https://other.example.com', AUTH_FAILURE_LIMIT: '1000' });
    await ctx.app.locals.chat.realtime.ready();
    agent = await makeAgent(ctx, { name: 'Grace Hopper', online: true });
    admin = await makeAgent(ctx, { name: 'Root Admin', admin: true });
  });
  afterAll(() => ctx?.close());

  const TABLES = ['chat_sessions', 'chat_messages', 'chat_agents', 'tickets', 'ticket_messages', 'ticket_notes', 'chat_satisfaction', 'chat_agent_time', 'chat_canned_replies'];
  const snapshot = async () => {
    const out: Record<string, unknown> = {};
    for (const t of TABLES) out[t] = await ctx.db(t).orderBy(t === 'chat_satisfaction' ? 'session_id' : 'id');
    out.hours = await ctx.db('chat_business_hours');
    return JSON.stringify(out);
  };

  describe('callers', () => {
    let s1: { id: number; token: string };
    let s2: { id: number; token: string };
    beforeAll(async () => {
      s1 = await makeSession(ctx);
      s2 = await makeSession(ctx);
    });

    type Who = 'session' | 'customer' | 'agent' | 'admin';
    const routes: { method: 'get' | 'post' | 'put' | 'patch' | 'delete'; path: () => string; who: Who }[] = [
      { method: 'get', path: () => `/chat/sessions/${s1.id}`, who: 'session' },
      { method: 'get', path: () => `/chat/sessions/${s1.id}/messages`, who: 'session' },
      { method: 'post', path: () => `/chat/sessions/${s1.id}/messages`, who: 'session' },
      { method: 'post', path: () => `/chat/sessions/${s1.id}/attachments`, who: 'session' },
      { method: 'get', path: () => `/chat/attachments/1/download`, who: 'session' },
      { method: 'post', path: () => `/chat/sessions/${s1.id}/context`, who: 'session' },
      { method: 'post', path: () => `/chat/sessions/${s1.id}/token`, who: 'session' },
      { method: 'post', path: () => `/chat/sessions/${s1.id}/status`, who: 'session' },
      { method: 'post', path: () => `/chat/sessions/${s1.id}/satisfaction`, who: 'customer' },
      { method: 'post', path: () => `/chat/sessions/${s1.id}/assign`, who: 'agent' },
      { method: 'post', path: () => `/chat/sessions/${s1.id}/metadata`, who: 'agent' },
      { method: 'post', path: () => `/chat/sessions/${s1.id}/link-ticket`, who: 'agent' },
      { method: 'post', path: () => `/chat/sessions/${s1.id}/agent-time`, who: 'agent' },
      { method: 'post', path: () => `/chat/sessions/${s1.id}/convert-ticket`, who: 'agent' },
      { method: 'get', path: () => `/chat/agent/sessions`, who: 'agent' },
      { method: 'get', path: () => `/chat/agent/availability`, who: 'agent' },
      { method: 'post', path: () => `/chat/agent/availability`, who: 'agent' },
      { method: 'get', path: () => `/chat/agent/reports`, who: 'agent' },
      { method: 'get', path: () => `/chat/agent/canned-replies`, who: 'agent' },
      { method: 'post', path: () => `/chat/agent/canned-replies`, who: 'admin' },
      { method: 'put', path: () => `/chat/agent/canned-replies/1`, who: 'admin' },
      { method: 'delete', path: () => `/chat/agent/canned-replies/1`, who: 'admin' },
      { method: 'get', path: () => `/chat/agent/agents`, who: 'agent' },
      { method: 'post', path: () => `/chat/agent/agents`, who: 'admin' },
      { method: 'put', path: () => `/chat/agent/agents/1`, who: 'admin' },
      { method: 'post', path: () => `/chat/agent/agents/1/token`, who: 'admin' },
      { method: 'get', path: () => `/chat/agent/tickets/1`, who: 'agent' },
      { method: 'post', path: () => `/chat/agent/tickets/1/notes`, who: 'agent' },
      { method: 'post', path: () => `/chat/agent/tickets/1`, who: 'agent' },
      { method: 'put', path: () => `/chat/agent/tickets/1`, who: 'agent' },
      { method: 'patch', path: () => `/chat/agent/tickets/1`, who: 'agent' },
    ];
    const call = (r: (typeof routes)[number], headers: Record<string, string> = {}) =>
      ctx.http[r.method](`${CHAT}${r.path()}`).set(headers).send({ definitely_not_a_field: 1 });

    test('no credentials: 401 rest_forbidden on every route but availability and session creation, before any validation', async () => {
      const before = await snapshot();
      for (const r of routes) {
        const res = await call(r);
        expectError(res, 401, 'rest_forbidden');
        expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
      }
      expect(await snapshot()).toBe(before);
    });

    test('wrong credentials (malformed or unknown Bearer token, wrong API secret): 401 on every route, public ones too', async () => {
      const wrong = [
        { Authorization: 'Bearer nonsense' },
        { Authorization: `Bearer ${s1.token.slice(0, -1)}${s1.token.endsWith('A') ? 'B' : 'A'}` },
        { Authorization: `Bearer ${agent.token.slice(0, -1)}${agent.token.endsWith('A') ? 'B' : 'A'}` },
        { Authorization: `Basic ${Buffer.from('hf_test_key_0123456789abcdef:wrong').toString('base64')}` },
      ];
      for (const h of wrong) {
        for (const r of routes.slice(0, 6)) expectError(await call(r, h), 401, 'rest_forbidden');
        expectError(await ctx.http.get(`${CHAT}/chat/availability`).set(h), 401, 'rest_forbidden');
        expectError(await ctx.http.post(`${CHAT}/chat/sessions`).set(h).send({}), 401, 'rest_forbidden');
      }
    });

    test("a customer token works for its own session only, and never on agent routes (403)", async () => {
      const before = await snapshot();
      for (const r of routes) {
        if (r.who === 'session' || r.who === 'customer') {
          if (r.path().includes('/attachments/')) continue; // attachment ids: see chat-attachments.test.ts
          const other = await ctx.http[r.method](`${CHAT}${r.path().replace(`/${s1.id}`, `/${s2.id}`)}`).set(bearer(s1.token)).send({ definitely_not_a_field: 1 });
          expectError(other, 403, 'rest_forbidden');
        } else {
          expectError(await call(r, bearer(s1.token)), 403, 'rest_forbidden');
        }
      }
      expect(await snapshot()).toBe(before);
    });

    test('agents may not rate a session; non-admin agents may not use the admin routes (403)', async () => {
      const before = await snapshot();
      for (const r of routes.filter((x) => x.who === 'customer' || x.who === 'admin')) {
        expectError(await call(r, bearer(agent.token)), 403, 'rest_forbidden');
        if (r.who === 'customer') expectError(await call(r, api()), 403, 'rest_forbidden');
      }
      expect(await snapshot()).toBe(before);
    });

    test('a disabled agent is refused (401); its token works again when re-enabled; a rotated token replaces the old one', async () => {
      const temp = await makeAgent(ctx);
      expect((await ctx.http.get(`${CHAT}/chat/agent/sessions`).set(bearer(temp.token))).status).toBe(200);
      const off = await ctx.http.put(`${CHAT}/chat/agent/agents/${temp.id}`).set(bearer(admin.token)).send({ active: false });
      expect(off.status).toBe(200);
      expect(off.body).toMatchObject({ id: temp.id, active: false, presence: 'offline' });
      expect(off.body.token_sha256).toBeUndefined();
      expectError(await ctx.http.get(`${CHAT}/chat/agent/sessions`).set(bearer(temp.token)), 401);
      await ctx.http.put(`${CHAT}/chat/agent/agents/${temp.id}`).set(api()).send({ active: true });
      expect((await ctx.http.get(`${CHAT}/chat/agent/sessions`).set(bearer(temp.token))).status).toBe(200);
      const rotated = await ctx.http.post(`${CHAT}/chat/agent/agents/${temp.id}/token`).set(api());
      expect(rotated.status).toBe(200);
      expect(rotated.body.token).toMatch(new RegExp(`^hfa_${temp.id}_`));
      expectError(await ctx.http.get(`${CHAT}/chat/agent/sessions`).set(bearer(temp.token)), 401);
      expect((await ctx.http.get(`${CHAT}/chat/agent/sessions`).set(bearer(rotated.body.token))).status).toBe(200);
    });

    test('the API credentials act as an admin agent (Basic or parameters); with enable_api off they are refused', async () => {
      expect((await ctx.http.get(`${CHAT}/chat/agent/agents`).set(api())).status).toBe(200);
      expect((await ctx.http.get(`${CHAT}/chat/agent/agents?api_key=hf_test_key_0123456789abcdef&api_secret=test-secret-0123456789-abcdefghij`)).status).toBe(200);
      await ctx.settings.setMany({ enable_api: false });
      try {
        expectError(await ctx.http.get(`${CHAT}/chat/agent/agents`).set(api()), 403, 'wu_rest_api_disabled');
        // Agents and customers are not API credentials: they keep working.
        expect((await ctx.http.get(`${CHAT}/chat/agent/agents`).set(bearer(agent.token))).status).toBe(200);
      } finally {
        await ctx.settings.setMany({ enable_api: true });
      }
    });

    test('tokens are stored only as digests', async () => {
      const rows = await ctx.db('chat_sessions').where({ id: s1.id }).first();
      expect(rows.token_sha256).toMatch(/^[a-f0-9]{64}$/);
      expect(JSON.stringify(rows)).not.toContain(s1.token);
      const a = await ctx.db('chat_agents').where({ id: agent.id }).first();
      expect(JSON.stringify(a)).not.toContain(agent.token);
      const list = await ctx.http.get(`${CHAT}/chat/agent/agents`).set(api());
      expect(JSON.stringify(list.body)).not.toMatch(/token_sha256|hfa_/);
    });
  });

  describe('sessions and messages', () => {
    test('POST /chat/sessions (anonymous): 201 with the session, a token for it, the realtime channel, the opening message', async () => {
      const res = await ctx.http.post(`${CHAT}/chat/sessions`).send({
        customer_name: 'Ada Lovelace',
        customer_email: 'ada@example.com',
        page_url: 'https://shop.example.com/pricing',
        page_title: 'Pricing',
        locale: 'en_GB',
        metadata: { plan: 'pro' },
        message: 'Hello, I need help with my site.',
      });
      expect(res.status).toBe(201);
      expect(res.body.session).toMatchObject({
        status: 'waiting',
        customer_name: 'Ada Lovelace',
        customer_email: 'ada@example.com',
        context: { page_url: 'https://shop.example.com/pricing', page_title: 'Pricing', locale: 'en_GB', referrer: null },
        assigned_agent_id: null,
        ticket_id: null,
        fallback_reason: null,
      });
      // Agents see the metadata and the follow-up workflow; the customer does not.
      expect(res.body.session.metadata).toBeUndefined();
      expect(res.body.session.follow_up_workflow_id).toBeUndefined();
      const asAgent = (await ctx.http.get(`${CHAT}/chat/sessions/${res.body.session.id}`).set(bearer(agent.token))).body;
      expect(asAgent.metadata).toEqual({ plan: 'pro' });
      expect(asAgent.follow_up_workflow_id).toMatch(new RegExp(`^${await ctx.app.locals.temporal.ids.prefix()}-chat-follow-up-${res.body.session.id}-[a-f0-9]{8}$`));
      const asCustomer = (await ctx.http.get(`${CHAT}/chat/sessions/${res.body.session.id}`).set(bearer(res.body.token))).body;
      expect(asAgent).toMatchObject({ site_id: null, identity_verified: false });
      expect(asCustomer).toEqual({ ...asAgent, metadata: undefined, follow_up_workflow_id: undefined, site_id: undefined, identity_verified: undefined });
      expect(res.body.token).toMatch(new RegExp(`^hfc_${res.body.session.id}_`));
      expect(res.body.realtime.url).toMatch(/^ws:\/\/.*\/wp-json\/ultimate-multisite-support-tickets\/v1\/chat\/realtime\?token=/);
      expect(res.body.poll_interval_seconds).toBe(15);
      expect(res.body.availability).toMatchObject({ online: true, reason: 'agents_available' });
      // Waiting for an agent is an event (issue 19), its payload the session as agents see it.
      const waiting = await ctx.db('events').where({ slug: 'chat_session_waiting', object_type: 'chat_session', object_id: res.body.session.id });
      expect(waiting.map((e) => e.payload)).toEqual([expect.objectContaining({ id: res.body.session.id, status: 'waiting', customer_email: 'ada@example.com', metadata: { plan: 'pro' } })]);
      expect(res.body.messages).toHaveLength(1);
      expect(res.body.messages[0]).toMatchObject({ sender_type: 'customer', sender_name: 'Ada Lovelace', body: 'Hello, I need help with my site.' });
    });

    test('customer_id: anonymous callers need a matching customer_hash; agents may give it directly; unknown ids are 400', async () => {
      const customerId = await makeCustomer(ctx);
      expectError(await ctx.http.post(`${CHAT}/chat/sessions`).send({ customer_id: customerId }), 400, 'wu_rest_invalid_parameter');
      expectError(await ctx.http.post(`${CHAT}/chat/sessions`).send({ customer_id: customerId, customer_hash: 'a'.repeat(64) }), 403, 'rest_forbidden');
      const hash = await ctx.app.locals.chat.secret.identityHash(customerId);
      const ok = await ctx.http.post(`${CHAT}/chat/sessions`).send({ customer_id: customerId, customer_hash: hash });
      expect(ok.status).toBe(201);
      expect(ok.body.session.customer_id).toBe(customerId);
      expect(ok.body.session.customer_email).toMatch(/@example\.com$/);
      const byAgent = await ctx.http.post(`${CHAT}/chat/sessions`).set(bearer(agent.token)).send({ customer_id: customerId });
      expect(byAgent.status).toBe(201);
      // Its follow-up workflow is found in the Temporal UI by the customer.
      const followUp = (await ctx.db('chat_sessions').where({ id: byAgent.body.session.id }).first('follow_up_workflow_id')).follow_up_workflow_id;
      const desc = await ctx.temporal.client.workflow.getHandle(followUp).describe();
      expect(desc.typedSearchAttributes.get(SA_CUSTOMER_ID)).toBe(customerId);
      expect(await desc.staticSummary()).toBe(`Chat follow-up, session ${byAgent.body.session.id}`);
      const unknown = await ctx.http.post(`${CHAT}/chat/sessions`).set(api()).send({ customer_id: 999999999, site_id: 999999999 });
      expectError(unknown, 400, 'wu_rest_invalid_parameter');
      expect(Object.keys(unknown.body.data.params).sort()).toEqual(['customer_id', 'site_id']);
    });

    test('messages: both sides post, the customer polls with the after cursor, the agent reply takes the session and counts as first response', async () => {
      const s = await makeSession(ctx, { message: 'First' });
      const first = (await ctx.http.get(`${CHAT}/chat/sessions/${s.id}/messages`).set(bearer(s.token))).body;
      expect(first.messages.map((m: any) => m.body)).toEqual(['First']);
      expect(first.has_more).toBe(false);
      const reply = await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/messages`).set(bearer(agent.token)).send({ body: 'Hi, how can I help?' });
      expect(reply.status).toBe(201);
      expect(reply.body).toMatchObject({ sender_type: 'agent', agent_id: agent.id, sender_name: 'Grace Hopper', body: 'Hi, how can I help?', attachment: null });
      const more = await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/messages`).set(bearer(s.token)).send({ body: 'My site is down' });
      expect(more.body).toMatchObject({ sender_type: 'customer', agent_id: null, sender_name: 'Ada Lovelace' });
      const page = (await ctx.http.get(`${CHAT}/chat/sessions/${s.id}/messages?after=${first.next_after}`).set(bearer(s.token))).body;
      expect(page.messages.map((m: any) => m.body)).toEqual(['Hi, how can I help?', 'My site is down']);
      expect(page.next_after).toBe(more.body.id);
      expect(page.session_status).toBe('active');
      const limited = (await ctx.http.get(`${CHAT}/chat/sessions/${s.id}/messages?limit=1`).set(bearer(agent.token))).body;
      expect(limited.messages).toHaveLength(1);
      expect(limited.has_more).toBe(true);
      const session = (await ctx.http.get(`${CHAT}/chat/sessions/${s.id}`).set(bearer(s.token))).body;
      expect(session).toMatchObject({ status: 'active', assigned_agent_id: agent.id });
      expect(session.first_response_at).toBe(reply.body.date_created);
      expect(session.last_message_at).toBe(more.body.date_created);
    });

    test('context: the customer updates the page it is on; metadata: agents set and remove keys', async () => {
      const s = await makeSession(ctx, { metadata: { plan: 'pro', source: 'widget' } });
      const ctxRes = await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/context`).set(bearer(s.token)).send({ page_url: 'https://shop.example.com/checkout', page_title: 'Checkout', referrer: null });
      expect(ctxRes.status).toBe(200);
      expect(ctxRes.body.context).toEqual({ page_url: 'https://shop.example.com/checkout', page_title: 'Checkout', referrer: null, locale: null });
      const meta = await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/metadata`).set(bearer(agent.token)).send({ metadata: { plan: 'business', source: null, order: '1234' } });
      expect(meta.status).toBe(200);
      expect(meta.body.metadata).toEqual({ plan: 'business', order: '1234' });
    });

    test('token: a realtime token for customers and agents; customers may replace their session token (the old one stops working)', async () => {
      const s = await makeSession(ctx);
      const forAgent = await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/token`).set(bearer(agent.token)).send({});
      expect(forAgent.status).toBe(200);
      expect(forAgent.body.session_id).toBe(s.id);
      expect(forAgent.body.realtime.token).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
      expect(forAgent.body.session_token).toBeUndefined();
      const claims = await ctx.app.locals.chat.secret.verifyRealtime(forAgent.body.realtime.token);
      expect(claims).toMatchObject({ session_id: s.id, role: 'agent', agent_id: agent.id });
      expect(claims!.exp * 1000 - Date.now()).toBeLessThanOrEqual(300_000);
      const refreshed = await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/token`).set(bearer(s.token)).send({ refresh_session_token: true });
      expect(refreshed.status).toBe(200);
      expect(refreshed.body.session_token).toMatch(new RegExp(`^hfc_${s.id}_`));
      expectError(await ctx.http.get(`${CHAT}/chat/sessions/${s.id}`).set(bearer(s.token)), 401);
      expect((await ctx.http.get(`${CHAT}/chat/sessions/${s.id}`).set(bearer(refreshed.body.session_token))).status).toBe(200);
      // A tampered realtime token is not accepted.
      const t = forAgent.body.realtime.token as string;
      expect(await ctx.app.locals.chat.secret.verifyRealtime(`${t.slice(0, 5)}x${t.slice(6)}`)).toBeNull();
    });

    test('an expired session token is refused (401)', async () => {
      const s = await makeSession(ctx);
      await ctx.db('chat_sessions').where({ id: s.id }).update({ token_expires_at: new Date(Date.now() - 1000) });
      expectError(await ctx.http.get(`${CHAT}/chat/sessions/${s.id}/messages`).set(bearer(s.token)), 401);
    });

    test('assign: to the caller, to another agent (transfer), unassign; the API credentials must name the agent', async () => {
      const s = await makeSession(ctx);
      const mine = await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/assign`).set(bearer(agent.token)).send({});
      expect(mine.status).toBe(200);
      expect(mine.body).toMatchObject({ status: 'assigned', assigned_agent_id: agent.id });
      expect(mine.body.assigned_at).not.toBeNull();
      const msgs = (await ctx.http.get(`${CHAT}/chat/sessions/${s.id}/messages`).set(bearer(s.token))).body.messages;
      expect(msgs[msgs.length - 1]).toMatchObject({ sender_type: 'system', body: 'Grace Hopper joined the chat.' });
      const transfer = await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/assign`).set(api()).send({ agent_id: admin.id });
      expect(transfer.body).toMatchObject({ assigned_agent_id: admin.id, assigned_at: mine.body.assigned_at });
      const none = await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/assign`).set(bearer(agent.token)).send({ agent_id: null });
      expect(none.body).toMatchObject({ status: 'waiting', assigned_agent_id: null });
      // Waiting again (unassigned) is a second chat_session_waiting; the transfer was none.
      expect((await ctx.db('events').where({ slug: 'chat_session_waiting', object_id: s.id }).orderBy('id')).map((e) => e.payload.status)).toEqual(['waiting', 'waiting']);
      expectError(await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/assign`).set(api()).send({}), 400, 'wu_rest_invalid_parameter');
    });

    test('status: agents resolve and close; a customer message reopens a resolved session; a closed one refuses messages (409); customers may only close', async () => {
      const s = await makeSession(ctx);
      expectError(await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/status`).set(bearer(s.token)).send({ status: 'resolved' }), 403);
      const resolved = await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/status`).set(bearer(agent.token)).send({ status: 'resolved' });
      expect(resolved.body).toMatchObject({ status: 'resolved' });
      expect(resolved.body.resolved_at).not.toBeNull();
      await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/messages`).set(bearer(s.token)).send({ body: 'One more thing' });
      expect((await ctx.http.get(`${CHAT}/chat/sessions/${s.id}`).set(bearer(s.token))).body).toMatchObject({ status: 'active', resolved_at: null });
      const closed = await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/status`).set(bearer(s.token)).send({ status: 'closed' });
      expect(closed.body.status).toBe('closed');
      expect(closed.body.closed_at).not.toBeNull();
      expectError(await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/messages`).set(bearer(s.token)).send({ body: 'Hello?' }), 409, 'chat_session_closed');
      expectError(await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/status`).set(bearer(agent.token)).send({ status: 'active' }), 409, 'chat_session_closed');
    });

    test('satisfaction: 1-5 with a comment, once per session (409 the second time)', async () => {
      const s = await makeSession(ctx);
      const r = await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/satisfaction`).set(bearer(s.token)).send({ rating: 4, comment: 'Quick and kind' });
      expect(r.status).toBe(201);
      expect(r.body).toMatchObject({ session_id: s.id, rating: 4, comment: 'Quick and kind' });
      expectError(await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/satisfaction`).set(bearer(s.token)).send({ rating: 5 }), 409, 'chat_satisfaction_exists');
      expect(await ctx.db('chat_satisfaction').where({ session_id: s.id })).toHaveLength(1);
    });

    test('agent time: minutes and a note per agent and session; admins log for another agent, agents only for themselves', async () => {
      const s = await makeSession(ctx);
      const a = await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/agent-time`).set(bearer(agent.token)).send({ minutes: 15, note: 'Looked at DNS' });
      expect(a.status).toBe(201);
      expect(a.body).toMatchObject({ entry: { session_id: s.id, agent_id: agent.id, minutes: 15, note: 'Looked at DNS' }, session_total_minutes: 15 });
      const b = await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/agent-time`).set(api()).send({ minutes: 5, agent_id: admin.id });
      expect(b.body).toMatchObject({ entry: { agent_id: admin.id, minutes: 5, note: '' }, session_total_minutes: 20 });
      expectError(await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/agent-time`).set(bearer(agent.token)).send({ minutes: 5, agent_id: admin.id }), 403);
      expectError(await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/agent-time`).set(api()).send({ minutes: 5 }), 400, 'wu_rest_invalid_parameter');
    });

    test('convert-ticket: a ticket from the transcript with a private note; later messages are appended; a second conversion is 409', async () => {
      const s = await makeSession(ctx, { message: 'Please migrate my site' });
      await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/messages`).set(bearer(agent.token)).send({ body: 'Sure, I will open a ticket.' });
      const conv = await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/convert-ticket`).set(bearer(agent.token)).send({ subject: 'Site migration', priority: 'high', note: 'VIP customer' });
      expect(conv.status).toBe(201);
      expect(conv.body.session).toMatchObject({ ticket_id: conv.body.ticket.id, fallback_reason: 'converted' });
      expect(conv.body.ticket).toMatchObject({ subject: 'Site migration', priority: 'high', status: 'open', customer_email: 'ada@example.com', chat_session_ids: [s.id] });
      expect(conv.body.ticket.messages.map((m: any) => [m.sender_type, m.body])).toEqual([
        ['customer', 'Please migrate my site'],
        ['agent', 'Sure, I will open a ticket.'],
      ]);
      expect(conv.body.ticket.notes).toEqual([expect.objectContaining({ agent_id: agent.id, note: 'VIP customer' })]);
      await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/messages`).set(bearer(s.token)).send({ body: 'Thanks!' });
      const ticket = (await ctx.http.get(`${CHAT}/chat/agent/tickets/${conv.body.ticket.id}`).set(bearer(agent.token))).body;
      expect(ticket.messages.map((m: any) => m.body)).toEqual(['Please migrate my site', 'Sure, I will open a ticket.', 'Thanks!']);
      const again = await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/convert-ticket`).set(bearer(agent.token)).send({});
      expectError(again, 409, 'chat_session_has_ticket');
      expect(again.body.data.ticket_id).toBe(conv.body.ticket.id);
    });

    test('link-ticket: links an existing ticket and copies the transcript once; another ticket is 409; unknown ticket 400', async () => {
      const a = await makeSession(ctx, { message: 'About my invoice' });
      const conv = await ctx.http.post(`${CHAT}/chat/sessions/${a.id}/convert-ticket`).set(api()).send({});
      const ticketId = conv.body.ticket.id;
      const b = await makeSession(ctx, { message: 'Same invoice question again' });
      const link = await ctx.http.post(`${CHAT}/chat/sessions/${b.id}/link-ticket`).set(bearer(agent.token)).send({ ticket_id: ticketId });
      expect(link.status).toBe(200);
      expect(link.body.session).toMatchObject({ ticket_id: ticketId, fallback_reason: 'linked' });
      expect(link.body.copied_messages).toBe(1);
      expect(link.body.ticket.chat_session_ids).toEqual([a.id, b.id]);
      expect(link.body.ticket.messages.map((m: any) => m.body)).toEqual(['About my invoice', 'Same invoice question again']);
      const twice = await ctx.http.post(`${CHAT}/chat/sessions/${b.id}/link-ticket`).set(bearer(agent.token)).send({ ticket_id: ticketId });
      expect(twice.body.copied_messages).toBe(0);
      const other = await ctx.http.post(`${CHAT}/chat/sessions/${a.id}/convert-ticket`).set(api()).send({});
      expectError(other, 409);
      const c = await makeSession(ctx);
      await ctx.http.post(`${CHAT}/chat/sessions/${c.id}/convert-ticket`).set(api()).send({});
      expectError(await ctx.http.post(`${CHAT}/chat/sessions/${c.id}/link-ticket`).set(api()).send({ ticket_id: ticketId }), 409, 'chat_session_has_ticket');
      expectError(await ctx.http.post(`${CHAT}/chat/sessions/${b.id}/link-ticket`).set(api()).send({ ticket_id: 999999 }), 400, 'wu_rest_invalid_parameter');
    });

    test('work a ticket: agents change status, priority, subject and category (POST, PUT or PATCH); each change is a system line of the conversation', async () => {
      const s = await makeSession(ctx, { message: 'My backups fail' });
      const conv = await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/convert-ticket`).set(bearer(agent.token)).send({ subject: 'Backups' });
      const id = conv.body.ticket.id;
      expect(conv.body.ticket).toMatchObject({ status: 'open', priority: 'normal', category: null });
      const stored = async () => ctx.db('tickets').where({ id }).first();
      const modifiedBefore = (await stored()).date_modified;

      const patched = await ctx.http.patch(`${CHAT}/chat/agent/tickets/${id}`).set(bearer(agent.token)).send({ status: 'pending', priority: 'urgent' });
      expect(patched.status).toBe(200);
      expect(patched.body).toMatchObject({ id, subject: 'Backups', status: 'pending', priority: 'urgent', category: null, chat_session_ids: [s.id] });
      expect(patched.body.messages.map((m: any) => [m.sender_type, m.body])).toEqual([
        ['customer', 'My backups fail'],
        ['system', 'Grace Hopper changed the status from "open" to "pending", the priority from "normal" to "urgent".'],
      ]);
      expect(patched.body.messages[1].chat_message_id).toBeNull();
      expect(new Date((await stored()).date_modified).getTime()).toBeGreaterThan(new Date(modifiedBefore).getTime());

      // The API credentials (an admin agent) with PUT; only the fields given change.
      const put = await ctx.http.put(`${CHAT}/chat/agent/tickets/${id}`).set(api()).send({ subject: 'Nightly backups fail', category: 'backups' });
      expect(put.status).toBe(200);
      expect(put.body).toMatchObject({ subject: 'Nightly backups fail', category: 'backups', status: 'pending', priority: 'urgent' });
      expect(put.body.messages.at(-1)).toMatchObject({ sender_type: 'system', body: 'Administrator changed the subject from "Backups" to "Nightly backups fail", the category from none to "backups".' });

      // POST with the current values changes nothing and records nothing; null removes the category.
      const same = await ctx.http.post(`${CHAT}/chat/agent/tickets/${id}`).set(bearer(admin.token)).send({ status: 'pending', priority: 'urgent' });
      expect(same.status).toBe(200);
      expect(same.body.messages).toHaveLength(3);
      const resolved = await ctx.http.post(`${CHAT}/chat/agent/tickets/${id}`).set(bearer(admin.token)).send({ status: 'resolved', category: null });
      expect(resolved.body).toMatchObject({ status: 'resolved', category: null });
      expect(resolved.body.messages.at(-1).body).toBe('Root Admin changed the status from "pending" to "resolved", the category from "backups" to none.');
      expect(await stored()).toMatchObject({ status: 'resolved', priority: 'urgent', category: null, subject: 'Nightly backups fail' });

      // Invalid values: 400 naming each field, nothing changed; unknown ticket 404; customers 403.
      const before = await snapshot();
      const bad = await ctx.http.patch(`${CHAT}/chat/agent/tickets/${id}`).set(bearer(agent.token)).send({ status: 'done', priority: 'low' });
      expectError(bad, 400, 'wu_rest_invalid_parameter');
      expect(Object.keys(bad.body.data.params)).toEqual(['status']);
      expectError(await ctx.http.put(`${CHAT}/chat/agent/tickets/999999`).set(bearer(agent.token)).send({ status: 'open' }), 404, 'wu_rest_ticket_invalid_id');
      // A non-numeric id matches no route, as everywhere in the API.
      expectError(await ctx.http.put(`${CHAT}/chat/agent/tickets/abc`).set(bearer(agent.token)).send({ status: 'open' }), 404, 'rest_no_route');
      expectError(await ctx.http.patch(`${CHAT}/chat/agent/tickets/${id}`).set(bearer(s.token)).send({ status: 'open' }), 403, 'rest_forbidden');
      expectError(await ctx.http.patch(`${CHAT}/chat/agent/tickets/${id}`).send({ status: 'open' }), 401, 'rest_forbidden');
      expect(await snapshot()).toBe(before);
    });

    test('the ticket list: filtered by status, priority and source, searched, sorted and paged, without conversations; hostile queries refused', async () => {
      const a = await makeSession(ctx, { message: 'Ticket list one', customer_email: 'list-one@example.com' });
      const b = await makeSession(ctx, { message: 'Ticket list two', customer_email: 'list-two@example.com' });
      const ta = (await ctx.http.post(`${CHAT}/chat/sessions/${a.id}/convert-ticket`).set(bearer(agent.token)).send({ subject: 'Zebra invoice', priority: 'high' })).body.ticket.id;
      const tb = (await ctx.http.post(`${CHAT}/chat/sessions/${b.id}/convert-ticket`).set(bearer(agent.token)).send({ subject: 'Zebra backups' })).body.ticket.id;
      await ctx.http.patch(`${CHAT}/chat/agent/tickets/${tb}`).set(bearer(agent.token)).send({ status: 'pending' });

      const all = await ctx.http.get(`${CHAT}/chat/agent/tickets?search=zebra&orderby=id&order=asc`).set(bearer(agent.token));
      expect(all.status).toBe(200);
      expect(all.headers['x-wp-total']).toBe('2');
      expect(all.body).toEqual([
        expect.objectContaining({ id: ta, subject: 'Zebra invoice', status: 'open', priority: 'high', source: 'chat', customer_email: 'list-one@example.com', chat_session_ids: [a.id] }),
        expect.objectContaining({ id: tb, subject: 'Zebra backups', status: 'pending', priority: 'normal', chat_session_ids: [b.id] }),
      ]);
      expect(all.body[0].messages).toBeUndefined();
      expect(all.body[0].notes).toBeUndefined();

      const pending = await ctx.http.get(`${CHAT}/chat/agent/tickets?search=zebra&status=pending`).set(api());
      expect(pending.body.map((t: { id: number }) => t.id)).toEqual([tb]);
      const high = await ctx.http.get(`${CHAT}/chat/agent/tickets?search=zebra&priority__in=high,urgent`).set(bearer(agent.token));
      expect(high.body.map((t: { id: number }) => t.id)).toEqual([ta]);
      const paged = await ctx.http.get(`${CHAT}/chat/agent/tickets?search=zebra&per_page=1&orderby=id&order=desc`).set(bearer(agent.token));
      expect(paged.body.map((t: { id: number }) => t.id)).toEqual([tb]);
      expect(paged.headers['x-wp-totalpages']).toBe('2');
      expect(paged.headers.link).toMatch(/rel="next"/);

      // Hostile input: wrong types, unknown values, huge and unicode searches; customers and anonymous callers refused.
      const badStatus = await ctx.http.get(`${CHAT}/chat/agent/tickets?status=done`).set(bearer(agent.token));
      expectError(badStatus, 400, 'wu_rest_invalid_parameter');
      expect(Object.keys(badStatus.body.data.params)).toContain('status');
      expectError(await ctx.http.get(`${CHAT}/chat/agent/tickets?per_page=abc`).set(bearer(agent.token)), 400, 'wu_rest_invalid_parameter');
      expectError(await ctx.http.get(`${CHAT}/chat/agent/tickets?orderby=customer_hash`).set(bearer(agent.token)), 400, 'wu_rest_invalid_parameter');
      expectError(await ctx.http.get(`${CHAT}/chat/agent/tickets?status[a][b]=open`).set(bearer(agent.token)), 400);
      const unicode = await ctx.http.get(`${CHAT}/chat/agent/tickets?search=${encodeURIComponent('zébra 🦓 %_')}`).set(bearer(agent.token));
      expect(unicode.status).toBe(200);
      expect(unicode.body).toEqual([]);
      const huge = await ctx.http.get(`${CHAT}/chat/agent/tickets?search=${'z'.repeat(5000)}`).set(bearer(agent.token));
      expectError(huge, 400, 'wu_rest_invalid_parameter');
      expect(Object.keys(huge.body.data.params)).toEqual(['search']);
      expectError(await ctx.http.get(`${CHAT}/chat/agent/tickets`).set(bearer(a.token)), 403, 'rest_forbidden');
      expectError(await ctx.http.get(`${CHAT}/chat/agent/tickets`), 401, 'rest_forbidden');
    });

    test('unknown ids: 404 in the error shape', async () => {
      expectError(await ctx.http.get(`${CHAT}/chat/sessions/999999/messages`).set(bearer(agent.token)), 404, 'wu_rest_chat_session_invalid_id');
      expectError(await ctx.http.post(`${CHAT}/chat/sessions/999999/assign`).set(api()).send({ agent_id: agent.id }), 404);
      expectError(await ctx.http.get(`${CHAT}/chat/agent/tickets/999999`).set(api()), 404, 'wu_rest_ticket_invalid_id');
      expectError(await ctx.http.get(`${CHAT}/chat/nowhere`).set(api()), 404, 'rest_no_route');
    });
  });

  describe('bad input', () => {
    test('each route answers 400 wu_rest_invalid_parameter naming the parameter, and changes nothing', async () => {
      const s = await makeSession(ctx);
      const before = await snapshot();
      const cases: { req: () => any; params: string[] }[] = [
        { req: () => ctx.http.post(`${CHAT}/chat/sessions`).send({ customer_email: 'nope', page_url: 'javascript:alert(1)', extra: 1 }), params: ['customer_email', 'extra', 'page_url'] },
        { req: () => ctx.http.post(`${CHAT}/chat/sessions`).send({ message: '' }), params: ['message'] },
        { req: () => ctx.http.get(`${CHAT}/chat/sessions/${s.id}/messages?after=-1&limit=500`).set(bearer(s.token)), params: ['after', 'limit'] },
        { req: () => ctx.http.get(`${CHAT}/chat/sessions/${s.id}/messages?cursor=1`).set(bearer(s.token)), params: ['cursor'] },
        { req: () => ctx.http.post(`${CHAT}/chat/sessions/${s.id}/messages`).set(bearer(s.token)).send({}), params: ['body'] },
        { req: () => ctx.http.post(`${CHAT}/chat/sessions/${s.id}/messages`).set(bearer(s.token)).send({ body: 'x'.repeat(10_001) }), params: ['body'] },
        { req: () => ctx.http.post(`${CHAT}/chat/sessions/${s.id}/messages`).set(bearer(s.token)).send({ canned_reply_id: 1 }), params: ['canned_reply_id'] },
        { req: () => ctx.http.post(`${CHAT}/chat/sessions/${s.id}/context`).set(bearer(s.token)).send({ page_url: 'ftp://x' }), params: ['page_url'] },
        { req: () => ctx.http.post(`${CHAT}/chat/sessions/${s.id}/context`).set(bearer(s.token)).send({}), params: ['body'] },
        { req: () => ctx.http.post(`${CHAT}/chat/sessions/${s.id}/token`).set(bearer(s.token)).send({ refresh_session_token: 'yes' }), params: ['refresh_session_token'] },
        { req: () => ctx.http.post(`${CHAT}/chat/sessions/${s.id}/token`).set(bearer(agent.token)).send({ refresh_session_token: true }), params: ['refresh_session_token'] },
        { req: () => ctx.http.post(`${CHAT}/chat/sessions/${s.id}/status`).set(bearer(agent.token)).send({ status: 'waiting' }), params: ['status'] },
        { req: () => ctx.http.post(`${CHAT}/chat/sessions/${s.id}/satisfaction`).set(bearer(s.token)).send({ rating: 6 }), params: ['rating'] },
        { req: () => ctx.http.post(`${CHAT}/chat/sessions/${s.id}/satisfaction`).set(bearer(s.token)).send({ rating: 4.5, comment: 3 }), params: ['comment', 'rating'] },
        { req: () => ctx.http.post(`${CHAT}/chat/sessions/${s.id}/assign`).set(bearer(agent.token)).send({ agent_id: 'me' }), params: ['agent_id'] },
        { req: () => ctx.http.post(`${CHAT}/chat/sessions/${s.id}/assign`).set(bearer(agent.token)).send({ agent_id: 999999 }), params: ['agent_id'] },
        { req: () => ctx.http.post(`${CHAT}/chat/sessions/${s.id}/metadata`).set(bearer(agent.token)).send({ metadata: { 'bad key': 'x', n: 5 } }), params: ['metadata.bad key', 'metadata.n'] },
        { req: () => ctx.http.post(`${CHAT}/chat/sessions/${s.id}/metadata`).set(bearer(agent.token)).send({ metadata: {} }), params: ['metadata'] },
        { req: () => ctx.http.post(`${CHAT}/chat/sessions/${s.id}/link-ticket`).set(bearer(agent.token)).send({}), params: ['ticket_id'] },
        { req: () => ctx.http.post(`${CHAT}/chat/sessions/${s.id}/agent-time`).set(bearer(agent.token)).send({ minutes: 0, note: 'x'.repeat(2001) }), params: ['minutes', 'note'] },
        { req: () => ctx.http.post(`${CHAT}/chat/sessions/${s.id}/convert-ticket`).set(bearer(agent.token)).send({ priority: 'asap' }), params: ['priority'] },
        { req: () => ctx.http.get(`${CHAT}/chat/agent/sessions?status=open&orderby=secret&assignment=theirs`).set(bearer(agent.token)), params: ['assignment', 'orderby', 'status'] },
        { req: () => ctx.http.get(`${CHAT}/chat/agent/sessions?assignment=mine`).set(api()), params: ['assignment'] },
        { req: () => ctx.http.post(`${CHAT}/chat/agent/availability`).set(bearer(agent.token)).send({ presence: 'busy' }), params: ['presence'] },
        { req: () => ctx.http.post(`${CHAT}/chat/agent/availability`).set(api()).send({ presence: 'online' }), params: ['agent_id'] },
        {
          req: () => ctx.http.post(`${CHAT}/chat/agent/availability`).set(api()).send({ business_hours: { timezone: 'Mars/Olympus', schedule: { mon: [['18:00', '09:00']], funday: [] }, holidays: ['25/12'] } }),
          params: ['business_hours.holidays.0', 'business_hours.schedule.funday', 'business_hours.schedule.mon.0', 'business_hours.timezone'],
        },
        { req: () => ctx.http.get(`${CHAT}/chat/agent/reports?from=yesterday`).set(bearer(agent.token)), params: ['from'] },
        { req: () => ctx.http.get(`${CHAT}/chat/agent/reports?from=2026-02-01&to=2026-01-01`).set(bearer(agent.token)), params: ['from'] },
        { req: () => ctx.http.get(`${CHAT}/chat/agent/canned-replies?session_id=abc`).set(bearer(agent.token)), params: ['session_id'] },
        { req: () => ctx.http.post(`${CHAT}/chat/agent/canned-replies`).set(api()).send({ shortcut: 'Has Space', title: '', body: 'x' }), params: ['shortcut', 'title'] },
        { req: () => ctx.http.post(`${CHAT}/chat/agent/agents`).set(api()).send({ name: 'X', email: 'not-an-email', is_admin: 'yes' }), params: ['email', 'is_admin'] },
        { req: () => ctx.http.put(`${CHAT}/chat/agent/agents/${agent.id}`).set(api()).send({ active: 'no' }), params: ['active'] },
        { req: () => ctx.http.post(`${CHAT}/chat/agent/tickets/1/notes`).set(api()).send({ note: '' }), params: ['note'] },
        { req: () => ctx.http.put(`${CHAT}/chat/agent/tickets/1`).set(api()).send({ status: 'done', priority: 'asap', subject: ' ', extra: 1 }), params: ['extra', 'priority', 'status', 'subject'] },
        { req: () => ctx.http.patch(`${CHAT}/chat/agent/tickets/1`).set(bearer(agent.token)).send({}), params: ['body'] },
        { req: () => ctx.http.post(`${CHAT}/chat/agent/tickets/1`).set(bearer(agent.token)).send({ category: 5, subject: 'x'.repeat(201) }), params: ['category', 'subject'] },
      ];
      for (const c of cases) {
        const res = await c.req();
        expectError(res, 400, 'wu_rest_invalid_parameter');
        expect(Object.keys(res.body.data.params).sort()).toEqual(c.params);
      }
      // Malformed JSON: after authentication, in the error shape.
      const bad = await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/messages`).set(bearer(s.token)).set('Content-Type', 'application/json').send('{"body":');
      expectError(bad, 400, 'rest_invalid_json');
      expectError(await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/messages`).set('Content-Type', 'application/json').send('{"body":'), 401);
      expect(await snapshot()).toBe(before);
    });
  });

  describe('agent console', () => {
    test('agents: an admin creates one (token shown once), a duplicate email is 409; every agent lists them', async () => {
      const email = uniqueEmail('dup');
      const created = await ctx.http.post(`${CHAT}/chat/agent/agents`).set(bearer(admin.token)).send({ name: 'Linus', email });
      expect(created.status).toBe(201);
      expect(created.body.agent).toMatchObject({ name: 'Linus', email, is_admin: false, active: true, presence: 'offline' });
      expect(created.body.token).toMatch(/^hfa_\d+_[A-Za-z0-9_-]{43}$/);
      expectError(await ctx.http.post(`${CHAT}/chat/agent/agents`).set(api()).send({ name: 'Other', email: email.toUpperCase() }), 409, 'chat_agent_email_exists');
      const list = await ctx.http.get(`${CHAT}/chat/agent/agents`).set(bearer(agent.token));
      expect(list.body.map((a: any) => a.email)).toContain(email);
      expectError(await ctx.http.put(`${CHAT}/chat/agent/agents/999999`).set(api()).send({ name: 'x' }), 404);
    });

    test('session list: filters by assignment, status, customer, site and date range; sorted, paged with the paging headers', async () => {
      const other = await makeAgent(ctx, { name: 'Queue Agent' });
      const customerId = await makeCustomer(ctx);
      const [site] = await ctx.db('sites').insert({ title: 'Chat site', domain: `chat${Date.now()}.example.com`, customer_id: customerId }).returning('id');
      const siteId = Number(site.id);
      const a = await makeSession(ctx, { site_id: siteId, customer_name: 'Queue One' });
      const b = await makeSession(ctx, { site_id: siteId, customer_name: 'Queue Two' });
      const c = (await ctx.http.post(`${CHAT}/chat/sessions`).set(api()).send({ customer_id: customerId, site_id: siteId })).body.session;
      await ctx.http.post(`${CHAT}/chat/sessions/${b.id}/assign`).set(bearer(other.token)).send({});
      await ctx.http.post(`${CHAT}/chat/sessions/${c.id}/status`).set(bearer(other.token)).send({ status: 'resolved' });
      await ctx.db('chat_sessions').where({ id: a.id }).update({ date_created: new Date('2026-01-10T10:00:00Z') });
      const list = (q: string, token = other.token) => ctx.http.get(`${CHAT}/chat/agent/sessions?site_id=${siteId}&${q}`).set(bearer(token));

      const all = await list('orderby=id&order=asc');
      expect(all.status).toBe(200);
      expect(all.body.map((x: any) => x.id)).toEqual([a.id, b.id, c.id]);
      expect(all.headers['x-wp-total']).toBe('3');
      expect((await list('assignment=mine')).body.map((x: any) => x.id)).toEqual([b.id]);
      expect((await list('assignment=assigned')).body.map((x: any) => x.id)).toEqual([b.id]);
      expect((await list('assignment=unassigned&order=asc')).body.map((x: any) => x.id)).toEqual([a.id, c.id]);
      expect((await list('status=resolved')).body.map((x: any) => x.id)).toEqual([c.id]);
      expect((await list('status__in=waiting,assigned&order=asc')).body.map((x: any) => x.id)).toEqual([a.id, b.id]);
      expect((await list(`customer_id=${customerId}`)).body.map((x: any) => x.id)).toEqual([c.id]);
      expect((await list('date_created[before]=2026-02-01')).body.map((x: any) => x.id)).toEqual([a.id]);
      expect((await list('date_created[after]=2026-02-01&order=asc')).body.map((x: any) => x.id)).toEqual([b.id, c.id]);
      expect((await list('search=queue%20two')).body.map((x: any) => x.id)).toEqual([b.id]);
      const paged = await list('per_page=2&page=1&orderby=date_created&order=desc');
      expect(paged.body.map((x: any) => x.id)).toEqual([c.id, b.id]);
      expect(paged.headers['x-wp-totalpages']).toBe('2');
      expect(paged.headers.link).toMatch(/rel="next"/);
    });

    test('session list: the customer_email filter compares case-insensitively (as the customers e-mail filter), served by an index', async () => {
      const email = uniqueEmail('Visitor');
      const s = await makeSession(ctx, { customer_email: email });
      const list = (q: string) => ctx.http.get(`${CHAT}/chat/agent/sessions?${q}`).set(api());
      for (const asked of [email, email.toUpperCase(), email.toLowerCase()]) {
        const res = await list(`customer_email=${encodeURIComponent(asked)}`);
        expect(res.status).toBe(200);
        expect(res.body.map((x: any) => x.id)).toEqual([s.id]);
        expect(res.headers['x-wp-total']).toBe('1');
      }
      expect((await list(`customer_email__not_in=${encodeURIComponent(email.toUpperCase())}&id=${s.id}`)).body).toEqual([]);
      expect((await list(`customer_email=${encodeURIComponent(email.replace('Visitor', 'V_sitor'))}`)).body).toEqual([]);
      const plan = await ctx.db.transaction(async (trx) => {
        await trx.raw('SET LOCAL enable_seqscan = off');
        const r = await trx.raw('EXPLAIN SELECT id FROM chat_sessions WHERE lower(customer_email) = lower(?) ORDER BY id DESC LIMIT 20', [email]);
        return r.rows.map((row: Record<string, string>) => row['QUERY PLAN']).join('\n');
      });
      expect(plan).toMatch(/chat_sessions_customer_email_lower_idx/);
    });

    test('availability: presence per agent; business hours with time zone, schedule and holidays decide online/offline and why', async () => {
      const pub = async () => (await ctx.http.get(`${CHAT}/chat/availability`)).body;
      expect(await pub()).toMatchObject({ online: true, status: 'online', reason: 'agents_available', realtime_available: true, poll_interval_seconds: 15 });
      expect((await pub()).expected_wait_seconds).toEqual(expect.any(Number));

      const view = await ctx.http.post(`${CHAT}/chat/agent/availability`).set(bearer(agent.token)).send({ presence: 'away' });
      expect(view.body.agents.find((a: any) => a.id === agent.id)).toMatchObject({ presence: 'away' });
      const offline = await pub();
      expect(offline).toMatchObject({ online: false, reason: 'no_agent_online', expected_wait_seconds: null });
      // Agents set only their own presence; business hours are for admins.
      expectError(await ctx.http.post(`${CHAT}/chat/agent/availability`).set(bearer(agent.token)).send({ presence: 'online', agent_id: admin.id }), 403);
      expectError(await ctx.http.post(`${CHAT}/chat/agent/availability`).set(bearer(agent.token)).send({ business_hours: { enabled: true } }), 403);
      await ctx.http.post(`${CHAT}/chat/agent/availability`).set(api()).send({ presence: 'online', agent_id: agent.id });

      // Open every day all day in Tokyo except today (local) as a holiday.
      const today = new Intl.DateTimeFormat('en-CA', { timeZone: 'Asia/Tokyo', year: 'numeric', month: '2-digit', day: '2-digit' }).format(new Date());
      const allDay = Object.fromEntries(['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'].map((d) => [d, [['00:00', '24:00']]]));
      const set = await ctx.http.post(`${CHAT}/chat/agent/availability`).set(bearer(admin.token)).send({ business_hours: { enabled: true, timezone: 'Asia/Tokyo', schedule: allDay, holidays: [today], offline_message: 'Closed today.' } });
      expect(set.status).toBe(200);
      expect(set.body.business_hours).toMatchObject({ enabled: true, timezone: 'Asia/Tokyo', holidays: [today], open_now: false, offline_message: 'Closed today.' });
      expect(await pub()).toMatchObject({ online: false, reason: 'holiday', message: 'Closed today.' });
      await ctx.http.post(`${CHAT}/chat/agent/availability`).set(api()).send({ business_hours: { holidays: [], schedule: {} } });
      expect(await pub()).toMatchObject({ online: false, reason: 'outside_business_hours' });
      await ctx.http.post(`${CHAT}/chat/agent/availability`).set(api()).send({ business_hours: { schedule: allDay } });
      expect(await pub()).toMatchObject({ online: true, reason: 'agents_available', business_hours: { open_now: true } });
      await ctx.http.post(`${CHAT}/chat/agent/availability`).set(api()).send({ business_hours: { enabled: false } });
      const got = await ctx.http.get(`${CHAT}/chat/agent/availability`).set(bearer(agent.token));
      expect(got.body.status.online).toBe(true);
    });

    test('offline fallback: a session started while nobody is online gets a ticket holding the conversation; later messages are appended', async () => {
      await ctx.http.post(`${CHAT}/chat/agent/availability`).set(bearer(agent.token)).send({ presence: 'offline' });
      try {
        expect((await ctx.http.get(`${CHAT}/chat/availability`)).body.online).toBe(false);
        const res = await ctx.http.post(`${CHAT}/chat/sessions`).send({ customer_name: 'Night Owl', customer_email: 'owl@example.com', message: 'Is anyone there?' });
        expect(res.status).toBe(201);
        const session = res.body.session;
        expect(session.fallback_reason).toBe('offline');
        expect(session.ticket_id).toEqual(expect.any(Number));
        expect((await ctx.db('chat_sessions').where({ id: session.id }).first()).follow_up_workflow_id).toBeNull();
        expect(res.body.availability).toMatchObject({ online: false, reason: 'no_agent_online' });
        expect(res.body.messages.map((m: any) => m.sender_type)).toEqual(['customer', 'system']);
        expect(res.body.messages[1].body).toContain(`ticket #${session.ticket_id}`);
        // A ticket instead of a wait: chat_ticket_created with the ticket and its transcript as it was then
        // (the customer's message; the notice follows), and no chat_session_waiting.
        const created = await ctx.db('events').where({ slug: 'chat_ticket_created', object_id: session.ticket_id });
        expect(created.map((e) => [e.object_type, e.payload.chat_session_ids, e.payload.messages.map((m: any) => m.body)])).toEqual([['ticket', [session.id], ['Is anyone there?']]]);
        expect(await ctx.db('events').where({ slug: 'chat_session_waiting', object_id: session.id })).toEqual([]);
        await ctx.http.post(`${CHAT}/chat/sessions/${session.id}/messages`).set(bearer(res.body.token)).send({ body: 'My site shows a 502.' });
        const ticket = (await ctx.http.get(`${CHAT}/chat/agent/tickets/${session.ticket_id}`).set(api())).body;
        expect(ticket).toMatchObject({ subject: `Chat #${session.id} with Night Owl`, status: 'open', customer_email: 'owl@example.com', chat_session_ids: [session.id] });
        expect(ticket.messages.map((m: any) => [m.sender_type, m.body.slice(0, 20)])).toEqual([
          ['customer', 'Is anyone there?'],
          ['system', res.body.messages[1].body.slice(0, 20)],
          ['customer', 'My site shows a 502.'],
        ]);
        // Private staff notes: agents only.
        const noted = await ctx.http.post(`${CHAT}/chat/agent/tickets/${session.ticket_id}/notes`).set(bearer(agent.token)).send({ note: 'Check the proxy' });
        expect(noted.status).toBe(201);
        expect(noted.body.notes).toEqual([expect.objectContaining({ agent_id: agent.id, note: 'Check the proxy' })]);
        expectError(await ctx.http.get(`${CHAT}/chat/agent/tickets/${session.ticket_id}`).set(bearer(res.body.token)), 403);
        const polled = await ctx.http.get(`${CHAT}/chat/sessions/${session.id}/messages`).set(bearer(res.body.token));
        expect(JSON.stringify(polled.body)).not.toContain('Check the proxy');
      } finally {
        await ctx.http.post(`${CHAT}/chat/agent/availability`).set(bearer(agent.token)).send({ presence: 'online' });
      }
    });

    test('realtime reported unavailable by the widget (realtime:false): the session gets a ticket too', async () => {
      const res = await ctx.http.post(`${CHAT}/chat/sessions`).send({ customer_name: 'Proxy User', realtime: false, message: 'WebSockets are blocked here' });
      expect(res.status).toBe(201);
      expect(res.body.session).toMatchObject({ fallback_reason: 'realtime_unavailable', ticket_id: expect.any(Number) });
      const ticket = await ctx.db('ticket_messages').where({ ticket_id: res.body.session.ticket_id }).orderBy('id');
      expect(ticket.map((m) => m.body)[0]).toBe('WebSockets are blocked here');
    });

    test('canned replies: admins create, update and delete; agents list them with placeholders filled for a session and send them', async () => {
      const created = await ctx.http.post(`${CHAT}/chat/agent/canned-replies`).set(bearer(admin.token)).send({ shortcut: 'hello', title: 'Greeting', body: 'Hi {{customer_first_name}}, I am {{agent_name}}. Session {{session_id}} {{unknown}}' });
      expect(created.status).toBe(201);
      expectError(await ctx.http.post(`${CHAT}/chat/agent/canned-replies`).set(api()).send({ shortcut: 'hello', title: 'Again', body: 'x' }), 409, 'chat_canned_reply_shortcut_exists');
      const s = await makeSession(ctx);
      const list = await ctx.http.get(`${CHAT}/chat/agent/canned-replies?session_id=${s.id}&search=greet`).set(bearer(agent.token));
      expect(list.status).toBe(200);
      expect(list.body).toEqual([expect.objectContaining({ id: created.body.id, shortcut: 'hello', rendered: `Hi Ada, I am Grace Hopper. Session ${s.id} {{unknown}}` })]);
      const plain = await ctx.http.get(`${CHAT}/chat/agent/canned-replies`).set(bearer(agent.token));
      expect(plain.body[0].rendered).toBeUndefined();
      const sent = await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/messages`).set(bearer(agent.token)).send({ canned_reply_id: created.body.id });
      expect(sent.body.body).toBe(`Hi Ada, I am Grace Hopper. Session ${s.id} {{unknown}}`);
      const upd = await ctx.http.put(`${CHAT}/chat/agent/canned-replies/${created.body.id}`).set(api()).send({ body: 'Bye {{customer_name}}' });
      expect(upd.body).toMatchObject({ shortcut: 'hello', body: 'Bye {{customer_name}}' });
      const del = await ctx.http.delete(`${CHAT}/chat/agent/canned-replies/${created.body.id}`).set(api());
      expect(del.body.id).toBe(created.body.id);
      expectError(await ctx.http.delete(`${CHAT}/chat/agent/canned-replies/${created.body.id}`).set(api()), 404);
    });
  });

  test('the namespace index lists the chat routes, as WordPress does per namespace; the REST index lists the namespace', async () => {
    const idx = await ctx.http.get(CHAT);
    expect(idx.status).toBe(200);
    expect(idx.body.namespace).toBe('ultimate-multisite-support-tickets/v1');
    expect(idx.body.routes['/ultimate-multisite-support-tickets/v1/chat/sessions/(?P<session_id>[\\d]+)/messages'].methods.sort()).toEqual(['GET', 'POST']);
    expect(idx.body.realtime.path).toBe(`${CHAT}/chat/realtime`);
    const rest = await ctx.http.get('/wp-json/');
    expect(rest.body.namespaces).toContain('ultimate-multisite-support-tickets/v1');
  });

  describe('CORS', () => {
    test('preflight from an allowed origin: 204 with the allowed methods and headers; other origins get no CORS headers', async () => {
      const pre = await ctx.http
        .options(`${CHAT}/chat/sessions/1/messages`)
        .set('Origin', 'https://shop.example.com')
        .set('Access-Control-Request-Method', 'POST')
        .set('Access-Control-Request-Headers', 'authorization,content-type');
      expect(pre.status).toBe(204);
      expect(pre.headers['access-control-allow-origin']).toBe('https://shop.example.com');
      expect(pre.headers['access-control-allow-methods']).toContain('POST');
      expect(pre.headers['access-control-allow-headers']).toMatch(/Authorization/);
      expect(pre.headers.vary).toMatch(/Origin/);
      const evil = await ctx.http.options(`${CHAT}/chat/sessions`).set('Origin', 'https://evil.example.net').set('Access-Control-Request-Method', 'POST');
      expect(evil.headers['access-control-allow-origin']).toBeUndefined();
      const get = await ctx.http.get(`${CHAT}/chat/availability`).set('Origin', 'https://other.example.com');
      expect(get.headers['access-control-allow-origin']).toBe('https://other.example.com');
      expect(get.headers['access-control-expose-headers']).toMatch(/X-WP-Total/);
      // The main namespace has no CORS.
      const wu = await ctx.http.get('/wp-json/wu/v2/customers').set('Origin', 'https://shop.example.com').set('Authorization', ctx.basic);
      expect(wu.headers['access-control-allow-origin']).toBeUndefined();
    });
  });
});
