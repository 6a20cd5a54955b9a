import type { Knex } from 'knex';
import { isPgError, isStillReferenced, PG_FOREIGN_KEY_VIOLATION } from '../db/errors';
import type { Db } from '../db/knex';
import type { ListSpec } from '../db/list';
import { NOW, TableService, type Row, type Trx } from '../db/table-service';
import { recordEvent } from '../events/record';
import { conflict, invalidParams } from '../http/errors';
import { usersStore } from '../users/store';
import { CUSTOMER_TYPES, EMAIL_VERIFICATION } from './schema';

export const customerListSpec: ListSpec = {
  idColumn: 'c.id',
  dateCreatedColumn: 'c.date_created',
  searchable: ['u.username', 'u.email', 'u.display_name'],
  searchTable: 'users',
  // Its own copy of the user's search_doc: a search reads customers alone, without the join.
  searchDoc: 'c.search_doc',
  table: 'customers',
  idBounds: 'customers',
  counted: { table: 'customers' },
  sortable: {
    id: 'c.id',
    user_id: 'c.user_id',
    username: 'u.username',
    email: 'u.email',
    display_name: 'u.display_name',
    email_verification: 'c.email_verification',
    vip: 'c.vip',
    has_trialed: 'c.has_trialed',
    date_registered: 'c.date_registered',
    last_login: 'c.last_login',
    date_created: 'c.date_created',
    date_modified: 'c.date_modified',
  },
  filters: {
    user_id: { column: 'c.user_id', type: 'int' },
    type: { column: 'c.type', type: { enum: CUSTOMER_TYPES } },
    email_verification: { column: 'c.email_verification', type: { enum: EMAIL_VERIFICATION } },
    vip: { column: 'c.vip', type: 'bool' },
    has_trialed: { column: 'c.has_trialed', type: 'bool' },
    signup_form: { column: 'c.signup_form', type: 'string' },
    username: { column: 'u.username', type: 'ci' },
    email: { column: 'u.email', type: 'ci' },
  },
};

type Account = { user_id?: number; username?: string; email?: string };

/**
 * The rules an account must pass to get a new customer, in one place: an existing user must
 * exist and not be a customer yet (a user has one customer); a new account's username and
 * e-mail must be free (compared case-insensitively). Problems by field (`user_id`,
 * `username`, `email`), as the customers API names them; /register prefixes them.
 */
export async function accountProblems(db: Knex | Trx, account: Account, except: { customerId?: number; userId?: number } = {}): Promise<Record<string, string>> {
  const params: Record<string, string> = {};
  if (account.user_id !== undefined) {
    // The user and its customer, if any, in one query.
    const user = await db('users as u').leftJoin('customers as c', 'c.user_id', 'u.id').where('u.id', account.user_id).first('u.id', 'c.id as customer_id');
    if (!user) params.user_id = `user_id ${account.user_id} does not match any user.`;
    else if (user.customer_id !== null && Number(user.customer_id) !== except.customerId) {
      params.user_id = `user_id ${account.user_id} already belongs to customer ${user.customer_id}; a user can have only one customer.`;
    }
  }
  if (account.username !== undefined || account.email !== undefined) {
    const taken = await usersStore.findTaken(db, account.username, account.email, except.userId);
    if (taken.username) params.username = 'username is already taken.';
    if (taken.email) params.email = 'email is already used by another account.';
  }
  return params;
}

async function assertAccount(trx: Trx, account: Account, except?: { customerId?: number; userId?: number }): Promise<void> {
  const params = await accountProblems(trx, account, except);
  if (Object.keys(params).length) throw invalidParams(params);
}

/**
 * Takes the customer's one trial, in the caller's transaction: true (and has_trialed set)
 * when they never had one. The row stays locked until the transaction ends, so two
 * registrations of one customer cannot both take it.
 */
export async function takeTrial(trx: Trx, id: number): Promise<boolean> {
  const taken = await trx('customers').where({ id, has_trialed: false }).update({ has_trialed: true, date_modified: trx.fn.now() });
  return taken > 0;
}


/**
 * Customers, read joined to their user (username, email and display_name are the account's).
 * A create takes user_id of an existing user, or username, email and password (or, from
 * /register, `password_hash`: hashed earlier, out of the transaction; never a request's, the
 * create schema is strict) to create the account first; an update changes the account's
 * fields too.
 */
export function createCustomerService(db: Db): TableService {
  return new TableService(db, {
    table: 'customers',
    model: 'customer',
    columns: {
      user_id: 'int',
      username: 'text',
      email: 'text',
      display_name: 'text',
      type: 'text',
      email_verification: 'text',
      date_registered: 'timestamp',
      last_login: 'timestamp',
      has_trialed: 'bool',
      vip: 'bool',
      ips: 'json',
      signup_form: 'text',
      extra_information: 'text',
      billing_address: 'json',
      notes: 'json',
      migrated_from_id: 'int',
    },
    listSpec: customerListSpec,
    join: {
      alias: 'c',
      fields: { username: 'u.username', email: 'u.email', display_name: 'u.display_name' },
      /**
       * A list's is a left join: every customer has its user (user_id is NOT NULL and a foreign
       * key), so both joins answer the same rows; PostgreSQL leaves the users table out of a
       * left-joined query that reads none of its columns (a list's ids and counts), but it can
       * only walk a users index in order (orderby username…) through an inner join. A filter or
       * search on a user's column turns the left join back into an inner one.
       */
      from(db, columns, list) {
        const q = db('customers as c');
        return (list && !list.orderColumn.startsWith('u.') ? q.leftJoin('users as u', 'u.id', 'c.user_id') : q.join('users as u', 'u.id', 'c.user_id')).select(columns);
      },
    },
    // Races that slip past the account checks end in a constraint violation: the same answer.
    uniques: {
      users_username_lower_uq: { field: 'username', message: 'username is already taken.' },
      users_email_lower_uq: { field: 'email', message: 'email is already used by another account.' },
      customers_user_id_unique: { field: 'user_id', message: 'user_id already belongs to another customer; a user can have only one customer.' },
    },
    hooks: {
      changed: (trx, change) => recordEvent(trx, { slug: change.before ? 'customer_updated' : 'customer_created', objectId: Number(change.record.id), payload: change.record }, { last: change.last }),
      async beforeCreate(trx, cols, _refs, { input }) {
        if (input.user_id !== undefined) {
          await assertAccount(trx, { user_id: input.user_id });
          return;
        }
        await assertAccount(trx, { username: input.username, email: input.email });
        const account = { username: input.username, email: input.email, display_name: input.display_name };
        const user = await usersStore.create(trx, input.password_hash !== undefined ? { ...account, password_hash: input.password_hash } : { ...account, password: input.password });
        cols.user_id = user.id;
      },
      async beforeUpdate(trx, current, cols, _refs, { input }) {
        if (input.user_id !== undefined && input.user_id !== Number(current.user_id)) await assertAccount(trx, { user_id: input.user_id }, { customerId: Number(current.id) });
        const userId = input.user_id ?? Number(current.user_id);
        if (input.email !== undefined) await assertAccount(trx, { email: input.email }, { userId });
        await usersStore.update(trx, userId, input);
        // A change of the account is one of the customer: its date_modified moves.
        if (input.email !== undefined || input.display_name !== undefined || input.password !== undefined) cols.date_modified = NOW;
      },
    },
    decorate(_row, rec) {
      if ('ips' in rec) rec.ips ??= [];
      if ('billing_address' in rec) rec.billing_address ??= {};
      if ('notes' in rec) rec.notes ??= [];
    },
    mapError(err, op, id) {
      if (op === 'delete') {
        if (!isStillReferenced(err)) return undefined;
        return conflict('wu_rest_customer_in_use', `Customer ${id} is still referenced by ${err.table ?? 'other records'}; delete or reassign those first.`, {
          referenced_by: err.table ?? null,
        });
      }
      // The user vanished after the account check.
      return isPgError(err, PG_FOREIGN_KEY_VIOLATION) ? invalidParams({ user_id: 'user_id does not match any user.' }) : undefined;
    },
  });
}
