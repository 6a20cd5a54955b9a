import { ConfigError, loadConfig } from '../src/config';
import { WorkflowIds } from '../src/temporal/workflow-ids';
import { offsetDomainIds } from './estate-helpers';
import { BASE, createTestContext, type TestContext } from './helpers';

/** Workflow ids carry the install's prefix; ids stored on rows before it existed keep being used. */
describe('workflow ids', () => {
  let ctx: TestContext;
  let other: TestContext;
  const auth = () => ({ Authorization: ctx.basic });

  beforeAll(async () => {
    ctx = await createTestContext();
    other = await createTestContext();
    // The legacy id below has no prefix: keep it apart from other files' domains.
    await offsetDomainIds(ctx);
  });
  afterAll(async () => {
    await other?.close();
    await ctx?.close();
  });

  test('generated once per install (h + 8 hex digits, kept in settings); every process of the install reads the same', async () => {
    const first = await new WorkflowIds(ctx.db).prefix();
    expect(first).toMatch(/^h[0-9a-f]{8}$/);
    expect(await ctx.db('settings').where({ key: 'workflow_id_prefix' }).first('value')).toEqual({ value: first });
    // Another replica (its own WorkflowIds), and the app's.
    expect(await Promise.all([new WorkflowIds(ctx.db).prefix(), ctx.app.locals.temporal.ids.prefix()])).toEqual([first, first]);
    expect(await ctx.app.locals.temporal.ids.build('translation', 'my-plugin', 'plugin', '1.0.0', 'de_DE')).toBe(`${first}-translation-my-plugin-plugin-1.0.0-de_DE`);
  });

  test('two installs sharing a namespace never build the same id', async () => {
    const [a, b] = await Promise.all([ctx.app.locals.temporal.ids.build('domain-check', 1), other.app.locals.temporal.ids.build('domain-check', 1)]);
    expect(a).not.toBe(b);
  });

  test('WORKFLOW_ID_PREFIX wins and is not stored; a bad one stops the start naming it', async () => {
    const ids = new WorkflowIds(other.db, 'prod_eu');
    expect(await ids.build('tenant-bootstrap', 'abc')).toBe('prod_eu-tenant-bootstrap-abc');
    expect(await other.db('settings').where({ key: 'workflow_id_prefix' }).first('value')).not.toEqual({ value: 'prod_eu' });
    expect(loadConfig({ WORKFLOW_ID_PREFIX: 'prod_eu' }).WORKFLOW_ID_PREFIX).toBe('prod_eu');
    for (const bad of ['has-dash', 'x'.repeat(33), 'sp ace']) {
      expect(() => loadConfig({ WORKFLOW_ID_PREFIX: bad })).toThrow(ConfigError);
      expect(() => loadConfig({ WORKFLOW_ID_PREFIX: bad })).toThrow(/WORKFLOW_ID_PREFIX/);
    }
  });

  test('a workflow started before ids had a prefix is still found: a restart uses the id stored on the row', async () => {
    const created = await ctx.http.post(`${BASE}/domains`).set(auth()).send({ domain: `legacy${process.pid}.example.org`, stage: 'done' });
    expect(created.status).toBe(200);
    const legacy = `domain-check-${created.body.id}`;
    await ctx.db('domains').where({ id: created.body.id }).update({ workflow_id: legacy });
    const restarted = await ctx.http.put(`${BASE}/domains/${created.body.id}`).set(auth()).send({ stage: 'checking-dns' });
    expect(restarted.status).toBe(200);
    expect(restarted.body.workflow_id).toBe(legacy);
    expect(await ctx.db('workflow_starts').where({ workflow_id: legacy }).first('workflow_type', 'started_at')).toEqual({ workflow_type: 'domainCheck', started_at: expect.any(Date) });
    const d = await ctx.temporal.client.workflow.getHandle(legacy).describe();
    expect(d.status.name).toBe('RUNNING');
    await ctx.temporal.client.workflow.getHandle(legacy).terminate('test done');
  });
});
