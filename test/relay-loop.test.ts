import net from 'node:net';
import knexFactory from 'knex';
import type { Db } from '../src/db/knex';
import { connectionString, listen, relayLoop } from '../src/db/listen';
import { eachLimited } from '../src/infra/each-limited';
import { createTestContext, type TestContext } from './helpers';

// No channel to LISTEN on: the loop never touches its database.
const NO_DB = null as unknown as Db;

describe('relayLoop (the outbox relays)', () => {
  test('minGapMs: wake-ups during a pass share one more pass, started at least minGapMs after the first ended', async () => {
    const starts: number[] = [];
    const ends: number[] = [];
    const loop = relayLoop({
      db: NO_DB,
      name: 'test-relay',
      channels: [],
      intervalMs: 3_600_000,
      minGapMs: 150,
      pass: async () => {
        starts.push(Date.now());
        await new Promise((r) => setTimeout(r, 20));
        ends.push(Date.now());
        return [starts.length];
      },
    });
    try {
      const first = loop.sweep();
      for (let i = 0; i < 5; i++) loop.wake();
      expect(await first).toEqual([1, 2]);
      expect(starts).toHaveLength(2);
      expect(starts[1] - ends[0]).toBeGreaterThanOrEqual(140);
    } finally {
      await loop.stop();
    }
    // Stopped: no further pass.
    loop.wake();
    await new Promise((r) => setTimeout(r, 200));
    expect(starts).toHaveLength(2);
  });

  test('a failing pass is logged, not thrown by wake(); sweep() rejects with it', async () => {
    const loop = relayLoop({ db: NO_DB, name: 'test-relay', channels: [], intervalMs: 3_600_000, pass: async () => Promise.reject(new Error('database away')) });
    try {
      expect(() => loop.wake()).not.toThrow();
      await expect(loop.sweep()).rejects.toThrow('database away');
    } finally {
      await loop.stop();
    }
  });
});

describe('listen (the relays\' LISTEN connection)', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext();
  });
  afterAll(async () => {
    await ctx?.close();
  });

  test('a connection closed under it, by the server (terminated) or cleanly by something in between (a proxy), is opened again and hears notifications', async () => {
    // The listener goes through a TCP proxy that can close its connections cleanly (FIN, no error).
    const target = new URL(connectionString(ctx.db));
    const sockets = new Set<net.Socket>();
    const proxy = net.createServer((client) => {
      const upstream = net.connect(Number(target.port || 5432), target.hostname);
      sockets.add(client);
      client.pipe(upstream).pipe(client);
      const drop = () => {
        sockets.delete(client);
        client.destroy();
        upstream.destroy();
      };
      client.on('close', drop).on('error', drop);
      upstream.on('close', drop).on('error', drop);
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    const proxied = new URL(target.href);
    proxied.hostname = '127.0.0.1';
    proxied.port = String((proxy.address() as net.AddressInfo).port);
    const viaProxy = knexFactory({ client: 'pg', connection: { connectionString: proxied.href }, pool: { min: 0, max: 1 } }) as unknown as Db;
    let heard = 0;
    const listener = listen(viaProxy, 'hostflow_listen_test', () => heard++, { name: 'listen-test', retryMs: 50 });
    const heardMore = async (than: number) => {
      const deadline = Date.now() + 10_000;
      while (heard <= than) {
        if (Date.now() > deadline) throw new Error(`heard ${heard}, expected more than ${than}`);
        await ctx.db.raw('NOTIFY hostflow_listen_test');
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    const listenerBackends = async () =>
      Number((await ctx.db.raw("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'hostflow-listen-test'")).rows[0].n);
    try {
      await heardMore(0);
      // Closed cleanly by the proxy.
      for (const s of sockets) s.end();
      await new Promise((r) => setTimeout(r, 200));
      const afterClose = heard;
      await heardMore(afterClose);
      // Terminated by the server.
      await ctx.db.raw("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'hostflow-listen-test'");
      await new Promise((r) => setTimeout(r, 200));
      await heardMore(heard);
      // One connection at a time: each loss opened exactly one new one.
      expect(await listenerBackends()).toBe(1);
    } finally {
      await listener.stop();
      await viaProxy.destroy();
      for (const s of sockets) s.destroy();
      await new Promise((r) => proxy.close(r));
    }
  });
});

describe('eachLimited', () => {
  test('every item once, never more than the limit at a time', async () => {
    let running = 0;
    let most = 0;
    const seen: number[] = [];
    await eachLimited([...Array(20).keys()], 4, async (n) => {
      running++;
      most = Math.max(most, running);
      await new Promise((r) => setTimeout(r, 5 + (n % 3)));
      seen.push(n);
      running--;
    });
    expect(seen.sort((a, b) => a - b)).toEqual([...Array(20).keys()]);
    expect(most).toBe(4);
  });

  test('the first error is thrown once the items in flight settled; no new item starts after it', async () => {
    const started: number[] = [];
    let settled = 0;
    await expect(
      eachLimited([1, 2, 3, 4, 5, 6], 2, async (n) => {
        started.push(n);
        // Item 2 fails while item 1 still runs.
        await new Promise((r) => setTimeout(r, n === 2 ? 2 : 30));
        settled++;
        if (n === 2) throw new Error('item 2 failed');
      }),
    ).rejects.toThrow('item 2 failed');
    expect(started).toEqual([1, 2]);
    expect(settled).toBe(2);
    expect(await eachLimited([], 3, async () => undefined)).toBeUndefined();
  });
});
