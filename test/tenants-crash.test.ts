import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { WorkflowFailedError } from '@temporalio/client';
import type { RunningWorker } from '../src/temporal/worker';
import { startWorker } from '../src/worker-runtime';
import { waitFor } from './estate-helpers';
import { BASE, createTestContext, type TestContext, startTestWorker } from './helpers';
import { makeSite, onServer, serverHas, settled, status, tenantEnv } from './tenant-helpers';
import { killWorkerProcess, spawnWorkerProcess } from './worker-process';

/**
 * The worker killed (SIGKILL) in the middle of a bootstrap and of a teardown, then another
 * started: each finishes exactly once, nothing duplicated and nothing lost.
 */
describe('tenant workflows survive a worker crash', () => {
  let ctx: TestContext;
  let env: Record<string, string>;
  let child: ChildProcess | undefined;
  let worker: RunningWorker | undefined;
  const shared = async (siteId: number) => (await ctx.db('site_posts').where({ site_id: siteId }).orderBy('id').select('id', 'title')).map((r) => ({ id: Number(r.id), title: r.title }));

  beforeAll(async () => {
    env = tenantEnv({ TENANT_WAIT_SECONDS: '0' });
    ctx = await createTestContext(env);
  });
  afterAll(async () => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
    await worker?.shutdown();
    await ctx?.close();
  });

  /** Waits until a statement matching `pattern` runs in the test database, then kills the worker. */
  async function killDuring(proc: ChildProcess, pattern: string): Promise<void> {
    const running = await waitFor(
      async () => (await ctx.db.raw("select count(*)::int as n from pg_stat_activity where datname = current_database() and state = 'active' and query ilike ?", [pattern])).rows[0].n > 0,
      (v) => v,
      30_000,
    );
    expect(running).toBe(true);
    await killWorkerProcess(proc);
  }

  const sleepTrigger = async (event: 'INSERT' | 'DELETE') => {
    await ctx.db.raw('CREATE OR REPLACE FUNCTION crash_slow() RETURNS trigger AS $$ BEGIN PERFORM pg_sleep(3); RETURN NULL; END $$ LANGUAGE plpgsql');
    await ctx.db.raw(`CREATE TRIGGER crash_slow BEFORE ${event} ON site_posts FOR EACH STATEMENT EXECUTE FUNCTION crash_slow()`);
  };
  const dropTrigger = () => ctx.db.raw('DROP TRIGGER IF EXISTS crash_slow ON site_posts');

  test('killed while pushing the data out, then killed while pulling it back', async () => {
    const site = await makeSite(ctx);
    const posts = await shared(site.siteId);
    expect(posts).toHaveLength(2);

    // Bootstrap: the worker dies while the push step deletes the pushed rows.
    child = await spawnWorkerProcess(ctx, env);
    await sleepTrigger('DELETE');
    const started = await ctx.http.post(`${BASE}/tenants/${site.siteId}/bootstrap`).set('Authorization', ctx.basic).send({});
    expect(started.status).toBe(202);
    await killDuring(child, 'delete from "site_posts"%');
    await dropTrigger();
    expect((await status(ctx, site.siteId)).body).toMatchObject({ state: 'bootstrapping', step: 'push' });

    worker = await startTestWorker(ctx);
    const done = await settled(ctx, site.siteId, 'bootstrapping', 90_000);
    expect(done.body).toMatchObject({ state: 'ready', ready: true });
    const t = await ctx.db('tenants').where({ site_id: site.siteId }).whereNot({ state: 'torn_down' }).first();
    expect(await shared(site.siteId)).toEqual([]);
    const inTenant = await onServer(t.database_name, async (c) => (await c.query('SELECT id::int, title FROM site_posts ORDER BY id')).rows);
    expect(inTenant).toEqual(posts);
    const history = await ctx.temporal.client.workflow.getHandle(t.workflow_id).fetchHistory();
    expect((history.events ?? []).some((e) => (e.activityTaskStartedEventAttributes?.attempt ?? 1) > 1)).toBe(true);
    await worker.shutdown();
    worker = undefined;

    // Teardown: the worker dies while the pull-back step inserts the rows back.
    child = await spawnWorkerProcess(ctx, env);
    await sleepTrigger('INSERT');
    const teardown = await ctx.http.delete(`${BASE}/tenants/${site.siteId}`).set('Authorization', ctx.basic);
    expect(teardown.status).toBe(202);
    expect(teardown.body.state).toBe('tearing_down');
    await killDuring(child, 'insert into "site_posts"%');
    await dropTrigger();

    worker = await startTestWorker(ctx);
    const gone = await waitFor(() => status(ctx, site.siteId), (r) => r.status === 404, 90_000);
    expect(gone.status).toBe(404);
    expect(await shared(site.siteId)).toEqual(posts);
    expect(await serverHas('database', t.database_name)).toBe(false);
    expect(await serverHas('role', t.role_name)).toBe(false);
    expect(fs.existsSync(t.filesystem_root)).toBe(false);
    expect(await ctx.db('tenant_routes').count({ n: '*' })).toEqual([{ n: 0 }]);
  }, 240_000);

  test('a step that cannot succeed fails the bootstrap with its reason; fixed, bootstrap again finishes', async () => {
    await worker?.shutdown();
    const site = await makeSite(ctx);
    // A worker without the credentials key: the database step cannot store credentials.
    worker = await startWorker({
      address: ctx.config.TEMPORAL_ADDRESS!,
      namespace: ctx.config.TEMPORAL_NAMESPACE,
      taskQueue: ctx.config.TEMPORAL_TASK_QUEUE,
      db: ctx.db,
      config: { ...ctx.config, TENANT_CREDENTIALS_KEY: undefined },
    });
    expect((await ctx.http.post(`${BASE}/tenants/${site.siteId}/bootstrap`).set('Authorization', ctx.basic).send({})).status).toBe(202);
    const failed = await settled(ctx, site.siteId);
    expect(failed.body).toMatchObject({ state: 'failed', ready: false, step: 'database' });
    expect(failed.body.error).toMatchObject({ operation: 'bootstrap', step: 'database' });
    expect(failed.body.error.message).toMatch(/TENANT_CREDENTIALS_KEY is not set on the worker/);
    // The run ends Failed (not Completed) once the registry recorded why.
    const bootstrapRun = ctx.temporal.client.workflow.getHandle((await ctx.db('tenants').where({ site_id: site.siteId }).first('workflow_id')).workflow_id);
    expect(((await bootstrapRun.result().catch((e: unknown) => e)) as WorkflowFailedError).cause).toMatchObject({
      type: 'TenantOperationFailed',
      details: [{ state: 'failed', step: 'database', error: expect.stringMatching(/TENANT_CREDENTIALS_KEY is not set/) }],
    });
    expect((await bootstrapRun.describe()).status.name).toBe('FAILED');
    // Nothing of the site moved yet.
    expect(await shared(site.siteId)).toHaveLength(2);
    // Verify of a failed tenant says what is missing.
    const verify = await ctx.http.post(`${BASE}/tenants/${site.siteId}/verify`).set('Authorization', ctx.basic);
    expect(verify.status).toBe(202);
    const checked = await settled(ctx, site.siteId, 'verifying');
    expect(checked.body.state).toBe('not_ready');
    expect(checked.body.checks.no_legacy.message).toMatch(/does not exist on .*Run bootstrap/);
    // Checks that ran and failed are an outcome, not a failed run.
    const verifyRun = ctx.temporal.client.workflow.getHandle((await ctx.db('tenants').where({ site_id: site.siteId }).first('workflow_id')).workflow_id);
    expect(await verifyRun.result()).toEqual({ state: 'not_ready' });
    expect((await verifyRun.describe()).status.name).toBe('COMPLETED');

    await worker.shutdown();
    worker = await startTestWorker(ctx);
    expect((await ctx.http.post(`${BASE}/tenants/${site.siteId}/bootstrap`).set('Authorization', ctx.basic).send({})).status).toBe(202);
    const done = await settled(ctx, site.siteId);
    expect(done.body).toMatchObject({ state: 'ready', ready: true, error: null });
    expect(await shared(site.siteId)).toEqual([]);
  }, 120_000);
});
