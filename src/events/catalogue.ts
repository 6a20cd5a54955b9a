import { sessionRecord, type SessionRow } from '../chat/sessions';
import { ticketRecord } from '../chat/tickets';
import { customerExamples } from '../customers/examples';
import { domainExamples } from '../domains/examples';
import { membershipExamples } from '../memberships/examples';
import { paymentExamples } from '../payments/examples';
import { siteExamples } from '../sites/examples';
import { tenantStatus, type TenantRow } from '../tenants/store';
import { jobRecord } from '../translations/jobs';
import { webhookExamples } from '../webhooks/examples';

/** Severity as the original grades it: 1 debug … 3 info … 5 critical. */
export type Severity = 1 | 2 | 3 | 4 | 5;

/** One kind of event: what `/hooks` lists, and what an event row of that slug holds. */
export interface EventType {
  slug: string;
  /** Short title, as the original's catalogue shows it. */
  name: string;
  desc: string;
  /** The model the event is about (object_type); its payload is that record as the API shows it. */
  objectType: string;
  severity: Severity;
  /**
   * An example payload, made by the same serializer as the real ones from a sample row, or a
   * record answered by the API in a real run (test/examples.test.ts replays those). A function:
   * the serializers' modules record events themselves, so they load after this one.
   */
  example: () => Record<string, unknown>;
}

/** A payload is the record as a service answers it: the presenter's _links (which depend on the request's host) are not part of it. */
function payloadOf(record: Record<string, unknown>): Record<string, unknown> {
  const { _links: _ignored, ...rest } = record;
  return rest;
}

const customer = payloadOf(customerExamples.record);
const membership = payloadOf(membershipExamples.record);
const payment = payloadOf(paymentExamples.record);
const site = payloadOf(siteExamples.record);
const domain = payloadOf(domainExamples.record);
const webhook = payloadOf(webhookExamples.record);
const PASSED = Object.fromEntries(['no_legacy', 'sovereign_push', 'tenant_users'].map((n) => [n, { status: 'passed', message: 'Passed.', checked_at: '2026-11-26T12:25:00.000Z' }])) as TenantRow['verification'];

/** A tenant registry row for the examples (the serializer, tenantStatus, makes the payload from it). */
function sampleTenant(over: Partial<TenantRow>): TenantRow {
  return {
    id: 1,
    uid: 't5d0e8c1b',
    site_id: 1,
    isolation_model: 'sovereign',
    state: 'ready',
    step: null,
    workflow_id: 'h3f9c2a71-tenant-bootstrap-1',
    requested_host: null,
    database_host: 'db1',
    database_name: 'hf_tenant_t5d0e8c1b',
    role_name: 'hf_tenant_t5d0e8c1b',
    credentials: null,
    filesystem_root: null,
    hostname: 'alice.example.com',
    path: '/',
    verification: {},
    error: null,
    date_created: new Date('2026-11-26T12:18:46Z'),
    date_modified: new Date('2026-11-26T12:25:00Z'),
    date_torn_down: null,
    ...over,
  };
}
const SAMPLE_SESSION: SessionRow = {
  id: 31,
  status: 'waiting',
  customer_id: 1,
  customer_name: 'Alice Martin',
  customer_email: 'alice@example.com',
  site_id: 1,
  identity_verified: true,
  page_url: 'https://alice.example.com/checkout',
  page_title: 'Checkout',
  referrer: null,
  locale: 'en_US',
  metadata: { plan: 'pro' },
  assigned_agent_id: null,
  ticket_id: null,
  fallback_reason: null,
  token_sha256: '(not part of the record)',
  token_expires_at: new Date('2026-11-27T12:18:46Z'),
  follow_up_workflow_id: 'h3f9c2a71-chat-follow-up-31',
  assigned_at: null,
  first_response_at: null,
  resolved_at: null,
  closed_at: null,
  last_message_at: new Date('2026-11-26T12:18:46Z'),
  date_created: new Date('2026-11-26T12:18:46Z'),
  date_modified: new Date('2026-11-26T12:18:46Z'),
};
const EXAMPLE_API_BASE = 'https://network.example.com/wp-json/wu/v2';

/** A translation job row for the examples (jobRecord makes the payload from it). */
function sampleJob(over: Record<string, unknown>): Record<string, unknown> {
  return {
    id: 7,
    project_id: 3,
    slug: 'shop',
    type: 'plugin',
    version: '1.4.2',
    locale: 'fr_FR',
    status: 'pending_approval',
    source: 'glotpress',
    total_strings: 120,
    remaining_strings: 90,
    human_strings: 30,
    ai_strings: 0,
    batches_done: 0,
    workflow_id: 'h3f9c2a71-translation-7',
    failure_step: null,
    failure_reason: null,
    rejection_reason: null,
    approved_at: null,
    approved_by: null,
    package_path: null,
    package_size: null,
    package_sha256: null,
    package_files: null,
    date_created: new Date('2026-11-26T12:18:46Z'),
    date_modified: new Date('2026-11-26T12:20:00Z'),
    ...over,
  };
}
const REGISTRATION_WORKFLOW_ID = 'h3f9c2a71-register-5d0e8c1b-7a4f-4e2b-9c3d-2f6a1b8e0c47';

const TYPES: EventType[] = [
  { slug: 'customer_created', name: 'Customer created', desc: 'A customer was created (by the API or by /register).', objectType: 'customer', severity: 3, example: () => customer },
  { slug: 'customer_updated', name: 'Customer updated', desc: 'A customer was changed: the payload is the customer after the change.', objectType: 'customer', severity: 3, example: () => ({ ...customer, ...customerExamples.update }) },
  { slug: 'membership_activated', name: 'Membership activated', desc: 'A membership became active (created active, or its status changed to active from pending, trialing or on-hold).', objectType: 'membership', severity: 3, example: () => ({ ...membership, status: 'active' }) },
  { slug: 'membership_renewed', name: 'Membership renewed', desc: 'A membership was renewed: its date_expiration moved later while it stayed active.', objectType: 'membership', severity: 3, example: () => ({ ...membership, status: 'active' }) },
  { slug: 'membership_cancelled', name: 'Membership cancelled', desc: 'A membership was cancelled.', objectType: 'membership', severity: 3, example: () => ({ ...membership, status: 'cancelled' }) },
  { slug: 'membership_on_hold', name: 'Membership on hold', desc: 'A membership went on hold: its renewal was not paid through the dunning schedule (or it was put on hold by hand).', objectType: 'membership', severity: 3, example: () => ({ ...membership, status: 'on-hold' }) },
  { slug: 'membership_expired', name: 'Membership expired', desc: 'A membership expired.', objectType: 'membership', severity: 3, example: () => ({ ...membership, status: 'expired' }) },
  { slug: 'payment_created', name: 'Payment created', desc: 'A payment was recorded (by the API or by /register), in any status.', objectType: 'payment', severity: 3, example: () => payment },
  { slug: 'payment_completed', name: 'Payment completed', desc: 'A payment reached the status completed (created completed, or changed to it).', objectType: 'payment', severity: 3, example: () => ({ ...payment, status: 'completed' }) },
  { slug: 'payment_refunded', name: 'Payment refunded', desc: 'A refund was recorded on a payment: the payload is the payment after it (refund_total, status refunded or partially-refunded).', objectType: 'payment', severity: 3, example: () => ({ ...payment, status: 'refunded' }) },
  { slug: 'site_created', name: 'Site created', desc: 'A site was created.', objectType: 'site', severity: 3, example: () => site },
  { slug: 'site_published', name: 'Site published', desc: 'A site became published: active and public, from its creation or from a change of either.', objectType: 'site', severity: 3, example: () => site },
  { slug: 'domain_created', name: 'Domain created', desc: 'A domain was mapped to a site.', objectType: 'domain', severity: 3, example: () => domain },
  { slug: 'domain_stage_changed', name: 'Domain stage changed', desc: "A domain's stage changed (checking-dns, checking-ssl-cert, done, failed, …): the payload is the domain after the change.", objectType: 'domain', severity: 3, example: () => ({ ...domain, stage: 'done' }) },
  {
    slug: 'registration_completed',
    name: 'Registration completed',
    desc: "A /register checkout committed its records: the payload is its answer (customer, membership, payment, site, as GET /register/{workflow_id} shows it) with the registration's workflow_id.",
    objectType: 'registration',
    severity: 3,
    example: () => ({ workflow_id: REGISTRATION_WORKFLOW_ID, customer, membership, payment, site }),
  },
  {
    slug: 'registration_failed',
    name: 'Registration failed',
    desc: "A /register checkout was refused, or could not be written: the payload is its error answer (as GET /register/{workflow_id} shows it) with the registration's workflow_id. Nothing of it was kept.",
    objectType: 'registration',
    severity: 4,
    example: () => ({ workflow_id: REGISTRATION_WORKFLOW_ID, code: 'customer_not_found', message: 'Customer 42 was not found.', data: { status: 400, params: { customer_id: 'customer_id does not match any customer.' } } }),
  },
  {
    slug: 'tenant_ready',
    name: 'Tenant ready',
    desc: "An isolated tenant passed its verification and is ready: the payload is its status, as GET /tenants/{site_id} answers it (object_id is the site's id).",
    objectType: 'tenant',
    severity: 3,
    example: () => tenantStatus(sampleTenant({ state: 'ready', verification: PASSED })),
  },
  {
    slug: 'tenant_failed',
    name: 'Tenant failed',
    desc: 'A tenant workflow (bootstrap, verify or teardown) could not finish: the payload is the status, with error naming the operation, the step and why.',
    objectType: 'tenant',
    severity: 4,
    example: () =>
      tenantStatus(sampleTenant({ state: 'failed', step: null, error: { operation: 'bootstrap', step: 'create_database', message: 'could not connect to the tenant host', at: '2026-11-26T12:20:00.000Z' } })),
  },
  {
    slug: 'tenant_torn_down',
    name: 'Tenant torn down',
    desc: "A tenant was torn down: its data is back in the shared tables and its database, role, files and route are gone.",
    objectType: 'tenant',
    severity: 3,
    example: () => tenantStatus(sampleTenant({ state: 'torn_down', database_name: null, hostname: null, path: null, date_torn_down: new Date('2026-11-26T12:30:00Z') })),
  },
  {
    slug: 'chat_session_waiting',
    name: 'Chat session waiting',
    desc: 'A support chat session waits for an agent: opened (when agents are available), or unassigned. The payload is the session as agents see it.',
    objectType: 'chat_session',
    severity: 3,
    example: () => sessionRecord(SAMPLE_SESSION),
  },
  {
    slug: 'chat_ticket_created',
    name: 'Ticket created',
    desc: 'A support ticket was opened from a chat session (no agent available, outside business hours, a wait that timed out, or by an agent): the payload is the ticket with its transcript.',
    objectType: 'ticket',
    severity: 3,
    example: () =>
      ticketRecord(
        { id: 12, subject: 'Chat #31 with Alice Martin', status: 'open', priority: 'normal', category: null, source: 'chat', customer_id: 1, customer_name: 'Alice Martin', customer_email: 'alice@example.com', site_id: 1, identity_verified: true, date_created: SAMPLE_SESSION.date_created, date_modified: SAMPLE_SESSION.date_created },
        [{ id: 40, sender_type: 'customer', sender_name: 'Alice Martin', body: 'My domain does not resolve.', chat_message_id: 77, date_created: SAMPLE_SESSION.date_created }],
        [],
        [31],
      ),
  },
  {
    slug: 'translation_job_awaiting_approval',
    name: 'Translation job awaiting approval',
    desc: 'A translation job imported its strings and waits for an administrator to approve (or reject) the AI translation: the payload is the job as GET /translations/jobs/{id} answers it (without logs).',
    objectType: 'translation_job',
    severity: 3,
    example: () => jobRecord(sampleJob({ status: 'pending_approval' }), EXAMPLE_API_BASE),
  },
  {
    slug: 'translation_job_ready',
    name: 'Translation job ready',
    desc: 'A language pack was built: the payload is the job, with its download_url.',
    objectType: 'translation_job',
    severity: 3,
    example: () => jobRecord(sampleJob({ status: 'ready', remaining_strings: 0, ai_strings: 90, batches_done: 2, approved_at: new Date('2026-11-26T12:30:00Z'), approved_by: 'admin', package_path: 'x', package_size: 48213, package_sha256: 'c0ffee'.padEnd(64, '0'), package_files: ['shop-fr_FR.po', 'shop-fr_FR.mo', 'shop-fr_FR.l10n.php'] }), EXAMPLE_API_BASE),
  },
  {
    slug: 'translation_job_failed',
    name: 'Translation job failed',
    desc: 'A translation job ended without a pack: rejected, expired waiting for approval, or failed at a step (failure_step, failure_kind and failure_reason say which).',
    objectType: 'translation_job',
    severity: 4,
    example: () => jobRecord(sampleJob({ status: 'failed', failure_step: 'pending_approval', failure_reason: 'Rejected by an administrator: wrong tone', rejection_reason: 'wrong tone' }), EXAMPLE_API_BASE),
  },
  {
    slug: 'webhook_disabled',
    name: 'Webhook disabled',
    desc: 'A webhook was turned off by its deliveries: its receiver answered 410 Gone, or every attempt failed for WEBHOOK_DISABLE_AFTER_DAYS. The payload is the webhook (never its secret).',
    objectType: 'webhook',
    severity: 4,
    example: () => ({ ...webhook, active: false, date_last_failed: '2026-11-27T06:45:00.000Z' }),
  },
];

/** Every event type, by slug. */
export const EVENT_TYPES: ReadonlyMap<string, EventType> = new Map(TYPES.map((t) => [t.slug, t]));
export const EVENT_SLUGS: readonly string[] = TYPES.map((t) => t.slug);
