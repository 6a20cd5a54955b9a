import type { Router } from 'express';
import { z } from 'zod';
import type { Db } from '../db/knex';
import { tableResource } from '../db/table-service';
import { mountResource } from '../http/resource';
import type { RouteRegistry } from '../http/route-registry';
import { membershipExamples } from './examples';
import type { MembershipLifecycles } from './lifecycle';
import { addonProductRecord, createMembershipSchema, updateMembershipSchema } from './schema';
import { createMembershipService } from './service';

export function mountMemberships(router: Router, registry: RouteRegistry, namespace: string, db: Db, lifecycles: MembershipLifecycles) {
  const service = createMembershipService(db, lifecycles);
  mountResource(
    router,
    registry,
    namespace,
    tableResource(service, service.cfg, {
      plural: 'memberships',
      description:
        'plan_id must be a product of type plan; addon_products must name existing products of type package or service, each at most once; customer_id cannot change while a payment of the membership belongs to its customer. A recurring membership that is active or trialing with a due date (date_trial_end while trialing, else date_expiration) renews by itself at that date (README "Billing: renewals"): a pending renewal payment is created and collected through its gateway (`manual`: marked completed through the API; `http`: charged), with dunning retries, then on-hold, then expired when unpaid. To cancel at the end of the period, PATCH auto_renew false (it expires at its due date); status cancelled cancels now.',
      createSchema: createMembershipSchema,
      nullable: ['discount_code'],
      updateSchema: updateMembershipSchema,
      json: { addon_products: z.array(addonProductRecord) },
      links: {
        customer: { field: 'customer_id', model: 'customer', embeddable: true },
        plan: { field: 'plan_id', model: 'product', embeddable: true },
      },
      examples: membershipExamples,
    }),
  );
  return service;
}
