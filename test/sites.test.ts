import { makeCustomer, makeMembership, offsetDomainIds, workflowStatus } from './estate-helpers';
import { BASE, createTestContext, newCustomerBody, type TestContext } from './helpers';

describe('sites', () => {
  let ctx: TestContext;
  const auth = () => ({ Authorization: ctx.basic });
  let n = 0;
  const uniqueDomain = () => `site${++n}-${process.pid}.example.com`;
  const post = (path: string, body: unknown) => ctx.http.post(`${BASE}${path}`).set(auth()).send(body as object);

  beforeAll(async () => {
    ctx = await createTestContext();
    await offsetDomainIds(ctx);
  });
  afterAll(() => ctx.close());

  test('create: defaults, lower-cased domain, correct JSON types', async () => {
    const res = await post('/sites', { title: '  My Site ', domain: ' Blog.Example.COM. ' });
    expect(res.status).toBe(200);
    const s = res.body;
    expect(s).toMatchObject({
      model: 'site',
      title: 'My Site',
      description: '',
      domain: 'blog.example.com',
      path: '/',
      customer_id: null,
      membership_id: null,
      template_id: null,
      type: 'customer_owned',
      active: true,
      public: true,
      archived: false,
      site_meta: {},
    });
    expect(typeof s.id).toBe('number');
    for (const k of ['date_created', 'date_modified']) expect(new Date(s[k]).toISOString()).toBe(s[k]);
  });

  test('customer_id, membership_id and template_id of 0 are none, as in the original: null on create and update, never 0', async () => {
    const created = await post('/sites', { title: 'Zero refs', domain: uniqueDomain(), customer_id: 0, membership_id: 0, template_id: 0 });
    expect(created.status).toBe(200);
    expect(created.body).toMatchObject({ customer_id: null, membership_id: null, template_id: null });
    const customerId = await makeCustomer(ctx);
    const template = (await post('/sites', { title: 'Tpl', domain: uniqueDomain(), type: 'site_template' })).body;
    const linked = await ctx.http.put(`${BASE}/sites/${created.body.id}`).set(auth()).send({ customer_id: customerId, template_id: template.id });
    expect(linked.body).toMatchObject({ customer_id: customerId, template_id: template.id });
    const cleared = await ctx.http.patch(`${BASE}/site/${created.body.id}`).set(auth()).send({ customer_id: 0, template_id: 0 });
    expect(cleared.status).toBe(200);
    expect(cleared.body).toMatchObject({ customer_id: null, template_id: null });
    for (const [body, field] of [[{ template_id: -1 }, 'template_id'], [{ customer_id: '0' }, 'customer_id']] as const) {
      const bad = await ctx.http.put(`${BASE}/sites/${created.body.id}`).set(auth()).send(body);
      expect(bad.status).toBe(400);
      expect(bad.body).toMatchObject({ code: 'wu_rest_invalid_parameter', data: { status: 400, params: { [field]: expect.any(String) } } });
    }
    expect(await ctx.db('sites').where({ template_id: 0 }).orWhere({ customer_id: 0 }).orWhere({ membership_id: 0 }).first()).toBeUndefined();
  });

  test('create with every field; get, update (PUT, PATCH, POST) and delete on plural and singular paths', async () => {
    const customerId = await makeCustomer(ctx);
    const membershipId = await makeMembership(ctx, customerId);
    const template = await post('/site', { title: 'Template', domain: uniqueDomain(), type: 'site_template' });
    expect(template.status).toBe(200);
    const body = {
      title: 'Full',
      description: 'all fields',
      domain: uniqueDomain(),
      path: '/shop/',
      customer_id: customerId,
      membership_id: membershipId,
      template_id: template.body.id,
      type: 'demo',
      active: 0,
      public: 'false',
      archived: true,
      site_meta: { color: 'blue', n: 1 },
    };
    const created = await post('/site', body);
    expect(created.status).toBe(200);
    expect(created.body).toMatchObject({ ...body, active: false, public: false, archived: true });
    const id = created.body.id;

    for (const base of ['/sites', '/site']) {
      const got = await ctx.http.get(`${BASE}${base}/${id}`).set(auth());
      expect(got.status).toBe(200);
      expect(got.body).toEqual(created.body);
    }
    const put = await ctx.http.put(`${BASE}/sites/${id}`).set(auth()).send({ title: 'Renamed', active: true });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ title: 'Renamed', active: true, description: 'all fields' });
    const patch = await ctx.http.patch(`${BASE}/site/${id}`).set(auth()).send({ site_meta: { x: [1, 2] }, template_id: null });
    expect(patch.body).toMatchObject({ site_meta: { x: [1, 2] }, template_id: null });
    const viaPost = await post(`/site/${id}`, { path: '/other/' });
    expect(viaPost.status).toBe(200);
    expect(viaPost.body.path).toBe('/other/');
    const same = await ctx.http.put(`${BASE}/sites/${id}`).set(auth()).send({ path: '/other/' });
    expect(same.status).toBe(200);

    const del = await ctx.http.delete(`${BASE}/site/${id}`).set(auth());
    expect(del.status).toBe(200);
    expect(del.body).toBe(true);
    expect((await ctx.http.get(`${BASE}/sites/${id}`).set(auth())).status).toBe(404);
  });

  test.each([
    [{ domain: 'x.example.com' }, 'title', 'title is required.'],
    [{ title: '   ', domain: 'x.example.com' }, 'title', 'title must not be blank.'],
    [{ title: 'T' }, 'domain', 'domain is required.'],
    [{ title: 'T', domain: 'bad_name.example.com' }, 'domain', /not a valid host name.*underscores/],
    [{ title: 'T', domain: '10.0.0.1' }, 'domain', /not an IP address/],
    [{ title: 'T', domain: 'localhost' }, 'domain', /at least two labels/],
    [{ title: 'T', domain: '-a.example.com' }, 'domain', /hyphens/],
    [{ title: 'T', domain: `${'a'.repeat(64)}.example.com` }, 'domain', /longer than 63/],
    [{ title: 'T', domain: 42 }, 'domain', 'domain is not of type string.'],
    [{ title: 'T', domain: 'x.example.com', path: 'blog' }, 'path', /must start with "\/"/],
    [{ title: 'T', domain: 'x.example.com', type: 'blog' }, 'type', 'type is not one of default, site_template, customer_owned, pending, external, main, and demo.'],
    [{ title: 'T', domain: 'x.example.com', customer_id: 'one' }, 'customer_id', /^customer_id is not of type (integer|number)\.$/],
    [{ title: 'T', domain: 'x.example.com', membership_id: -1 }, 'membership_id', /greater than or equal to 0/],
    [{ title: 'T', domain: 'x.example.com', template_id: 1.5 }, 'template_id', 'template_id is not of type integer.'],
    [{ title: 'T', domain: 'x.example.com', active: 'maybe' }, 'active', 'active is not of type boolean.'],
    [{ title: 'T', domain: 'x.example.com', public: 2 }, 'public', 'public is not of type boolean.'],
    [{ title: 'T', domain: 'x.example.com', archived: null }, 'archived', 'archived is not of type boolean.'],
    [{ title: 'T', domain: 'x.example.com', site_meta: [1] }, 'site_meta', 'site_meta is not of type object.'],
    [{ title: 'T', domain: 'x.example.com', colour: 'red' }, 'colour', 'colour is not a valid parameter.'],
  ])('invalid create %j is 400 naming %s', async (body, field, message) => {
    const before = await ctx.db('sites').count({ n: '*' });
    const res = await post('/sites', body);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('wu_rest_invalid_parameter');
    expect(Object.keys(res.body.data.params)).toEqual([field]);
    if (typeof message === 'string') expect(res.body.data.params[field]).toBe(message);
    else expect(res.body.data.params[field]).toMatch(message);
    expect(await ctx.db('sites').count({ n: '*' })).toEqual(before);
  });

  test('update: invalid values are 400; unknown fields are invalid_set_method', async () => {
    const s = (await post('/sites', { title: 'U', domain: uniqueDomain() })).body;
    const bad = await ctx.http.put(`${BASE}/sites/${s.id}`).set(auth()).send({ type: 'nope', path: 'x' });
    expect(bad.status).toBe(400);
    expect(Object.keys(bad.body.data.params).sort()).toEqual(['path', 'type']);
    const unknown = await ctx.http.put(`${BASE}/sites/${s.id}`).set(auth()).send({ blog_name: 'x' });
    expect(unknown.status).toBe(400);
    expect(unknown.body.code).toBe('wu_rest_site_invalid_set_method');
    expect(unknown.body.data.params).toHaveProperty('blog_name');
  });

  test('unknown and non-numeric ids', async () => {
    for (const [method, base] of [['get', '/sites'], ['put', '/site'], ['patch', '/sites'], ['post', '/sites'], ['delete', '/site']] as const) {
      const res = await ctx.http[method](`${BASE}${base}/987654`).set(auth()).send(method === 'get' || method === 'delete' ? undefined : { title: 'x' });
      expect(res.status).toBe(404);
      expect(res.body).toMatchObject({ code: 'wu_rest_site_invalid_id', message: 'Item not found.' });
    }
    expect((await ctx.http.get(`${BASE}/sites/abc`).set(auth())).body.code).toBe('rest_no_route');
  });

  test('unknown references are 400 naming each field', async () => {
    const res = await post('/sites', { title: 'R', domain: uniqueDomain(), customer_id: 987654, membership_id: 987655, template_id: 987656 });
    expect(res.status).toBe(400);
    expect(res.body.data.params).toEqual({
      customer_id: 'customer_id 987654 does not match any customer.',
      membership_id: 'membership_id 987655 does not match any membership.',
      template_id: 'template_id 987656 does not match any site.',
    });
    const s = (await post('/sites', { title: 'R2', domain: uniqueDomain() })).body;
    const upd = await ctx.http.put(`${BASE}/sites/${s.id}`).set(auth()).send({ customer_id: 987654 });
    expect(upd.status).toBe(400);
    expect(upd.body.data.params).toHaveProperty('customer_id');
  });

  test('template must be a site_template, and not the site itself', async () => {
    const plain = (await post('/sites', { title: 'Plain', domain: uniqueDomain() })).body;
    const res = await post('/sites', { title: 'T', domain: uniqueDomain(), template_id: plain.id });
    expect(res.status).toBe(400);
    expect(res.body.data.params.template_id).toBe(`template_id ${plain.id} is not a site template (its type is customer_owned).`);
    const tpl = (await post('/sites', { title: 'Tpl', domain: uniqueDomain(), type: 'site_template' })).body;
    const self = await ctx.http.put(`${BASE}/sites/${tpl.id}`).set(auth()).send({ template_id: tpl.id });
    expect(self.status).toBe(400);
    expect(self.body.data.params.template_id).toMatch(/itself/);
    // A template still used by a site cannot be deleted.
    const child = await post('/sites', { title: 'Child', domain: uniqueDomain(), template_id: tpl.id });
    expect(child.status).toBe(200);
    const del = await ctx.http.delete(`${BASE}/sites/${tpl.id}`).set(auth());
    expect(del.status).toBe(409);
    expect(del.body.code).toBe('wu_rest_site_in_use');
  });

  test('membership must belong to the site customer; a membership alone gives the site its customer', async () => {
    const c1 = await makeCustomer(ctx);
    const c2 = await makeCustomer(ctx);
    const m1 = await makeMembership(ctx, c1);
    const res = await post('/sites', { title: 'M', domain: uniqueDomain(), customer_id: c2, membership_id: m1 });
    expect(res.status).toBe(400);
    expect(res.body.data.params.membership_id).toBe(`membership_id ${m1} belongs to customer ${c1}, not to customer ${c2}.`);
    const ok = await post('/sites', { title: 'M', domain: uniqueDomain(), membership_id: m1 });
    expect(ok.status).toBe(200);
    expect(ok.body.customer_id).toBe(c1);
    const move = await ctx.http.put(`${BASE}/sites/${ok.body.id}`).set(auth()).send({ customer_id: c2 });
    expect(move.status).toBe(400);
    expect(move.body.data.params).toHaveProperty('membership_id');
  });

  test('(domain, path) is unique, any case: 400 naming domain', async () => {
    const d = uniqueDomain();
    const a = await post('/sites', { title: 'A', domain: d, path: '/a/' });
    expect(a.status).toBe(200);
    const dup = await post('/sites', { title: 'B', domain: d.toUpperCase(), path: '/a/' });
    expect(dup.status).toBe(400);
    expect(dup.body.data.params.domain).toBe(`domain ${d} with path /a/ is already used by site ${a.body.id}.`);
    const other = await post('/sites', { title: 'B', domain: d, path: '/b/' });
    expect(other.status).toBe(200);
    const clash = await ctx.http.patch(`${BASE}/sites/${other.body.id}`).set(auth()).send({ path: '/a/' });
    expect(clash.status).toBe(400);
    expect(clash.body.data.params).toHaveProperty('domain');
  });

  test('delete cascades the site domain mappings and stops their checks', async () => {
    const site = (await post('/sites', { title: 'Cascade', domain: uniqueDomain() })).body;
    const mapped = await post('/domains', { domain: `m-${uniqueDomain()}`, blog_id: site.id, stage: 'domain-mapping' });
    expect(mapped.status).toBe(200);
    const checking = await post('/domains', { domain: `c-${uniqueDomain()}`, blog_id: site.id });
    expect(checking.status).toBe(200);
    expect(checking.body.workflow_id).toBe(`${await ctx.app.locals.temporal.ids.prefix()}-domain-check-${checking.body.id}`);
    expect(await workflowStatus(ctx, checking.body.workflow_id)).toBe('RUNNING');

    const del = await ctx.http.delete(`${BASE}/sites/${site.id}`).set(auth());
    expect(del.status).toBe(200);
    expect(await ctx.db('domains').whereIn('id', [mapped.body.id, checking.body.id])).toEqual([]);
    expect(await workflowStatus(ctx, checking.body.workflow_id)).toBe('TERMINATED');
  });

  test('list: filters, search, orderby, paging headers', async () => {
    const c = await makeCustomer(ctx);
    const tag = `lst${process.pid}`;
    await post('/sites', { title: `Zulu ${tag}`, domain: `zulu.${tag}.com`, customer_id: c, type: 'demo' });
    await post('/sites', { title: `Alpha ${tag}`, domain: `alpha.${tag}.com`, customer_id: c });
    await post('/sites', { title: `Mike ${tag}`, domain: `mike.${tag}.com`, type: 'demo' });

    const byCustomer = await ctx.http.get(`${BASE}/sites?customer_id=${c}`).set(auth());
    expect(byCustomer.status).toBe(200);
    expect(byCustomer.body.map((s: { title: string }) => s.title)).toEqual([`Alpha ${tag}`, `Zulu ${tag}`]);
    expect(byCustomer.headers['x-wp-total']).toBe('2');

    const demo = await ctx.http.get(`${BASE}/site?type=demo&search=${tag}&orderby=title&order=asc`).set(auth());
    expect(demo.body.map((s: { title: string }) => s.title)).toEqual([`Mike ${tag}`, `Zulu ${tag}`]);

    const search = await ctx.http.get(`${BASE}/sites?search=alpha.${tag}`).set(auth());
    expect(search.body).toHaveLength(1);

    const paged = await ctx.http.get(`${BASE}/sites?search=${tag}&per_page=2&page=2&orderby=domain&order=asc`).set(auth());
    expect(paged.headers['x-wp-totalpages']).toBe('2');
    expect(paged.body.map((s: { domain: string }) => s.domain)).toEqual([`zulu.${tag}.com`]);

    const badType = await ctx.http.get(`${BASE}/sites?type=blog`).set(auth());
    expect(badType.status).toBe(400);
    expect(badType.body.data.params.type).toMatch(/one of default, site_template/);
    const badOrder = await ctx.http.get(`${BASE}/sites?orderby=password`).set(auth());
    expect(badOrder.status).toBe(400);
    expect(badOrder.body.data.params).toHaveProperty('orderby');
  });

  test('requires authentication', async () => {
    expect((await ctx.http.get(`${BASE}/sites`)).status).toBe(401);
  });
});

describe("a site's users", () => {
  let ctx: TestContext;
  const auth = () => ({ Authorization: ctx.basic });
  beforeAll(async () => {
    ctx = await createTestContext();
  });
  afterAll(async () => {
    await ctx?.close();
  });

  test('owner first, links with roles, unlink; bad input and unknown ids change nothing', async () => {
    const customer = await ctx.http.post(`${BASE}/customers`).set(auth()).send(newCustomerBody());
    const site = await ctx.http.post(`${BASE}/sites`).set(auth()).send({ title: 'Team', domain: `team${Date.now()}.example.com`, customer_id: customer.body.id });
    const other = await ctx.http.post(`${BASE}/customers`).set(auth()).send(newCustomerBody());
    const ownerUser = Number((await ctx.db('customers').where({ id: customer.body.id }).first('user_id')).user_id);
    const otherUser = Number((await ctx.db('customers').where({ id: other.body.id }).first('user_id')).user_id);
    const url = `${BASE}/sites/${site.body.id}/users`;

    expect((await ctx.http.get(url)).status).toBe(401);
    const start = await ctx.http.get(url).set(auth());
    expect(start.status).toBe(200);
    expect(start.body).toEqual([expect.objectContaining({ user_id: ownerUser, role: 'administrator', owner: true })]);

    const linked = await ctx.http.post(url).set(auth()).send({ user_id: otherUser, role: 'author' });
    expect(linked.status).toBe(200);
    expect(linked.body.map((u: { user_id: number; role: string; owner: boolean }) => [u.user_id, u.role, u.owner])).toEqual([
      [ownerUser, 'administrator', true],
      [otherUser, 'author', false],
    ]);
    // Linking again changes the role.
    expect((await ctx.http.post(url).set(auth()).send({ user_id: otherUser, role: 'editor' })).body[1].role).toBe('editor');

    const bad = [
      [{}, 'user_id'],
      [{ user_id: 'x' }, 'user_id'],
      [{ user_id: 99999999 }, 'user_id'],
      [{ user_id: ownerUser }, 'user_id'],
      [{ user_id: otherUser, role: 'king' }, 'role'],
    ] as const;
    for (const [body, param] of bad) {
      const res = await ctx.http.post(url).set(auth()).send(body);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('wu_rest_invalid_parameter');
      expect(Object.keys(res.body.data.params)).toEqual([param]);
    }
    expect(await ctx.db('site_users').where({ site_id: site.body.id }).select('user_id', 'role')).toEqual([{ user_id: otherUser, role: 'editor' }]);
    expect((await ctx.http.get(`${BASE}/sites/99999999/users`).set(auth())).body.code).toBe('wu_rest_site_invalid_id');
    expect((await ctx.http.post(`${BASE}/sites/99999999/users`).set(auth()).send({ user_id: otherUser })).status).toBe(404);

    const unlinked = await ctx.http.delete(`${url}/${otherUser}`).set(auth());
    expect(unlinked.status).toBe(200);
    expect(unlinked.body).toHaveLength(1);
    const again = await ctx.http.delete(`${url}/${otherUser}`).set(auth());
    expect(again.status).toBe(404);
    expect(again.body.code).toBe('wu_rest_site_user_not_found');
  });
});
