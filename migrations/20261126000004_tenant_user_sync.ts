import type { Knex } from 'knex';

/**
 * Keeping isolated tenants' users in step with the network (a transactional outbox).
 * Any change that alters who a tenant's users are, or what they hold (a user's name, e-mail,
 * password or display name; a site's linked users; a site's owner; a customer's user),
 * queues a `users` push job for each live tenant it touches, in the same transaction as the
 * change, and notifies `hostflow_tenant_push` on commit. The push relay (src/tenants/push-relay.ts)
 * starts a tenantPush workflow for each tenant with queued work. Triggers, so no code path
 * that writes these tables can forget it.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
CREATE FUNCTION hostflow_tenant_user_sync(p_site_ids bigint[]) RETURNS void AS $$
DECLARE t record;
BEGIN
  FOR t IN SELECT id, uid FROM tenants WHERE site_id = ANY(p_site_ids) AND state IN ('ready', 'not_ready') LOOP
    IF NOT EXISTS (SELECT 1 FROM tenant_push_jobs WHERE tenant_id = t.id AND kind = 'users' AND status = 'queued') THEN
      INSERT INTO tenant_push_jobs (tenant_id, kind) VALUES (t.id, 'users');
    END IF;
    PERFORM pg_notify('hostflow_tenant_push', t.uid::text);
  END LOOP;
END $$ LANGUAGE plpgsql;

CREATE FUNCTION hostflow_users_tenant_sync() RETURNS trigger AS $$
BEGIN
  PERFORM hostflow_tenant_user_sync(ARRAY(
    SELECT s.id FROM sites s JOIN customers c ON c.id = s.customer_id WHERE c.user_id = NEW.id
    UNION SELECT su.site_id FROM site_users su WHERE su.user_id = NEW.id));
  RETURN NULL;
END $$ LANGUAGE plpgsql;
CREATE TRIGGER users_tenant_sync AFTER UPDATE OF username, email, password_hash, display_name ON users
  FOR EACH ROW WHEN (OLD.username IS DISTINCT FROM NEW.username OR OLD.email IS DISTINCT FROM NEW.email
    OR OLD.password_hash IS DISTINCT FROM NEW.password_hash OR OLD.display_name IS DISTINCT FROM NEW.display_name)
  EXECUTE FUNCTION hostflow_users_tenant_sync();

CREATE FUNCTION hostflow_site_users_tenant_sync() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    PERFORM hostflow_tenant_user_sync(ARRAY[OLD.site_id]);
  ELSE
    PERFORM hostflow_tenant_user_sync(ARRAY[NEW.site_id]);
  END IF;
  RETURN NULL;
END $$ LANGUAGE plpgsql;
CREATE TRIGGER site_users_tenant_sync AFTER INSERT OR UPDATE OR DELETE ON site_users
  FOR EACH ROW EXECUTE FUNCTION hostflow_site_users_tenant_sync();

CREATE FUNCTION hostflow_sites_owner_tenant_sync() RETURNS trigger AS $$
BEGIN
  PERFORM hostflow_tenant_user_sync(ARRAY[NEW.id]);
  RETURN NULL;
END $$ LANGUAGE plpgsql;
CREATE TRIGGER sites_owner_tenant_sync AFTER UPDATE OF customer_id ON sites
  FOR EACH ROW WHEN (OLD.customer_id IS DISTINCT FROM NEW.customer_id)
  EXECUTE FUNCTION hostflow_sites_owner_tenant_sync();

CREATE FUNCTION hostflow_customers_user_tenant_sync() RETURNS trigger AS $$
BEGIN
  PERFORM hostflow_tenant_user_sync(ARRAY(SELECT id FROM sites WHERE customer_id = NEW.id));
  RETURN NULL;
END $$ LANGUAGE plpgsql;
CREATE TRIGGER customers_user_tenant_sync AFTER UPDATE OF user_id ON customers
  FOR EACH ROW WHEN (OLD.user_id IS DISTINCT FROM NEW.user_id)
  EXECUTE FUNCTION hostflow_customers_user_tenant_sync();
`);
  await knex.raw("CREATE INDEX tenant_push_jobs_queued_idx ON tenant_push_jobs (tenant_id) WHERE status = 'queued'");
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
DROP TRIGGER IF EXISTS customers_user_tenant_sync ON customers;
DROP TRIGGER IF EXISTS sites_owner_tenant_sync ON sites;
DROP TRIGGER IF EXISTS site_users_tenant_sync ON site_users;
DROP TRIGGER IF EXISTS users_tenant_sync ON users;
DROP FUNCTION IF EXISTS hostflow_customers_user_tenant_sync();
DROP FUNCTION IF EXISTS hostflow_sites_owner_tenant_sync();
DROP FUNCTION IF EXISTS hostflow_site_users_tenant_sync();
DROP FUNCTION IF EXISTS hostflow_users_tenant_sync();
DROP FUNCTION IF EXISTS hostflow_tenant_user_sync(bigint[]);
DROP INDEX IF EXISTS tenant_push_jobs_queued_idx;
`);
}
