import type { Db } from '../db/knex';
import { isoDate } from '../db/timestamps';
import { conflict, notFoundItem } from '../http/errors';

/**
 * Canned replies with placeholders filled from the session when used:
 * {{customer_name}}, {{customer_first_name}}, {{customer_email}}, {{agent_name}},
 * {{session_id}}, {{ticket_id}}. Unknown placeholders stay as written.
 */
export const PLACEHOLDERS = ['customer_name', 'customer_first_name', 'customer_email', 'agent_name', 'session_id', 'ticket_id'] as const;

export interface PlaceholderValues {
  customer_name: string;
  customer_email: string;
  agent_name: string;
  session_id: number;
  ticket_id: number | null;
}

export function fillPlaceholders(body: string, v: PlaceholderValues): string {
  const values: Record<string, string> = {
    customer_name: v.customer_name || 'there',
    customer_first_name: (v.customer_name || 'there').split(/\s+/)[0],
    customer_email: v.customer_email,
    agent_name: v.agent_name,
    session_id: String(v.session_id),
    ticket_id: v.ticket_id === null ? '' : String(v.ticket_id),
  };
  // Own properties only: `in` would also find Object.prototype's (constructor, __proto__, ...).
  return body.replace(/\{\{\s*([a-z_]+)\s*\}\}/g, (m, name: string) => (Object.hasOwn(values, name) ? values[name] : m));
}

interface Row {
  id: number;
  shortcut: string;
  title: string;
  body: string;
  date_created: Date;
  date_modified: Date;
}

export function cannedRecord(r: Row, rendered?: string) {
  return {
    id: Number(r.id),
    shortcut: r.shortcut,
    title: r.title,
    body: r.body,
    ...(rendered !== undefined ? { rendered } : {}),
    date_created: isoDate(r.date_created)!,
    date_modified: isoDate(r.date_modified)!,
  };
}

export class CannedReplies {
  constructor(private readonly db: Db) {}

  async list(search?: string): Promise<Row[]> {
    const q = this.db('chat_canned_replies').orderBy('shortcut');
    if (search) {
      const like = `%${search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
      q.where((w) => {
        void w.where('shortcut', 'ilike', like).orWhere('title', 'ilike', like).orWhere('body', 'ilike', like);
      });
    }
    return q;
  }

  async get(id: number): Promise<Row> {
    const r = await this.db('chat_canned_replies').where({ id }).first();
    if (!r) throw notFoundItem('chat_canned_reply');
    return r;
  }

  private async assertFree(shortcut: string, except?: number) {
    const q = this.db('chat_canned_replies').whereRaw('lower(shortcut) = lower(?)', [shortcut]);
    if (except) q.whereNot({ id: except });
    if (await q.first('id')) throw conflict('chat_canned_reply_shortcut_exists', `A canned reply with the shortcut ${shortcut} already exists.`);
  }

  async create(input: { shortcut: string; title: string; body: string }): Promise<Row> {
    await this.assertFree(input.shortcut);
    const [r] = await this.db('chat_canned_replies').insert(input).returning('*');
    return r;
  }

  /** An empty patch answers the reply untouched (as wu/v2's updates). */
  async update(id: number, patch: { shortcut?: string; title?: string; body?: string }): Promise<Row> {
    const current = await this.get(id);
    if (Object.keys(patch).length === 0) return current;
    if (patch.shortcut) await this.assertFree(patch.shortcut, id);
    const [r] = await this.db('chat_canned_replies').where({ id }).update({ ...patch, date_modified: this.db.fn.now() }).returning('*');
    return r;
  }

  async remove(id: number): Promise<Row> {
    const r = await this.get(id);
    await this.db('chat_canned_replies').where({ id }).delete();
    return r;
  }
}
