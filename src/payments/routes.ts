import type { Router } from 'express';
import { z } from 'zod';
import type { Db } from '../db/knex';
import { tableResource } from '../db/table-service';
import { money } from '../http/money';
import { mountResource, parseId } from '../http/resource';
import type { RouteRegistry } from '../http/route-registry';
import { bodyObject, fields, parseOrThrow } from '../http/validation';
import type { MembershipLifecycles } from '../memberships/lifecycle';
import { createMembershipService } from '../memberships/service';
import { paymentExamples } from './examples';
import { MAX_REFUNDS_PER_PAYMENT, RefundService } from './refunds';
import { createPaymentSchema, lineItemRecord, updatePaymentSchema } from './schema';
import { createPaymentService } from './service';

export const createRefundSchema = z.strictObject({
  amount: money().describe("How much to refund: more than 0, at most what is left of the payment's total, with no more decimals than its currency's minor unit (USD 2, JPY 0, KWD 3)."),
  reason: fields.text(1000).default('').describe('Why (shown in the refund list).'),
  gateway_refund_id: fields.text(255).min(1).nullable().optional().describe("The gateway's id of the refund; recorded once per payment."),
  cancel_membership_on_refund: fields.flag().default(false).describe("Cancel the payment's membership with the refund (the original's option of that name)."),
});

const refundRecord = z.strictObject({
  id: z.int(),
  payment_id: z.int(),
  amount: z.number(),
  reason: z.string(),
  gateway_refund_id: z.string().nullable(),
  membership_cancelled: z.boolean().describe('Whether this refund cancelled the membership.'),
  date_created: z.string().nullable(),
});

export function mountPayments(router: Router, registry: RouteRegistry, namespace: string, db: Db, lifecycles: MembershipLifecycles) {
  const service = createPaymentService(db, lifecycles);
  const resource = tableResource(service, service.cfg, {
    plural: 'payments',
    description:
      "membership_id must be a membership of the payment's customer; line_items[].product_id must name existing products; parent_id must not be the payment itself. Without subtotal the line items make it, without total subtotal - discount_total + tax_total does; neither may exceed 99999999999.9999. refund_total is the sum of the payment's refunds (POST /payments/{id}/refunds): a write may only repeat it. A payment of a membership that becomes completed bills it: a renewal payment (renewal_period_start set, created by the membership's lifecycle at its due date) moves the membership's date_expiration one period on from that due date, adds 1 to times_billed, sets date_renewed and makes a trialing or on-hold membership active; the first payment of an active recurring membership without date_expiration starts its first period.",
    createSchema: createPaymentSchema,
    nullable: ['discount_code'],
    updateSchema: updatePaymentSchema,
    json: { line_items: z.array(lineItemRecord) },
    extra: {
      renewal_period_start: z.iso
        .datetime({ offset: true })
        .nullable()
        .describe('Read-only. For a renewal payment, the start of the billing period it pays for (the membership\'s due date when its lifecycle created it; one renewal payment per membership and period); null for any other payment.'),
    },
    links: {
      customer: { field: 'customer_id', model: 'customer', embeddable: true },
      membership: { field: 'membership_id', model: 'membership', embeddable: true },
      product: { field: 'product_id', model: 'product', embeddable: true },
      parent: { field: 'parent_id', model: 'payment' },
    },
    examples: paymentExamples,
  });
  mountResource(router, registry, namespace, resource);

  const refunds = new RefundService(db, service, createMembershipService(db, lifecycles), lifecycles);
  const Refund = registry.component('PaymentRefund', refundRecord);
  for (const base of ['/payments', '/payment']) {
    const singular = base === '/payment' ? ' (singular path)' : '';
    registry.operation(namespace, 'GET', `${base}/:id/refunds`, {
      summary: `A payment's refunds, oldest first${singular}`,
      tags: ['payments'],
      responses: { 200: { description: 'The refunds (a payment takes at most 100).', schema: { type: 'array', items: Refund } } },
    });
    router.get(`${base}/:id/refunds`, async (req, res) => {
      res.json(await refunds.list(parseId(req, 'payment')));
    });

    registry.operation(namespace, 'POST', `${base}/:id/refunds`, {
      summary: `Refund a payment, in part or in full${singular}`,
      description: `Records the refund and adds it to the payment's refund_total in one transaction: the payment becomes partially-refunded, or refunded once nothing is left. Only completed and partially-refunded payments can be refunded (409 wu_rest_payment_not_refundable); more than what is left, or more decimals than the currency has, is a 400 naming amount; a gateway_refund_id already recorded for the payment is a 400 naming it. At most ${MAX_REFUNDS_PER_PAYMENT} refunds per payment. hostflow records refunds; the gateway's own refund is made there (its id goes in gateway_refund_id).`,
      tags: ['payments'],
      body: createRefundSchema,
      responses: {
        201: {
          description: 'The refund, and the payment after it.',
          schema: { type: 'object', required: ['refund', 'payment'], properties: { refund: Refund, payment: registry.component('Payment', resource.recordSchema) }, additionalProperties: false },
        },
      },
    });
    router.post(`${base}/:id/refunds`, async (req, res) => {
      const id = parseId(req, 'payment');
      const body = parseOrThrow(createRefundSchema, bodyObject(req.body));
      res.status(201).json(await refunds.refund(id, body));
    });
  }
  return service;
}
