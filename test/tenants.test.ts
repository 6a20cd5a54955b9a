import fs from 'node:fs';
import path from 'node:path';
import { WorkflowFailedError } from '@temporalio/client';
import { WorkflowStarts } from '../src/temporal/starts';
import type { RunningWorker } from '../src/temporal/worker';
import { decryptSecret, parseCredentialsKey } from '../src/tenants/crypto';
import { startTenantPushRelay } from '../src/tenants/push-relay';
import { waitFor } from './estate-helpers';
import { BASE, createTestContext, type TestContext, startTestWorker } from './helpers';
import { makeSite, onServer, serverHas, settled, status, tenantEnv } from './tenant-helpers';

/**
 * Isolated tenants against the real PostgreSQL server: real databases, roles and grants,
 * real folders, and the three workflows on the real Temporal server.
 */
describe('isolated tenants', () => {
  let ctx: TestContext;
  let worker: RunningWorker | undefined;
  let env: Record<string, string>;
  const auth = () => ({ Authorization: ctx.basic });
  const post = (p: string, body: unknown = {}) => ctx.http.post(`${BASE}${p}`).set(auth()).send(body as object);
  const tenantRow = (siteId: number) => ctx.db('tenants').where({ site_id: siteId }).whereNot({ state: 'torn_down' }).first();
  const login = async (siteId: number) => {
    const t = await tenantRow(siteId);
    return { user: t.role_name as string, password: decryptSecret(parseCredentialsKey(env.TENANT_CREDENTIALS_KEY), t.credentials, t.uid) };
  };
  const sharedCount = async (siteId: number) => {
    const o = Number((await ctx.db('site_options').where({ site_id: siteId }).count({ n: '*' }))[0].n);
    const p = Number((await ctx.db('site_posts').where({ site_id: siteId }).count({ n: '*' }))[0].n);
    return o + p;
  };

  // A (owner + a linked editor, an upload, bound to the host it asks for) and B (placed by load).
  let A: Awaited<ReturnType<typeof makeSite>>;
  let B: Awaited<ReturnType<typeof makeSite>>;
  let linkedUser: { id: number; username: string };
  let seeded = 0;

  beforeAll(async () => {
    const admin = process.env.HF_TEST_ADMIN_DB_URL!;
    env = tenantEnv({ TENANT_DATABASE_HOSTS: `primary=${admin},secondary=${admin}` });
    ctx = await createTestContext(env);
    A = await makeSite(ctx);
    B = await makeSite(ctx);
    const [u] = await ctx.db('users').insert({ username: `editor${A.siteId}x${process.pid}`, email: `editor${A.siteId}x${process.pid}@example.com`, password_hash: 'scrypt$x' }).returning(['id', 'username']);
    linkedUser = { id: Number(u.id), username: u.username };
    const linked = await ctx.http.post(`${BASE}/sites/${A.siteId}/users`).set('Authorization', ctx.basic).send({ user_id: linkedUser.id });
    expect(linked.status).toBe(200);
    const uploads = path.join(env.DATA_DIR, 'uploads', 'sites', String(A.siteId));
    fs.mkdirSync(uploads, { recursive: true });
    fs.writeFileSync(path.join(uploads, 'logo.txt'), 'logo bytes');
    seeded = await sharedCount(A.siteId);
  });
  afterAll(async () => {
    await worker?.shutdown();
    await ctx?.close();
  });

  test('every route needs the API credentials', async () => {
    for (const [method, p] of [
      ['post', `/tenants/${A.siteId}/bootstrap`],
      ['get', `/tenants/${A.siteId}/migration-status`],
      ['post', `/tenants/${A.siteId}/verify`],
      ['delete', `/tenants/${A.siteId}`],
    ] as const) {
      const res = await ctx.http[method](`${BASE}${p}`);
      expect(res.status).toBe(401);
      expect(res.body.code).toBe('rest_forbidden');
    }
    expect(await ctx.db('tenants').count({ n: '*' })).toEqual([{ n: 0 }]);
  });

  test('bad input and unknown sites change nothing', async () => {
    const badHost = await post(`/tenants/${A.siteId}/bootstrap`, { database_host: 'nowhere' });
    expect(badHost.status).toBe(400);
    expect(badHost.body.code).toBe('wu_rest_invalid_parameter');
    expect(badHost.body.data.params.database_host).toMatch(/primary, secondary/);
    const typed = await post(`/tenants/${A.siteId}/bootstrap`, { database_host: 7 });
    expect(typed.status).toBe(400);
    expect(Object.keys(typed.body.data.params)).toEqual(['database_host']);
    const notJson = await ctx.http.post(`${BASE}/tenants/${A.siteId}/bootstrap`).set(auth()).set('Content-Type', 'application/json').send('{nope');
    expect(notJson.status).toBe(400);
    expect(notJson.body.code).toBe('rest_invalid_json');

    expect((await post('/tenants/999999/bootstrap')).body.code).toBe('wu_rest_site_invalid_id');
    expect((await post('/tenants/999999/bootstrap')).status).toBe(404);
    expect((await ctx.http.get(`${BASE}/tenants/abc/migration-status`).set(auth())).body.code).toBe('rest_no_route');
    for (const res of [await status(ctx, A.siteId), await post(`/tenants/${A.siteId}/verify`), await ctx.http.delete(`${BASE}/tenants/${A.siteId}`).set(auth())]) {
      expect(res.status).toBe(404);
      expect(res.body.code).toBe('wu_rest_tenant_not_found');
    }
    expect((await status(ctx, 999999)).body.code).toBe('wu_rest_site_invalid_id');
    expect(await ctx.db('tenants').count({ n: '*' })).toEqual([{ n: 0 }]);
  });

  test('a bootstrap whose start answer is lost: 202, and the relay\'s retry finds the run that start made instead of starting another', async () => {
    const site = await makeSite(ctx);
    const workflows = ctx.temporal.client.workflow;
    const realStart = workflows.start.bind(workflows);
    const start = jest.spyOn(workflows, 'start').mockImplementationOnce(async (...args: Parameters<typeof realStart>) => {
      await realStart(...args);
      throw new Error('4 DEADLINE_EXCEEDED: Deadline exceeded (the answer was lost)');
    });
    try {
      const res = await post(`/tenants/${site.siteId}/bootstrap`);
      expect(res.status).toBe(202);
      expect(res.body.state).toBe('bootstrapping');
      const t = await tenantRow(site.siteId);
      expect(t.workflow_id).toBe(`${await ctx.app.locals.temporal.ids.prefix()}-tenant-bootstrap-${t.uid}`);
      const entry = await ctx.db('workflow_starts').where({ workflow_id: t.workflow_id }).first();
      expect(entry).toMatchObject({ workflow_type: 'tenantBootstrap', attempts: 1, started_at: null });
      const first = await workflows.getHandle(t.workflow_id).describe();
      // The retry (the relay's, here called directly) describes the run, finds its own entry in the memo, and only marks it.
      expect(await new WorkflowStarts(ctx.db, ctx.app.locals.temporal).attempt(entry.id)).toBe('started');
      expect(start).toHaveBeenCalledTimes(1);
      const now = await workflows.getHandle(t.workflow_id).describe();
      expect(now.runId).toBe(first.runId);
      expect(now.memo).toMatchObject({ outbox_start_id: Number(entry.id), tenant_uid: t.uid });
      expect(await ctx.db('workflow_starts').where({ id: entry.id }).first()).toMatchObject({ attempts: 2, started_at: expect.any(Date) });
      // Not this file's concern any further.
      await workflows.getHandle(t.workflow_id).terminate('test done');
      await ctx.db('tenants').where({ id: t.id }).delete();
    } finally {
      start.mockRestore();
    }
  });

  test('bootstrap answers 202 at once; a second call joins; verify and teardown wait their turn', async () => {
    // No worker yet: the workflow is queued, so the tenant stays in bootstrapping.
    const first = await post(`/tenants/${A.siteId}/bootstrap`, { database_host: 'secondary' });
    expect(first.status).toBe(202);
    expect(first.body).toMatchObject({ site_id: A.siteId, isolation_model: 'sovereign', state: 'bootstrapping', ready: false, database_host: 'secondary' });
    expect(first.body.verification).toEqual({ no_legacy: 'pending', sovereign_push: 'pending', tenant_users: 'pending' });
    expect(first.headers.location).toBe(first.body.status_url);
    expect(first.body.status_url).toMatch(new RegExp(`/wp-json/wu/v2/tenants/${A.siteId}/migration-status$`));
    const again = await post(`/tenants/${A.siteId}/bootstrap`);
    expect(again.status).toBe(202);
    expect(again.body.workflow_id).toBe(first.body.workflow_id);
    expect(again.body.message).toMatch(/joined/);
    const desc = await ctx.temporal.client.workflow.getHandle(first.body.workflow_id).describe();
    expect(await desc.staticSummary()).toBe(`Tenant bootstrap, site ${A.siteId}`);
    const other = await post(`/tenants/${A.siteId}/bootstrap`, { database_host: 'primary' });
    expect(other.status).toBe(409);
    expect(other.body.code).toBe('wu_rest_tenant_host_bound');

    const verify = await post(`/tenants/${A.siteId}/verify`);
    expect(verify.status).toBe(409);
    expect(verify.body.code).toBe('wu_rest_tenant_busy');
    const teardown = await ctx.http.delete(`${BASE}/tenants/${A.siteId}`).set(auth());
    expect(teardown.status).toBe(409);
    expect(teardown.body.data.state).toBe('bootstrapping');
    expect(await ctx.db('tenants').count({ n: '*' })).toEqual([{ n: 1 }]);

    const b = await post(`/tenants/${B.siteId}/bootstrap`);
    expect(b.status).toBe(202);

    worker = await startTestWorker(ctx);
    for (const site of [A, B]) {
      const done = await settled(ctx, site.siteId);
      expect(done.status).toBe(200);
      expect(done.body).toMatchObject({ ready: true, state: 'ready', verification: { no_legacy: 'passed', sovereign_push: 'passed', tenant_users: 'passed' } });
    }
    // B went to the host with fewer tenants.
    expect((await status(ctx, B.siteId)).body.database_host).toBe('primary');
    // Becoming ready is an event, its payload the status the API answers.
    const ready = await ctx.db('events').where({ slug: 'tenant_ready', object_type: 'tenant', object_id: A.siteId });
    expect(ready).toHaveLength(1);
    const { message: _message, status_url: _url, ...answered } = (await status(ctx, A.siteId)).body;
    expect(ready[0].payload).toMatchObject({ ...answered, date_modified: expect.any(String) });
  });

  test('the tenant is real: its own database and role, its data and users, its folder and route', async () => {
    const t = await tenantRow(A.siteId);
    expect(await serverHas('database', t.database_name)).toBe(true);
    expect(await serverHas('role', t.role_name)).toBe(true);
    const creds = await login(A.siteId);

    // The data moved: none left in the shared tables, all of it in the tenant database.
    expect(await sharedCount(A.siteId)).toBe(0);
    const inTenant = await onServer(t.database_name, async (c) => {
      const o = (await c.query('SELECT name, value FROM site_options ORDER BY name')).rows;
      const p = (await c.query('SELECT title FROM site_posts ORDER BY id')).rows;
      const u = (await c.query('SELECT id::int, username, role, is_admin FROM users ORDER BY id')).rows;
      return { o, p, u };
    }, creds);
    expect(inTenant.o.length + inTenant.p.length).toBe(seeded);
    expect(inTenant.o).toContainEqual({ name: 'blogname', value: 'Tenant Site' });
    expect(inTenant.p.map((r) => r.title)).toEqual(['Hello world!', 'Sample Page']);
    expect(inTenant.u).toEqual(
      [
        { id: A.userId, username: expect.any(String), role: 'administrator', is_admin: true },
        { id: linkedUser.id, username: linkedUser.username, role: 'editor', is_admin: false },
      ].sort((x, y) => x.id - y.id),
    );

    // The role reaches only its own database: not B's, and nothing of the network's.
    const bTenant = await tenantRow(B.siteId);
    await expect(onServer(bTenant.database_name, (c) => c.query('SELECT 1'), creds)).rejects.toThrow(/permission denied for database/);
    // The connection itself is refused: the network's database, and the server's own ones where the suite's server is embedded.
    const closed = [ctx.dbUrl.split('/').pop()!, ...(process.env.TEST_DATABASE_URL ? [] : ['postgres', 'template1'])];
    for (const database of closed) {
      await expect(onServer(database, (c) => c.query('SELECT 1'), creds)).rejects.toThrow(`permission denied for database "${database}"`);
    }

    // Files and routing.
    expect(fs.readFileSync(path.join(t.filesystem_root, 'uploads', 'logo.txt'), 'utf8')).toBe('logo bytes');
    expect(fs.existsSync(path.join(env.DATA_DIR, 'uploads', 'sites', String(A.siteId)))).toBe(false);
    const route = await ctx.db('tenant_routes').where({ tenant_id: t.id }).first();
    expect(route).toMatchObject({ site_id: A.siteId, database_host: 'secondary', database_name: t.database_name, path: '/' });

    // Credentials are encrypted at rest and never answered.
    expect(t.credentials).toMatch(/^v1:/);
    expect(t.credentials).not.toContain(creds.password);
    const res = await status(ctx, A.siteId);
    expect(JSON.stringify(res.body)).not.toContain(creds.password);
    expect(res.body).not.toHaveProperty('credentials');
    expect(res.body.checks.tenant_users.message).toMatch(/exactly the 2 expected user/);

    // A ready tenant: bootstrap is a no-op that says so.
    const again = await post(`/tenants/${A.siteId}/bootstrap`);
    expect(again.status).toBe(200);
    expect(again.body.message).toMatch(/already isolated/);
    expect(again.body.workflow_id).toBe(res.body.workflow_id);

    // An isolated site cannot be deleted under the tenant's feet.
    const del = await ctx.http.delete(`${BASE}/sites/${A.siteId}`).set(auth());
    expect(del.status).toBe(409);
    expect(del.body.code).toBe('wu_rest_site_isolated');
  });

  const verify = async (siteId: number) => {
    const res = await post(`/tenants/${siteId}/verify`);
    expect(res.status).toBe(200);
    return res.body;
  };
  const repair = async (siteId: number) => {
    const res = await post(`/tenants/${siteId}/bootstrap`);
    expect(res.status).toBe(202);
    const done = await settled(ctx, siteId);
    expect(done.body).toMatchObject({ state: 'ready', ready: true });
  };

  test('a removed user fails tenant_users with a message naming it; bootstrap again repairs it', async () => {
    const t = await tenantRow(A.siteId);
    await onServer(t.database_name, (c) => c.query('DELETE FROM users WHERE id = $1', [linkedUser.id]));
    const body = await verify(A.siteId);
    expect(body.ready).toBe(false);
    expect(body.state).toBe('not_ready');
    expect(body.verification).toEqual({ no_legacy: 'passed', sovereign_push: 'passed', tenant_users: 'failed' });
    expect(body.checks.tenant_users.message).toContain(`missing user(s): ${linkedUser.id} (${linkedUser.username})`);
    expect(body.checks.tenant_users.message).toMatch(/expected 2 user\(s\), found 1: run bootstrap again/);
    await repair(A.siteId);
    expect((await verify(A.siteId)).ready).toBe(true);
  });

  test('a shared row left behind fails no_legacy; bootstrap again pushes it', async () => {
    const before = await tenantRow(A.siteId);
    await ctx.db('site_options').insert({ site_id: A.siteId, name: 'left_behind', value: 'x' });
    const body = await verify(A.siteId);
    expect(body.verification).toEqual({ no_legacy: 'failed', sovereign_push: 'passed', tenant_users: 'passed' });
    expect(body.checks.no_legacy.message).toContain(`1 row(s) in site_options of site ${A.siteId} remain in the shared tables`);
    await repair(A.siteId);
    expect(await sharedCount(A.siteId)).toBe(0);
    const moved = await onServer(before.database_name, async (c) => (await c.query("SELECT value FROM site_options WHERE name = 'left_behind'")).rows);
    expect(moved).toEqual([{ value: 'x' }]);
  });

  test('a revoked grant fails sovereign_push naming the privilege; bootstrap again restores it', async () => {
    const t = await tenantRow(A.siteId);
    await onServer(t.database_name, (c) => c.query(`REVOKE INSERT ON site_posts FROM "${t.role_name}"`));
    const body = await verify(A.siteId);
    expect(body.verification).toEqual({ no_legacy: 'passed', sovereign_push: 'failed', tenant_users: 'passed' });
    expect(body.checks.sovereign_push.message).toContain(`lacks INSERT on site_posts; run bootstrap again to restore the grants`);
    await repair(A.siteId);
  });

  test('failed push work fails sovereign_push with its error', async () => {
    const t = await tenantRow(A.siteId);
    const [job] = await ctx.db('tenant_push_jobs').insert({ tenant_id: t.id, kind: 'site_posts', status: 'failed', attempts: 5, last_error: 'connection refused' }).returning('id');
    const body = await verify(A.siteId);
    expect(body.verification.sovereign_push).toBe('failed');
    expect(body.checks.sovereign_push.message).toContain(`push job ${job.id} (site_posts) failed after 5 attempt(s): connection refused`);
    await repair(A.siteId); // the failed job is taken up again and finishes
    expect((await ctx.db('tenant_push_jobs').where({ id: job.id }).first()).status).toBe('done');
  });

  test('verify changes nothing but the results', async () => {
    const t = await tenantRow(A.siteId);
    const snapshot = () =>
      onServer(t.database_name, async (c) => {
        const out: Record<string, unknown> = {};
        for (const table of ['users', 'site_options', 'site_posts', 'login_keys', 'push_probe']) out[table] = (await c.query(`SELECT * FROM ${table} ORDER BY 1`)).rows;
        return out;
      });
    const before = await snapshot();
    const sharedBefore = await sharedCount(A.siteId);
    expect((await verify(A.siteId)).ready).toBe(true);
    expect(await snapshot()).toEqual(before);
    expect(await sharedCount(A.siteId)).toBe(sharedBefore);
  });

  test("a network change to a tenant's users reaches the tenant database (outbox, relay, tenantPush)", async () => {
    const relay = startTenantPushRelay({ db: ctx.db, temporal: ctx.app.locals.temporal, intervalMs: 500 });
    const t = await tenantRow(A.siteId);
    const tenantUsers = () => onServer(t.database_name, async (c) => (await c.query('SELECT id::int, email, role FROM users ORDER BY id')).rows);
    try {
      const email = `moved${A.customerId}x${process.pid}@example.com`;
      const changed = await ctx.http.put(`${BASE}/customers/${A.customerId}`).set(auth()).send({ email });
      expect(changed.status).toBe(200);
      // Queued in the same transaction as the change.
      expect(await ctx.db('tenant_push_jobs').where({ tenant_id: t.id, kind: 'users' }).whereIn('status', ['queued', 'running', 'done']).count({ n: '*' })).not.toEqual([{ n: 0 }]);
      const owner = await waitFor(tenantUsers, (rows) => rows.some((r) => r.id === A.userId && r.email === email), 30_000);
      expect(owner.find((r) => r.id === A.userId)?.email).toBe(email);

      const [extra] = await ctx.db('users').insert({ username: `late${A.siteId}x${process.pid}`, email: `late${A.siteId}x${process.pid}@example.com`, password_hash: 'scrypt$x' }).returning('id');
      const extraId = Number(extra.id);
      expect((await post(`/sites/${A.siteId}/users`, { user_id: extraId, role: 'author' })).status).toBe(200);
      expect(await waitFor(tenantUsers, (rows) => rows.some((r) => r.id === extraId && r.role === 'author'), 30_000)).toContainEqual(expect.objectContaining({ id: extraId, role: 'author' }));
      expect((await ctx.http.delete(`${BASE}/sites/${A.siteId}/users/${extraId}`).set(auth())).status).toBe(200);
      const after = await waitFor(tenantUsers, (rows) => !rows.some((r) => r.id === extraId), 30_000);
      expect(after.map((r) => r.id)).not.toContain(extraId);

      // Nothing left queued or failed, and the tenant verifies.
      await waitFor(
        async () => Number((await ctx.db('tenant_push_jobs').where({ tenant_id: t.id }).whereIn('status', ['queued', 'running', 'failed']).count({ n: '*' }))[0].n),
        (n) => n === 0,
        30_000,
      );
      expect((await verify(A.siteId)).ready).toBe(true);
    } finally {
      await relay.stop();
    }
  });

  test('a verify whose start fails: 202, its start waits in the outbox beside the state, and the retry carries it out', async () => {
    const start = jest.spyOn(ctx.temporal.client.workflow, 'start').mockRejectedValue(new Error('14 UNAVAILABLE: No connection established'));
    let res;
    try {
      res = await post(`/tenants/${A.siteId}/verify`);
    } finally {
      start.mockRestore();
    }
    // Not the answer of the id's previous (finished) verify run: this one has not started.
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ state: 'verifying' });
    const t = await tenantRow(A.siteId);
    const entry = await ctx.db('workflow_starts').where({ workflow_id: t.workflow_id }).whereNull('started_at').first();
    expect(entry).toMatchObject({ workflow_type: 'tenantVerifyWorkflow', attempts: 1 });
    // Verifying again meanwhile leaves the start to the outbox (no second start).
    expect((await post(`/tenants/${A.siteId}/verify`)).status).toBe(202);
    expect(await ctx.db('workflow_starts').where({ workflow_id: t.workflow_id }).whereNull('started_at').count({ n: '*' })).toEqual([{ n: 1 }]);
    expect(await new WorkflowStarts(ctx.db, ctx.app.locals.temporal).attempt(entry.id)).toBe('started');
    const done = await waitFor(async () => (await status(ctx, A.siteId)).body, (b) => b.state !== 'verifying', 30_000);
    expect(done).toMatchObject({ state: 'ready', ready: true });
  });

  test('a teardown step that gives up: 503 teardown_incomplete with the step, the run Failed; DELETE again finishes later', async () => {
    const before = await tenantRow(B.siteId);
    await ctx.db('tenants').where({ id: before.id }).update({ database_host: 'nowhere' });
    try {
      const res = await ctx.http.delete(`${BASE}/tenants/${B.siteId}`).set(auth());
      expect(res.status).toBe(503);
      expect(res.body).toMatchObject({ code: 'wu_rest_tenant_teardown_incomplete', data: { step: 'pull_back' } });
      expect(res.body.message).toMatch(/^Teardown stopped at step pull_back: database host "nowhere" is not configured/);
      const row = await tenantRow(B.siteId);
      expect(row).toMatchObject({ state: 'tearing_down', error: { operation: 'teardown', step: 'pull_back' } });
      const failed = await ctx.db('events').where({ slug: 'tenant_failed', object_id: B.siteId });
      expect(failed.map((e) => e.payload)).toEqual([expect.objectContaining({ site_id: B.siteId, state: 'tearing_down', error: expect.objectContaining({ operation: 'teardown', step: 'pull_back' }) })]);
      // Operators find it among the Failed runs, with the recorded outcome as its failure.
      const handle = ctx.temporal.client.workflow.getHandle(row.workflow_id);
      expect((await handle.describe()).status.name).toBe('FAILED');
      const err = await handle.result().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(WorkflowFailedError);
      expect((err as WorkflowFailedError).cause).toMatchObject({
        type: 'TenantOperationFailed',
        nonRetryable: true,
        message: expect.stringMatching(/^Tenant teardown failed at step pull_back: database host "nowhere"/),
        details: [{ state: 'tearing_down', step: 'pull_back', error: expect.stringMatching(/not configured/) }],
      });
    } finally {
      await ctx.db('tenants').where({ id: before.id }).update({ database_host: before.database_host });
    }
  });

  test('teardown leaves no database, role, folder or route, and gives the data back', async () => {
    const t = await tenantRow(A.siteId);
    const res = await ctx.http.delete(`${BASE}/tenants/${A.siteId}`).set(auth());
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ site_id: A.siteId, deleted: true, state: 'torn_down' });
    expect(await serverHas('database', t.database_name)).toBe(false);
    expect(await serverHas('role', t.role_name)).toBe(false);
    expect(fs.existsSync(t.filesystem_root)).toBe(false);
    expect(await ctx.db('tenant_routes').where({ tenant_id: t.id }).first()).toBeUndefined();
    const entry = await ctx.db('tenants').where({ id: t.id }).first();
    expect(entry).toMatchObject({ state: 'torn_down', credentials: null });
    expect((await status(ctx, A.siteId)).status).toBe(404);
    // The site's data (the seeded rows and the one pushed later) and its upload are back.
    expect(await sharedCount(A.siteId)).toBe(seeded + 1);
    expect(fs.readFileSync(path.join(env.DATA_DIR, 'uploads', 'sites', String(A.siteId), 'logo.txt'), 'utf8')).toBe('logo bytes');
    // Gone is gone: a second DELETE is 404.
    expect((await ctx.http.delete(`${BASE}/tenants/${A.siteId}`).set(auth())).status).toBe(404);
    expect((await ctx.db('events').where({ slug: 'tenant_torn_down', object_id: A.siteId })).map((e) => e.payload.state)).toEqual(['torn_down']);
  });

  test('a torn-down site can be isolated again, from scratch', async () => {
    const old = await ctx.db('tenants').where({ site_id: A.siteId, state: 'torn_down' }).first();
    expect((await post(`/tenants/${A.siteId}/bootstrap`)).status).toBe(202);
    const done = await settled(ctx, A.siteId);
    expect(done.body.ready).toBe(true);
    expect(done.body.database_name).not.toBe(old.database_name);
    expect(await sharedCount(A.siteId)).toBe(0);
    const del = await ctx.http.delete(`${BASE}/tenants/${A.siteId}`).set(auth());
    expect(del.status).toBe(200);
    // Torn down: the site itself can now be deleted, its registry history with it.
    expect((await ctx.http.delete(`${BASE}/sites/${A.siteId}`).set(auth())).status).toBe(200);
    expect(await ctx.db('tenants').where({ site_id: A.siteId }).count({ n: '*' })).toEqual([{ n: 0 }]);
    expect((await ctx.http.delete(`${BASE}/tenants/${B.siteId}`).set(auth())).status).toBe(200);
  });
});
