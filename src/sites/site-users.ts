import { isPgError, PG_FOREIGN_KEY_VIOLATION } from '../db/errors';
import type { Db } from '../db/knex';
import { isoDate } from '../db/timestamps';
import { ApiError, invalidParams, notFoundItem } from '../http/errors';

export const SITE_USER_ROLES = ['administrator', 'editor', 'author', 'contributor', 'subscriber'] as const;
export type SiteUserRole = (typeof SITE_USER_ROLES)[number];

/**
 * The users of a site: its owning customer's user (always administrator) and the users
 * linked to it. An isolated tenant's database holds exactly these (bootstrap provisions
 * them; verify's tenant_users compares).
 */
export class SiteUsers {
  constructor(private readonly db: Db) {}

  /** The site's users, its owner's user first; 404 for an unknown site. */
  async list(siteId: number) {
    const site = await this.db('sites').where({ id: siteId }).first('id', 'customer_id');
    if (!site) throw notFoundItem('site');
    const owner = site.customer_id
      ? await this.db('customers as c').join('users as u', 'u.id', 'c.user_id').where('c.id', site.customer_id).first('u.id', 'u.username', 'u.email', 'c.date_registered as date_created')
      : undefined;
    const linked = await this.db('site_users as su').join('users as u', 'u.id', 'su.user_id').where('su.site_id', siteId).orderBy('u.id').select('u.id', 'u.username', 'u.email', 'su.role', 'su.date_created');
    const users = linked
      .filter((user) => !owner || Number(user.id) !== Number(owner.id))
      .map((user) => ({ site_id: siteId, user_id: Number(user.id), username: user.username, email: user.email, role: user.role, owner: false, date_created: isoDate(user.date_created) }));
    if (owner) users.unshift({ site_id: siteId, user_id: Number(owner.id), username: owner.username, email: owner.email, role: 'administrator', owner: true, date_created: isoDate(owner.date_created) });
    return users;
  }

  /** Links the user with the role (or changes the role of a linked user); never the owner's user, who is the administrator already. */
  async link(siteId: number, userId: number, role: SiteUserRole) {
    const site = await this.db('sites').where({ id: siteId }).first('customer_id');
    if (!site) throw notFoundItem('site');
    if (site.customer_id) {
      const owner = await this.db('customers').where({ id: site.customer_id }).first('user_id');
      if (owner && Number(owner.user_id) === userId) throw invalidParams({ user_id: `user_id ${userId} owns the site (its customer's user) and is its administrator already.` });
    }
    try {
      await this.db('site_users').insert({ site_id: siteId, user_id: userId, role }).onConflict(['site_id', 'user_id']).merge(['role']);
    } catch (err) {
      if (isPgError(err, PG_FOREIGN_KEY_VIOLATION)) throw invalidParams({ user_id: `user_id ${userId} matches no user.` });
      throw err;
    }
    return this.list(siteId);
  }

  /** Unlinks the user; a user that is not linked is 404 wu_rest_site_user_not_found. */
  async unlink(siteId: number, userId: number) {
    if (!(await this.db('sites').where({ id: siteId }).first('id'))) throw notFoundItem('site');
    const removed = await this.db('site_users').where({ site_id: siteId, user_id: userId }).delete();
    if (!removed) throw new ApiError(404, 'wu_rest_site_user_not_found', `User ${userId} is not linked to site ${siteId}.`);
    return this.list(siteId);
  }
}
