import type { Knex } from 'knex';
import { isPgError, isStillReferenced, PG_FOREIGN_KEY_VIOLATION, PG_UNIQUE_VIOLATION } from '../db/errors';
import { preparedRows, type Db } from '../db/knex';
import { toTimestamp } from '../db/timestamps';
import { conflict, invalidParams } from '../http/errors';
import type { FieldSet } from '../http/fields';
import { runList, type ListQuery, type ListSpec } from '../http/list';
import type { ReadOptions, ResourceService } from '../http/resource';
import { isoDate } from '../http/validation';
import { usersStore } from '../users/store';
import { CUSTOMER_TYPES, EMAIL_VERIFICATION, type CreateCustomerInput, type UpdateCustomerInput } from './schema';

export interface Customer {
  id: number;
  model: 'customer';
  user_id: number;
  username: string;
  email: string;
  display_name: string;
  type: string;
  email_verification: string;
  date_registered: string | null;
  last_login: string | null;
  has_trialed: boolean;
  vip: boolean;
  ips: string[];
  signup_form: string;
  extra_information: string;
  billing_address: Record<string, unknown>;
  notes: unknown[];
  migrated_from_id: number | null;
  date_created: string | null;
  date_modified: string | null;
}

export const customerListSpec: ListSpec = {
  idColumn: 'c.id',
  dateCreatedColumn: 'c.date_created',
  searchable: ['u.username', 'u.email', 'u.display_name'],
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

type Row = Record<string, any>;

const same = (v: unknown) => v;
const integer = (v: unknown) => (v === null || v === undefined ? null : Number(v));

/** Each field of a customer: the column it is read from and how it is answered. */
const FIELDS: Record<string, [column: string, out: (v: any) => unknown]> = {
  id: ['c.id', Number],
  user_id: ['c.user_id', Number],
  username: ['u.username', same],
  email: ['u.email', same],
  display_name: ['u.display_name', same],
  type: ['c.type', same],
  email_verification: ['c.email_verification', same],
  date_registered: ['c.date_registered', isoDate],
  last_login: ['c.last_login', isoDate],
  has_trialed: ['c.has_trialed', Boolean],
  vip: ['c.vip', Boolean],
  ips: ['c.ips', (v) => v ?? []],
  signup_form: ['c.signup_form', same],
  extra_information: ['c.extra_information', same],
  billing_address: ['c.billing_address', (v) => v ?? {}],
  notes: ['c.notes', (v) => v ?? []],
  migrated_from_id: ['c.migrated_from_id', integer],
  date_created: ['c.date_created', isoDate],
  date_modified: ['c.date_modified', isoDate],
};

const COLUMNS = Object.values(FIELDS).map(([column]) => column);

/** The columns the fields need (the id always); every column without fields. `extra`: columns the query needs besides. */
function columnsFor(fields: FieldSet | undefined, extra: string[] = []): string[] {
  if (!fields) return COLUMNS;
  const cols = new Set(['c.id', ...extra]);
  for (const f of fields) if (Object.hasOwn(FIELDS, f)) cols.add(FIELDS[f][0]);
  return [...cols];
}

/** A row to the customer record; a row read for some fields gives those fields (and id, model). */
/** FIELDS as a list, made once: toCustomer runs for every row of a page. */
const FIELD_ENTRIES = Object.entries(FIELDS);

function toCustomer(r: Row): Customer {
  const out: Row = {};
  for (const [name, [, answer]] of FIELD_ENTRIES) {
    if (name in r) out[name] = answer(r[name]);
    if (name === 'id') out.model = 'customer';
  }
  return out as Customer;
}

/** Customer columns from validated input (account fields are handled apart). */
function customerPatch(input: UpdateCustomerInput): Record<string, unknown> {
  const patch: Record<string, unknown> = {};
  for (const k of ['user_id', 'type', 'email_verification', 'has_trialed', 'vip', 'extra_information', 'signup_form'] as const) {
    if (input[k] !== undefined) patch[k] = input[k];
  }
  for (const k of ['billing_address', 'notes', 'ips'] as const) {
    if (input[k] !== undefined) patch[k] = JSON.stringify(input[k]);
  }
  if (input.last_login !== undefined) patch.last_login = toTimestamp(input.last_login);
  if (input.date_registered !== undefined) patch.date_registered = toTimestamp(input.date_registered);
  return patch;
}

export class CustomerService implements ResourceService<Customer> {
  /**
   * GET one's statement, compiled once from the same builder as the lists: the hottest read
   * then skips Knex's query building and runner, and PostgreSQL plans it once per connection
   * (a prepared statement); inside a transaction it goes through the transaction.
   */
  private readonly getOne: { sql: string; native: string };

  constructor(private readonly db: Db) {
    const compiled = this.base().where('c.id', 0).limit(1).toSQL();
    this.getOne = { sql: compiled.sql, native: compiled.toNative().sql };
  }

  /**
   * `outer`: a left join. Every customer has its user (user_id is NOT NULL and a foreign key),
   * so both joins answer the same rows; PostgreSQL leaves the users table out of a left-joined
   * query that reads none of its columns (a list's ids and counts), but it can only walk a
   * users index in order (orderby username…) through an inner join.
   */
  private base(db: Knex | Knex.Transaction = this.db, columns = COLUMNS, outer = false) {
    const q = db('customers as c');
    return (outer ? q.leftJoin('users as u', 'u.id', 'c.user_id') : q.join('users as u', 'u.id', 'c.user_id')).select(columns);
  }

  async list(q: ListQuery, read: ReadOptions = {}) {
    // The order's column is read too: a page's rows keep what they are ordered by.
    const columns = columnsFor(read.fields, [q.orderColumn]);
    // A filter or search on a user's column turns the left join back into an inner one.
    const outer = !q.orderColumn.startsWith('u.');
    const page = await runList<Row>(this.db, () => this.base(this.db, columns, outer), q, customerListSpec);
    return { ...page, rows: page.rows.map(toCustomer) };
  }

  /**
   * `opts.db`: read in that transaction; `opts.fields`: only what those fields need. The whole
   * record outside a transaction is a prepared statement (planned once per connection).
   */
  async get(id: number, opts: ReadOptions & { db?: Knex | Knex.Transaction } = {}): Promise<Customer | null> {
    const db = opts.db ?? this.db;
    if (opts.fields === undefined) {
      const rows: Row[] = db === this.db ? await preparedRows<Row>(this.db, 'hostflow_customer_get_one', this.getOne.native, [id, 1]) : (await db.raw(this.getOne.sql, [id, 1])).rows;
      return rows[0] ? toCustomer(rows[0]) : null;
    }
    const row = await this.base(db, columnsFor(opts.fields)).where('c.id', id).first();
    return row ? toCustomer(row) : null;
  }

  async getMany(ids: number[], read: ReadOptions = {}): Promise<Customer[]> {
    if (ids.length === 0) return [];
    return (await this.base(this.db, columnsFor(read.fields)).whereIn('c.id', ids)).map(toCustomer);
  }

  /**
   * The rules an account must pass to get a new customer, in one place: an existing user must
   * exist and not be a customer yet (a user has one customer); a new account's username and
   * e-mail must be free (compared case-insensitively). Problems by field (`user_id`,
   * `username`, `email`), as the customers API names them; /register prefixes them.
   */
  static async accountProblems(
    db: Knex | Knex.Transaction,
    account: { user_id?: number; username?: string; email?: string },
    except: { customerId?: number; userId?: number } = {},
  ): Promise<Record<string, string>> {
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

  private static async assertAccount(trx: Knex.Transaction, account: { user_id?: number; username?: string; email?: string }, except?: { customerId?: number; userId?: number }): Promise<void> {
    const params = await CustomerService.accountProblems(trx, account, except);
    if (Object.keys(params).length) throw invalidParams(params);
  }

  /**
   * `opts.trx` runs the create in the caller's transaction; `opts.passwordHash` is the
   * password already hashed (out of the transaction); `opts.id` an id taken earlier from the
   * customers' sequence.
   */
  async create(input: CreateCustomerInput, opts: { trx?: Knex.Transaction; passwordHash?: string; id?: number } = {}): Promise<Customer> {
    const run = async (trx: Knex.Transaction) => {
      let userId = input.user_id;
      if (userId !== undefined) {
        await CustomerService.assertAccount(trx, { user_id: userId });
      } else {
        await CustomerService.assertAccount(trx, { username: input.username, email: input.email });
        const account = { username: input.username!, email: input.email!, display_name: input.display_name };
        const user = await usersStore.create(trx, opts.passwordHash !== undefined ? { ...account, password_hash: opts.passwordHash } : { ...account, password: input.password! });
        userId = user.id;
      }
      const [{ id }] = await trx('customers')
        .insert({ ...customerPatch(input), user_id: userId, ...(opts.id !== undefined ? { id: opts.id } : {}) })
        .returning('id');
      return (await this.get(Number(id), { db: trx }))!;
    };
    try {
      return await (opts.trx ? run(opts.trx) : this.db.transaction(run));
    } catch (err) {
      throw this.mapWriteError(err);
    }
  }

  async update(id: number, input: UpdateCustomerInput): Promise<Customer | null> {
    try {
      return await this.db.transaction(async (trx) => {
        const current = await trx('customers').where({ id }).forUpdate().first('id', 'user_id');
        if (!current) return null;
        if (input.user_id !== undefined && input.user_id !== Number(current.user_id)) await CustomerService.assertAccount(trx, { user_id: input.user_id }, { customerId: id });
        const userId = input.user_id ?? Number(current.user_id);
        if (input.email !== undefined) await CustomerService.assertAccount(trx, { email: input.email }, { userId });
        await usersStore.update(trx, userId, input);
        const patch = customerPatch(input);
        // An update that changes nothing still answers the record (and does not touch it).
        if (Object.keys(patch).length > 0 || input.email !== undefined || input.display_name !== undefined || input.password !== undefined) {
          await trx('customers').where({ id }).update({ ...patch, date_modified: trx.fn.now() });
        }
        return this.get(id, { db: trx });
      });
    } catch (err) {
      throw this.mapWriteError(err);
    }
  }

  /**
   * Takes the customer's one trial, in the caller's transaction: true (and has_trialed set)
   * when they never had one. The row stays locked until the transaction ends, so two
   * registrations of one customer cannot both take it.
   */
  async takeTrial(trx: Knex.Transaction, id: number): Promise<boolean> {
    const taken = await trx('customers').where({ id, has_trialed: false }).update({ has_trialed: true, date_modified: trx.fn.now() });
    return taken > 0;
  }

  async remove(id: number): Promise<boolean> {
    try {
      const n = await this.db('customers').where({ id }).delete();
      return n > 0;
    } catch (err) {
      if (isStillReferenced(err)) {
        throw conflict('wu_rest_customer_in_use', `Customer ${id} is still referenced by ${err.table ?? 'other records'}; delete or reassign those first.`, {
          referenced_by: err.table ?? null,
        });
      }
      throw err;
    }
  }

  /** Races that slip past the checks above end in a constraint violation: same answer. */
  private mapWriteError(err: unknown): unknown {
    if (isPgError(err, PG_UNIQUE_VIOLATION)) {
      const c = err.constraint ?? '';
      if (c.includes('username')) return invalidParams({ username: 'username is already taken.' });
      if (c.includes('email')) return invalidParams({ email: 'email is already used by another account.' });
      if (c.includes('user_id')) return invalidParams({ user_id: 'user_id already belongs to another customer; a user can have only one customer.' });
    }
    if (isPgError(err, PG_FOREIGN_KEY_VIOLATION)) return invalidParams({ user_id: 'user_id does not match any user.' });
    return err;
  }
}
