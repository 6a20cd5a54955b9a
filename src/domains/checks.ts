import { WorkflowIdConflictPolicy } from '@temporalio/client';
import type { Knex } from 'knex';
import { domainCheck, type DomainCheckInput } from '../../workflows/domainCheck';
import type { Config } from '../config';
import type { Db } from '../db/knex';
import { ApiError } from '../http/errors';
import { logger } from '../logger';
import type { TemporalGateway } from '../temporal/gateway';
import { SA_CUSTOMER_ID, SA_SITE_ID } from '../temporal/search-attributes';
import { enqueueStart, WorkflowStarts } from '../temporal/starts';

export function checksUnavailable(detail?: string): ApiError {
  return new ApiError(
    503,
    'wu_rest_domain_checks_unavailable',
    'Domain checks cannot be started right now (the workflow service is unreachable); nothing was changed. Try again later, or create the mapping with stage domain-mapping.',
    detail ? { detail } : {},
  );
}

/**
 * Starts and stops the durable DNS/TLS check of a domain (workflow `<prefix>-domain-check-<id>`,
 * kept on the row), through the workflow start outbox.
 */
export class DomainChecks {
  private readonly starts: WorkflowStarts;

  constructor(
    db: Db,
    private readonly temporal: TemporalGateway,
    private readonly config: Pick<Config, 'DOMAIN_CHECK_INTERVAL_SECONDS' | 'DOMAIN_CHECK_MAX_TRIES'>,
  ) {
    this.starts = new WorkflowStarts(db, temporal);
  }

  /** 503 at once when Temporal is not configured or known unreachable (before anything is written). */
  assertAvailable(): void {
    this.temporal.check(checksUnavailable);
  }

  /** A new domain check's workflow id (`<prefix>-domain-check-<id>`); a domain keeps the one stored on its row. */
  workflowId(domainId: number): Promise<string> {
    return this.temporal.ids.build('domain-check', domainId);
  }

  /**
   * Writes the (re)start of the check into the outbox, in the caller's transaction (the one
   * moving the domain into a checking stage): a running check of the same id is replaced.
   */
  async enqueue(trx: Knex.Transaction, domain: { id: number; domain: string; blog_id?: number | null; customer_id?: number | null }, workflowId: string): Promise<void> {
    const input: DomainCheckInput = {
      domainId: domain.id,
      domain: domain.domain,
      intervalSeconds: this.config.DOMAIN_CHECK_INTERVAL_SECONDS,
      maxTries: this.config.DOMAIN_CHECK_MAX_TRIES,
    };
    await enqueueStart(trx, {
      workflow: domainCheck,
      workflowId,
      args: [input],
      conflictPolicy: WorkflowIdConflictPolicy.TERMINATE_EXISTING,
      memo: { domain: domain.domain, blog_id: domain.blog_id ?? null, customer_id: domain.customer_id ?? null },
      searchAttributes: [
        ...(domain.blog_id ? [{ key: SA_SITE_ID, value: domain.blog_id }] : []),
        ...(domain.customer_id ? [{ key: SA_CUSTOMER_ID, value: domain.customer_id }] : []),
      ],
      // A domain name is the customer's public address, not personal data.
      summary: `Domain check of ${domain.domain} (domain ${domain.id}${domain.blog_id ? `, site ${domain.blog_id}` : ''})`,
    });
  }

  /** Starts what the committed transaction wrote (the fast path); what fails here is left to the start relay. */
  async startNow(workflowId: string): Promise<void> {
    for (const out of await this.starts.startPendingOf(workflowId, checksUnavailable)) {
      if (out instanceof Error) logger.warn({ err: out, workflowId }, 'domain check not started yet; the start relay tries again');
    }
  }

  /** Stops a check (terminate: it needs no worker); a check that is gone or finished is fine. */
  async stop(workflowId: string, reason = 'domain deleted'): Promise<void> {
    // The activities check the row before each step, so a check left running stops by itself.
    if (this.temporal.configured) await this.temporal.terminate(workflowId, reason);
  }
}
