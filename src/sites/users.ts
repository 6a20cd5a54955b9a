import type { Router } from 'express';
import { z } from 'zod';
import type { Db } from '../db/knex';
import { applyFields, parseView } from '../http/fields';
import { parseId } from '../http/resource';
import type { RouteRegistry } from '../http/route-registry';
import { bodyObject, fields, parseOrThrow } from '../http/validation';
import { SITE_USER_ROLES, SiteUsers } from './site-users';

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

/** The routes of a site's users (see SiteUsers). */
export function mountSiteUsers(router: Router, registry: RouteRegistry, namespace: string, db: Db): void {
  const siteUsers = new SiteUsers(db);
  const tags = ['sites'];

  registry.operation(namespace, 'GET', '/sites/:id/users', {
    summary: "A site's users: its owner's user and the users linked to it",
    tags,
    fields: {},
    responses: { 200: { description: 'The users, owner first.', schema: { type: 'array', items: siteUserSchema } } },
  });
  router.get('/sites/:id/users', async (req, res) => {
    const view = parseView(req.query as Record<string, unknown>);
    res.json((await siteUsers.list(parseId(req, 'site'))).map((user) => applyFields(user, view.fields)));
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
    res.json(await siteUsers.link(siteId, body.user_id, body.role));
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
    res.json(await siteUsers.unlink(siteId, userId));
  });
}
