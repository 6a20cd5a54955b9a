import { BASE, createTestContext, newCustomerBody, type TestContext } from './helpers';

/**
 * WordPress' `_fields`, `_links` and `_embed` on the record routes (src/http/fields.ts,
 * src/http/embed.ts): what the answers hold, and what the SQL reads (observed on the knex
 * instance the app uses).
 */
describe('_fields, _links and _embed', () => {
  let ctx: TestContext;
  const auth = () => ({ Authorization: ctx.basic });
  const ids = { customers: [] as number[], plan: 0, addon: 0, memberships: [] as number[], payment: 0, site: 0, domain: 0 };

  const post = async (path: string, body: object) => {
    const res = await ctx.http.post(`${BASE}${path}`).set(auth()).send(body);
    if (res.status !== 200) throw new Error(`${path}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  };
  /** GET with a raw query string (so every spelling reaches the server as written). */
  const get = (path: string, query = '') => ctx.http.get(`${BASE}${path}${query ? `?${query}` : ''}`).set(auth());
  /** The SQL the app ran while `fn` ran. */
  const sqlOf = async <T>(fn: () => Promise<T>): Promise<{ result: T; sql: string[] }> => {
    const sql: string[] = [];
    const listener = (q: { sql: string }) => sql.push(q.sql);
    ctx.db.on('query', listener);
    try {
      return { result: await fn(), sql };
    } finally {
      ctx.db.removeListener('query', listener);
    }
  };

  beforeAll(async () => {
    ctx = await createTestContext();
    for (let i = 0; i < 2; i++) ids.customers.push((await post('/customers', newCustomerBody({ billing_address: { billing_city: `City ${i}`, billing_country: 'FR' } }))).id);
    ids.plan = (await post('/products', { slug: 'fields-plan', name: 'Fields plan', amount: '9.90', type: 'plan' })).id;
    ids.addon = (await post('/products', { slug: 'fields-addon', name: 'Fields add-on', amount: '2', type: 'service' })).id;
    // Three memberships of two customers: a page that names each customer more than once.
    for (const c of [ids.customers[0], ids.customers[1], ids.customers[0]]) ids.memberships.push((await post('/memberships', { customer_id: c, plan_id: ids.plan })).id);
    ids.payment = (await post('/payments', { customer_id: ids.customers[0], membership_id: ids.memberships[0], line_items: [{ name: 'Plan', quantity: 1, unit_price: '9.90', product_id: ids.plan }] })).id;
    ids.site = (await post('/sites', { title: 'Fields site', domain: 'fields.example.com', customer_id: ids.customers[0], membership_id: ids.memberships[0] })).id;
    ids.domain = (await post('/domains', { domain: 'shop.fields.example', blog_id: ids.site, stage: 'domain-mapping' })).id;
  });
  afterAll(() => ctx.close());

  describe('_fields', () => {
    test('keeps only the fields named, on a list and on one record, in every spelling WordPress clients use', async () => {
      const c = ids.customers[0];
      for (const query of ['_fields=id,email', '_fields[]=id&_fields[]=email', '_fields[0]=id&_fields[1]=email', '_fields=id&_fields=email', '_fields=id%20email', '_fields=%20id%20,email,,']) {
        const one = await get(`/customers/${c}`, query);
        expect({ query, status: one.status, body: one.body }).toEqual({ query, status: 200, body: { id: c, email: expect.stringContaining('@example.com') } });
        const list = await get('/customers', `${query}&id=${c}`);
        expect({ query, body: list.body }).toEqual({ query, body: [{ id: c, email: one.body.email }] });
      }
    });

    test('a.b keeps b inside the object a; a name under a field kept whole adds nothing; inside a list, each object', async () => {
      const c = ids.customers[0];
      expect((await get(`/customers/${c}`, '_fields=id,billing_address.billing_city')).body).toEqual({ id: c, billing_address: { billing_city: 'City 0' } });
      expect((await get(`/customers/${c}`, '_fields=billing_address,billing_address.billing_city')).body).toEqual({ billing_address: { billing_city: 'City 0', billing_country: 'FR' } });
      // As WordPress: a scalar asked for inside is kept whole.
      expect((await get(`/customers/${c}`, '_fields=vip.x')).body).toEqual({ vip: false });
      expect((await get(`/payments/${ids.payment}`, '_fields=line_items.unit_price')).body).toEqual({ line_items: [{ unit_price: 9.9 }] });
    });

    test('names that match nothing are absent; no name at all is the whole record', async () => {
      const c = ids.customers[0];
      expect((await get(`/customers/${c}`, '_fields=id,nope,%C3%A9t%C3%A9,%F0%9F%98%80')).body).toEqual({ id: c });
      expect((await get(`/customers/${c}`, '_fields=nope')).body).toEqual({});
      expect((await get('/customers', `_fields=nope&id=${c}`)).body).toEqual([{}]);
      const whole = await get(`/customers/${c}`);
      expect((await get(`/customers/${c}`, '_fields=')).body).toEqual(whole.body);
      expect((await get(`/customers/${c}`, `_fields=${','.repeat(10_000)}`)).body).toEqual(whole.body);
    });

    test('the SQL reads only the columns the fields need (and the id), on lists and records of every kind of resource', async () => {
      const customer = await sqlOf(() => get('/customers', '_fields=email&orderby=username'));
      expect(customer.result.status).toBe(200);
      const page = customer.sql.find((s) => /from "customers"/.test(s) && /limit/.test(s))!;
      expect(page).toMatch(/"u"\."email"/);
      expect(page).toMatch(/"c"\."id"/);
      for (const unwanted of ['billing_address', 'display_name', 'extra_information', 'notes', 'ips', 'date_registered']) expect(page).not.toMatch(new RegExp(`"${unwanted}"`));

      const one = await sqlOf(() => get(`/customers/${ids.customers[0]}`, '_fields=vip'));
      expect(one.result.body).toEqual({ vip: false });
      expect(one.sql.filter((s) => /from "customers"/.test(s))).toEqual([expect.stringMatching(/^select "c"\."id", "c"\."vip" from "customers"/)]);

      const payment = await sqlOf(() => get(`/payments/${ids.payment}`, '_fields=total,status'));
      expect(payment.result.body).toEqual({ total: 9.9, status: 'pending' });
      expect(payment.sql.filter((s) => /from "payments"/.test(s))).toEqual([expect.stringMatching(/^select "t"\."id", "t"\."total", "t"\."status" from "payments" as "t"/)]);

      const memberships = await sqlOf(() => get('/memberships', '_fields=status'));
      const membershipPage = memberships.sql.find((s) => /from "memberships"/.test(s) && /limit/.test(s))!;
      // The columns asked for, the sort keys, and the count the page's query carries (runList).
      expect(membershipPage).toMatch(/^select "t"\."id", "t"\."status"(, "t"\."id"::text AS "_hf_sort_(key|id)")*, \(SELECT json_build_array\(coalesce\(sum\(n\), 0\), count\(\*\)\) FROM row_counts WHERE tbl = \$1 AND key IN \(\$2\)\) AS "_hf_count" from "memberships"/);
      expect(memberships.result.body).toEqual(ids.memberships.map(() => ({ status: 'pending' })));

      // Without _fields, everything is read.
      const full = await sqlOf(() => get(`/payments/${ids.payment}`));
      expect(full.sql.filter((s) => /from "payments"/.test(s))).toEqual([expect.stringMatching(/^select "t"\.\* from "payments" as "t" where "t"\."id" = \$1 limit \$2$/)]);
    });

    test('a computed field reads what it is computed from: a domain\'s dns_record needs its name, not the other way round', async () => {
      const res = await sqlOf(() => get(`/domains/${ids.domain}`, '_fields=dns_record'));
      expect(res.result.body).toEqual({ dns_record: { type: 'CNAME', name: 'shop.fields.example', value: 'localhost' } });
      expect(res.sql.filter((s) => /from "domains"/.test(s))).toEqual([expect.stringMatching(/^select "t"\."id", "t"\."domain" from "domains"/)]);
      const name = await get(`/domains/${ids.domain}`, '_fields=domain');
      expect(name.body).toEqual({ domain: 'shop.fields.example' });
    });

    test('the order of a list holds when its column is not asked for', async () => {
      const asc = await get('/customers', '_fields=id&orderby=email&order=asc');
      const full = await get('/customers', 'orderby=email&order=asc');
      expect(asc.body).toEqual(full.body.map((c: { id: number }) => ({ id: c.id })));
      expect(asc.headers['x-wp-total']).toBe(full.headers['x-wp-total']);
    });

    test('hostile values are bounded: a 400 naming _fields (never a 500) beyond 100 names, 200 characters or 6 levels', async () => {
      const c = ids.customers[0];
      const cases: [string, RegExp][] = [
        [`_fields=${Array.from({ length: 101 }, (_, i) => `f${i}`).join(',')}`, /at most 100 fields/],
        [`_fields=${'a'.repeat(201)}`, /at most 200 characters/],
        ['_fields=a.b.c.d.e.f.g', /at most 6 levels/],
      ];
      for (const [query, message] of cases) {
        for (const path of [`/customers/${c}`, '/customers', '/memberships']) {
          const res = await get(path, query);
          expect({ path, status: res.status, code: res.body.code }).toEqual({ path, status: 400, code: 'wu_rest_invalid_parameter' });
          expect(res.body.data.params._fields).toMatch(message);
        }
      }
      // Lengths count characters (code points), as the document's maxLength does.
      expect((await get(`/customers/${c}`, `_fields=id,${encodeURIComponent('😀'.repeat(200))}`)).body).toEqual({ id: c });
      expect((await get(`/customers/${c}`, `_fields=${encodeURIComponent('😀'.repeat(201))}`)).status).toBe(400);
      // 4,000 names that are all the same count once.
      expect((await get(`/customers/${c}`, `_fields=${Array(4000).fill('id').join(',')}`)).body).toEqual({ id: c });
      // NUL is refused like anywhere else; spellings the server does not read are ignored, as other underscore parameters.
      expect((await get(`/customers/${c}`, '_fields=id%00')).status).toBe(400);
      expect((await get(`/customers/${c}`, '_fields[a][b]=id')).body.id).toBe(c);
      expect((await get(`/customers/${c}`, '_fields[a][b]=id')).body.email).toBeDefined();
      // A URL over Node's 16 KiB header limit is the 431 of every route.
      expect((await get(`/customers/${c}`, `_fields=${','.repeat(20_000)}`)).status).toBe(431);
    });

    test('a bad list parameter and a bad _fields are reported together', async () => {
      const res = await get('/customers', `per_page=0&_fields=${'x'.repeat(300)}`);
      expect(res.status).toBe(400);
      expect(Object.keys(res.body.data.params).sort()).toEqual(['_fields', 'per_page']);
    });

    test('the Link header of a page keeps _fields', async () => {
      const res = await get('/memberships', '_fields=id&per_page=1');
      expect(res.headers.link).toMatch(/_fields=id/);
      expect(res.body).toHaveLength(1);
      expect(Object.keys(res.body[0])).toEqual(['id']);
    });
  });

  describe('_links', () => {
    test('every record links to itself, its collection and the records its references name (embeddable), on every route answering it', async () => {
      const m = (await get(`/memberships/${ids.memberships[1]}`)).body;
      const base = m._links.self[0].href.replace(/\/memberships\/\d+$/, '');
      expect(base).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/wp-json\/wu\/v2$/);
      expect(m._links).toEqual({
        self: [{ href: `${base}/memberships/${ids.memberships[1]}` }],
        collection: [{ href: `${base}/memberships` }],
        customer: [{ embeddable: true, href: `${base}/customers/${ids.customers[1]}` }],
        plan: [{ embeddable: true, href: `${base}/products/${ids.plan}` }],
      });
      // A reference that is not set is not linked; a template is linked but not embeddable.
      const site = (await get(`/sites/${ids.site}`)).body;
      expect(Object.keys(site._links)).toEqual(['self', 'collection', 'customer', 'membership']);
      const template = await post('/sites', { title: 'Template', domain: 'tpl.fields.example', type: 'site_template' });
      const fromTemplate = await post('/sites', { title: 'From template', domain: 'copy.fields.example', template_id: template.id });
      expect(fromTemplate._links.template).toEqual([{ href: `${base}/sites/${template.id}` }]);
      // The list, the singular path and a write answer the same.
      expect((await get('/memberships', `id=${ids.memberships[1]}`)).body).toEqual([m]);
      expect((await get(`/membership/${ids.memberships[1]}`)).body).toEqual(m);
      const put = await ctx.http.put(`${BASE}/memberships/${ids.memberships[1]}`).set(auth()).send({});
      expect(put.body._links).toEqual(m._links);
      const customer = (await get(`/customers/${ids.customers[0]}`)).body;
      expect(customer._links).toEqual({ self: [{ href: `${base}/customers/${ids.customers[0]}` }], collection: [{ href: `${base}/customers` }] });
    });

    test('with _fields, _links only when named (also a part of it)', async () => {
      const id = ids.memberships[0];
      expect((await get(`/memberships/${id}`, '_fields=id')).body).toEqual({ id });
      const withLinks = (await get(`/memberships/${id}`, '_fields=id,_links')).body;
      expect(Object.keys(withLinks)).toEqual(['id', '_links']);
      expect(Object.keys(withLinks._links)).toEqual(['self', 'collection', 'customer', 'plan']);
      expect((await get(`/memberships/${id}`, '_fields=_links.customer')).body).toEqual({ _links: { customer: [{ embeddable: true, href: expect.stringMatching(new RegExp(`/customers/${ids.customers[0]}$`)) }] } });
    });
  });

  describe('_embed', () => {
    test('embeds every embeddable link of every record of a page, with one query per link relation (no N+1)', async () => {
      const res = await sqlOf(() => get('/memberships', '_embed'));
      expect(res.result.status).toBe(200);
      const page = res.result.body as Record<string, any>[];
      expect(page).toHaveLength(3);
      for (const m of page) {
        expect(Object.keys(m._embedded)).toEqual(['customer', 'plan']);
        expect(m._embedded.customer).toHaveLength(1);
        expect(m._embedded.customer[0].id).toBe(m.customer_id);
        expect(m._embedded.customer[0].model).toBe('customer');
        expect(m._embedded.customer[0]._links.self[0].href).toMatch(new RegExp(`/customers/${m.customer_id}$`));
        expect(m._embedded.plan[0]).toMatchObject({ id: ids.plan, model: 'product', slug: 'fields-plan' });
      }
      // The embedded customer is the customer's own GET.
      const own = (await get(`/customers/${page[0].customer_id}`)).body;
      expect(page[0]._embedded.customer[0]).toEqual(own);
      // Page and count, then one query for the two customers, one for the plan.
      expect(res.sql.filter((s) => /from "customers"/.test(s))).toEqual([expect.stringMatching(/where "c"\."id" in \(\$1, \$2\)$/)]);
      expect(res.sql.filter((s) => /from "products"/.test(s))).toEqual([expect.stringMatching(/where "t"\."id" in \(\$1\)$/)]);
      // The page (its X-WP-Total comes from the kept counts).
      expect(res.sql.filter((s) => /from "memberships"/.test(s))).toHaveLength(1);
    });

    test('_embed names link relations; unknown ones and links that are not set embed nothing', async () => {
      const payment = (await get(`/payments/${ids.payment}`, '_embed=membership,nope')).body;
      expect(Object.keys(payment._embedded)).toEqual(['membership']);
      expect(payment._embedded.membership[0].id).toBe(ids.memberships[0]);
      expect(payment._embedded.membership[0]._links.customer).toBeDefined();
      for (const flag of ['', '1', 'true', '0', ',,,']) {
        const all = (await get(`/payments/${ids.payment}`, `_embed=${flag}`)).body;
        // No product_id on this payment: its customer and membership.
        expect({ flag, rels: Object.keys(all._embedded) }).toEqual({ flag, rels: ['customer', 'membership'] });
      }
      expect((await get(`/payments/${ids.payment}`, '_embed[]=customer&_embed[]=membership')).body._embedded.customer[0].id).toBe(ids.customers[0]);
      expect((await get(`/payments/${ids.payment}`, '_embed=false')).body._embedded).toBeUndefined();
      const domain = (await get('/domains', `_embed=site,customer&id=${ids.domain}`)).body[0];
      expect(domain._embedded.site[0]).toMatchObject({ id: ids.site, model: 'site', domain: 'fields.example.com' });
      expect(domain._embedded.customer[0].id).toBe(ids.customers[0]);
      // Customers and products link to nothing embeddable: _embed changes nothing.
      const customer = (await get(`/customers/${ids.customers[0]}`, '_embed')).body;
      expect(customer._embedded).toBeUndefined();
    });

    test('with _fields, embedding needs _embedded named; a part of it reads (and answers) only that part', async () => {
      const id = ids.memberships[0];
      const skipped = await sqlOf(() => get(`/memberships/${id}`, '_fields=id&_embed'));
      expect(skipped.result.body).toEqual({ id });
      expect(skipped.sql.filter((s) => !/from "memberships"/.test(s) && !/settings/.test(s))).toEqual([]);
      expect(skipped.sql.filter((s) => /from "memberships"/.test(s))).toHaveLength(1);

      const whole = (await get(`/memberships/${id}`, '_fields=id,_embedded&_embed')).body;
      expect(Object.keys(whole)).toEqual(['id', '_embedded']);
      expect(whole._embedded.customer[0].id).toBe(ids.customers[0]);

      const part = await sqlOf(() => get(`/memberships/${id}`, '_fields=id,_embedded.customer.email&_embed'));
      expect(part.result.body).toEqual({ id, _embedded: { customer: [{ email: expect.stringContaining('@example.com') }] } });
      // The plan is not asked for: not read; the customer's other columns neither.
      expect(part.sql.filter((s) => /from "products"/.test(s))).toEqual([]);
      const customerSql = part.sql.filter((s) => /from "customers"/.test(s));
      expect(customerSql).toEqual([expect.stringMatching(/^select "c"\."id", "u"\."email" from "customers"/)]);
    });

    test('a hostile _embed is bounded too', async () => {
      const res = await get(`/memberships/${ids.memberships[0]}`, `_embed=${Array.from({ length: 101 }, (_, i) => `r${i}`).join(',')}`);
      expect(res.status).toBe(400);
      expect(res.body.data.params._embed).toMatch(/at most 100/);
      const many = await get(`/memberships/${ids.memberships[0]}`, `_embed=${Array(1000).fill('customer').join(',')}`);
      expect(Object.keys(many.body._embedded)).toEqual(['customer']);
    });
  });

  test('other record lists and records honour _fields too: a site\'s users, translation projects and jobs', async () => {
    const users = await get(`/sites/${ids.site}/users`, '_fields=user_id,role');
    expect(users.status).toBe(200);
    expect(users.body).toEqual([{ user_id: expect.any(Number), role: 'administrator' }]);
    const created = await post('/translations/projects', { slug: 'fields-plugin', type: 'plugin', name: 'Fields plugin', version: '1.0', pot_url: 'https://example.test/fields.pot' });
    expect((await get('/translations/projects', '_fields=slug,version')).body).toEqual([{ slug: 'fields-plugin', version: '1.0' }]);
    expect((await get(`/translations/projects/${created.id}`, '_fields[]=id&_fields[]=nope')).body).toEqual({ id: created.id });
    expect((await get('/translations/jobs', '_fields=id')).body).toEqual([]);
    const bad = await get('/translations/jobs', `_fields=${'x'.repeat(201)}&per_page=x`);
    expect(Object.keys(bad.body.data.params).sort()).toEqual(['_fields', 'per_page']);
  });

  test('a caller that is not allowed learns nothing: 401 before _fields or _embed are looked at', async () => {
    const bad = `Basic ${Buffer.from('hf_nope:nope').toString('base64')}`;
    for (const query of ['_fields=id,email', `_embed&_fields=${'a'.repeat(500)}`]) {
      for (const headers of [{}, { Authorization: bad }]) {
        const res = await ctx.http.get(`${BASE}/memberships?${query}`).set(headers);
        expect(res.status).toBe(401);
        expect(res.body.code).toBe('rest_forbidden');
        expect(JSON.stringify(res.body)).not.toMatch(/example\.com|_embedded/);
      }
    }
  });
});
