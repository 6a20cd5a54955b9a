import { API_KEY, API_SECRET, BASE, createTestContext, type TestContext } from './helpers';

describe('authentication', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext({ AUTH_FAILURE_LIMIT: '1000' });
  });
  afterAll(() => ctx.close());

  const basic = (key: string, secret: string) => `Basic ${Buffer.from(`${key}:${secret}`).toString('base64')}`;

  test('GET /auth with Basic answers success, the network label and the welcome message', async () => {
    const res = await ctx.http.get(`${BASE}/auth`).set('Authorization', ctx.basic);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true, label: 'hostflow', message: 'Welcome to our API' });
  });

  test('query parameters api_key/api_secret authenticate', async () => {
    const res = await ctx.http.get(`${BASE}/auth`).query({ api_key: API_KEY, api_secret: API_SECRET });
    expect(res.status).toBe(200);
  });

  test('hyphenated api-key/api-secret authenticate', async () => {
    const res = await ctx.http.get(`${BASE}/auth`).query({ 'api-key': API_KEY, 'api-secret': API_SECRET });
    expect(res.status).toBe(200);
  });

  test('body parameters authenticate and are stripped before reaching the record', async () => {
    const res = await ctx.http
      .post(`${BASE}/customers`)
      .send({ api_key: API_KEY, api_secret: API_SECRET, username: 'bodyauth', email: 'bodyauth@example.com', password: 'secret123' });
    expect(res.status).toBe(200);
    expect(res.body.username).toBe('bodyauth');
    expect(JSON.stringify(res.body)).not.toContain(API_SECRET);
  });

  test('missing credentials: 401 rest_forbidden with WWW-Authenticate', async () => {
    const res = await ctx.http.get(`${BASE}/customers`);
    expect(res.status).toBe(401);
    expect(res.headers['www-authenticate']).toMatch(/^Basic/);
    expect(res.body).toEqual({ code: 'rest_forbidden', message: 'Sorry, you are not allowed to do that.', data: { status: 401 } });
  });

  test('wrong secret and wrong key are both refused', async () => {
    expect((await ctx.http.get(`${BASE}/auth`).set('Authorization', basic(API_KEY, 'wrong-secret'))).status).toBe(401);
    expect((await ctx.http.get(`${BASE}/auth`).set('Authorization', basic('wrong-key', API_SECRET))).status).toBe(401);
    expect((await ctx.http.get(`${BASE}/auth`).set('Authorization', 'Basic !!!notbase64')).status).toBe(401);
  });

  test('Basic wins when present: right query parameters do not rescue a wrong Basic header', async () => {
    const res = await ctx.http
      .get(`${BASE}/auth`)
      .set('Authorization', basic(API_KEY, 'wrong'))
      .query({ api_key: API_KEY, api_secret: API_SECRET });
    expect(res.status).toBe(401);
  });

  test('authentication comes before validation: anonymous bad input learns nothing', async () => {
    const bad = await ctx.http.get(`${BASE}/customers`).query({ per_page: 1000, orderby: 'nope' });
    expect(bad.status).toBe(401);
    expect(bad.body.data.params).toBeUndefined();
    const malformed = await ctx.http.post(`${BASE}/customers`).set('Content-Type', 'application/json').send('{"broken":');
    expect(malformed.status).toBe(401);
    const count = await ctx.db('customers').count({ n: '*' });
    expect(count[0].n).toBe(1); // only the body-auth customer above
  });

  test('repeated failures from one address get 429 with Retry-After; the right key still passes', async () => {
    const limited = await createTestContext({ AUTH_FAILURE_LIMIT: '3', AUTH_FAILURE_WINDOW_SECONDS: '120' });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 5; i++) statuses.push((await limited.http.get(`${BASE}/auth`).set('Authorization', basic(API_KEY, `bad${i}`))).status);
      expect(statuses).toEqual([401, 401, 401, 429, 429]);
      const blocked = await limited.http.get(`${BASE}/auth`).set('Authorization', basic(API_KEY, 'bad'));
      expect(blocked.body.code).toBe('rest_too_many_auth_failures');
      const retryAfter = Number(blocked.headers['retry-after']);
      expect(retryAfter).toBeGreaterThan(0);
      expect(retryAfter).toBeLessThanOrEqual(120);
      const ok = await limited.http.get(`${BASE}/auth`).set('Authorization', limited.basic);
      expect(ok.status).toBe(200);
    } finally {
      await limited.close();
    }
  });

  test('enable_api false: every wu/v2 route answers 403 wu_rest_api_disabled saying how to enable it', async () => {
    await ctx.settings.set('enable_api', false);
    try {
      for (const [method, path] of [
        ['get', '/auth'],
        ['get', '/customers'],
        ['post', '/customers'],
        ['get', '/settings'],
      ] as const) {
        const res = await ctx.http[method](`${BASE}${path}`).set('Authorization', ctx.basic);
        expect(res.status).toBe(403);
        expect(res.body.code).toBe('wu_rest_api_disabled');
        expect(res.body.message).toMatch(/enable_api/);
      }
    } finally {
      await ctx.settings.set('enable_api', true);
    }
    expect((await ctx.http.get(`${BASE}/auth`).set('Authorization', ctx.basic)).status).toBe(200);
  });

  test('credentials never generated: nothing authenticates', async () => {
    await ctx.db('settings').whereIn('key', ['api_key', 'api_secret']).delete();
    ctx.settings.invalidate();
    try {
      expect((await ctx.http.get(`${BASE}/auth`).set('Authorization', ctx.basic)).status).toBe(401);
      expect((await ctx.http.get(`${BASE}/auth`).set('Authorization', basic('', ''))).status).toBe(401);
    } finally {
      await ctx.settings.writeCredentials(API_KEY, API_SECRET);
    }
  });

  test('the secret is stored only as a hash', async () => {
    const rows = await ctx.db('settings').select('key', 'value');
    expect(JSON.stringify(rows)).not.toContain(API_SECRET);
  });
});
