/**
 * `npm run bench:chat`: the support chat's realtime path.
 * 1. Delivery latency: an agent posts messages one after the other (POST …/messages); a
 *    customer's WebSocket on the same session receives each; latency = time from just before
 *    the POST to the WebSocket event (HTTP, validation, the transaction, NOTIFY, LISTEN, send).
 * 2. Messages per second for one session: 8 concurrent posters for DURATION seconds into one
 *    session (each post locks the session row, so they serialize); counted as delivered.
 * 3. Messages per second for 100 sessions: 100 sessions with one customer socket each, 8
 *    concurrent posters spreading their posts over the sessions.
 * One Node process runs the API (startHttp, so the WebSocket upgrade path is the real one),
 * the posters and the sockets; PostgreSQL and Temporal share the same two cores. Prints a table
 * and writes bench/chat-results.json.
 */
import fs from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import WebSocket from 'ws';
import { AgentStore } from '../src/chat/agents';
import { chatNamespace } from '../src/config';
import { setLogLevel } from '../src/logger';
import { startHttp } from '../src/runtime';
import { benchLog, machineMeta, runCleanup, startBenchEnv, type Step } from './run';

const LATENCY_MESSAGES = 500;
const CONCURRENCY = 8;
const DURATION = 10;
const SESSIONS = 100;
const RUN_TAG = `${process.pid.toString(36)}${Date.now().toString(36)}`;

function pct(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}
const r2 = (n: number) => Math.round(n * 100) / 100;

interface Client {
  sessionId: number;
  token: string;
  ws: WebSocket;
  /** message body -> receive time */
  received: Map<string, number>;
}

async function main(): Promise<void> {
  setLogLevel('silent');
  const cleanup: Step[] = [];
  const log = benchLog();
  try {
    const env = await startBenchEnv({ cleanup, log, tag: `chat_${RUN_TAG}`, pgDir: 'bench-chat-pg', temporalLog: 'temporal-bench-chat.log' });
    const { db, settings, temporal } = env;
    const config = { ...env.config, AUTH_FAILURE_LIMIT: 1_000_000, CHAT_SESSION_CREATE_LIMIT: 1_000_000 };
    const http = await startHttp(config, db, settings, temporal);
    cleanup.push(['http', () => http.close()]);
    const base = `http://127.0.0.1:${config.PORT}${config.REST_PREFIX}/${chatNamespace(config)}`;
    const { token: agentToken, agent } = await new AgentStore(db).create({ name: 'Bench Agent', email: `bench-${RUN_TAG}@example.com` });
    await new AgentStore(db).setPresence(agent.id, 'online');
    const agentHeaders = { authorization: `Bearer ${agentToken}`, 'content-type': 'application/json' };

    const newClient = async (): Promise<Client> => {
      const res = await fetch(`${base}/chat/sessions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ customer_name: 'Bench Customer' }) });
      const body = (await res.json()) as { session: { id: number; fallback_reason: string | null }; token: string; realtime: { url: string } };
      if (res.status !== 201 || body.session.fallback_reason) throw new Error(`session: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
      const received = new Map<string, number>();
      const ws = new WebSocket(body.realtime.url);
      ws.on('message', (d) => {
        const ev = JSON.parse(String(d));
        if (ev.type === 'message') received.set(ev.message.body, performance.now());
      });
      await new Promise<void>((resolve, reject) => {
        ws.once('open', () => resolve());
        ws.once('error', reject);
      });
      cleanup.push([`socket ${body.session.id}`, async () => ws.terminate()]);
      return { sessionId: body.session.id, token: body.token, ws, received };
    };
    const post = async (sessionId: number, text: string) => {
      const res = await fetch(`${base}/chat/sessions/${sessionId}/messages`, { method: 'POST', headers: agentHeaders, body: JSON.stringify({ body: text }) });
      if (res.status !== 201) throw new Error(`post: ${res.status} ${(await res.text()).slice(0, 300)}`);
      await res.arrayBuffer();
    };
    const waitDelivered = async (c: Client, text: string, ms = 5000) => {
      const end = performance.now() + ms;
      while (!c.received.has(text)) {
        if (performance.now() > end) throw new Error(`not delivered: ${text}`);
        await new Promise((r) => setImmediate(r));
      }
      return c.received.get(text)!;
    };

    // 1. Latency, one message at a time (after 50 warm-up messages).
    const one = await newClient();
    for (let i = 0; i < 50; i++) {
      await post(one.sessionId, `warm ${i}`);
      await waitDelivered(one, `warm ${i}`);
    }
    const latencies: number[] = [];
    for (let i = 0; i < LATENCY_MESSAGES; i++) {
      const text = `lat ${i}`;
      const t0 = performance.now();
      await post(one.sessionId, text);
      latencies.push((await waitDelivered(one, text)) - t0);
    }
    latencies.sort((a, b) => a - b);
    log(`latency: p50 ${r2(pct(latencies, 50))} ms, p99 ${r2(pct(latencies, 99))} ms over ${LATENCY_MESSAGES} messages`);

    // 2 and 3. Throughput: CONCURRENCY posters for DURATION seconds.
    const throughput = async (clients: Client[], label: string) => {
      const sent: { client: Client; text: string; t0: number }[] = [];
      const end = performance.now() + DURATION * 1000;
      let n = 0;
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async (_x, w) => {
          while (performance.now() < end) {
            const client = clients[n++ % clients.length];
            const text = `${label} ${w} ${n}`;
            const t0 = performance.now();
            await post(client.sessionId, text);
            sent.push({ client, text, t0 });
          }
        }),
      );
      const lat: number[] = [];
      for (const s of sent) lat.push((await waitDelivered(s.client, s.text)) - s.t0);
      lat.sort((a, b) => a - b);
      const out = { messages: sent.length, seconds: DURATION, messagesPerSecond: r2(sent.length / DURATION), deliveryP50: r2(pct(lat, 50)), deliveryP99: r2(pct(lat, 99)) };
      log(`${label}: ${out.messagesPerSecond} msg/s delivered, post->delivery p50 ${out.deliveryP50} ms, p99 ${out.deliveryP99} ms`);
      return out;
    };
    const single = await throughput([one], 'one-session');
    const many: Client[] = [];
    for (let i = 0; i < SESSIONS; i++) many.push(await newClient());
    const hundred = await throughput(many, 'hundred-sessions');

    const results = {
      meta: { ...machineMeta(), postgres: env.embedded ? 'embedded' : 'external', concurrency: CONCURRENCY, durationSeconds: DURATION },
      latency: { messages: LATENCY_MESSAGES, p50: r2(pct(latencies, 50)), p99: r2(pct(latencies, 99)), max: r2(latencies[latencies.length - 1]) },
      oneSession: single,
      hundredSessions: { sessions: SESSIONS, ...hundred },
    };
    process.stdout.write(
      `\n| scenario | conc | msg/s | post->delivery p50 ms | p99 ms |\n|---|---|---|---|---|\n` +
        `| one message at a time, 1 session | 1 | ${r2(1000 / (latencies.reduce((a, b) => a + b, 0) / latencies.length))} | ${results.latency.p50} | ${results.latency.p99} |\n` +
        `| 1 session | ${CONCURRENCY} | ${single.messagesPerSecond} | ${single.deliveryP50} | ${single.deliveryP99} |\n` +
        `| ${SESSIONS} sessions | ${CONCURRENCY} | ${hundred.messagesPerSecond} | ${hundred.deliveryP50} | ${hundred.deliveryP99} |\n\n`,
    );
    fs.writeFileSync(path.join(__dirname, 'chat-results.json'), `${JSON.stringify(results, null, 2)}\n`);
  } finally {
    await runCleanup(cleanup);
  }
}

if (require.main === module) {
  main().catch((err) => {
    process.stderr.write(`${err?.stack ?? err}\n`);
    process.exit(1);
  });
}
