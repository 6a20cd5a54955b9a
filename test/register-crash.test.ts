import type { ChildProcess } from 'node:child_process';
import request from 'supertest';
import { createApp } from '../src/http/app';
import type { RunningWorker } from '../src/temporal/worker';
import { BASE, createTestContext, type TestContext, startTestWorker } from './helpers';
import { killWorkerProcess, spawnWorkerProcess, until } from './worker-process';

/**
 * The worker killed (SIGKILL) in the middle of a registration's records transaction (the
 * local activity, inside a workflow task), then another started: the task times out, the
 * transaction runs again and the registration completes exactly once.
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

  beforeAll(async () => {
    ctx = await createTestContext({ REGISTER_WAIT_SECONDS: '0' });
    await ctx.db('products').insert({ slug: 'crash-plan', name: 'Crash Plan', type: 'plan', amount: '9.5' });
  });
  afterAll(async () => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
    await worker?.shutdown();
    await ctx?.close();
  });

  test('killed while the records transaction runs: exactly one of every record afterwards', async () => {
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
    expect(await counts()).toEqual({
      users: before.users + 1,
      customers: before.customers + 1,
      memberships: before.memberships + 1,
      payments: before.payments + 1,
      sites: before.sites + 1,
    });
    expect(result.payment).toMatchObject({ status: 'completed', membership_id: result.membership.id, total: 9.5 });
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

  test('a worker that dies while the client waits: 202 with the status URL (not 503: Temporal itself answers), then 200 once another worker ran it', async () => {
    child = await spawnWorkerProcess(ctx);
    await ctx.db.raw("CREATE OR REPLACE FUNCTION crash_slow() RETURNS trigger AS $$ BEGIN PERFORM pg_sleep(4); RETURN NEW; END $$ LANGUAGE plpgsql");
    await ctx.db.raw('CREATE TRIGGER crash_slow BEFORE INSERT ON payments FOR EACH ROW EXECUTE FUNCTION crash_slow()');
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
    await ctx.db.raw('DROP TRIGGER crash_slow ON payments');
    const res = await answer;
    expect(res.status).toBe(202);
    expect(Date.now() - started).toBeLessThan(6000);
    const path = new URL(res.body.status_url).pathname;
    expect((await ctx.http.get(path).set('Authorization', ctx.basic)).status).toBe(202);

    worker = await startTestWorker(ctx);
    await ctx.temporal.client.workflow.getHandle(res.body.workflow_id).result();
    const status = await ctx.http.get(path).set('Authorization', ctx.basic);
    expect(status.status).toBe(200);
    expect(status.body.customer).toMatchObject({ username: 'waituser' });
    expect(Number((await ctx.db('users').where({ username: 'waituser' }).count({ n: '*' }))[0].n)).toBe(1);
  }, 120_000);
});
