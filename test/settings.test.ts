import { runCli } from '../src/cli';
import { API_KEY, API_SECRET, BASE, createTestContext, type TestContext } from './helpers';

describe('settings API', () => {
  let ctx: TestContext;
  const auth = () => ({ Authorization: ctx.basic });
  beforeAll(async () => {
    ctx = await createTestContext();
  });
  afterAll(() => ctx.close());

  test('GET /settings lists settings with defaults and never api_key or api_secret', async () => {
    const res = await ctx.http.get(`${BASE}/settings`).set(auth());
    expect(res.status).toBe(200);
    expect(res.body.success).toBe(true);
    expect(res.body.settings).toMatchObject({ enable_api: true, network_name: 'hostflow' });
    expect(res.body.settings).not.toHaveProperty('api_secret');
    expect(res.body.settings).not.toHaveProperty('api_key');
    expect(JSON.stringify(res.body)).not.toContain(API_KEY);
  });

  test('POST /settings with {"settings":{...}} or a flat object updates them', async () => {
    const wrapped = await ctx.http.post(`${BASE}/settings`).set(auth()).send({ settings: { network_name: 'Acme Hosting', support_email: 'help@acme.test' } });
    expect(wrapped.status).toBe(200);
    expect(wrapped.body).toMatchObject({ success: true, updated: ['network_name', 'support_email'] });
    expect(wrapped.body.settings.network_name).toBe('Acme Hosting');
    const flat = await ctx.http.post(`${BASE}/settings`).set(auth()).send({ max_sites: 5 });
    expect(flat.body.settings.max_sites).toBe(5);
    const label = await ctx.http.get(`${BASE}/auth`).set(auth());
    expect(label.body.label).toBe('Acme Hosting');
  });

  test('POST /settings refuses bad input as a whole: nothing is written', async () => {
    const res = await ctx.http.post(`${BASE}/settings`).set(auth()).send({ settings: { network_name: 42, 'Bad Key': 1, api_secret: 'x', good_one: 'y' } });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('wu_rest_invalid_parameter');
    expect(Object.keys(res.body.data.params).sort()).toEqual(['Bad Key', 'api_secret', 'network_name']);
    const all = await ctx.http.get(`${BASE}/settings`).set(auth());
    expect(all.body.settings).not.toHaveProperty('good_one');
    const empty = await ctx.http.post(`${BASE}/settings`).set(auth()).send({ settings: {} });
    expect(empty.status).toBe(400);
    expect(empty.body.data.params.settings).toBeDefined();
  });

  test('GET /settings/{key}: value, 404 setting_not_found, 403 setting_protected', async () => {
    const one = await ctx.http.get(`${BASE}/settings/enable_api`).set(auth());
    expect(one.body).toEqual({ success: true, setting_key: 'enable_api', value: true });
    const missing = await ctx.http.get(`${BASE}/settings/no_such_setting`).set(auth());
    expect(missing.status).toBe(404);
    expect(missing.body.code).toBe('setting_not_found');
    for (const key of ['api_secret', 'api_key', 'stripe_secret', 'smtp_password']) {
      const protectedRes = await ctx.http.get(`${BASE}/settings/${key}`).set(auth());
      expect(protectedRes.status).toBe(403);
      expect(protectedRes.body.code).toBe('setting_protected');
    }
  });

  test('POST/PUT/PATCH /settings/{key} with {"value":...}; loose booleans; wrong types refused', async () => {
    const put = await ctx.http.put(`${BASE}/settings/network_name`).set(auth()).send({ value: 'Renamed' });
    expect(put.body).toEqual({ success: true, setting_key: 'network_name', value: 'Renamed' });
    const loose = await ctx.http.patch(`${BASE}/settings/enable_api`).set(auth()).send({ value: '1' });
    expect(loose.body.value).toBe(true);
    const wrong = await ctx.http.post(`${BASE}/settings/enable_api`).set(auth()).send({ value: 'perhaps' });
    expect(wrong.status).toBe(400);
    expect(wrong.body.data.params.value).toBe('enable_api is not of type boolean.');
    const noValue = await ctx.http.post(`${BASE}/settings/network_name`).set(auth()).send({});
    expect(noValue.status).toBe(400);
    expect(noValue.body.data.params.value).toBe('value is required.');
    const secret = await ctx.http.post(`${BASE}/settings/api_secret`).set(auth()).send({ value: 'hijack' });
    expect(secret.status).toBe(403);
    expect((await ctx.http.get(`${BASE}/auth`).set(auth())).status).toBe(200);
  });

  test('disabling the API through the API locks it until the CLI turns it back on', async () => {
    const off = await ctx.http.post(`${BASE}/settings/enable_api`).set(auth()).send({ value: false });
    expect(off.status).toBe(200);
    expect((await ctx.http.get(`${BASE}/settings`).set(auth())).status).toBe(403);
    const out: string[] = [];
    await runCli(['settings', 'set', 'enable_api', 'true'], ctx.settings, (s) => out.push(s));
    expect(out).toEqual(['enable_api = true']);
    expect((await ctx.http.get(`${BASE}/settings`).set(auth())).status).toBe(200);
  });
});

describe('admin CLI', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext();
  });
  afterAll(() => ctx.close());

  const run = async (...argv: string[]) => {
    const out: string[] = [];
    await runCli(argv, ctx.settings, (s) => out.push(s));
    return out.join('\n');
  };

  test('settings get/set/list', async () => {
    expect(await run('settings', 'get', 'enable_api')).toBe('true');
    expect(await run('settings', 'set', 'network_name', 'CLI Net')).toBe('network_name = "CLI Net"');
    expect(await run('settings', 'get', 'network_name')).toBe('"CLI Net"');
    expect(JSON.parse(await run('settings', 'list'))).toMatchObject({ network_name: 'CLI Net', enable_api: true });
  });

  test('bad commands and values are refused with a message', async () => {
    await expect(run('settings', 'get', 'api_secret')).rejects.toThrow(/hash/);
    await expect(run('settings', 'get', 'nope')).rejects.toThrow(/not found/);
    await expect(run('settings', 'set', 'enable_api', 'perhaps')).rejects.toMatchObject({ extra: { params: { enable_api: 'enable_api is not of type boolean.' } } });
    await expect(run('settings', 'set', 'api_secret', 'x')).rejects.toMatchObject({ code: 'wu_rest_invalid_parameter' });
    await expect(run('frobnicate')).rejects.toThrow(/Usage/);
  });

  test('credentials refresh prints a new pair; the old one stops working, the new one works', async () => {
    const out = await run('credentials', 'refresh');
    const key = /API key:\s+(\S+)/.exec(out)![1];
    const secret = /API secret:\s+(\S+)/.exec(out)![1];
    expect(key).not.toBe(API_KEY);
    expect(secret.length).toBeGreaterThanOrEqual(40);
    expect((await ctx.http.get(`${BASE}/auth`).set('Authorization', ctx.basic)).status).toBe(401);
    const fresh = await ctx.http.get(`${BASE}/auth`).auth(key, secret);
    expect(fresh.status).toBe(200);
    expect(API_SECRET).not.toBe(secret);
  });
});
