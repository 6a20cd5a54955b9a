import { WorkflowIdConflictPolicy, WorkflowNotFoundError } from '@temporalio/client';
import type { Config } from '../config';
import { ApiError } from '../http/errors';
import type { Metrics } from '../http/metrics';
import { logger } from '../logger';
import type { TemporalHandle } from '../temporal/client';
import type { domainCheck, DomainCheckInput } from '../../workflows/domainCheck';
import { SA_CUSTOMER_ID, SA_SITE_ID } from '../../workflows/register-search-attributes';

export const DOMAIN_CHECK_WORKFLOW = 'domainCheck';

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
    private readonly temporal: TemporalHandle | null,
    private readonly metrics: Metrics,
    private readonly config: Pick<Config, 'DOMAIN_CHECK_INTERVAL_SECONDS' | 'DOMAIN_CHECK_MAX_TRIES'>,
  ) {}

  assertAvailable(): void {
    if (!this.temporal) throw checksUnavailable('Temporal is not configured.');
  }

  /** (Re)starts the check: a running check of the same domain is replaced. */
  async start(domain: { id: number; domain: string; blog_id?: number | null; customer_id?: number | null }): Promise<string> {
    this.assertAvailable();
    const t = this.temporal!;
    const workflowId = domainCheckWorkflowId(domain.id);
    const input: DomainCheckInput = {
      domainId: domain.id,
      domain: domain.domain,
      intervalSeconds: this.config.DOMAIN_CHECK_INTERVAL_SECONDS,
      maxTries: this.config.DOMAIN_CHECK_MAX_TRIES,
    };
    await t.client.workflow.start<typeof domainCheck>(DOMAIN_CHECK_WORKFLOW, {
      taskQueue: t.taskQueue,
      workflowId,
      args: [input],
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.TERMINATE_EXISTING,
      memo: { domain: domain.domain, blog_id: domain.blog_id ?? null, customer_id: domain.customer_id ?? null },
      typedSearchAttributes: [
        ...(domain.blog_id ? [{ key: SA_SITE_ID, value: domain.blog_id }] : []),
        ...(domain.customer_id ? [{ key: SA_CUSTOMER_ID, value: domain.customer_id }] : []),
      ],
      staticSummary: `domain check of ${domain.domain}`,
    });
    this.metrics.workflowsStarted.inc({ workflow_type: DOMAIN_CHECK_WORKFLOW });
    return workflowId;
  }

  /** Stops a check (terminate: it needs no worker); a check that is gone or finished is fine. */
  async stop(workflowId: string, reason = 'domain deleted'): Promise<void> {
    if (!this.temporal) return;
    try {
      await this.temporal.client.workflow.getHandle(workflowId).terminate(reason);
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return;
      // The activities check the row before each step, so a check left running stops by itself.
      logger.warn({ err, workflowId }, 'could not stop domain check');
    }
  }
}
