import { EVENT_SLUGS, EVENT_TYPES } from '../src/events/catalogue';
import { recordEvent } from '../src/events/record';
import { startEventRetention } from '../src/events/retention';
import { markRegistrationFailed } from '../src/register/store';
import { BASE, createTestContext, newCustomerBody, startTestWorker, type TestContext } from './helpers';

/** Issue 19 (events): the log's API (/events, /event), the catalogue (/hooks), the outbox writer and retention. */
describe('events', () => {
  let ctx: TestContext;
  const auth = () => ({ Authorization: ctx.basic });
  const get = (path: string) => ctx.http.get(`${BASE}${path}`).set(auth());
  const payload = (id: number) => ({ id, model: 'customer', email: `c${id}@example.com` });

  beforeAll(async () => {
    ctx = await createTestContext();
    // Seed: three events of two objects, one old enough for retention, in one transaction each.
    await ctx.db.transaction((trx) => recordEvent(trx, { slug: 'customer_created', objectId: 101, payload: payload(101) }));
    await ctx.db.transaction((trx) => recordEvent(trx, { slug: 'customer_updated', objectId: 101, payload: payload(101), initiator: 'manual', authorId: 7 }));
    await ctx.db.transaction((trx) => recordEvent(trx, { slug: 'customer_created', objectId: 102, payload: payload(102), severity: 4 }));
  });
  afterAll(() => ctx.close());

  test('the list: newest first, every field with its JSON type, on the plural and the singular path', async () => {
    const res = await get('/events');
    expect(res.status).toBe(200);
    expect(res.headers['x-wp-total']).toBe('3');
    expect(res.body.map((e: any) => e.object_id)).toEqual([102, 101, 101]);
    const { _links, ...first } = res.body[0];
    expect(first).toEqual({
      id: expect.any(Number),
      model: 'event',
      slug: 'customer_created',
      severity: 4,
      initiator: 'system',
      author_id: null,
      object_type: 'customer',
      object_id: 102,
      payload: payload(102),
      date_created: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T/),
    });
    expect(_links.self[0].href).toMatch(/\/events\/\d+$/);
    const one = await get(`/event/${first.id}`);
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject(first);
    expect((await get('/events/999999')).body.code).toBe('wu_rest_event_invalid_id');
  });

  test('filters: slug, object_type with object_id, initiator, a date range; order by id ascending', async () => {
    expect((await get('/events?slug=customer_updated')).body.map((e: any) => [e.slug, e.initiator, e.author_id])).toEqual([['customer_updated', 'manual', 7]]);
    expect((await get('/events?object_type=customer&object_id=101&order=asc&orderby=id')).body.map((e: any) => e.slug)).toEqual(['customer_created', 'customer_updated']);
    expect((await get('/events?slug__in=customer_created&object_id=102')).body).toHaveLength(1);
    expect((await get('/events?date_created[after]=2000-01-01&date_created[before]=2000-01-02')).body).toEqual([]);
    expect((await get('/events?date_created[after]=2000-01-01')).body).toHaveLength(3);
  });

  test('bad filters are a 400 naming the parameter, hostile ones included; nothing changes', async () => {
    const before = await ctx.db('events').count({ n: '*' });
    for (const q of ['slug=nope', 'object_id=abc', 'object_id=1e400', 'initiator=robot', 'orderby=payload', 'date_created[after]=yesterday', `slug=${'é'.repeat(300)}`, 'slug[a][b][c][d][e][f]=1']) {
      const res = await get(`/events?${q}`);
      expect({ q, status: res.status, code: res.body.code }).toEqual({ q, status: 400, code: 'wu_rest_invalid_parameter' });
    }
    // A request line past the server's limit is refused before routing.
    expect((await get(`/events?slug=${'é'.repeat(5000)}`)).status).toBe(431);
    expect(await ctx.db('events').count({ n: '*' })).toEqual(before);
  });

  test('the log is read only: create, update and delete match no route; a caller without credentials is refused', async () => {
    const before = await ctx.db('events').count({ n: '*' });
    const id = (await get('/events')).body[0].id;
    expect((await ctx.http.post(`${BASE}/events`).set(auth()).send({ slug: 'customer_created' })).status).toBe(404);
    expect((await ctx.http.put(`${BASE}/events/${id}`).set(auth()).send({ severity: 1 })).status).toBe(404);
    expect((await ctx.http.delete(`${BASE}/event/${id}`).set(auth())).status).toBe(404);
    expect(await ctx.db('events').count({ n: '*' })).toEqual(before);
    for (const path of ['/events', `/events/${id}`, '/hooks']) {
      const res = await ctx.http.get(`${BASE}${path}`);
      expect({ path, status: res.status, code: res.body.code }).toEqual({ path, status: 401, code: 'rest_forbidden' });
    }
  });

  test('/hooks lists every event type with its description and a payload shaped as its record', async () => {
    const res = await get('/hooks');
    expect(res.status).toBe(200);
    expect(res.body.map((h: any) => h.id)).toEqual(EVENT_SLUGS);
    for (const h of res.body) {
      expect(h).toEqual({ id: h.id, name: expect.any(String), desc: expect.any(String), object_type: EVENT_TYPES.get(h.id)!.objectType, severity: expect.any(Number), payload: expect.any(Object) });
      // The example is the record of its object type as the API answers it (no request-dependent _links);
      // a registration's is its /register answer with its workflow id.
      if (h.object_type === 'registration') expect(h.payload).toMatchObject({ workflow_id: expect.stringMatching(/-register-/) });
      else expect(h.payload).toMatchObject({ model: h.object_type, id: expect.any(Number) });
      expect(JSON.stringify(h.payload)).not.toContain('_links');
    }
  });

  test('recordEvent writes in the caller transaction: a rolled back change leaves no event; an unknown slug throws', async () => {
    const before = Number((await ctx.db('events').count({ n: '*' }))[0].n);
    await expect(
      ctx.db.transaction(async (trx) => {
        await recordEvent(trx, { slug: 'customer_created', objectId: 103, payload: payload(103) });
        throw new Error('the change failed');
      }),
    ).rejects.toThrow('the change failed');
    expect(Number((await ctx.db('events').count({ n: '*' }))[0].n)).toBe(before);
    await expect(recordEvent(ctx.db, { slug: 'not_a_type', objectId: 1, payload: {} })).rejects.toThrow(/not in the event catalogue/);
  });

  test('retention deletes the events older than EVENT_RETENTION_DAYS, in batches, and keeps the rest', async () => {
    await ctx.db('events').insert(
      Array.from({ length: 7 }, (_, i) => ({ slug: 'customer_created', object_type: 'customer', object_id: 900 + i, payload: '{}', date_created: new Date(Date.now() - (40 + i) * 86_400_000) })),
    );
    const before = Number((await ctx.db('events').count({ n: '*' }))[0].n);
    // Batches of 3: the 7 old rows go in three deletes (3, 3, 1).
    const retention = startEventRetention({ db: ctx.db, days: 30, intervalMs: 3_600_000, batch: 3 });
    try {
      // The sweep started at start is the one sweep() joins; it deletes all 7; the next finds none.
      expect(await retention.sweep()).toBe(7);
      expect(await retention.sweep()).toBe(0);
    } finally {
      await retention.stop();
    }
    expect(Number((await ctx.db('events').count({ n: '*' }))[0].n)).toBe(before - 7);
    expect(Number((await ctx.db('events').where('object_id', '>=', 900).count({ n: '*' }))[0].n)).toBe(0);
  });
});

describe('events of /register, written in the transaction that decides it', () => {
  let ctx: TestContext;
  let worker: Awaited<ReturnType<typeof startTestWorker>>;
  const auth = () => ({ Authorization: ctx.basic });
  const eventsOf = async (slug: string) => (await ctx.http.get(`${BASE}/events?slug=${slug}&order=asc`).set(auth())).body;

  beforeAll(async () => {
    ctx = await createTestContext();
    worker = await startTestWorker(ctx);
    await ctx.db('products').insert({ slug: 'ev-plan', name: 'Event Plan', type: 'plan', amount: '9.5', duration: 1, duration_unit: 'month' });
  });
  afterAll(async () => {
    await worker?.shutdown();
    await ctx?.close();
  });

  test('a completed checkout: registration_completed with its answer and workflow id', async () => {
    const res = await ctx.http.post(`${BASE}/register`).set(auth()).send({ customer: newCustomerBody(), products: ['ev-plan'] });
    expect(res.status).toBe(200);
    const row = await ctx.db('registrations').where({ customer_id: res.body.customer.id }).first();
    const [event] = await eventsOf('registration_completed');
    expect(event).toMatchObject({ object_type: 'registration', object_id: Number(row.id), initiator: 'system', severity: 3 });
    expect(event.payload).toMatchObject({
      workflow_id: row.workflow_id,
      customer: { id: res.body.customer.id, email: res.body.customer.email },
      membership: { id: res.body.membership.id },
      payment: { id: res.body.payment.id, total: res.body.payment.total },
      site: { id: 0 },
    });
    expect(JSON.stringify(event.payload)).not.toContain('secret123');
  });

  test('a registration decided as failed (refused in its transaction, or given up): registration_failed once, with its error answer', async () => {
    // Refusals found before a registration row exists (validation) answer 400 and are no registration: no event.
    const refused = await ctx.http.post(`${BASE}/register`).set(auth()).send({ customer_id: 987654, products: ['ev-plan'] });
    expect(refused.body.code).toBe('customer_not_found');
    expect(await eventsOf('registration_failed')).toEqual([]);
    // Every path that fails a running registration (a refusal in the records transaction, the
    // local activity giving up, the API abandoning it) goes through markRegistrationFailed.
    const [row] = await ctx.db('registrations').insert({ workflow_id: 'hx-register-events-test', request: '{}', request_hmac: 'x', status: 'running' }).returning(['id']);
    const body = { code: 'wu_rest_registration_unavailable', message: 'The registration could not be written.', data: { status: 503 } };
    expect(await markRegistrationFailed(ctx.db, Number(row.id), body)).toBe(true);
    // Decided already: nothing changes, no second event.
    expect(await markRegistrationFailed(ctx.db, Number(row.id), { ...body, code: 'other' })).toBe(false);
    const failed = await eventsOf('registration_failed');
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({ object_type: 'registration', object_id: Number(row.id), severity: 4, payload: { workflow_id: 'hx-register-events-test', ...body } });
    expect(await ctx.db('registrations').where({ id: row.id }).first()).toMatchObject({ status: 'failed', error: body });
  });
});
