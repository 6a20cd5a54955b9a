import type { NativeConnection, WorkerDeploymentOptions } from '@temporalio/worker';
import type { Config } from '../config';
import { logger } from '../logger';

/**
 * Worker versioning (Temporal worker deployments). Every worker registers as version
 * `<TEMPORAL_DEPLOYMENT_NAME>.<build id>`, the build id being the workflow bundle's SHA-256
 * (src/temporal/bundle.ts). New runs go to the deployment's current version; a run of a
 * PINNED workflow type stays on the version it started on until it ends, one of an
 * AUTO_UPGRADE type moves to the current version at its next workflow task (so its code must
 * replay the old history: patched()). Each workflow file states its type's behaviour with
 * setWorkflowOptions; a type that does not falls back to PINNED (the safe side: its runs never
 * meet code they did not start with).
 */
export type SetCurrentMode = Config['WORKER_VERSIONING_SET_CURRENT'];

export interface DeploymentVersion {
  deploymentName: string;
  buildId: string;
}

export function workerDeploymentOptions(version: DeploymentVersion): WorkerDeploymentOptions {
  return { useWorkerVersioning: true, version, defaultVersioningBehavior: 'PINNED' };
}

/** Backoff of the attempts to make a version current: 250 ms, doubling up to 5 s. */
export const PROMOTE_RETRY = { firstMs: 250, maxMs: 5000, callTimeoutMs: 5000 };

export type PromoteOutcome =
  /** The version is current and the deployment's task queues know it: made so now (previous: the build id that was current, if any), or already was (previous: its own). */
  | { state: 'current'; previous: string | null }
  /** Left as it was, as the mode asks: another version is current (`if-unset`), or `never`. */
  | { state: 'left'; current: string | null }
  /** The worker stopped first. */
  | { state: 'stopped' };

const NOT_FOUND = 5;
/** temporal.api.enums.v1.RoutingConfigUpdateState.ROUTING_CONFIG_UPDATE_STATE_IN_PROGRESS */
const ROUTING_UPDATE_IN_PROGRESS = 1;

/**
 * Makes `version` the deployment's current version as `mode` says, trying again (PROMOTE_RETRY)
 * until it is done or `stopped` resolves: the server knows a version only once one of its
 * workers has polled (NOT_FOUND before), and refuses a version that does not yet poll every
 * task queue the current one polls (FAILED_PRECONDITION), so a worker started at the same
 * moment as its siblings simply waits for them. Done once the server has told the task queues
 * (routingConfigUpdateState no longer IN_PROGRESS). Every attempt reads the deployment first and
 * passes its conflict token, so that with `if-unset` two first workers of different versions
 * cannot both win.
 */
export async function promoteVersion(opts: {
  connection: () => NativeConnection;
  namespace: string;
  version: DeploymentVersion;
  mode: SetCurrentMode;
  stopped: Promise<unknown>;
  identity?: string;
}): Promise<PromoteOutcome> {
  const { namespace, version, mode } = opts;
  const name = `${version.deploymentName}.${version.buildId}`;
  if (mode === 'never') {
    logger.info({ version: name }, 'worker version registered; WORKER_VERSIONING_SET_CURRENT=never: the deploy makes it current');
    return { state: 'left', current: null };
  }
  let stopped = false;
  void opts.stopped.then(() => (stopped = true));
  const sleep = (ms: number) => Promise.race([new Promise<void>((r) => setTimeout(r, ms).unref()), opts.stopped]);
  let delay = PROMOTE_RETRY.firstMs;
  // Set when this worker made the version current: the build id current before.
  let made: { previous: string | null } | undefined;
  for (let attempt = 1; !stopped; attempt++) {
    try {
      const connection = opts.connection();
      const call = <T>(fn: () => Promise<T>) => connection.withDeadline(Date.now() + PROMOTE_RETRY.callTimeoutMs, fn);
      const described = await call(() => connection.workflowService.describeWorkerDeployment({ namespace, deploymentName: version.deploymentName }));
      const info = described.workerDeploymentInfo;
      const current = info?.routingConfig?.currentDeploymentVersion?.buildId || null;
      if (current === version.buildId) {
        // The server tells the deployment's task queues in the background (measured: about a
        // second); until it has, their tasks still go to the version before.
        if (info?.routingConfigUpdateState !== ROUTING_UPDATE_IN_PROGRESS) {
          if (made) logger.info({ version: name, previous: made.previous && `${version.deploymentName}.${made.previous}` }, 'worker version made current');
          else logger.info({ version: name }, 'worker version is current');
          return { state: 'current', previous: made ? made.previous : current };
        }
        await sleep(PROMOTE_RETRY.firstMs);
        continue;
      }
      if (made) {
        // Another worker made its own version current meanwhile (WORKER_VERSIONING_SET_CURRENT=always on both).
        logger.warn({ version: name, current: current && `${version.deploymentName}.${current}` }, 'worker version was made current, then another one was');
        return { state: 'left', current };
      }
      if (mode === 'if-unset' && current !== null) {
        logger.info({ version: name, current: `${version.deploymentName}.${current}` }, 'worker version registered, not made current: the deployment has a current version (WORKER_VERSIONING_SET_CURRENT=if-unset)');
        return { state: 'left', current };
      }
      const registered = (info?.versionSummaries ?? []).some((v) => v.deploymentVersion?.buildId === version.buildId);
      if (registered) {
        await call(() =>
          connection.workflowService.setWorkerDeploymentCurrentVersion({
            namespace,
            deploymentName: version.deploymentName,
            buildId: version.buildId,
            conflictToken: described.conflictToken,
            identity: opts.identity ?? `hostflow-worker@${process.pid}`,
          }),
        );
        made = { previous: current };
        continue;
      }
    } catch (err) {
      // NOT_FOUND: no worker of the deployment has polled yet (it is being registered).
      const code = (err as { code?: number }).code;
      if (code !== NOT_FOUND && (attempt === 1 || attempt % 10 === 0)) {
        logger.warn({ version: name, attempt, err: (err as Error).message }, 'worker version not made current yet; trying again');
      }
    }
    await sleep(delay);
    delay = Math.min(delay * 2, PROMOTE_RETRY.maxMs);
  }
  return { state: 'stopped' };
}
