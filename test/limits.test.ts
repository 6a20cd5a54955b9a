import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import knexFactory from 'knex';
import type { Db } from '../src/db/knex';
import { addressKey, RateLimits } from '../src/http/limits';
import { bearer, CHAT, expectError, makeAgent, makeSession } from './chat-helpers';
import { API_KEY, BASE, createReplica, createTestContext, type Replica, type TestContext } from './helpers';

const basic = (key: string, secret: string) => `Basic ${Buffer.from(`${key}:${secret}`).toString('base64')}`;
const from = (address: string) => ({ 'X-Forwarded-For': address });
const sha = (s: string) => crypto.createHash('sha256').update(s, 'utf8').digest('hex');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The counter row of a limiter and an address, or undefined. */
const counter = (db: Db, name: string, address: string) => db('rate_limits').where({ key: `${name}:${addressKey(address)}` }).first('points', 'expire');

/** Waits until `n` backends of the database wait for a lock (row or advisory). */
async function lockWaiters(db: Db, n: number): Promise<void> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const { rows } = await db.raw("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'");
    if (rows[0].n >= n) return;
    if (Date.now() > deadline) throw new Error(`expected ${n} lock waiters, saw ${rows[0].n}`);
    await sleep(25);
  }
}

describe('rate limits shared by every API replica (PostgreSQL)', () => {
  test('store keys: an IP address is kept as it is; anything else (long, unicode, NUL, made-up) becomes a bounded digest', () => {
    expect(addressKey('203.0.113.7')).toBe('203.0.113.7');
    expect(addressKey('2001:db8::1')).toBe('2001:db8::1');
    expect(addressKey('::ffff:127.0.0.1')).toBe('::ffff:127.0.0.1');
    for (const odd of ['x'.repeat(100_000), 'ünïcødé', '\u0000', '\ud800', 'unknown', '', '1.2.3.4, 5.6.7.8', `fe80::1%${'a'.repeat(300)}`]) {
      const key = addressKey(odd);
      expect(key).toBe(`sha256:${sha(odd)}`);
      expect(key.length).toBe(71);
    }
    // Distinct addresses, distinct keys.
    expect(addressKey('a')).not.toBe(addressKey('b'));
  });

  describe('two API replicas on one database', () => {
    let ctx: TestContext;
    let b: Replica;
    let agent: { id: number; token: string };
    const LIMIT = 5;
    const SESSIONS = 3;
    const replicas = () => [ctx.http, b.http];

    beforeAll(async () => {
      // TRUST_PROXY: the client address comes from X-Forwarded-For, so each test is its own client.
      ctx = await createTestContext({
        AUTH_FAILURE_LIMIT: String(LIMIT),
        AUTH_FAILURE_WINDOW_SECONDS: '120',
        CHAT_SESSION_CREATE_LIMIT: String(SESSIONS),
        CHAT_SESSION_CREATE_WINDOW_SECONDS: '600',
        TRUST_PROXY: 'true',
      });
      b = await createReplica(ctx);
      agent = await makeAgent(ctx, { online: true });
    });
    afterAll(async () => {
      await b?.close();
      await ctx?.close();
    });

    test('wu/v2: failed authentications spread over both reach the limit once; then 429 with Retry-After on either; the right credentials still pass on both', async () => {
      const ip = '203.0.113.50';
      const fail = (http: TestContext['http'], i: number) => http.get(`${BASE}/auth`).set(from(ip)).set('Authorization', basic(API_KEY, `wrong${i}`));
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++) statuses.push((await fail(ctx.http, i)).status);
      for (let i = 3; i < 5; i++) statuses.push((await fail(b.http, i)).status);
      expect(statuses).toEqual([401, 401, 401, 401, 401]);
      for (const http of replicas()) {
        const refused = await fail(http, 9);
        expectError(refused, 429, 'rest_too_many_auth_failures');
        const wait = Number(refused.headers['retry-after']);
        expect(wait).toBeGreaterThan(0);
        expect(wait).toBeLessThanOrEqual(120);
        expect(refused.body.message).toBe(`Too many failed authentication attempts. Try again in ${wait} seconds.`);
      }
      for (const http of replicas()) expect((await http.get(`${BASE}/auth`).set(from(ip)).set('Authorization', ctx.basic)).status).toBe(200);
      // Another address has its own count, on either replica.
      expect((await fail(b.http, 0).set(from('203.0.113.51'))).status).toBe(401);
      expect(await counter(ctx.db, 'auth_failures', ip)).toMatchObject({ points: LIMIT + 2 });
    });

    test('chat: failed authentications have a counter of their own, shared by both replicas; an agent token still passes', async () => {
      const ip = '203.0.113.60';
      const fail = (http: TestContext['http']) => http.get(`${CHAT}/chat/agent/agents`).set(from(ip)).set(bearer('hfa_1_not-a-real-token'));
      // wu/v2 failures of this address do not count on the chat.
      for (let i = 0; i < LIMIT + 1; i++) await ctx.http.get(`${BASE}/auth`).set(from(ip)).set('Authorization', basic(API_KEY, 'wrong'));
      const statuses: number[] = [];
      for (const http of [ctx.http, b.http, ctx.http, b.http, b.http]) statuses.push((await fail(http)).status);
      expect(statuses).toEqual([401, 401, 401, 401, 401]);
      for (const http of replicas()) {
        const refused = await fail(http);
        expectError(refused, 429, 'rest_too_many_auth_failures');
        expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
        expect((await http.get(`${CHAT}/chat/agent/agents`).set(from(ip)).set(bearer(agent.token))).status).toBe(200);
      }
    });

    test('failures sent at once to both replicas: exactly the limit is answered 401, the rest 429', async () => {
      const ip = '203.0.113.70';
      const all = await Promise.all(
        Array.from({ length: 12 }, (_, i) => replicas()[i % 2].get(`${BASE}/auth`).set(from(ip)).set('Authorization', basic(API_KEY, `burst${i}`))),
      );
      const statuses = all.map((r) => r.status).sort();
      expect(statuses).toEqual([...Array(LIMIT).fill(401), ...Array(12 - LIMIT).fill(429)]);
      expect(await counter(ctx.db, 'auth_failures', ip)).toMatchObject({ points: 12 });
    });

    test('chat session creation: the limit holds across both replicas (429 chat_too_many_sessions, nothing written); agents are not limited', async () => {
      const ip = '198.51.100.80';
      const create = (http: TestContext['http'], headers: Record<string, string> = {}) =>
        http.post(`${CHAT}/chat/sessions`).set(from(ip)).set(headers).send({ customer_name: 'Flood', message: 'hi' });
      const sessions = async () => Number((await ctx.db('chat_sessions').count({ n: '*' }))[0].n);
      expect((await create(ctx.http)).status).toBe(201);
      expect((await create(b.http)).status).toBe(201);
      expect((await create(ctx.http)).status).toBe(201);
      const before = await sessions();
      for (const http of [b.http, ctx.http]) {
        const refused = await create(http);
        expectError(refused, 429, 'chat_too_many_sessions');
        const wait = Number(refused.headers['retry-after']);
        expect(wait).toBeGreaterThan(0);
        expect(wait).toBeLessThanOrEqual(600);
        expect(refused.body.data).toMatchObject({ retry_after: wait, limit: SESSIONS, window_seconds: 600 });
      }
      expect(await sessions()).toBe(before);
      expect((await create(b.http, bearer(agent.token))).status).toBe(201);
    });

    test('the counters outlive a replica: a replica started after another stopped refuses at once', async () => {
      const ip = '198.51.100.90';
      const first = await createReplica(ctx);
      try {
        for (let i = 0; i < LIMIT; i++) expect((await first.http.get(`${BASE}/auth`).set(from(ip)).set('Authorization', basic(API_KEY, 'x'))).status).toBe(401);
      } finally {
        await first.close();
      }
      const second = await createReplica(ctx);
      try {
        expectError(await second.http.get(`${BASE}/auth`).set(from(ip)).set('Authorization', basic(API_KEY, 'x')), 429, 'rest_too_many_auth_failures');
        expect((await second.http.get(`${BASE}/auth`).set(from(ip)).set('Authorization', ctx.basic)).status).toBe(200);
      } finally {
        await second.close();
      }
    });

    test('hostile client addresses (huge, latin-1, made-up X-Forwarded-For): limited like any other, stored under a bounded key, never a 500', async () => {
      const hostile = ['x'.repeat(8000), 'ü'.repeat(300), `fe80::1%${'z'.repeat(500)}`, 'not an address'];
      for (const [n, address] of hostile.entries()) {
        const http = replicas()[n % 2];
        const statuses: number[] = [];
        for (let i = 0; i <= LIMIT; i++) statuses.push((await http.get(`${BASE}/auth`).set('X-Forwarded-For', address).set('Authorization', basic(API_KEY, 'bad'))).status);
        expect(statuses).toEqual([...Array(LIMIT).fill(401), 429]);
        // Counted in PostgreSQL (not in a replica's memory), under the digest of the address.
        expect(await counter(ctx.db, 'auth_failures', address)).toMatchObject({ points: LIMIT + 1 });
      }
      const { rows } = await ctx.db.raw('SELECT max(length(key))::int AS longest FROM rate_limits');
      expect(rows[0].longest).toBeLessThanOrEqual(255);
    });

    test('the store directly: addresses PostgreSQL could not hold as text (NUL, lone surrogates) are counted; a window that ended starts over', async () => {
      const limits = new RateLimits(ctx.db, 1000);
      const probe = limits.perAddress({ name: 'probe', limit: 2, windowSeconds: 1 });
      expect(() => limits.perAddress({ name: 'probe', limit: 2, windowSeconds: 1 })).toThrow(/built twice/);
      for (const address of ['\u0000', '\ud800x']) {
        expect([await probe.take(address), await probe.take(address), await probe.take(address)]).toEqual([0, 0, 1]);
        expect(await counter(ctx.db, 'probe', address)).toMatchObject({ points: 3 });
      }
      await sleep(1100);
      expect(await probe.take('\u0000')).toBe(0);
      expect(await counter(ctx.db, 'probe', '\u0000')).toMatchObject({ points: 1 });
    });
  });

  describe('PostgreSQL failing or not answering', () => {
    test('the limiter counts in the process instead: no error, the limit holds per process, the answer comes within the store timeout', async () => {
      // A port that refuses connections, and a server that accepts them and never answers.
      const refusing = await new Promise<net.Server>((resolve) => {
        const s = net.createServer();
        s.listen(0, '127.0.0.1', () => resolve(s));
      });
      const refusedPort = (refusing.address() as net.AddressInfo).port;
      await new Promise<void>((resolve) => refusing.close(() => resolve()));
      const sockets = new Set<net.Socket>();
      const silent = net.createServer((socket) => {
        sockets.add(socket);
        socket.on('error', () => undefined);
      });
      await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
      const silentPort = (silent.address() as net.AddressInfo).port;
      // As createDb's pool, with Knex's own warnings (each failed connection) kept out of the output.
      const quiet = () => undefined;
      const unreachable = (port: number) =>
        knexFactory({ client: 'pg', connection: `postgres://postgres@127.0.0.1:${port}/none`, pool: { min: 0, max: 2 }, acquireConnectionTimeout: 10_000, log: { warn: quiet, error: quiet, debug: quiet, deprecate: quiet } });
      const dbs = [unreachable(refusedPort), unreachable(silentPort)];
      try {
        for (const db of dbs) {
          const limiter = new RateLimits(db, 300).perAddress({ name: 'auth_failures', limit: 2, windowSeconds: 60 });
          const waits: number[] = [];
          const started = Date.now();
          for (let i = 0; i < 3; i++) waits.push(await limiter.take('192.0.2.1'));
          expect(Date.now() - started).toBeLessThan(3 * 300 + 1500);
          expect(waits.slice(0, 2)).toEqual([0, 0]);
          expect(waits[2]).toBeGreaterThan(0);
          expect(waits[2]).toBeLessThanOrEqual(60);
          expect(await limiter.take('192.0.2.2')).toBe(0);
        }
      } finally {
        for (const s of sockets) s.destroy();
        await new Promise<void>((resolve) => silent.close(() => resolve()));
        await Promise.all(dbs.map((db) => db.destroy()));
      }
    });

    test('over HTTP: with the counters table unusable, failed authentications are still 401 then 429 (never 500), and the right credentials pass; counting in PostgreSQL resumes once it is back', async () => {
      const ctx = await createTestContext({ AUTH_FAILURE_LIMIT: '2', AUTH_FAILURE_WINDOW_SECONDS: '60' });
      try {
        await ctx.db.raw('ALTER TABLE rate_limits RENAME TO rate_limits_away');
        const statuses: number[] = [];
        for (let i = 0; i < 3; i++) statuses.push((await ctx.http.get(`${BASE}/auth`).set('Authorization', basic(API_KEY, 'bad'))).status);
        expect(statuses).toEqual([401, 401, 429]);
        expect((await ctx.http.get(`${BASE}/auth`).set('Authorization', ctx.basic)).status).toBe(200);
        await ctx.db.raw('ALTER TABLE rate_limits_away RENAME TO rate_limits');
        const chatFail = await ctx.http.get(`${CHAT}/chat/agent/agents`).set(bearer('nonsense'));
        expect(chatFail.status).toBe(401);
        expect(await ctx.db('rate_limits').where('key', 'like', 'chat_auth_failures:%').first('points')).toEqual({ points: 1 });
      } finally {
        await ctx.close();
      }
    });
  });

  describe('TRUST_PROXY as a hop count or a list of proxies: what a client writes into X-Forwarded-For does not choose its address', () => {
    for (const trust of ['1', 'loopback']) {
      describe(`TRUST_PROXY=${trust}`, () => {
        let ctx: TestContext;
        beforeAll(async () => {
          ctx = await createTestContext({ AUTH_FAILURE_LIMIT: '3', AUTH_FAILURE_WINDOW_SECONDS: '120', TRUST_PROXY: trust });
        });
        afterAll(async () => {
          await ctx?.close();
        });

        test('failures sent with a new made-up address each time, in front of the one the balancer added, count against that one', async () => {
          // The balancer (the test client on loopback) appended the address it saw; the client
          // wrote everything to its left.
          const client = trust === '1' ? '203.0.113.91' : '203.0.113.92';
          const fail = (i: number) =>
            ctx.http.get(`${BASE}/auth`).set(from(`198.51.100.${i}, ${client}`)).set('Authorization', basic(API_KEY, `wrong${i}`));
          const statuses: number[] = [];
          for (let i = 1; i <= 5; i++) statuses.push((await fail(i)).status);
          expect(statuses).toEqual([401, 401, 401, 429, 429]);
          expect(await counter(ctx.db, 'auth_failures', client)).toMatchObject({ points: 5 });
          for (let i = 1; i <= 5; i++) expect(await counter(ctx.db, 'auth_failures', `198.51.100.${i}`)).toBeUndefined();
          // Another address behind the same balancer has its own count.
          expect((await ctx.http.get(`${BASE}/auth`).set(from('203.0.113.99')).set('Authorization', basic(API_KEY, 'wrong'))).status).toBe(401);
        });
      });
    }
  });

  describe('attachment quotas across two replicas (counted from chat_attachments under locks)', () => {
    let ctx: TestContext;
    let b: Replica;
    let dataDir: string;

    beforeAll(async () => {
      dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-limits-'));
      ctx = await createTestContext({
        DATA_DIR: dataDir,
        TRUST_PROXY: 'true',
        CHAT_ATTACHMENT_MAX_BYTES: '40000',
        CHAT_ATTACHMENT_QUOTA_WINDOW_SECONDS: '3600',
        CHAT_ATTACHMENT_SESSION_MAX_FILES: '2',
        CHAT_ATTACHMENT_ADDRESS_MAX_FILES: '2',
      });
      b = await createReplica(ctx);
    });
    afterAll(async () => {
      await b?.close();
      await ctx?.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    });

    const send = (http: TestContext['http'], s: { id: number; token: string }, address: string) =>
      http.post(`${CHAT}/chat/sessions/${s.id}/attachments`).set(bearer(s.token)).set(from(address)).attach('file', Buffer.alloc(1000, 'q'), { filename: 'notes.txt', contentType: 'text/plain' });
    const storedFiles = () => {
      const dir = path.join(dataDir, 'chat-attachments');
      return fs.existsSync(dir) ? fs.readdirSync(dir).flatMap((d) => fs.readdirSync(path.join(dir, d))).length : 0;
    };
    const rows = async (where: Record<string, unknown>) => Number((await ctx.db('chat_attachments').where(where).count({ n: '*' }).first())!.n);

    test('the last free slot of an address: two uploads on two replicas, both past the early check and held at the address lock, cannot both take it', async () => {
      const ip = '192.0.2.40';
      const [s1, s2, s3] = [await makeSession(ctx), await makeSession(ctx), await makeSession(ctx)];
      expect((await send(ctx.http, s1, ip)).status).toBe(201);
      const results = await ctx.db.transaction(async (trx) => {
        // Hold the address's lock, as a third upload inside its transaction would.
        await trx.raw('SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [`chat_attachment_address:${ip}`]);
        const pending = [send(ctx.http, s2, ip).then((r) => r), send(b.http, s3, ip).then((r) => r)];
        await lockWaiters(ctx.db, 2);
        return pending;
      });
      const answers = await Promise.all(results);
      expect(answers.map((r) => r.status).sort()).toEqual([201, 429]);
      const refused = answers.find((r) => r.status === 429)!;
      expectError(refused, 429, 'chat_attachment_quota_exceeded');
      expect(refused.body.data).toMatchObject({ quota: 'address_files', limit: 2, usage: 2 });
      expect(await rows({ uploader_address: ip })).toBe(2);
      expect(storedFiles()).toBe(await rows({}));
    });

    test('the last free slot of a session: two uploads on two replicas, held at the session row lock, cannot both take it', async () => {
      const s = await makeSession(ctx);
      expect((await send(b.http, s, '192.0.2.41')).status).toBe(201);
      const results = await ctx.db.transaction(async (trx) => {
        await trx('chat_sessions').where({ id: s.id }).forUpdate().first('id');
        const pending = [send(ctx.http, s, '192.0.2.42').then((r) => r), send(b.http, s, '192.0.2.43').then((r) => r)];
        await lockWaiters(ctx.db, 2);
        return pending;
      });
      const answers = await Promise.all(results);
      expect(answers.map((r) => r.status).sort()).toEqual([201, 429]);
      expect(answers.find((r) => r.status === 429)!.body.data).toMatchObject({ quota: 'session_files', limit: 2, usage: 2 });
      expect(await rows({ session_id: s.id })).toBe(2);
      expect(storedFiles()).toBe(await rows({}));
    });
  });
});
