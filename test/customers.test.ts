import { customerListSpec } from '../src/customers/service';
import { applyFilters } from '../src/db/list';
import { parseListQuery } from '../src/http/list';
import { verifyPassword } from '../src/users/password';
import { BASE, createTestContext, newCustomerBody, statementsAndTrips, type TestContext } from './helpers';

describe('customers', () => {
  let ctx: TestContext;
  const auth = () => ({ Authorization: ctx.basic });
  beforeAll(async () => {
    ctx = await createTestContext();
  });
  afterAll(() => ctx.close());

  const count = async (table: string) => Number((await ctx.db(table).count({ n: '*' }))[0].n);

  test('create with username/email/password: full record with correct JSON types, password hashed', async () => {
    const body = newCustomerBody({ display_name: 'Ada L.', vip: true, has_trialed: false, email_verification: 'verified', extra_information: 'notes' });
    const res = await ctx.http.post(`${BASE}/customers`).set(auth()).send(body);
    expect(res.status).toBe(200);
    const c = res.body;
    expect(c).toMatchObject({
      model: 'customer',
      username: body.username,
      email: body.email,
      display_name: 'Ada L.',
      type: 'customer',
      email_verification: 'verified',
      vip: true,
      has_trialed: false,
      extra_information: 'notes',
      signup_form: 'by-admin',
      billing_address: {},
      notes: [],
      ips: [],
      last_login: null,
    });
    expect(typeof c.id).toBe('number');
    expect(typeof c.user_id).toBe('number');
    for (const k of ['date_created', 'date_modified', 'date_registered']) expect(new Date(c[k]).toISOString()).toBe(c[k]);
    expect(c).not.toHaveProperty('password');
    expect(c).not.toHaveProperty('password_hash');
    const user = await ctx.db('users').where({ id: c.user_id }).first();
    expect(user.password_hash).toMatch(/^scrypt\$/);
    expect(await verifyPassword('secret123', user.password_hash)).toBe(true);
    expect(await verifyPassword('wrong', user.password_hash)).toBe(false);
  });

  test('create with user_id of an existing user; a second customer for that user is refused', async () => {
    const [u] = await ctx.db('users').insert({ username: 'existing1', email: 'existing1@example.com', password_hash: 'x' }).returning('id');
    const res = await ctx.http.post(`${BASE}/customers`).set(auth()).send({ user_id: u.id, vip: 1 });
    expect(res.status).toBe(200);
    expect(res.body.user_id).toBe(u.id);
    expect(res.body.username).toBe('existing1');
    expect(res.body.vip).toBe(true);
    const before = await count('customers');
    const again = await ctx.http.post(`${BASE}/customers`).set(auth()).send({ user_id: u.id });
    expect(again.status).toBe(400);
    expect(again.body.code).toBe('wu_rest_invalid_parameter');
    expect(again.body.data.params.user_id).toMatch(/already belongs to customer/);
    expect(await count('customers')).toBe(before);
  });

  test('unknown user_id is 400 naming user_id', async () => {
    const res = await ctx.http.post(`${BASE}/customers`).set(auth()).send({ user_id: 987654 });
    expect(res.status).toBe(400);
    expect(res.body.data.params.user_id).toMatch(/does not match any user/);
  });

  test('user_id combined with account fields, or neither given, is refused', async () => {
    const both = await ctx.http.post(`${BASE}/customers`).set(auth()).send({ user_id: 1, username: 'someone', email: 'x@example.com', password: 'secret123' });
    expect(both.status).toBe(400);
    expect(Object.keys(both.body.data.params).sort()).toEqual(['email', 'password', 'username']);
    const neither = await ctx.http.post(`${BASE}/customers`).set(auth()).send({ vip: true });
    expect(neither.status).toBe(400);
    expect(neither.body.data.params).toEqual({
      username: 'username is required when user_id is not given (or is 0 or null).',
      email: 'email is required when user_id is not given (or is 0 or null).',
      password: 'password is required when user_id is not given (or is 0 or null).',
    });
  });

  test.each([
    ['/customers', 0],
    ['/customer', 0],
    ['/customers', null],
  ])('POST %s with user_id %p and username, email, password creates the user, as the original does', async (path, userId) => {
    const body = newCustomerBody({ user_id: userId, vip: true });
    const users = await count('users');
    const res = await ctx.http.post(`${BASE}${path}`).set(auth()).send(body);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ username: body.username, email: body.email, vip: true });
    const user = await ctx.db('users').where({ username: body.username }).first('id', 'email');
    expect(res.body.user_id).toBe(Number(user.id));
    expect(user.email).toBe(body.email);
    expect(await count('users')).toBe(users + 1);
    // 0 is never stored as a reference.
    expect(await ctx.db('customers').where({ user_id: 0 }).first()).toBeUndefined();
  });

  test('a form body (as WordPress posts one) with user_id=0 creates the user too', async () => {
    const body = newCustomerBody();
    const res = await ctx.http
      .post(`${BASE}/customers`)
      .set(auth())
      .type('form')
      .send(`user_id=0&username=${body.username}&email=${encodeURIComponent(body.email)}&password=${body.password}`);
    expect(res.status).toBe(200);
    expect(res.body.username).toBe(body.username);
    expect(res.body.user_id).toBeGreaterThan(0);
  });

  test.each([
    [{ user_id: -1 }, { user_id: 'user_id must be greater than or equal to 0.' }],
    [{ user_id: '0' }, { user_id: 'user_id is not of type integer.' }],
    [{ user_id: 1.5 }, { user_id: 'user_id is not of type integer.' }],
    [{ user_id: true }, { user_id: 'user_id is not of type integer.' }],
    [{ user_id: 9007199254740992 }, { user_id: expect.stringContaining('user_id must be less than') }],
  ])('create with hostile user_id %p (and the account fields) is 400 naming it, nothing created', async (patch, params) => {
    const [customers, users] = [await count('customers'), await count('users')];
    const res = await ctx.http.post(`${BASE}/customers`).set(auth()).send(newCustomerBody(patch));
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: 'wu_rest_invalid_parameter', message: expect.any(String), data: { status: 400, params } });
    expect([await count('customers'), await count('users')]).toEqual([customers, users]);
  });

  test('user_id 0 (or null) without the account fields is 400 naming each missing one, nothing created', async () => {
    const before = await count('customers');
    for (const body of [{ user_id: 0 }, { user_id: null, vip: true }]) {
      const res = await ctx.http.post(`${BASE}/customers`).set(auth()).send(body);
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ code: 'wu_rest_invalid_parameter', data: { status: 400 } });
      expect(res.body.data.params).toEqual({
        username: 'username is required when user_id is not given (or is 0 or null).',
        email: 'email is required when user_id is not given (or is 0 or null).',
        password: 'password is required when user_id is not given (or is 0 or null).',
      });
    }
    const partial = await ctx.http.post(`${BASE}/customers`).set(auth()).send({ user_id: 0, username: 'halfway' });
    expect(Object.keys(partial.body.data.params).sort()).toEqual(['email', 'password']);
    expect(await count('customers')).toBe(before);
  });

  test('on update, user_id 0 or null leaves the user as it is; a negative one is refused', async () => {
    const created = (await ctx.http.post(`${BASE}/customers`).set(auth()).send(newCustomerBody())).body;
    const zero = await ctx.http.put(`${BASE}/customers/${created.id}`).set(auth()).send({ user_id: 0, vip: true });
    expect(zero.status).toBe(200);
    expect(zero.body).toMatchObject({ id: created.id, user_id: created.user_id, username: created.username, vip: true });
    const nul = await ctx.http.patch(`${BASE}/customer/${created.id}`).set(auth()).send({ user_id: null, extra_information: 'kept' });
    expect(nul.body).toMatchObject({ user_id: created.user_id, extra_information: 'kept' });
    const negative = await ctx.http.put(`${BASE}/customers/${created.id}`).set(auth()).send({ user_id: -1 });
    expect(negative.status).toBe(400);
    expect(negative.body.data.params).toEqual({ user_id: 'user_id must be greater than or equal to 0.' });
    expect((await ctx.db('customers').where({ id: created.id }).first('user_id')).user_id).toBe(created.user_id);
  });

  test('taken username or e-mail (any case) is 400 naming the field, and nothing is created', async () => {
    const body = newCustomerBody();
    expect((await ctx.http.post(`${BASE}/customers`).set(auth()).send(body)).status).toBe(200);
    const users = await count('users');
    const res = await ctx.http
      .post(`${BASE}/customers`)
      .set(auth())
      .send({ username: body.username.toUpperCase(), email: body.email.toUpperCase(), password: 'secret123' });
    expect(res.status).toBe(400);
    expect(Object.keys(res.body.data.params).sort()).toEqual(['email', 'username']);
    expect(await count('users')).toBe(users);
  });

  test('concurrent creates of the same username: exactly one wins, the other gets a 400', async () => {
    const body = newCustomerBody();
    const results = await Promise.all([1, 2, 3].map(() => ctx.http.post(`${BASE}/customers`).set(auth()).send(body)));
    expect(results.map((r) => r.status).sort()).toEqual([200, 400, 400]);
    expect(Number((await ctx.db('users').where({ username: body.username }).count({ n: '*' }))[0].n)).toBe(1);
  });

  test.each([
    [{ type: 'reseller' }, 'type', 'type is not one of customer.'],
    [{ user_id: 'seven', username: undefined, email: undefined, password: undefined }, 'user_id', 'user_id is not of type integer.'],
    [{ email_verification: 'done' }, 'email_verification', 'email_verification is not one of none, pending, and verified.'],
    [{ vip: 'yes please' }, 'vip', 'vip is not of type boolean.'],
    [{ has_trialed: 2 }, 'has_trialed', 'has_trialed is not of type boolean.'],
    [{ extra_information: 5 }, 'extra_information', 'extra_information is not of type string.'],
    [{ billing_address: 'Main St' }, 'billing_address', 'billing_address is not of type object.'],
    [{ ips: ['300.1.1.1'] }, 'ips.0', expect.any(String)],
    [{ last_login: 'last tuesday' }, 'last_login', expect.stringContaining('not a valid date')],
    [{ username: 'a b!' }, 'username', expect.stringContaining('may contain only')],
    [{ password: '12345' }, 'password', 'password must be at least 6 characters long.'],
    [{ unknown_field: 1 }, 'unknown_field', 'unknown_field is not a valid parameter.'],
  ])('create with bad %o is 400 naming %s', async (patch, name, message) => {
    const before = await count('customers');
    const res = await ctx.http.post(`${BASE}/customers`).set(auth()).send(newCustomerBody(patch));
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('wu_rest_invalid_parameter');
    expect(res.body.data.params[name]).toEqual(message);
    expect(await count('customers')).toBe(before);
  });

  test('get one, on the plural and the singular path', async () => {
    const created = (await ctx.http.post(`${BASE}/customer`).set(auth()).send(newCustomerBody())).body;
    const plural = await ctx.http.get(`${BASE}/customers/${created.id}`).set(auth());
    const singular = await ctx.http.get(`${BASE}/customer/${created.id}`).set(auth());
    expect(plural.status).toBe(200);
    expect(plural.body).toEqual(created);
    expect(singular.body).toEqual(created);
    const list = await ctx.http.get(`${BASE}/customer`).set(auth()).query({ id: created.id });
    expect(list.body).toEqual([created]);
  });

  test('update with PUT, PATCH and POST on the id; date_modified moves; account fields update the user', async () => {
    const created = (await ctx.http.post(`${BASE}/customers`).set(auth()).send(newCustomerBody())).body;
    const put = await ctx.http.put(`${BASE}/customers/${created.id}`).set(auth()).send({ vip: true, extra_information: 'VIP since 2026' });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ vip: true, extra_information: 'VIP since 2026' });
    expect(new Date(put.body.date_modified).getTime()).toBeGreaterThanOrEqual(new Date(created.date_modified).getTime());
    const patch = await ctx.http.patch(`${BASE}/customers/${created.id}`).set(auth()).send({ email_verification: 'verified', billing_address: { country: 'DE' } });
    expect(patch.body).toMatchObject({ vip: true, email_verification: 'verified', billing_address: { country: 'DE' } });
    const post = await ctx.http
      .post(`${BASE}/customer/${created.id}`)
      .set(auth())
      .send({ display_name: 'Renamed', email: `renamed${created.id}@example.com`, password: 'new-password' });
    expect(post.body).toMatchObject({ display_name: 'Renamed', email: `renamed${created.id}@example.com` });
    const user = await ctx.db('users').where({ id: created.user_id }).first();
    expect(await verifyPassword('new-password', user.password_hash)).toBe(true);
  });

  test("a change of the account alone moves the customer's date_modified, in one statement on customers, and records the event", async () => {
    const created = (await ctx.http.post(`${BASE}/customers`).set(auth()).send(newCustomerBody())).body;
    // Microseconds since the epoch: finer than the answer's milliseconds, and whatever the session's time zone.
    const modifiedAt = async () => BigInt((await ctx.db.raw('select (extract(epoch from date_modified) * 1000000)::bigint::text as us from customers where id = ?', [created.id])).rows[0].us as string);
    const before = await modifiedAt();
    let res: Awaited<ReturnType<typeof ctx.http.patch>> | undefined;
    const { sql: statements } = await statementsAndTrips(ctx.db, async () => {
      res = await ctx.http.patch(`${BASE}/customers/${created.id}`).set(auth()).send({ display_name: 'Only the account' });
    });
    if (!res) throw new Error('no answer');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ display_name: 'Only the account', vip: created.vip });
    const after = await modifiedAt();
    expect(after > before).toBe(true);
    expect(res.body.date_modified).toBe(new Date(Number(after / 1000n)).toISOString());
    // One update of the customers row, setting date_modified alone.
    expect(statements.filter((sql) => /^update "customers"/.test(sql))).toEqual([expect.stringMatching(/^update "customers" set "date_modified" = CURRENT_TIMESTAMP where "id" = \$1 returning "id", "user_id", /)]);
    const event = await ctx.db('events').where({ object_type: 'customer', object_id: created.id, slug: 'customer_updated' }).orderBy('id', 'desc').first();
    expect(event.payload).toMatchObject({ id: created.id, display_name: 'Only the account' });
    // With a column of the customer too: one update sets both.
    const both = await ctx.http.patch(`${BASE}/customers/${created.id}`).set(auth()).send({ display_name: 'And VIP', vip: !created.vip });
    expect(both.body).toMatchObject({ display_name: 'And VIP', vip: !created.vip });
    expect((await modifiedAt()) > after).toBe(true);
  });

  test('an update that changes nothing answers 200 with the record', async () => {
    const created = (await ctx.http.post(`${BASE}/customers`).set(auth()).send(newCustomerBody())).body;
    const res = await ctx.http.put(`${BASE}/customers/${created.id}`).set(auth()).send({});
    expect(res.status).toBe(200);
    expect(res.body).toEqual(created);
  });

  test('update with an unknown or read-only key: 400 wu_rest_customer_invalid_set_method, nothing changes', async () => {
    const created = (await ctx.http.post(`${BASE}/customers`).set(auth()).send(newCustomerBody())).body;
    for (const body of [{ favourite_colour: 'blue', vip: true }, { username: 'renamed' }, { id: 5 }, { date_created: '2026-01-01' }]) {
      const res = await ctx.http.put(`${BASE}/customers/${created.id}`).set(auth()).send(body);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('wu_rest_customer_invalid_set_method');
    }
    expect((await ctx.http.get(`${BASE}/customers/${created.id}`).set(auth())).body).toEqual(created);
  });

  test('update with invalid values: 400 naming each field, nothing changes', async () => {
    const created = (await ctx.http.post(`${BASE}/customers`).set(auth()).send(newCustomerBody())).body;
    const res = await ctx.http.patch(`${BASE}/customers/${created.id}`).set(auth()).send({ vip: 'x', email: 'bad', email_verification: 'no' });
    expect(res.status).toBe(400);
    expect(Object.keys(res.body.data.params).sort()).toEqual(['email', 'email_verification', 'vip']);
    expect((await ctx.http.get(`${BASE}/customers/${created.id}`).set(auth())).body).toEqual(created);
  });

  test("update to another customer's e-mail or user is refused", async () => {
    const a = (await ctx.http.post(`${BASE}/customers`).set(auth()).send(newCustomerBody())).body;
    const b = (await ctx.http.post(`${BASE}/customers`).set(auth()).send(newCustomerBody())).body;
    const email = await ctx.http.put(`${BASE}/customers/${b.id}`).set(auth()).send({ email: a.email });
    expect(email.status).toBe(400);
    expect(email.body.data.params.email).toMatch(/already used/);
    const user = await ctx.http.put(`${BASE}/customers/${b.id}`).set(auth()).send({ user_id: a.user_id });
    expect(user.status).toBe(400);
    expect(user.body.data.params.user_id).toMatch(/already belongs/);
  });

  test('delete answers true, then the id is unknown; deleting again is 404', async () => {
    const created = (await ctx.http.post(`${BASE}/customers`).set(auth()).send(newCustomerBody())).body;
    const del = await ctx.http.delete(`${BASE}/customers/${created.id}`).set(auth());
    expect(del.status).toBe(200);
    expect(del.body).toBe(true);
    expect((await ctx.http.get(`${BASE}/customers/${created.id}`).set(auth())).status).toBe(404);
    const again = await ctx.http.delete(`${BASE}/customer/${created.id}`).set(auth());
    expect(again.status).toBe(404);
    expect(again.body.code).toBe('wu_rest_customer_invalid_id');
    // The user account stays (it may own other things); it can become a customer again.
    const recreated = await ctx.http.post(`${BASE}/customers`).set(auth()).send({ user_id: created.user_id });
    expect(recreated.status).toBe(200);
  });

  test('deleting a customer that still has a membership is refused with 409 and changes nothing', async () => {
    const created = (await ctx.http.post(`${BASE}/customers`).set(auth()).send(newCustomerBody())).body;
    const [plan] = await ctx.db('products').insert({ slug: `plan-for-${created.id}`, name: 'Plan' }).returning('id');
    await ctx.db('memberships').insert({ customer_id: created.id, plan_id: plan.id });
    const res = await ctx.http.delete(`${BASE}/customers/${created.id}`).set(auth());
    expect(res.status).toBe(409);
    expect(res.body.code).toBe('wu_rest_customer_in_use');
    expect(res.body.data.referenced_by).toBe('memberships');
    expect((await ctx.http.get(`${BASE}/customers/${created.id}`).set(auth())).body).toEqual(created);
  });

  describe('the email and username filters compare case-insensitively, as uniqueness does', () => {
    let carol: { id: number; email: string; username: string };
    let dave: { id: number; email: string; username: string };
    const list = (query: string) => ctx.http.get(`${BASE}/customers?${query}`).set(auth());
    const ids = (res: { body: { id: number }[] }) => res.body.map((c) => c.id);
    beforeAll(async () => {
      const tag = `${process.pid}${Date.now() % 100000}`;
      const make = async (name: string) => (await ctx.http.post(`${BASE}/customers`).set(auth()).send({ username: `${name}${tag}`, email: `${name.toLowerCase()}.${tag}@example.com`, password: 'secret123' })).body;
      carol = await make('Carol');
      dave = await make('Dave');
    });

    test('email= and username= in any case find the customer, with the paging headers', async () => {
      for (const q of [
        `email=${encodeURIComponent(carol.email.toUpperCase())}`,
        `email=${encodeURIComponent(carol.email)}`,
        `username=${carol.username.toLowerCase()}`,
        `username=${carol.username.toUpperCase()}`,
      ]) {
        const res = await list(q);
        expect(res.status).toBe(200);
        expect(ids(res)).toEqual([carol.id]);
        expect(res.headers['x-wp-total']).toBe('1');
      }
      const singular = await ctx.http.get(`${BASE}/customer`).set(auth()).query({ email: carol.email.toUpperCase() });
      expect(ids(singular)).toEqual([carol.id]);
    });

    test('email__in / username__in / __not_in in any case', async () => {
      expect(ids(await list(`email__in[]=${encodeURIComponent(carol.email.toUpperCase())}&email__in[]=${encodeURIComponent(dave.email)}`))).toEqual([dave.id, carol.id]);
      expect(ids(await list(`username__in=${carol.username.toUpperCase()},${dave.username.toLowerCase()}`))).toEqual([dave.id, carol.id]);
      const notIn = await list(`id__in=${carol.id},${dave.id}&email__not_in=${encodeURIComponent(carol.email.toUpperCase())}`);
      expect(ids(notIn)).toEqual([dave.id]);
      expect(notIn.headers['x-wp-total']).toBe('1');
    });

    test('hostile filter values: wildcards match only themselves; huge and odd values find nothing; NUL and repeats are 400 in the error shape', async () => {
      const wildcard = carol.email.replace('carol', 'c_rol');
      for (const value of [wildcard, `${carol.email.slice(0, 5)}%`, `%${carol.email.slice(5)}`, `${'a'.repeat(12_000)}@example.com`, '\ufffd\ufffd\ufffd@example.com', ' ', `${carol.email} `]) {
        const res = await list(`email=${encodeURIComponent(value)}`);
        expect(res.status).toBe(200);
        expect(res.body).toEqual([]);
        expect(res.headers['x-wp-total']).toBe('0');
      }
      // Invalid UTF-8 in the URL decodes to U+FFFD (never an unpaired surrogate): a value like any other.
      expect((await list('email=%ED%A0%80@example.com')).body).toEqual([]);
      const nul = await list('email=carol%00@example.com');
      expect(nul.status).toBe(400);
      expect(nul.body).toMatchObject({ code: 'wu_rest_invalid_parameter', message: expect.any(String), data: { status: 400, params: { email: expect.stringMatching(/NUL/) } } });
      const twice = await list(`email=${encodeURIComponent(carol.email)}&email=${encodeURIComponent(dave.email)}`);
      expect(twice.status).toBe(400);
      expect(twice.body.data.params).toEqual({ email: 'email must be given once, as a single value.' });
      const tooMany = await list(Array.from({ length: 101 }, (_, i) => `email__in[]=x${i}@example.com`).join('&'));
      expect(tooMany.status).toBe(400);
      expect(tooMany.body.data.params).toEqual({ email__in: 'email__in must contain at most 100 values.' });
    });

    test('unicode: the filter finds exactly what uniqueness calls the same address (both use lower())', async () => {
      // Addresses outside ASCII can only come from imported accounts (the API takes ASCII e-mails).
      const tag = `${process.pid}${Date.now() % 100000}`;
      const stored = `élodie.${tag}@exämple.com`;
      const [u] = await ctx.db('users').insert({ username: `elodie${tag}`, email: stored, password_hash: 'x', display_name: 'Élodie' }).returning('id');
      const [c] = await ctx.db('customers').insert({ user_id: u.id }).returning('id');
      const asked = stored.toUpperCase();
      const same = (await ctx.db.raw('SELECT lower(?) = lower(?) AS same', [stored, asked])).rows[0].same as boolean;
      const found = await list(`email=${encodeURIComponent(asked)}`);
      expect(found.status).toBe(200);
      expect(ids(found)).toEqual(same ? [Number(c.id)] : []);
      expect(ids(await list(`email=${encodeURIComponent(stored)}`))).toEqual([Number(c.id)]);
      // Uniqueness, by the same comparison: the other-case address is taken exactly when the filter finds it.
      const dup = ctx.db('users').insert({ username: `elodie2${tag}`, email: asked, password_hash: 'x', display_name: 'x' });
      if (same) await expect(dup).rejects.toThrow(/users_email_lower_uq/);
      else await dup;
    });

    test('an index serves each of these filters (plans with sequential scans disabled)', async () => {
      const plan = (query: Record<string, unknown>) =>
        ctx.db.transaction(async (trx) => {
          await trx.raw('SET LOCAL enable_seqscan = off');
          const q = parseListQuery(query, customerListSpec);
          const sql = applyFilters(trx('customers as c').join('users as u', 'u.id', 'c.user_id').select('c.id'), q, customerListSpec).toSQL();
          const r = await trx.raw(`EXPLAIN ${sql.sql}`, sql.bindings as never);
          return r.rows.map((row: Record<string, string>) => row['QUERY PLAN']).join('\n');
        });
      expect(await plan({ email: 'CAROL@example.com' })).toMatch(/users_email_lower_uq/);
      expect(await plan({ username: 'Carol' })).toMatch(/users_username_lower_uq/);
      expect(await plan({ email__in: 'A@x.example,b@X.example' })).toMatch(/users_email_lower_uq/);
    });
  });
});
