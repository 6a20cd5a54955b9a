import { startWorker, type RunningWorker } from '../src/temporal/worker';
import { BASE, createTestContext, type TestContext } from './helpers';
import { offsetDomainIds, waitFor, workflowStatus } from './estate-helpers';
import { startDnsServer, startTlsServer, type DnsServer, type TlsServer } from './loopback-servers';
import { SA_SITE_ID } from '../workflows/register-search-attributes';

/**
 * The domain-check workflow end to end: a real worker, our own DNS server and TLS server on
 * loopback, a 1 s interval and 2 tries.
 */
describe('domain checks (Temporal workflow)', () => {
  const GOOD = 'good.hostflow-test.com';
  const BAD_CERT = 'badcert.hostflow-test.com';
  const MISSING = 'missing.hostflow-test.com';
  const SLOW = ['slow1.hostflow-test.com', 'slow2.hostflow-test.com', 'slow3.hostflow-test.com'];

  let ctx: TestContext;
  let dns: DnsServer;
  let tlsServer: TlsServer;
  let worker: RunningWorker;
  const auth = () => ({ Authorization: ctx.basic });
  const post = (path: string, body: unknown) => ctx.http.post(`${BASE}${path}`).set(auth()).send(body as object);
  const getDomain = async (id: number) => (await ctx.http.get(`${BASE}/domains/${id}`).set(auth())).body;
  const settled = (d: { stage: string }) => !['checking-dns', 'checking-ssl-cert'].includes(d.stage);

  beforeAll(async () => {
    dns = await startDnsServer([GOOD, BAD_CERT], SLOW);
    tlsServer = await startTlsServer(GOOD);
    ctx = await createTestContext({
      DOMAIN_DNS_RESOLVER: dns.address,
      DOMAIN_TLS_ADDRESS: '127.0.0.1',
      DOMAIN_TLS_PORT: String(tlsServer.port),
      DOMAIN_TLS_CA_FILE: tlsServer.certFile,
      DOMAIN_CHECK_INTERVAL_SECONDS: '1',
      DOMAIN_CHECK_MAX_TRIES: '2',
    });
    await offsetDomainIds(ctx);
    worker = await startWorker({
      address: process.env.HF_TEST_TEMPORAL_ADDRESS!,
      namespace: ctx.config.TEMPORAL_NAMESPACE,
      taskQueue: ctx.config.TEMPORAL_TASK_QUEUE,
      db: ctx.db,
      config: ctx.config,
    });
  });
  afterAll(async () => {
    await worker?.shutdown();
    await ctx?.close();
    await dns?.close();
    await tlsServer?.close();
  });

  test('DNS and certificate pass: checking-dns -> checking-ssl-cert -> done, secure and active', async () => {
    const created = await post('/domains', { domain: GOOD.toUpperCase() });
    expect(created.status).toBe(200);
    expect(created.body).toMatchObject({ stage: 'checking-dns', active: false, workflow_id: `domain-check-${created.body.id}` });
    const result = await ctx.temporal.client.workflow.getHandle(created.body.workflow_id).result();
    expect(result).toEqual({ stage: 'done', dnsTries: 1, sslTries: 1 });
    const d = await getDomain(created.body.id);
    expect(d).toMatchObject({ stage: 'done', secure: true, active: true, last_error: null });
    expect(await workflowStatus(ctx, created.body.workflow_id)).toBe('COMPLETED');
    expect(dns.queries).toContain(GOOD);
  });

  test('NXDOMAIN on every try: failed after the max tries, one interval apart, with the error recorded', async () => {
    const created = await post('/domains', { domain: MISSING });
    const start = Date.now();
    const handle = ctx.temporal.client.workflow.getHandle(created.body.workflow_id);
    const result = await handle.result();
    expect(result).toMatchObject({ stage: 'failed', dnsTries: 2, sslTries: 0 });
    expect(Date.now() - start).toBeGreaterThanOrEqual(1000);
    const d = await getDomain(created.body.id);
    expect(d).toMatchObject({ stage: 'failed', active: false, secure: false });
    expect(d.last_error).toMatch(/^DNS check try 2 of 2: missing\.hostflow-test\.com has no A or AAAA record \(ENOTFOUND/);
    expect(dns.queries.filter((q) => q === MISSING).length).toBeGreaterThanOrEqual(2);
    // The sleep between the tries is a durable timer in the history, not an activity retry.
    const timers = ((await handle.fetchHistory()).events ?? []).map((e) => e.timerStartedEventAttributes).filter(Boolean);
    expect(timers).toHaveLength(1);
    expect(Number(timers[0]!.startToFireTimeout!.seconds)).toBe(1);
  });

  test('certificate for another name: ssl-failed after the max tries, not secure, inactive', async () => {
    const created = await post('/domains', { domain: BAD_CERT });
    const result = await ctx.temporal.client.workflow.getHandle(created.body.workflow_id).result();
    expect(result).toMatchObject({ stage: 'ssl-failed', dnsTries: 1, sslTries: 2 });
    const d = await getDomain(created.body.id);
    expect(d).toMatchObject({ stage: 'ssl-failed', active: false, secure: false });
    expect(d.last_error).toMatch(/^SSL check try 2 of 2: TLS handshake with 127\.0\.0\.1:\d+ for badcert\.hostflow-test\.com failed: .*(altnames|ERR_TLS_CERT_ALTNAME_INVALID)/);
  });

  test('deleting the domain, or its site, terminates a running check', async () => {
    const created = await post('/domains', { domain: SLOW[0] });
    await waitFor(() => Promise.resolve(dns.queries.includes(SLOW[0])), (v) => v, 10_000);
    expect(await workflowStatus(ctx, created.body.workflow_id)).toBe('RUNNING');
    expect((await ctx.http.delete(`${BASE}/domains/${created.body.id}`).set(auth())).body).toBe(true);
    expect(await workflowStatus(ctx, created.body.workflow_id)).toBe('TERMINATED');
    const desc = await ctx.temporal.client.workflow.getHandle(created.body.workflow_id).describe();
    expect(desc.status.name).toBe('TERMINATED');

    const site = (await post('/sites', { title: 'With domain', domain: 'site.hostflow-test.com' })).body;
    const mapped = await post('/domains', { domain: SLOW[1], blog_id: site.id });
    expect(mapped.status).toBe(200);
    expect(await workflowStatus(ctx, mapped.body.workflow_id)).toBe('RUNNING');
    // Found in the Temporal UI with the site's other workflows.
    const mappedDesc = await ctx.temporal.client.workflow.getHandle(mapped.body.workflow_id).describe();
    expect(mappedDesc.typedSearchAttributes.get(SA_SITE_ID)).toBe(site.id);
    expect((await ctx.http.delete(`${BASE}/sites/${site.id}`).set(auth())).status).toBe(200);
    expect(await workflowStatus(ctx, mapped.body.workflow_id)).toBe('TERMINATED');
    expect(await ctx.db('domains').where({ id: mapped.body.id })).toEqual([]);
  });

  test('a stage set by hand during a check stops it; the mapping keeps the stage given', async () => {
    const created = await post('/domains', { domain: SLOW[2] });
    const upd = await ctx.http.put(`${BASE}/domains/${created.body.id}`).set(auth()).send({ stage: 'done-without-ssl' });
    expect(upd.body).toMatchObject({ stage: 'done-without-ssl', active: true });
    expect(await workflowStatus(ctx, created.body.workflow_id)).toBe('TERMINATED');
    // Whatever the stopped check was doing, the row is not touched afterwards.
    await new Promise((r) => setTimeout(r, 1500));
    expect((await getDomain(created.body.id)).stage).toBe('done-without-ssl');
  });

  test('created in checking-ssl-cert: the check starts at the certificate (no DNS query)', async () => {
    const name = 'sslonly.hostflow-test.com';
    const created = await post('/domains', { domain: name, stage: 'checking-ssl-cert' });
    expect(created.body).toMatchObject({ stage: 'checking-ssl-cert', active: false, workflow_id: `domain-check-${created.body.id}` });
    const result = await ctx.temporal.client.workflow.getHandle(created.body.workflow_id).result();
    expect(result).toMatchObject({ stage: 'ssl-failed', sslTries: 2 });
    expect(dns.queries).not.toContain(name);
  });

  test('stage domain-mapping starts no check; setting checking-dns later starts one that finishes', async () => {
    const created = await post('/domains', { domain: 'later.hostflow-test.com', stage: 'domain-mapping' });
    expect(created.body.workflow_id).toBeNull();
    expect(await workflowStatus(ctx, `domain-check-${created.body.id}`)).toBe('NOT_FOUND');
    const upd = await ctx.http.put(`${BASE}/domains/${created.body.id}`).set(auth()).send({ stage: 'checking-dns' });
    expect(upd.body).toMatchObject({ stage: 'checking-dns', workflow_id: `domain-check-${created.body.id}` });
    const result = await ctx.temporal.client.workflow.getHandle(upd.body.workflow_id).result();
    expect(result.stage).toBe('failed'); // not in the test DNS zone
    const d = await waitFor(() => getDomain(created.body.id), settled);
    expect(d.stage).toBe('failed');
  });
});

