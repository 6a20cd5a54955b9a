import type { Knex } from 'knex';
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
    const patch: Record<string, unknown> = {};
    if (input.email !== undefined) patch.email = input.email;
    if (input.display_name !== undefined) patch.display_name = input.display_name;
    if (input.password !== undefined) patch.password_hash = await hashPassword(input.password);
    if (Object.keys(patch).length === 0) return;
    patch.date_modified = db.fn.now();
    await db('users').where({ id }).update(patch);
  },
};
