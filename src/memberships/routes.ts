import type { Router } from 'express';
import { z } from 'zod';
import type { Db } from '../db/knex';
import { tableResource } from '../db/table-service';
import { mountResource, parseId } from '../http/resource';
import type { RouteRegistry } from '../http/route-registry';
import { bodyObject, parseOrThrow } from '../http/validation';
import { createPaymentService } from '../payments/service';
import { changeExamples, membershipExamples } from './examples';
import type { MembershipLifecycles } from './lifecycle';
import { PlanChangeService } from './plan-change';
import { addonProductRecord, changeBreakdown, changeMembershipSchema, createMembershipSchema, scheduledChangeRecord, updateMembershipSchema } from './schema';
import { createMembershipService } from './service';

export function mountMemberships(router: Router, registry: RouteRegistry, namespace: string, db: Db, lifecycles: MembershipLifecycles) {
  const service = createMembershipService(db, lifecycles);
  const resource = tableResource(service, service.cfg, {
    plural: 'memberships',
    description:
      'plan_id must be a product of type plan; addon_products must name existing products of type package or service, each at most once; customer_id cannot change while a payment of the membership belongs to its customer. scheduled_change and credit_balance are written by plan changes (POST /memberships/{id}/change) only. A recurring membership that is active or trialing with a due date (date_trial_end while trialing, else date_expiration) renews by itself at that date (README "Billing: renewals"): a pending renewal payment is created and collected through its gateway (`manual`: marked completed through the API; `http`: charged), with dunning retries, then on-hold, then expired when unpaid. To cancel at the end of the period, PATCH auto_renew false (it expires at its due date); status cancelled cancels now.',
    createSchema: createMembershipSchema,
    nullable: ['discount_code'],
    updateSchema: updateMembershipSchema,
    json: { addon_products: z.array(addonProductRecord) },
    extra: {
      scheduled_change: scheduledChangeRecord,
      credit_balance: z.number().describe('Credit a plan change left over (a downgrade: the unused time was worth more than the new plan for the rest of the period); renewals take it before they charge.'),
    },
    links: {
      customer: { field: 'customer_id', model: 'customer', embeddable: true },
      plan: { field: 'plan_id', model: 'product', embeddable: true },
    },
    examples: membershipExamples,
  });
  mountResource(router, registry, namespace, resource);

  const changes = new PlanChangeService(db, service, createPaymentService(db, lifecycles));
  const Membership = registry.component('Membership', resource.recordSchema);
  const Preview = registry.component('MembershipChangePreview', z.strictObject(changeBreakdown));
  // The applied answer is the breakdown plus two records named by reference (a JSON Schema: zod cannot hold a $ref).
  const { properties } = z.toJSONSchema(z.strictObject(changeBreakdown), { io: 'output', target: 'draft-2020-12', reused: 'inline' }) as { properties: Record<string, unknown> };
  const Applied = registry.component('MembershipChange', {
    type: 'object',
    description: 'The breakdown (as the preview), the membership after the change, and the payment recorded for amount_due (null when nothing is due now, and for a scheduled change).',
    required: [...Object.keys(changeBreakdown), 'membership', 'payment'],
    properties: { ...properties, membership: Membership, payment: { oneOf: [{ $ref: '#/components/schemas/Payment' }, { type: 'null' }] } },
    additionalProperties: false,
  });
  for (const base of ['/memberships', '/membership']) {
    const singular = base === '/membership' ? ' (singular path)' : '';
    registry.operation(namespace, 'POST', `${base}/:id/change`, {
      summary: `Change a membership's plan, period or add-ons, prorated${singular}`,
      description:
        "Moves an active or trialing membership (409 wu_rest_membership_not_changeable otherwise; 409 wu_rest_membership_no_period without date_expiration) to another plan. plan_id must be a recurring, active product of type plan in the membership's currency, priced for the period (its own price or a price variation; 400 naming duration_unit or duration otherwise); addon_products only packages and services. preview: true answers the proration and changes nothing. when: now applies it in one transaction with the membership row locked: plan_id, amount (the new recurring price), duration, duration_unit and addon_products change; a different period starts now (date_expiration = now + the new period, and cost is the whole new price); amount_due > 0 is recorded as a pending payment (the membership's gateway, else manual: mark it completed as any payment), and credit_left is added to credit_balance, which renewals take first. when: period_end stores the change as the membership's scheduled_change, effective at date_expiration (a later change replaces it; DELETE on this path cancels it). A trialing membership pays nothing now: its new price is charged when the trial ends.",
      tags: ['memberships'],
      body: changeMembershipSchema,
      bodyExamples: changeExamples.bodies,
      responses: {
        200: { description: 'preview: the breakdown only; otherwise the breakdown with the membership and the payment.', schema: { oneOf: [Preview, Applied] }, examples: changeExamples.answers },
      },
    });
    router.post(`${base}/:id/change`, async (req, res) => {
      const id = parseId(req, 'membership');
      const input = parseOrThrow(changeMembershipSchema, bodyObject(req.body));
      res.json(await changes.change(id, input));
    });
    registry.operation(namespace, 'DELETE', `${base}/:id/change`, {
      summary: `Cancel a membership's scheduled plan change${singular}`,
      description: 'Clears scheduled_change (nothing scheduled: nothing to do). Answers the membership.',
      tags: ['memberships'],
      responses: { 200: { description: 'The membership, scheduled_change null.', schema: Membership } },
    });
    router.delete(`${base}/:id/change`, async (req, res) => {
      res.json(await changes.cancelScheduled(parseId(req, 'membership')));
    });
  }
  return service;
}
