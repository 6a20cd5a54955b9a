import type { Router } from 'express';
import { z } from 'zod';
import { isPgError, PG_FOREIGN_KEY_VIOLATION } from '../db/errors';
import type { Db } from '../db/knex';
import { ApiError, invalidParams, notFoundItem } from '../http/errors';
import { applyFields, parseView } from '../http/fields';
import { parseId } from '../http/resource';
import type { RouteRegistry } from '../http/route-registry';
import { bodyObject, fields, isoDate, parseOrThrow } from '../http/validation';

export const SITE_USER_ROLES = ['administrator', 'editor', 'author', 'contributor', 'subscriber'] as const;

export const linkSiteUserSchema = z.object({
  user_id: fields.id().describe('The user to link.'),
  role: z.enum(SITE_USER_ROLES).default('editor').describe('The role on the site.'),
});

const siteUserSchema = {
  type: 'object',
  required: ['site_id', 'user_id', 'username', 'email', 'role', 'owner', 'date_created'],
  properties: {
    site_id: { type: 'integer' },
    user_id: { type: 'integer' },
    username: { type: 'string' },
    email: { type: 'string' },
    role: { enum: [...SITE_USER_ROLES] },
    owner: { type: 'boolean', description: "True for the owning customer's user (administrator; not a link)." },
    date_created: { type: ['string', 'null'], format: 'date-time' },
  },
  additionalProperties: false,
};

/**
 * The users of a site: its owning customer's user (always administrator) and the users
 * linked to it. An isolated tenant's database holds exactly these (bootstrap provisions
 * them; verify's tenant_users compares).
 */
export function mountSiteUsers(router: Router, registry: RouteRegistry, namespace: string, db: Db): void {
  const tags = ['sites'];
  const list = async (siteId: number) => {
    const site = await db('sites').where({ id: siteId }).first('id', 'customer_id');
    if (!site) throw notFoundItem('site');
    const owner = site.customer_id
      ? await db('customers as c').join('users as u', 'u.id', 'c.user_id').where('c.id', site.customer_id).first('u.id', 'u.username', 'u.email', 'c.date_registered as date_created')
      : undefined;
    const linked = await db('site_users as su').join('users as u', 'u.id', 'su.user_id').where('su.site_id', siteId).orderBy('u.id').select('u.id', 'u.username', 'u.email', 'su.role', 'su.date_created');
    const out = linked.filter((u) => !owner || Number(u.id) !== Number(owner.id)).map((u) => ({ site_id: siteId, user_id: Number(u.id), username: u.username, email: u.email, role: u.role, owner: false, date_created: isoDate(u.date_created) }));
    if (owner) out.unshift({ site_id: siteId, user_id: Number(owner.id), username: owner.username, email: owner.email, role: 'administrator', owner: true, date_created: isoDate(owner.date_created) });
    return out;
  };

  registry.operation(namespace, 'GET', '/sites/:id/users', {
    summary: "A site's users: its owner's user and the users linked to it",
    tags,
    fields: {},
    responses: { 200: { description: 'The users, owner first.', schema: { type: 'array', items: siteUserSchema } } },
  });
  router.get('/sites/:id/users', async (req, res) => {
    const view = parseView(req.query as Record<string, unknown>);
    res.json((await list(parseId(req, 'site'))).map((u) => applyFields(u, view.fields)));
  });

  registry.operation(namespace, 'POST', '/sites/:id/users', {
    summary: 'Link a user to a site with a role (or change the role of a linked user)',
    description: "user_id must name an existing user (400 naming it otherwise); the owning customer's user is the administrator already (400).",
    tags,
    body: linkSiteUserSchema,
    responses: { 200: { description: "The site's users after the change.", schema: { type: 'array', items: siteUserSchema } } },
  });
  router.post('/sites/:id/users', async (req, res) => {
    const siteId = parseId(req, 'site');
    const body = parseOrThrow(linkSiteUserSchema, bodyObject(req.body));
    const site = await db('sites').where({ id: siteId }).first('customer_id');
    if (!site) throw notFoundItem('site');
    if (site.customer_id) {
      const owner = await db('customers').where({ id: site.customer_id }).first('user_id');
      if (owner && Number(owner.user_id) === body.user_id) throw invalidParams({ user_id: `user_id ${body.user_id} owns the site (its customer's user) and is its administrator already.` });
    }
    try {
      await db('site_users').insert({ site_id: siteId, user_id: body.user_id, role: body.role }).onConflict(['site_id', 'user_id']).merge(['role']);
    } catch (err) {
      if (isPgError(err, PG_FOREIGN_KEY_VIOLATION)) throw invalidParams({ user_id: `user_id ${body.user_id} matches no user.` });
      throw err;
    }
    res.json(await list(siteId));
  });

  registry.operation(namespace, 'DELETE', '/sites/:id/users/:user_id', {
    summary: 'Unlink a user from a site',
    description: 'A user that is not linked: 404 wu_rest_site_user_not_found.',
    tags,
    responses: { 200: { description: "The site's users after the change.", schema: { type: 'array', items: siteUserSchema } } },
  });
  router.delete('/sites/:id/users/:user_id', async (req, res) => {
    const siteId = parseId(req, 'site');
    const userId = parseId(req, 'user', 'user_id');
    if (!(await db('sites').where({ id: siteId }).first('id'))) throw notFoundItem('site');
    const removed = await db('site_users').where({ site_id: siteId, user_id: userId }).delete();
    if (!removed) throw new ApiError(404, 'wu_rest_site_user_not_found', `User ${userId} is not linked to site ${siteId}.`);
    res.json(await list(siteId));
  });
}
