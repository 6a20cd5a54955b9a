import { condition, defineSignal, proxyActivities, setHandler, setWorkflowOptions } from '@temporalio/workflow';
import type { ChatActivities, FallbackOutcome } from '../activities/chat';

const { chatFallBackToTicket } = proxyActivities<ChatActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '2s', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 20 },
});

export const assignedSignal = defineSignal('assigned');
export const closedSignal = defineSignal('closed');

export interface ChatFollowUpInput {
  sessionId: number;
  waitSeconds: number;
}

export interface ChatFollowUpResult {
  outcome: 'assigned' | 'closed' | FallbackOutcome['outcome'];
  ticketId: number | null;
}

/**
 * One per waiting session: waits (a durable timer, so it survives restarts of the worker and
 * the server) for an agent to take the session or for it to end; when the time runs out, the
 * activity turns the session into a ticket (it re-checks the session first, so a lost signal
 * cannot convert a session an agent already took).
 */
export async function chatFollowUp(input: ChatFollowUpInput): Promise<ChatFollowUpResult> {
  let assigned = false;
  let closed = false;
  setHandler(assignedSignal, () => {
    assigned = true;
  });
  setHandler(closedSignal, () => {
    closed = true;
  });
  const signalled = await condition(() => assigned || closed, input.waitSeconds * 1000);
  if (signalled) return { outcome: assigned ? 'assigned' : 'closed', ticketId: null };
  const r = await chatFallBackToTicket({ sessionId: input.sessionId });
  return { outcome: r.outcome, ticketId: r.ticketId };
}

// Worker versioning (README "Shipping a workflow change"): a follow-up waits up to 7 days, so it
// moves to the current worker version at its next workflow task (AUTO_UPGRADE) and the new code
// must replay its history: every change to what it does goes behind patched().
setWorkflowOptions({ versioningBehavior: 'AUTO_UPGRADE' }, chatFollowUp);
