import { createCustomerService } from '../src/customers/service';
import { EVENT_SLUGS, EVENT_TYPES } from '../src/events/catalogue';
import { recordEvent } from '../src/events/record';
import { startEventRetention } from '../src/events/retention';
import { markRegistrationFailed } from '../src/register/store';
import { BASE, createTestContext, newCustomerBody, startTestWorker, statementsAndTrips, type TestContext } from './helpers';

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
    expect((await get('/events?severity=4')).body.map((e: any) => e.object_id)).toEqual([102]);
    expect((await get('/events?date_created[after]=2000-01-01&date_created[before]=2000-01-02')).body).toEqual([]);
    expect((await get('/events?date_created[after]=2000-01-01')).body).toHaveLength(3);
  });

  test('bad filters are a 400 naming the parameter, hostile ones included; nothing changes', async () => {
    const before = await ctx.db('events').count({ n: '*' });
    for (const q of ['slug=nope', 'object_id=abc', 'object_id=1e400', 'initiator=robot', 'severity=6', 'severity=-999999999999999', 'orderby=payload', 'date_created[after]=yesterday', `slug=${'é'.repeat(300)}`, 'slug[a][b][c][d][e][f]=1']) {
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
      // a tenant's is its status, as GET /tenants/{site_id} answers it.
      if (h.object_type === 'registration') expect(h.payload).toMatchObject({ workflow_id: expect.stringMatching(/-register-/) });
      else if (h.object_type === 'tenant') expect(h.payload).toMatchObject({ site_id: expect.any(Number), isolation_model: 'sovereign', checks: expect.any(Object) });
      else if (h.object_type === 'chat_session') expect(h.payload).toMatchObject({ id: expect.any(Number), status: 'waiting', context: expect.any(Object) });
      else if (h.object_type === 'translation_job') expect(h.payload).toMatchObject({ model: 'translation_job', id: expect.any(Number), status: expect.any(String) });
      else if (h.object_type === 'ticket') expect(h.payload).toMatchObject({ id: expect.any(Number), chat_session_ids: [expect.any(Number)], messages: expect.any(Array) });
      else expect(h.payload).toMatchObject({ model: h.object_type, id: expect.any(Number) });
      expect(JSON.stringify(h.payload)).not.toContain('token_sha256');
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

describe('events of the resources, written in the transaction of their change', () => {
  let ctx: TestContext;
  const auth = () => ({ Authorization: ctx.basic });
  const send = (method: 'post' | 'patch', path: string, body: Record<string, unknown>) => ctx.http[method](`${BASE}${path}`).set(auth()).send(body);
  const eventsOf = async (objectType: string, id: number) => (await ctx.db('events').where({ object_type: objectType, object_id: id }).orderBy('id')).map((e) => ({ slug: e.slug, payload: e.payload }));
  const slugsOf = async (objectType: string, id: number) => (await eventsOf(objectType, id)).map((e) => e.slug);
  const record = (body: Record<string, unknown>) => {
    const { _links, ...rest } = body;
    return rest;
  };
  let customerId: number;
  let planId: number;

  beforeAll(async () => {
    ctx = await createTestContext();
    planId = (await send('post', '/products', { slug: 'ev-res-plan', name: 'Events plan', type: 'plan', amount: 10 })).body.id;
  });
  afterAll(() => ctx.close());

  test('customers: created and updated, each with the record as answered; a refused write leaves no event', async () => {
    const created = await send('post', '/customers', newCustomerBody({ vip: true }));
    expect(created.status).toBe(200);
    customerId = created.body.id;
    const updated = await send('patch', `/customers/${customerId}`, { vip: false });
    expect(await eventsOf('customer', customerId)).toEqual([
      { slug: 'customer_created', payload: record(created.body) },
      { slug: 'customer_updated', payload: record(updated.body) },
    ]);
    expect(JSON.stringify(await eventsOf('customer', customerId))).not.toContain('secret123');
    const before = await ctx.db('events').count({ n: '*' });
    const taken = await send('post', '/customers', newCustomerBody({ email: created.body.email }));
    expect(taken.status).toBe(400);
    expect((await send('patch', `/customers/${customerId}`, { vip: 'maybe' })).status).toBe(400);
    expect(await ctx.db('events').count({ n: '*' })).toEqual(before);
  });

  test('memberships: activated, renewed, cancelled and expired, on the transitions only', async () => {
    const m = await send('post', '/memberships', { customer_id: customerId, plan_id: planId, status: 'pending', amount: 10, date_expiration: '2027-01-01T00:00:00Z' });
    expect(m.status).toBe(200);
    const id = m.body.id;
    await send('patch', `/memberships/${id}`, { status: 'active' });
    await send('patch', `/memberships/${id}`, { amount: 12 });
    await send('patch', `/memberships/${id}`, { date_expiration: '2027-02-01T00:00:00Z' });
    await send('patch', `/memberships/${id}`, { date_expiration: '2026-12-01T00:00:00Z' });
    await send('patch', `/memberships/${id}`, { status: 'expired' });
    expect(await slugsOf('membership', id)).toEqual(['membership_activated', 'membership_renewed', 'membership_expired']);
    const events = await eventsOf('membership', id);
    expect(events[1].payload).toMatchObject({ id, status: 'active', date_expiration: '2027-02-01T00:00:00.000Z' });
    const c = await send('post', '/memberships', { customer_id: customerId, plan_id: planId, status: 'active' });
    await send('patch', `/memberships/${c.body.id}`, { status: 'cancelled' });
    expect(await slugsOf('membership', c.body.id)).toEqual(['membership_activated', 'membership_cancelled']);
  });

  test('payments: created, completed, and refunded (the refund also cancels its membership: membership_cancelled)', async () => {
    const m = await send('post', '/memberships', { customer_id: customerId, plan_id: planId, status: 'active' });
    const pending = await send('post', '/payments', { customer_id: customerId, membership_id: m.body.id, status: 'pending', total: '20.00' });
    expect(pending.status).toBe(200);
    const id = pending.body.id;
    const completed = await send('patch', `/payments/${id}`, { status: 'completed' });
    const refund = await ctx.http.post(`${BASE}/payments/${id}/refunds`).set(auth()).send({ amount: '5.00', reason: 'late', cancel_membership_on_refund: true });
    expect(refund.status).toBe(201);
    const events = await eventsOf('payment', id);
    expect(events.map((e) => e.slug)).toEqual(['payment_created', 'payment_completed', 'payment_refunded']);
    expect(events[1].payload).toEqual(record(completed.body));
    expect(events[2].payload).toMatchObject({ id, status: 'partially-refunded', refund_total: 5 });
    expect(await slugsOf('membership', m.body.id)).toEqual(['membership_activated', 'membership_cancelled']);
    // A refund refused (more than what is left) leaves no event.
    const before = await ctx.db('events').count({ n: '*' });
    expect((await ctx.http.post(`${BASE}/payments/${id}/refunds`).set(auth()).send({ amount: '100.00', reason: 'too much' })).status).toBe(400);
    expect(await ctx.db('events').count({ n: '*' })).toEqual(before);
  });

  test('sites: created, and published whenever it becomes active, public and not archived', async () => {
    const s = await send('post', '/sites', { customer_id: customerId, domain: `ev${Date.now()}.example.com`, path: '/', title: 'Events', public: false });
    expect(s.status).toBe(200);
    await send('patch', `/sites/${s.body.id}`, { public: true });
    await send('patch', `/sites/${s.body.id}`, { title: 'Events 2' });
    await send('patch', `/sites/${s.body.id}`, { archived: true });
    await send('patch', `/sites/${s.body.id}`, { archived: false });
    expect(await slugsOf('site', s.body.id)).toEqual(['site_created', 'site_published', 'site_published']);
  });

  test("a write's last event carries its transaction's COMMIT: the same statements, one round trip fewer; a write with two events commits both", async () => {
    const customers = createCustomerService(ctx.db);
    const id = (await send('post', '/customers', newCustomerBody())).body.id;
    const { sql, trips } = await statementsAndTrips(ctx.db, () => customers.update(id, { vip: true }));
    expect(sql[0]).toBe('BEGIN;');
    expect(sql.slice(-2)).toEqual([expect.stringMatching(/^insert into "events"/), 'COMMIT;']);
    // BEGIN goes with the first statement, COMMIT with the event's insert.
    expect(trips).toBe(sql.length - 2);
    expect(await slugsOf('customer', id)).toEqual(['customer_created', 'customer_updated']);
    // A payment created completed: two events in its write, the second one last.
    const paid = await send('post', '/payments', { customer_id: id, status: 'completed', total: '3.00' });
    expect(paid.status).toBe(200);
    expect(await slugsOf('payment', paid.body.id)).toEqual(['payment_created', 'payment_completed']);
  });

  test('domains: created, and each stage change made by hand', async () => {
    const site = await send('post', '/sites', { customer_id: customerId, domain: `evd${Date.now()}.example.com`, path: '/', title: 'Domains' });
    const d = await send('post', '/domains', { domain: `map${Date.now()}.example.com`, blog_id: site.body.id, stage: 'domain-mapping' });
    expect(d.status).toBe(200);
    await send('patch', `/domains/${d.body.id}`, { stage: 'done' });
    await send('patch', `/domains/${d.body.id}`, { primary_domain: true });
    const events = await eventsOf('domain', d.body.id);
    expect(events.map((e) => [e.slug, e.payload.stage])).toEqual([
      ['domain_created', 'domain-mapping'],
      ['domain_stage_changed', 'done'],
    ]);
    expect(events[0].payload).toEqual(record(d.body));
  });
});

