import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection, WorkflowFailedError } from '@temporalio/client';
import pg from 'pg';
import request from 'supertest';
import { createApp } from '../src/app';
import { runCli } from '../src/cli';
import { freePort } from '../src/infra/temporal-server';
import { MembershipLifecycles } from '../src/memberships/lifecycle';
import { RegistrationRecords } from '../src/register/records';
import { RegistrationStore } from '../src/register/store';
import type { RegistrationRequest } from '../src/register/types';
import { canonicalJson, sha256Hex } from '../src/register/validate';
import { taskQueues } from '../src/temporal/task-queues';
import type { RunningWorker } from '../src/temporal/worker';
import { WorkflowIds } from '../src/temporal/workflow-ids';
import { verifyPassword } from '../src/users/password';
import { BASE, createTestContext, decodedJson, type TestContext, startTestWorker } from './helpers';

/**
 * /register end to end: the real `register` workflow on a worker of this file's own task
 * queue, against this file's database.
 */
describe('/register (one transaction, early answer)', () => {
  let ctx: TestContext;
  let dataDir: string;
  let worker: RunningWorker;
  let templateId: number;
  const auth = () => ({ Authorization: ctx.basic });
  const TABLES = ['users', 'customers', 'memberships', 'payments', 'sites'] as const;
  const counts = async () => {
    const out: Record<string, number> = {};
    for (const t of TABLES) out[t] = Number((await ctx.db(t).count({ n: '*' }))[0].n);
    return out;
  };
  let seq = 0;
  const tag = () => `${++seq}${crypto.randomBytes(3).toString('hex')}`;
  const body = (extra: Record<string, unknown> = {}) => {
    const t = tag();
    return {
      customer: { username: `reg${t}`, password: 'secret123', email: `reg${t}@example.com` },
      products: ['reg-plan', 'reg-addon'],
      duration: 1,
      duration_unit: 'month',
      auto_renew: true,
      site: { site_url: `shop${t}`, site_title: 'My Shop' },
      payment: { status: 'completed' },
      membership: { status: 'active' },
      ...extra,
    };
  };
  const post = (b: unknown, key?: string, http = ctx.http) => {
    const r = http.post(`${BASE}/register`).set(auth());
    if (key) r.set('Idempotency-Key', key);
    return r.send(b as object);
  };
  /** A record as its GET answers it, without the _links the /register answer does not carry. */
  const get = async (path: string) => {
    const { _links, ...rec } = (await ctx.http.get(`${BASE}${path}`).set(auth())).body;
    return rec;
  };

  const appWith = (config: Partial<TestContext['config']>, temporal: TestContext['temporal'] | null = ctx.temporal) =>
    createApp({ config: { ...ctx.config, ...config }, db: ctx.db, settings: ctx.settings, temporal, metrics: ctx.metrics, observeResponse: (r) => ctx.contract.check(r) });
  const history = async (workflowId: string) => (await ctx.temporal.client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
  const regRow = (where: Record<string, unknown>) => ctx.db('registrations').where(where).first();

  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hostflow-register-'));
    ctx = await createTestContext({ DATA_DIR: dataDir });
    worker = await startTestWorker(ctx);
    await ctx.db('products').insert([
      { slug: 'reg-plan', name: 'Reg Plan', type: 'plan', amount: '29.99', setup_fee: '0.1', duration: 1, duration_unit: 'month' },
      { slug: 'reg-addon', name: 'Reg Addon', type: 'service', amount: '0.2', setup_fee: '0' },
      { slug: 'reg-once', name: 'Reg Once', type: 'package', amount: '0.7', recurring: false },
      { slug: 'reg-plan2', name: 'Reg Plan 2', type: 'plan', amount: '5' },
      { slug: 'reg-off', name: 'Reg Off', type: 'plan', amount: '5', active: false },
      { slug: 'reg-eur', name: 'Reg EUR', type: 'service', amount: '1', currency: 'EUR' },
    ]);
    const [tpl] = await ctx
      .db('sites')
      .insert({ title: 'Template', description: 'A starter shop', domain: 'templates.localhost', path: '/', type: 'site_template', site_meta: JSON.stringify({ theme: 'shop', color: 'blue' }) })
      .returning('id');
    templateId = Number(tpl.id);
    // The template's content, copied to a new site after the answer.
    await ctx.db('site_posts').insert([
      { site_id: templateId, post_type: 'page', title: 'Template home', content: 'Welcome to the shop.' },
      { site_id: templateId, post_type: 'post', title: 'Template news', content: 'First news.' },
    ]);
    await ctx.db('site_options').insert([
      { site_id: templateId, name: 'blogname', value: 'Template' },
      { site_id: templateId, name: 'template_color', value: 'blue' },
    ]);
    fs.mkdirSync(path.join(dataDir, 'uploads', 'sites', String(templateId)), { recursive: true });
    fs.writeFileSync(path.join(dataDir, 'uploads', 'sites', String(templateId), 'logo.txt'), 'template logo');
  });
  afterAll(async () => {
    await worker?.shutdown();
    await ctx?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  test('GET /register tells whether registration is open; closed refuses POST with 403', async () => {
    expect(await get('/register')).toEqual({ registration_status: 'open' });
    await ctx.settings.set('enable_registration', false);
    try {
      expect(await get('/register')).toEqual({ registration_status: 'closed' });
      const before = await counts();
      const res = await post(body());
      expect(res.status).toBe(403);
      expect(res.body).toEqual({ code: 'wu_rest_registration_closed', message: expect.any(String), data: { status: 403 } });
      expect(await counts()).toEqual(before);
    } finally {
      await ctx.settings.set('enable_registration', true);
    }
    // The routes are in the REST index.
    const index = await get('');
    expect(index.routes['/wu/v2/register'].methods).toEqual(expect.arrayContaining(['GET', 'POST']));
    expect(Object.keys(index.routes)).toContain('/wu/v2/register/(?P<workflow>[\\w-]+)');
  });

  test('happy path: user, customer, membership, payment and site, linked, with exact money', async () => {
    const before = await counts();
    const b = body({ site: { site_url: `tpl${tag()}`, site_title: 'Templated Shop', template_id: templateId, site_meta: { color: 'red' } } });
    const res = await post(b);
    expect(res.status).toBe(200);
    const { customer, membership, payment, site } = res.body;
    expect(await counts()).toEqual({ ...before, users: before.users + 1, customers: before.customers + 1, memberships: before.memberships + 1, payments: before.payments + 1, sites: before.sites + 1 });

    expect(customer).toMatchObject({ model: 'customer', username: b.customer.username, email: b.customer.email, signup_form: 'by-register' });
    const plan = await ctx.db('products').where({ slug: 'reg-plan' }).first('id');
    const addon = await ctx.db('products').where({ slug: 'reg-addon' }).first('id');
    expect(membership).toMatchObject({
      customer_id: customer.id,
      plan_id: Number(plan.id),
      addon_products: [{ product_id: Number(addon.id), quantity: 1 }],
      status: 'active',
      auto_renew: true,
      currency: 'USD',
      duration: 1,
      duration_unit: 'month',
      amount: 30.19,
      initial_amount: 30.29,
    });
    expect(membership.date_activated).not.toBeNull();
    expect(payment).toMatchObject({ customer_id: customer.id, membership_id: membership.id, product_id: Number(plan.id), status: 'completed', subtotal: 30.29, total: 30.29, currency: 'USD' });
    expect(payment.invoice_number).toEqual(expect.any(Number));
    expect(payment.line_items.map((i: { unit_price: number }) => i.unit_price)).toEqual([29.99, 0.1, 0.2]);
    // Money is exact in the database too (numeric, no float error).
    const prow = await ctx.db('payments').where({ id: payment.id }).first('total');
    expect(prow.total).toBe('30.2900');
    expect(site).toMatchObject({
      customer_id: customer.id,
      membership_id: membership.id,
      template_id: templateId,
      domain: 'localhost',
      path: `/${b.site.site_url}/`,
      title: 'Templated Shop',
      description: 'A starter shop',
      site_meta: { theme: 'shop', color: 'red' },
      type: 'customer_owned', // published by the membership's activation
      active: true,
    });
    // The records are what the resources' GETs return.
    expect(await get(`/customers/${customer.id}`)).toEqual(customer);
    expect(await get(`/memberships/${membership.id}`)).toEqual(membership);
    expect(await get(`/payments/${payment.id}`)).toEqual(payment);
    expect(await get(`/sites/${site.id}`)).toEqual(site);
    // The password was stored hashed.
    const user = await ctx.db('users').where({ id: customer.user_id }).first('password_hash');
    expect(user.password_hash).toMatch(/^scrypt\$/);

    // The workflow was started, then the records committed in one transaction; the answer is the row's.
    const reg = await regRow({ customer_id: customer.id });
    expect(reg).toMatchObject({ status: 'completed', site_id: site.id, membership_id: membership.id, payment_id: payment.id, created_user: true, password_hash: null });
    expect(reg.result).toEqual(res.body);
    const handle = ctx.temporal.client.workflow.getHandle(reg.workflow_id);
    await handle.result();
    const events = await history(reg.workflow_id);
    const kinds = events.map((e) => Object.keys(e).find((k) => k.endsWith('EventAttributes')));
    // The workflow's first task settles the records in ONE local activity (it reads what the
    // API committed); the only regular activities are the provisioning's, after it.
    expect(kinds.filter((k) => k === 'markerRecordedEventAttributes')).toHaveLength(1);
    const marker = kinds.indexOf('markerRecordedEventAttributes');
    expect(kinds.slice(0, marker).filter((k) => k === 'workflowTaskCompletedEventAttributes')).toHaveLength(1);
    expect(kinds.slice(0, marker)).not.toContain('activityTaskScheduledEventAttributes');
    expect(kinds).not.toContain('workflowExecutionUpdateAcceptedEventAttributes');
    // Its search attributes come with its start (the ids are reserved before it): none upserted.
    expect(kinds).not.toContain('upsertWorkflowSearchAttributesEventAttributes');

    // After the answer: the template's posts, options and uploads are copied to the site.
    expect(await regRow({ id: reg.id })).toMatchObject({ provisioning: 'done' });
    const titles = await ctx.db('site_posts').where({ site_id: site.id }).orderBy('id').pluck('title');
    expect(titles).toEqual(['Hello world!', 'Sample Page', 'Template home', 'Template news']);
    const options = Object.fromEntries((await ctx.db('site_options').where({ site_id: site.id }).select('name', 'value')).map((o) => [o.name, o.value]));
    expect(options).toMatchObject({ blogname: 'Templated Shop', template_color: 'blue' });
    expect(fs.readFileSync(path.join(dataDir, 'uploads', 'sites', String(site.id), 'logo.txt'), 'utf8')).toBe('template logo');

    // Operators find it in Temporal by customer, site and products, and read what it is in the list.
    const desc = await handle.describe();
    expect(desc.type).toBe('register');
    const sa = desc.typedSearchAttributes;
    expect(sa.get({ name: 'HostflowCustomerId', type: 'INT' } as never)).toBe(customer.id);
    expect(sa.get({ name: 'HostflowSiteId', type: 'INT' } as never)).toBe(site.id);
    expect(sa.get({ name: 'HostflowProducts', type: 'KEYWORD_LIST' } as never)).toEqual(['reg-plan', 'reg-addon']);
    expect(desc.memo).toEqual({ registration_id: Number(reg.id), products: ['reg-plan', 'reg-addon'] });
    expect(await desc.staticSummary()).toBe(`Registration ${reg.id} of customer ${customer.id}, plan reg-plan`);
    const metrics = await ctx.metrics.registry.getSingleMetricAsString('temporal_workflows_started_total');
    expect(metrics).toMatch(/workflow_type="register"} [1-9]/);

    // ... and by e-mail through the CLI (Temporal holds none).
    const out: string[] = [];
    await runCli(['registrations', 'find', b.customer.email.toUpperCase()], ctx.settings, (l) => out.push(l), { db: ctx.db, config: ctx.config });
    expect(out.join('\n')).toContain(`registration ${reg.id}\tcompleted (provisioning done)\tcustomer ${customer.id}\tsite ${site.id}`);
    expect(out.join('\n')).toContain(`WorkflowId = '${reg.workflow_id}'`);
  });

  test('no personal data in Temporal: not the e-mail, username, password, its hash, the billing address, nor an unkeyed digest', async () => {
    const password = `Pw${crypto.randomBytes(9).toString('hex')}`;
    const b = body({ country: 'fr', site: { site_url: `pii${tag()}`, site_title: 'Private Shop', template_id: templateId } });
    b.customer.password = password;
    Object.assign(b.customer, { billing_address: { line1: `${tag()} Rue Secrète`, city: 'Lyon', company: `Acme ${tag()}` } });
    // An abandoned hash older than the hold time is given up by the next registration; a young one stays.
    const store = new RegistrationStore(ctx.db);
    const held = async (label: string, age: string) => {
      const row = await store.claim({ workflowId: `register-held-${label}-${tag()}`, keySha256: null, requestHmac: 'x', request: {} as RegistrationRequest, passwordHash: `scrypt$${label}` });
      await ctx.db('registrations').where({ id: row!.id }).update({ date_modified: ctx.db.raw(`now() - interval '${age}'`) });
      return row!.id;
    };
    const [oldId, youngId] = [await held('old', '25 hours'), await held('young', '23 hours')];
    const res = await post(b, `pw-${tag()}`);
    expect(res.status).toBe(200);
    expect((await regRow({ id: oldId })).password_hash).toBeNull();
    expect((await regRow({ id: youngId })).password_hash).toBe('scrypt$young');

    const user = await ctx.db('users').where({ id: res.body.customer.user_id }).first('password_hash');
    expect(await verifyPassword(password, user.password_hash)).toBe(true);
    expect(await verifyPassword(`${password}x`, user.password_hash)).toBe(false);
    const reg = await regRow({ customer_id: res.body.customer.id });
    expect(reg.password_hash).toBeNull(); // taken by the transaction
    await ctx.temporal.client.workflow.getHandle(reg.workflow_id).result();

    // A refused registration too: its error names the e-mail, in our database only.
    await ctx.db.raw(`CREATE OR REPLACE FUNCTION reg_test_fail() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'refused for %', NEW.email; END $$ LANGUAGE plpgsql`);
    await ctx.db.raw('CREATE TRIGGER reg_test_fail BEFORE INSERT ON users FOR EACH ROW EXECUTE FUNCTION reg_test_fail()');
    const refusedBody = body();
    const refusedKey = `pw-refused-${tag()}`;
    let refused;
    try {
      refused = await post(refusedBody, refusedKey);
    } finally {
      await ctx.db.raw('DROP TRIGGER IF EXISTS reg_test_fail ON users');
    }
    expect(refused.status).toBe(400);
    expect(refused.body.message).toContain(refusedBody.customer.email);
    const refusedReg = await regRow({ idempotency_key_sha256: sha256Hex(refusedKey) });
    expect(refusedReg.status).toBe('failed');

    // Everything Temporal keeps: the histories with every payload decoded, the descriptions (memo, search attributes, summary).
    const kept: string[] = [];
    for (const r of [reg, refusedReg]) {
      const handle = ctx.temporal.client.workflow.getHandle(r.workflow_id);
      await handle.result();
      const desc = await handle.describe();
      const events = decodedJson(await handle.fetchHistory());
      expect(events).toContain(`{\\"registrationId\\":${r.id}}`); // the payloads really are decoded
      kept.push(events, decodedJson(desc.raw), JSON.stringify(desc.memo), String(await desc.staticSummary()));
    }
    const all = kept.join('\n');
    const [, , , , salt, hash] = user.password_hash.split('$');
    const secrets = [
      password, user.password_hash, salt, hash,
      b.customer.email, b.customer.email.toLowerCase(), b.customer.username,
      refusedBody.customer.email, refusedBody.customer.username,
      'Rue Secrète', 'Acme', 'Lyon', b.site.site_title,
      sha256Hex(canonicalJson(b)), sha256Hex(JSON.stringify(b)), reg.request_hmac,
    ];
    for (const secret of secrets) expect(all).not.toContain(secret);
    // The fingerprint is keyed, and the password is not in what it covers.
    expect(reg.request_hmac).toMatch(/^[0-9a-f]{64}$/);
    expect(reg.request).toMatchObject({ customer: { account: { username: b.customer.username, email: b.customer.email } } });
    expect(JSON.stringify(reg.request)).not.toContain(password);
  });

  test('a registration whose held password is gone is refused naming the cause and creates no user', async () => {
    const users = (await counts()).users;
    const store = new RegistrationStore(ctx.db);
    const plan = await ctx.db('products').where({ slug: 'reg-plan' }).first('id');
    const request: RegistrationRequest = {
      products: ['reg-plan'],
      plan: 'reg-plan',
      customer: { account: { username: `gone${tag()}`, email: `gone${tag()}@example.com` } },
      cart: { plan_id: Number(plan.id), addon_ids: [], currency: 'USD' },
      auto_renew: false,
      membership: { status: 'pending' },
      payment: { status: 'pending' },
      payment_method: {},
      site: null,
    };
    const row = await store.claim({ workflowId: `register-${crypto.randomUUID()}`, keySha256: null, requestHmac: 'f'.repeat(64), request, passwordHash: null });
    const records = new RegistrationRecords(ctx.db, new MembershipLifecycles(new WorkflowIds(ctx.db, ctx.config.WORKFLOW_ID_PREFIX), null));
    expect(await records.commit(Number(row!.id))).toEqual({ status: 'rejected' });
    // Idempotent: a retried local activity reads the stored answer.
    expect(await records.commit(Number(row!.id))).toEqual({ status: 'rejected' });
    expect((await regRow({ id: row!.id })).error).toMatchObject({ code: 'wu_rest_registration_failed', message: expect.stringContaining('password is no longer held') });
    expect((await counts()).users).toBe(users);
  });

  test('no site, default statuses, products by id: site {"id":0}, pending membership and payment', async () => {
    const plan = await ctx.db('products').where({ slug: 'reg-plan2' }).first('id');
    const before = await counts();
    const b = body({ products: [Number(plan.id), 'reg-once'], site: undefined, payment: undefined, membership: undefined });
    const res = await post(b);
    expect(res.status).toBe(200);
    expect(res.body.site).toEqual({ id: 0 });
    expect(res.body.membership).toMatchObject({ status: 'pending', date_activated: null, amount: 5, initial_amount: 5.7, recurring: true });
    expect(res.body.payment).toMatchObject({ status: 'pending', invoice_number: null, total: 5.7 });
    expect((await counts()).sites).toBe(before.sites);
  });

  test('a site of a membership left pending stays pending; activating the membership publishes it', async () => {
    const res = await post(body({ membership: { status: 'pending' }, payment: { status: 'pending' } }));
    expect(res.status).toBe(200);
    expect(res.body.site).toMatchObject({ type: 'pending', active: false });
    const upd = await ctx.http.put(`${BASE}/memberships/${res.body.membership.id}`).set(auth()).send({ status: 'active' });
    expect(upd.status).toBe(200);
    expect(await get(`/sites/${res.body.site.id}`)).toMatchObject({ type: 'customer_owned', active: true });
  });

  test('subdomain mode: the site is {site_url}.{network_domain} at /', async () => {
    await ctx.settings.setMany({ site_mode: 'subdomain', network_domain: 'Net.Example' });
    try {
      const b = body();
      const res = await post(b);
      expect(res.status).toBe(200);
      expect(res.body.site).toMatchObject({ domain: `${b.site.site_url}.net.example`, path: '/' });
    } finally {
      await ctx.settings.setMany({ site_mode: 'subdirectory', network_domain: 'localhost' });
    }
  });

  test('customer_id 0, customer.user_id 0 and site.template_id 0 are none, as the original takes them: a new user, customer and a site without template', async () => {
    const before = await counts();
    const b = body();
    const res = await post({ ...b, customer_id: 0, customer: { ...b.customer, user_id: 0 }, site: { ...b.site, template_id: 0 } });
    expect(res.status).toBe(200);
    expect(res.body.customer).toMatchObject({ username: b.customer.username, email: b.customer.email });
    expect(res.body.site).toMatchObject({ template_id: null, customer_id: res.body.customer.id });
    expect(await counts()).toEqual({ users: before.users + 1, customers: before.customers + 1, memberships: before.memberships + 1, payments: before.payments + 1, sites: before.sites + 1 });
    const withCustomer = await post({ customer_id: res.body.customer.id, customer: { user_id: null }, products: ['reg-plan'] });
    expect(withCustomer.status).toBe(200);
    expect(withCustomer.body.membership.customer_id).toBe(res.body.customer.id);
    const noAccount = await post({ customer_id: 0, customer: { user_id: 0 }, products: ['reg-plan'] });
    expect(noAccount.status).toBe(400);
    expect(Object.keys(noAccount.body.data.params).sort()).toEqual(['customer.email', 'customer.password', 'customer.username']);
    const negative = await post({ ...body(), customer_id: -1 });
    expect(negative.status).toBe(400);
    expect(negative.body.data.params.customer_id).toBe('customer_id must be greater than or equal to 0.');
  });

  test('an existing customer_id: no new user or customer', async () => {
    const first = await post(body({ site: undefined }));
    const customerId = first.body.customer.id;
    const before = await counts();
    const res = await post({ customer_id: customerId, products: ['reg-plan'], site: { site_url: `again${tag()}`, site_title: 'Second' } });
    expect(res.status).toBe(200);
    expect(res.body.customer).toEqual(await get(`/customers/${customerId}`));
    expect(res.body.membership.customer_id).toBe(customerId);
    expect(await counts()).toEqual({ ...before, memberships: before.memberships + 1, payments: before.payments + 1, sites: before.sites + 1 });
  });

  test('validation: every violation at once, with dotted names; nothing is written and no workflow starts', async () => {
    const before = await counts();
    const started = await ctx.metrics.registry.getSingleMetricAsString('temporal_workflows_started_total');
    const res = await post({
      customer: { username: 'ab', password: '123', email: 'not-an-email', extra: 1 },
      products: ['reg-plan', 'reg-plan'],
      duration: 0,
      duration_unit: 'fortnight',
      currency: 'XXXX',
      membership: { status: 'bogus' },
      payment: { status: 'paid' },
      site: { site_url: 'My Site', site_title: 'ab', template_id: 'x' },
      bogus: true,
    });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('wu_rest_invalid_parameter');
    expect(Object.keys(res.body.data.params).sort()).toEqual(
      [
        'bogus',
        'currency',
        'customer.email',
        'customer.extra',
        'customer.password',
        'customer.username',
        'duration',
        'duration_unit',
        'membership.status',
        'payment.status',
        'products',
        'site.site_title',
        'site.site_url',
        'site.template_id',
      ].sort(),
    );
    expect(res.body.data.params['customer.username']).toBe('customer.username must be at least 4 characters long.');
    expect(res.body.data.params['membership.status']).toMatch(/^membership.status is not one of pending, active/);
    expect(await counts()).toEqual(before);
    expect(await ctx.metrics.registry.getSingleMetricAsString('temporal_workflows_started_total')).toBe(started);
  });

  test('no products: 400 invalid_cart "Products are required."', async () => {
    for (const products of [undefined, []]) {
      const res = await post(body({ products }));
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ code: 'invalid_cart', message: 'Products are required.', data: { status: 400 } });
    }
  });

  test('unknown customer_id: 400 customer_not_found', async () => {
    const res = await post({ customer_id: 999999, products: ['reg-plan'] });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('customer_not_found');
    expect(res.body.data.status).toBe(400);
  });

  test('database checks together: taken username, e-mail and site address; unknown and inactive products; no plan', async () => {
    const first = body();
    expect((await post(first)).status).toBe(200);
    const before = await counts();
    const res = await post(
      body({
        customer: { username: first.customer.username.toUpperCase(), email: first.customer.email, password: 'secret123' },
        site: { site_url: first.site.site_url, site_title: 'Copy Shop' },
        products: ['reg-plan', 'nope', 'reg-off'],
      }),
    );
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('wu_rest_invalid_parameter');
    expect(res.body.data.params).toEqual({
      'customer.username': 'customer.username is already taken.',
      'customer.email': 'customer.email is already used by another account.',
      'site.site_url': 'site.site_url is already taken.',
      products: 'products: nope does not match any product; reg-off is not active.',
    });
    const noPlan = await post(body({ products: ['reg-addon'] }));
    expect(noPlan.body.data.params).toEqual({ products: 'products: must include a plan.' });
    const twoPlans = await post(body({ products: ['reg-plan', 'reg-plan2'] }));
    expect(twoPlans.body.data.params.products).toMatch(/only one plan/);
    const currencies = await post(body({ products: ['reg-plan', 'reg-eur'] }));
    expect(currencies.body.data.params.products).toMatch(/reg-eur is not priced in USD/);
    const template = await post(body({ site: { site_url: `t${tag()}`, site_title: 'Shop four', template_id: 999999 } }));
    expect(template.body.data.params).toEqual({ 'site.template_id': 'site.template_id 999999 does not match any site.' });
    expect(await counts()).toEqual(before);
  });

  test('Idempotency-Key: the same request twice returns the first result, one set of rows', async () => {
    const key = `key-${tag()}`;
    const b = body();
    const before = await counts();
    const first = await post(b, key);
    expect(first.status).toBe(200);
    const again = await post({ ...b }, key);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
    expect(await counts()).toEqual({ users: before.users + 1, customers: before.customers + 1, memberships: before.memberships + 1, payments: before.payments + 1, sites: before.sites + 1 });
    const wfId = `${await ctx.app.locals.temporal.ids.prefix()}-register-${crypto.createHash('sha256').update(key).digest('hex')}`;
    expect(await ctx.db('registrations').where({ workflow_id: wfId }).first('status')).toEqual({ status: 'completed' });

    // The key is looked up in the database first: answered without Temporal (not even configured here).
    const fromDb = await post({ ...b }, key, request(appWith({}, null)));
    expect(fromDb.status).toBe(200);
    expect(fromDb.body).toEqual(first.body);
    // The fingerprint leaves the password out: the same body with another password is the same request.
    const otherPassword = await post({ ...b, customer: { ...b.customer, password: 'another-password' } }, key);
    expect(otherPassword.status).toBe(200);
    expect(otherPassword.body).toEqual(first.body);

    // The same key with another body: 409, nothing written.
    const other = await post({ ...b, auto_renew: false }, key);
    expect(other.status).toBe(409);
    expect(other.body.code).toBe('wu_rest_idempotency_key_reused');
    expect(await counts()).toEqual({ users: before.users + 1, customers: before.customers + 1, memberships: before.memberships + 1, payments: before.payments + 1, sites: before.sites + 1 });

    // Without a key, the same body is a new registration (refused here: the account is taken).
    const noKey = await post(b);
    expect(noKey.status).toBe(400);
    expect(noKey.body.data.params['customer.username']).toBeDefined();
  });

  test('two concurrent requests with one Idempotency-Key: one registration, both get it', async () => {
    const key = `concurrent-${tag()}`;
    const b = body();
    const before = await counts();
    const [a, c] = await Promise.all([post(b, key), post(b, key)]);
    expect(a.status).toBe(200);
    expect(c.status).toBe(200);
    expect(c.body).toEqual(a.body);
    expect(await counts()).toEqual({ users: before.users + 1, customers: before.customers + 1, memberships: before.memberships + 1, payments: before.payments + 1, sites: before.sites + 1 });
  });

  describe('a failure anywhere in the records transaction leaves nothing', () => {
    // A trigger makes a write fail for real, inside the transaction.
    const cases: { step: string; table: string; when: string; condition: string }[] = [
      { step: 'membership insert', table: 'memberships', when: 'BEFORE INSERT', condition: 'true' },
      { step: 'payment insert', table: 'payments', when: 'BEFORE INSERT', condition: 'true' },
      { step: 'site insert', table: 'sites', when: 'BEFORE INSERT', condition: "NEW.title = 'Doomed Shop'" },
      { step: 'membership activation', table: 'memberships', when: 'BEFORE UPDATE', condition: "NEW.status = 'active'" },
      // Created completed (the rule takes the invoice number on create).
      { step: 'payment completion', table: 'payments', when: 'BEFORE INSERT', condition: "NEW.status = 'completed'" },
    ];
    for (const c of cases) {
      test(`${c.step}`, async () => {
        await ctx.db.raw(`CREATE OR REPLACE FUNCTION reg_test_fail() RETURNS trigger AS $$ BEGIN IF ${c.condition} THEN RAISE EXCEPTION 'injected failure at ${c.step}'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql`);
        await ctx.db.raw(`CREATE TRIGGER reg_test_fail ${c.when} ON ${c.table} FOR EACH ROW EXECUTE FUNCTION reg_test_fail()`);
        try {
          const before = await counts();
          const invoice = await ctx.db('invoice_counter').first('value');
          const res = await post(body({ site: { site_url: `doom${tag()}`, site_title: 'Doomed Shop' } }));
          expect(res.status).toBe(400);
          expect(res.body).toEqual({
            code: 'wu_rest_registration_failed',
            message: expect.stringContaining(`injected failure at ${c.step}`),
            data: { status: 400, sqlstate: 'P0001' },
          });
          expect(JSON.stringify(res.body)).not.toMatch(/at .*\.ts:\d+/);
          expect(await counts()).toEqual(before);
          expect(await ctx.db('invoice_counter').first('value')).toEqual(invoice);
          const reg = await ctx.db('registrations').orderBy('date_created', 'desc').first();
          expect(reg).toMatchObject({ status: 'failed', customer_id: null, membership_id: null, payment_id: null, site_id: null });
        } finally {
          await ctx.db.raw(`DROP TRIGGER IF EXISTS reg_test_fail ON ${c.table}`);
        }
      });
    }

    test('with an existing customer, the customer is kept', async () => {
      const first = await post(body({ site: undefined }));
      await ctx.db.raw(`CREATE OR REPLACE FUNCTION reg_test_fail() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'injected failure'; END $$ LANGUAGE plpgsql`);
      await ctx.db.raw('CREATE TRIGGER reg_test_fail BEFORE INSERT ON sites FOR EACH ROW EXECUTE FUNCTION reg_test_fail()');
      try {
        const before = await counts();
        const res = await post({ customer_id: first.body.customer.id, products: ['reg-plan'], site: { site_url: `keep${tag()}`, site_title: 'Kept Shop' } });
        expect(res.status).toBe(400);
        expect(await counts()).toEqual(before);
        expect(await get(`/customers/${first.body.customer.id}`)).toEqual(first.body.customer);
      } finally {
        await ctx.db.raw('DROP TRIGGER IF EXISTS reg_test_fail ON sites');
      }
    });

    test('a site address taken between validation and the transaction: 400 naming site.site_url, nothing of the registration kept', async () => {
      const b = body();
      // When the API records the request (after validating it), a racing request takes the address.
      await ctx.db.raw(
        `CREATE OR REPLACE FUNCTION reg_test_race() RETURNS trigger AS $$ BEGIN INSERT INTO sites (title, domain, path, type) VALUES ('Racer', 'localhost', '/${b.site.site_url}/', 'default'); RETURN NEW; END $$ LANGUAGE plpgsql`,
      );
      await ctx.db.raw('CREATE TRIGGER reg_test_race AFTER INSERT ON registrations FOR EACH ROW EXECUTE FUNCTION reg_test_race()');
      try {
        const before = await counts();
        const res = await post(b);
        expect(res.status).toBe(400);
        expect(res.body).toEqual({ code: 'wu_rest_invalid_parameter', message: expect.any(String), data: { status: 400, params: { 'site.site_url': 'site.site_url is already taken.' } } });
        // Nothing of the registration was written; only the racer's site exists.
        expect(await counts()).toEqual({ ...before, sites: before.sites + 1 });
      } finally {
        await ctx.db.raw('DROP TRIGGER IF EXISTS reg_test_race ON registrations');
      }
    });
  });

  test('REGISTER_WAIT_SECONDS=0: 202 with a status URL; the status answers 202 then 200 with the result, from the database', async () => {
    const app = appWith({ REGISTER_WAIT_SECONDS: 0 });
    const res = await post(body(), undefined, request(app));
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ workflow_id: expect.stringMatching(new RegExp(`^${await app.locals.temporal.ids.prefix()}-register-[0-9a-f-]{36}$`)), status: 'running', status_url: expect.any(String) });
    expect(res.headers.location).toBe(res.body.status_url);
    const path = new URL(res.body.status_url).pathname;
    expect(path).toBe(`${BASE}/register/${res.body.workflow_id}`);
    let status = await ctx.http.get(path).set(auth());
    for (let i = 0; i < 100 && status.status === 202; i++) {
      expect(status.body).toMatchObject({ workflow_id: res.body.workflow_id, status: 'running' });
      await new Promise((r) => setTimeout(r, 100));
      status = await ctx.http.get(path).set(auth());
    }
    expect(status.status).toBe(200);
    expect(status.body.site.id).toBeGreaterThan(0);
    const again = await ctx.http.get(path).set(auth());
    expect(again.body).toEqual(status.body);
    const reg = await ctx.db('registrations').where({ workflow_id: res.body.workflow_id }).first('result');
    expect(reg.result).toEqual(status.body);
    // Status reads need no Temporal.
    const offline = await request(appWith({}, null)).get(path).set(auth());
    expect(offline.status).toBe(200);
    expect(offline.body).toEqual(status.body);
  });

  test('status of a failed registration is its 400; unknown ids and other workflows are 404', async () => {
    const app = appWith({ REGISTER_WAIT_SECONDS: 0 });
    await ctx.db.raw(`CREATE OR REPLACE FUNCTION reg_test_fail() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'injected failure'; END $$ LANGUAGE plpgsql`);
    await ctx.db.raw('CREATE TRIGGER reg_test_fail BEFORE INSERT ON payments FOR EACH ROW EXECUTE FUNCTION reg_test_fail()');
    let wf: string;
    try {
      const res = await post(body(), undefined, request(app));
      expect(res.status).toBe(202);
      wf = res.body.workflow_id;
      await ctx.temporal.client.workflow.getHandle(wf).result().catch(() => undefined);
    } finally {
      await ctx.db.raw('DROP TRIGGER IF EXISTS reg_test_fail ON payments');
    }
    const status = await ctx.http.get(`${BASE}/register/${wf}`).set(auth());
    expect(status.status).toBe(400);
    expect(status.body.code).toBe('wu_rest_registration_failed');
    for (const id of [`register-${crypto.randomUUID()}`, 'domain-check-1', 'x']) {
      const r = await ctx.http.get(`${BASE}/register/${id}`).set(auth());
      expect(r.status).toBe(404);
      expect(r.body.code).toBe('wu_rest_registration_not_found');
    }
  });

  test('Temporal unavailable: 503 wu_rest_temporal_unavailable, nothing written', async () => {
    const before = await counts();
    const rows = await ctx.db('registrations').count({ n: '*' });
    const res = await post(body(), undefined, request(appWith({}, null)));
    expect(res.status).toBe(503);
    expect(res.body).toEqual({ code: 'wu_rest_temporal_unavailable', message: expect.any(String), data: { status: 503, detail: 'Temporal is not configured.' } });
    expect(await counts()).toEqual(before);
    expect(await ctx.db('registrations').count({ n: '*' })).toEqual(rows);
  });

  test('Temporal down (nothing listening): 503 within 2 s, no stack, nothing written; the same key later registers once', async () => {
    const connection = Connection.lazy({ address: `127.0.0.1:${await freePort()}`, connectTimeout: '1s' });
    const temporal = { connection, client: new Client({ connection }), namespace: 'default', taskQueue: ctx.config.TEMPORAL_TASK_QUEUE, taskQueues: taskQueues(ctx.config) };
    const key = `down-${tag()}`;
    const b = body();
    const before = await counts();
    try {
      // A short wait: the client's retries of the refused connection end with it (then the connection can close).
      const app = appWith({ REGISTER_WAIT_SECONDS: 2 }, temporal);
      for (const [i, k] of [key, undefined, key].entries()) {
        const started = Date.now();
        const res = await post(k === undefined ? body() : b, k, request(app));
        // The first finds out within the call deadline; the circuit answers the next ones at once.
        expect(Date.now() - started).toBeLessThan(i === 0 ? 2000 : 200);
        expect(res.status).toBe(503);
        expect(res.body).toEqual({ code: 'wu_rest_temporal_unavailable', message: expect.any(String), data: { status: 503, detail: expect.any(String) } });
        expect(JSON.stringify(res.body)).not.toMatch(/\.(ts|js):\d+/);
      }
      expect(await counts()).toEqual(before);
      // The key's row says 503, which is never its final answer...
      expect(await regRow({ idempotency_key_sha256: sha256Hex(key) })).toMatchObject({ status: 'failed', error: { data: { status: 503 } }, password_hash: null });
      app.locals.temporal.close();
      await new Promise((r) => setTimeout(r, 2500));
    } finally {
      await connection.close().catch(() => undefined);
    }
    // ... so with Temporal back, the same key registers (once).
    const again = await post(b, key);
    expect(again.status).toBe(200);
    expect(await counts()).toEqual({ users: before.users + 1, customers: before.customers + 1, memberships: before.memberships + 1, payments: before.payments + 1, sites: before.sites + 1 });
    expect((await post(b, key)).body).toEqual(again.body);
  }, 60_000);

  test('the database not answering while the records are written: 503 (never 400), retried with the same key it registers', async () => {
    // The payment's invoice number waits for a lock another session holds: each try meets the
    // transaction's lock timeout; the local activity's tries run out; the client gets 503.
    const blocker = new pg.Client({ connectionString: ctx.dbUrl });
    await blocker.connect();
    const key = `db-down-${tag()}`;
    const b = body();
    const before = await counts();
    try {
      await blocker.query('BEGIN');
      await blocker.query('SELECT * FROM invoice_counter FOR UPDATE');
      const res = await post(b, key, request(appWith({ REGISTER_WAIT_SECONDS: 120 })));
      expect(res.status).toBe(503);
      expect(res.body).toMatchObject({ code: 'wu_rest_registration_unavailable', data: { status: 503 } });
      expect(await counts()).toEqual(before);
      const reg = await regRow({ idempotency_key_sha256: sha256Hex(key) });
      expect(reg).toMatchObject({ status: 'failed', error: { code: 'wu_rest_registration_unavailable' } });
      const failed = await ctx.temporal.client.workflow.getHandle(reg.workflow_id).result().catch((e: unknown) => e);
      expect(failed).toBeInstanceOf(WorkflowFailedError);
      expect((failed as WorkflowFailedError).cause).toMatchObject({ type: 'RegistrationNotCommitted' });
    } finally {
      await blocker.query('ROLLBACK');
      await blocker.end();
    }
    // The failed workflow may run again under the same id (ALLOW_DUPLICATE_FAILED_ONLY).
    const again = await post(b, key);
    expect(again.body).toEqual(expect.objectContaining({ customer: expect.anything() }));
    expect(again.status).toBe(200);
    expect(await counts()).toEqual({ users: before.users + 1, customers: before.customers + 1, memberships: before.memberships + 1, payments: before.payments + 1, sites: before.sites + 1 });
  }, 120_000);

  describe('after the answer: site provisioning from its template, with its compensation', () => {
    // A FIFO in the template's uploads cannot be copied: the step fails after its rows landed.
    const fifo = () => path.join(dataDir, 'uploads', 'sites', String(templateId), 'pipe');
    const provisioned = async (b: ReturnType<typeof body>) => {
      const res = await post(b);
      expect(res.status).toBe(200); // the answer does not wait for the provisioning
      const reg = await regRow({ customer_id: res.body.customer.id });
      const err = await ctx.temporal.client.workflow.getHandle(reg.workflow_id).result().catch((e: unknown) => e);
      return { res, reg: await regRow({ id: reg.id }), err: err as WorkflowFailedError };
    };
    beforeEach(() => execFileSync('mkfifo', [fifo()]));
    afterEach(() => fs.rmSync(fifo(), { force: true }));

    test('a step that fails is compensated: its rows and files are removed, the records stay, the workflow fails', async () => {
      const b = body({ site: { site_url: `comp${tag()}`, site_title: 'Compensated Shop', template_id: templateId } });
      const { res, reg, err } = await provisioned(b);
      expect(err).toBeInstanceOf(WorkflowFailedError);
      expect(err.cause).toMatchObject({ type: 'ProvisioningFailed' });
      expect(reg).toMatchObject({ status: 'completed', provisioning: 'compensated', provisioned: null, provisioning_error: { code: 'wu_rest_provisioning_failed', data: { step: 'provisionSite' } } });
      expect(await ctx.db('site_posts').where({ site_id: res.body.site.id }).orderBy('id').pluck('title')).toEqual(['Hello world!', 'Sample Page']);
      expect(await ctx.db('site_options').where({ site_id: res.body.site.id, name: 'template_color' }).first()).toBeUndefined();
      expect(fs.existsSync(path.join(dataDir, 'uploads', 'sites', String(res.body.site.id)))).toBe(false);
      expect(await get(`/sites/${res.body.site.id}`)).toEqual(res.body.site);
    });

    test('a compensation that cannot succeed ends visible (row, metric, failed workflow), not in an endless loop', async () => {
      await ctx.db.raw(`CREATE OR REPLACE FUNCTION reg_test_keep() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'posts cannot be deleted'; END $$ LANGUAGE plpgsql`);
      await ctx.db.raw('CREATE TRIGGER reg_test_keep BEFORE DELETE ON site_posts FOR EACH ROW EXECUTE FUNCTION reg_test_keep()');
      try {
        const started = Date.now();
        const { reg, err } = await provisioned(body({ site: { site_url: `stuck${tag()}`, site_title: 'Stuck Shop', template_id: templateId } }));
        expect(Date.now() - started).toBeLessThan(30_000);
        expect(err.cause).toMatchObject({ type: 'CompensationFailed' });
        expect(reg).toMatchObject({ status: 'completed', provisioning: 'compensation_failed', provisioning_error: { data: { step: 'undoSiteProvisioning', sqlstate: 'P0001' } } });
        const events = await history(reg.workflow_id);
        const undo = events.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'undoSiteProvisioning');
        expect(undo).toHaveLength(1);
        const undoStarted = events.find((e) => String(e.activityTaskStartedEventAttributes?.scheduledEventId) === String(undo[0].eventId));
        expect(undoStarted?.activityTaskStartedEventAttributes?.attempt).toBe(1); // not retried: it cannot succeed
        expect(await ctx.metrics.registry.getSingleMetricAsString('registrations_needing_attention')).toMatch(/registrations_needing_attention [1-9]/);
      } finally {
        await ctx.db.raw('DROP TRIGGER IF EXISTS reg_test_keep ON site_posts');
      }
    });
  });
});
