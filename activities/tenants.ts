import crypto from 'node:crypto';
import path from 'node:path';
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { Config } from '../src/config';
import type { Db } from '../src/db/knex';
import { deletePrefix, LocalObjectStorage, movePrefix, type ObjectStorage } from '../src/infra/object-storage';
import { siteUploadsPrefix } from '../src/sites/uploads';
import { decryptSecret, encryptSecret, parseCredentialsKey } from '../src/tenants/crypto';
import { tenantHosts, type TenantDbHost } from '../src/tenants/hosts';
import { changeTenant, CHECK_NAMES, type CheckName, type CheckResult, type TenantRow } from '../src/tenants/store';
import {
  authenticateWithLoginKey,
  createRoleAndDatabase,
  createSchema,
  databaseExists,
  ident,
  missingPrivileges,
  missingTables,
  roleExists,
  SITE_DATA,
  SITE_DATA_TABLES,
  syncUsers,
  terminateSessions,
  upsertRows,
  withAdmin,
  withClient,
  type TenantUser,
} from '../src/tenants/tenant-db';

/**
 * The side effects of the tenant workflows (workflows/tenants.ts). Every activity is
 * idempotent: it looks at what exists and does only what is missing, so a retry, or a
 * workflow run again after a crash, finishes the job instead of doing it twice.
 */
export interface TenantActivityDeps {
  db: Db;
  config: Config;
  /** Shared file storage: the site's uploads, and (s3) the tenants' roots. */
  storage: ObjectStorage;
}

const PUSH_BATCH = 500;

export function createTenantActivities({ db, config, storage }: TenantActivityDeps) {
  const hosts = (): TenantDbHost[] => {
    try {
      return tenantHosts(config, db);
    } catch (err) {
      throw ApplicationFailure.nonRetryable((err as Error).message, 'TenantConfigError');
    }
  };
  const key = (): Buffer => {
    if (!config.TENANT_CREDENTIALS_KEY) {
      throw ApplicationFailure.nonRetryable('TENANT_CREDENTIALS_KEY is not set on the worker: tenant credentials cannot be encrypted or read.', 'TenantConfigError');
    }
    return parseCredentialsKey(config.TENANT_CREDENTIALS_KEY);
  };
  /**
   * A tenant's filesystem root (tenants.filesystem_root): with the local driver a folder under
   * TENANT_FILES_ROOT, as before; with s3 the keys under tenants/<folder>/ of the bucket (the
   * column holds its s3:// location), so any worker reaches it.
   */
  const newRoot = (folder: string) =>
    storage.driver === 'local' ? path.join(config.TENANT_FILES_ROOT ?? path.join(config.DATA_DIR, 'tenants'), folder) : storage.locationOf(`tenants/${folder}`);
  const rootOf = (filesystemRoot: string): { files: ObjectStorage; prefix: string } =>
    storage.driver === 'local'
      ? { files: new LocalObjectStorage(path.dirname(filesystemRoot)), prefix: `${path.basename(filesystemRoot)}/` }
      : { files: storage, prefix: `tenants/${path.posix.basename(filesystemRoot)}/` };

  async function load(tenantId: number, step?: string): Promise<TenantRow> {
    progress(step ? { step } : undefined);
    if (step) await db('tenants').where({ id: tenantId }).update({ step, date_modified: db.fn.now() });
    const row = await db('tenants').where({ id: tenantId }).first();
    if (!row) throw ApplicationFailure.nonRetryable(`tenant ${tenantId} is not in the registry`, 'TenantGone');
    return row as TenantRow;
  }
  function hostOf(tenant: TenantRow): TenantDbHost {
    const host = hosts().find((h) => h.name === tenant.database_host);
    if (!host) throw ApplicationFailure.nonRetryable(`database host "${tenant.database_host}" is not configured (TENANT_DATABASE_HOSTS)`, 'TenantConfigError');
    return host;
  }
  function password(tenant: TenantRow): string {
    if (!tenant.credentials) throw ApplicationFailure.nonRetryable('the tenant has no stored credentials', 'TenantCredentialsMissing');
    return decryptSecret(key(), tenant.credentials, tenant.uid);
  }
  const asTenant = (tenant: TenantRow) => ({ user: tenant.role_name!, password: password(tenant) });

  /** The users the tenant must hold: the owning customer's user (administrator) and the site's linked users. */
  async function expectedUsers(siteId: number): Promise<TenantUser[]> {
    const owner = await db('sites as s')
      .join('customers as c', 'c.id', 's.customer_id')
      .join('users as u', 'u.id', 'c.user_id')
      .where('s.id', siteId)
      .first('u.id', 'u.username', 'u.email', 'u.display_name', 'u.password_hash');
    const linked = await db('site_users as su').join('users as u', 'u.id', 'su.user_id').where('su.site_id', siteId).select('u.id', 'u.username', 'u.email', 'u.display_name', 'u.password_hash', 'su.role').orderBy('u.id');
    const users = new Map<number, TenantUser>();
    for (const u of linked) users.set(Number(u.id), { ...u, id: Number(u.id), is_admin: u.role === 'administrator' });
    if (owner) users.set(Number(owner.id), { ...owner, id: Number(owner.id), role: 'administrator', is_admin: true });
    return [...users.values()].sort((a, b) => a.id - b.id);
  }

  /** The tenant's users made exactly the expected ones; `users` push jobs up to now are done. */
  async function provisionUsers(tenant: TenantRow, jobIds?: number[]): Promise<{ users: number }> {
    // Jobs queued from here on are picked up by the next run: only those seen before the read count as done.
    const jobs = jobIds ?? (await db('tenant_push_jobs').where({ tenant_id: tenant.id, kind: 'users' }).whereIn('status', ['queued', 'running', 'failed']).pluck('id'));
    const users = await expectedUsers(tenant.site_id);
    progress({ step: 'users', expected: users.length });
    await withClient(hostOf(tenant), tenant.database_name!, (c) => syncUsers(c, users));
    if (jobs.length) await db('tenant_push_jobs').whereIn('id', jobs).update({ status: 'done', rows_pushed: users.length, last_error: null, date_modified: db.fn.now() });
    return { users: users.length };
  }

  async function sharedRowCounts(siteId: number): Promise<Record<string, number>> {
    const out: Record<string, number> = {};
    for (const table of SITE_DATA_TABLES) out[table] = Number((await db(table).where({ site_id: siteId }).count({ n: '*' }))[0].n);
    return out;
  }

  return reportingProgress({
    /** Step 1: bind the registry entry to a database host, names, a folder and a host name. */
    async tenantRegister(tenantId: number): Promise<{ database_host: string; database_name: string }> {
      const all = hosts();
      return db.transaction(async (trx) => {
        // One placement decision at a time, so parallel bootstraps spread over the hosts.
        await trx.raw("SELECT pg_advisory_xact_lock(hashtext('hostflow.tenant_placement'))");
        const tenant = (await trx('tenants').where({ id: tenantId }).forUpdate().first()) as TenantRow | undefined;
        if (!tenant) throw ApplicationFailure.nonRetryable(`tenant ${tenantId} is not in the registry`, 'TenantGone');
        const site = await trx('sites').where({ id: tenant.site_id }).first('id', 'domain', 'path');
        if (!site) throw ApplicationFailure.nonRetryable(`site ${tenant.site_id} no longer exists`, 'TenantGone');
        let host = tenant.database_host;
        if (!host) {
          if (tenant.requested_host) {
            if (!all.some((h) => h.name === tenant.requested_host)) throw ApplicationFailure.nonRetryable(`database host "${tenant.requested_host}" is not configured`, 'TenantConfigError');
            host = tenant.requested_host;
          } else {
            const load: { database_host: string; n: number }[] = await trx('tenants').whereNot({ state: 'torn_down' }).whereNotNull('database_host').groupBy('database_host').select('database_host', trx.raw('count(*)::int AS n'));
            const count = new Map(load.map((r) => [String(r.database_host), Number(r.n)]));
            host = [...all].sort((a, b) => (count.get(a.name) ?? 0) - (count.get(b.name) ?? 0))[0].name;
          }
        }
        const short = tenant.uid.replace(/-/g, '').slice(0, 10);
        const name = `hf_tenant_${tenant.site_id}_${short}`;
        const patch = {
          step: 'registry',
          database_host: host,
          database_name: tenant.database_name ?? name,
          role_name: tenant.role_name ?? name,
          filesystem_root: tenant.filesystem_root ?? newRoot(`site-${tenant.site_id}-${short}`),
          hostname: tenant.hostname ?? String(site.domain).toLowerCase(),
          path: tenant.path ?? site.path ?? '/',
          date_modified: trx.fn.now(),
        };
        await trx('tenants').where({ id: tenantId }).update(patch);
        return { database_host: host, database_name: patch.database_name };
      });
    },

    /** Step 2: credentials (stored encrypted before the role exists), the role, the database. */
    async tenantCreateDatabase(tenantId: number): Promise<void> {
      let tenant = await load(tenantId, 'database');
      const k = key();
      if (!tenant.credentials) {
        const secret = crypto.randomBytes(24).toString('base64url');
        await db('tenants').where({ id: tenantId }).whereNull('credentials').update({ credentials: encryptSecret(k, secret, tenant.uid) });
        tenant = await load(tenantId);
      }
      progress({ step: 'database', credentials: 'stored' });
      await createRoleAndDatabase(hostOf(tenant), tenant.role_name!, tenant.database_name!, password(tenant));
    },

    /** Step 3: the tenant schema and the role's grants. */
    async tenantCreateSchema(tenantId: number): Promise<void> {
      const tenant = await load(tenantId, 'schema');
      await createSchema(hostOf(tenant), tenant.database_name!, tenant.role_name!, tenant.site_id);
    },

    /** Step 4: the site's users, copied into the tenant database (exactly those). */
    async tenantProvisionUsers(tenantId: number): Promise<{ users: number }> {
      const tenant = await load(tenantId, 'users');
      return provisionUsers(tenant);
    },

    /**
     * The tenantPush workflow: queued `users` push jobs (a network change to the tenant's
     * users, queued by the database triggers) are carried out. Only for a ready or not-ready
     * tenant: during bootstrap the users step does it, during teardown nothing is needed.
     */
    async tenantSyncUsers(tenantId: number): Promise<{ synced: boolean; users?: number }> {
      const tenant = await load(tenantId);
      if (tenant.state !== 'ready' && tenant.state !== 'not_ready') return { synced: false };
      const pending = await db('tenant_push_jobs').where({ tenant_id: tenantId, kind: 'users' }).whereIn('status', ['queued', 'running', 'failed']).pluck('id');
      if (!pending.length) return { synced: false };
      await db('tenant_push_jobs').whereIn('id', pending).update({ status: 'running', attempts: db.raw('attempts + 1'), date_modified: db.fn.now() });
      try {
        return { synced: true, ...(await provisionUsers(tenant, pending)) };
      } catch (err) {
        await db('tenant_push_jobs').whereIn('id', pending).update({ status: 'failed', last_error: (err as Error).message, date_modified: db.fn.now() });
        throw err;
      }
    },

    /**
     * Step 5: push the site's data into the tenant database through the tenant role, then
     * remove it from the shared tables. One push job per table records the work; a job
     * left queued, running or failed by an earlier attempt is taken up again.
     */
    async tenantPushData(tenantId: number): Promise<{ rows: number }> {
      const tenant = await load(tenantId, 'push');
      const host = hostOf(tenant);
      const login = asTenant(tenant);
      let total = 0;
      for (const table of SITE_DATA_TABLES) {
        let job = await db('tenant_push_jobs').where({ tenant_id: tenantId, kind: table }).whereIn('status', ['queued', 'running', 'failed']).orderBy('id').first();
        job ??= (await db('tenant_push_jobs').insert({ tenant_id: tenantId, kind: table }).returning('*'))[0];
        await db('tenant_push_jobs').where({ id: job.id }).update({ status: 'running', attempts: db.raw('attempts + 1'), date_modified: db.fn.now() });
        try {
          let pushed = 0;
          await withClient(
            host,
            tenant.database_name!,
            async (c) => {
              for (;;) {
                const rows = await db(table).where({ site_id: tenant.site_id }).orderBy('id').limit(PUSH_BATCH).select(SITE_DATA[table] as unknown as string[]);
                if (!rows.length) break;
                await upsertRows(c, table, rows);
                // Only what now lives in the tenant database leaves the shared table.
                await db(table).where({ site_id: tenant.site_id }).whereIn('id', rows.map((r) => r.id)).delete();
                pushed += rows.length;
                progress({ step: 'push', table, pushed });
              }
            },
            login,
          );
          await db('tenant_push_jobs').where({ id: job.id }).update({ status: 'done', rows_pushed: pushed, last_error: null, date_modified: db.fn.now() });
          total += pushed;
        } catch (err) {
          await db('tenant_push_jobs').where({ id: job.id }).update({ status: 'failed', last_error: (err as Error).message, date_modified: db.fn.now() });
          throw err;
        }
      }
      return { rows: total };
    },

    /** Step 6: the filesystem root (the site's uploads move in) and the routing entry. */
    async tenantCreateFilesAndRoute(tenantId: number): Promise<void> {
      const tenant = await load(tenantId, 'files_and_routing');
      const root = rootOf(tenant.filesystem_root!);
      let moved = 0;
      await movePrefix(storage, siteUploadsPrefix(tenant.site_id), root.files, `${root.prefix}uploads/`, {
        signal: cancellation(),
        onEntry: (key) => progress({ step: 'files_and_routing', moved: ++moved, key }),
      });
      progress({ step: 'files_and_routing', moved });
      // Under the tenant's row lock: two attempts at once (a timed-out one still running) would
      // otherwise both insert, and the second fail on the (hostname, path) unique index, which
      // ON CONFLICT (tenant_id) does not arbitrate.
      await db.transaction(async (trx) => {
        await trx('tenants').where({ id: tenant.id }).forUpdate().first('id');
        await trx('tenant_routes')
          .insert({ hostname: tenant.hostname, path: tenant.path ?? '/', tenant_id: tenant.id, site_id: tenant.site_id, database_host: tenant.database_host, database_name: tenant.database_name })
          .onConflict(trx.raw('(tenant_id)'))
          .merge(['hostname', 'path', 'database_host', 'database_name']);
      });
    },

    /** Marks the three checks running (verify and bootstrap's last step). */
    async tenantChecksRunning(tenantId: number): Promise<void> {
      const tenant = await load(tenantId, 'verification');
      const running: Record<string, CheckResult> = {};
      for (const name of CHECK_NAMES) running[name] = { status: 'running', message: 'Verification is running.', checked_at: tenant.verification?.[name]?.checked_at ?? null };
      await db('tenants').where({ id: tenantId }).update({ verification: JSON.stringify(running), date_modified: db.fn.now() });
    },

    /**
     * Step 7 / verify: the three checks. Stores each result with a message saying what is
     * wrong and how to fix it; the tenant is ready only when all passed. Changes nothing
     * else (the probe row and the one-time login key are removed again).
     */
    async tenantVerify(tenantId: number): Promise<{ ready: boolean; results: Record<CheckName, CheckResult> }> {
      const tenant = await load(tenantId, 'verification');
      const now = new Date().toISOString();
      const results = {} as Record<CheckName, CheckResult>;
      const pass = (message: string): CheckResult => ({ status: 'passed', message, checked_at: now });
      const fail = (message: string): CheckResult => ({ status: 'failed', message, checked_at: now });
      const host = hostOf(tenant);
      const dbExists = await withAdmin(host, (c) => databaseExists(c, tenant.database_name!));
      const noDb = fail(`The tenant database ${tenant.database_name} does not exist on ${tenant.database_host}. Run bootstrap (POST .../bootstrap) to create it.`);

      // no_legacy
      {
        const counts = await sharedRowCounts(tenant.site_id);
        const left = Object.entries(counts).filter(([, n]) => n > 0);
        const problems: string[] = [];
        if (left.length) problems.push(`${left.map(([table, n]) => `${n} row(s) in ${table}`).join(', ')} of site ${tenant.site_id} remain in the shared tables; run bootstrap again to push them`);
        if (!dbExists) problems.push(noDb.message);
        else {
          const missing = await withClient(host, tenant.database_name!, missingTables);
          if (missing.length) problems.push(`the tenant schema lacks table(s) ${missing.join(', ')}; run bootstrap again to create them`);
        }
        results.no_legacy = problems.length ? fail(`${problems.join('. ')}.`) : pass('No data of the site remains in the shared tables, and the tenant schema is complete.');
      }

      progress({ step: 'verification', checked: 'no_legacy' });
      // sovereign_push
      {
        const problems: string[] = [];
        const pending = await db('tenant_push_jobs').where({ tenant_id: tenantId }).whereIn('status', ['queued', 'running', 'failed']).orderBy('id');
        for (const job of pending) {
          problems.push(
            job.status === 'failed'
              ? `push job ${job.id} (${job.kind}) failed after ${job.attempts} attempt(s): ${job.last_error}; fix the cause and run bootstrap again`
              : `push job ${job.id} (${job.kind}) is still ${job.status}; wait for it or run bootstrap again`,
          );
        }
        if (!dbExists) problems.push(noDb.message);
        else if (!tenant.credentials) problems.push('The tenant has no stored credentials; run bootstrap again to create them');
        else if (!(await withAdmin(host, (c) => roleExists(c, tenant.role_name!)))) problems.push(`The tenant role ${tenant.role_name} does not exist; run bootstrap again to create it`);
        else {
          const lacking = await withClient(host, tenant.database_name!, (c) => missingPrivileges(c, tenant.role_name!));
          if (lacking.length) problems.push(`The tenant role ${tenant.role_name} lacks ${lacking.join(', ')}; run bootstrap again to restore the grants`);
          const probe = crypto.randomUUID();
          try {
            await withClient(host, tenant.database_name!, (c) => c.query('INSERT INTO push_probe (id) VALUES ($1)', [probe]), asTenant(tenant));
            const landed = await withClient(host, tenant.database_name!, async (c) => (await c.query('SELECT 1 FROM push_probe WHERE id = $1', [probe])).rowCount === 1);
            if (!landed) problems.push('A write through the tenant role did not land in the tenant database');
          } catch (err) {
            problems.push(`A write through the tenant role failed: ${(err as Error).message}`);
          } finally {
            await withClient(host, tenant.database_name!, (c) => c.query('DELETE FROM push_probe WHERE id = $1', [probe])).catch(() => undefined);
          }
        }
        results.sovereign_push = problems.length ? fail(`${problems.join('. ')}.`) : pass('A write through the tenant role landed in the tenant database and read back; no push work is queued or failing.');
      }

      progress({ step: 'verification', checked: 'sovereign_push' });
      // tenant_users
      {
        const problems: string[] = [];
        const expected = await expectedUsers(tenant.site_id);
        if (!dbExists) problems.push(noDb.message);
        else {
          const actual = await withClient(host, tenant.database_name!, async (c) => (await c.query<TenantUser>('SELECT id::int AS id, username, email, display_name, password_hash, role, is_admin FROM users ORDER BY id')).rows);
          const byId = new Map(actual.map((u) => [Number(u.id), u]));
          const expectedIds = new Set(expected.map((u) => u.id));
          const missing = expected.filter((u) => !byId.has(u.id));
          const extra = actual.filter((u) => !expectedIds.has(Number(u.id)));
          const stale = expected.filter((u) => {
            const a = byId.get(u.id);
            return a && (a.username !== u.username || a.email !== u.email || a.password_hash !== u.password_hash || a.role !== u.role || a.is_admin !== u.is_admin);
          });
          if (missing.length) problems.push(`missing user(s): ${missing.map((u) => `${u.id} (${u.username})`).join(', ')}`);
          if (extra.length) problems.push(`unexpected user(s): ${extra.map((u) => `${u.id} (${u.username})`).join(', ')}`);
          if (stale.length) problems.push(`user(s) differing from the network: ${stale.map((u) => `${u.id} (${u.username})`).join(', ')}`);
          if (problems.length) problems[problems.length - 1] += `; expected ${expected.length} user(s), found ${actual.length}: run bootstrap again to re-provision them`;
          const admin = expected.find((u) => u.is_admin);
          if (!admin) problems.push(`site ${tenant.site_id} has no administrator (no customer and no linked administrator); give it one, then run bootstrap again`);
          else if (byId.has(admin.id) && tenant.credentials) {
            try {
              const login = await withClient(host, tenant.database_name!, (c) => authenticateWithLoginKey(c, admin.username), asTenant(tenant));
              if (!login.ok) problems.push(`The tenant administrator cannot log in: ${login.reason}`);
            } catch (err) {
              problems.push(`The tenant administrator cannot log in: ${(err as Error).message}`);
            }
          }
        }
        results.tenant_users = problems.length ? fail(`${problems.join('. ')}.`) : pass(`The tenant database holds exactly the ${expected.length} expected user(s), and the administrator logged in.`);
      }

      progress({ step: 'verification', checked: 'tenant_users' });
      const ready = CHECK_NAMES.every((n) => results[n].status === 'passed');
      await changeTenant(db, tenantId, { verification: JSON.stringify(results), state: ready ? 'ready' : 'not_ready', step: null, error: null, date_modified: db.fn.now() });
      return { ready, results };
    },

    /** A workflow that could not finish records why; the registry entry keeps its bindings. */
    async tenantMarkFailed(input: { tenantId: number; operation: 'bootstrap' | 'verify' | 'teardown'; step: string | null; message: string }): Promise<void> {
      const error = JSON.stringify({ operation: input.operation, step: input.step, message: input.message, at: new Date().toISOString() });
      const state = input.operation === 'teardown' ? 'tearing_down' : input.operation === 'bootstrap' ? 'failed' : 'not_ready';
      const patch: Record<string, unknown> = { state, error, date_modified: db.fn.now() };
      if (input.operation === 'verify') {
        const failed: Record<string, CheckResult> = {};
        for (const name of CHECK_NAMES) failed[name] = { status: 'failed', message: `Verification could not run: ${input.message}`, checked_at: new Date().toISOString() };
        patch.verification = JSON.stringify(failed);
      }
      await changeTenant(db, input.tenantId, patch, { failed: true });
    },

    // ---- teardown ------------------------------------------------------------------------

    /** Teardown 1: the tenant's data goes back to the shared tables (nothing is lost). */
    async tenantPullBack(tenantId: number): Promise<{ rows: number }> {
      const tenant = await load(tenantId, 'pull_back');
      if (!tenant.database_name || !tenant.database_host) return { rows: 0 };
      const host = hostOf(tenant);
      if (!(await withAdmin(host, (c) => databaseExists(c, tenant.database_name!)))) return { rows: 0 };
      let total = 0;
      await withClient(host, tenant.database_name, async (c) => {
        for (const table of SITE_DATA_TABLES) {
          const present = (await c.query("SELECT 1 FROM information_schema.tables WHERE table_schema = 'public' AND table_name = $1", [table])).rowCount;
          if (!present) continue;
          const columns = SITE_DATA[table];
          const rows = (await c.query(`SELECT ${columns.map(ident).join(', ')} FROM ${ident(table)} ORDER BY id`)).rows;
          for (let i = 0; i < rows.length; i += PUSH_BATCH) {
            const batch = rows.slice(i, i + PUSH_BATCH).map((r) => ({ ...r, site_id: tenant.site_id }));
            await db(table).insert(batch).onConflict('id').merge(columns.filter((col) => col !== 'id') as unknown as string[]);
            progress({ step: 'pull_back', table, rows: i + batch.length });
          }
          total += rows.length;
        }
      });
      return { rows: total };
    },

    /** Teardown 2: credentials removed first, then the role's sessions, grants and the role. */
    async tenantDropRole(tenantId: number): Promise<void> {
      const tenant = await load(tenantId, 'drop_role');
      await db('tenants').where({ id: tenantId }).update({ credentials: null, date_modified: db.fn.now() });
      if (!tenant.role_name || !tenant.database_host) return;
      const host = hostOf(tenant);
      await withAdmin(host, async (c) => {
        if (!(await roleExists(c, tenant.role_name!))) return;
        await terminateSessions(c, { role: tenant.role_name! });
        progress({ step: 'drop_role', sessions: 'ended' });
        if (tenant.database_name && (await databaseExists(c, tenant.database_name))) {
          await c.query(`REVOKE ALL ON DATABASE ${ident(tenant.database_name)} FROM ${ident(tenant.role_name!)}`);
          await withClient(host, tenant.database_name, (tc) => tc.query(`DROP OWNED BY ${ident(tenant.role_name!)}`));
        }
        await c.query(`DROP ROLE IF EXISTS ${ident(tenant.role_name!)}`);
      });
    },

    /** Teardown 3: the tenant database. */
    async tenantDropDatabase(tenantId: number): Promise<void> {
      const tenant = await load(tenantId, 'drop_database');
      if (!tenant.database_name || !tenant.database_host) return;
      await withAdmin(hostOf(tenant), async (c) => {
        await terminateSessions(c, { database: tenant.database_name! });
        progress({ step: 'drop_database', sessions: 'ended' });
        await c.query(`DROP DATABASE IF EXISTS ${ident(tenant.database_name!)} WITH (FORCE)`);
      });
    },

    /** Teardown 4: uploads go back to the shared folder; the root and the route go. */
    async tenantRemoveFilesAndRoute(tenantId: number): Promise<void> {
      const tenant = await load(tenantId, 'remove_files_and_routing');
      if (tenant.filesystem_root) {
        const root = rootOf(tenant.filesystem_root);
        let moved = 0;
        await movePrefix(root.files, `${root.prefix}uploads/`, storage, siteUploadsPrefix(tenant.site_id), {
          signal: cancellation(),
          onEntry: (key) => progress({ step: 'remove_files_and_routing', moved: ++moved, key }),
        });
        progress({ step: 'remove_files_and_routing', moved });
        await deletePrefix(root.files, root.prefix);
      }
      await db('tenant_routes').where({ tenant_id: tenantId }).delete();
    },

    /** Teardown 5: the registry entry is kept, marked torn down. */
    async tenantMarkTornDown(tenantId: number): Promise<void> {
      await changeTenant(db, tenantId, { state: 'torn_down', step: null, error: null, date_torn_down: db.fn.now(), date_modified: db.fn.now() });
    },
  });
}

/** The running activity's context, or undefined outside a worker (a script, a test calling it directly). */
function activityContext(): Context | undefined {
  try {
    return Context.current();
  } catch {
    return undefined;
  }
}

/**
 * Real progress (a row batch pushed, a file moved, a check done): a heartbeat carrying what was
 * done, and the point where a cancelled activity stops (throwing the SDK's CancelledFailure):
 * the workflow cancelled, its worker stopping past its grace time, or the server having timed
 * the attempt out (a second attempt may already run elsewhere). Steps stop only between units of
 * work, each of which is whole, so a retry finishes what is left.
 *
 * There is no heartbeat on a timer: one would keep an activity stuck in a call alive for its
 * whole startToCloseTimeout, and tell the server nothing about progress. A step that makes no
 * progress for the workflow's heartbeatTimeout is timed out and retried (each step is idempotent).
 */
export function progress(detail?: Record<string, unknown>): void {
  const ctx = activityContext();
  if (!ctx) return;
  ctx.cancellationSignal.throwIfAborted();
  ctx.heartbeat(detail);
}

/** The cancellation signal of the running activity (none outside a worker). */
function cancellation(): AbortSignal | undefined {
  return activityContext()?.cancellationSignal;
}

/** Every activity reports progress when it starts (the worker took it), and again as it goes. */
function reportingProgress<T extends Record<string, (...args: any[]) => Promise<unknown>>>(activities: T): T {
  const wrapped: Record<string, (...args: any[]) => Promise<unknown>> = {};
  for (const [name, fn] of Object.entries(activities)) {
    wrapped[name] = async (...args: unknown[]) => {
      progress({ started: name });
      return fn(...args);
    };
  }
  return wrapped as T;
}

export type TenantActivities = ReturnType<typeof createTenantActivities>;
