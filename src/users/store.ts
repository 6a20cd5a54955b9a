import type { Knex } from 'knex';
import { statementRows } from '../db/transaction';
import { hashPassword } from './password';

export interface UserRow {
  id: number;
  username: string;
  email: string;
  password_hash: string;
  display_name: string;
  date_created: Date;
  date_modified: Date;
}

/** Data access for the accounts behind customers (and, later, agents and tenant users). */
export const usersStore = {
  async findById(db: Knex | Knex.Transaction, id: number): Promise<UserRow | undefined> {
    return db<UserRow>('users').where({ id }).first();
  },

  async findTaken(db: Knex | Knex.Transaction, username: string | undefined, email: string | undefined, exceptId?: number) {
    const q = db<UserRow>('users').select('id', 'username', 'email');
    q.where((w) => {
      if (username !== undefined) w.orWhereRaw('lower(username) = lower(?)', [username]);
      if (email !== undefined) w.orWhereRaw('lower(email) = lower(?)', [email]);
    });
    if (exceptId !== undefined) q.whereNot('id', exceptId);
    const rows = await q;
    return {
      username: username !== undefined && rows.some((r) => r.username.toLowerCase() === username.toLowerCase()),
      email: email !== undefined && rows.some((r) => r.email.toLowerCase() === email.toLowerCase()),
    };
  },

  /** With the clear password (hashed here) or its hash (hashed earlier, out of the transaction). */
  async create(
    db: Knex | Knex.Transaction,
    input: { username: string; email: string; display_name?: string } & ({ password: string } | { password_hash: string }),
  ): Promise<UserRow> {
    const password_hash = 'password_hash' in input ? input.password_hash : await hashPassword(input.password);
    const [row] = await db<UserRow>('users')
      .insert({ username: input.username, email: input.email, password_hash, display_name: input.display_name ?? input.username })
      .returning('*');
    return row;
  },

  async update(
    db: Knex | Knex.Transaction,
    id: number,
    input: { email?: string; display_name?: string; password?: string },
  ): Promise<void> {
    const set: [string, unknown][] = [];
    if (input.email !== undefined) set.push(['email', input.email]);
    if (input.display_name !== undefined) set.push(['display_name', input.display_name]);
    if (input.password !== undefined) set.push(['password_hash', await hashPassword(input.password)]);
    if (set.length === 0) return;
    await statementRows(
      db,
      userUpdate(set.map(([column]) => column)),
      [...set.map(([, value]) => value), id],
      { prepared: true },
    );
  },
};

/** The users update setting these columns (and date_modified), by its columns: compiled once each (at most seven). */
const userUpdates = new Map<string, string>();
function userUpdate(columns: string[]): string {
  const key = columns.join(',');
  let sql = userUpdates.get(key);
  if (sql === undefined) {
    sql = `update "users" set ${columns.map((c) => `"${c}" = ?`).join(', ')}, "date_modified" = CURRENT_TIMESTAMP where "id" = ?`;
    userUpdates.set(key, sql);
  }
  return sql;
}
