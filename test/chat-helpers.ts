import crypto from 'node:crypto';
import type { TestContext } from './helpers';

export const CHAT = '/wp-json/ultimate-multisite-support-tickets/v1';

export const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });

let seq = 0;
export function uniqueEmail(prefix = 'agent'): string {
  seq += 1;
  return `${prefix}${process.pid}${seq}${crypto.randomBytes(3).toString('hex')}@example.com`;
}

/** An agent created through the admin route (API credentials); answers its id and token. */
export async function makeAgent(ctx: TestContext, opts: { name?: string; admin?: boolean; online?: boolean } = {}): Promise<{ id: number; token: string; name: string }> {
  const name = opts.name ?? `Agent ${++seq}`;
  const res = await ctx.http.post(`${CHAT}/chat/agent/agents`).set('Authorization', ctx.basic).send({ name, email: uniqueEmail(), is_admin: opts.admin ?? false });
  if (res.status !== 201) throw new Error(`agent: ${res.status} ${JSON.stringify(res.body)}`);
  const agent = { id: res.body.agent.id as number, token: res.body.token as string, name };
  if (opts.online) {
    const p = await ctx.http.post(`${CHAT}/chat/agent/availability`).set(bearer(agent.token)).send({ presence: 'online' });
    if (p.status !== 200) throw new Error(`presence: ${p.status} ${JSON.stringify(p.body)}`);
  }
  return agent;
}

/** A session created anonymously, as the widget does; `workflowId` is its follow-up (agents see it). */
export async function makeSession(ctx: TestContext, body: Record<string, unknown> = {}): Promise<{ id: number; token: string; body: any; workflowId: string | null }> {
  const res = await ctx.http.post(`${CHAT}/chat/sessions`).send({ customer_name: 'Ada Lovelace', customer_email: 'ada@example.com', page_url: 'https://shop.example.com/pricing', ...body });
  if (res.status !== 201) throw new Error(`session: ${res.status} ${JSON.stringify(res.body)}`);
  const row = await ctx.db('chat_sessions').where({ id: res.body.session.id }).first('follow_up_workflow_id');
  return { id: res.body.session.id, token: res.body.token, body: res.body, workflowId: row.follow_up_workflow_id };
}

/** Expects the contract's error shape with the status and code. */
export function expectError(res: { status: number; body: any }, status: number, code?: string): void {
  if (res.status !== status) throw new Error(`expected ${status}${code ? ` ${code}` : ''}, got ${res.status} ${JSON.stringify(res.body)}`);
  if (typeof res.body?.code !== 'string' || typeof res.body?.message !== 'string' || res.body?.data?.status !== status) {
    throw new Error(`not the error shape: ${JSON.stringify(res.body)}`);
  }
  if (code && res.body.code !== code) throw new Error(`expected code ${code}, got ${res.body.code}: ${JSON.stringify(res.body)}`);
}
