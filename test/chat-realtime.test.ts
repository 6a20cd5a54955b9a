import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import request from 'supertest';
import WebSocket from 'ws';
import { createApp, type AppWithRegistry } from '../src/app';
import type { RunningWorker } from '../src/temporal/worker';
import { bearer, CHAT, makeAgent, makeSession } from './chat-helpers';
import { waitFor, workflowStatus } from './estate-helpers';
import { API_KEY, API_SECRET, createTestContext, type TestContext, startTestWorker } from './helpers';

/**
 * The realtime channel (WebSocket + PostgreSQL LISTEN/NOTIFY, across two app instances as two
 * API processes would be), polling when it is down, and the chatFollowUp workflow that turns
 * a session waiting too long into a ticket (a real worker; the wait is 2 s here).
 */
describe('support chat: realtime and follow-up', () => {
  let ctx: TestContext;
  let server: http.Server;
  let port: number;
  let worker: RunningWorker | null = null;
  let agent: { id: number; token: string; name: string };
  const sockets: WebSocket[] = [];
  const extraApps: AppWithRegistry[] = [];
  const extraServers: http.Server[] = [];

  const listen = async (app: AppWithRegistry) => {
    const s = http.createServer(app);
    app.locals.chat.attach(s);
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
    return s;
  };
  const newWorker = () =>
    startTestWorker(ctx);

  /** A connected client that records every event it receives, with the time it arrived. */
  const connect = async (url: string, origin?: string) => {
    // The ws client sends no Origin unless told to (as a non-browser client); browsers always do.
    const ws = new WebSocket(url, origin === undefined ? {} : { origin });
    sockets.push(ws);
    const events: { at: number; data: any }[] = [];
    ws.on('message', (d) => events.push({ at: Date.now(), data: JSON.parse(String(d)) }));
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
      ws.once('unexpected-response', (_req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
    });
    await waitFor(async () => events, (e) => e.some((x) => x.data.type === 'ready'), 5000);
    const next = (pred: (d: any) => boolean, ms = 5000) =>
      waitFor(async () => events.find((e) => pred(e.data)), (e) => e !== undefined, ms).then((e) => {
        if (!e) throw new Error(`no matching event; got ${JSON.stringify(events.map((x) => x.data))}`);
        return e;
      });
    return { ws, events, next };
  };
  const wsUrl = (realtime: { url: string }, p = port) => realtime.url.replace(/^ws:\/\/[^/]+/, `ws://127.0.0.1:${p}`);

  beforeAll(async () => {
    ctx = await createTestContext({ CHAT_WAIT_BEFORE_TICKET_SECONDS: '2' });
    server = await listen(ctx.app);
    port = (server.address() as AddressInfo).port;
    expect(await ctx.app.locals.chat.realtime.ready()).toBe(true);
    agent = await makeAgent(ctx, { name: 'Realtime Agent', online: true });
    worker = await newWorker();
  });
  afterAll(async () => {
    for (const ws of sockets) ws.terminate();
    for (const s of extraServers) await new Promise((r) => s.close(r));
    for (const a of extraApps) await a.locals.chat.close();
    await new Promise((r) => server?.close(r));
    await worker?.shutdown();
    await ctx?.close();
  });

  test('a message posted by either side reaches the connected clients of the session in well under a second', async () => {
    const s = await makeSession(ctx);
    const customer = await connect(wsUrl(s.body.realtime));
    const agentTok = (await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/token`).set(bearer(agent.token)).send({})).body.realtime;
    const agentWs = await connect(wsUrl(agentTok));
    const other = await makeSession(ctx);
    const otherWs = await connect(wsUrl(other.body.realtime));

    const sent = Date.now();
    const posted = await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/messages`).set(bearer(agent.token)).send({ body: 'Live hello' });
    expect(posted.status).toBe(201);
    const got = await customer.next((d) => d.type === 'message' && d.message.body === 'Live hello');
    expect(got.at - sent).toBeLessThan(1000);
    expect(got.data.message).toEqual(posted.body);
    const back = Date.now();
    await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/messages`).set(bearer(s.token)).send({ body: 'Live reply' });
    const reply = await agentWs.next((d) => d.type === 'message' && d.message.body === 'Live reply');
    expect(reply.at - back).toBeLessThan(1000);
    expect(reply.data.message).toMatchObject({ sender_type: 'customer', session_id: s.id });
    // Session changes travel too (the agent reply took the session).
    await customer.next((d) => d.type === 'session' && d.status === 'active' && d.assigned_agent_id === agent.id);
    // Nothing leaks to another session's client.
    await new Promise((r) => setTimeout(r, 200));
    expect(otherWs.events.filter((e) => e.data.type === 'message')).toEqual([]);
  });

  test('the socket refuses a bad or expired token (401) and other paths (404)', async () => {
    const s = await makeSession(ctx);
    const good = s.body.realtime.token as string;
    await expect(connect(`ws://127.0.0.1:${port}${CHAT}/chat/realtime?token=${good.slice(0, -2)}xx`)).rejects.toThrow('HTTP 401');
    await expect(connect(`ws://127.0.0.1:${port}${CHAT}/chat/realtime`)).rejects.toThrow('HTTP 401');
    const expired = await ctx.app.locals.chat.secret.signRealtime({ session_id: s.id, role: 'customer', agent_id: null, exp: Math.floor(Date.now() / 1000) - 1 });
    await expect(connect(`ws://127.0.0.1:${port}${CHAT}/chat/realtime?token=${expired}`)).rejects.toThrow('HTTP 401');
    await expect(connect(`ws://127.0.0.1:${port}/wp-json/wu/v2/customers?token=${good}`)).rejects.toThrow('HTTP 404');
  });

  test('with two API instances (two LISTEN connections), a message posted to one reaches a socket on the other', async () => {
    const second = createApp({ config: ctx.config, db: ctx.db, settings: ctx.settings, temporal: ctx.temporal, metrics: ctx.metrics });
    extraApps.push(second);
    const secondServer = await listen(second);
    extraServers.push(secondServer);
    expect(await second.locals.chat.realtime.ready()).toBe(true);
    const s = await makeSession(ctx);
    const onSecond = await connect(wsUrl(s.body.realtime, (secondServer.address() as AddressInfo).port));
    const sent = Date.now();
    await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/messages`).set(bearer(agent.token)).send({ body: 'Across processes' });
    const got = await onSecond.next((d) => d.type === 'message' && d.message.body === 'Across processes');
    expect(got.at - sent).toBeLessThan(1000);
    expect(second.locals.chat.realtime.connections(s.id)).toBe(1);
    expect(ctx.app.locals.chat.realtime.connections(s.id)).toBe(0);
  });

  test('with a second API process: a message posted to this process reaches a socket on the other, and back', async () => {
    const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', path.join(__dirname, 'fixtures', 'chat-api.ts')], {
      cwd: path.resolve(__dirname, '..'),
      env: { ...process.env, DATABASE_URL: ctx.dbUrl, PORT: '0', HOST: '127.0.0.1', WU_API_KEY: API_KEY, WU_API_SECRET: API_SECRET, LOG_LEVEL: 'silent' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      let out = '';
      child.stdout!.on('data', (d) => (out += String(d)));
      child.stderr!.on('data', (d) => (out += String(d)));
      await waitFor(async () => out, (o) => /api ready \d+/.test(o) || child.exitCode !== null, 60_000);
      const childPort = Number(/api ready (\d+)/.exec(out)?.[1]);
      expect(childPort).toBeGreaterThan(0);
      const s = await makeSession(ctx);
      // The customer's socket is on the other process; the agent posts here.
      const onChild = await connect(wsUrl(s.body.realtime, childPort));
      const sent = Date.now();
      await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/messages`).set(bearer(agent.token)).send({ body: 'From process one' });
      const got = await onChild.next((d) => d.type === 'message' && d.message.body === 'From process one');
      expect(got.at - sent).toBeLessThan(1000);
      // The customer posts through the other process; the agent's socket is here.
      const agentTok = (await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/token`).set(bearer(agent.token)).send({})).body.realtime;
      const here = await connect(wsUrl(agentTok));
      const res = await fetch(`http://127.0.0.1:${childPort}${CHAT}/chat/sessions/${s.id}/messages`, {
        method: 'POST',
        headers: { authorization: `Bearer ${s.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ body: 'From process two' }),
      });
      expect(res.status).toBe(201);
      await here.next((d) => d.type === 'message' && d.message.body === 'From process two');
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => (child.exitCode !== null ? r(null) : child.once('exit', r)));
    }
  });

  test('a large message travels as a reference and is loaded by the receiving process', async () => {
    const s = await makeSession(ctx);
    const client = await connect(wsUrl(s.body.realtime));
    const big = 'é'.repeat(9000);
    await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/messages`).set(bearer(agent.token)).send({ body: big });
    const got = await client.next((d) => d.type === 'message' && d.message.body.length === 9000);
    expect(got.data.message.body).toBe(big);
  });

  test('when the LISTEN connection drops, the channel is unavailable: new sessions get a ticket, polling works; it reconnects by itself', async () => {
    const rt = ctx.app.locals.chat.realtime;
    rt.retryMs = 2000; // room to look at the unavailable state before the reconnect
    try {
      await ctx.db.raw("select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'hostflow-chat-listen' and datname = current_database()");
      await waitFor(async () => rt.available(), (v) => v === false, 5000);
      expect(rt.available()).toBe(false);
      expect((await ctx.http.get(`${CHAT}/chat/availability`)).body.realtime_available).toBe(false);
      const res = await ctx.http.post(`${CHAT}/chat/sessions`).send({ customer_name: 'Unlucky', message: 'Hello?' });
      expect(res.body.session).toMatchObject({ fallback_reason: 'realtime_unavailable', ticket_id: expect.any(Number) });
      const poll = await ctx.http.get(`${CHAT}/chat/sessions/${res.body.session.id}/messages`).set(bearer(res.body.token));
      expect(poll.body.messages.map((m: any) => m.sender_type)).toEqual(['customer', 'system']);
    } finally {
      rt.retryMs = 1000;
    }
    expect(await rt.ready(10_000)).toBe(true);
    expect((await ctx.http.get(`${CHAT}/chat/availability`)).body.realtime_available).toBe(true);
  });

  test('a browser Origin must be in CHAT_ALLOWED_ORIGINS: a foreign one is refused (403) before the upgrade; no Origin (non-browser clients) is allowed', async () => {
    const withOrigins = (origins: string[]) => {
      const app = createApp({ config: { ...ctx.config, CHAT_ALLOWED_ORIGINS: origins }, db: ctx.db, settings: ctx.settings, temporal: ctx.temporal, metrics: ctx.metrics });
      extraApps.push(app);
      return app;
    };
    const shop = withOrigins(['https://shop.example.com', 'https://other.example.com']);
    const shopServer = await listen(shop);
    extraServers.push(shopServer);
    expect(await shop.locals.chat.realtime.ready()).toBe(true);
    const shopPort = (shopServer.address() as AddressInfo).port;
    const s = await makeSession(ctx);
    const url = wsUrl(s.body.realtime, shopPort);

    // Foreign origins, the opaque "null" origin and a look-alike: 403, no socket registered.
    for (const origin of ['https://evil.example.net', 'null', 'https://shop.example.com.evil.net', 'http://shop.example.com']) {
      await expect(connect(url, origin)).rejects.toThrow('HTTP 403');
    }
    expect(shop.locals.chat.realtime.connections(s.id)).toBe(0);
    // A foreign origin is refused even before the token is checked (no token at all: still 403).
    await expect(connect(`ws://127.0.0.1:${shopPort}${CHAT}/chat/realtime`, 'https://evil.example.net')).rejects.toThrow('HTTP 403');

    // An allowed origin and a client without Origin connect and receive the session's messages.
    const fromShop = await connect(url, 'https://shop.example.com');
    const noOrigin = await connect(url);
    expect(shop.locals.chat.realtime.connections(s.id)).toBe(2);
    await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/messages`).set(bearer(s.token)).send({ body: 'From the shop page' });
    await fromShop.next((d) => d.type === 'message' && d.message.body === 'From the shop page');
    await noOrigin.next((d) => d.type === 'message' && d.message.body === 'From the shop page');
    // The allowed origin still needs a valid token.
    await expect(connect(`ws://127.0.0.1:${shopPort}${CHAT}/chat/realtime?token=nope`, 'https://shop.example.com')).rejects.toThrow('HTTP 401');

    // `*` allows any origin; an empty list (the default, as in ctx's app) allows no browser origin.
    const any = withOrigins(['*']);
    const anyServer = await listen(any);
    extraServers.push(anyServer);
    await connect(wsUrl(s.body.realtime, (anyServer.address() as AddressInfo).port), 'https://evil.example.net');
    await expect(connect(wsUrl(s.body.realtime), 'https://shop.example.com')).rejects.toThrow('HTTP 403');
    await connect(wsUrl(s.body.realtime));

    // A page of this very server (the widget's demo page, the console) needs no entry: its Origin
    // names the Host it connects to, and that Host is ours (ALLOWED_HOSTS: loopback by default).
    const own = `http://127.0.0.1:${port}`;
    await connect(wsUrl(s.body.realtime), own);
    // Not for a look-alike: the same host on another port, or a host that is not ours even when
    // the Origin matches it (a rebound DNS name pointing at us).
    await expect(connect(wsUrl(s.body.realtime), `http://127.0.0.1:${shopPort}`)).rejects.toThrow('HTTP 403');
    const rebound = new WebSocket(wsUrl(s.body.realtime), { origin: `http://evil.example.net:${port}`, headers: { Host: `evil.example.net:${port}` } });
    sockets.push(rebound);
    await expect(
      new Promise((resolve, reject) => {
        rebound.once('open', resolve);
        rebound.once('error', reject);
        rebound.once('unexpected-response', (_req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
      }),
    ).rejects.toThrow('HTTP 403');
  });

  test('with the channel turned off (CHAT_REALTIME_ENABLED=false): no realtime token, sessions fall back to a ticket, polling keeps working', async () => {
    const off = createApp({ config: { ...ctx.config, CHAT_REALTIME_ENABLED: false }, db: ctx.db, settings: ctx.settings, temporal: ctx.temporal, metrics: ctx.metrics });
    extraApps.push(off);
    const res = await request(off).post(`${CHAT}/chat/sessions`).send({ customer_name: 'No Socket', message: 'Polling only' });
    expect(res.status).toBe(201);
    expect(res.body.realtime).toBeNull();
    expect(res.body.session).toMatchObject({ fallback_reason: 'realtime_unavailable' });
    expect((await request(off).get(`${CHAT}/chat/availability`)).body.realtime_available).toBe(false);
    await request(off).post(`${CHAT}/chat/sessions/${res.body.session.id}/messages`).set(bearer(agent.token)).send({ body: 'Answer by polling' });
    const poll = await request(off).get(`${CHAT}/chat/sessions/${res.body.session.id}/messages?after=0`).set(bearer(res.body.token));
    expect(poll.body.messages.map((m: any) => m.body)).toEqual(['Polling only', expect.stringContaining('ticket #'), 'Answer by polling']);
    const tok = await request(off).post(`${CHAT}/chat/sessions/${res.body.session.id}/token`).set(bearer(res.body.token)).send({});
    expect(tok.body.realtime).toBeNull();
    const ticket = await ctx.db('ticket_messages').where({ ticket_id: res.body.session.ticket_id }).orderBy('id').pluck('body');
    expect(ticket[2]).toBe('Answer by polling');
  });

  test('waiting longer than CHAT_WAIT_BEFORE_TICKET_SECONDS without an agent: the workflow turns the session into a ticket and tells the client', async () => {
    const s = await makeSession(ctx, { customer_name: 'Patient Pat', message: 'Anyone?' });
    const client = await connect(wsUrl(s.body.realtime));
    const workflowId = s.workflowId! as string;
    const result = await ctx.temporal.client.workflow.getHandle(workflowId).result();
    expect(result).toEqual({ outcome: 'ticket', ticketId: expect.any(Number) });
    const session = (await ctx.http.get(`${CHAT}/chat/sessions/${s.id}`).set(bearer(s.token))).body;
    expect(session).toMatchObject({ ticket_id: result.ticketId, fallback_reason: 'wait_timeout', status: 'waiting' });
    const notice = await client.next((d) => d.type === 'message' && d.message.sender_type === 'system');
    expect(notice.data.message.body).toContain(`ticket #${result.ticketId}`);
    const ticket = (await ctx.http.get(`${CHAT}/chat/agent/tickets/${result.ticketId}`).set(bearer(agent.token))).body;
    expect(ticket.messages.map((m: any) => m.sender_type)).toEqual(['customer', 'system']);
    // Later messages are appended to the ticket.
    await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/messages`).set(bearer(s.token)).send({ body: 'Still here' });
    expect(await ctx.db('ticket_messages').where({ ticket_id: result.ticketId }).orderBy('id').pluck('body')).toEqual(['Anyone?', expect.any(String), 'Still here']);
    // The durable timer is in the workflow history.
    const timers = ((await ctx.temporal.client.workflow.getHandle(workflowId).fetchHistory()).events ?? []).filter((e) => e.timerStartedEventAttributes);
    expect(Number(timers[0].timerStartedEventAttributes!.startToFireTimeout!.seconds)).toBe(2);
  });

  test('an agent taking the session in time stops the follow-up (signal): no ticket', async () => {
    const s = await makeSession(ctx);
    await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/assign`).set(bearer(agent.token)).send({});
    const result = await ctx.temporal.client.workflow.getHandle(s.workflowId!).result();
    expect(result).toEqual({ outcome: 'assigned', ticketId: null });
    await new Promise((r) => setTimeout(r, 500));
    expect((await ctx.db('chat_sessions').where({ id: s.id }).first()).ticket_id).toBeNull();
  });

  test('a customer closing the session stops the follow-up too', async () => {
    const s = await makeSession(ctx);
    await ctx.http.post(`${CHAT}/chat/sessions/${s.id}/status`).set(bearer(s.token)).send({ status: 'closed' });
    expect(await ctx.temporal.client.workflow.getHandle(s.workflowId!).result()).toEqual({ outcome: 'closed', ticketId: null });
  });

  test('the follow-up survives a worker restart: the wait runs out while no worker runs, the next worker converts the session', async () => {
    await worker!.shutdown();
    worker = null;
    const s = await makeSession(ctx, { message: 'During the outage' });
    const workflowId = s.workflowId! as string;
    await new Promise((r) => setTimeout(r, 3000));
    expect(await workflowStatus(ctx, workflowId)).toBe('RUNNING');
    expect((await ctx.db('chat_sessions').where({ id: s.id }).first()).ticket_id).toBeNull();
    worker = await newWorker();
    const result = await ctx.temporal.client.workflow.getHandle(workflowId).result();
    expect(result.outcome).toBe('ticket');
    expect((await ctx.db('chat_sessions').where({ id: s.id }).first()).fallback_reason).toBe('wait_timeout');
  });

  test('Temporal unreachable: the session cannot be followed up, so it gets its ticket at once', async () => {
    const noTemporal = createApp({ config: ctx.config, db: ctx.db, settings: ctx.settings, temporal: null, metrics: ctx.metrics });
    extraApps.push(noTemporal);
    expect(await noTemporal.locals.chat.realtime.ready()).toBe(true);
    const res = await request(noTemporal).post(`${CHAT}/chat/sessions`).send({ customer_name: 'No Temporal', message: 'Hi' });
    expect(res.status).toBe(201);
    expect(res.body.session).toMatchObject({ fallback_reason: 'follow_up_unavailable', ticket_id: expect.any(Number) });
    expect((await ctx.db('chat_sessions').where({ id: res.body.session.id }).first()).follow_up_workflow_id).toBeNull();
  });
});
