import { z } from 'zod';
import { money } from '../src/http/money';
import { coerceFormValues, fields } from '../src/http/validation';
import { CHAT, bearer, expectError, makeSession, uniqueEmail } from './chat-helpers';
import { BASE, createTestContext, newCustomerBody, type TestContext } from './helpers';

/**
 * The input rules every route shares (src/http/input.ts): strings PostgreSQL cannot store,
 * nesting and size, query parameter names, body types (form bodies accepted on wu/v2, 415 for
 * anything else). Each case is the bad input itself, and each checks that nothing changed.
 */
describe('request input', () => {
  let ctx: TestContext;
  let customerId: number;
  beforeAll(async () => {
    ctx = await createTestContext({ AUTH_FAILURE_LIMIT: '1000' });
    const c = await ctx.http.post(`${BASE}/customers`).set('Authorization', ctx.basic).send(newCustomerBody({ billing_address: { city: 'Lyon' } }));
    expect(c.status).toBe(200);
    customerId = c.body.id;
  });
  afterAll(() => ctx.close());

  const count = async (table: string) => Number((await ctx.db(table).count({ n: '*' }))[0].n);
  const rawJson = (method: 'post' | 'patch' | 'put', path: string, text: string) =>
    ctx.http[method](path).set('Authorization', ctx.basic).set('Content-Type', 'application/json').send(text);
  const nested = (depth: number, leaf = '"x"') => `${'{"a":'.repeat(depth)}${leaf}${'}'.repeat(depth)}`;

  describe('large bodies are parsed a few at a time (a bound on memory), and nothing waits forever', () => {
    const big = JSON.stringify({ slug: 'big-body', name: 'x'.repeat(200_000), amount: '1', type: 'plan' });
    test('many at once: every one answered', async () => {
      const answers = await Promise.all(Array.from({ length: 24 }, () => rawJson('post', `${BASE}/products`, big)));
      expect(answers.map((a) => a.status)).toEqual(Array(24).fill(400));
      expect(answers[0].body.data.params).toHaveProperty('name');
      expect(await count('products')).toBe(0);
    });
    test('callers that give up while they wait free their slot', async () => {
      // Aborted after 1 ms: most give up while waiting for a slot or mid-body. Had any kept a
      // slot, the requests after them would never be parsed (8 slots).
      await Promise.all(
        Array.from({ length: 20 }, () =>
          rawJson('post', `${BASE}/products`, big)
            .timeout(1)
            .then(
              () => undefined,
              () => undefined,
            ),
        ),
      );
      const answers = await Promise.all(Array.from({ length: 12 }, () => rawJson('post', `${BASE}/products`, big)));
      expect(answers.map((a) => a.status)).toEqual(Array(12).fill(400));
    });
  });

  describe('strings PostgreSQL cannot store: 400 naming the field, nothing written', () => {
    test('NUL in a query value (search) on a list route', async () => {
      const res = await ctx.http.get(`${BASE}/customers?search=a%00b`).set('Authorization', ctx.basic);
      expectError(res, 400, 'wu_rest_invalid_parameter');
      expect(Object.keys(res.body.data.params)).toEqual(['search']);
      expect(res.body.data.params.search).toMatch(/NUL/);
    });

    test('NUL in a text field of a created record', async () => {
      const before = await count('products');
      const res = await ctx.http.post(`${BASE}/products`).set('Authorization', ctx.basic).send({ slug: 'nulprod', name: 'x\u0000y' });
      expectError(res, 400, 'wu_rest_invalid_parameter');
      expect(res.body.data.params).toEqual({ name: 'name must not contain the NUL character (U+0000).' });
      expect(await count('products')).toBe(before);
    });

    test('NUL inside free-form JSON (billing_address), as a value and as a key, at any depth', async () => {
      const value = await ctx.http.patch(`${BASE}/customers/${customerId}`).set('Authorization', ctx.basic).send({ billing_address: { k: '\u0000' } });
      expectError(value, 400, 'wu_rest_invalid_parameter');
      expect(Object.keys(value.body.data.params)).toEqual(['billing_address.k']);
      const key = await ctx.http.patch(`${BASE}/customers/${customerId}`).set('Authorization', ctx.basic).send({ billing_address: { deep: [{ 'a\u0000b': 1 }] } });
      expectError(key, 400, 'wu_rest_invalid_parameter');
      expect(key.body.data.params).toEqual({ 'billing_address.deep.0.a\\u0000b': 'billing_address.deep.0.a\\u0000b is a key holding the NUL character (U+0000).' });
      const row = await ctx.db('customers').where({ id: customerId }).first('billing_address');
      expect(row.billing_address).toEqual({ city: 'Lyon' });
    });

    test('an unpaired UTF-16 surrogate is refused, not silently turned into U+FFFD; a valid pair (emoji) is kept', async () => {
      const before = await count('products');
      const lone = await rawJson('post', `${BASE}/products`, '{"slug":"surrogate","name":"a\\ud800b"}');
      expectError(lone, 400, 'wu_rest_invalid_parameter');
      expect(lone.body.data.params.name).toMatch(/unpaired UTF-16 surrogate/);
      const lowOnly = await rawJson('post', `${BASE}/products`, '{"slug":"surrogate","name":"\\udc00"}');
      expectError(lowOnly, 400, 'wu_rest_invalid_parameter');
      expect(await count('products')).toBe(before);
      const emoji = await rawJson('post', `${BASE}/products`, '{"slug":"emoji","name":"\\ud83d\\ude00 plan"}');
      expect(emoji.status).toBe(200);
      expect(emoji.body.name).toBe('😀 plan');
    });

    test('every offending field at once', async () => {
      const res = await ctx.http.post(`${BASE}/products`).set('Authorization', ctx.basic).send({ slug: 'many', name: 'a\u0000', description: 'b\u0000' });
      expect(Object.keys(res.body.data.params).sort()).toEqual(['description', 'name']);
    });

    test('the support chat namespace too: an admin creating an agent, a customer posting a message', async () => {
      const agents = await count('chat_agents');
      const agent = await ctx.http.post(`${CHAT}/chat/agent/agents`).set('Authorization', ctx.basic).send({ name: 'a\u0000b', email: uniqueEmail() });
      expectError(agent, 400, 'wu_rest_invalid_parameter');
      expect(Object.keys(agent.body.data.params)).toEqual(['name']);
      expect(await count('chat_agents')).toBe(agents);
      const s = await makeSession(ctx);
      const messages = await count('chat_messages');
      const msg = await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/messages`).set(bearer(s.token)).send({ body: 'hi\u0000' });
      expectError(msg, 400, 'wu_rest_invalid_parameter');
      expect(Object.keys(msg.body.data.params)).toEqual(['body']);
      const query = await ctx.http.get(`${CHAT}/chat/agent/canned-replies?search=x%00`).set('Authorization', ctx.basic);
      expectError(query, 400, 'wu_rest_invalid_parameter');
      expect(Object.keys(query.body.data.params)).toEqual(['search']);
      expect(await count('chat_messages')).toBe(messages);
    });

    test('after authentication: an anonymous caller gets 401, not a word about its input', async () => {
      expectError(await ctx.http.post(`${BASE}/products`).send({ slug: 'nulprod', name: 'x\u0000y' }), 401, 'rest_forbidden');
      expectError(await ctx.http.get(`${BASE}/customers?search=a%00b`), 401, 'rest_forbidden');
      expectError(await ctx.http.post(`${CHAT}/chat/agent/agents`).send({ name: 'a\u0000b', email: uniqueEmail() }), 401, 'rest_forbidden');
    });
  });

  describe('nesting and size', () => {
    test.each([
      ['PATCH /customers/{id}', 'billing_address', (n: string) => `{"billing_address":${n}}`],
      ['PATCH /customers/{id}', 'notes', (n: string) => `{"notes":[${n}]}`],
      ['POST /sites', 'site_meta', (n: string) => `{"title":"Deep","domain":"deep.example.com","site_meta":${n}}`],
    ])('%s with %s nested 5000 deep: 400 naming the field, not a stack overflow', async (route, field, body) => {
      const sites = await count('sites');
      const [method, path] = route.split(' ');
      const res = await rawJson(method === 'PATCH' ? 'patch' : 'post', `${BASE}${path.replace('{id}', String(customerId))}`, body(nested(5000)));
      expectError(res, 400, 'wu_rest_invalid_parameter');
      expect(res.body.data.params).toEqual({ [field]: `${field} is nested more than 32 levels deep.` });
      expect(await count('sites')).toBe(sites);
    });

    test('32 levels are accepted, 33 are not', async () => {
      // The body is level 1; billing_address and the 30 objects inside it make 32.
      const ok = await rawJson('patch', `${BASE}/customers/${customerId}`, `{"billing_address":${nested(31)}}`);
      expect(ok.status).toBe(200);
      const tooDeep = await rawJson('patch', `${BASE}/customers/${customerId}`, `{"billing_address":${nested(32)}}`);
      expectError(tooDeep, 400, 'wu_rest_invalid_parameter');
      await ctx.db('customers').where({ id: customerId }).update({ billing_address: { city: 'Lyon' } });
    });

    test('more than 10000 values in a body: 400 naming the field', async () => {
      const res = await rawJson('patch', `${BASE}/customers/${customerId}`, `{"notes":[${Array(10_001).fill('0').join(',')}]}`);
      expectError(res, 400, 'wu_rest_invalid_parameter');
      expect(res.body.data.params.notes).toMatch(/at most 10000/);
    });
  });

  describe('query parameter names', () => {
    test.each([
      ['%0A=1', '\\u000a'],
      ['a%0Db=1', 'a\\u000db'],
      ['%00=1', '\\u0000'],
      ['=x', ''],
    ])('?%s on a route that is not a list is 400 naming it', async (query, name) => {
      const res = await ctx.http.get(`${BASE}/customers/${customerId}?${query}`).set('Authorization', ctx.basic);
      expectError(res, 400, 'wu_rest_invalid_parameter');
      expect(Object.keys(res.body.data.params)).toEqual([name]);
    });
  });

  describe('form-encoded bodies (wu/v2), as WordPress accepts them', () => {
    const form = (method: 'post' | 'put' | 'patch', path: string, body: string) =>
      ctx.http[method](path).set('Authorization', ctx.basic).set('Content-Type', 'application/x-www-form-urlencoded').send(body);

    test('create and update a product: strings become the integers, amounts and booleans the schema expects', async () => {
      const created = await form('post', `${BASE}/products`, 'slug=form-x&name=Form&duration=3&active=false&amount=9.5&type=plan');
      expect(created.status).toBe(200);
      expect(created.body).toMatchObject({ slug: 'form-x', name: 'Form', duration: 3, active: false, amount: 9.5, type: 'plan' });
      const updated = await form('put', `${BASE}/products/${created.body.id}`, 'name=Form+renamed&duration=12&recurring=true');
      expect(updated.status).toBe(200);
      expect(updated.body).toMatchObject({ name: 'Form renamed', duration: 12, recurring: true, active: false });
      const row = await ctx.db('products').where({ id: created.body.id }).first('duration', 'recurring');
      expect(row).toMatchObject({ duration: 12, recurring: true });
    });

    test('bracketed keys fill nested fields; api_key/api_secret in a form body authenticate and are stripped', async () => {
      const res = await ctx.http
        .patch(`${BASE}/customers/${customerId}`)
        .set('Content-Type', 'application/x-www-form-urlencoded')
        .send(`api_key=${encodeURIComponent('hf_test_key_0123456789abcdef')}&api_secret=${encodeURIComponent('test-secret-0123456789-abcdefghij')}&billing_address[city]=Paris&billing_address[zip]=75001&vip=1`);
      expect(res.status).toBe(200);
      expect(res.body.billing_address).toEqual({ city: 'Paris', zip: '75001' });
      expect(res.body.vip).toBe(true);
      await ctx.db('customers').where({ id: customerId }).update({ billing_address: { city: 'Lyon' }, vip: false });
    });

    test('a form value the schema cannot take is 400 naming it; NUL in a form value too', async () => {
      const before = await count('products');
      const bad = await form('post', `${BASE}/products`, 'slug=form-bad&name=Bad&duration=three');
      expectError(bad, 400, 'wu_rest_invalid_parameter');
      expect(bad.body.data.params).toEqual({ duration: 'duration is not of type integer.' });
      const nul = await form('post', `${BASE}/products`, 'slug=form-nul&name=x%00y');
      expectError(nul, 400, 'wu_rest_invalid_parameter');
      expect(Object.keys(nul.body.data.params)).toEqual(['name']);
      expect(await count('products')).toBe(before);
    });

    test('the coercion follows the schema: numbers, booleans, literals, null for an empty nullable non-string, strings left where a string is taken', () => {
      const schema = z.strictObject({
        n: z.number(),
        i: fields.int().optional(),
        b: z.boolean(),
        flag: fields.flag(),
        lit: z.literal(2),
        maybe: fields.int().nullable(),
        text: z.string().nullable(),
        amount: money(),
        ids: z.array(fields.int()),
        nested: z.object({ on: z.boolean().default(false) }),
        counts: z.record(z.string(), z.number()),
      });
      const form = { n: '1.5', i: '-3', b: 'FALSE', flag: '1', lit: '2', maybe: '', text: '', amount: '007', ids: ['1', '2'], nested: { on: 'true' }, counts: { a: '4' } };
      expect(coerceFormValues(schema, form)).toEqual({ n: 1.5, i: -3, b: false, flag: true, lit: 2, maybe: null, text: '', amount: '007', ids: [1, 2], nested: { on: true }, counts: { a: 4 } });
      expect(coerceFormValues(schema, { n: 'x', b: 'yes', i: '1e400x' })).toEqual({ n: 'x', b: 'yes', i: '1e400x' });
    });

    test('the register body too (validated outside parseOrThrow): a form duration is an integer', async () => {
      const body = 'customer[username]=formuser&customer[password]=secret123&customer[email]=formuser%40example.com&products[]=no-such-plan&duration=2&auto_renew=true';
      const res = await form('post', `${BASE}/register`, body);
      expectError(res, 400, 'wu_rest_invalid_parameter');
      expect(res.body.data.params).toEqual({ products: 'products: no-such-plan does not match any product.' });
      const notInt = await form('post', `${BASE}/register`, body.replace('duration=2', 'duration=two'));
      expect(notInt.body.data.params.duration).toBe('duration is not of type integer.');
    });

    test('bounds: more than 1000 parameters is 413, keys nested more than 32 levels is 400', async () => {
      const many = await form('post', `${BASE}/products`, Array.from({ length: 1001 }, (_, i) => `p${i}=1`).join('&'));
      expectError(many, 413, 'rest_request_too_large');
      const deep = await form('post', `${BASE}/products`, `slug=deep&name=Deep&x${'[a]'.repeat(33)}=1`);
      expectError(deep, 400, 'wu_rest_invalid_parameter');
      expect(Object.keys(deep.body.data.params)).toEqual(['body']);
    });
  });

  describe('other body types: 415, never silently dropped', () => {
    test.each([
      ['text/plain', 'slug=t&name=T', /this one is text\/plain/],
      ['multipart/form-data; boundary=x', '--x\r\nContent-Disposition: form-data; name="slug"\r\n\r\nm\r\n--x--\r\n', /this one is multipart\/form-data/],
      ['application/xml', '<product/>', /this one is application\/xml/],
    ])('wu/v2 %s: 415 rest_unsupported_media_type, nothing written', async (type, body, message) => {
      const before = await count('products');
      const res = await ctx.http.post(`${BASE}/products`).set('Authorization', ctx.basic).set('Content-Type', type).send(body);
      expectError(res, 415, 'rest_unsupported_media_type');
      expect(res.body.message).toMatch(message);
      expect(res.body.data.accepted).toEqual(['application/json', 'application/x-www-form-urlencoded']);
      expect(await count('products')).toBe(before);
    });

    test('a body without a Content-Type is 415 too', async () => {
      const res = await ctx.http.post(`${BASE}/products`).set('Authorization', ctx.basic).set('Content-Type', '').send(Buffer.from('{"slug":"x","name":"X"}'));
      expectError(res, 415, 'rest_unsupported_media_type');
      expect(res.body.message).toMatch(/no Content-Type/);
    });

    test('the chat takes JSON only: a form body is 415 (after its caller is known)', async () => {
      const agents = await count('chat_agents');
      const res = await ctx.http.post(`${CHAT}/chat/agent/agents`).set('Authorization', ctx.basic).set('Content-Type', 'application/x-www-form-urlencoded').send(`name=Form&email=${uniqueEmail()}`);
      expectError(res, 415, 'rest_unsupported_media_type');
      expect(res.body.data.accepted).toEqual(['application/json']);
      expect(await count('chat_agents')).toBe(agents);
      expectError(await ctx.http.post(`${CHAT}/chat/agent/agents`).set('Content-Type', 'text/plain').send('x'), 401, 'rest_forbidden');
    });

    test('an empty body with any Content-Type is no body', async () => {
      const res = await ctx.http.get(`${BASE}/customers/${customerId}`).set('Authorization', ctx.basic).set('Content-Type', 'text/plain');
      expect(res.status).toBe(200);
    });
  });
});
