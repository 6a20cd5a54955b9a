import { OutboundError, outboundFetch, OutboundPolicy } from '../infra/outbound-http';

/** What a charge asks the gateway. */
export interface ChargeRequest {
  paymentId: number;
  /** The decimal amount as text (exact). */
  amount: string;
  currency: string;
  customer: { id: number; email: string | null };
  /** Sent as the Idempotency-Key header: the same key, the same answer (and one charge). */
  idempotencyKey: string;
}

/** The gateway's answer: charged (its charge id), or declined (why). */
export type ChargeAnswer = { status: 'succeeded'; id: string } | { status: 'failed'; id: string | null; reason: string };

/** The gateway could not answer (network, timeout, 5xx, 429): asking again later may succeed. */
export class GatewayUnavailable extends Error {
  override readonly name = 'GatewayUnavailable';
}

/** The gateway refused the request itself (another 4xx, or an answer that is not the protocol's): asking again will not help. */
export class GatewayRefused extends Error {
  override readonly name = 'GatewayRefused';
}

const MAX_ANSWER_BYTES = 64 * 1024;

/**
 * The `http` payment gateway: a small HTTP protocol (README "Billing: renewals").
 * `POST {base}/charges` with JSON `{payment_id, amount, currency, customer: {id, email}}` and
 * the header `Idempotency-Key`; it answers 200 `{id, status: "succeeded"|"failed", reason?}`.
 * A decline is an answer (status failed), not an error. The base URL is the operator's
 * (BILLING_HTTP_GATEWAY_URL), so its host is allowed even on loopback or a private network; the
 * request goes through the one outbound HTTP client (time and size bounded, redirects checked).
 */
export class HttpPaymentGateway {
  private readonly policy: OutboundPolicy;
  private readonly url: string;

  constructor(
    base: string,
    private readonly timeoutMs: number,
  ) {
    const u = new URL(base);
    this.policy = new OutboundPolicy({ hosts: [u.hostname.replace(/^\[|\]$/g, '').toLowerCase()], networks: [] });
    this.url = new URL('charges', base.endsWith('/') ? base : `${base}/`).toString();
  }

  async charge(req: ChargeRequest): Promise<ChargeAnswer> {
    let res;
    try {
      res = await outboundFetch(this.policy, this.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': req.idempotencyKey },
        body: JSON.stringify({ payment_id: req.paymentId, amount: req.amount, currency: req.currency, customer: req.customer }),
        maxBytes: MAX_ANSWER_BYTES,
        timeoutMs: this.timeoutMs,
        maxRedirects: 0,
      });
    } catch (err) {
      if (err instanceof OutboundError && !err.retryable && err.kind !== 'too_large') throw new GatewayRefused(`payment gateway: ${err.message}`);
      throw new GatewayUnavailable(`payment gateway: ${(err as Error).message}`);
    }
    if (res.status >= 500 || res.status === 429 || res.status === 408) throw new GatewayUnavailable(`payment gateway answered ${res.status}`);
    if (res.status !== 200) throw new GatewayRefused(`payment gateway answered ${res.status}`);
    let body: { id?: unknown; status?: unknown; reason?: unknown };
    try {
      body = JSON.parse(res.body.toString('utf8'));
    } catch {
      throw new GatewayRefused('payment gateway answered 200 without JSON');
    }
    const id = typeof body?.id === 'string' && body.id.length > 0 && body.id.length <= 255 ? body.id : null;
    if (body?.status === 'succeeded' && id) return { status: 'succeeded', id };
    if (body?.status === 'failed') return { status: 'failed', id, reason: typeof body.reason === 'string' ? body.reason.slice(0, 500) : 'declined' };
    throw new GatewayRefused('payment gateway answered 200 without {id, status: succeeded|failed}');
  }
}
