/**
 * The workflows' own logic, against activities written here, on the time-skipping test server:
 * saga order and compensation, signals against timers, retry counting, and waits of days that
 * pass in skipped time. The end-to-end suites run the same workflows with the real activities.
 */
import { Context } from '@temporalio/activity';
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { chatFollowUp, closedSignal, assignedSignal } from '../workflows/chatFollowUp';
import { domainCheck } from '../workflows/domainCheck';
import { register, REGISTER_FAILURES } from '../workflows/register';
import { TENANT_OPERATION_FAILED, tenantTeardown, tenantVerifyWorkflow } from '../workflows/tenants';
import { webhookDelivery } from '../workflows/webhookDelivery';
import { createTimeSkippingEnv, withWorker } from './workflow-env';

jest.setTimeout(120_000);

let env: TestWorkflowEnvironment;
beforeAll(async () => {
  env = await createTimeSkippingEnv();
});
afterAll(async () => {
  await env?.teardown();
});

const ids = { customer_id: 1, membership_id: 2, payment_id: 3, site_id: 4 };
const refused = (message: string) => ApplicationFailure.create({ type: REGISTER_FAILURES.refused, message, nonRetryable: true });
let n = 0;
const wid = (name: string) => `${name}-${process.pid}-${++n}`;

/** The failure type at the bottom of a workflow's failure. */
function failureType(err: unknown): string | undefined {
  expect(err).toBeInstanceOf(WorkflowFailedError);
  return ((err as WorkflowFailedError).cause as ApplicationFailure | undefined)?.type ?? undefined;
}

describe('register (saga)', () => {
  const base = {
    commitRegistration: async () => ({ status: 'committed', ids, provision: true }),
    giveUpRegistration: async () => ({ status: 'abandoned' }),
    provisionSite: async () => undefined,
    undoSiteProvisioning: async () => undefined,
    recordProvisioning: async () => undefined,
  };

  test('committed, then the site provisioned and recorded', async () => {
    await withWorker(env, base, async (taskQueue, calls) => {
      const r = await env.client.workflow.execute(register, { taskQueue, workflowId: wid('reg'), args: [{ registrationId: 7 }] });
      expect(r).toEqual({ status: 'completed', ids });
      expect(calls.map((c) => c[0])).toEqual(['commitRegistration', 'provisionSite', 'recordProvisioning']);
      expect(calls[2]).toEqual(['recordProvisioning', 7, 'done']);
    });
  });

  test('a refused provisioning step is undone, recorded as compensated, and the workflow fails', async () => {
    await withWorker(
      env,
      {
        ...base,
        provisionSite: async () => {
          throw refused('no template');
        },
      },
      async (taskQueue, calls) => {
        const err = await env.client.workflow.execute(register, { taskQueue, workflowId: wid('reg'), args: [{ registrationId: 8 }] }).catch((e: unknown) => e);
        expect(failureType(err)).toBe(REGISTER_FAILURES.provisioningFailed);
        // Not retried (non-retryable), undone once, then the outcome recorded.
        expect(calls.map((c) => c[0])).toEqual(['commitRegistration', 'provisionSite', 'undoSiteProvisioning', 'recordProvisioning']);
        expect(calls[3]).toEqual(['recordProvisioning', 8, 'compensated']);
      },
    );
  });

  test('a compensation that cannot finish is recorded as such and fails the workflow as CompensationFailed', async () => {
    await withWorker(
      env,
      {
        ...base,
        provisionSite: async () => {
          throw refused('disk full');
        },
        undoSiteProvisioning: async () => {
          throw refused('cannot remove');
        },
      },
      async (taskQueue, calls) => {
        const err = await env.client.workflow.execute(register, { taskQueue, workflowId: wid('reg'), args: [{ registrationId: 9 }] }).catch((e: unknown) => e);
        expect(failureType(err)).toBe(REGISTER_FAILURES.compensationFailed);
        expect(calls.slice(-1)[0]).toEqual(['recordProvisioning', 9, 'compensation_failed']);
        expect(calls.filter((c) => c[0] === 'recordProvisioning')).toHaveLength(1);
      },
    );
  });

  test('a transaction that keeps failing is given up, and the outcome the row holds decides', async () => {
    let tries = 0;
    await withWorker(
      env,
      {
        ...base,
        commitRegistration: async () => {
          tries++;
          throw new Error('lock timeout');
        },
        giveUpRegistration: async () => ({ status: 'abandoned' }),
      },
      async (taskQueue, calls) => {
        const err = await env.client.workflow.execute(register, { taskQueue, workflowId: wid('reg'), args: [{ registrationId: 10 }] }).catch((e: unknown) => e);
        expect(failureType(err)).toBe(REGISTER_FAILURES.notCommitted);
        // Its retry policy: 6 tries of the local activity, then the bookkeeping step.
        expect(tries).toBe(6);
        expect(calls.slice(-1)[0]).toEqual(['giveUpRegistration', 10]);
        expect(calls.some((c) => c[0] === 'provisionSite')).toBe(false);
      },
    );
  });

  test('a registration refused for its request ends rejected, with nothing provisioned', async () => {
    await withWorker(env, { ...base, commitRegistration: async () => ({ status: 'rejected' }) }, async (taskQueue, calls) => {
      const r = await env.client.workflow.execute(register, { taskQueue, workflowId: wid('reg'), args: [{ registrationId: 11 }] });
      expect(r).toEqual({ status: 'rejected', ids: null });
      expect(calls.map((c) => c[0])).toEqual(['commitRegistration']);
    });
  });
});

describe('chatFollowUp', () => {
  const ticket = { chatFallBackToTicket: async () => ({ outcome: 'ticket', ticketId: 41 }) };

  test('nobody answers for 7 days: the session falls back to a ticket once the timer fires', async () => {
    await withWorker(env, ticket, async (taskQueue, calls) => {
      const before = await env.currentTimeMs();
      const r = await env.client.workflow.execute(chatFollowUp, { taskQueue, workflowId: wid('chat'), args: [{ sessionId: 5, waitSeconds: 7 * 86_400 }] });
      expect(r).toEqual({ outcome: 'ticket', ticketId: 41 });
      expect(calls).toEqual([['chatFallBackToTicket', { sessionId: 5 }]]);
      expect((await env.currentTimeMs()) - before).toBeGreaterThanOrEqual(7 * 86_400_000);
    });
  });

  test.each([
    ['assigned', assignedSignal],
    ['closed', closedSignal],
  ] as const)('%s before the time runs out: no ticket', async (outcome, signal) => {
    await withWorker(env, ticket, async (taskQueue, calls) => {
      const handle = await env.client.workflow.start(chatFollowUp, { taskQueue, workflowId: wid('chat'), args: [{ sessionId: 6, waitSeconds: 3600 }] });
      await handle.signal(signal);
      expect(await handle.result()).toEqual({ outcome, ticketId: null });
      expect(calls).toEqual([]);
    });
  });
});

describe('domainCheck', () => {
  const input = (maxTries: number) => ({ domainId: 3, domain: 'shop.example.com', intervalSeconds: 6 * 3600, maxTries });

  test('DNS passes on its third try (hours apart, in skipped time), then the certificate: done', async () => {
    let dns = 0;
    await withWorker(
      env,
      {
        checkDomainDns: async () => (++dns < 3 ? { outcome: 'retry', error: 'NXDOMAIN' } : { outcome: 'passed' }),
        checkDomainCertificate: async () => ({ outcome: 'passed' }),
      },
      async (taskQueue, calls) => {
        const before = await env.currentTimeMs();
        const r = await env.client.workflow.execute(domainCheck, { taskQueue, workflowId: wid('dom'), args: [input(5)] });
        expect(r).toEqual({ stage: 'done', dnsTries: 3, sslTries: 1 });
        expect(calls.map((c) => [c[0], (c[1] as { attempt: number }).attempt])).toEqual([
          ['checkDomainDns', 1],
          ['checkDomainDns', 2],
          ['checkDomainDns', 3],
          ['checkDomainCertificate', 1],
        ]);
        expect((await env.currentTimeMs()) - before).toBeGreaterThanOrEqual(2 * 6 * 3_600_000);
      },
    );
  });

  test('the certificate fails for good: ssl-failed, with the last error', async () => {
    await withWorker(
      env,
      {
        checkDomainDns: async () => ({ outcome: 'passed' }),
        checkDomainCertificate: async ({ attempt, maxTries }: { attempt: number; maxTries: number }) =>
          attempt < maxTries ? { outcome: 'retry', error: `handshake ${attempt}` } : { outcome: 'failed', error: 'no certificate' },
      },
      async (taskQueue, calls) => {
        const r = await env.client.workflow.execute(domainCheck, { taskQueue, workflowId: wid('dom'), args: [input(4)] });
        expect(r).toEqual({ stage: 'ssl-failed', dnsTries: 1, sslTries: 4, lastError: 'no certificate' });
        expect(calls.filter((c) => c[0] === 'checkDomainCertificate')).toHaveLength(4);
      },
    );
  });

  test('the mapping went away while waiting: stopped, no certificate check', async () => {
    let dns = 0;
    await withWorker(
      env,
      {
        checkDomainDns: async () => (++dns === 1 ? { outcome: 'retry', error: 'SERVFAIL' } : { outcome: 'gone' }),
        checkDomainCertificate: async () => ({ outcome: 'passed' }),
      },
      async (taskQueue, calls) => {
        const r = await env.client.workflow.execute(domainCheck, { taskQueue, workflowId: wid('dom'), args: [input(5)] });
        expect(r).toMatchObject({ stage: 'stopped', dnsTries: 2, sslTries: 0 });
        expect(calls.some((c) => c[0] === 'checkDomainCertificate')).toBe(false);
      },
    );
  });
});

describe('tenant workflows: a run that gives up', () => {
  const ok = async () => undefined;
  const teardown = { tenantPullBack: async () => ({ rows: 0 }), tenantDropRole: ok, tenantDropDatabase: ok, tenantRemoveFilesAndRoute: ok, tenantMarkTornDown: ok, tenantMarkFailed: ok };

  test('records the step and reason first, then fails as TenantOperationFailed carrying the result', async () => {
    await withWorker(
      env,
      {
        ...teardown,
        tenantDropDatabase: async () => {
          throw ApplicationFailure.nonRetryable('database host "x" is not configured', 'TenantConfigError');
        },
      },
      async (taskQueue, calls) => {
        const err = await env.client.workflow.execute(tenantTeardown, { taskQueue, workflowId: wid('teardown'), args: [{ tenantId: 5, siteId: 6 }] }).catch((e: unknown) => e);
        expect(failureType(err)).toBe(TENANT_OPERATION_FAILED);
        expect((err as WorkflowFailedError).cause).toMatchObject({
          message: 'Tenant teardown failed at step drop_database: database host "x" is not configured',
          nonRetryable: true,
          details: [{ state: 'tearing_down', step: 'drop_database', error: 'database host "x" is not configured' }],
        });
        expect(calls.map((c) => c[0])).toEqual(['tenantPullBack', 'tenantDropRole', 'tenantDropDatabase', 'tenantMarkFailed']);
        expect(calls[3]).toEqual(['tenantMarkFailed', { tenantId: 5, operation: 'teardown', step: 'drop_database', message: 'database host "x" is not configured' }]);
      },
    );
  });

  test('verification that ran and found failing checks completes (an outcome, not a failure)', async () => {
    await withWorker(env, { tenantChecksRunning: ok, tenantVerify: async () => ({ ready: false, results: {} }), tenantMarkFailed: ok }, async (taskQueue, calls) => {
      const r = await env.client.workflow.execute(tenantVerifyWorkflow, { taskQueue, workflowId: wid('verify'), args: [{ tenantId: 5, siteId: 6 }] });
      expect(r).toEqual({ state: 'not_ready' });
      expect(calls.map((c) => c[0])).toEqual(['tenantChecksRunning', 'tenantVerify']);
    });
  });
});

describe('webhookDelivery (per-object order, backoff, give-up)', () => {
  const retry = { initialMs: 30_000, maxMs: 3_600_000, forMs: 72 * 3_600_000 };
  const input = (queued: { deliveryId: number; eventId: number }[]) => ({ webhookId: 1, objectType: 'customer', objectId: 9, retry, queued });

  test("one at a time in event-id order: a delivery that retries holds the object's later ones back", async () => {
    let tries = 0;
    await withWorker(
      env,
      {
        attemptWebhookDelivery: async ({ deliveryId }: { deliveryId: number }) => (deliveryId === 11 && ++tries < 3 ? 'retry' : 'delivered'),
        giveUpWebhookDelivery: async () => undefined,
      },
      async (taskQueue, calls) => {
        const r = await env.client.workflow.execute(webhookDelivery, { taskQueue, workflowId: wid('wh'), args: [input([{ deliveryId: 12, eventId: 8 }, { deliveryId: 11, eventId: 7 }])] });
        expect(r).toEqual({ delivered: 2 });
        expect(calls.map((c) => (c[1] as { deliveryId: number }).deliveryId)).toEqual([11, 11, 11, 12]);
      },
    );
  });

  test('a receiver that never answers 2xx: attempts back off (doubling, jittered, at most maxMs) for 3 days, then the delivery is given up', async () => {
    const at: number[] = [];
    await withWorker(
      env,
      {
        attemptWebhookDelivery: async () => {
          // The server's (skipped) time of the attempt.
          at.push(Context.current().info.currentAttemptScheduledTimestampMs);
          return 'retry';
        },
        giveUpWebhookDelivery: async () => undefined,
      },
      async (taskQueue, calls) => {
        await env.client.workflow.execute(webhookDelivery, { taskQueue, workflowId: wid('wh'), args: [input([{ deliveryId: 1, eventId: 1 }])] });
        expect(calls[calls.length - 1]).toEqual(['giveUpWebhookDelivery', { deliveryId: 1 }]);
        const gaps = at.slice(1).map((t, i) => t - at[i]);
        // 15-30 s, then growing up to an hour (half of each delay random); 72 hours in all.
        expect(gaps[0]).toBeGreaterThanOrEqual(14_000);
        expect(gaps[0]).toBeLessThan(31_000);
        expect(Math.max(...gaps)).toBeLessThan(3_600_000 + 5_000);
        expect(gaps.slice(-5).every((g) => g >= 1_800_000 - 5_000)).toBe(true);
        expect(at[at.length - 1] - at[0]).toBeLessThan(72 * 3_600_000);
        expect(at[at.length - 1] - at[0]).toBeGreaterThan(70 * 3_600_000);
      },
    );
  });
});
