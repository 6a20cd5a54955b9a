import crypto from 'node:crypto';
import { BASE, newCustomerBody, type TestContext } from './helpers';

/**
 * Domain check workflow ids are `domain-check-<domain id>` in one Temporal namespace shared
 * by every test file, while each file has its own database: start this file's domain ids at
 * a random offset so the files never share a workflow id.
 */
export async function offsetDomainIds(ctx: TestContext): Promise<void> {
  const start = 1_000_000 + crypto.randomInt(0, 2_000_000_000);
  await ctx.db.raw(`select setval('domains_id_seq', ${start})`);
}

export async function makeCustomer(ctx: TestContext): Promise<number> {
  const res = await ctx.http.post(`${BASE}/customers`).set('Authorization', ctx.basic).send(newCustomerBody());
  if (res.status !== 200) throw new Error(`customer: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.id;
}

/** A membership row straight into the table (memberships are another resource's routes). */
export async function makeMembership(ctx: TestContext, customerId: number): Promise<number> {
  const slug = `plan-${crypto.randomBytes(4).toString('hex')}`;
  const [product] = await ctx.db('products').insert({ slug, name: slug }).returning('id');
  const [m] = await ctx.db('memberships').insert({ customer_id: customerId, plan_id: product.id }).returning('id');
  return Number(m.id);
}

export async function workflowStatus(ctx: TestContext, workflowId: string): Promise<string> {
  try {
    const d = await ctx.temporal.client.workflow.getHandle(workflowId).describe();
    return d.status.name;
  } catch (err) {
    if ((err as Error).name === 'WorkflowNotFoundError') return 'NOT_FOUND';
    throw err;
  }
}

export async function waitFor<T>(fn: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 30_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (ok(v) || Date.now() > end) return v;
    await new Promise((r) => setTimeout(r, 200));
  }
}
