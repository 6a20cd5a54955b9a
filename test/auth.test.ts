import { VerifiedCredentials } from '../src/http/auth';
import { API_KEY, API_SECRET, BASE, createTestContext, type TestContext } from './helpers';

describe('authentication', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext({ AUTH_FAILURE_LIMIT: '1000', CHAT_ALLOWED_ORIGINS: 'https://shop.example.com' });
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

  test('missing credentials: 401 rest_forbidden, without a Basic challenge (browsers would prompt and keep the credentials)', async () => {
    const res = await ctx.http.get(`${BASE}/customers`);
    expect(res.status).toBe(401);
    expect(res.headers['www-authenticate']).toBeUndefined();
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

  test('rotated credentials: the old ones, verified just before, are refused at once', async () => {
    expect((await ctx.http.get(`${BASE}/auth`).set('Authorization', ctx.basic)).status).toBe(200);
    await ctx.settings.writeCredentials(API_KEY, 'another-secret-0123456789');
    try {
      expect((await ctx.http.get(`${BASE}/auth`).set('Authorization', ctx.basic)).status).toBe(401);
      expect((await ctx.http.get(`${BASE}/auth`).set('Authorization', basic(API_KEY, 'another-secret-0123456789'))).status).toBe(200);
    } finally {
      await ctx.settings.writeCredentials(API_KEY, API_SECRET);
    }
    expect((await ctx.http.get(`${BASE}/auth`).set('Authorization', ctx.basic)).status).toBe(200);
  });

  test('verified credentials are remembered for a short time only, at most a few at once', () => {
    const stored = { key: 'k', secretSha256: 'h' };
    const cache = new VerifiedCredentials();
    const digest = VerifiedCredentials.digest({ key: 'k', secret: 's' });
    expect(cache.has(digest, stored, 0)).toBe(false);
    cache.add(digest, 0);
    expect(cache.has(digest, stored, 1)).toBe(true);
    expect(cache.has(VerifiedCredentials.digest({ key: 'k', secret: 't' }), stored, 1)).toBe(false);
    expect(cache.has(digest, stored, VerifiedCredentials.TTL_MS + 1)).toBe(false);
    expect(cache.has(digest, { key: 'k', secretSha256: 'other' }, 1)).toBe(false);
    for (let i = 0; i < VerifiedCredentials.MAX + 5; i++) cache.add(VerifiedCredentials.digest({ key: 'k', secret: String(i) }), 2);
    expect((cache as unknown as { entries: unknown[] }).entries.length).toBe(VerifiedCredentials.MAX);
  });

  test('the secret is stored only as a hash', async () => {
    const rows = await ctx.db('settings').select('key', 'value');
    expect(JSON.stringify(rows)).not.toContain(API_SECRET);
  });

  describe('cross-site requests from browsers (CSRF)', () => {
    const productCount = async () => Number((await ctx.db('products').count({ n: '*' }))[0].n);
    let productId: number;
    beforeAll(async () => {
      const p = await ctx.http.post(`${BASE}/products`).set('Authorization', ctx.basic).send({ slug: 'csrf-target', name: 'Target' });
      expect(p.status).toBe(200);
      productId = p.body.id;
    });

    test('the attack: a form on another site posting ?_method=DELETE with the credentials the browser holds is 403, the product stays', async () => {
      const res = await ctx.http
        .post(`${BASE}/products/${productId}?_method=DELETE`)
        .set('Authorization', ctx.basic)
        .set('Origin', 'https://evil.example.net')
        .set('Sec-Fetch-Site', 'cross-site')
        .set('Content-Type', 'application/x-www-form-urlencoded')
        .send('name=pwned');
      expect(res.status).toBe(403);
      expect(res.body).toMatchObject({ code: 'rest_cross_site_forbidden', data: { status: 403 } });
      expect(res.body.message).toContain('https://evil.example.net');
      const row = await ctx.db('products').where({ id: productId }).first('name');
      expect(row.name).toBe('Target');
    });

    test.each([
      ['a foreign Origin', { Origin: 'https://evil.example.net' }],
      ['the opaque "null" Origin', { Origin: 'null' }],
      ['a look-alike of the own origin', { Origin: 'http://localhost:8080.evil.net', Host: 'localhost:8080' }],
      ['Sec-Fetch-Site: cross-site without Origin', { 'Sec-Fetch-Site': 'cross-site' }],
      ['Sec-Fetch-Site: same-site (a sibling subdomain)', { 'Sec-Fetch-Site': 'same-site' }],
    ])('%s: a create is refused before authentication, nothing written', async (_name, headers) => {
      const before = await productCount();
      const res = await ctx.http.post(`${BASE}/products`).set(headers).send({ slug: 'csrf-new', name: 'New' });
      expect(res.status).toBe(403);
      expect(res.body.code).toBe('rest_cross_site_forbidden');
      expect(await productCount()).toBe(before);
    });

    test('allowed: the own origin, Sec-Fetch-Site same-origin or none, and reads from anywhere (clients sending neither header: every other test)', async () => {
      const own = await ctx.http.put(`${BASE}/products/${productId}`).set('Authorization', ctx.basic).set('Host', 'localhost:8080').set('Origin', 'http://localhost:8080').send({ name: 'Own' });
      expect(own.status).toBe(200);
      const sameOrigin = await ctx.http.put(`${BASE}/products/${productId}`).set('Authorization', ctx.basic).set('Sec-Fetch-Site', 'same-origin').set('Origin', 'http://somewhere.else').send({ name: 'Same' });
      expect(sameOrigin.status).toBe(200);
      const typed = await ctx.http.put(`${BASE}/products/${productId}`).set('Authorization', ctx.basic).set('Sec-Fetch-Site', 'none').send({ name: 'Typed' });
      expect(typed.status).toBe(200);
      const read = await ctx.http.get(`${BASE}/products/${productId}`).set('Authorization', ctx.basic).set('Origin', 'https://evil.example.net').set('Sec-Fetch-Site', 'cross-site');
      expect(read.status).toBe(200);
      expect(read.body.name).toBe('Typed');
    });

    test('with PUBLIC_URL, its origin is the own origin', async () => {
      const other = await createTestContext({ PUBLIC_URL: 'https://api.example.com/base' });
      try {
        const ok = await other.http.post(`${BASE}/products`).set('Authorization', other.basic).set('Origin', 'https://api.example.com').send({ slug: 'pub', name: 'Pub' });
        expect(ok.status).toBe(200);
        const local = await other.http.post(`${BASE}/products`).set('Authorization', other.basic).set('Origin', 'http://127.0.0.1:8080').send({ slug: 'pub2', name: 'Pub' });
        expect(local.status).toBe(403);
      } finally {
        await other.close();
      }
    });

    test('the chat: origins in CHAT_ALLOWED_ORIGINS may start sessions, others are refused', async () => {
      const CHAT = '/wp-json/ultimate-multisite-support-tickets/v1';
      const before = Number((await ctx.db('chat_sessions').count({ n: '*' }))[0].n);
      const shop = await ctx.http.post(`${CHAT}/chat/sessions`).set('Origin', 'https://shop.example.com').set('Sec-Fetch-Site', 'cross-site').send({ customer_name: 'Ada' });
      expect(shop.status).toBe(201);
      const evil = await ctx.http.post(`${CHAT}/chat/sessions`).set('Origin', 'https://evil.example.net').send({ customer_name: 'Eve' });
      expect(evil.status).toBe(403);
      expect(evil.body.code).toBe('rest_cross_site_forbidden');
      expect(evil.body.message).toMatch(/CHAT_ALLOWED_ORIGINS/);
      expect(Number((await ctx.db('chat_sessions').count({ n: '*' }))[0].n)).toBe(before + 1);
    });
  });

  describe('Cache-Control', () => {
    const CHAT = '/wp-json/ultimate-multisite-support-tickets/v1';
    test('authenticated answers are no-store (wu/v2 after authentication, errors included; the chat beyond its public routes)', async () => {
      for (const path of [`${BASE}/auth`, `${BASE}/customers`, `${BASE}/customers/999999`, `${CHAT}/chat/agent/agents`]) {
        const res = await ctx.http.get(path).set('Authorization', ctx.basic);
        expect([path, res.headers['cache-control']]).toEqual([path, 'no-store']);
      }
    });

    test('public answers keep theirs (none): the indexes, the document, the chat availability', async () => {
      for (const path of ['/wp-json/', BASE, `${BASE}/openapi.json`, CHAT, `${CHAT}/chat/availability`]) {
        const res = await ctx.http.get(path);
        expect([path, res.status, res.headers['cache-control']]).toEqual([path, 200, undefined]);
      }
    });
  });
});
