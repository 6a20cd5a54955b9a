import dgram from 'node:dgram';
import type { AddressInfo } from 'node:net';
import { checkCertificate, checkDnsRecord } from '../activities/domains';
import { OutboundPolicy } from '../src/infra/outbound-http';
import { SA_SITE_ID } from '../src/temporal/search-attributes';
import type { RunningWorker } from '../src/temporal/worker';
import { offsetDomainIds, waitFor, workflowStatus } from './estate-helpers';
import { BASE, createTestContext, type TestContext, startTestWorker } from './helpers';
import { startDnsServer, startTlsServer, type DnsServer, type TlsServer } from './loopback-servers';

/**
 * The domain-check workflow end to end: a real worker, our own DNS server and TLS server on
 * loopback, a 1 s interval and 2 tries. Mapped domains must be a CNAME to the network's host
 * name (NETWORK, which the DNS server knows).
 */
describe('domain checks (Temporal workflow)', () => {
  const GOOD = 'good.hostflow-test.com';
  const BAD_CERT = 'badcert.hostflow-test.com';
  const MISSING = 'missing.hostflow-test.com';
  const SLOW = ['slow1.hostflow-test.com', 'slow2.hostflow-test.com', 'slow3.hostflow-test.com'];
  const NETWORK = 'net.hostflow-test.com';
  const ELSEWHERE = 'elsewhere.hostflow-test.com';
  const SERVFAIL = 'servfail.hostflow-test.com';
  const NO_ADDRESS = 'noaddress.hostflow-test.com';

  let ctx: TestContext;
  let dns: DnsServer;
  let tlsServer: TlsServer;
  let worker: RunningWorker;
  const auth = () => ({ Authorization: ctx.basic });
  const idPrefix = () => ctx.app.locals.temporal.ids.prefix();
  const post = (path: string, body: unknown) => ctx.http.post(`${BASE}${path}`).set(auth()).send(body as object);
  const getDomain = async (id: number) => (await ctx.http.get(`${BASE}/domains/${id}`).set(auth())).body;
  const settled = (d: { stage: string }) => !['checking-dns', 'checking-ssl-cert'].includes(d.stage);

  beforeAll(async () => {
    dns = await startDnsServer([GOOD, BAD_CERT, NETWORK], SLOW, { servfail: [SERVFAIL], elsewhere: { [ELSEWHERE]: '127.0.0.2' } });
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
    await ctx.settings.set('network_domain', NETWORK);
    worker = await startTestWorker(ctx);
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
    expect(created.body).toMatchObject({ stage: 'checking-dns', active: false, workflow_id: `${await idPrefix()}-domain-check-${created.body.id}` });
    const result = await ctx.temporal.client.workflow.getHandle(created.body.workflow_id).result();
    expect(result).toEqual({ stage: 'done', dnsTries: 1, sslTries: 1 });
    const d = await getDomain(created.body.id);
    expect(d).toMatchObject({ stage: 'done', secure: true, active: true, last_error: null });
    expect(await workflowStatus(ctx, created.body.workflow_id)).toBe('COMPLETED');
    expect(dns.queries).toContain(GOOD);
    // Each stage the check moved it to is an event, written with the move, its payload the record then.
    const events = await ctx.db('events').where({ object_type: 'domain', object_id: created.body.id }).orderBy('id');
    expect(events.map((e) => [e.slug, e.payload.stage, e.payload.secure])).toEqual([
      ['domain_created', 'checking-dns', false],
      ['domain_stage_changed', 'checking-ssl-cert', false],
      ['domain_stage_changed', 'done', true],
    ]);
    expect(events[2].payload).toMatchObject({ id: created.body.id, model: 'domain', domain: GOOD, active: true, dns_record: created.body.dns_record });
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
    expect(d.last_error).toBe(
      `DNS check try 2 of 2: ${MISSING} does not exist in DNS (NXDOMAIN from ${dns.address}). Create the DNS record "${MISSING} CNAME ${NETWORK}". ` +
        `The check stopped (stage failed); to check again, POST /wp-json/wu/v2/domains/${d.id}/retry.`,
    );
    expect(d.next_check_at).toBeNull();
    expect(d.dns_record).toEqual({ type: 'CNAME', name: MISSING, value: NETWORK });
    // The first try said when the next one was, and how to try at once (its result, in the history).
    const results = ((await handle.fetchHistory()).events ?? []).flatMap((e) => e.activityTaskCompletedEventAttributes?.result?.payloads ?? []);
    expect(JSON.parse(Buffer.from(results[0].data!).toString('utf8')).error).toMatch(
      new RegExp(
        `^DNS check try 1 of 2: ${MISSING} does not exist in DNS \\(NXDOMAIN from ${dns.address}\\)\\. Create the DNS record "${MISSING} CNAME ${NETWORK}"\\. ` +
          `Next try at \\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z; to try at once, POST /wp-json/wu/v2/domains/${d.id}/retry\\.$`,
      ),
    );
    expect(dns.queries.filter((q) => q === MISSING).length).toBeGreaterThanOrEqual(2);
    // The sleep between the tries is a durable timer in the history, not an activity retry.
    const timers = ((await handle.fetchHistory()).events ?? []).map((e) => e.timerStartedEventAttributes).filter(Boolean);
    expect(timers).toHaveLength(1);
    expect(Number(timers[0]!.startToFireTimeout!.seconds)).toBe(1);
  });

  test('a SERVFAIL says the resolver could not answer (not that the record is missing); a name pointing elsewhere says where it points', async () => {
    const failing = await post('/domains', { domain: SERVFAIL });
    const elsewhere = await post('/domains', { domain: ELSEWHERE });
    for (const created of [failing, elsewhere]) expect((await ctx.temporal.client.workflow.getHandle(created.body.workflow_id).result()).stage).toBe('failed');
    const f = await getDomain(failing.body.id);
    expect(f.last_error).toMatch(
      new RegExp(`^DNS check try 2 of 2: the DNS resolver ${dns.address} answered SERVFAIL \\(it could not resolve the name itself\\) when asked for ${SERVFAIL.replace(/\./g, '\\.')}; the records were not checked\\. It needs the DNS record "${SERVFAIL} CNAME ${NETWORK}"\\. The check stopped`),
    );
    expect(f.last_error).not.toMatch(/has no|does not exist|NXDOMAIN/);
    const e = await getDomain(elsewhere.body.id);
    expect(e.last_error).toMatch(new RegExp(`^DNS check try 2 of 2: ${ELSEWHERE} points to 127\\.0\\.0\\.2, not to this network \\(127\\.0\\.0\\.1\\)\\. Create the DNS record "${ELSEWHERE} CNAME ${NETWORK}" in place of the current one\\.`));
  });

  test('an A record target: the name must point to that address (the real loopback DNS server)', async () => {
    expect(await checkDnsRecord({ type: 'A', name: GOOD, value: '127.0.0.1' }, dns.address)).toEqual({ ok: true });
    expect(await checkDnsRecord({ type: 'A', name: ELSEWHERE, value: '127.0.0.1' }, dns.address)).toEqual({
      ok: false,
      error: `${ELSEWHERE} points to 127.0.0.2, not to this network (127.0.0.1). Create the DNS record "${ELSEWHERE} A 127.0.0.1" in place of the current one`,
    });
    expect(await checkDnsRecord({ type: 'CNAME', name: GOOD, value: NO_ADDRESS }, dns.address)).toEqual({
      ok: false,
      error: `${GOOD} resolves, but the network's host name ${NO_ADDRESS} (DOMAIN_MAPPING_TARGET or the setting network_domain) does not: ${NO_ADDRESS} does not exist in DNS (NXDOMAIN from ${dns.address})`,
    });
  });

  test('retry: POST …/retry checks a failed domain again at once; stages with nothing to retry are 409, unknown ids 404', async () => {
    const created = await post('/domains', { domain: 'retried.hostflow-test.com' });
    await ctx.temporal.client.workflow.getHandle(created.body.workflow_id).result();
    const before = dns.queries.filter((q) => q === 'retried.hostflow-test.com').length;
    const retried = await post(`/domains/${created.body.id}/retry`, {});
    expect(retried.status).toBe(200);
    expect(retried.body).toMatchObject({ id: created.body.id, stage: 'checking-dns', active: false, workflow_id: created.body.workflow_id });
    expect((await ctx.temporal.client.workflow.getHandle(created.body.workflow_id).result()).stage).toBe('failed');
    expect(dns.queries.filter((q) => q === 'retried.hostflow-test.com').length).toBeGreaterThan(before);
    // PATCH {"stage":"checking-dns"} does the same retry.
    const patched = await ctx.http.patch(`${BASE}/domains/${created.body.id}`).set(auth()).send({ stage: 'checking-dns' });
    expect(patched.body).toMatchObject({ stage: 'checking-dns', workflow_id: created.body.workflow_id });
    expect(await workflowStatus(ctx, created.body.workflow_id)).not.toBe('COMPLETED');
    await ctx.temporal.client.workflow.getHandle(created.body.workflow_id).result();

    const done = await post('/domains', { domain: 'finished.hostflow-test.com', stage: 'done' });
    const refused = await post(`/domain/${done.body.id}/retry`, {});
    expect(refused.status).toBe(409);
    expect(refused.body).toEqual({ code: 'wu_rest_domain_not_retryable', message: expect.stringContaining('stage done'), data: { status: 409 } });
    expect((await getDomain(done.body.id)).stage).toBe('done');
    const unknown = await post('/domains/99999999/retry', {});
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe('wu_rest_domain_invalid_id');
    const bad = await post(`/domains/${done.body.id}/retry`, { stage: 'x' });
    expect(bad.status).toBe(400);
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
    expect(await mappedDesc.staticSummary()).toBe(`Domain check of ${SLOW[1]} (domain ${mapped.body.id}, site ${site.id})`);
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
    expect(created.body).toMatchObject({ stage: 'checking-ssl-cert', active: false, workflow_id: `${await idPrefix()}-domain-check-${created.body.id}` });
    const result = await ctx.temporal.client.workflow.getHandle(created.body.workflow_id).result();
    expect(result).toMatchObject({ stage: 'ssl-failed', sslTries: 2 });
    expect(dns.queries).not.toContain(name);
    // A retry of an ssl-failed domain checks the certificate again, not the DNS.
    const retried = await post(`/domains/${created.body.id}/retry`, {});
    expect(retried.body).toMatchObject({ stage: 'checking-ssl-cert', active: false });
    expect(await ctx.temporal.client.workflow.getHandle(created.body.workflow_id).result()).toMatchObject({ stage: 'ssl-failed', dnsTries: 1, sslTries: 2 });
    expect(dns.queries).not.toContain(name);
  });

  test('stage domain-mapping starts no check; setting checking-dns later starts one that finishes', async () => {
    const created = await post('/domains', { domain: 'later.hostflow-test.com', stage: 'domain-mapping' });
    expect(created.body.workflow_id).toBeNull();
    expect(await workflowStatus(ctx, `${await idPrefix()}-domain-check-${created.body.id}`)).toBe('NOT_FOUND');
    const upd = await ctx.http.put(`${BASE}/domains/${created.body.id}`).set(auth()).send({ stage: 'checking-dns' });
    expect(upd.body).toMatchObject({ stage: 'checking-dns', workflow_id: `${await idPrefix()}-domain-check-${created.body.id}` });
    const result = await ctx.temporal.client.workflow.getHandle(upd.body.workflow_id).result();
    expect(result.stage).toBe('failed'); // not in the test DNS zone
    const d = await waitFor(() => getDomain(created.body.id), settled);
    expect(d.stage).toBe('failed');
  });
});


/**
 * A DNS resolver that refuses connections (nothing listens on its UDP port): the check says the
 * resolver could not be asked, never that a record is missing, and when it tries again. An A
 * record target (DOMAIN_MAPPING_TARGET) and a long interval, so the wait can be looked at.
 */
describe('domain checks with a DNS resolver that refuses connections', () => {
  const NAME = 'refused.hostflow-test.com';
  let ctx: TestContext;
  let worker: RunningWorker;
  let resolver: string;
  const auth = () => ({ Authorization: ctx.basic });
  const idPrefix = () => ctx.app.locals.temporal.ids.prefix();
  const getDomain = async (id: number) => (await ctx.http.get(`${BASE}/domains/${id}`).set(auth())).body;

  beforeAll(async () => {
    const socket = dgram.createSocket('udp4');
    await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
    resolver = `127.0.0.1:${(socket.address() as AddressInfo).port}`;
    await new Promise<void>((resolve) => socket.close(() => resolve()));
    ctx = await createTestContext({ DOMAIN_DNS_RESOLVER: resolver, DOMAIN_MAPPING_TARGET: '203.0.113.10', DOMAIN_CHECK_INTERVAL_SECONDS: '60', DOMAIN_CHECK_MAX_TRIES: '3' });
    worker = await startTestWorker(ctx);
  });
  afterAll(async () => {
    await worker?.shutdown();
    await ctx?.close();
  });

  test('the message names the refused resolver, the record to create and the next try; retry and PATCH try again at once', async () => {
    const created = await ctx.http.post(`${BASE}/domains`).set(auth()).send({ domain: NAME });
    const id = created.body.id as number;
    const waiting = (d: Record<string, any>) => d.last_error !== null;
    const first = await waitFor(() => getDomain(id), waiting);
    const started = Date.now();
    expect(first).toMatchObject({ stage: 'checking-dns', active: false, dns_record: { type: 'A', name: NAME, value: '203.0.113.10' } });
    const m = new RegExp(
      `^DNS check try 1 of 3: the DNS resolver ${resolver} refused the connection when asked for ${NAME.replace(/\./g, '\\.')}; the records were not checked\\. ` +
        `It needs the DNS record "${NAME} A 203\\.0\\.113\\.10"\\. Next try at (\\S+); to try at once, POST /wp-json/wu/v2/domains/${id}/retry\\.$`,
    ).exec(first.last_error);
    expect(m).not.toBeNull();
    expect(first.last_error).not.toMatch(/has no|does not exist|NXDOMAIN|ECONNREFUSED \(/);
    // next_check_at is the workflow's durable sleep: one interval after the try.
    expect(first.next_check_at).toBe(m![1]);
    const wait = Date.parse(first.next_check_at) - started;
    expect(wait).toBeGreaterThan(50_000);
    expect(wait).toBeLessThanOrEqual(60_000);

    // The retry route starts the tries over at once; PATCH {"stage":"checking-dns"} does the same.
    for (const send of [() => ctx.http.post(`${BASE}/domains/${id}/retry`).set(auth()).send({}), () => ctx.http.patch(`${BASE}/domains/${id}`).set(auth()).send({ stage: 'checking-dns' })]) {
      const { runId } = await ctx.temporal.client.workflow.getHandle(created.body.workflow_id).describe();
      const res = await send();
      expect(res.status).toBe(200);
      expect(res.body.stage).toBe('checking-dns');
      const again = await waitFor(() => getDomain(id), (d) => d.last_error !== null && d.next_check_at !== first.next_check_at);
      expect(again.last_error).toMatch(/^DNS check try 1 of 3: the DNS resolver .* refused the connection/);
      expect((await ctx.temporal.client.workflow.getHandle(created.body.workflow_id).describe()).runId).not.toBe(runId);
    }
    expect((await ctx.http.delete(`${BASE}/domains/${id}`).set(auth())).status).toBe(200);
  });
});

describe('the certificate check connects only where outbound fetches may (SSRF)', () => {
  let tlsServer: TlsServer;
  beforeAll(async () => {
    tlsServer = await startTlsServer('localhost');
  });
  afterAll(() => tlsServer.close());

  test('a domain name that resolves to a loopback address is refused before any connection; allow-listed, it is checked', async () => {
    const opts = { port: tlsServer.port, caFile: tlsServer.certFile, timeoutMs: 5000 };
    const refused = await checkCertificate('localhost', { ...opts, outbound: new OutboundPolicy() });
    expect(refused).toEqual({ ok: false, error: expect.stringMatching(/loopback/) });
    expect(tlsServer.connections()).toBe(0);
    const allowed = await checkCertificate('localhost', { ...opts, outbound: new OutboundPolicy({ hosts: ['localhost'], networks: [] }) });
    expect(allowed).toEqual({ ok: true });
    expect(tlsServer.connections()).toBe(1);
    // The operator's own front end (DOMAIN_TLS_ADDRESS) is configuration, not input: not checked.
    const front = await checkCertificate('localhost', { ...opts, address: '127.0.0.1', outbound: new OutboundPolicy() });
    expect(front).toEqual({ ok: true });
  });
});
