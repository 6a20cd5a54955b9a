import request from 'supertest';
import { createApp } from '../src/app';
import { Metrics } from '../src/http/metrics';
import { makeCustomer } from './estate-helpers';
import { BASE, createTestContext, type TestContext } from './helpers';

describe('Idempotency-Key on wu/v2 writes', () => {
  let ctx: TestContext;
  const auth = () => ({ Authorization: ctx.basic });
  let n = 0;
  const tag = `idem${process.pid}`;
  const key = () => `${tag}-${++n}`;
  const product = (extra: Record<string, unknown> = {}) => ({ slug: `${tag}-plan-${++n}`, name: `Plan ${n}`, amount: '29.99', ...extra });
  const count = async (table: string, where: Record<string, unknown> = {}) => Number((await ctx.db(table).where(where).count({ n: '*' }))[0].n);
  const keyRows = () => count('idempotency_keys');

  beforeAll(async () => {
    ctx = await createTestContext();
  });
  afterAll(() => ctx.close());

  test('the same key and body: the first answer again, run once, marked as replayed', async () => {
    const k = key();
    const body = product();
    const first = await ctx.http.post(`${BASE}/products`).set(auth()).set('Idempotency-Key', k).send(body);
    expect(first.status).toBe(200);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    const again = await ctx.http.post(`${BASE}/products`).set(auth()).set('Idempotency-Key', k).send({ ...body });
    expect(again.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toEqual(first.body);
    expect(again.headers['content-type']).toBe(first.headers['content-type']);
    expect(again.headers['x-request-id']).not.toBe(first.headers['x-request-id']);
    expect(await count('products', { slug: body.slug })).toBe(1);
    // Keys in another order, and the method override form of the same request, are the same request.
    const reordered = Object.fromEntries(Object.entries(body).reverse());
    const third = await ctx.http.post(`${BASE}/products`).set(auth()).set('Idempotency-Key', k).send(reordered);
    expect(third.headers['idempotent-replayed']).toBe('true');
  });

  test('two payments with one key (the issue): one payment, one invoice number', async () => {
    const customerId = await makeCustomer(ctx);
    const k = key();
    const body = { customer_id: customerId, total: '44.00', status: 'completed', gateway: 'stripe', gateway_payment_id: `pi_${k}` };
    const answers = await Promise.all(Array.from({ length: 8 }, () => ctx.http.post(`${BASE}/payments`).set(auth()).set('Idempotency-Key', k).send(body)));
    expect(answers.map((a) => a.status)).toEqual(Array(8).fill(answers[0].status));
    expect(answers[0].status).toBe(200);
    expect(new Set(answers.map((a) => a.body.id)).size).toBe(1);
    expect(answers.filter((a) => a.headers['idempotent-replayed'] === 'true')).toHaveLength(7);
    expect(await count('payments', { gateway_payment_id: `pi_${k}` })).toBe(1);
  });

  test('the same key with another body, path or method: 409 wu_rest_idempotency_key_reused, nothing done', async () => {
    const k = key();
    const body = product();
    expect((await ctx.http.post(`${BASE}/products`).set(auth()).set('Idempotency-Key', k).send(body)).status).toBe(200);
    const before = await count('products');
    const other = await ctx.http.post(`${BASE}/products`).set(auth()).set('Idempotency-Key', k).send({ ...body, name: 'Other' });
    expect(other.status).toBe(409);
    expect(other.body).toMatchObject({ code: 'wu_rest_idempotency_key_reused', data: { status: 409 } });
    expect(other.body.message).toMatch(/POST \/wp-json\/wu\/v2\/products/);
    const otherPath = await ctx.http.post(`${BASE}/customers`).set(auth()).set('Idempotency-Key', k).send(body);
    expect(otherPath.body.code).toBe('wu_rest_idempotency_key_reused');
    expect(await count('products')).toBe(before);
  });

  test('PATCH and DELETE: a retried delete answers the deleted record again, not 404', async () => {
    const created = (await ctx.http.post(`${BASE}/products`).set(auth()).send(product())).body;
    const k = key();
    const patch = await ctx.http.patch(`${BASE}/products/${created.id}`).set(auth()).set('Idempotency-Key', k).send({ name: 'Renamed once' });
    expect(patch.status).toBe(200);
    await ctx.db('products').where({ id: created.id }).update({ name: 'Changed since' });
    const patchAgain = await ctx.http.patch(`${BASE}/products/${created.id}`).set(auth()).set('Idempotency-Key', k).send({ name: 'Renamed once' });
    expect(patchAgain.body.name).toBe('Renamed once');
    expect((await ctx.db('products').where({ id: created.id }).first()).name).toBe('Changed since');
    const d = key();
    const del = await ctx.http.delete(`${BASE}/products/${created.id}`).set(auth()).set('Idempotency-Key', d);
    expect(del.status).toBe(200);
    const delAgain = await ctx.http.delete(`${BASE}/products/${created.id}`).set(auth()).set('Idempotency-Key', d);
    expect(delAgain.status).toBe(200);
    expect(delAgain.headers['idempotent-replayed']).toBe('true');
    expect(delAgain.body).toEqual(del.body);
    expect((await ctx.http.delete(`${BASE}/products/${created.id}`).set(auth())).status).toBe(404);
  });

  test('a 4xx is the final answer of its key; a 5xx is not kept, so the same key runs again', async () => {
    const k = key();
    const bad = { ...product(), amount: 'lots' };
    const first = await ctx.http.post(`${BASE}/products`).set(auth()).set('Idempotency-Key', k).send(bad);
    expect(first.status).toBe(400);
    const again = await ctx.http.post(`${BASE}/products`).set(auth()).set('Idempotency-Key', k).send(bad);
    expect(again.status).toBe(400);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toEqual(first.body);

    // Without Temporal a checked domain is a 503: the key is forgotten, and the retry runs.
    const noTemporal = createApp({ config: ctx.config, db: ctx.db, settings: ctx.settings, temporal: null, metrics: new Metrics() });
    const m = key();
    const domain = { domain: `${m}.example.com`, stage: 'domain-mapping' };
    const unavailable = await request(noTemporal).post(`${BASE}/domains`).set(auth()).set('Idempotency-Key', m).send({ domain: domain.domain });
    expect(unavailable.status).toBe(503);
    expect(await count('idempotency_keys', { path: `${BASE}/domains` })).toBe(0);
    const retried = await ctx.http.post(`${BASE}/domains`).set(auth()).set('Idempotency-Key', m).send({ domain: domain.domain });
    expect(retried.status).toBe(200);
    expect(retried.headers['idempotent-replayed']).toBeUndefined();
  });

  test('a key whose first request was interrupted: 409, never run twice; an expired key starts afresh', async () => {
    const k = key();
    const body = product();
    await ctx.http.post(`${BASE}/products`).set(auth()).set('Idempotency-Key', k).send(body);
    // As if its process had stopped between the write and keeping the answer.
    await ctx.db('idempotency_keys').where({ path: `${BASE}/products` }).orderBy('created_at', 'desc').limit(1).update({ state: 'running', locked_until: ctx.db.raw("now() - interval '1 second'"), status: null, body: null });
    const interrupted = await ctx.http.post(`${BASE}/products`).set(auth()).set('Idempotency-Key', k).send(body);
    expect(interrupted.status).toBe(409);
    expect(interrupted.body.code).toBe('wu_rest_idempotency_key_interrupted');
    expect(await count('products', { slug: body.slug })).toBe(1);

    const e = key();
    const first = await ctx.http.post(`${BASE}/products`).set(auth()).set('Idempotency-Key', e).send(product());
    await ctx.db('idempotency_keys').whereRaw('created_at > now() - interval \'1 minute\'').where({ state: 'done' }).update({ expires_at: ctx.db.raw("now() - interval '1 second'") });
    const fresh = product();
    const reused = await ctx.http.post(`${BASE}/products`).set(auth()).set('Idempotency-Key', e).send(fresh);
    expect(reused.status).toBe(200);
    expect(reused.headers['idempotent-replayed']).toBeUndefined();
    expect(reused.body.id).not.toBe(first.body.id);
  });

  test('a duplicate while the first still runs waits for its answer', async () => {
    const k = key();
    const body = product();
    // Hold the first request's insert behind a lock on the products table for a while.
    const trx = await ctx.db.transaction();
    await trx.raw('LOCK TABLE products IN SHARE ROW EXCLUSIVE MODE');
    const first = ctx.http.post(`${BASE}/products`).set(auth()).set('Idempotency-Key', k).send(body).then((r) => r);
    await new Promise((r) => setTimeout(r, 300));
    const second = ctx.http.post(`${BASE}/products`).set(auth()).set('Idempotency-Key', k).send(body).then((r) => r);
    await new Promise((r) => setTimeout(r, 500));
    await trx.commit();
    const [a, b] = await Promise.all([first, second]);
    expect(a.status).toBe(200);
    expect(b.status).toBe(200);
    expect(b.body.id).toBe(a.body.id);
    expect(b.headers['idempotent-replayed']).toBe('true');
  });

  test('hostile keys are a 400 naming Idempotency-Key, and change nothing', async () => {
    const before = await count('products');
    const keysBefore = await keyRows();
    for (const bad of ['x'.repeat(256), 'with space', 'ünïcødé', '\t']) {
      const res = await ctx.http.post(`${BASE}/products`).set(auth()).set('Idempotency-Key', bad).send(product());
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ code: 'wu_rest_invalid_parameter', data: { params: { 'Idempotency-Key': expect.stringMatching(/1 to 255 printable ASCII/) } } });
    }
    expect(await count('products')).toBe(before);
    expect(await keyRows()).toBe(keysBefore);
  });

  test('a caller that is not allowed uses up no key; reads ignore the header; /register keeps its own keys', async () => {
    const k = key();
    const keysBefore = await keyRows();
    const anonymous = await ctx.http.post(`${BASE}/products`).set('Idempotency-Key', k).send(product());
    expect(anonymous.status).toBe(401);
    const wrong = await ctx.http.post(`${BASE}/products`).set('Authorization', `Basic ${Buffer.from('nobody:wrong').toString('base64')}`).set('Idempotency-Key', k).send(product());
    expect(wrong.status).toBe(401);
    const read = await ctx.http.get(`${BASE}/products`).set(auth()).set('Idempotency-Key', k);
    expect(read.status).toBe(200);
    const invalid = await ctx.http.post(`${BASE}/register`).set(auth()).set('Idempotency-Key', k).send({});
    expect(invalid.status).toBe(400);
    expect(await keyRows()).toBe(keysBefore);
    // The key is still free for its first real use.
    const used = await ctx.http.post(`${BASE}/products`).set(auth()).set('Idempotency-Key', k).send(product());
    expect(used.status).toBe(200);
    expect(used.headers['idempotent-replayed']).toBeUndefined();
  });

  test('expired keys are removed as requests come', async () => {
    await ctx.db('idempotency_keys').insert(
      Array.from({ length: 5 }, (_, i) => ({ key_sha256: `expired-${tag}-${i}`, request_hmac: 'x', method: 'POST', path: '/x', state: 'done', locked_until: ctx.db.fn.now(), expires_at: ctx.db.raw("now() - interval '1 hour'") })),
    );
    // A new app: its sweep has not run yet.
    const app = createApp({ config: ctx.config, db: ctx.db, settings: ctx.settings, temporal: null, metrics: new Metrics() });
    await request(app).post(`${BASE}/products`).set(auth()).set('Idempotency-Key', key()).send(product());
    const deadline = Date.now() + 5000;
    while ((await count('idempotency_keys', {})) > 0 && Date.now() < deadline) {
      if (Number((await ctx.db('idempotency_keys').where('key_sha256', 'like', `expired-${tag}-%`).count({ n: '*' }))[0].n) === 0) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(Number((await ctx.db('idempotency_keys').where('key_sha256', 'like', `expired-${tag}-%`).count({ n: '*' }))[0].n)).toBe(0);
  });

  test('the OpenAPI document declares the header on every wu/v2 write, and the replay header on their answers', async () => {
    const doc = (await ctx.http.get(`${BASE}/openapi.json`)).body;
    const post = doc.paths['/wp-json/wu/v2/payments'].post;
    expect(post.parameters).toEqual(expect.arrayContaining([expect.objectContaining({ name: 'Idempotency-Key', in: 'header', required: false })]));
    expect(post.responses['200'].headers['Idempotent-Replayed']).toBeDefined();
    expect(post.responses['409'].description).toMatch(/wu_rest_idempotency_key_reused/);
    const get = doc.paths['/wp-json/wu/v2/payments'].get;
    expect((get.parameters ?? []).some((p: { name: string }) => p.name === 'Idempotency-Key')).toBe(false);
  });
});
