import { bearer, CHAT, expectError, makeAgent } from './chat-helpers';
import { createTestContext, type TestContext } from './helpers';

/** /chat/agent/reports on known data: every figure checked exactly. */
describe('support chat: reports', () => {
  let ctx: TestContext;
  let ann: { id: number; token: string; name: string };
  let bob: { id: number; token: string; name: string };

  const T0 = new Date('2026-03-02T09:00:00Z').getTime();
  const at = (seconds: number) => new Date(T0 + seconds * 1000);

  beforeAll(async () => {
    ctx = await createTestContext();
    ann = await makeAgent(ctx, { name: 'Ann' });
    bob = await makeAgent(ctx, { name: 'Bob' });
    // Five sessions in March (one per hour), one in February (outside the range).
    // first response / wait (assigned) / resolution, in seconds after creation:
    const rows = [
      { status: 'closed', first: 30, assigned: 10, resolved: 600, rating: 5 },
      { status: 'resolved', first: 60, assigned: 20, resolved: 1200, rating: 4 },
      { status: 'active', first: 90, assigned: 30, resolved: null, rating: 2 },
      { status: 'assigned', first: null, assigned: 40, resolved: null, rating: null },
      { status: 'waiting', first: null, assigned: null, resolved: null, rating: null },
    ];
    const ids: number[] = [];
    for (const [i, r] of rows.entries()) {
      const created = T0 + i * 3600_000;
      const plus = (s: number | null) => (s === null ? null : new Date(created + s * 1000));
      const [row] = await ctx
        .db('chat_sessions')
        .insert({
          status: r.status,
          customer_name: `C${i}`,
          token_sha256: 'x',
          token_expires_at: at(86_400),
          date_created: new Date(created),
          first_response_at: plus(r.first),
          assigned_at: plus(r.assigned),
          assigned_agent_id: r.assigned === null ? null : ann.id,
          resolved_at: plus(r.resolved),
        })
        .returning('id');
      ids.push(Number(row.id));
      if (r.rating) await ctx.db('chat_satisfaction').insert({ session_id: row.id, rating: r.rating });
    }
    const [old] = await ctx.db('chat_sessions').insert({ status: 'closed', token_sha256: 'x', token_expires_at: at(1), date_created: new Date('2026-02-10T00:00:00Z'), first_response_at: new Date('2026-02-10T01:00:00Z'), resolved_at: new Date('2026-02-10T02:00:00Z') }).returning('id');
    await ctx.db('chat_satisfaction').insert({ session_id: old.id, rating: 1 });
    await ctx.db('chat_agent_time').insert([
      { session_id: ids[0], agent_id: ann.id, minutes: 10, note: 'a' },
      { session_id: ids[0], agent_id: ann.id, minutes: 5, note: 'b' },
      { session_id: ids[1], agent_id: ann.id, minutes: 20, note: 'c' },
      { session_id: ids[1], agent_id: bob.id, minutes: 7, note: 'd' },
      { session_id: old.id, agent_id: bob.id, minutes: 100, note: 'outside' },
    ]);
  });
  afterAll(() => ctx?.close());

  test('sessions by status, first response / wait / resolution (average and p90), satisfaction, agent time per agent', async () => {
    const res = await ctx.http.get(`${CHAT}/chat/agent/reports?from=2026-03-01&to=2026-04-01`).set(bearer(bob.token));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      from: '2026-03-01T00:00:00.000Z',
      to: '2026-04-01T00:00:00.000Z',
      sessions: { total: 5, by_status: { waiting: 1, assigned: 1, active: 1, resolved: 1, closed: 1 } },
      // 30, 60, 90: average 60; p90 (percentile_cont, linear interpolation): 60 + 0.8 × 30 = 84
      first_response: { count: 3, average_seconds: 60, p90_seconds: 84 },
      // 10, 20, 30, 40: average 25; p90: 30 + 0.7 × 10 = 37
      wait: { count: 4, average_seconds: 25, p90_seconds: 37 },
      // 600, 1200: average 900; p90: 600 + 0.9 × 600 = 1140
      resolution: { count: 2, average_seconds: 900, p90_seconds: 1140 },
      satisfaction: { count: 3, average: 3.67 },
      agent_time: [
        { agent_id: ann.id, agent_name: 'Ann', minutes: 35, entries: 3, sessions: 2 },
        { agent_id: bob.id, agent_name: 'Bob', minutes: 7, entries: 1, sessions: 1 },
      ],
    });
  });

  test('the range is [from, to): a narrower window and an empty one', async () => {
    const two = await ctx.http.get(`${CHAT}/chat/agent/reports?from=2026-03-02T09:00:00Z&to=2026-03-02T11:00:00Z`).set('Authorization', ctx.basic);
    expect(two.body.sessions).toEqual({ total: 2, by_status: { waiting: 0, assigned: 0, active: 0, resolved: 1, closed: 1 } });
    expect(two.body.first_response).toEqual({ count: 2, average_seconds: 45, p90_seconds: 57 });
    const none = await ctx.http.get(`${CHAT}/chat/agent/reports?from=2025-01-01&to=2025-02-01`).set(bearer(ann.token));
    expect(none.body).toMatchObject({
      sessions: { total: 0 },
      first_response: { count: 0, average_seconds: null, p90_seconds: null },
      satisfaction: { count: 0, average: null },
      agent_time: [],
    });
  });

  test('customers and anonymous callers cannot read reports', async () => {
    expectError(await ctx.http.get(`${CHAT}/chat/agent/reports`), 401);
    const s = await ctx.http.post(`${CHAT}/chat/sessions`).send({ customer_name: 'Nosy', realtime: false });
    expectError(await ctx.http.get(`${CHAT}/chat/agent/reports`).set(bearer(s.body.token)), 403);
  });
});
