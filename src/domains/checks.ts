import { WorkflowIdConflictPolicy } from '@temporalio/client';
import type { Config } from '../config';
import { ApiError } from '../http/errors';
import type { TemporalGateway } from '../temporal/gateway';
import { domainCheck, type DomainCheckInput } from '../../workflows/domainCheck';
import { SA_CUSTOMER_ID, SA_SITE_ID } from '../../workflows/search-attributes';

export function domainCheckWorkflowId(domainId: number): string {
  return `domain-check-${domainId}`;
}

export function checksUnavailable(detail?: string): ApiError {
  return new ApiError(
    503,
    'wu_rest_domain_checks_unavailable',
    'Domain checks cannot be started right now (the workflow service is unreachable); nothing was changed. Try again later, or create the mapping with stage domain-mapping.',
    detail ? { detail } : {},
  );
}

/** Starts and stops the durable DNS/TLS check of a domain (workflow `domain-check-<id>`). */
export class DomainChecks {
  constructor(
    private readonly temporal: TemporalGateway,
    private readonly config: Pick<Config, 'DOMAIN_CHECK_INTERVAL_SECONDS' | 'DOMAIN_CHECK_MAX_TRIES'>,
  ) {}

  /** 503 at once when Temporal is not configured or known unreachable (before anything is written). */
  assertAvailable(): void {
    this.temporal.check(checksUnavailable);
  }

  /** (Re)starts the check: a running check of the same domain is replaced. */
  async start(domain: { id: number; domain: string; blog_id?: number | null; customer_id?: number | null }): Promise<string> {
    const workflowId = domainCheckWorkflowId(domain.id);
    const input: DomainCheckInput = {
      domainId: domain.id,
      domain: domain.domain,
      intervalSeconds: this.config.DOMAIN_CHECK_INTERVAL_SECONDS,
      maxTries: this.config.DOMAIN_CHECK_MAX_TRIES,
    };
    await this.temporal.start(
      domainCheck,
      {
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
      },
      checksUnavailable,
    );
    return workflowId;
  }

  /** Stops a check (terminate: it needs no worker); a check that is gone or finished is fine. */
  async stop(workflowId: string, reason = 'domain deleted'): Promise<void> {
    // The activities check the row before each step, so a check left running stops by itself.
    if (this.temporal.configured) await this.temporal.terminate(workflowId, reason);
  }
}
