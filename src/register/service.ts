import crypto from 'node:crypto';
import { WorkflowExecutionAlreadyStartedError, WorkflowIdConflictPolicy, WorkflowIdReusePolicy } from '@temporalio/client';
import client from 'prom-client';
import { register } from '../../workflows/register';
import type { Config } from '../config';
import type { Db } from '../db/knex';
import { constantTimeEqual } from '../http/auth';
import { ApiError, conflict, temporalUnavailable as temporalUnavailableError } from '../http/errors';
import type { Metrics } from '../http/metrics';
import type { Logger } from '../logger';
import type { MembershipLifecycles } from '../memberships/lifecycle';
import { StoredSecret, type SettingsStore } from '../settings/store';
import type { TemporalGateway } from '../temporal/gateway';
import { SA_CUSTOMER_ID, SA_PRODUCTS, SA_SITE_ID } from '../temporal/search-attributes';
import type { WorkflowIds } from '../temporal/workflow-ids';
import { hashPassword } from '../users/password';
import { RegistrationRecords } from './records';
import { RegistrationStore, type RegistrationRow } from './store';
import type { ErrorBody, RegisterResult } from './types';
import { canonicalJson, fingerprintBody, parseRegisterBody, resolveRegistration, sha256Hex } from './validate';

/** A registration's workflow id: `<prefix>-register-…` (ids from before the prefix have none). */
const WORKFLOW_ID = /^([A-Za-z0-9_]{1,32}-)?register-[A-Za-z0-9-]{1,100}$/;
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;
/** How often a request whose own commit failed looks at the row the workflow decides. */
const DECISION_POLL_MS = 250;

export type RegisterOutcome = { status: 200; body: RegisterResult } | { status: 202; workflowId: string };

export function temporalUnavailable(detail?: string): ApiError {
  return temporalUnavailableError('Registrations cannot be processed right now', detail, 'With the same Idempotency-Key a retry never registers twice.');
}

/** The workflow id of a new registration: from its Idempotency-Key (so a retry meets its run), or random. */
export function workflowIdFor(ids: WorkflowIds, idempotencyKey: string | undefined): Promise<string> {
  return ids.build('register', idempotencyKey === undefined ? crypto.randomUUID() : sha256Hex(idempotencyKey));
}

const keyReused = () => conflict('wu_rest_idempotency_key_reused', 'This Idempotency-Key was already used with a different request body. Use a new key for a new registration.');

const errorOf = (body: ErrorBody): ApiError => {
  const { status, ...extra } = body.data;
  return new ApiError(status, body.code, body.message, extra);
};

/**
 * /register. The request is validated, then written to its `registrations` row (the only
 * place its personal data is kept); the `register` workflow is started, then the records are
 * written in one transaction (see run()); the answer's body is read from the row. Every later read (the same Idempotency-Key again,
 * GET /register/{workflow_id}) is answered from the row, without Temporal.
 */
export class RegisterService {
  /** Key of the request fingerprint (an HMAC of the body without the password). */
  private readonly requestSecret: StoredSecret;
  private readonly store: RegistrationStore;
  private readonly records: RegistrationRecords;

  constructor(
    private readonly db: Db,
    private readonly settings: SettingsStore,
    private readonly temporal: TemporalGateway,
    metrics: Metrics,
    private readonly config: Pick<Config, 'REGISTER_WAIT_SECONDS'>,
    lifecycles: MembershipLifecycles,
  ) {
    this.requestSecret = new StoredSecret(db, 'register_request_secret');
    this.store = new RegistrationStore(db);
    this.records = new RegistrationRecords(db, lifecycles);
    // From the database at each scrape: the same figure on every replica, whichever worker recorded it.
    metrics.registry.removeSingleMetric('registrations_needing_attention');
    new client.Gauge({
      name: 'registrations_needing_attention',
      help: 'Registrations whose work after the answer failed and could not be undone (registrations.provisioning = compensation_failed)',
      registers: [metrics.registry],
      async collect() {
        const [{ n }] = await db('registrations').where({ provisioning: 'compensation_failed' }).count({ n: '*' });
        this.set(Number(n));
      },
    });
  }

  async isOpen(): Promise<boolean> {
    return (await this.settings.get<boolean>('enable_registration')) !== false;
  }

  async register(raw: Record<string, unknown>, idempotencyKey: string | undefined, log: Logger): Promise<RegisterOutcome> {
    if (idempotencyKey !== undefined && !IDEMPOTENCY_KEY.test(idempotencyKey)) {
      throw new ApiError(400, 'wu_rest_invalid_parameter', 'Invalid parameter(s): Idempotency-Key', {
        params: { 'Idempotency-Key': 'Idempotency-Key must be 1 to 255 printable ASCII characters.' },
      });
    }
    const body = parseRegisterBody(raw);
    const requestHmac = crypto.createHmac('sha256', await this.requestSecret.get()).update(canonicalJson(fingerprintBody(raw))).digest('hex');
    const keySha256 = idempotencyKey === undefined ? null : sha256Hex(idempotencyKey);

    // A known key is answered from its row (a retry of a 503 runs again, below).
    const known = keySha256 === null ? undefined : await this.store.byKey(keySha256);
    if (known) {
      const out = await this.known(known, requestHmac, log);
      if (out) return out;
    }

    this.temporal.check(temporalUnavailable);
    const request = await resolveRegistration(this.db, this.settings, body);
    const reserved = await this.store.reserveIds({ customer: request.customer.existingCustomerId === undefined, site: request.site !== null });
    request.customer.newCustomerId = reserved.customerId;
    if (request.site) request.site.newSiteId = reserved.siteId;
    const passwordHash = request.customer.account ? await hashPassword(body.customer!.password!) : null;
    const row = await this.store.claim({ workflowId: await workflowIdFor(this.temporal.ids, idempotencyKey), keySha256, requestHmac, request, passwordHash });
    if (row) return this.run(row, log);
    // Another request holds the key (a concurrent duplicate, or another body).
    const holder = (await this.store.byKey(keySha256!))!;
    const out = await this.known(holder, requestHmac, log);
    if (out) return out;
    throw errorOf(holder.error!);
  }

  /** A key's row: 409 for another body, else its answer; null when a 503 may be tried again. */
  private async known(row: RegistrationRow, requestHmac: string, log: Logger): Promise<RegisterOutcome | null> {
    // A row from before fingerprints were kept (request_hmac null) can only be answered when complete.
    const same = row.request_hmac === null ? row.status === 'completed' : constantTimeEqual(row.request_hmac, requestHmac);
    if (!same) throw keyReused();
    if (row.status === 'completed') return { status: 200, body: row.result! };
    if (row.status === 'running') return this.run(row, log); // join it
    if (row.error && row.error.data.status < 500) throw errorOf(row.error);
    return null;
  }

  /**
   * Starts the registration's workflow (or joins it), then commits its records here, in the
   * API, and answers from the row; past REGISTER_WAIT_SECONDS the answer is 202.
   *
   * Why the API commits: the workflow is durably started first, and its first step is the
   * same idempotent transaction (RegistrationRecords.commit, serialized on the registration's
   * row lock), so whichever of the two runs first writes the records and the other reads
   * them; a process that dies after the start leaves the commit to the workflow. The answer
   * thus waits for one start call and one transaction, not for a workflow task to reach a
   * worker and come back (measured in `npm run bench:register`).
   *
   * Temporal not answering the start: the row is given up (so the records are never written
   * behind a 503) and the caller gets 503.
   *
   * Not through the workflow start outbox: the row's status alone decides, atomically, whether
   * the registration happened. A start whose outcome was unknown is given up here while the
   * workflow may run: its first step (the same commit) then finds the row failed and writes
   * nothing; a retry with the same Idempotency-Key runs again under the same workflow id,
   * joining a run still there (USE_EXISTING). The workflow gets the registration's id only;
   * the personal data and the password hash stay in the row.
   */
  private async run(row: RegistrationRow, log: Logger): Promise<RegisterOutcome> {
    const request = row.request!;
    const customerId = request.customer.existingCustomerId ?? request.customer.newCustomerId;
    const siteId = request.site?.newSiteId;
    const id = Number(row.id);
    try {
      await this.temporal.start(
        register,
        {
          workflowId: row.workflow_id,
          args: [{ registrationId: id }],
          summary: `Registration ${row.id} of customer ${customerId}, plan ${request.plan}`,
          // A concurrent duplicate joins the running one; one that failed (nothing written) may run again.
          conflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
          reusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
          memo: { registration_id: id, products: request.products },
          // All known now (the ids were reserved): the workflow upserts none.
          searchAttributes: [
            { key: SA_PRODUCTS, value: request.products },
            ...(customerId ? [{ key: SA_CUSTOMER_ID, value: customerId }] : []),
            ...(siteId ? [{ key: SA_SITE_ID, value: siteId }] : []),
          ],
        },
        temporalUnavailable,
      );
    } catch (err) {
      // Closed with this id already: the row has its answer.
      if (err instanceof WorkflowExecutionAlreadyStartedError) return this.answer(id, log);
      if (!(err instanceof ApiError && err.status === 503)) throw err;
      log.warn({ err, registrationId: row.id }, 'registration given up: Temporal unreachable');
      const now = await this.store.abandon(id, err.toBody());
      if (now.status === 'completed') return { status: 200, body: now.result! };
      throw err;
    }
    const waitMs = this.config.REGISTER_WAIT_SECONDS * 1000;
    if (waitMs <= 0) return { status: 202, workflowId: row.workflow_id };
    const deadline = Date.now() + waitMs;
    const committed = this.records.commit(id).then(
      () => this.answer(id, log),
      async (err: unknown) => {
        // The database did not take it: the workflow tries again, and records a 503 when its
        // tries run out. Its outcome is the answer, if it comes within the wait.
        log.warn({ err, registrationId: row.id }, 'registration records not written by the API; the workflow tries again');
        await this.untilDecided(id, deadline);
        return this.answer(id, log);
      },
    );
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<RegisterOutcome>((resolve) => {
      timer = setTimeout(() => resolve({ status: 202, workflowId: row.workflow_id }), waitMs);
    });
    // Answered 202 first: the race still holds the commit's end (a 4xx read from the row), so it is never an unhandled rejection.
    try {
      return await Promise.race([committed, waited]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Until the row is no longer running, or the deadline (a row that cannot be read counts as running). */
  private async untilDecided(id: number, deadline: number): Promise<void> {
    while (Date.now() < deadline) {
      const row = await this.store.byId(id).catch(() => undefined);
      if (row && row.status !== 'running') return;
      await new Promise((r) => setTimeout(r, Math.min(DECISION_POLL_MS, Math.max(0, deadline - Date.now()))));
    }
  }

  /** The row's answer: 200, its 4xx or 503, or 202 while nothing is decided. */
  private async answer(id: number, log: Logger): Promise<RegisterOutcome> {
    const row = (await this.store.byId(id))!;
    if (row.status === 'completed') return { status: 200, body: row.result! };
    if (row.status === 'failed' && row.error) throw errorOf(row.error);
    log.debug({ registrationId: id }, 'registration still running');
    return { status: 202, workflowId: row.workflow_id };
  }

  /** GET /register/{workflow_id}: from the row: 202 running, 200 the records, or its error; 404 for other ids. */
  async status(workflowId: string): Promise<RegisterOutcome> {
    const notFound = () => new ApiError(404, 'wu_rest_registration_not_found', 'No registration with this workflow id.');
    if (!WORKFLOW_ID.test(workflowId)) throw notFound();
    const row = await this.store.byWorkflowId(workflowId);
    if (!row) throw notFound();
    if (row.status === 'running') return { status: 202, workflowId };
    if (row.status === 'completed') return { status: 200, body: row.result! };
    throw errorOf(row.error!);
  }
}
