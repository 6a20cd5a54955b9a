import crypto from 'node:crypto';
import {
  ApplicationFailure,
  WorkflowExecutionAlreadyStartedError,
  WorkflowFailedError,
  WorkflowIdConflictPolicy,
  WorkflowIdReusePolicy,
  WorkflowNotFoundError,
  type WorkflowHandle,
} from '@temporalio/client';
import type { Config } from '../config';
import type { Db } from '../db/knex';
import { constantTimeEqual } from '../http/auth';
import { ApiError, conflict } from '../http/errors';
import type { Metrics } from '../http/metrics';
import type { Logger } from '../logger';
import { StoredSecret, type SettingsStore } from '../settings/store';
import { temporalUnavailable as temporalUnavailableError, type TemporalHandle } from '../temporal/client';
import { hashPassword } from '../users/password';
import type { ErrorBody, RegisterResult } from '../../activities/register';
import { SA_CUSTOMER_ID, SA_EMAIL, SA_PRODUCTS } from '../../workflows/register-search-attributes';
import type { register } from '../../workflows/register';
import { dropPasswords, holdPassword } from './passwords';
import { canonicalJson, parseRegisterBody, resolveRegistration, sha256Hex } from './validate';

export const REGISTER_WORKFLOW = 'register';
const WORKFLOW_ID = /^register-[A-Za-z0-9-]{1,100}$/;
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

export type RegisterOutcome = { status: 200; body: RegisterResult } | { status: 202; workflowId: string };

export function temporalUnavailable(detail?: string): ApiError {
  return temporalUnavailableError('Registrations cannot be processed right now', detail, 'With the same Idempotency-Key a retry never registers twice.');
}

export function workflowIdFor(idempotencyKey: string | undefined): string {
  return idempotencyKey === undefined ? `register-${crypto.randomUUID()}` : `register-${sha256Hex(idempotencyKey)}`;
}

/** A failed register workflow to the caller's error (the contract's shape, never a stack). */
function failureToApiError(err: WorkflowFailedError): ApiError {
  const cause = err.cause;
  if (cause instanceof ApplicationFailure && cause.details?.length) {
    const body = cause.details[0] as ErrorBody;
    if (body && typeof body.code === 'string') {
      const { status, ...extra } = body.data ?? { status: 400 };
      return new ApiError(typeof status === 'number' ? status : 400, body.code, body.message, extra);
    }
  }
  return new ApiError(400, 'wu_rest_registration_failed', `The registration did not complete (${cause?.message ?? err.message}); nothing was kept.`);
}

function sameBody(memo: Record<string, unknown> | undefined, requestHmac: string): boolean {
  return typeof memo?.request_hmac === 'string' && constantTimeEqual(memo.request_hmac, requestHmac);
}

const keyReused = () => conflict('wu_rest_idempotency_key_reused', 'This Idempotency-Key was already used with a different request body. Use a new key for a new registration.');

/**
 * /register: validation, then the `register` workflow (see workflows/register.ts), waited for
 * up to REGISTER_WAIT_SECONDS.
 */
export class RegisterService {
  /** Key of the request fingerprint (an HMAC: the body holds the password). */
  private readonly requestSecret: StoredSecret;

  constructor(
    private readonly db: Db,
    private readonly settings: SettingsStore,
    private readonly temporal: TemporalHandle | null,
    private readonly metrics: Metrics,
    private readonly config: Pick<Config, 'REGISTER_WAIT_SECONDS'>,
  ) {
    this.requestSecret = new StoredSecret(db, 'register_request_secret');
  }

  async isOpen(): Promise<boolean> {
    return (await this.settings.get<boolean>('enable_registration')) !== false;
  }

  private client() {
    if (!this.temporal) throw temporalUnavailable('Temporal is not configured.');
    return this.temporal;
  }

  /** Temporal calls: infrastructure trouble becomes 503; our own errors pass. */
  private async call<T>(log: Logger, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof ApiError || err instanceof WorkflowFailedError || err instanceof WorkflowNotFoundError || err instanceof WorkflowExecutionAlreadyStartedError) throw err;
      log.warn({ err }, 'temporal call failed');
      throw temporalUnavailable((err as Error)?.message);
    }
  }

  async register(raw: Record<string, unknown>, idempotencyKey: string | undefined, log: Logger): Promise<RegisterOutcome> {
    if (idempotencyKey !== undefined && !IDEMPOTENCY_KEY.test(idempotencyKey)) {
      throw new ApiError(400, 'wu_rest_invalid_parameter', 'Invalid parameter(s): Idempotency-Key', {
        params: { 'Idempotency-Key': 'Idempotency-Key must be 1 to 255 printable ASCII characters.' },
      });
    }
    const body = parseRegisterBody(raw);
    const requestHmac = crypto.createHmac('sha256', await this.requestSecret.get()).update(canonicalJson(raw)).digest('hex');
    const keySha256 = idempotencyKey === undefined ? null : sha256Hex(idempotencyKey);
    const workflowId = workflowIdFor(idempotencyKey);
    const t = this.client();

    // A known key: the same body joins (or reads) that registration, another body is 409.
    if (keySha256 !== null) {
      const existing = await this.describe(workflowId, log);
      if (existing) {
        if (!sameBody(existing.memo, requestHmac)) throw keyReused();
        return this.wait(workflowId, log);
      }
    }

    const input = await resolveRegistration(this.db, this.settings, body, requestHmac, keySha256);
    if (input.customer.account) await holdPassword(this.db, workflowId, requestHmac, await hashPassword(body.customer!.password!));
    await this.call(log, async () => {
      try {
        await t.connection.withDeadline(Date.now() + 5_000, () =>
          t.client.workflow.start<typeof register>(REGISTER_WORKFLOW, {
            taskQueue: t.taskQueue,
            workflowId,
            args: [input],
            // A concurrent duplicate joins the running one; a closed one is never re-run.
            workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
            workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
            memo: {
              request_hmac: requestHmac,
              email: input.email,
              products: input.productSlugs,
              customer_id: input.customer.existingCustomerId ?? null,
              site: input.site ? `${input.site.domain}${input.site.path}` : null,
            },
            typedSearchAttributes: [
              ...(input.email ? [{ key: SA_EMAIL, value: input.email.toLowerCase() }] : []),
              { key: SA_PRODUCTS, value: input.productSlugs },
              ...(input.customer.existingCustomerId ? [{ key: SA_CUSTOMER_ID, value: input.customer.existingCustomerId }] : []),
            ],
            staticSummary: `register ${input.email ?? ''} (${input.productSlugs.join(', ')})`,
          }),
        );
        this.metrics.workflowsStarted.inc({ workflow_type: REGISTER_WORKFLOW });
      } catch (err) {
        if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
        // Closed with this id meanwhile: its result is the answer (checked below), and it
        // needs no password held for it. (After other errors the start may have gone
        // through: the hash stays held for it.)
        await dropPasswords(this.db, workflowId, requestHmac);
      }
    });
    if (keySha256 !== null) {
      // Two different bodies racing with one key: whichever started owns the key.
      const desc = await this.describe(workflowId, log);
      if (desc && !sameBody(desc.memo, requestHmac)) {
        await dropPasswords(this.db, workflowId, requestHmac);
        throw keyReused();
      }
    }
    return this.wait(workflowId, log);
  }

  private async describe(workflowId: string, log: Logger) {
    const t = this.client();
    try {
      return await this.call(log, () => t.connection.withDeadline(Date.now() + 5_000, () => t.client.workflow.getHandle(workflowId).describe()));
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return null;
      throw err;
    }
  }

  /** Waits for the result up to REGISTER_WAIT_SECONDS (0: not at all). */
  private async wait(workflowId: string, log: Logger, waitMs = this.config.REGISTER_WAIT_SECONDS * 1000): Promise<RegisterOutcome> {
    const t = this.client();
    const handle: WorkflowHandle<typeof register> = t.client.workflow.getHandle(workflowId);
    if (waitMs <= 0) return { status: 202, workflowId };
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), waitMs);
    try {
      const result = await t.connection.withAbortSignal(ac.signal, () => handle.result());
      return { status: 200, body: result };
    } catch (err) {
      if (err instanceof WorkflowFailedError) throw failureToApiError(err);
      // Our own timeout: the registration goes on, the caller polls.
      if (ac.signal.aborted) return { status: 202, workflowId };
      return this.call(log, () => Promise.reject(err));
    } finally {
      clearTimeout(timer);
    }
  }

  /** GET /register/{workflow_id}: 200 result, 202 running, the failure, or 404. */
  async status(workflowId: string, log: Logger): Promise<RegisterOutcome> {
    const notFound = () => new ApiError(404, 'wu_rest_registration_not_found', 'No registration with this workflow id.');
    if (!WORKFLOW_ID.test(workflowId)) throw notFound();
    const desc = await this.describe(workflowId, log);
    if (!desc || desc.type !== REGISTER_WORKFLOW) throw notFound();
    if (desc.status.name === 'RUNNING') return { status: 202, workflowId };
    return this.wait(workflowId, log, 10_000);
  }
}
