import { loadConfig } from '../src/config';
import { MemoryAddressLimiter } from '../src/http/limits';
import { bearer, CHAT, expectError, makeAgent } from './chat-helpers';
import { createTestContext, type TestContext } from './helpers';

/** Anonymous (non-agent) chat session creation is limited per client address. */
describe('support chat: session creation limit', () => {
  describe('MemoryAddressLimiter (what each process counts while PostgreSQL is down)', () => {
    test('hit admits `limit` events per address and window, then answers the milliseconds to wait', () => {
      const limiter = new MemoryAddressLimiter(3, 60_000);
      expect([limiter.hit('a', 0), limiter.hit('a', 1000), limiter.hit('a', 2000)]).toEqual([0, 0, 0]);
      expect(limiter.hit('a', 2000)).toBe(58_000);
      // Refused events do not move the window's end.
      expect(limiter.hit('a', 59_500)).toBe(500);
      // Another address has its own count.
      expect(limiter.hit('b', 2000)).toBe(0);
      // A new window starts once the old one is over.
      expect(limiter.hit('a', 60_000)).toBe(0);
    });

    test('memory stays bounded: expired windows are swept, then the oldest addresses dropped', () => {
      const limiter = new MemoryAddressLimiter(1, 1000, 50);
      for (let i = 0; i < 500; i++) limiter.hit(`10.0.${Math.floor(i / 256)}.${i % 256}`, 0);
      expect(limiter.tracked).toBeLessThanOrEqual(50);
      // Live entries are kept while there is room; once their windows are over they are swept.
      for (let i = 0; i < 10; i++) limiter.hit(`later${i}`, 5000);
      expect(limiter.tracked).toBeLessThanOrEqual(50);
      expect(limiter.hit('later0', 5000)).toBe(1000);
    });
  });

  describe('configuration', () => {
    test('configuration: defaults 20 per 60 s; bad values are refused naming the variable', () => {
      const config = loadConfig({});
      expect(config.CHAT_SESSION_CREATE_LIMIT).toBe(20);
      expect(config.CHAT_SESSION_CREATE_WINDOW_SECONDS).toBe(60);
      expect(() => loadConfig({ CHAT_SESSION_CREATE_LIMIT: '0' })).toThrow(/CHAT_SESSION_CREATE_LIMIT/);
      expect(() => loadConfig({ CHAT_SESSION_CREATE_WINDOW_SECONDS: 'soon' })).toThrow(/CHAT_SESSION_CREATE_WINDOW_SECONDS/);
    });
  });

  describe('POST /chat/sessions', () => {
    let ctx: TestContext;
    let agent: { id: number; token: string };
    const LIMIT = 3;
    const sessions = async () => Number((await ctx.db('chat_sessions').count({ n: '*' }))[0].n);
    const create = (headers: Record<string, string> = {}) => ctx.http.post(`${CHAT}/chat/sessions`).set(headers).send({ customer_name: 'Flood', message: 'hi' });

    beforeAll(async () => {
      // TRUST_PROXY: the client address comes from X-Forwarded-For, so the test can be two clients.
      ctx = await createTestContext({ CHAT_SESSION_CREATE_LIMIT: String(LIMIT), CHAT_SESSION_CREATE_WINDOW_SECONDS: '600', TRUST_PROXY: 'true' });
      await ctx.app.locals.chat.realtime.ready();
      agent = await makeAgent(ctx, { online: true });
    });
    afterAll(() => ctx?.close());

    test('the limit reached: 429 chat_too_many_sessions with Retry-After, and no session row; another address is unaffected', async () => {
      const a = { 'X-Forwarded-For': '203.0.113.10' };
      const first = await create(a);
      expect(first.status).toBe(201);
      // Invalid attempts count too.
      expectError(await ctx.http.post(`${CHAT}/chat/sessions`).set(a).send({ customer_email: 'nope' }), 400, 'wu_rest_invalid_parameter');
      expect((await create(a)).status).toBe(201);
      const before = await sessions();
      const refused = await create(a);
      expectError(refused, 429, 'chat_too_many_sessions');
      const wait = Number(refused.headers['retry-after']);
      expect(wait).toBeGreaterThan(0);
      expect(wait).toBeLessThanOrEqual(600);
      expect(refused.body.data).toMatchObject({ retry_after: wait, limit: LIMIT, window_seconds: 600 });
      // Still refused, even with a valid body, and nothing was written.
      expectError(await create(a), 429, 'chat_too_many_sessions');
      expect(await sessions()).toBe(before);

      // A customer token does not lift the limit (it is what any visitor gets from a first session).
      expectError(await create({ ...a, ...bearer(first.body.token) }), 429, 'chat_too_many_sessions');

      // Another client address has its own count.
      const b = { 'X-Forwarded-For': '198.51.100.20' };
      for (let i = 0; i < LIMIT; i++) expect((await create(b)).status).toBe(201);
      expectError(await create(b), 429, 'chat_too_many_sessions');
      expect(await sessions()).toBe(before + LIMIT);
    });

    test('agents and the API credentials are not limited', async () => {
      const a = { 'X-Forwarded-For': '192.0.2.30' };
      for (let i = 0; i < LIMIT; i++) expect((await create(a)).status).toBe(201);
      expectError(await create(a), 429, 'chat_too_many_sessions');
      for (let i = 0; i < LIMIT + 2; i++) {
        expect((await create({ ...a, ...bearer(agent.token) })).status).toBe(201);
        expect((await create({ ...a, Authorization: ctx.basic })).status).toBe(201);
      }
      // Wrong credentials are still refused as such (401), not counted as sessions.
      expectError(await create({ ...a, Authorization: 'Bearer nonsense' }), 401, 'rest_forbidden');
    });
  });
});
