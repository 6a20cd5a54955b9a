import request from 'supertest';
import { createApp } from '../src/app';
import { Metrics } from '../src/http/metrics';
import { WorkflowStarts } from '../src/temporal/starts';
import { makeCustomer, offsetDomainIds, workflowStatus } from './estate-helpers';
import { BASE, createTestContext, type TestContext } from './helpers';

describe('domains', () => {
  let ctx: TestContext;
  const auth = () => ({ Authorization: ctx.basic });
  const idPrefix = () => ctx.app.locals.temporal.ids.prefix();
  let n = 0;
  const name = (prefix = 'd') => `${prefix}${++n}-${process.pid}.example.org`;
  const post = (path: string, body: unknown) => ctx.http.post(`${BASE}${path}`).set(auth()).send(body as object);
  const site = async (extra: Record<string, unknown> = {}) => {
    const res = await post('/sites', { title: 'S', domain: name('site'), ...extra });
    expect(res.status).toBe(200);
    return res.body as { id: number; customer_id: number | null };
  };

  beforeAll(async () => {
    ctx = await createTestContext();
    await offsetDomainIds(ctx);
  });
  afterAll(() => ctx.close());

  test('create with the contract body (domain, customer_id, primary_domain, stage domain-mapping): no checks', async () => {
    const customerId = await makeCustomer(ctx);
    const res = await post('/domains', { domain: '  Shop.Example.COM. ', customer_id: customerId, primary_domain: 0, stage: 'domain-mapping' });
    expect(res.status).toBe(200);
    const d = res.body;
    expect(d).toMatchObject({
      model: 'domain',
      domain: 'shop.example.com',
      blog_id: null,
      customer_id: customerId,
      primary_domain: false,
      active: true,
      secure: false,
      stage: 'domain-mapping',
      workflow_id: null,
      last_error: null,
    });
    expect(typeof d.id).toBe('number');
    expect(await workflowStatus(ctx, `${await idPrefix()}-domain-check-${d.id}`)).toBe('NOT_FOUND');
  });

  test('blog_id and customer_id of 0 are none: null, never 0; a primary domain still needs a real site', async () => {
    const res = await post('/domains', { domain: name(), blog_id: 0, customer_id: 0, stage: 'domain-mapping' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ blog_id: null, customer_id: null });
    const primary = await post('/domains', { domain: name(), blog_id: 0, primary_domain: true, stage: 'domain-mapping' });
    expect(primary.status).toBe(400);
    expect(primary.body).toMatchObject({ code: 'wu_rest_invalid_parameter', data: { status: 400, params: { primary_domain: expect.stringMatching(/needs a site/) } } });
    const s = await site();
    const attached = await ctx.http.put(`${BASE}/domains/${res.body.id}`).set(auth()).send({ blog_id: s.id });
    expect(attached.body.blog_id).toBe(s.id);
    const detached = await ctx.http.put(`${BASE}/domains/${res.body.id}`).set(auth()).send({ blog_id: 0 });
    expect(detached.body.blog_id).toBeNull();
    expect(await ctx.db('domains').where({ blog_id: 0 }).orWhere({ customer_id: 0 }).first()).toBeUndefined();
  });

  test('default stage checking-dns: inactive, and a domain-check workflow is started and counted', async () => {
    const res = await post('/domain', { domain: name(), active: true, secure: 1 });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ stage: 'checking-dns', active: false, secure: true, workflow_id: `${await idPrefix()}-domain-check-${res.body.id}` });
    const d = await ctx.temporal.client.workflow.getHandle(res.body.workflow_id).describe();
    expect(d.status.name).toBe('RUNNING');
    expect(d.type).toBe('domainCheck');
    expect(d.taskQueue).toBe(ctx.config.TEMPORAL_TASK_QUEUE);
    const metrics = await ctx.metrics.registry.getSingleMetricAsString('temporal_workflows_started_total');
    expect(metrics).toMatch(/temporal_workflows_started_total\{workflow_type="domainCheck"\} [1-9]/);
  });

  test('get, update (PUT, PATCH, POST) and delete on plural and singular paths; delete stops the check', async () => {
    const created = (await post('/domains', { domain: name() })).body;
    for (const base of ['/domains', '/domain']) {
      const got = await ctx.http.get(`${BASE}${base}/${created.id}`).set(auth());
      expect(got.status).toBe(200);
      expect(got.body).toEqual(created);
    }
    const put = await ctx.http.put(`${BASE}/domains/${created.id}`).set(auth()).send({ secure: true });
    expect(put.body).toMatchObject({ secure: true, stage: 'checking-dns' });
    const patch = await ctx.http.patch(`${BASE}/domain/${created.id}`).set(auth()).send({ secure: 'false' });
    expect(patch.body.secure).toBe(false);
    const viaPost = await post(`/domain/${created.id}`, { stage: 'checking-dns' });
    expect(viaPost.status).toBe(200);
    expect(await workflowStatus(ctx, created.workflow_id)).toBe('RUNNING');

    const del = await ctx.http.delete(`${BASE}/domain/${created.id}`).set(auth());
    expect(del.status).toBe(200);
    expect(del.body).toBe(true);
    expect((await ctx.http.get(`${BASE}/domains/${created.id}`).set(auth())).status).toBe(404);
    expect(await workflowStatus(ctx, created.workflow_id)).toBe('TERMINATED');
  });

  test.each([
    [{}, 'domain', 'domain is required.'],
    [{ domain: '' }, 'domain', /not a valid host name/],
    [{ domain: 'under_score.example.com' }, 'domain', /underscores/],
    [{ domain: '192.168.1.1' }, 'domain', /not an IP address/],
    [{ domain: '::1' }, 'domain', /not an IP address/],
    [{ domain: 'localhost' }, 'domain', /at least two labels/],
    [{ domain: 'a..example.com' }, 'domain', /empty labels/],
    [{ domain: 'bad-.example.com' }, 'domain', /hyphens/],
    [{ domain: 'exa mple.com' }, 'domain', /letters, digits and hyphens/],
    [{ domain: `${'a'.repeat(64)}.com` }, 'domain', /longer than 63/],
    [{ domain: `${'abcdefghi.'.repeat(26)}com` }, 'domain', /at most 253/],
    [{ domain: 'example.123' }, 'domain', /all-numeric/],
    [{ domain: 'ok.example.com', stage: 'pending' }, 'stage', 'stage is not one of domain-mapping, checking-dns, checking-ssl-cert, done, done-without-ssl, failed, and ssl-failed.'],
    [{ domain: 'ok.example.com', primary_domain: 'yes' }, 'primary_domain', 'primary_domain is not of type boolean.'],
    [{ domain: 'ok.example.com', active: 3 }, 'active', 'active is not of type boolean.'],
    [{ domain: 'ok.example.com', secure: 'x' }, 'secure', 'secure is not of type boolean.'],
    [{ domain: 'ok.example.com', blog_id: 'x' }, 'blog_id', /^blog_id is not of type (integer|number)\.$/],
    [{ domain: 'ok.example.com', customer_id: -1 }, 'customer_id', /greater than/],
    [{ domain: 'ok.example.com', primary_domain: 1 }, 'primary_domain', /needs a site/],
    [{ domain: 'ok.example.com', ssl: true }, 'ssl', 'ssl is not a valid parameter.'],
  ])('invalid create %j is 400 naming %s', async (body, field, message) => {
    const before = await ctx.db('domains').count({ n: '*' });
    const res = await post('/domains', body);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('wu_rest_invalid_parameter');
    expect(Object.keys(res.body.data.params)).toEqual([field]);
    if (typeof message === 'string') expect(res.body.data.params[field]).toBe(message);
    else expect(res.body.data.params[field]).toMatch(message);
    expect(await ctx.db('domains').count({ n: '*' })).toEqual(before);
  });

  test('update: invalid values are 400; unknown or read-only fields are invalid_set_method', async () => {
    const d = (await post('/domains', { domain: name(), stage: 'domain-mapping' })).body;
    const bad = await ctx.http.put(`${BASE}/domains/${d.id}`).set(auth()).send({ stage: 'x', domain: 'no' });
    expect(bad.status).toBe(400);
    expect(Object.keys(bad.body.data.params).sort()).toEqual(['domain', 'stage']);
    for (const field of ['workflow_id', 'last_error', 'mapped']) {
      const res = await ctx.http.put(`${BASE}/domains/${d.id}`).set(auth()).send({ [field]: 'x' });
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('wu_rest_domain_invalid_set_method');
    }
  });

  test('unknown and non-numeric ids', async () => {
    for (const [method, base] of [['get', '/domains'], ['put', '/domain'], ['patch', '/domains'], ['post', '/domains'], ['delete', '/domain']] as const) {
      const res = await ctx.http[method](`${BASE}${base}/987654`).set(auth()).send(method === 'get' || method === 'delete' ? undefined : { secure: true });
      expect(res.status).toBe(404);
      expect(res.body).toMatchObject({ code: 'wu_rest_domain_invalid_id', message: 'Item not found.' });
    }
    expect((await ctx.http.delete(`${BASE}/domains/x1`).set(auth())).body.code).toBe('rest_no_route');
  });

  test('unknown references are 400 naming each field', async () => {
    const res = await post('/domains', { domain: name(), blog_id: 987654, customer_id: 987655 });
    expect(res.status).toBe(400);
    expect(res.body.data.params).toEqual({
      blog_id: 'blog_id 987654 does not match any site.',
      customer_id: 'customer_id 987655 does not match any customer.',
    });
  });

  test('domain names are unique in any case (create and rename)', async () => {
    const d = name();
    const first = await post('/domains', { domain: d, stage: 'domain-mapping' });
    expect(first.status).toBe(200);
    for (const variant of [d, d.toUpperCase(), ` ${d}.`]) {
      const dup = await post('/domains', { domain: variant, stage: 'domain-mapping' });
      expect(dup.status).toBe(400);
      expect(dup.body.data.params).toEqual({ domain: `domain ${d} is already mapped (domain ${first.body.id}).` });
    }
    const other = (await post('/domains', { domain: name(), stage: 'domain-mapping' })).body;
    const rename = await ctx.http.put(`${BASE}/domains/${other.id}`).set(auth()).send({ domain: d.toUpperCase() });
    expect(rename.status).toBe(400);
    expect(rename.body.data.params).toHaveProperty('domain');
  });

  test('site and customer: the site must belong to the customer; blog_id alone takes the site customer', async () => {
    const c1 = await makeCustomer(ctx);
    const c2 = await makeCustomer(ctx);
    const s = await site({ customer_id: c1 });
    const mismatch = await post('/domains', { domain: name(), blog_id: s.id, customer_id: c2, stage: 'domain-mapping' });
    expect(mismatch.status).toBe(400);
    expect(mismatch.body.data.params).toEqual({ blog_id: `site ${s.id} belongs to customer ${c1}, not to customer ${c2}.` });
    const inherit = await post('/domains', { domain: name(), blog_id: s.id, stage: 'domain-mapping' });
    expect(inherit.status).toBe(200);
    expect(inherit.body.customer_id).toBe(c1);
    const move = await ctx.http.patch(`${BASE}/domains/${inherit.body.id}`).set(auth()).send({ customer_id: c2 });
    expect(move.status).toBe(400);
    expect(move.body.data.params).toHaveProperty('blog_id');
  });

  test('primary_domain marks one primary per site and un-marks the others in the same write', async () => {
    const s1 = await site();
    const s2 = await site();
    const a = (await post('/domains', { domain: name('a'), blog_id: s1.id, primary_domain: 1, stage: 'domain-mapping' })).body;
    const other = (await post('/domains', { domain: name('o'), blog_id: s2.id, primary_domain: true, stage: 'domain-mapping' })).body;
    expect(a.primary_domain).toBe(true);
    const b = await post('/domains', { domain: name('b'), blog_id: s1.id, primary_domain: 'true', stage: 'domain-mapping' });
    expect(b.status).toBe(200);
    expect(b.body.primary_domain).toBe(true);
    const primaries = async (blogId: number) => (await ctx.db('domains').where({ blog_id: blogId, primary_domain: true }).pluck('id')).map(Number);
    expect(await primaries(s1.id)).toEqual([b.body.id]);
    const back = await ctx.http.put(`${BASE}/domains/${a.id}`).set(auth()).send({ primary_domain: true });
    expect(back.body.primary_domain).toBe(true);
    expect(await primaries(s1.id)).toEqual([a.id]);
    expect(await primaries(s2.id)).toEqual([other.id]);
    // Moving a primary domain to another site takes over that site's primary.
    const moved = await ctx.http.put(`${BASE}/domains/${a.id}`).set(auth()).send({ blog_id: s2.id });
    expect(moved.status).toBe(200);
    expect(await primaries(s2.id)).toEqual([a.id]);
    expect(await primaries(s1.id)).toEqual([]);
    const detach = await ctx.http.put(`${BASE}/domains/${a.id}`).set(auth()).send({ blog_id: null });
    expect(detach.status).toBe(400);
    expect(detach.body.data.params).toHaveProperty('primary_domain');
  });

  test('active is forced false in checking and failed stages, kept in the others', async () => {
    const done = await post('/domains', { domain: name(), stage: 'done', active: false });
    expect(done.body).toMatchObject({ stage: 'done', active: false });
    const failed = await post('/domains', { domain: name(), stage: 'failed', active: true });
    expect(failed.body).toMatchObject({ stage: 'failed', active: false });
    const sslFailed = await post('/domains', { domain: name(), stage: 'ssl-failed' });
    expect(sslFailed.body.active).toBe(false);
    const forced = await ctx.http.put(`${BASE}/domains/${failed.body.id}`).set(auth()).send({ active: true });
    expect(forced.body.active).toBe(false);
    const byHand = await ctx.http.put(`${BASE}/domains/${failed.body.id}`).set(auth()).send({ stage: 'done-without-ssl' });
    expect(byHand.body).toMatchObject({ stage: 'done-without-ssl', active: true });
  });

  test('moving a checked domain out of the checking stages by hand stops its check; renaming restarts it', async () => {
    const d = (await post('/domains', { domain: name() })).body;
    expect(await workflowStatus(ctx, d.workflow_id)).toBe('RUNNING');
    const manual = await ctx.http.put(`${BASE}/domains/${d.id}`).set(auth()).send({ stage: 'done-without-ssl' });
    expect(manual.body).toMatchObject({ stage: 'done-without-ssl', active: true });
    expect(await workflowStatus(ctx, d.workflow_id)).toBe('TERMINATED');

    const e = (await post('/domains', { domain: name(), stage: 'done' })).body;
    expect(e.workflow_id).toBeNull();
    const renamed = await ctx.http.put(`${BASE}/domains/${e.id}`).set(auth()).send({ domain: name('renamed') });
    expect(renamed.body).toMatchObject({ stage: 'checking-dns', active: false, workflow_id: `${await idPrefix()}-domain-check-${e.id}` });
    expect(await workflowStatus(ctx, renamed.body.workflow_id)).toBe('RUNNING');
    await ctx.http.delete(`${BASE}/domains/${e.id}`).set(auth());
    expect(await workflowStatus(ctx, renamed.body.workflow_id)).toBe('TERMINATED');
  });

  test('list: filters stage, customer_id, blog_id; search; orderby', async () => {
    const c = await makeCustomer(ctx);
    const s = await site({ customer_id: c });
    const tag = `lst${process.pid}`;
    await post('/domains', { domain: `zz.${tag}.net`, blog_id: s.id, stage: 'done' });
    await post('/domains', { domain: `aa.${tag}.net`, blog_id: s.id, stage: 'domain-mapping', primary_domain: true });
    await post('/domains', { domain: `mm.${tag}.net`, customer_id: c, stage: 'failed' });
    const names = (res: request.Response) => res.body.map((d: { domain: string }) => d.domain);

    const byBlog = await ctx.http.get(`${BASE}/domains?blog_id=${s.id}&orderby=domain&order=asc`).set(auth());
    expect(byBlog.status).toBe(200);
    expect(names(byBlog)).toEqual([`aa.${tag}.net`, `zz.${tag}.net`]);
    expect(byBlog.headers['x-wp-total']).toBe('2');
    const byCustomer = await ctx.http.get(`${BASE}/domains?customer_id=${c}`).set(auth());
    expect(names(byCustomer)).toEqual([`mm.${tag}.net`, `aa.${tag}.net`, `zz.${tag}.net`]);
    const byStage = await ctx.http.get(`${BASE}/domain?stage=failed&search=${tag}`).set(auth());
    expect(names(byStage)).toEqual([`mm.${tag}.net`]);
    const stages = await ctx.http.get(`${BASE}/domains?stage__in=done,domain-mapping&search=${tag}&orderby=stage&order=desc`).set(auth());
    expect(names(stages)).toEqual([`zz.${tag}.net`, `aa.${tag}.net`]); // done > domain-mapping
    const primary = await ctx.http.get(`${BASE}/domains?primary_domain=1&search=${tag}`).set(auth());
    expect(names(primary)).toEqual([`aa.${tag}.net`]);
    const badStage = await ctx.http.get(`${BASE}/domains?stage=pending`).set(auth());
    expect(badStage.status).toBe(400);
    expect(badStage.body.data.params.stage).toMatch(/one of domain-mapping, checking-dns/);
    const badOrder = await ctx.http.get(`${BASE}/domains?orderby=workflow_id`).set(auth());
    expect(badOrder.status).toBe(400);
  });

  test('without Temporal, a checked domain is refused with 503 and nothing is stored; domain-mapping still works', async () => {
    const app = createApp({ config: ctx.config, db: ctx.db, settings: ctx.settings, temporal: null, metrics: new Metrics() });
    const d = name('nt');
    const res = await request(app).post(`${BASE}/domains`).set(auth()).send({ domain: d });
    expect(res.status).toBe(503);
    expect(res.body.code).toBe('wu_rest_domain_checks_unavailable');
    expect(await ctx.db('domains').where({ domain: d })).toEqual([]);
    const mapping = await request(app).post(`${BASE}/domains`).set(auth()).send({ domain: d, stage: 'domain-mapping' });
    expect(mapping.status).toBe(200);
  });

  test('a mapping and its check\'s start are written together or not at all; a start that fails waits in the outbox and is carried out later', async () => {
    const s = await site();
    const entries = async () => Number((await ctx.db('workflow_starts').count({ n: '*' }))[0].n);
    const before = await entries();
    // A refused insert (the name is taken) leaves no start behind.
    const taken = (await post('/domains', { domain: name('t'), blog_id: s.id, stage: 'done' })).body;
    expect(await entries()).toBe(before);
    expect((await post('/domains', { domain: taken.domain, blog_id: s.id })).status).toBe(400);
    expect(await entries()).toBe(before);

    const start = jest.spyOn(ctx.temporal.client.workflow, 'start').mockRejectedValue(new Error('14 UNAVAILABLE: No connection established'));
    let res: request.Response;
    try {
      res = await post('/domains', { domain: name('q'), blog_id: s.id, primary_domain: true });
    } finally {
      start.mockRestore();
    }
    // Kept, with its start: no mapping in a checking stage without its check.
    expect(res.status).toBe(200);
    const wf = `${await idPrefix()}-domain-check-${res.body.id}`;
    expect(res.body).toMatchObject({ stage: 'checking-dns', workflow_id: wf, primary_domain: true });
    const entry = await ctx.db('workflow_starts').where({ workflow_id: wf }).first();
    expect(entry).toMatchObject({ workflow_type: 'domainCheck', attempts: 1, started_at: null, options: { conflict_policy: 'TERMINATE_EXISTING' } });
    expect(await workflowStatus(ctx, wf)).toBe('NOT_FOUND');
    expect(await new WorkflowStarts(ctx.db, ctx.app.locals.temporal).attempt(entry.id)).toBe('started');
    expect(await workflowStatus(ctx, wf)).toBe('RUNNING');

    // A start still waiting goes when the mapping leaves the checking stages, or is deleted.
    const stuck = jest.spyOn(ctx.temporal.client.workflow, 'start').mockRejectedValue(new Error('14 UNAVAILABLE: No connection established'));
    let other: request.Response;
    try {
      other = await post('/domains', { domain: name('r'), blog_id: s.id });
    } finally {
      stuck.mockRestore();
    }
    const pending = () => ctx.db('workflow_starts').where({ workflow_id: other.body.workflow_id }).whereNull('started_at').count({ n: '*' });
    expect(await pending()).toEqual([{ n: 1 }]);
    expect((await ctx.http.put(`${BASE}/domains/${other.body.id}`).set(auth()).send({ stage: 'done' })).status).toBe(200);
    expect(await pending()).toEqual([{ n: 0 }]);
    await ctx.http.delete(`${BASE}/domains/${res.body.id}`).set(auth());
    expect(await workflowStatus(ctx, wf)).not.toBe('RUNNING');
  });
});
