import crypto from 'node:crypto';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { Metrics } from '../http/metrics';
import { logger } from '../logger';
import type { TemporalHandle } from '../temporal/client';
import type { chatFollowUp, ChatFollowUpInput } from '../../workflows/chatFollowUp';
import { SA_CUSTOMER_ID, SA_SITE_ID } from '../../workflows/register-search-attributes';

export const CHAT_FOLLOW_UP_WORKFLOW = 'chatFollowUp';

/**
 * The follow-up of a session waiting for an agent: workflow `chat-follow-up-<session id>-<random>`
 * (the random part keeps ids unique across databases sharing one Temporal namespace). It waits
 * CHAT_WAIT_BEFORE_TICKET_SECONDS for the `assigned` or `closed` signal, then turns the session
 * into a ticket.
 */
export class ChatFollowUps {
  constructor(
    private readonly temporal: TemporalHandle | null,
    private readonly metrics: Metrics,
    private readonly waitSeconds: number,
  ) {}

  available(): boolean {
    return this.temporal !== null;
  }

  /** Starts the follow-up; null when Temporal is not reachable (the caller falls back at once). */
  async start(sessionId: number, context: { customerId?: number | null; siteId?: number | null } = {}): Promise<string | null> {
    if (!this.temporal) return null;
    const workflowId = `chat-follow-up-${sessionId}-${crypto.randomBytes(4).toString('hex')}`;
    const input: ChatFollowUpInput = { sessionId, waitSeconds: this.waitSeconds };
    try {
      await this.temporal.client.workflow.start<typeof chatFollowUp>(CHAT_FOLLOW_UP_WORKFLOW, {
        taskQueue: this.temporal.taskQueue,
        workflowId,
        args: [input],
        memo: { session_id: sessionId },
        // Found in the Temporal UI with the customer's or the site's other workflows.
        typedSearchAttributes: [
          ...(context.customerId ? [{ key: SA_CUSTOMER_ID, value: context.customerId }] : []),
          ...(context.siteId ? [{ key: SA_SITE_ID, value: context.siteId }] : []),
        ],
        staticSummary: `chat follow-up of session ${sessionId}`,
      });
      this.metrics.workflowsStarted.inc({ workflow_type: CHAT_FOLLOW_UP_WORKFLOW });
      return workflowId;
    } catch (err) {
      logger.warn({ err, sessionId }, 'could not start the chat follow-up');
      return null;
    }
  }

  /** Tells the follow-up an agent took the session, or that it ended. A finished follow-up is fine. */
  async signal(workflowId: string | null, name: 'assigned' | 'closed'): Promise<void> {
    if (!this.temporal || !workflowId) return;
    try {
      await this.temporal.client.workflow.getHandle(workflowId).signal(name);
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return;
      // The activity re-checks the session before converting, so a missed signal does no harm.
      logger.warn({ err, workflowId }, 'could not signal the chat follow-up');
    }
  }
}
