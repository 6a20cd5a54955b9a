import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { Decimal } from '../src/db/money';
import { DATETIME_PATTERN } from '../src/http/validation';
import { BASE, createTestContext, newCustomerBody, type TestContext } from './helpers';

/**
 * Issue 12, "looser than the server" (wu/v2): for sample inputs of every kind of rule, the
 * served document's verdict (ajv against the operation's schema) is the server's (2xx, or a
 * 400 refusal). Rules the schemas cannot state (references, uniqueness, rules across fields
 * or against stored state) are in the operations' descriptions: a table of their own checks
 * that the document says them. Where the document is stricter on purpose (it leaves out a
 * leniency, such as lower-case currency codes), a third table holds the samples.
 */
describe('the OpenAPI document states the rules the server applies (wu/v2)', () => {
  let ctx: TestContext;
  let doc: any;
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  // multipleOf on the number as JSON writes it (JSON Schema's meaning): ajv divides binary floats, where 19.99 / 0.0001 is not whole.
  ajv.removeKeyword('multipleOf');
  ajv.addKeyword({ keyword: 'multipleOf', type: 'number', schemaType: 'number', validate: (step: number, data: number) => new Decimal(String(data)).mod(String(step)).isZero() });
  const validators = new Map<string, ValidateFunction>();
  /** ajv against a schema of the document; its refs (#/components/schemas/…) resolve against the document's components. */
  const docVerdict = (key: string, schema: object, value: unknown): boolean => {
    if (!validators.has(key)) validators.set(key, ajv.compile({ ...schema, components: doc.components }));
    return validators.get(key)!(value) as boolean;
  };
  const op = (method: string, path: string) => doc.paths[`${BASE}${path}`][method];
  const auth = () => ({ Authorization: ctx.basic });
  let ids: { customer: number; user: number; otherUser: number; freeUser: number; product: number; membership: number; payment: number; site: number };

  beforeAll(async () => {
    ctx = await createTestContext({ REGISTER_WAIT_SECONDS: '0' });
    doc = (await ctx.http.get(`${BASE}/openapi.json`)).body;
    const post = async (path: string, body: object) => {
      const res = await ctx.http.post(`${BASE}${path}`).set(auth()).send(body);
      if (res.status !== 200) throw new Error(`${path}: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body;
    };
    const customer = await post('/customers', newCustomerBody());
    const other = await post('/customers', newCustomerBody());
    const product = await post('/products', { slug: 'rules-plan', name: 'Rules plan', type: 'plan', amount: '9.5' });
    const membership = await post('/memberships', { customer_id: customer.id, plan_id: product.id });
    const payment = await post('/payments', { customer_id: customer.id });
    const site = await post('/sites', { title: 'Rules', domain: 'rules.example.com' });
    const [free] = await ctx.db('users').insert({ username: 'rulesfree', email: 'rulesfree@example.com', password_hash: 'x', display_name: 'Free' }).returning('id');
    ids = { customer: customer.id, user: customer.user_id, otherUser: other.user_id, freeUser: Number(free.id), product: product.id, membership: membership.id, payment: payment.id, site: site.id };
  });
  afterAll(() => ctx?.close());

  type Body = { method: 'post' | 'put' | 'patch'; path: string; url: () => string; body: unknown; form?: boolean };
  /** Sends a body as JSON or, with form, encoded as the form media type's encoding says. */
  const send = (c: Body) => {
    const req = (ctx.http as any)[c.method](`${BASE}${c.url()}`).set(auth());
    if (!c.form) return req.send(c.body);
    const media = op(c.method, c.path).requestBody.content['application/x-www-form-urlencoded'];
    return req.type('form').send(formEncode(c.body as Record<string, unknown>, media.encoding ?? {}));
  };
  const bodyVerdict = (c: Body) => {
    const media = c.form ? 'application/x-www-form-urlencoded' : 'application/json';
    return docVerdict(`${c.method} ${c.path} ${media}`, op(c.method, c.path).requestBody.content[media].schema, c.body);
  };
  const label = (c: { method: string; path: string; form?: boolean }, what: unknown, res: any) =>
    `${c.method.toUpperCase()} ${c.path}${c.form ? ' (form)' : ''} ${JSON.stringify(what).slice(0, 120)} -> ${res.status} ${JSON.stringify(res.body).slice(0, 200)}`;
  /** 2xx: accepted; 400 (or 403 for a protected setting): refused. Anything else is neither. */
  const serverVerdict = (res: any): boolean | string => (res.status < 300 ? true : res.status === 400 || res.status === 403 ? false : `status ${res.status}`);

  const on = (method: Body['method'], path: string, url: () => string, valid: unknown[], invalid: unknown[], form = false) => [
    ...valid.map((body) => ({ method, path, url, body, form, valid: true })),
    ...invalid.map((body) => ({ method, path, url, body, form, valid: false })),
  ];
  const emoji = (n: number) => '😀'.repeat(n);
  const label63 = 'a'.repeat(63);

  test('bodies: dates, amounts, currencies, host names, integers, lengths, NUL, unknown fields, rules across fields', async () => {
    const membership = () => `/memberships/${ids.membership}`;
    const product = () => `/products/${ids.product}`;
    const site = () => `/sites/${ids.site}`;
    const customer = () => `/customers/${ids.customer}`;
    const payment = () => `/payments/${ids.payment}`;
    let n = 0;
    const host = (name: string) => `h${(n += 1)}.${name}`;
    const cases = [
      // Dates: real calendar dates, times, zones.
      ...on(
        'patch',
        '/memberships/{id}',
        membership,
        [...['2026-01-31', '2024-02-29', '2000-02-29', '2026-01-31T12:00:00Z', '2026-01-31 12:00', '2026-01-31T12:00+0530', '2026-01-31T23:59:59.123456-02:00', '2026-01-31T24:00'], null].map((d) => ({ date_expiration: d })),
        ['2026-02-30', '2026-04-31', '1900-02-29', '2026-13-01', '2026-01-31T25:00', '2026-01-31T12:60', '2026-01-31T12:00+24:00', '2026-1-31', '31/01/2026', 'tomorrow', '', '٢٠٢٦-٠١-٣١', '2026-01-31T12:00:00.1234567Z'].map((d) => ({ date_expiration: d })),
      ),
      // Amounts: numbers or digit strings, at most 4 decimals (a USD product's amount: 2, the
      // currency's minor unit, which the description states), up to 99999999999.9999.
      ...on(
        'patch',
        '/products/{id}',
        product,
        [0, 19.99, 0.01, 99999999999.99, '0', '19.99', '000123.4500', '1.12000', '99999999999.99'].map((amount) => ({ amount })),
        [-1, 1.23456, 1e-5, 100000000000, '-1', '1.23456', '1e3', 'abc', '', '100000000000', '12.', '.5', '٣'].map((amount) => ({ amount })),
      ),
      ...on(
        'patch',
        '/payments/{id}',
        payment,
        [{ line_items: [{ name: 'A', quantity: 2, unit_price: '4.5' }] }, { line_items: [{ name: 'A', quantity: 1, unit_price: 0.0001 }] }, { line_items: [{ name: 'A', quantity: 1, unit_price: '99999999999.9999' }] }],
        [{ line_items: [{ name: 'A', quantity: 2, unit_price: '4.55555' }] }, { tax_total: -0.5 }],
      ),
      // Currencies: ISO 4217 codes.
      ...on('patch', '/memberships/{id}', membership, [{ currency: 'EUR' }, { currency: 'JPY' }], [{ currency: 'XYZ' }, { currency: 'usd1' }, { currency: 'US' }, { currency: 5 }]),
      // Host names.
      ...on(
        'patch',
        '/sites/{id}',
        site,
        [{ domain: host('example.com') }, { domain: host('Shop.Example.COM.') }, { domain: host('a.1-2') }, { domain: `${label63}.example.com` }, { domain: `${'a.'.repeat(125)}abc` }, { domain: host('xn--bcher-kva.ch') }],
        ['', 'localhost', '1.2.3.4', 'a_b.com', 'a.123', '-a.com', 'a-.com', `${'a'.repeat(64)}.com`, `${'a.'.repeat(126)}ab`, 'a..com', '[::1]', 'a:b.com', 'exämple.com'].map((domain) => ({ domain })),
      ),
      // Integers and reference ids: positive, within JavaScript's exact integers; 0 or null is none.
      ...on('patch', '/payments/{id}', payment, [{ membership_id: null }, { parent_id: 0 }, { line_items: [{ name: 'A', quantity: 1, unit_price: 1, product_id: 0 }] }], [{ parent_id: -3 }, { parent_id: 1.5 }, { parent_id: 9007199254740992 }, { product_id: '7' }]),
      ...on('patch', '/sites/{id}', site, [{ template_id: 0, customer_id: null }], [{ template_id: -1 }, { membership_id: '0' }]),
      ...on('patch', '/memberships/{id}', membership, [{ times_billed: 0, duration: 1000 }], [{ duration: 1001 }, { times_billed: 1_000_001 }, { addon_products: [{ product_id: 0, quantity: 1 }] }]),
      // Lengths in code points; names not blank; passwords at least 6.
      ...on('patch', '/products/{id}', product, [{ name: emoji(250) }, { name: '  padded  ' }, { description: emoji(65_535) }], [{ name: emoji(251) }, { name: '   ' }, { name: '\ufeff\u00a0' }, { name: '' }]),
      ...on('patch', '/customers/{id}', customer, [{ display_name: emoji(250) }, { password: 'sécrét' }], [{ display_name: emoji(251) }, { password: '12345' }]),
      // NUL anywhere (values, keys, nested), and unknown or read-only fields on update.
      ...on('patch', '/sites/{id}', site, [{ site_meta: { a: { b: ['c', 1, null, { d: true }] } } }], [{ site_meta: { a: { b: ['c\u0000'] } } }, { site_meta: { 'k\u0000': 1 } }, { title: 'a\u0000b' }]),
      ...on('patch', '/customers/{id}', customer, [{ vip: true }], [{ nope: 1 }, { date_created: '2026-01-01' }, { id: 5 }, { username: 'renamed' }]),
      ...on('patch', '/products/{id}', product, [{ active: true }], [{ model: 'product' }]),
      // Rules across fields that the schemas state.
      ...on(
        'post',
        '/customers',
        () => '/customers',
        [newCustomerBody(), { user_id: ids.freeUser }, newCustomerBody({ user_id: 0 }), newCustomerBody({ user_id: null, display_name: 'Zero' })],
        [{ username: 'loneuser' }, { ...newCustomerBody(), user_id: ids.otherUser }, { user_id: ids.otherUser, display_name: 'X' }, { user_id: 0 }, { ...newCustomerBody(), user_id: -1 }, { ...newCustomerBody(), user_id: '0' }],
      ),
      ...on('patch', '/customers/{id}', customer, [{ user_id: 0 }, { user_id: null }], [{ user_id: -1 }]),
      // (domain-mapping: no check workflow)
      ...on(
        'post',
        '/domains',
        () => '/domains',
        [{ domain: host('mapped.example.com'), primary_domain: true, blog_id: ids.site, stage: 'domain-mapping' }, { domain: host('mapped.example.com'), blog_id: 0, stage: 'domain-mapping' }],
        [{ domain: host('mapped.example.com'), primary_domain: true, stage: 'domain-mapping' }, { domain: host('mapped.example.com'), primary_domain: true, blog_id: 0, stage: 'domain-mapping' }],
      ),
      // Settings.
      ...on(
        'post',
        '/settings',
        () => '/settings',
        [{ network_name: 'Rules' }, { settings: { network_name: emoji(1000), custom_flag: { any: ['json'] } } }, { enable_api: '1' }, { settings: { enable_api: true }, ignored: 1 }],
        [{}, { settings: {} }, { 'Bad Key': 1 }, { enable_api: 'yes' }, { network_name: 5 }, { network_name: emoji(1001) }, { api_secret: 'x' }, { my_password: 'x' }, { settings: { stripe_sk_key: 'x' } }],
      ),
      ...on('post', '/settings/{key}', () => '/settings/custom_value', [{ value: null }, { value: { nested: [1, 'two'] } }], [{}, { other: 1 }, { value: 'a\u0000' }]),
      // /register (its valid bodies start a registration that no worker runs here).
      ...on(
        'post',
        '/register',
        () => '/register',
        [
          { customer_id: ids.customer, products: ['rules-plan'], discount_code: ' ' },
          { customer_id: ids.customer, customer: { user_id: 0 }, products: ['rules-plan'] },
          { customer_id: 0, customer: { user_id: null, username: 'rulesreg', email: 'rulesreg@example.com', password: 'secret123' }, products: ['rules-plan'], site: { site_url: 'rulesreg', site_title: 'Rules reg', template_id: 0 } },
        ],
        [
          { products: ['rules-plan'] },
          { customer_id: 0, products: ['rules-plan'] },
          { customer: { user_id: 0 }, products: ['rules-plan'] },
          { customer_id: -1, products: ['rules-plan'] },
          { customer_id: ids.customer, products: [] },
          { customer_id: ids.customer },
          { customer_id: ids.customer, products: ['rules-plan'], customer: { username: 'someone' } },
          { customer: { user_id: ids.otherUser, email: 'x@example.com' }, products: ['rules-plan'] },
          { customer: { username: 'someone', email: 'x@example.com' }, products: ['rules-plan'] },
          { customer_id: ids.customer, products: ['rules-plan'], discount_code: 'x'.repeat(101) },
          { customer_id: ids.customer, products: ['rules-plan', 'rules-plan'] },
          { customer_id: ids.customer, products: ['rules-plan'], site: { site_url: 'rulessite', site_title: '  ab  ' } },
        ],
      ),
      // Translations: pot or pot_url; http(s) URLs of host names; the template's placeholder; bulk approval's filters.
      ...on(
        'post',
        '/translations/projects',
        () => '/translations/projects',
        [
          { slug: 'rules-a', type: 'plugin', name: 'A', version: '1.0', pot: 'msgid "Hello"\nmsgstr ""\n' },
          { slug: 'rules-b', type: 'plugin', name: 'B', version: '1.0', pot_url: 'https://example.com/b.pot', glotpress_url_template: 'https://translate.example.com/{slug}/{glotpress_locale}/export?f=po' },
          { slug: 'rules-c', type: 'theme', name: 'C', version: '1.0', pot_url: 'HTTP://Example.COM:8080' },
        ],
        [
          { slug: 'rules-d', type: 'plugin', name: 'D', version: '1.0' },
          { slug: 'rules-d', type: 'plugin', name: 'D', version: '1.0', pot_url: 'ftp://example.com/d.pot' },
          { slug: 'rules-d', type: 'plugin', name: 'D', version: '1.0', pot_url: 'http://127.0.0.1/d.pot' },
          { slug: 'rules-d', type: 'plugin', name: 'D', version: '1.0', pot_url: 'http://LocalHost:80/d.pot' },
          { slug: 'rules-d', type: 'plugin', name: 'D', version: '1.0', pot_url: 'http://example.com:65536/d.pot' },
          { slug: 'rules-d', type: 'plugin', name: 'D', version: '1.0', pot_url: 'https://example.com/b.pot', glotpress_url_template: 'https://translate.example.com/export' },
          { slug: 'rules-d', type: 'plugin', name: '  ', version: '1.0', pot_url: 'https://example.com/b.pot' },
        ],
      ),
      ...on('post', '/translations/jobs/approve', () => '/translations/jobs/approve', [{ all: true }, { locale: 'de_DE', type: 'plugin' }], [{}, { all: true, locale: 'de_DE' }, { all: false }, { locale: 'xx_YY' }]),
      ...on('post', '/tenants/{site_id}/bootstrap', () => `/tenants/${ids.site}/bootstrap`, [], [{ database_host: '' }, { database_host: 'x'.repeat(101) }, { database_host: 5 }]),
      ...on('post', '/sites/{id}/users', () => `/sites/${ids.site}/users`, [{ user_id: ids.otherUser }, { user_id: ids.otherUser, role: 'author' }], [{}, { user_id: 0 }, { user_id: 'x' }, { user_id: ids.otherUser, role: 'owner' }]),
      // Form bodies: null spelled null, arrays by repetition or index, objects in brackets.
      ...on('patch', '/payments/{id}', payment, [{ membership_id: null, parent_id: null }, { line_items: { 0: { name: 'A', quantity: 1, unit_price: '2' }, 150: { name: 'B', quantity: 3, unit_price: '0.5' } } }], [{ membership_id: 'none' }, { line_items: { x: { name: 'A', quantity: 1, unit_price: '2' } } }], true),
      ...on('patch', '/customers/{id}', customer, [{ ips: ['10.0.0.1'] }, { ips: ['10.0.0.1', '::1'], billing_address: { city: 'Lyon', lines: { a: 'x' } }, last_login: null }], [{ ips: ['not-an-ip'] }, { billing_address: { 0: 'x' } }, { vip: 'maybe' }], true),
      ...on('post', '/settings/{key}', () => '/settings/custom_form', [{ value: 'text' }, { value: { a: 'b' } }], [{}], true),
    ];
    for (const c of cases) {
      const docValid = bodyVerdict(c);
      const res = await send(c);
      const l = label(c, c.body, res);
      expect([l, docValid, serverVerdict(res)]).toEqual([l, c.valid, c.valid]);
    }
  });

  test('query parameters and path parameters: list filters, dates, bounds, setting keys', async () => {
    const cases: { path: string; url: string; name: string; value: string | string[]; valid: boolean }[] = [];
    const q = (path: string, name: string, valid: (string | string[])[], invalid: (string | string[])[]) => {
      for (const value of valid) cases.push({ path, url: path, name, value, valid: true });
      for (const value of invalid) cases.push({ path, url: path, name, value, valid: false });
    };
    q('/customers', 'date_created[after]', ['2026-01-31', '2026-01-31T12:00:00Z', '2026-01-31 12:00', '2024-02-29T00:00+01:00'], ['2026-02-30', '2026-01-31T24:01', 'yesterday', '2026-1-1', '']);
    q('/customers', 'date_created_query[before]', ['2026-01-31T12:00:00.5Z'], ['31.01.2026']);
    q('/customers', 'user_id', ['999999999999999', '-999999999999999', '0'], ['1000000000000000', '1.5', 'x']);
    q('/customers', 'user_id__in', [['1', '2'], ['999999999999999']], [['1', 'x'], ['1000000000000000'], Array.from({ length: 101 }, (_, i) => String(i + 1))]);
    q('/customers', 'email__not_in', [['a@example.com', 'b']], [['a\u0000b']]);
    q('/customers', 'vip', ['true', 'false'], ['maybe']);
    q('/customers', 'search', [emoji(200)], [emoji(201), 'a\u0000b']);
    q('/customers', 'page', ['999999999999999'], ['1000000000000000', '0']);
    q('/payments', 'currency__in', [['EUR', 'usd']], [['']]);
    q('/translations/jobs', 'locale__in', [['de_DE', 'ja']], [['xx_YY']]);
    const typed = (schema: any, raw: string | string[]): unknown => {
      if (schema.type === 'array') return [raw].flat().map((v) => typed(schema.items, v));
      if (schema.type === 'integer') return /^-?\d+$/.test(raw as string) ? Number(raw) : raw;
      if (schema.type === 'boolean') return raw === 'true' ? true : raw === 'false' ? false : raw;
      return raw;
    };
    for (const c of cases) {
      const param = op('get', c.path).parameters.find((p: any) => p.name === c.name);
      const docValid = docVerdict(`get ${c.path} ${c.name}`, param.schema, typed(param.schema, c.value));
      const query = new URLSearchParams([c.value].flat().map((v) => [c.name, v] as [string, string])).toString();
      const res = await ctx.http.get(`${BASE}${c.url}?${query}`).set(auth());
      const l = label({ method: 'get', path: c.path }, { [c.name]: c.value }, res);
      expect([l, docValid, serverVerdict(res)]).toEqual([l, c.valid, c.valid]);
    }
    // Path parameters: setting keys (protected ones answer 403), package parts of a download.
    const key = op('get', '/settings/{key}').parameters.find((p: any) => p.name === 'key').schema;
    for (const [k, valid] of [['network_name', true], ['site_mode', true], ['Bad-Key', false], ['a.b', false], ['x'.repeat(101), false], ['api_secret', false], ['paypal_client_secret', false]] as const) {
      const res = await ctx.http.get(`${BASE}/settings/${encodeURIComponent(k)}`).set(auth());
      const l = label({ method: 'get', path: '/settings/{key}' }, k, res);
      expect([l, docValid(key, k), serverVerdict(res)]).toEqual([l, valid, valid]);
    }
    const zip = op('get', '/translations/packages/{type}/{slug}/{version}/{locale}.zip').parameters;
    for (const [parts, valid] of [[['plugin', 'rules-a', '1.0', 'de_DE'], true], [['widget', 'rules-a', '1.0', 'de_DE'], false], [['plugin', 'Rules', '1.0', 'de_DE'], false], [['plugin', 'rules-a', '1.0', 'xx_YY'], false]] as const) {
      const docValid = parts.every((v, i) => docVerdict(`zip ${i}`, zip[i].schema, v));
      const res = await ctx.http.get(`${BASE}/translations/packages/${parts.join('/')}.zip`);
      // A valid one names no pack here: 404, not a refusal.
      expect([parts.join('/'), docValid, res.status]).toEqual([parts.join('/'), valid, valid ? 404 : 400]);
    }
  });

  function docValid(schema: object, value: unknown): boolean {
    return docVerdict(JSON.stringify(schema), schema, value);
  }

  test('the date pattern and the server agree on what a date is (every accepted date parses)', () => {
    for (const d of ['0000-02-29', '2026-12-31T24:00:00.000000-23:59', '2026-01-31 00:00:00.1+0000', '9999-12-31T23:59:59.999999Z']) {
      expect([d, DATETIME_PATTERN.test(d)]).toEqual([d, true]);
      expect(Number.isNaN(new Date(d.replace(' ', 'T')).getTime())).toBe(false);
    }
  });

  test('rules the schemas cannot state are in the descriptions; the server refuses what the schema alone would allow', async () => {
    const cases = [
      { method: 'patch', path: '/memberships/{id}', url: `/memberships/${ids.membership}`, body: { addon_products: [{ product_id: ids.product, quantity: 1 }, { product_id: ids.product, quantity: 2 }] }, says: /each at most once/ },
      { method: 'patch', path: '/memberships/{id}', url: `/memberships/${ids.membership}`, body: { plan_id: 999_999 }, says: /plan_id \(a product\) must name existing records/ },
      { method: 'patch', path: '/payments/{id}', url: `/payments/${ids.payment}`, body: { parent_id: ids.payment }, says: /parent_id must not be the payment itself/ },
      { method: 'patch', path: '/products/{id}', url: `/products/${ids.product}`, body: { amount: 0.0001 }, says: /no more decimals than the currency's minor unit/ },
      { method: 'patch', path: '/payments/{id}', url: `/payments/${ids.payment}`, body: { total: '1.005' }, says: /no more decimals than the currency's minor unit/ },
      { method: 'post', path: '/products', url: '/products', body: { slug: 'rules-plan', name: 'Again' }, says: /slug is already used by another product/ },
      { method: 'post', path: '/customers', url: '/customers', body: { user_id: ids.user }, says: /a user that has no customer yet/ },
      { method: 'post', path: '/register', url: '/register', body: { customer_id: ids.customer, products: ['rules-plan'], discount_code: 'SAVE10' }, says: /discount_code \(any case; empty is none\) must be a discount code that is active/ },
      { method: 'post', path: '/discount-codes', url: '/discount-codes', body: { name: 'Pct', code: 'PCT', value: 101 }, says: /at most 100 when their type/ },
      { method: 'post', path: '/sites', url: '/sites', body: { title: 'T', domain: 'tpl.example.com', template_id: ids.site }, says: /template_id must be a site of type site_template/ },
      { method: 'post', path: '/translations/projects', url: '/translations/projects', body: { slug: 'rules-e', type: 'plugin', name: 'E', version: '1', pot: 'not gettext at all "' }, says: /must be gettext files that parse/ },
      { method: 'post', path: '/tenants/{site_id}/bootstrap', url: `/tenants/${ids.site}/bootstrap`, body: { database_host: 'nowhere' }, says: /configured tenant database host/ },
    ] as const;
    for (const c of cases) {
      const o = op(c.method, c.path);
      const docValid = docVerdict(`${c.method} ${c.path} application/json`, o.requestBody.content['application/json'].schema, c.body);
      const res = await (ctx.http as any)[c.method](`${BASE}${c.url}`).set(auth()).send(c.body);
      const l = label(c, c.body, res);
      expect([l, docValid, res.status]).toEqual([l, true, 400]);
      expect(JSON.stringify(o)).toMatch(c.says);
    }
    const range = op('get', '/customers').parameters.find((p: any) => p.name === 'date_created[after]');
    expect(range.description).toMatch(/must not be later than date_created\[before\]/);
    const inverted = await ctx.http.get(`${BASE}/customers?date_created[after]=2026-02-01&date_created[before]=2026-01-01`).set(auth());
    expect(inverted.status).toBe(400);
  });

  test('where the document is stricter on purpose, the server takes more (never the other way)', async () => {
    const cases = [
      { method: 'patch', path: '/memberships/{id}', url: `/memberships/${ids.membership}`, body: { currency: 'usd' } },
      { method: 'patch', path: '/sites/{id}', url: `/sites/${ids.site}`, body: { domain: ' padded.example.com ' } },
      { method: 'patch', path: '/products/{id}', url: `/products/${ids.product}`, body: { amount: ' 1.5 ' } },
      { method: 'get', path: '/customers', url: '/customers?email__in=a@example.com,b@example.com', body: undefined },
    ] as const;
    for (const c of cases) {
      // (A query: a comma inside a list item splits it, where the document wants items without commas.)
      const docValid =
        c.method === 'get'
          ? docVerdict('get /customers email__in', op('get', c.path).parameters.find((p: any) => p.name === 'email__in').schema, ['a@example.com,b@example.com'])
          : docVerdict(`${c.method} ${c.path} application/json`, op(c.method, c.path).requestBody.content['application/json'].schema, c.body);
      const res = await (ctx.http as any)[c.method](`${BASE}${c.url}`).set(auth()).send(c.body);
      const l = label(c, c.body ?? c.url, res);
      expect([l, docValid, res.status]).toEqual([l, false, 200]);
    }
  });

  test('every string of a request takes no NUL, and free-form values are JsonValue (NUL-free at any depth)', () => {
    const strings: any[] = [];
    const walk = (node: any, inNot = false) => {
      if (!node || typeof node !== 'object') return;
      if (Array.isArray(node)) return node.forEach((n) => walk(n, inNot));
      if (!inNot && (node.type === 'string' || (Array.isArray(node.type) && node.type.includes('string'))) && !node.enum && node.const === undefined) strings.push(node);
      for (const [k, v] of Object.entries(node)) walk(v, inNot || k === 'not');
    };
    for (const item of Object.values<any>(doc.paths)) {
      for (const o of Object.values<any>(item)) {
        walk(o.parameters);
        // (A multipart upload is read by its route, file and all: not here.)
        for (const [media, content] of Object.entries<any>(o.requestBody?.content ?? {})) if (media !== 'multipart/form-data') walk(content.schema);
      }
    }
    walk(doc.components.schemas.JsonValue);
    expect(strings.length).toBeGreaterThan(500);
    // A sample that only NUL keeps from free text: what the string's patterns say of it (lengths and formats set aside).
    const refusesNul = (s: any) => !ajv.validate({ type: 'string', pattern: s.pattern, allOf: s.allOf }, 'abcd\u0000efgh');
    expect(strings.filter((s) => !refusesNul(s)).map((s) => JSON.stringify(s).slice(0, 200))).toEqual([]);
    expect(docValid({ $ref: '#/components/schemas/JsonValue' }, { a: [{ b: { c: 'x\u0000' } }] })).toBe(false);
    expect(docValid({ $ref: '#/components/schemas/JsonValue' }, { a: [{ b: { 'c\u0000': 1 } }] })).toBe(false);
    expect(docValid({ $ref: '#/components/schemas/JsonValue' }, { a: [{ b: { c: 'x', d: [null, true, 1.5] } }] })).toBe(true);
  });
});

/** A form body as the document's form media type spells it: deepObject for objects, repetition for arrays, null as null. */
function formEncode(value: Record<string, unknown>, encoding: Record<string, { style?: string }>): string {
  const pairs: [string, string][] = [];
  const scalar = (v: unknown) => (v === null ? 'null' : String(v));
  const nested = (prefix: string, v: unknown) => {
    if (v !== null && typeof v === 'object') for (const [k, c] of Object.entries(v)) nested(`${prefix}[${k}]`, c);
    else pairs.push([prefix, scalar(v)]);
  };
  for (const [k, v] of Object.entries(value)) {
    if (Array.isArray(v)) for (const item of v) pairs.push([k, scalar(item)]);
    else if (v !== null && typeof v === 'object') {
      if (encoding[k]?.style !== 'deepObject') throw new Error(`the document gives ${k} no deepObject encoding`);
      nested(k, v);
    } else pairs.push([k, scalar(v)]);
  }
  return new URLSearchParams(pairs).toString();
}
