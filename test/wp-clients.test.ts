import http from 'node:http';
import type { AddressInfo } from 'node:net';
import apiFetch, { type APIFetchMiddleware } from '@wordpress/api-fetch';
import { answerClientError } from '../src/http/client-error';
// (wpapi, which has no types, is required below the types written for it: not an import to order.)
// eslint-disable-next-line import-x/order
import { API_KEY, API_SECRET, createTestContext, newCustomerBody, type TestContext } from './helpers';

/**
 * Issue 14: two WordPress REST clients that nobody here wrote, used unchanged against
 * /customers on a real HTTP server, through their own APIs (no request is built by hand):
 * node-wpapi 1.2.2 and WordPress core's @wordpress/api-fetch. The 13 calls are numbered in the
 * test names. Each client gets the API key and secret as its integrators give them: wpapi's
 * `.auth()`, an api-fetch middleware adding the Authorization header. Paging follows the URL
 * the server gives in `Link: rel="next"`, whatever it holds.
 */

// node-wpapi 1.2.2 ships no types: the part of its API this test drives.
interface WpapiRequest extends PromiseLike<any> {
  id(id: number): WpapiRequest;
  perPage(n: number): WpapiRequest;
  param(name: string, value: unknown): WpapiRequest;
  setHeaders(name: string, value: string): WpapiRequest;
  get(): Promise<any>;
  create(data: object): Promise<any>;
  update(data: object): Promise<any>;
  delete(): Promise<any>;
}
interface WpapiSite {
  _options: { endpoint: string };
  auth(credentials: { username: string; password: string }): WpapiSite;
  namespace(ns: string): Record<string, () => WpapiRequest>;
}
// eslint-disable-next-line @typescript-eslint/no-require-imports
const WPAPI: { discover(url: string): Promise<WpapiSite> } = require('wpapi');

describe('WordPress REST clients, unchanged, against /customers', () => {
  let ctx: TestContext;
  let server: http.Server;
  let siteRoot: string;
  /** What reached the server, as the clients sent it (before the app's method override). */
  let seen: { method: string; path: string; override?: string; authorization: boolean; contentType?: string }[] = [];
  const basic = `Basic ${Buffer.from(`${API_KEY}:${API_SECRET}`).toString('base64')}`;
  const sent = (path: RegExp) => seen.filter((r) => path.test(r.path));

  beforeAll(async () => {
    ctx = await createTestContext();
    server = http.createServer((req, res) => {
      seen.push({
        method: req.method!,
        path: req.url!,
        override: req.headers['x-http-method-override'] as string | undefined,
        authorization: req.headers.authorization === basic,
        contentType: req.headers['content-type'],
      });
      ctx.app(req, res);
    });
    // As src/runtime.ts serves it: unparseable requests (a URL over 16 KiB) get the JSON error shape.
    server.on('clientError', answerClientError);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    siteRoot = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  });
  afterAll(async () => {
    await new Promise<void>((r) => server?.close(() => r()));
    await ctx?.close();
  });
  beforeEach(() => {
    seen = [];
  });

  /** n customers through the API, with a signup_form of their own to page over. */
  const seed = async (n: number, signupForm: string) => {
    const ids: number[] = [];
    for (let i = 0; i < n; i++) {
      const res = await ctx.http.post('/wp-json/wu/v2/customers').set('Authorization', basic).send(newCustomerBody({ signup_form: signupForm }));
      expect(res.status).toBe(200);
      ids.push(res.body.id);
    }
    return ids.sort((a, b) => b - a);
  };

  describe('node-wpapi 1.2.2', () => {
    let site: WpapiSite;
    let wu: Record<string, () => WpapiRequest>;
    let created: any;
    let body: ReturnType<typeof newCustomerBody>;

    test('1. discovery from the site root: HEAD /, Link rel="https://api.w.org/", the index, a customers handler', async () => {
      const errors = jest.spyOn(console, 'error').mockImplementation(() => undefined);
      try {
        site = await WPAPI.discover(siteRoot);
        // On a failed discovery wpapi logs the error and falls back to the default (wp/v2) routes.
        expect(errors).not.toHaveBeenCalled();
      } finally {
        errors.mockRestore();
      }
      expect(site._options.endpoint).toBe(`${siteRoot}wp-json/`);
      expect(seen.map((r) => `${r.method} ${r.path}`)).toEqual(['HEAD /', 'GET /wp-json/']);
      site.auth({ username: API_KEY, password: API_SECRET });
      wu = site.namespace('wu/v2');
      expect(typeof wu.customers).toBe('function');
      expect(typeof wu.customer).toBe('function');
      expect(wu.customers().id(5).perPage(2).toString()).toBe(`${siteRoot}wp-json/wu/v2/customers/5?per_page=2`);
    });

    test('2. create with user_id 0 plus username, email and password, as an integration of the original sends it', async () => {
      body = newCustomerBody({ user_id: 0, vip: true });
      created = await wu.customers().create(body);
      expect(created).toMatchObject({ model: 'customer', username: body.username, email: body.email, vip: true });
      expect(created.id).toEqual(expect.any(Number));
      expect(created.user_id).toBeGreaterThan(0);
      const user = await ctx.db('users').where({ id: created.user_id }).first('username');
      expect(user.username).toBe(body.username);
      expect(sent(/customers/)).toEqual([expect.objectContaining({ method: 'POST', path: '/wp-json/wu/v2/customers', authorization: true })]);
    });

    test('3. get', async () => {
      const got = await wu.customers().id(created.id).get();
      expect(got).toEqual(created);
      expect(sent(/customers/)).toEqual([expect.objectContaining({ method: 'GET', path: `/wp-json/wu/v2/customers/${created.id}`, authorization: true })]);
    });

    test('4. update with PUT', async () => {
      const updated = await wu.customers().id(created.id).update({ extra_information: 'via wpapi PUT', email_verification: 'verified' });
      expect(updated).toMatchObject({ id: created.id, extra_information: 'via wpapi PUT', email_verification: 'verified', username: body.username });
      expect(sent(/customers/)).toEqual([expect.objectContaining({ method: 'PUT', path: `/wp-json/wu/v2/customers/${created.id}`, override: undefined })]);
      expect((await ctx.db('customers').where({ id: created.id }).first('extra_information')).extra_information).toBe('via wpapi PUT');
    });

    test('5. update with POST and X-HTTP-Method-Override: PATCH', async () => {
      const updated = await wu.customers().id(created.id).setHeaders('X-HTTP-Method-Override', 'PATCH').create({ vip: false });
      expect(updated).toMatchObject({ id: created.id, vip: false, extra_information: 'via wpapi PUT' });
      expect(sent(/customers/)).toEqual([expect.objectContaining({ method: 'POST', override: 'PATCH', path: `/wp-json/wu/v2/customers/${created.id}` })]);
    });

    test('6. paging: X-WP-Total and X-WP-TotalPages, then _paging.next (the Link header) to the last page', async () => {
      const ids = await seed(5, 'wpapi-paging');
      const pages: number[][] = [];
      let page = await wu.customers().param('signup_form', 'wpapi-paging').perPage(2).get();
      expect(page._paging).toMatchObject({ total: 5, totalPages: 3 });
      for (;;) {
        pages.push(page.map((c: any) => c.id));
        if (!page._paging.next) break;
        page = await page._paging.next.get();
      }
      expect(pages).toEqual([ids.slice(0, 2), ids.slice(2, 4), ids.slice(4)]);
      // Every next page was fetched from the URL the server gave, credentials included.
      const lists = sent(/customers\?/);
      expect(lists).toHaveLength(3);
      for (const r of lists) expect(r).toMatchObject({ method: 'GET', authorization: true });
    });

    test('7. delete', async () => {
      const deleted = await wu.customers().id(created.id).delete();
      expect(deleted).toBe(true);
      expect(sent(/customers/)).toEqual([expect.objectContaining({ method: 'DELETE', path: `/wp-json/wu/v2/customers/${created.id}` })]);
      expect(await ctx.db('customers').where({ id: created.id }).first()).toBeUndefined();
      // wpapi rejects with the error body, since it has a code.
      await expect(wu.customers().id(created.id).get()).rejects.toMatchObject({ code: 'wu_rest_customer_invalid_id', data: { status: 404 } });
    });

    test('hostile input through the client: user_id -1 is a 400 in the contract shape, nothing created', async () => {
      const before = Number((await ctx.db('customers').count({ n: '*' }))[0].n);
      await expect(wu.customers().create(newCustomerBody({ user_id: -1 }))).rejects.toMatchObject({
        code: 'wu_rest_invalid_parameter',
        message: expect.any(String),
        data: { status: 400, params: { user_id: 'user_id must be greater than or equal to 0.' } },
      });
      expect(Number((await ctx.db('customers').count({ n: '*' }))[0].n)).toBe(before);
    });
  });

  describe('@wordpress/api-fetch', () => {
    let restRoot: string;
    let created: any;
    let body: ReturnType<typeof newCustomerBody>;
    /** As integrators give it credentials: a middleware adding the Authorization header. */
    const basicAuth: APIFetchMiddleware = (options, next) => next({ ...options, headers: { ...options.headers, Authorization: basic } });

    test('8. discovery: the site root answers Link rel="https://api.w.org/"; the index there lists the customers routes', async () => {
      const root = await apiFetch<Response, false>({ url: siteRoot, parse: false });
      const link = /<([^>]+)>;\s*rel="https:\/\/api\.w\.org\/"/.exec(root.headers.get('link') ?? '');
      expect(link).not.toBeNull();
      restRoot = link![1];
      expect(restRoot).toBe(`${siteRoot}wp-json/`);
      apiFetch.use(apiFetch.createRootURLMiddleware(restRoot));
      apiFetch.use(basicAuth);
      const index = await apiFetch<any>({ path: '/' });
      expect(index.namespaces).toContain('wu/v2');
      expect(index.routes['/wu/v2/customers']).toMatchObject({ namespace: 'wu/v2', methods: expect.arrayContaining(['GET', 'POST']) });
      expect(index.routes['/wu/v2/customers/(?P<id>[\\d]+)'].methods).toEqual(expect.arrayContaining(['GET', 'PUT', 'PATCH', 'POST', 'DELETE']));
      // api-fetch appends _locale=user to every request; the server ignores it.
      expect(seen.map((r) => r.path)).toEqual(['/?_locale=user', '/wp-json/?_locale=user']);
    });

    test('9. create with user_id 0 plus username, email and password', async () => {
      body = newCustomerBody({ user_id: 0 });
      created = await apiFetch<any>({ path: '/wu/v2/customers', method: 'POST', data: body });
      expect(created).toMatchObject({ model: 'customer', username: body.username, email: body.email, vip: false });
      expect(created.user_id).toBeGreaterThan(0);
      expect(sent(/customers/)).toEqual([expect.objectContaining({ method: 'POST', path: '/wp-json/wu/v2/customers?_locale=user', authorization: true, contentType: 'application/json' })]);
    });

    test('10. get', async () => {
      expect(await apiFetch({ path: `/wu/v2/customers/${created.id}` })).toEqual(created);
    });

    test('11. update with PUT, which httpV1Middleware sends as POST with X-HTTP-Method-Override: PUT', async () => {
      const updated = await apiFetch<any>({ path: `/wu/v2/customers/${created.id}`, method: 'PUT', data: { vip: true, billing_address: { country: 'FR' } } });
      expect(updated).toMatchObject({ id: created.id, vip: true, billing_address: { country: 'FR' }, username: body.username });
      expect(sent(/customers/)).toEqual([expect.objectContaining({ method: 'POST', override: 'PUT', path: `/wp-json/wu/v2/customers/${created.id}?_locale=user` })]);
    });

    test('12. paging with parse: false: X-WP-Total, then the Link rel="next" URLs to the last page', async () => {
      const ids = await seed(5, 'api-fetch-paging');
      const pages: number[][] = [];
      let res = await apiFetch<Response, false>({ path: '/wu/v2/customers?signup_form=api-fetch-paging&per_page=2', parse: false });
      expect([res.headers.get('x-wp-total'), res.headers.get('x-wp-totalpages')]).toEqual(['5', '3']);
      for (;;) {
        pages.push(((await res.json()) as { id: number }[]).map((c) => c.id));
        const next = /<([^>]+)>;\s*rel="next"/.exec(res.headers.get('link') ?? '');
        if (!next) break;
        res = await apiFetch<Response, false>({ url: next[1], parse: false });
      }
      expect(pages).toEqual([ids.slice(0, 2), ids.slice(2, 4), ids.slice(4)]);
      expect(sent(/customers\?/)).toHaveLength(3);
    });

    test("13. delete, which httpV1Middleware sends as POST with X-HTTP-Method-Override: DELETE", async () => {
      expect(await apiFetch({ path: `/wu/v2/customers/${created.id}`, method: 'DELETE' })).toBe(true);
      expect(sent(/customers/)).toEqual([expect.objectContaining({ method: 'POST', override: 'DELETE', path: `/wp-json/wu/v2/customers/${created.id}?_locale=user` })]);
      expect(await ctx.db('customers').where({ id: created.id }).first()).toBeUndefined();
      // api-fetch rejects with the parsed error body.
      await expect(apiFetch({ path: `/wu/v2/customers/${created.id}` })).rejects.toMatchObject({ code: 'wu_rest_customer_invalid_id', data: { status: 404 } });
    });

    test("per_page=-1: api-fetch's own fetchAllMiddleware follows Link rel=\"next\" over pages of 100", async () => {
      const users = await ctx.db('users')
        .insert(Array.from({ length: 101 }, (_, i) => ({ username: `fetchall${i}`, email: `fetchall${i}@example.com`, password_hash: 'x', display_name: `All ${i}` })))
        .returning('id');
      await ctx.db('customers').insert(users.map((u: { id: number }) => ({ user_id: u.id, signup_form: 'fetch-all' })));
      const all = await apiFetch<{ id: number }[]>({ path: '/wu/v2/customers?signup_form=fetch-all&per_page=-1' });
      expect(all).toHaveLength(101);
      expect(new Set(all.map((c) => c.id)).size).toBe(101);
      expect(sent(/customers\?/)).toHaveLength(2);
    });

    test('the e-mail filter in any case, and hostile filter values, through the client', async () => {
      const c = await apiFetch<any>({ path: '/wu/v2/customers', method: 'POST', data: newCustomerBody({ user_id: null }) });
      expect((await apiFetch<any[]>({ path: `/wu/v2/customers?email=${encodeURIComponent(c.email.toUpperCase())}` })).map((x) => x.id)).toEqual([c.id]);
      await expect(apiFetch({ path: '/wu/v2/customers?email=a%00b' })).rejects.toMatchObject({ code: 'wu_rest_invalid_parameter', data: { status: 400, params: { email: expect.any(String) } } });
      // Over 16 KiB of URL: 431 in the error shape (put long inputs in a body).
      await expect(apiFetch({ path: `/wu/v2/customers?email=${'a'.repeat(20_000)}` })).rejects.toMatchObject({ code: 'rest_request_header_too_large', data: { status: 431 } });
    });
  });
});
