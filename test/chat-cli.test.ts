import { runCli } from '../src/cli';
import { bearer, CHAT, expectError, uniqueEmail } from './chat-helpers';
import { createTestContext, type TestContext } from './helpers';

/**
 * `npm run cli -- agents ...` and `chat identity-hash` (the same stores as the admin routes),
 * and the throttling of failed chat authentications (default limit: 10 per address).
 */
describe('support chat CLI and throttling', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext();
  });
  afterAll(() => ctx?.close());
  const cli = async (...argv: string[]) => {
    const out: string[] = [];
    await runCli(argv, ctx.settings, (s) => out.push(s), { db: ctx.db, config: ctx.config });
    return out.join('\n');
  };

  test('agents create / list / disable / enable / token; the printed token works, a replaced one does not', async () => {
    const email = uniqueEmail('cli');
    const created = await cli('agents', 'create', 'Cli Agent', email, '--admin');
    const m = /^Agent (\d+) created \(Cli Agent <.+>, admin\)\.\nToken \(shown only now\): (hfa_\d+_\S+)$/.exec(created);
    expect(m).not.toBeNull();
    const [id, token] = [m![1], m![2]];
    expect((await ctx.http.get(`${CHAT}/chat/agent/agents`).set(bearer(token))).status).toBe(200);
    // An admin agent may use the admin routes.
    expect((await ctx.http.post(`${CHAT}/chat/agent/canned-replies`).set(bearer(token)).send({ shortcut: 'cli', title: 'Cli', body: 'Hi' })).status).toBe(201);
    expect(await cli('agents', 'list')).toMatch(new RegExp(`^${id}\\tCli Agent\\t${email}\\tadmin\\tactive\\toffline$`, 'm'));
    expect(await cli('agents', 'disable', id)).toBe(`Agent ${id} disabled.`);
    expectError(await ctx.http.get(`${CHAT}/chat/agent/agents`).set(bearer(token)), 401);
    expect(await cli('agents', 'enable', id)).toBe(`Agent ${id} enabled.`);
    const rotated = await cli('agents', 'token', id);
    const newToken = /(hfa_\d+_\S+)$/.exec(rotated)![1];
    expectError(await ctx.http.get(`${CHAT}/chat/agent/agents`).set(bearer(token)), 401);
    expect((await ctx.http.get(`${CHAT}/chat/agent/agents`).set(bearer(newToken))).status).toBe(200);
    await expect(cli('agents', 'create', 'Dup', email)).rejects.toThrow(/already exists/);
    await expect(cli('agents', 'create', 'Bad', 'not-an-email')).rejects.toThrow(/not an email/);
    await expect(cli('agents', 'disable', 'abc')).rejects.toThrow(/not an agent id/);
    await expect(cli('agents', 'frobnicate')).rejects.toThrow(/Usage/);
  });

  test('chat identity-hash prints the customer_hash the session route accepts', async () => {
    const res = await ctx.http.post('/wp-json/wu/v2/customers').set('Authorization', ctx.basic).send({ username: `cli${Date.now()}`, email: uniqueEmail('cust'), password: 'secret123' });
    const hash = await cli('chat', 'identity-hash', String(res.body.id));
    expect(hash).toMatch(/^[a-f0-9]{64}$/);
    const session = await ctx.http.post(`${CHAT}/chat/sessions`).send({ customer_id: res.body.id, customer_hash: hash, realtime: false });
    expect(session.status).toBe(201);
    expect(session.body.session.customer_id).toBe(res.body.id);
  });

  test('repeated wrong chat tokens from one address: 401 up to AUTH_FAILURE_LIMIT, then 429 with Retry-After; a right token still works', async () => {
    const token = /(hfa_\d+_\S+)$/.exec(await cli('agents', 'create', 'Throttle', uniqueEmail('thr')))![1];
    const wrong = `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`;
    // The earlier tests of this file already failed twice from this address.
    const statuses: number[] = [];
    for (let i = 0; i <= ctx.config.AUTH_FAILURE_LIMIT; i++) statuses.push((await ctx.http.get(`${CHAT}/chat/agent/agents`).set(bearer(wrong))).status);
    expect(statuses.slice(0, ctx.config.AUTH_FAILURE_LIMIT - 2)).toEqual(Array(ctx.config.AUTH_FAILURE_LIMIT - 2).fill(401));
    expect(statuses[statuses.length - 1]).toBe(429);
    const limited = await ctx.http.get(`${CHAT}/chat/agent/agents`).set(bearer(wrong));
    expectError(limited, 429, 'rest_too_many_auth_failures');
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    expect((await ctx.http.get(`${CHAT}/chat/agent/agents`).set(bearer(token))).status).toBe(200);
  });
});
