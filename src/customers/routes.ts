import type { Router } from 'express';
import type { Db } from '../db/knex';
import type { TableService } from '../db/table-service';
import { mountResource } from '../http/resource';
import type { RouteRegistry } from '../http/route-registry';
import { customerExamples } from './examples';
import { createCustomerSchema, customerRecordSchema, updateCustomerSchema } from './schema';
import { createCustomerService } from './service';

export function mountCustomers(router: Router, registry: RouteRegistry, namespace: string, db: Db): TableService {
  const service = createCustomerService(db);
  // Written out rather than by tableResource: username, email and display_name are the user's, so
  // the record schema and the rules are the customers' own.
  mountResource(router, registry, namespace, {
    model: 'customer',
    plural: 'customers',
    listSpec: service.cfg.listSpec,
    createSchema: createCustomerSchema,
    updateSchema: updateCustomerSchema,
    recordSchema: customerRecordSchema,
    description:
      'On create, either user_id of an existing user, or username, email and password to create the account. user_id must name a user that has no customer yet (400 naming it otherwise); username and email must not be taken by another account (compared case-insensitively). ' +
      'user_id 0 or null means no user, as in the original (whose integrations send user_id 0 with the account fields): on create the same as leaving it out, on update it leaves the user as it is.',
    service,
    examples: customerExamples,
  });
  return service;
}
