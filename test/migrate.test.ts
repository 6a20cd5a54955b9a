import crypto from 'node:crypto';
import pg from 'pg';
import { migrationSource } from '../migrations';
import * as searchDocuments from '../migrations/20261207000010_search_documents';
import * as customerSearchDocuments from '../migrations/20261207000020_customer_search_documents';
import { createDb, type Db } from '../src/db/knex';
import { migrateLatest } from '../src/db/migrate';

/** Migrations run by several processes at once (N replicas starting together). */
describe('migrations from several processes', () => {
  const adminUrl = process.env.HF_TEST_ADMIN_DB_URL!;
  const name = `hft_${process.env.HF_TEST_RUN_ID}_mig${crypto.randomBytes(4).toString('hex')}`;
  const dbs: Db[] = [];
  const admin = async (sql: string) => {
    const c = new pg.Client({ connectionString: adminUrl });
    await c.connect();
    try {
      await c.query(sql);
    } finally {
      await c.end();
    }
  };
  const open = () => {
    const url = new URL(adminUrl);
    url.pathname = `/${name}`;
    const db = createDb(url.toString(), 2);
    dbs.push(db);
    return db;
  };

  beforeAll(() => admin(`CREATE DATABASE ${name}`));
  afterAll(async () => {
    for (const db of dbs) await db.destroy();
    await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  });

  test('two processes migrating an empty database at once: one applies every migration, the other waits and applies none', async () => {
    const all = (await migrationSource.getMigrations([])).map((m) => migrationSource.getMigrationName(m));
    const [a, b] = await Promise.all([migrateLatest(open(), { pollMs: 50 }), migrateLatest(open(), { pollMs: 50 })]);
    expect([a.length, b.length].sort((x, y) => x - y)).toEqual([0, all.length]);
    const { rows } = await dbs[0].raw('SELECT count(*)::int AS n FROM knex_migrations');
    expect(rows[0].n).toBe(all.length);
    expect(await migrateLatest(open())).toEqual([]);
  }, 120_000);

  test('an index build cut short (left invalid) is built again when the search_doc migrations run again', async () => {
    const db = open();
    await migrateLatest(db);
    const valid = async (index: string) => (await db.raw('SELECT indisvalid AS valid FROM pg_index WHERE indexrelid = to_regclass(?)', [index])).rows[0]?.valid;
    for (const index of ['users_search_doc_trgm', 'customers_search_doc_trgm']) {
      // What a CREATE INDEX CONCURRENTLY interrupted leaves behind: the index, marked invalid.
      await db.raw('UPDATE pg_index SET indisvalid = false WHERE indexrelid = to_regclass(?)', [index]);
      expect(await valid(index)).toBe(false);
    }
    await searchDocuments.up(db);
    await customerSearchDocuments.up(db);
    for (const index of ['users_search_doc_trgm', 'customers_search_doc_trgm']) expect(await valid(index)).toBe(true);
    // A valid one is kept as it is.
    const oid = async () => (await db.raw("SELECT to_regclass('users_search_doc_trgm')::oid AS oid")).rows[0].oid;
    const before = await oid();
    await searchDocuments.up(db);
    expect(await oid()).toBe(before);
  });

  test('the knex lock row left held (by a crash or a hand-run knex migrate) ends the wait with how to free it', async () => {
    const db = open();
    await db('knex_migrations_lock').update({ is_locked: 1 });
    try {
      const started = Date.now();
      await expect(migrateLatest(db, { lockWaitMs: 400, pollMs: 50 })).rejects.toThrow(/UPDATE knex_migrations_lock SET is_locked = 0/);
      expect(Date.now() - started).toBeLessThan(5000);
    } finally {
      await db('knex_migrations_lock').update({ is_locked: 0 });
    }
  });
});
