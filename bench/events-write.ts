/**
 * `npx tsx bench/events-write.ts`: two costs of the event log measured apart from the HTTP
 * stacks of bench:events (issue 19), on a scratch database of TEST_DATABASE_URL's server
 * (default postgres://postgres@127.0.0.1:5432/postgres), migrated as the service migrates:
 * 1. NOTIFY at commit: CONNECTIONS connections each committing transactions of one event INSERT
 *    for SECONDS, with the statement trigger that notified `hostflow_events` (as events did
 *    before migration 20261204000010, a listener connected) and without it, alternated ROUNDS
 *    times: commits a second and the p50 of one transaction.
 * 2. One webhook relay dispatch pass, with no webhook: the old pass (a transaction of six
 *    statements, then the read of the unsignalled deliveries) and dispatchEvents (one
 *    statement), 200 passes each with nothing pending and with 25 new events before each.
 */
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { createDb, type Db } from '../src/db/knex';
import { migrateLatest } from '../src/db/migrate';
import { dispatchEvents } from '../src/webhooks/dispatch';

const CONNECTIONS = 8;
const SECONDS = 3;
const ROUNDS = 3;
const PASSES = 200;
const EVENT_SQL = `INSERT INTO events (slug, object_type, object_id, payload) VALUES ('customer_created', 'customer', 1, '{"id":1,"model":"customer","email":"a@example.com"}')`;

async function commits(url: string): Promise<{ perSecond: number; p50: number }> {
  const clients = await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      return c;
    }),
  );
  const ms: number[] = [];
  const end = Date.now() + SECONDS * 1000;
  await Promise.all(
    clients.map(async (c) => {
      while (Date.now() < end) {
        const t = performance.now();
        await c.query('BEGIN');
        await c.query(EVENT_SQL);
        await c.query('COMMIT');
        ms.push(performance.now() - t);
      }
    }),
  );
  await Promise.all(clients.map((c) => c.end()));
  ms.sort((a, b) => a - b);
  return { perSecond: ms.length / SECONDS, p50: ms[Math.floor(ms.length / 2)] };
}

async function setNotify(db: Db, on: boolean): Promise<void> {
  await db.raw('DROP TRIGGER IF EXISTS events_notify ON events');
  await db.raw('DROP FUNCTION IF EXISTS hostflow_events_notify()');
  if (!on) return;
  await db.raw(`CREATE FUNCTION hostflow_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_notify('hostflow_events', ''); RETURN NULL; END $$`);
  await db.raw('CREATE TRIGGER events_notify AFTER INSERT ON events FOR EACH STATEMENT EXECUTE FUNCTION hostflow_events_notify()');
}

/** The relay's pass before issue 19's change (src/webhooks/dispatch.ts at a5af017), with no webhook to signal. */
async function oldPass(db: Db): Promise<void> {
  await db.transaction(async (trx) => {
    const {
      rows: [{ snapshot }],
    } = await trx.raw('SELECT pg_current_snapshot()::text AS snapshot');
    const {
      rows: [{ horizon }],
    } = await trx.raw(
      `SELECT coalesce(min(x), pg_snapshot_xmax(?::pg_snapshot))::text AS horizon FROM pg_snapshot_xip(?::pg_snapshot) x
        WHERE (x::text::bigint % 4294967296) NOT IN (SELECT backend_xid::text::bigint FROM pg_stat_activity
          WHERE backend_xid IS NOT NULL AND datid IS DISTINCT FROM (SELECT oid FROM pg_database WHERE datname = current_database()))`,
      [snapshot, snapshot],
    );
    const cursor = await trx('webhook_dispatch').where({ id: 1 }).forUpdate().first();
    const { rows: events } = await trx.raw('SELECT id, txid, slug FROM events WHERE (txid, id) > (?::xid8, ?) AND txid < ?::xid8 ORDER BY txid, id LIMIT 1000', [cursor.last_txid, cursor.last_event_id, horizon]);
    if (events.length === 0) return;
    await trx.raw(
      `INSERT INTO webhook_deliveries (webhook_id, event_id, object_type, object_id)
       SELECT w.id, e.id, e.object_type, e.object_id FROM events e JOIN webhooks w ON w.active AND (w.event = e.slug OR w.event = '*')
        WHERE e.id = ANY(?::bigint[]) ORDER BY e.id, w.id ON CONFLICT (webhook_id, event_id) DO NOTHING`,
      [events.map((e: { id: string }) => Number(e.id))],
    );
    const last = events[events.length - 1];
    await trx('webhook_dispatch').where({ id: 1 }).update({ last_txid: last.txid, last_event_id: last.id, date_modified: trx.fn.now() });
  });
  await db('webhook_deliveries').whereNull('signalled_at').where({ status: 'pending' }).orderBy('id').limit(500).select('id');
}

async function passes(db: Db, pass: (db: Db) => Promise<unknown>, pending: number): Promise<{ p50: number; p90: number }> {
  const ms: number[] = [];
  for (let i = 0; i < PASSES; i++) {
    if (pending) await db.raw(`INSERT INTO events (slug, object_type, object_id, payload) SELECT 'customer_created', 'customer', g, '{}' FROM generate_series(1, ?) g`, [pending]);
    const t = performance.now();
    await pass(db);
    ms.push(performance.now() - t);
  }
  ms.sort((a, b) => a - b);
  return { p50: ms[Math.floor(PASSES / 2)], p90: ms[Math.floor(PASSES * 0.9)] };
}

async function main(): Promise<void> {
  const adminUrl = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const name = `hf_bench_events_write_${process.pid}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const db = createDb(url.toString(), 2);
  const listener = new pg.Client({ connectionString: url.toString() });
  try {
    await migrateLatest(db);
    await listener.connect();
    await listener.query('LISTEN hostflow_events');
    process.stdout.write(`load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}\n`);
    for (let round = 1; round <= ROUNDS; round++) {
      for (const on of [true, false]) {
        await setNotify(db, on);
        const r = await commits(url.toString());
        process.stdout.write(`${on ? 'NOTIFY   ' : 'no NOTIFY'} (round ${round}): ${r.perSecond.toFixed(0)} commits/s, p50 ${r.p50.toFixed(2)} ms\n`);
      }
    }
    await setNotify(db, false);
    for (const [label, pass] of [
      ['old pass (7 statements and the unsignalled read)', oldPass],
      ['new pass (one statement)', dispatchEvents],
    ] as const) {
      for (const pending of [0, 25]) {
        const r = await passes(db, pass, pending);
        process.stdout.write(`${label}, ${pending} new events: p50 ${r.p50.toFixed(2)} ms, p90 ${r.p90.toFixed(2)} ms\n`);
      }
    }
  } finally {
    await listener.end().catch(() => undefined);
    await db.destroy();
    await admin.query(`DROP DATABASE IF EXISTS ${name}`);
    await admin.end();
  }
}

main().catch((err) => {
  process.stderr.write(`bench/events-write failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
