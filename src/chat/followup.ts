import crypto from 'node:crypto';
import { WorkflowNotFoundError } from '@temporalio/client';
import { assignedSignal, chatFollowUp, closedSignal, type ChatFollowUpInput } from '../../workflows/chatFollowUp';
import { ApiError } from '../http/errors';
import { logger } from '../logger';
import type { TemporalGateway } from '../temporal/gateway';
import { SA_CUSTOMER_ID, SA_SITE_ID } from '../temporal/search-attributes';

// The chat never answers 503 for its follow-up: without Temporal the session becomes a ticket at once.
const unavailable = (detail?: string) => new ApiError(503, 'wu_rest_temporal_unavailable', `The chat follow-up cannot be started${detail ? `: ${detail}` : ''}`);

const SIGNALS = { assigned: assignedSignal, closed: closedSignal } as const;

/**
 * The follow-up of a session waiting for an agent: workflow
 * `<prefix>-chat-follow-up-<session id>-<random>`, kept on the session (signals use the stored
 * id). It waits CHAT_WAIT_BEFORE_TICKET_SECONDS for the `assigned` or `closed` signal, then
 * turns the session into a ticket.
 *
 * Not started through the workflow start outbox: a follow-up that cannot be started now is
 * not worth a later start, the session becomes a ticket at once instead (see start()). A start
 * whose outcome was unknown may leave a follow-up running for a session already made a ticket:
 * its activity re-checks the session before converting it, so it ends without doing anything.
 */
export class ChatFollowUps {
  constructor(
    private readonly temporal: TemporalGateway,
    private readonly waitSeconds: number,
  ) {}

  available(): boolean {
    return this.temporal.configured;
  }

  /**
   * Starts the follow-up; null when Temporal is not reachable (the caller falls back to a
   * ticket at once), which takes at most one call deadline.
   */
  async start(sessionId: number, context: { customerId?: number | null; siteId?: number | null } = {}): Promise<string | null> {
    if (!this.temporal.configured) return null;
    const input: ChatFollowUpInput = { sessionId, waitSeconds: this.waitSeconds };
    try {
      const workflowId = await this.temporal.ids.build('chat-follow-up', sessionId, crypto.randomBytes(4).toString('hex'));
      await this.temporal.start(
        chatFollowUp,
        {
          workflowId,
          args: [input],
          memo: { session_id: sessionId },
          // Found in the Temporal UI with the customer's or the site's other workflows.
          searchAttributes: [
            ...(context.customerId ? [{ key: SA_CUSTOMER_ID, value: context.customerId }] : []),
            ...(context.siteId ? [{ key: SA_SITE_ID, value: context.siteId }] : []),
          ],
          summary: `Chat follow-up, session ${sessionId}`,
        },
        unavailable,
      );
      return workflowId;
    } catch (err) {
      logger.warn({ err, sessionId }, 'could not start the chat follow-up');
      return null;
    }
  }

  /** Tells the follow-up an agent took the session, or that it ended. A finished follow-up is fine. */
  async signal(workflowId: string | null, name: keyof typeof SIGNALS): Promise<void> {
    if (!this.temporal.configured || !workflowId) return;
    try {
      await this.temporal.signal(workflowId, SIGNALS[name], [], unavailable);
    } catch (err) {
      // Not found: the follow-up already ended. Otherwise the activity re-checks the session
      // before converting, so a missed signal does no harm.
      if (!(err instanceof WorkflowNotFoundError)) logger.warn({ err, workflowId }, 'could not signal the chat follow-up');
    }
  }
}
