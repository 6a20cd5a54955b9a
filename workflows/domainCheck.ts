import { log, proxyActivities, setWorkflowOptions, sleep } from '@temporalio/workflow';
import type { CheckStepInput, CheckStepResult, DomainActivities } from '../activities/domains';

// Activity retries only cover infrastructure trouble (database down); the check tries are
// counted here, with a durable sleep between them.
const { checkDomainDns, checkDomainCertificate } = proxyActivities<DomainActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '2s', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 10 },
});

export interface DomainCheckInput {
  domainId: number;
  /** For the UI only; the activities read the name from the mapping. */
  domain: string;
  intervalSeconds: number;
  maxTries: number;
}

export interface DomainCheckResult {
  /** Final stage, or `stopped` when the mapping went away or was changed by hand. */
  stage: 'done' | 'failed' | 'ssl-failed' | 'stopped';
  dnsTries: number;
  sslTries: number;
  lastError?: string;
}

async function tries(
  input: DomainCheckInput,
  run: (i: CheckStepInput) => Promise<CheckStepResult>,
): Promise<{ result: CheckStepResult; attempts: number }> {
  for (let attempt = 1; ; attempt++) {
    const result = await run({ domainId: input.domainId, attempt, maxTries: input.maxTries, intervalSeconds: input.intervalSeconds });
    if (result.outcome !== 'retry') return { result, attempts: attempt };
    log.info('domain check will retry', { domainId: input.domainId, attempt, error: result.error });
    await sleep(input.intervalSeconds * 1000);
  }
}

/** checking-dns -> checking-ssl-cert -> done, or failed / ssl-failed after maxTries tries. */
export async function domainCheck(input: DomainCheckInput): Promise<DomainCheckResult> {
  const dns = await tries(input, checkDomainDns);
  if (dns.result.outcome !== 'passed') {
    return { stage: dns.result.outcome === 'failed' ? 'failed' : 'stopped', dnsTries: dns.attempts, sslTries: 0, lastError: dns.result.error };
  }
  const ssl = await tries(input, checkDomainCertificate);
  const stage = ssl.result.outcome === 'passed' ? 'done' : ssl.result.outcome === 'failed' ? 'ssl-failed' : 'stopped';
  return { stage, dnsTries: dns.attempts, sslTries: ssl.attempts, lastError: ssl.result.error };
}

// Worker versioning (README "Shipping a workflow change"): a check retries for hours to days, so it
// moves to the current worker version at its next workflow task (AUTO_UPGRADE) and the new code
// must replay its history: every change to what it does goes behind patched().
setWorkflowOptions({ versioningBehavior: 'AUTO_UPGRADE' }, domainCheck);
