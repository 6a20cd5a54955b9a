import express from 'express';
import request from 'supertest';
import { errorHandler } from '../src/http/errors';
import { BASE, createTestContext, newCustomerBody, type TestContext } from './helpers';

describe('error model', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext({ BODY_LIMIT: '2kb' });
  });
  afterAll(() => ctx.close());

  const expectShape = (body: any, status: number, code: string) => {
    expect(body.code).toBe(code);
    expect(typeof body.message).toBe('string');
    expect(body.data.status).toBe(status);
  };

  test('unknown route: 404 rest_no_route (inside and outside the namespace)', async () => {
    const inside = await ctx.http.get(`${BASE}/nothing-here`).set('Authorization', ctx.basic);
    expect(inside.status).toBe(404);
    expectShape(inside.body, 404, 'rest_no_route');
    const outside = await ctx.http.get('/wp-json/other/v1/thing');
    expect(outside.status).toBe(404);
    expectShape(outside.body, 404, 'rest_no_route');
  });

  test('unknown method on a known path: 404 rest_no_route', async () => {
    const res = await ctx.http.delete(`${BASE}/customers`).set('Authorization', ctx.basic);
    expect(res.status).toBe(404);
    expectShape(res.body, 404, 'rest_no_route');
  });

  test('non-numeric id: rest_no_route; unknown id: wu_rest_customer_invalid_id "Item not found."', async () => {
    const nonNumeric = await ctx.http.get(`${BASE}/customers/abc`).set('Authorization', ctx.basic);
    expect(nonNumeric.status).toBe(404);
    expect(nonNumeric.body.code).toBe('rest_no_route');
    for (const method of ['get', 'put', 'patch', 'post', 'delete'] as const) {
      const res = await ctx.http[method](`${BASE}/customers/999999`).set('Authorization', ctx.basic).send({ vip: true });
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ code: 'wu_rest_customer_invalid_id', message: 'Item not found.', data: { status: 404 } });
    }
  });

  test('malformed JSON: 400 rest_invalid_json', async () => {
    const res = await ctx.http.post(`${BASE}/customers`).set('Authorization', ctx.basic).set('Content-Type', 'application/json').send('{"username":');
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ code: 'rest_invalid_json', message: 'Invalid JSON body passed.', data: { status: 400 } });
  });

  test('a JSON body that is not an object is refused', async () => {
    const res = await ctx.http.post(`${BASE}/customers`).set('Authorization', ctx.basic).set('Content-Type', 'application/json').send('[1,2]');
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('rest_invalid_json');
  });

  test('body over the limit: 413 and nothing is written', async () => {
    const res = await ctx.http
      .post(`${BASE}/customers`)
      .set('Authorization', ctx.basic)
      .send(newCustomerBody({ extra_information: 'x'.repeat(5000) }));
    expect(res.status).toBe(413);
    expectShape(res.body, 413, 'rest_request_too_large');
    expect((await ctx.db('customers').count({ n: '*' }))[0].n).toBe(0);
  });

  test('invalid parameters: every offending parameter in data.params', async () => {
    const res = await ctx.http
      .post(`${BASE}/customers`)
      .set('Authorization', ctx.basic)
      .send({ username: 'ab', email: 'not-an-email', password: '1', vip: 'maybe', email_verification: 'sure' });
    expect(res.status).toBe(400);
    expectShape(res.body, 400, 'wu_rest_invalid_parameter');
    expect(Object.keys(res.body.data.params).sort()).toEqual(['email', 'email_verification', 'password', 'username', 'vip']);
    expect(res.body.data.params.email_verification).toBe('email_verification is not one of none, pending, and verified.');
    expect(res.body.data.params.vip).toBe('vip is not of type boolean.');
  });

  test('unexpected failure: 500 with a generic message and the request id, no stack or SQL', async () => {
    await ctx.db.raw('ALTER TABLE customers RENAME TO customers_gone');
    try {
      const res = await ctx.http.get(`${BASE}/customers`).set('Authorization', ctx.basic).set('X-Request-Id', 'req-test-500');
      expect(res.status).toBe(500);
      expect(res.body.code).toBe('internal_error');
      expect(res.body.data).toEqual({ status: 500, request_id: 'req-test-500' });
      expect(res.headers['x-request-id']).toBe('req-test-500');
      expect(JSON.stringify(res.body)).not.toMatch(/select|customers_gone|relation|at .*\.ts/i);
    } finally {
      await ctx.db.raw('ALTER TABLE customers_gone RENAME TO customers');
    }
  });

  test('a generated request id is returned when none is sent, and an unsafe one is replaced', async () => {
    const res = await ctx.http.get('/healthz');
    expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    const unsafe = await ctx.http.get('/healthz').set('X-Request-Id', 'bad id with spaces');
    expect(unsafe.headers['x-request-id']).not.toBe('bad id with spaces');
  });

  test('X-HTTP-Method-Override and _method turn a POST into PUT/DELETE (WordPress clients)', async () => {
    const created = await ctx.http.post(`${BASE}/customers`).set('Authorization', ctx.basic).send(newCustomerBody());
    expect(created.status).toBe(200);
    const id = created.body.id;
    const put = await ctx.http
      .post(`${BASE}/customers/${id}`)
      .set('Authorization', ctx.basic)
      .set('X-HTTP-Method-Override', 'PUT')
      .send({ vip: true });
    expect(put.status).toBe(200);
    expect(put.body.vip).toBe(true);
    // `_method` only on a request declaring a JSON body (a form from another site cannot).
    const form = await ctx.http
      .post(`${BASE}/customers/${id}?_method=DELETE`)
      .set('Authorization', ctx.basic)
      .set('Content-Type', 'application/x-www-form-urlencoded')
      .send('');
    expect(form.status).toBe(200);
    expect(form.body.id).toBe(id);
    const bare = await ctx.http.post(`${BASE}/customers/${id}?_method=DELETE`).set('Authorization', ctx.basic);
    expect(bare.body.id).toBe(id);
    const del = await ctx.http.post(`${BASE}/customers/${id}?_method=DELETE&_locale=user`).set('Authorization', ctx.basic).set('Content-Type', 'application/json');
    expect(del.status).toBe(200);
    expect(del.body).toBe(true);
    expect((await ctx.http.get(`${BASE}/customers/${id}`).set('Authorization', ctx.basic)).status).toBe(404);
  });

  test('safety net: PostgreSQL refusing a NUL (22021 in text, 22P05 in jsonb) is a 400, not a 500', async () => {
    const app = express();
    app.get('/text', async () => {
      await ctx.db.raw('select ?::text as t', ['a\u0000b']);
    });
    app.get('/jsonb', async () => {
      await ctx.db.raw('select ?::jsonb as j', ['{"k":"\\u0000"}']);
    });
    app.use(errorHandler);
    for (const path of ['/text', '/jsonb']) {
      const res = await request(app).get(path);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('wu_rest_invalid_parameter');
      expect(res.body.data.params.request).toMatch(/NUL/);
    }
  });
});
