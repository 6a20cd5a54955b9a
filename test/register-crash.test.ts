import type { ChildProcess } from 'node:child_process';
import request from 'supertest';
import { createApp } from '../src/app';
import { MembershipLifecycles } from '../src/memberships/lifecycle';
import { RegistrationRecords } from '../src/register/records';
import { RegistrationStore } from '../src/register/store';
import type { RegistrationRequest } from '../src/register/types';
import type { RunningWorker } from '../src/temporal/worker';
import { WorkflowIds } from '../src/temporal/workflow-ids';
import { BASE, createTestContext, type TestContext, startTestWorker } from './helpers';
import { killWorkerProcess, spawnWorkerProcess, until } from './worker-process';

/**
 * The worker killed (SIGKILL) in the middle of a registration's records transaction (the
 * local activity, inside a workflow task), then another started: the task times out, the
 * transaction runs again and the registration completes exactly once. With
 * REGISTER_WAIT_SECONDS=0 the API starts the workflow and leaves the commit to it: the same
 * path as an API process that dies right after the start.
 */
describe('/register survives a worker crash', () => {
  let ctx: TestContext;
  let child: ChildProcess | undefined;
  let worker: RunningWorker | undefined;
  const TABLES = ['users', 'customers', 'memberships', 'payments', 'sites'] as const;
  const counts = async () => {
    const out: Record<string, number> = {};
    for (const t of TABLES) out[t] = Number((await ctx.db(t).count({ n: '*' }))[0].n);
    return out;
  };
  const oneMoreOfEach = (before: Record<string, number>) => Object.fromEntries(TABLES.map((t) => [t, before[t] + 1]));

  beforeAll(async () => {
    ctx = await createTestContext({ REGISTER_WAIT_SECONDS: '0' });
    await ctx.db('products').insert({ slug: 'crash-plan', name: 'Crash Plan', type: 'plan', amount: '9.5' });
    await ctx.db('discount_codes').insert({ name: 'Crash ten', code: 'CRASH10', value: '10', type: 'percentage', max_uses: 5 });
  });
  afterAll(async () => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
    await worker?.shutdown();
    await ctx?.close();
  });

  test('killed while the records transaction runs: exactly one of every record afterwards, the discount code used once, one registration event', async () => {
    child = await spawnWorkerProcess(ctx);

    // The payment insert hangs, so the crash lands inside the transaction.
    await ctx.db.raw("CREATE OR REPLACE FUNCTION crash_slow() RETURNS trigger AS $$ BEGIN PERFORM pg_sleep(4); RETURN NEW; END $$ LANGUAGE plpgsql");
    await ctx.db.raw('CREATE TRIGGER crash_slow BEFORE INSERT ON payments FOR EACH ROW EXECUTE FUNCTION crash_slow()');
    const before = await counts();
    const res = await ctx.http
      .post(`${BASE}/register`)
      .set('Authorization', ctx.basic)
      .send({
        customer: { username: 'crashuser', password: 'secret123', email: 'crash@example.com' },
        products: ['crash-plan'],
        site: { site_url: 'crashsite', site_title: 'Crash Site' },
        membership: { status: 'active' },
        payment: { status: 'completed' },
        discount_code: 'crash10',
      });
    expect(res.status).toBe(202);
    const workflowId = res.body.workflow_id as string;
    // Kill when the payment step's insert is running (sleeping in the trigger).
    const inPaymentInsert = async () => {
      const r = await ctx.db.raw("select count(*)::int as n from pg_stat_activity where datname = current_database() and state = 'active' and query ilike 'insert into \"payments\"%'");
      return r.rows[0].n > 0;
    };
    await until(inPaymentInsert, 30_000);
    // Nothing is visible until the transaction commits.
    expect(await ctx.db('registrations').where({ workflow_id: workflowId }).first('status', 'customer_id')).toEqual({ status: 'running', customer_id: null });
    expect(await counts()).toEqual(before);
    await killWorkerProcess(child);
    await ctx.db.raw('DROP TRIGGER crash_slow ON payments');

    worker = await startTestWorker(ctx);
    await ctx.temporal.client.workflow.getHandle(workflowId).result();
    const reg = await ctx.db('registrations').where({ workflow_id: workflowId }).first();
    expect(reg.status).toBe('completed');
    const result = reg.result;
    expect(await counts()).toEqual(oneMoreOfEach(before));
    // 9.50 less 10%: 8.55. The code's use is counted once, by the transaction that committed.
    expect(result.payment).toMatchObject({ status: 'completed', membership_id: result.membership.id, total: 8.55, discount_total: 0.95, discount_code: 'CRASH10' });
    expect((await ctx.db('discount_codes').where({ code: 'CRASH10' }).first('uses')).uses).toBe(1);
    // One registration_completed event, written by that transaction, with the answer: the code applied is part of it.
    const registered = await ctx.db('events').where({ slug: 'registration_completed', object_id: reg.id });
    expect(registered).toHaveLength(1);
    expect(registered[0].payload).toMatchObject({ workflow_id: workflowId, payment: { discount_code: 'CRASH10', discount_total: 0.95 }, membership: { discount_code: 'CRASH10' } });
    expect(result.site).toMatchObject({ type: 'customer_owned', active: true });
    // The history shows the dead worker's workflow task timing out, then one transaction recorded.
    const history = await ctx.temporal.client.workflow.getHandle(workflowId).fetchHistory();
    const events = history.events ?? [];
    expect(events.some((e) => e.workflowTaskTimedOutEventAttributes)).toBe(true);
    expect(events.filter((e) => e.markerRecordedEventAttributes)).toHaveLength(1);
    const status = await request(createApp({ config: ctx.config, db: ctx.db, settings: ctx.settings, temporal: ctx.temporal, metrics: ctx.metrics }))
      .get(`${BASE}/register/${workflowId}`)
      .set('Authorization', ctx.basic);
    expect(status.status).toBe(200);
    expect(status.body).toEqual(result);
    await worker.shutdown();
    worker = undefined;
  }, 120_000);

  test('a commit slower than REGISTER_WAIT_SECONDS, with the worker killed meanwhile: 202 with the status URL, then 200, exactly once', async () => {
    // The API commits the records itself right after starting the workflow: the client waits
    // on that transaction, not on a worker. Here it is slow (the payment insert sleeps 6 s)
    // and the worker dies meanwhile; the workflow, on another worker, reads what the API
    // committed instead of writing it again.
    child = await spawnWorkerProcess(ctx);
    await ctx.db.raw("CREATE OR REPLACE FUNCTION crash_slow() RETURNS trigger AS $$ BEGIN PERFORM pg_sleep(6); RETURN NEW; END $$ LANGUAGE plpgsql");
    await ctx.db.raw('CREATE TRIGGER crash_slow BEFORE INSERT ON payments FOR EACH ROW EXECUTE FUNCTION crash_slow()');
    const before = await counts();
    const app = createApp({ config: { ...ctx.config, REGISTER_WAIT_SECONDS: 3 }, db: ctx.db, settings: ctx.settings, temporal: ctx.temporal, metrics: ctx.metrics });
    const started = Date.now();
    const answer = request(app)
      .post(`${BASE}/register`)
      .set('Authorization', ctx.basic)
      .send({ customer: { username: 'waituser', password: 'secret123', email: 'wait@example.com' }, products: ['crash-plan'], site: { site_url: 'waitsite', site_title: 'Wait Site' } })
      .then((r) => r);
    await until(async () => {
      const r = await ctx.db.raw("select count(*)::int as n from pg_stat_activity where datname = current_database() and state = 'active' and query ilike 'insert into \"payments\"%'");
      return r.rows[0].n > 0;
    }, 30_000);
    await killWorkerProcess(child);
    const res = await answer;
    expect(res.status).toBe(202);
    expect(Date.now() - started).toBeLessThan(6000);
    const path = new URL(res.body.status_url).pathname;
    expect((await ctx.http.get(path).set('Authorization', ctx.basic)).status).toBe(202);
    // Waits for the slow transaction (it holds payments), which then commits.
    await ctx.db.raw('DROP TRIGGER crash_slow ON payments');

    worker = await startTestWorker(ctx);
    await ctx.temporal.client.workflow.getHandle(res.body.workflow_id).result();
    const status = await ctx.http.get(path).set('Authorization', ctx.basic);
    expect(status.status).toBe(200);
    expect(status.body.customer).toMatchObject({ username: 'waituser' });
    expect(await counts()).toEqual(oneMoreOfEach(before));
    const events = (await ctx.temporal.client.workflow.getHandle(res.body.workflow_id).fetchHistory()).events ?? [];
    expect(events.filter((e) => e.markerRecordedEventAttributes)).toHaveLength(1);
  }, 120_000);

  test("the workflow's step never queues behind the API's commit of the same row: it polls, holding no lock wait, then reads that outcome", async () => {
    const store = new RegistrationStore(ctx.db);
    const row = (await store.claim({ workflowId: `register-settle-${Date.now()}`, keySha256: null, requestHmac: 'x', request: {} as RegistrationRequest, passwordHash: null }))!;
    const ids = { customer_id: 1, membership_id: 2, payment_id: 3, site_id: null };
    // "The API's commit": holds the row, decides it, commits later.
    const api = await ctx.db.transaction();
    try {
      await api('registrations').where({ id: row.id }).forUpdate().first();
      await api('registrations').where({ id: row.id }).update({ status: 'completed', ...ids, provisioning: null });
      let settled: unknown;
      const settling = new RegistrationRecords(ctx.db, new MembershipLifecycles(new WorkflowIds(ctx.db, ctx.config.WORKFLOW_ID_PREFIX), null)).settle(Number(row.id)).then((o) => (settled = o));
      await new Promise((r) => setTimeout(r, 300));
      expect(settled).toBeUndefined();
      const waiting = await ctx.db.raw('select count(*)::int as n from pg_locks l join pg_stat_activity a on a.pid = l.pid where not l.granted and a.datname = current_database()');
      expect(waiting.rows[0].n).toBe(0);
      await api.commit();
      expect(await settling).toEqual({ status: 'committed', ids, provision: false });
    } finally {
      if (!api.isCompleted()) await api.rollback();
    }
  });

  test('a commit that ends in a refusal after the 202 was given: the status answers the refusal, nothing is written, the API goes on', async () => {
    // The payment insert sleeps past REGISTER_WAIT_SECONDS, then a rule of the database refuses it.
    await ctx.db.raw("CREATE OR REPLACE FUNCTION late_refusal() RETURNS trigger AS $$ BEGIN PERFORM pg_sleep(2); RAISE EXCEPTION 'refused late'; END $$ LANGUAGE plpgsql");
    await ctx.db.raw('CREATE TRIGGER late_refusal BEFORE INSERT ON payments FOR EACH ROW EXECUTE FUNCTION late_refusal()');
    const rejections: unknown[] = [];
    const onRejection = (reason: unknown) => rejections.push(reason);
    process.on('unhandledRejection', onRejection);
    try {
      const before = await counts();
      const app = createApp({ config: { ...ctx.config, REGISTER_WAIT_SECONDS: 1 }, db: ctx.db, settings: ctx.settings, temporal: ctx.temporal, metrics: ctx.metrics });
      const res = await request(app)
        .post(`${BASE}/register`)
        .set('Authorization', ctx.basic)
        .send({ customer: { username: 'lateuser', password: 'secret123', email: 'late@example.com' }, products: ['crash-plan'], payment: { status: 'completed' } });
      expect(res.status).toBe(202);
      const path = new URL(res.body.status_url).pathname;
      await until(async () => (await ctx.http.get(path).set('Authorization', ctx.basic)).status !== 202, 15_000);
      const status = await ctx.http.get(path).set('Authorization', ctx.basic);
      expect(status.status).toBe(400);
      expect(status.body).toMatchObject({ code: 'wu_rest_registration_failed', data: { status: 400, sqlstate: 'P0001' } });
      expect(await counts()).toEqual(before);
      await new Promise((r) => setImmediate(r));
      expect(rejections).toEqual([]);
    } finally {
      process.off('unhandledRejection', onRejection);
      await ctx.db.raw('DROP TRIGGER late_refusal ON payments');
    }
  }, 60_000);
});
