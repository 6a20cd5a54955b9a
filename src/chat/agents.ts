import type { Db } from '../db/knex';
import { isoDate } from '../db/timestamps';
import { conflict, notFoundItem } from '../http/errors';
import { makeToken } from './tokens';

export type Presence = 'online' | 'away' | 'offline';

export interface AgentRow {
  id: number;
  name: string;
  email: string;
  is_admin: boolean;
  active: boolean;
  token_sha256: string;
  presence: Presence;
  presence_changed_at: Date | null;
  date_created: Date;
  date_modified: Date;
}

/** An agent as the API shows it: never the token digest. */
export function agentRecord(a: AgentRow) {
  return {
    id: a.id,
    name: a.name,
    email: a.email,
    is_admin: a.is_admin,
    active: a.active,
    presence: a.presence,
    presence_changed_at: isoDate(a.presence_changed_at),
    date_created: isoDate(a.date_created)!,
    date_modified: isoDate(a.date_modified)!,
  };
}

/** Agents: created by an admin (CLI or route), each with its own token (stored as a digest). */
export class AgentStore {
  constructor(private readonly db: Db) {}

  async create(input: { name: string; email: string; is_admin?: boolean }): Promise<{ agent: AgentRow; token: string }> {
    return this.db.transaction(async (trx) => {
      const existing = await trx('chat_agents').whereRaw('lower(email) = lower(?)', [input.email]).first('id');
      if (existing) throw conflict('chat_agent_email_exists', `An agent with the email ${input.email} already exists.`, { agent_id: existing.id });
      // The id is needed in the token: insert with a placeholder digest, then set it.
      const [row] = await trx('chat_agents')
        .insert({ name: input.name, email: input.email, is_admin: input.is_admin ?? false, token_sha256: 'pending' })
        .returning('*');
      const { token, digest } = makeToken('agent', row.id);
      const [agent] = await trx('chat_agents').where({ id: row.id }).update({ token_sha256: digest }).returning('*');
      return { agent, token };
    });
  }

  async get(id: number): Promise<AgentRow | undefined> {
    return this.db('chat_agents').where({ id }).first();
  }

  async require(id: number): Promise<AgentRow> {
    const a = await this.get(id);
    if (!a) throw notFoundItem('chat_agent');
    return a;
  }

  async list(): Promise<AgentRow[]> {
    return this.db('chat_agents').orderBy('id');
  }

  /** An empty patch answers the agent untouched (as wu/v2's updates). */
  async update(id: number, patch: { name?: string; email?: string; is_admin?: boolean; active?: boolean }): Promise<AgentRow> {
    const current = await this.require(id);
    if (Object.keys(patch).length === 0) return current;
    if (patch.email) {
      const other = await this.db('chat_agents').whereRaw('lower(email) = lower(?)', [patch.email]).whereNot({ id }).first('id');
      if (other) throw conflict('chat_agent_email_exists', `An agent with the email ${patch.email} already exists.`, { agent_id: other.id });
    }
    const changes: Record<string, unknown> = { ...patch, date_modified: this.db.fn.now() };
    // A disabled agent is offline.
    if (patch.active === false) Object.assign(changes, { presence: 'offline', presence_changed_at: this.db.fn.now() });
    const [row] = await this.db('chat_agents').where({ id }).update(changes).returning('*');
    return row;
  }

  /** A new token; the old one stops working at once. */
  async rotateToken(id: number): Promise<{ agent: AgentRow; token: string }> {
    await this.require(id);
    const { token, digest } = makeToken('agent', id);
    const [agent] = await this.db('chat_agents').where({ id }).update({ token_sha256: digest, date_modified: this.db.fn.now() }).returning('*');
    return { agent, token };
  }

  async setPresence(id: number, presence: Presence): Promise<AgentRow> {
    const agent = await this.require(id);
    if (!agent.active && presence !== 'offline') throw conflict('chat_agent_disabled', 'A disabled agent cannot go online.');
    const [row] = await this.db('chat_agents').where({ id }).update({ presence, presence_changed_at: this.db.fn.now() }).returning('*');
    return row;
  }
}
