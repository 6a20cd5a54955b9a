import crypto from 'node:crypto';
import { WorkflowExecutionAlreadyStartedError, WorkflowIdConflictPolicy, WorkflowIdReusePolicy, WorkflowUpdateFailedError } from '@temporalio/client';
import client from 'prom-client';
import type { Config } from '../config';
import type { Db } from '../db/knex';
import { constantTimeEqual } from '../http/auth';
import { ApiError, conflict } from '../http/errors';
import type { Metrics } from '../http/metrics';
import type { Logger } from '../logger';
import { StoredSecret, type SettingsStore } from '../settings/store';
import { temporalUnavailable as temporalUnavailableError } from '../temporal/client';
import type { StartOptions, TemporalGateway } from '../temporal/gateway';
import { hashPassword } from '../users/password';
import { register, registrationCommitted } from '../../workflows/register';
import { SA_CUSTOMER_ID, SA_PRODUCTS } from '../../workflows/search-attributes';
import { RegistrationStore, type RegistrationRow } from './store';
import type { ErrorBody, RegisterResult } from './types';
import { canonicalJson, fingerprintBody, parseRegisterBody, resolveRegistration, sha256Hex } from './validate';

const WORKFLOW_ID = /^register-[A-Za-z0-9-]{1,100}$/;
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

export type RegisterOutcome = { status: 200; body: RegisterResult } | { status: 202; workflowId: string };

export function temporalUnavailable(detail?: string): ApiError {
  return temporalUnavailableError('Registrations cannot be processed right now', detail, 'With the same Idempotency-Key a retry never registers twice.');
}

export function workflowIdFor(idempotencyKey: string | undefined): string {
  return idempotencyKey === undefined ? `register-${crypto.randomUUID()}` : `register-${sha256Hex(idempotencyKey)}`;
}

const keyReused = () => conflict('wu_rest_idempotency_key_reused', 'This Idempotency-Key was already used with a different request body. Use a new key for a new registration.');

const errorOf = (body: ErrorBody): ApiError => {
  const { status, ...extra } = body.data;
  return new ApiError(status, body.code, body.message, extra);
};

/**
 * /register. The request is validated, then written to its `registrations` row (the only
 * place its personal data is kept); the `register` workflow, started with Update-With-Start,
 * writes the records in one transaction and answers the committed ids in the same round trip;
 * the answer's body is read from the row. Every later read (the same Idempotency-Key again,
 * GET /register/{workflow_id}) is answered from the row, without Temporal.
 */
export class RegisterService {
  /** Key of the request fingerprint (an HMAC of the body without the password). */
  private readonly requestSecret: StoredSecret;
  private readonly store: RegistrationStore;

  constructor(
    private readonly db: Db,
    private readonly settings: SettingsStore,
    private readonly temporal: TemporalGateway,
    metrics: Metrics,
    private readonly config: Pick<Config, 'REGISTER_WAIT_SECONDS'>,
  ) {
    this.requestSecret = new StoredSecret(db, 'register_request_secret');
    this.store = new RegistrationStore(db);
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
    if (request.customer.existingCustomerId === undefined) request.customer.newCustomerId = await this.store.reserveCustomerId();
    const passwordHash = request.customer.account ? await hashPassword(body.customer!.password!) : null;
    const row = await this.store.claim({ workflowId: workflowIdFor(idempotencyKey), keySha256, requestHmac, request, passwordHash });
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
   * Starts the registration's workflow, or joins it, and waits for its records up to
   * REGISTER_WAIT_SECONDS (then 202). Temporal not answering: the row is given up (so the
   * records are never written behind a 503) and the caller gets 503.
   */
  private async run(row: RegistrationRow, log: Logger): Promise<RegisterOutcome> {
    const request = row.request!;
    const customerId = request.customer.existingCustomerId ?? request.customer.newCustomerId;
    const start: StartOptions<typeof register> = {
      workflowId: row.workflow_id,
      args: [{ registrationId: Number(row.id) }],
      summary: `Registration ${row.id} of customer ${customerId}, plan ${request.plan}`,
      // A concurrent duplicate joins the running one; one that failed (nothing written) may run again.
      conflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
      reusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
      memo: { registration_id: Number(row.id), products: request.products },
      searchAttributes: [{ key: SA_PRODUCTS, value: request.products }, ...(customerId ? [{ key: SA_CUSTOMER_ID, value: customerId }] : [])],
    };
    const waitMs = this.config.REGISTER_WAIT_SECONDS * 1000;
    try {
      if (waitMs <= 0) {
        await this.temporal.start(register, start, temporalUnavailable).catch((err: unknown) => {
          // Closed with this id already: the row has its answer.
          if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
        });
        return { status: 202, workflowId: row.workflow_id };
      }
      const r = await this.temporal.updateWithStart(register, registrationCommitted, { ...start, updateId: `commit-${row.id}-${row.attempt}`, waitMs }, temporalUnavailable);
      if (r.outcome === 'waiting') return { status: 202, workflowId: row.workflow_id };
    } catch (err) {
      if (err instanceof ApiError && err.status === 503) {
        log.warn({ err, registrationId: row.id }, 'registration given up: Temporal unreachable');
        const now = await this.store.abandon(Number(row.id), err.toBody());
        if (now.status === 'completed') return { status: 200, body: now.result! };
        throw err;
      }
      if (!(err instanceof WorkflowUpdateFailedError || err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
    return this.answer(Number(row.id));
  }

  /** The row's answer once the workflow says it decided. */
  private async answer(id: number): Promise<RegisterOutcome> {
    const row = (await this.store.byId(id))!;
    if (row.status === 'completed') return { status: 200, body: row.result! };
    if (row.status === 'failed' && row.error) throw errorOf(row.error);
    throw temporalUnavailable('The registration workflow answered before its records were decided.');
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
