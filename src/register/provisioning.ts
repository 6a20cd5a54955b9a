import type { Db } from '../db/knex';
import { ApiError } from '../http/errors';
import { copyPrefix, deletePrefix, type ObjectStorage } from '../infra/object-storage';
import { siteUploadsPrefix } from '../sites/uploads';
import type { ErrorBody } from './types';

/** Options that are the new site's own (its name, addresses, template): never copied. */
const OWN_OPTIONS = ['blogname', 'blogdescription', 'siteurl', 'home', 'template_id'];

export type ProvisioningState = 'done' | 'compensated' | 'compensation_failed';

interface Provisioned {
  post_ids: number[];
  option_names: string[];
}

/**
 * The work of a registration that continues after the answer: a site made from a template
 * gets the template's posts and pages, its options (not the site's own name and addresses)
 * and its uploads. A large template takes long, and the files live outside the database, so
 * it runs as a regular activity once the client has its records. The rows it added are
 * recorded in the registration's row (`provisioned`) in the same transaction, so the
 * compensation removes exactly those, and a retry finds them done.
 */
export class SiteProvisioning {
  constructor(
    private readonly db: Db,
    private readonly storage: ObjectStorage,
  ) {}

  private async target(registrationId: number) {
    const row = await this.db('registrations').where({ id: registrationId }).first('site_id', 'request', 'provisioning', 'customer_id');
    const templateId: number | undefined = row?.request?.site?.template_id;
    if (!row || row.site_id === null || templateId === undefined) return null;
    return { siteId: Number(row.site_id), templateId, customerId: Number(row.customer_id), state: row.provisioning as string | null };
  }

  async provision(registrationId: number): Promise<void> {
    const target = await this.target(registrationId);
    if (!target || target.state !== 'running') return;
    // The rows first, recorded with what they added (a retry finds them done), then the files
    // (a retry copies them again: the same bytes).
    await this.db.transaction(async (trx) => {
      const reg = await trx('registrations').where({ id: registrationId }).forUpdate().first('provisioning', 'provisioned');
      if (reg.provisioning !== 'running' || reg.provisioned) return;
      const author = await trx('customers').where({ id: target.customerId }).first('user_id');
      const posts = await trx('site_posts').where({ site_id: target.templateId }).orderBy('id').select('post_type', 'title', 'content', 'status');
      const postIds: number[] = posts.length
        ? (await trx('site_posts').insert(posts.map((p) => ({ ...p, site_id: target.siteId, author_id: author?.user_id ?? null }))).returning('id')).map((r: { id: number }) => Number(r.id))
        : [];
      const options = await trx('site_options').where({ site_id: target.templateId }).whereNotIn('name', OWN_OPTIONS).select('name', 'value');
      const optionNames: string[] = options.length
        ? (await trx('site_options').insert(options.map((o) => ({ ...o, site_id: target.siteId }))).onConflict(['site_id', 'name']).ignore().returning('name')).map((r: { name: string }) => r.name)
        : [];
      const provisioned: Provisioned = { post_ids: postIds, option_names: optionNames };
      await trx('registrations').where({ id: registrationId }).update({ provisioned: JSON.stringify(provisioned), date_modified: trx.fn.now() });
    });
    try {
      await copyPrefix(this.storage, siteUploadsPrefix(target.templateId), siteUploadsPrefix(target.siteId));
    } catch (err) {
      // What is in the template's folder cannot be copied (a special file, permissions): trying again changes nothing.
      // The s3 driver's failures are the store's (unreachable, throttled): retried as any infrastructure failure.
      if (this.storage.driver !== 'local') throw err;
      const code = (err as { code?: string }).code ?? 'error';
      throw new ApiError(500, 'wu_rest_provisioning_failed', `The template's uploads could not be copied to site ${target.siteId} (${code}).`);
    }
  }

  /** Removes what provision() added (nothing recorded and no files: nothing to do). Safe to repeat. */
  async undo(registrationId: number): Promise<void> {
    const target = await this.target(registrationId);
    if (!target) return;
    await this.db.transaction(async (trx) => {
      const reg = await trx('registrations').where({ id: registrationId }).forUpdate().first('provisioned');
      const p = reg.provisioned as Provisioned | null;
      if (!p) return;
      if (p.post_ids.length) await trx('site_posts').where({ site_id: target.siteId }).whereIn('id', p.post_ids).delete();
      if (p.option_names.length) await trx('site_options').where({ site_id: target.siteId }).whereIn('name', p.option_names).delete();
      await trx('registrations').where({ id: registrationId }).update({ provisioned: null, date_modified: trx.fn.now() });
    });
    // The site is new and nothing else writes its uploads while this runs: whatever is there is the copy.
    await deletePrefix(this.storage, siteUploadsPrefix(target.siteId));
  }

  /** The outcome, for operators (with the metric registrations_needing_attention and the failed workflow). */
  async record(registrationId: number, state: ProvisioningState): Promise<void> {
    await this.db('registrations').where({ id: registrationId }).update({ provisioning: state, date_modified: this.db.fn.now() });
  }

  /** What went wrong, in full (the workflow's history only gets its kind and code). */
  async recordError(registrationId: number, step: string, error: ErrorBody): Promise<void> {
    await this.db('registrations')
      .where({ id: registrationId })
      .update({ provisioning_error: JSON.stringify({ ...error, data: { ...error.data, step } }), date_modified: this.db.fn.now() });
  }
}
