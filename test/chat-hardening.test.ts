import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { fillPlaceholders } from '../src/chat/canned';
import { loadConfig, ConfigError } from '../src/config';
import { trimmedAtLeast } from '../src/http/validation';
import { bearer, CHAT, expectError, makeAgent, makeSession } from './chat-helpers';
import { inlineRefs } from './contract';
import { makeCustomer } from './estate-helpers';
import { createTestContext, type TestContext } from './helpers';

/**
 * Issue 12, the support chat: placeholders that reach object internals, session tokens that
 * live forever, anonymous existence oracles, sessions that became tickets counted as waiting,
 * missing bodies, and a document looser than the server.
 */
describe('support chat: hardening', () => {
  let ctx: TestContext;
  let admin: { id: number; token: string; name: string };
  let agent: { id: number; token: string; name: string };
  const api = () => ({ Authorization: ctx.basic });
  const MAX_AGE = 7200;
  const TTL = 3600;

  beforeAll(async () => {
    ctx = await createTestContext({ CHAT_SESSION_TOKEN_TTL_SECONDS: String(TTL), CHAT_SESSION_TOKEN_MAX_AGE_SECONDS: String(MAX_AGE), AUTH_FAILURE_LIMIT: '1000' });
    await ctx.app.locals.chat.realtime.ready();
    admin = await makeAgent(ctx, { name: 'Hard Admin', admin: true });
    agent = await makeAgent(ctx, { name: 'Ida Idle' });
  });
  afterAll(() => ctx?.close());

  const presence = (p: 'online' | 'offline') => ctx.http.post(`${CHAT}/chat/agent/availability`).set(bearer(agent.token)).send({ presence: p });
  const TABLES = ['chat_sessions', 'chat_messages', 'chat_agents', 'chat_canned_replies', 'tickets', 'ticket_messages'];
  const snapshot = async () => JSON.stringify(await Promise.all(TABLES.map((t) => ctx.db(t).orderBy('id'))));

  describe('canned-reply placeholders (finding 8)', () => {
    const body = 'A {{constructor}} B {{__proto__}} C {{toString}} D {{ constructor }} E {{hasOwnProperty}} F {{valueOf}} G {{customer_first_name}}';
    const expected = 'A {{constructor}} B {{__proto__}} C {{toString}} D {{ constructor }} E {{hasOwnProperty}} F {{valueOf}} G Ada';

    test('names of Object.prototype stay as written, in the listing and in a sent reply', async () => {
      const created = await ctx.http.post(`${CHAT}/chat/agent/canned-replies`).set(api()).send({ shortcut: 'internals', title: 'Internals', body });
      expect(created.status).toBe(201);
      const s = await makeSession(ctx);
      const list = await ctx.http.get(`${CHAT}/chat/agent/canned-replies?session_id=${s.id}&search=internals`).set(bearer(agent.token));
      expect(list.body).toEqual([expect.objectContaining({ id: created.body.id, rendered: expected })]);
      const sent = await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/messages`).set(bearer(agent.token)).send({ canned_reply_id: created.body.id });
      expect(sent.status).toBe(201);
      expect(sent.body.body).toBe(expected);
      expect(sent.body.body).not.toMatch(/native code|\[object Object\]/);
    });

    test('fillPlaceholders: own values only', () => {
      const v = { customer_name: '', customer_email: 'e@example.com', agent_name: 'Ida', session_id: 7, ticket_id: null };
      expect(fillPlaceholders('{{constructor}}{{__proto__}}{{customer_name}}{{ticket_id}}|{{session_id}}', v)).toBe('{{constructor}}{{__proto__}}there|7');
    });
  });

  describe('session tokens (finding 9)', () => {
    test('CHAT_SESSION_TOKEN_MAX_AGE_SECONDS: 30 days by default, at least 60 s', () => {
      expect(loadConfig({}).CHAT_SESSION_TOKEN_MAX_AGE_SECONDS).toBe(30 * 86_400);
      expect(() => loadConfig({ CHAT_SESSION_TOKEN_MAX_AGE_SECONDS: '10' })).toThrow(ConfigError);
    });

    test('a closed session refuses a token refresh (409), and its token is not replaced', async () => {
      const s = await makeSession(ctx);
      expect((await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/status`).set(bearer(s.token)).send({ status: 'closed' })).status).toBe(200);
      const before = await ctx.db('chat_sessions').where({ id: s.id }).first('token_sha256', 'token_expires_at');
      const res = await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/token`).set(bearer(s.token)).send({ refresh_session_token: true });
      expectError(res, 409, 'chat_session_closed');
      expect(res.body.session_token).toBeUndefined();
      expect(await ctx.db('chat_sessions').where({ id: s.id }).first('token_sha256', 'token_expires_at')).toEqual(before);
      // The token still reads the closed conversation until it expires; a realtime token without refresh is fine.
      expect((await ctx.http.get(`${CHAT}/chat/sessions/${s.id}/messages`).set(bearer(s.token))).status).toBe(200);
      expect((await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/token`).set(bearer(s.token)).send({})).status).toBe(200);
    });

    test('tokens have an absolute lifetime from the session creation: a refresh never extends past it, then the token stops working', async () => {
      const s = await makeSession(ctx);
      const issued = new Date(s.body.token_expires_at).getTime();
      expect(Math.abs(issued - (Date.now() + TTL * 1000))).toBeLessThan(30_000);

      // An old session: 600 s of its lifetime left, less than a TTL.
      const created = new Date(Date.now() - (MAX_AGE - 600) * 1000);
      await ctx.db('chat_sessions').where({ id: s.id }).update({ date_created: created });
      const refreshed = await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/token`).set(bearer(s.token)).send({ refresh_session_token: true });
      expect(refreshed.status).toBe(200);
      expect(new Date(refreshed.body.session_token_expires_at).getTime()).toBe(created.getTime() + MAX_AGE * 1000);
      const newToken = refreshed.body.session_token as string;
      expectError(await ctx.http.get(`${CHAT}/chat/sessions/${s.id}`).set(bearer(s.token)), 401);
      expect((await ctx.http.get(`${CHAT}/chat/sessions/${s.id}`).set(bearer(newToken))).status).toBe(200);

      // Past the lifetime: refused everywhere, refresh included, although token_expires_at is still ahead.
      await ctx.db('chat_sessions').where({ id: s.id }).update({ date_created: new Date(Date.now() - (MAX_AGE + 1) * 1000) });
      expect(new Date((await ctx.db('chat_sessions').where({ id: s.id }).first('token_expires_at')).token_expires_at).getTime()).toBeGreaterThan(Date.now());
      expectError(await ctx.http.get(`${CHAT}/chat/sessions/${s.id}`).set(bearer(newToken)), 401, 'rest_forbidden');
      expectError(await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/token`).set(bearer(newToken)).send({ refresh_session_token: true }), 401, 'rest_forbidden');
      expectError(await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/messages`).set(bearer(newToken)).send({ body: 'still there?' }), 401, 'rest_forbidden');
    });
  });

  describe('existence oracles and unverified identities (finding 10)', () => {
    /** The answer with what must differ between two sessions (ids, tokens, times) masked. */
    const masked = (body: any): string => {
      const ids = [body.session.id, body.session.ticket_id].filter((x) => x !== null).map(String);
      const walk = (v: unknown, key = ''): unknown => {
        if (Array.isArray(v)) return v.map((x) => walk(x));
        if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x, k)]));
        if (v === null) return v;
        if (/(^|_)(id|token|url)$|_at$|^date_/.test(key)) return '<masked>';
        return typeof v === 'string' ? ids.reduce((s, id) => s.split(`#${id}`).join('#<n>'), v) : v;
      };
      return JSON.stringify(walk(body));
    };

    test('site_id: an unknown site from a caller that is not an agent gets the same 201 as an existing one (dropped); agents get 400', async () => {
      await presence('offline');
      const customerId = await makeCustomer(ctx);
      const [site] = await ctx.db('sites').insert({ title: 'Oracle site', domain: `oracle${Date.now()}.example.com`, customer_id: customerId }).returning('id');
      const siteId = Number(site.id);
      const customer = await makeSession(ctx);
      for (const headers of [{}, bearer(customer.token)]) {
        const body = { customer_name: 'Eve', customer_email: 'eve@example.com', message: 'Hi' };
        const known = await ctx.http.post(`${CHAT}/chat/sessions`).set(headers).send({ ...body, site_id: siteId });
        const unknown = await ctx.http.post(`${CHAT}/chat/sessions`).set(headers).send({ ...body, site_id: 999_999_999 });
        expect(known.status).toBe(201);
        expect(unknown.status).toBe(201);
        expect(masked(unknown.body)).toBe(masked(known.body));
        expect(Object.keys(unknown.headers).sort()).toEqual(Object.keys(known.headers).sort());
        expect(known.body.session.site_id).toBeUndefined();
        // Agents see the site that exists, and nothing for the unknown claim.
        expect((await ctx.db('chat_sessions').where({ id: known.body.session.id }).first('site_id')).site_id).toEqual(siteId);
        expect((await ctx.db('chat_sessions').where({ id: unknown.body.session.id }).first('site_id')).site_id).toBeNull();
      }
      const byAgent = await ctx.http.post(`${CHAT}/chat/sessions`).set(bearer(admin.token)).send({ site_id: 999_999_999 });
      expectError(byAgent, 400, 'wu_rest_invalid_parameter');
      expect(Object.keys(byAgent.body.data.params)).toEqual(['site_id']);
      const agentKnown = await ctx.http.post(`${CHAT}/chat/sessions`).set(bearer(admin.token)).send({ site_id: siteId });
      expect(agentKnown.body.session.site_id).toBe(siteId);
    });

    test('identity_verified: true only for customer_id with its hash, or a session an agent started; on the ticket too; customers do not see it', async () => {
      await presence('offline'); // every session gets a ticket at once
      const customerId = await makeCustomer(ctx);
      const hash = await ctx.app.locals.chat.secret.identityHash(customerId);
      const asAgent = async (res: any) => (await ctx.http.get(`${CHAT}/chat/sessions/${res.body.session.id}`).set(bearer(agent.token))).body;
      const ticketOf = async (res: any) => (await ctx.http.get(`${CHAT}/chat/agent/tickets/${res.body.session.ticket_id}`).set(bearer(agent.token))).body;

      const claimed = await ctx.http.post(`${CHAT}/chat/sessions`).send({ customer_name: 'Claims To Be', customer_email: 'ceo@example.com' });
      const proven = await ctx.http.post(`${CHAT}/chat/sessions`).send({ customer_id: customerId, customer_hash: hash });
      const byAgent = await ctx.http.post(`${CHAT}/chat/sessions`).set(bearer(agent.token)).send({ customer_name: 'Phoned In', customer_email: 'caller@example.com' });
      const byApi = await ctx.http.post(`${CHAT}/chat/sessions`).set(api()).send({ customer_id: customerId });
      for (const [res, verified] of [[claimed, false], [proven, true], [byAgent, true], [byApi, true]] as const) {
        expect(res.status).toBe(201);
        expect((await asAgent(res)).identity_verified).toBe(verified);
        expect((await ticketOf(res)).identity_verified).toBe(verified);
      }
      expect(claimed.body.session.identity_verified).toBeUndefined();
      const own = await ctx.http.get(`${CHAT}/chat/sessions/${claimed.body.session.id}`).set(bearer(claimed.body.token));
      expect(own.body.identity_verified).toBeUndefined();
      // The queue shows it too.
      const queue = (await ctx.http.get(`${CHAT}/chat/agent/sessions?orderby=id&order=desc&per_page=10`).set(bearer(agent.token))).body;
      const inQueue = (id: number) => queue.find((x: any) => x.id === id)?.identity_verified;
      expect([inQueue(claimed.body.session.id), inQueue(proven.body.session.id)]).toEqual([false, true]);
    });
  });

  describe('availability counts only sessions really waiting for an agent', () => {
    test('sessions that fell back to a ticket are not waiting, and their late assignment does not lengthen the expected wait', async () => {
      await presence('online');
      const status = async () => (await ctx.http.get(`${CHAT}/chat/availability`)).body;
      const before = await status();
      expect(before).toMatchObject({ online: true, agents_online: 1 });
      const fell: number[] = [];
      for (let i = 0; i < 10; i++) {
        const res = await ctx.http.post(`${CHAT}/chat/sessions`).send({ customer_name: `Fallback ${i}`, realtime: false, message: 'No sockets here' });
        expect(res.body.session).toMatchObject({ status: 'waiting', assigned_agent_id: null, fallback_reason: 'realtime_unavailable' });
        fell.push(res.body.session.id);
      }
      const after = await status();
      expect(after.waiting_sessions).toBe(before.waiting_sessions);
      expect(after.expected_wait_seconds).toBe(before.expected_wait_seconds);

      // An agent picks one up from the ticket an hour later: not a chat wait.
      await ctx.http.post(`${CHAT}/chat/sessions/${fell[0]}/assign`).set(bearer(agent.token)).send({});
      await ctx.db('chat_sessions').where({ id: fell[0] }).update({ assigned_at: ctx.db.raw("date_created + interval '1 hour'") });
      expect((await status()).expected_wait_seconds).toBe(before.expected_wait_seconds);

      // A live session does wait.
      const live = await makeSession(ctx);
      expect(live.body.session.fallback_reason).toBeNull();
      expect((await status()).waiting_sessions).toBe(before.waiting_sessions + 1);
    });
  });

  describe('request bodies (fuzzing finding D)', () => {
    let doc: any;
    beforeAll(async () => {
      doc = (await ctx.http.get('/wp-json/wu/v2/openapi.json')).body;
    });

    test('every chat operation with a JSON body: no body is 400 where the document says required, accepted where it says optional', async () => {
      const s = await makeSession(ctx);
      const canned = (await ctx.http.post(`${CHAT}/chat/agent/canned-replies`).set(api()).send({ shortcut: 'nobody', title: 'T', body: 'B' })).body;
      const ticketId = (await ctx.http.post(`${CHAT}/chat/sessions/${(await makeSession(ctx)).id}/convert-ticket`).set(api()).send({})).body.ticket.id;
      const ids: Record<string, number> = { session_id: s.id, reply_id: canned.id, agent_id: agent.id, ticket_id: ticketId };
      const prefix = `/wp-json/ultimate-multisite-support-tickets/v1`;
      const seen = { required: 0, optional: 0 };
      for (const [path, item] of Object.entries<any>(doc.paths)) {
        if (!path.startsWith(prefix)) continue;
        for (const [method, op] of Object.entries<any>(item)) {
          if (!op.requestBody?.content?.['application/json']) continue;
          const url = path.replace(/\{(\w+)\}/g, (_m, name: string) => String(ids[name]));
          const before = await snapshot();
          // Routes for the session's customer only have the Bearer scheme alone.
          const customerOnly = op.security?.length === 1 && Object.keys(op.security[0]).join() === 'bearerAuth';
          const res = await (ctx.http as any)[method](url).set(bearer(customerOnly ? s.token : admin.token));
          const label = `${method.toUpperCase()} ${path}: ${res.status} ${JSON.stringify(res.body)}`;
          if (op.requestBody.required) {
            seen.required++;
            expect([label, res.status, res.body.code, Object.keys(res.body.data?.params ?? {})]).toEqual([label, 400, 'wu_rest_invalid_parameter', ['body']]);
            expect(await snapshot()).toBe(before);
          } else {
            seen.optional++;
            expect([label, res.status < 300]).toEqual([label, true]);
          }
        }
      }
      expect(seen.required).toBeGreaterThanOrEqual(15);
      expect(seen.optional).toBe(3); // token, assign, convert-ticket
    });

    test('POST /chat/sessions without a body is 400 and nothing is written', async () => {
      const before = await snapshot();
      const res = await ctx.http.post(`${CHAT}/chat/sessions`);
      expectError(res, 400, 'wu_rest_invalid_parameter');
      expect(res.body.data.params.body).toMatch(/required/);
      // A form body is not JSON: not silently read as an empty session either.
      expect((await ctx.http.post(`${CHAT}/chat/sessions`).type('form').send('customer_name=Form')).status).toBeGreaterThanOrEqual(400);
      expect(await snapshot()).toBe(before);
      // {} is an anonymous session, as documented.
      expect((await ctx.http.post(`${CHAT}/chat/sessions`).send({})).status).toBe(201);
    });

    test('PUT agents and canned replies: {} changes nothing and answers the record as it is; no body is 400', async () => {
      const canned = (await ctx.http.post(`${CHAT}/chat/agent/canned-replies`).set(api()).send({ shortcut: 'same', title: 'Same', body: 'Same body' })).body;
      const target = await makeAgent(ctx, { name: 'Unchanged Agent' });
      const agentBefore = (await ctx.http.get(`${CHAT}/chat/agent/agents`).set(api())).body.find((a: any) => a.id === target.id);
      await new Promise((r) => setTimeout(r, 20));
      const snap = await snapshot();
      const c = await ctx.http.put(`${CHAT}/chat/agent/canned-replies/${canned.id}`).set(api()).send({});
      expect(c.status).toBe(200);
      expect(c.body).toEqual(canned);
      const a = await ctx.http.put(`${CHAT}/chat/agent/agents/${target.id}`).set(bearer(admin.token)).send({});
      expect(a.status).toBe(200);
      expect(a.body).toEqual(agentBefore);
      expectError(await ctx.http.put(`${CHAT}/chat/agent/canned-replies/${canned.id}`).set(api()), 400, 'wu_rest_invalid_parameter');
      expectError(await ctx.http.put(`${CHAT}/chat/agent/agents/${target.id}`).set(api()), 400, 'wu_rest_invalid_parameter');
      expect(await snapshot()).toBe(snap);
      // Unknown ids stay 404 with {}.
      expectError(await ctx.http.put(`${CHAT}/chat/agent/canned-replies/999999`).set(api()).send({}), 404, 'wu_rest_chat_canned_reply_invalid_id');
      expectError(await ctx.http.put(`${CHAT}/chat/agent/agents/999999`).set(api()).send({}), 404, 'wu_rest_chat_agent_invalid_id');
    });

    test('POST …/token without a body answers a realtime token (documented optional)', async () => {
      const s = await makeSession(ctx);
      const op = doc.paths['/wp-json/ultimate-multisite-support-tickets/v1/chat/sessions/{session_id}/token'].post;
      expect(op.requestBody.required).toBe(false);
      const res = await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/token`).set(bearer(s.token));
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ session_id: s.id, realtime: { token: expect.any(String) } });
      expect(res.body.session_token).toBeUndefined();
    });
  });

  describe('the document states the server’s rules (looser than the server)', () => {
    let doc: any;
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats(ajv);
    const P = '/wp-json/ultimate-multisite-support-tickets/v1';
    const bodySchema = (method: string, path: string) => inlineRefs(doc.paths[`${P}${path}`][method].requestBody.content['application/json'].schema, doc) as any;
    const querySchema = (path: string, name: string) => doc.paths[`${P}${path}`].get.parameters.find((p: any) => p.name === name).schema;
    beforeAll(async () => {
      doc = (await ctx.http.get('/wp-json/wu/v2/openapi.json')).body;
    });

    test('the served document holds the rules: minProperties, oneOf/anyOf, patterns, formats, enums, code-point lengths', () => {
      expect(bodySchema('post', '/chat/sessions/{session_id}/metadata').properties.metadata).toMatchObject({ minProperties: 1, maxProperties: 50 });
      expect(bodySchema('post', '/chat/sessions').properties.metadata).toMatchObject({ maxProperties: 50 });
      expect(bodySchema('post', '/chat/sessions/{session_id}/context')).toMatchObject({ minProperties: 1 });
      expect(bodySchema('patch', '/chat/agent/tickets/{ticket_id}')).toMatchObject({ minProperties: 1 });
      expect(bodySchema('post', '/chat/sessions/{session_id}/messages').oneOf).toEqual([{ required: ['body'] }, { required: ['canned_reply_id'] }]);
      expect(bodySchema('post', '/chat/agent/availability').anyOf).toEqual([{ required: ['presence'] }, { required: ['business_hours'] }]);
      expect(bodySchema('post', '/chat/sessions').properties.page_url).toMatchObject({ maxLength: 2000, pattern: '^https?:\\/\\/\\S+$' });
      expect(bodySchema('post', '/chat/sessions').properties.message).toMatchObject({ maxLength: 10000, pattern: trimmedAtLeast(1).source });
      const hours = bodySchema('post', '/chat/agent/availability').properties.business_hours.properties;
      expect(hours.holidays.items.format).toBe('date');
      expect(hours.timezone.enum).toEqual(expect.arrayContaining(['UTC', 'Europe/Paris', 'Asia/Tokyo']));
      expect(querySchema('/chat/agent/reports', 'from').anyOf.map((s: any) => s.format)).toEqual(['date-time', 'date']);
      expect(querySchema('/chat/sessions/{session_id}/messages', 'limit')).toMatchObject({ type: 'integer', minimum: 1, maximum: 100, default: 50 });
      expect(doc.paths[`${P}/chat/sessions/{session_id}/assign`].post.requestBody.required).toBe(false);
      expect(doc.paths[`${P}/chat/sessions`].post.description).toMatch(/customer_hash unless the caller is an agent/);
      expect(doc.components.schemas.ChatSession.properties.identity_verified.type).toBe('boolean');
    });

    test('for each body, the document and the server agree: valid for both, or refused by both (400 naming it)', async () => {
      await presence('online');
      const s = await makeSession(ctx);
      const ticketId = (await ctx.http.post(`${CHAT}/chat/sessions/${(await makeSession(ctx)).id}/convert-ticket`).set(api()).send({})).body.ticket.id;
      const canned = (await ctx.http.post(`${CHAT}/chat/agent/canned-replies`).set(api()).send({ shortcut: 'agree', title: 'T', body: 'B' })).body;
      const hoursBefore = (await ctx.http.get(`${CHAT}/chat/agent/availability`).set(api())).body.business_hours;
      const emoji = (n: number) => '😀'.repeat(n);
      const manyKeys = Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, 'v']));
      type Case = { method: 'post' | 'put' | 'patch'; path: string; url: string; auth: Record<string, string>; body: unknown; valid: boolean };
      const on = (method: Case['method'], path: string, url: string, auth: Record<string, string>, valid: unknown[], invalid: unknown[]): Case[] => [
        ...valid.map((body) => ({ method, path, url, auth, body, valid: true })),
        ...invalid.map((body) => ({ method, path, url, auth, body, valid: false })),
      ];
      const cases: Case[] = [
        ...on('post', '/chat/sessions', '/chat/sessions', {}, [{}, { customer_name: emoji(200) }, { metadata: { a: 'b' } }, { locale: 'pt_BR' }, { page_url: 'https://shop.example.com/ü' }], [
          { customer_name: emoji(201) },
          { page_url: 'ftp://x' },
          { page_url: 'https://a b' },
          { message: ' \n\t ' },
          { metadata: manyKeys },
          { metadata: { 'bad key': 'x' } },
          { locale: 'english!' },
          { customer_hash: 'xyz' },
          { realtime: 'no' },
          { extra: 1 },
        ]),
        ...on('post', '/chat/sessions/{session_id}/messages', `/chat/sessions/${s.id}/messages`, bearer(s.token), [{ body: emoji(10_000) }], [{}, { body: ' ' }, { body: 'x', canned_reply_id: 1 }, { body: emoji(10_001) }, { body: 5 }]),
        ...on('post', '/chat/sessions/{session_id}/context', `/chat/sessions/${s.id}/context`, bearer(s.token), [{ locale: null }, { page_title: emoji(500) }], [{}, { referrer: 'javascript:alert(1)' }, { page_title: emoji(501) }]),
        ...on('post', '/chat/sessions/{session_id}/metadata', `/chat/sessions/${s.id}/metadata`, bearer(agent.token), [{ metadata: { k: 'v', gone: null } }], [{ metadata: {} }, { metadata: { k: 5 } }, { metadata: manyKeys }]),
        ...on('post', '/chat/sessions/{session_id}/token', `/chat/sessions/${s.id}/token`, bearer(agent.token), [{}], [{ refresh_session_token: 'yes' }]),
        ...on('post', '/chat/agent/availability', '/chat/agent/availability', bearer(admin.token), [{ business_hours: { timezone: 'Europe/Paris' } }, { business_hours: { holidays: ['2028-02-29'] } }, { presence: 'away' }], [
          {},
          { business_hours: { timezone: 'Mars/Olympus' } },
          { business_hours: { holidays: ['2026-02-30'] } },
          { business_hours: { schedule: { mon: [['09:00']] } } },
          { business_hours: { schedule: { mon: [['9:00', '17:00']] } } },
        ]),
        ...on('patch', '/chat/agent/tickets/{ticket_id}', `/chat/agent/tickets/${ticketId}`, bearer(agent.token), [{ priority: 'high' }, { category: null }], [{}, { subject: '   ' }, { category: '' }, { status: 'done' }]),
        ...on('put', '/chat/agent/canned-replies/{reply_id}', `/chat/agent/canned-replies/${canned.id}`, api(), [{}, { title: emoji(200) }], [{ title: '' }, { shortcut: 'Bad Shortcut' }, { title: emoji(201) }]),
        ...on('put', '/chat/agent/agents/{agent_id}', `/chat/agent/agents/${agent.id}`, api(), [{}, { name: 'Zoë Ünïcode' }], [{ email: 'not-an-email' }, { name: 5 }, { name: '\t' }, { active: 'no' }]),
      ];
      try {
        for (const c of cases) {
          const docValid = ajv.validate(bodySchema(c.method, c.path), c.body);
          const res = await (ctx.http as any)[c.method](`${CHAT}${c.url}`).set(c.auth).send(c.body);
          const refused = res.status === 400 && res.body.code === 'wu_rest_invalid_parameter';
          const label = `${c.method.toUpperCase()} ${c.path} ${JSON.stringify(c.body).slice(0, 80)} -> ${res.status} ${JSON.stringify(res.body).slice(0, 200)}`;
          expect([label, docValid, !refused, res.status < 500]).toEqual([label, c.valid, c.valid, true]);
        }
        // Query strings: dates and bounds.
        const queries: { path: string; url: string; name: string; value: string; valid: boolean }[] = [
          { path: '/chat/agent/reports', url: '/chat/agent/reports', name: 'from', value: '2026-01-01', valid: true },
          { path: '/chat/agent/reports', url: '/chat/agent/reports', name: 'from', value: '2026-01-01T00:00:00Z', valid: true },
          { path: '/chat/agent/reports', url: '/chat/agent/reports', name: 'from', value: '2026-02-30', valid: false },
          { path: '/chat/agent/reports', url: '/chat/agent/reports', name: 'to', value: '2026-01-01T00:00', valid: false },
          { path: '/chat/sessions/{session_id}/messages', url: `/chat/sessions/${s.id}/messages`, name: 'limit', value: '101', valid: false },
          { path: '/chat/sessions/{session_id}/messages', url: `/chat/sessions/${s.id}/messages`, name: 'after', value: '-1', valid: false },
          { path: '/chat/agent/canned-replies', url: '/chat/agent/canned-replies', name: 'search', value: emoji(200), valid: true },
          { path: '/chat/agent/canned-replies', url: '/chat/agent/canned-replies', name: 'search', value: emoji(201), valid: false },
        ];
        for (const q of queries) {
          const schema = querySchema(q.path, q.name);
          const typed = schema.type === 'integer' ? Number(q.value) : q.value;
          const docValid = ajv.validate(schema, typed);
          const res = await ctx.http.get(`${CHAT}${q.url}?${q.name}=${encodeURIComponent(q.value)}`).set(bearer(agent.token));
          const label = `GET ${q.path}?${q.name}=${q.value.slice(0, 30)} -> ${res.status}`;
          expect([label, docValid, res.status === 200]).toEqual([label, q.valid, q.valid]);
        }
      } finally {
        await ctx.http.post(`${CHAT}/chat/agent/availability`).set(api()).send({ business_hours: { timezone: hoursBefore.timezone, holidays: hoursBefore.holidays } });
      }
    });
  });

  describe('bad input on the routes changed here: wrong type, huge, unicode, callers not allowed', () => {
    test('each is refused in the error shape and changes nothing', async () => {
      await presence('online');
      const s = await makeSession(ctx);
      const other = await makeSession(ctx);
      const canned = (await ctx.http.post(`${CHAT}/chat/agent/canned-replies`).set(api()).send({ shortcut: 'bad-input', title: 'T', body: 'B' })).body;
      const huge = 'x'.repeat(1_100_000);
      const before = await snapshot();
      const cases: { req: () => any; status: number; code: string }[] = [
        // POST /chat/sessions
        { req: () => ctx.http.post(`${CHAT}/chat/sessions`).send([{ customer_name: 'x' }]), status: 400, code: 'rest_invalid_json' },
        { req: () => ctx.http.post(`${CHAT}/chat/sessions`).set('Content-Type', 'application/json').send('"just a string"'), status: 400, code: 'rest_invalid_json' },
        { req: () => ctx.http.post(`${CHAT}/chat/sessions`).send({ customer_name: huge }), status: 413, code: 'rest_request_too_large' },
        { req: () => ctx.http.post(`${CHAT}/chat/sessions`).send({ customer_email: 'ädä@exämple.com' }), status: 400, code: 'wu_rest_invalid_parameter' },
        { req: () => ctx.http.post(`${CHAT}/chat/sessions`).send({ site_id: '1' }), status: 400, code: 'wu_rest_invalid_parameter' },
        { req: () => ctx.http.post(`${CHAT}/chat/sessions`).set(bearer(`${s.token.slice(0, -2)}zz`)).send({}), status: 401, code: 'rest_forbidden' },
        // POST …/token
        { req: () => ctx.http.post(`${CHAT}/chat/sessions/${s.id}/token`).set(bearer(s.token)).send({ refresh_session_token: 1 }), status: 400, code: 'wu_rest_invalid_parameter' },
        { req: () => ctx.http.post(`${CHAT}/chat/sessions/${s.id}/token`).set(bearer(s.token)).send({ refresh_session_token: huge }), status: 413, code: 'rest_request_too_large' },
        { req: () => ctx.http.post(`${CHAT}/chat/sessions/${s.id}/token`).send({ refresh_session_token: true }), status: 401, code: 'rest_forbidden' },
        { req: () => ctx.http.post(`${CHAT}/chat/sessions/${s.id}/token`).set(bearer(other.token)).send({ refresh_session_token: true }), status: 403, code: 'rest_forbidden' },
        { req: () => ctx.http.post(`${CHAT}/chat/sessions/${s.id}/token`).set(bearer(agent.token)).send({ refresh_session_token: true }), status: 400, code: 'wu_rest_invalid_parameter' },
        // PUT …/agents/{id}
        { req: () => ctx.http.put(`${CHAT}/chat/agent/agents/${agent.id}`).set(api()).send({ name: '😀'.repeat(201) }), status: 400, code: 'wu_rest_invalid_parameter' },
        { req: () => ctx.http.put(`${CHAT}/chat/agent/agents/${agent.id}`).set(api()).send({ is_admin: 'true' }), status: 400, code: 'wu_rest_invalid_parameter' },
        { req: () => ctx.http.put(`${CHAT}/chat/agent/agents/${agent.id}`).set(api()).send({ name: huge }), status: 413, code: 'rest_request_too_large' },
        { req: () => ctx.http.put(`${CHAT}/chat/agent/agents/${agent.id}`).set(bearer(agent.token)).send({ is_admin: true }), status: 403, code: 'rest_forbidden' },
        { req: () => ctx.http.put(`${CHAT}/chat/agent/agents/${agent.id}`).set(bearer(s.token)).send({ is_admin: true }), status: 403, code: 'rest_forbidden' },
        // PUT …/canned-replies/{id}
        { req: () => ctx.http.put(`${CHAT}/chat/agent/canned-replies/${canned.id}`).set(api()).send({ shortcut: 'héllo' }), status: 400, code: 'wu_rest_invalid_parameter' },
        { req: () => ctx.http.put(`${CHAT}/chat/agent/canned-replies/${canned.id}`).set(api()).send({ body: 'x'.repeat(10_001) }), status: 400, code: 'wu_rest_invalid_parameter' },
        { req: () => ctx.http.put(`${CHAT}/chat/agent/canned-replies/${canned.id}`).set(api()).send({ title: ['T'] }), status: 400, code: 'wu_rest_invalid_parameter' },
        { req: () => ctx.http.put(`${CHAT}/chat/agent/canned-replies/${canned.id}`).set(bearer(agent.token)).send({ title: 'Mine now' }), status: 403, code: 'rest_forbidden' },
        // GET …/canned-replies and the download
        { req: () => ctx.http.get(`${CHAT}/chat/agent/canned-replies?search=${'😀'.repeat(201)}`).set(bearer(agent.token)), status: 400, code: 'wu_rest_invalid_parameter' },
        { req: () => ctx.http.get(`${CHAT}/chat/agent/canned-replies?session_id=0`).set(bearer(agent.token)), status: 400, code: 'wu_rest_invalid_parameter' },
        { req: () => ctx.http.get(`${CHAT}/chat/agent/canned-replies`).set(bearer(s.token)), status: 403, code: 'rest_forbidden' },
        { req: () => ctx.http.get(`${CHAT}/chat/attachments/1/download?variant=1`).set(bearer(agent.token)), status: 400, code: 'wu_rest_invalid_parameter' },
        { req: () => ctx.http.get(`${CHAT}/chat/attachments/1/download`), status: 401, code: 'rest_forbidden' },
      ];
      for (const c of cases) expectError(await c.req(), c.status, c.code);
      expect(await snapshot()).toBe(before);
    });
  });
});
