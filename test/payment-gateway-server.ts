/**
 * A fake of the `http` payment gateway (src/billing/http-gateway.ts) on 127.0.0.1: POST
 * /charges answers 200 {id, status} and keeps each Idempotency-Key's answer (the same key is
 * answered the same, and charged once), as a real gateway does. It fails on purpose as told
 * per customer: decline, a number of 500s first, or answer slowly.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type Behaviour = { decline?: boolean; failFirst?: number; delayMs?: number; reason?: string };

export interface ChargeSeen {
  key: string;
  paymentId: number;
  amount: string;
  currency: string;
  customerId: number;
  /** What was answered: succeeded, failed, or 500. */
  answer: 'succeeded' | 'failed' | '500';
}

export interface FakeGateway {
  url: string;
  /** Every request, in order (repeats of a key included). */
  seen: ChargeSeen[];
  /** The keys of the charges that took money (a key is charged once, however often it is asked). */
  charged(): string[];
  /** Requests received and not answered yet. */
  pending(): number;
  /** How the gateway treats a customer's charges from now on. */
  behave(customerId: number, b: Behaviour): void;
  close(): Promise<void>;
}

export async function startFakeGateway(): Promise<FakeGateway> {
  const seen: ChargeSeen[] = [];
  const answers = new Map<string, { id: string; status: 'succeeded' | 'failed'; reason?: string }>();
  const behaviours = new Map<number, Behaviour>();
  const failures = new Map<number, number>();
  let n = 0;
  let inFlight = 0;
  type Body = { payment_id: number; amount: string; currency: string; customer: { id: number } };
  /** The answer to one charge request, as the customer's behaviour says. */
  const respond = async (body: Body, key: string, res: http.ServerResponse) => {
    const b = behaviours.get(body.customer.id) ?? {};
    const record = (answer: ChargeSeen['answer']) => seen.push({ key, paymentId: body.payment_id, amount: body.amount, currency: body.currency, customerId: body.customer.id, answer });
    if (b.delayMs) await new Promise((r) => setTimeout(r, b.delayMs));
    const done = answers.get(key);
    if (done) {
      record(done.status);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(done));
      return;
    }
    const failed = failures.get(body.customer.id) ?? 0;
    if (b.failFirst && failed < b.failFirst) {
      failures.set(body.customer.id, failed + 1);
      record('500');
      res.writeHead(500).end('gateway trouble');
      return;
    }
    const answer = b.decline ? { id: `ch_${++n}`, status: 'failed' as const, reason: b.reason ?? 'card_declined' } : { id: `ch_${++n}`, status: 'succeeded' as const };
    answers.set(key, answer);
    record(answer.status);
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/charges') {
        res.writeHead(404).end();
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Body;
      // Answered even when the caller is gone (a killed worker): the charge is made all the same.
      inFlight++;
      void respond(body, String(req.headers['idempotency-key'] ?? ''), res).finally(() => inFlight--);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    pending: () => inFlight,
    charged: () => [...answers].filter(([, a]) => a.status === 'succeeded').map(([key]) => key),
    behave: (customerId, b) => {
      behaviours.set(customerId, b);
      failures.delete(customerId);
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
