import {
  isGrpcDeadlineError,
  isGrpcServiceError,
  WorkflowExecutionAlreadyStartedError,
  WorkflowFailedError,
  WorkflowIdConflictPolicy,
  WorkflowIdReusePolicy,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
  WorkflowUpdateRPCTimeoutOrCancelledError,
  type Client,
  type WorkflowHandle,
  type WorkflowStartOptions,
} from '@temporalio/client';
import type { SearchAttributePair, SignalDefinition, UpdateDefinition, Workflow, WorkflowResultType } from '@temporalio/common';
import client from 'prom-client';
import { DomainError } from '../db/domain-error';
import { logger } from '../logger';
import type { TemporalHandle } from './client';
import { taskQueueFor } from './task-queues';
import type { WorkflowIds } from './workflow-ids';

/** The 503 a feature answers when Temporal cannot be reached (its own error, passed in); `detail` says why. */
export type Unavailable = (detail?: string) => Error;

/** Where the gateway counts (the process's Metrics, src/http/metrics.ts, passed in). */
export interface GatewayMetrics {
  registry: client.Registry;
  workflowsStarted: client.Counter<'workflow_type'>;
}

export interface StartOptions<T extends Workflow> {
  workflowId: string;
  args: Parameters<T>;
  /** What the Temporal UI lists: the business object, never personal data ("Tenant bootstrap, site 42"). */
  summary: string;
  conflictPolicy?: WorkflowIdConflictPolicy;
  reusePolicy?: WorkflowIdReusePolicy;
  memo?: Record<string, unknown>;
  searchAttributes?: SearchAttributePair[];
}

/** Errors that are answers from Temporal, not trouble reaching it: callers handle them. */
function isAnswer(err: unknown): boolean {
  return (
    err instanceof DomainError ||
    err instanceof WorkflowNotFoundError ||
    err instanceof WorkflowFailedError ||
    err instanceof WorkflowExecutionAlreadyStartedError ||
    err instanceof WorkflowUpdateFailedError
  );
}

class NoAnswer extends Error {}
/** The channel reports its connection attempt failed (refused, reset): nothing more will get through for now. */
class ConnectionFailed extends NoAnswer {}

/** `p`, or a rejection once `ms` have passed (the promise itself is left to end on its own deadline). */
function within<T>(ms: number, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new NoAnswer(`no answer within ${ms} ms`)), ms);
  });
  p.catch(() => undefined);
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/** The server did not answer, or could not be reached (gRPC UNAVAILABLE, DEADLINE_EXCEEDED), at any depth of causes. */
function isUnreachable(err: unknown): boolean {
  for (let e = err; e instanceof Error; e = (e as { cause?: unknown }).cause) {
    if (e instanceof NoAnswer || isGrpcDeadlineError(e)) return true;
    if (isGrpcServiceError(e) && (e as { code?: number }).code === GRPC_UNAVAILABLE) return true;
  }
  return false;
}

const GRPC_UNAVAILABLE = 14;
/** Calls of one update whose outcome stayed unknown (no answer in time) before the 503. */
export const UPDATE_TRIES = 3;
const TRANSIENT_FAILURE = 3; // grpc connectivityState: the last connection attempt failed (refused, reset)
const PROBE_DEADLINE_MS = 500;
/** How often a call in flight looks at its channel's state. */
const CHANNEL_WATCH_MS = 50;

/**
 * Every Temporal call the API makes goes through here: "is Temporal configured", a deadline
 * on each call, a circuit, and trouble mapped to the caller's 503.
 *
 * The circuit opens when a call fails to reach the server (deadline passed, connection
 * refused), when the readiness check fails, or when the connection's channel reports its last
 * connection attempt failed; while it is open, calls answer 503 at once and a probe
 * (getSystemInfo) runs every `probeIntervalMs` until the server answers again. So the first
 * request after Temporal goes away waits at most one call deadline, the next ones none.
 *
 * The circuit is per process: with N API replicas each one finds out on its own, within one
 * deadline.
 */
export class TemporalGateway {
  private open = false;
  private lastError = '';
  private probeTimer: NodeJS.Timeout | null = null;
  private closed = false;

  /** Builds every workflow id of this install (its prefix). */
  readonly ids: WorkflowIds;

  constructor(
    readonly handle: TemporalHandle | null,
    private readonly metrics: GatewayMetrics | null,
    private readonly opts: { callTimeoutMs: number; probeIntervalMs?: number; ids: WorkflowIds },
  ) {
    this.ids = opts.ids;
    if (metrics) {
      const self = this;
      // One per registry: an app built again on the same metrics (tests) takes the gauge over.
      metrics.registry.removeSingleMetric('temporal_unreachable');
      new client.Gauge({
        name: 'temporal_unreachable',
        help: '1 while this process holds Temporal for unreachable (its circuit is open), else 0',
        registers: [metrics.registry],
        collect() {
          this.set(self.open ? 1 : 0);
        },
      });
    }
  }

  get configured(): boolean {
    return this.handle !== null;
  }

  /** The connection to use now, or the caller's 503 (not configured, or known unreachable). */
  check(unavailable: Unavailable): TemporalHandle {
    const handle = this.handle;
    if (!handle) throw unavailable('Temporal is not configured.');
    if (!this.open && this.channelFailed(handle)) this.trip('the connection to the server failed');
    if (this.open) throw unavailable(`Temporal did not answer (${this.lastError}); checked again every second.`);
    return handle;
  }

  /**
   * Runs `fn` under the call deadline; failing to reach the server opens the circuit and is the
   * 503. The deadline is also raced here: the client's own connection attempt (a lazy
   * connection) and retries of refused connections are not always bound by it.
   */
  async call<R>(unavailable: Unavailable, fn: (client: Client) => Promise<R>, timeoutMs = this.opts.callTimeoutMs): Promise<R> {
    const handle = this.check(unavailable);
    try {
      return await this.attempt(handle, fn, timeoutMs);
    } catch (err) {
      throw this.failure(err, unavailable);
    }
  }

  /**
   * One call under the deadline, its errors as they are (NoAnswer: the deadline passed, or
   * ConnectionFailed). A refused connection shows in the channel's state within milliseconds,
   * while the client keeps retrying it until the deadline: that is an answer too, not a wait.
   */
  private async attempt<R>(handle: TemporalHandle, fn: (client: Client) => Promise<R>, timeoutMs: number): Promise<R> {
    let watch: NodeJS.Timeout | undefined;
    const refused = new Promise<never>((_, reject) => {
      watch = setInterval(() => {
        if (this.channelFailed(handle)) reject(new ConnectionFailed('the connection to the server failed'));
      }, CHANNEL_WATCH_MS);
    });
    refused.catch(() => undefined);
    try {
      return await Promise.race([within(timeoutMs, handle.connection.withDeadline(Date.now() + timeoutMs, () => fn(handle.client))), refused]);
    } finally {
      clearInterval(watch);
    }
  }

  /** Starts a workflow by its function (the type name is the function's name) or by its type name. */
  async start<T extends Workflow>(workflow: T | string, opts: StartOptions<T>, unavailable: Unavailable, timeoutMs?: number): Promise<WorkflowHandle<T>> {
    const type = typeof workflow === 'string' ? workflow : workflow.name;
    const handle = await this.call(unavailable, (c) => c.workflow.start<T>(workflow, this.startOptions(this.handle!, type, opts)), timeoutMs);
    this.metrics?.workflowsStarted.inc({ workflow_type: type });
    return handle;
  }

  /**
   * Signals the workflow of `opts.workflowId`, starting it first when it is not running (one
   * call, so a signal never falls between a run that ends and the next one).
   */
  async signalWithStart<T extends Workflow, Args extends unknown[]>(workflow: T, opts: StartOptions<T>, signal: SignalDefinition<Args>, signalArgs: Args, unavailable: Unavailable, timeoutMs?: number): Promise<void> {
    await this.call(
      unavailable,
      (c) => c.workflow.signalWithStart(workflow, { ...this.startOptions(this.handle!, workflow.name, opts), signal, signalArgs } as unknown as Parameters<typeof c.workflow.signalWithStart<T, Args>>[1]),
      timeoutMs,
    );
  }

  async signal<Args extends unknown[]>(workflowId: string, signal: SignalDefinition<Args>, args: Args, unavailable: Unavailable): Promise<void> {
    await this.call(unavailable, (c) => c.workflow.getHandle(workflowId).signal(signal, ...args));
  }

  /**
   * Runs an update and waits for its answer (executeUpdate), under the call deadline. The
   * update id makes it idempotent: the server keeps one update per id and run, and a call with
   * an id it has seen answers that update's outcome instead of running it again. So an outcome
   * left unknown (no answer within the deadline: the update may have run) is asked for again
   * with the same id, `tries` calls in all; then the caller's 503 (whose message should say that
   * sending the same request again is safe). The update's own failure (its validator or handler refused) is
   * an answer: WorkflowUpdateFailedError, as is WorkflowNotFoundError (the run has ended).
   */
  async update<Ret, Args extends [unknown, ...unknown[]]>(
    workflowId: string,
    update: UpdateDefinition<Ret, Args>,
    args: Args,
    updateId: string,
    unavailable: Unavailable,
    tries = UPDATE_TRIES,
  ): Promise<Ret> {
    const handle = this.check(unavailable);
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.attempt(handle, (c) => c.workflow.getHandle(workflowId).executeUpdate(update, { args, updateId }), this.opts.callTimeoutMs);
      } catch (err) {
        if (isAnswer(err)) throw err;
        const late = !(err instanceof ConnectionFailed) && (err instanceof NoAnswer || err instanceof WorkflowUpdateRPCTimeoutOrCancelledError || isGrpcDeadlineError(err));
        if (late && attempt < tries) {
          logger.info({ workflowId, updateId, attempt }, 'update: no answer within the deadline, asking again with the same update id');
          continue;
        }
        const message = (err as Error)?.message ?? String(err);
        if (isUnreachable(err)) this.trip(message);
        throw unavailable(late ? `update ${updateId}: no answer within ${tries} calls of ${this.opts.callTimeoutMs} ms` : `update ${updateId}: ${message}`);
      }
    }
  }

  /**
   * The workflow's result if it ends within `waitMs`, else null (still running: not a fault).
   * A failed workflow is WorkflowFailedError.
   */
  async result<T extends Workflow>(workflowId: string, waitMs: number, unavailable: Unavailable): Promise<WorkflowResultType<T> | null> {
    const handle = this.check(unavailable);
    try {
      return await within(waitMs, handle.connection.withDeadline(Date.now() + waitMs, () => handle.client.workflow.getHandle<T>(workflowId).result()));
    } catch (err) {
      if (err instanceof NoAnswer || isGrpcDeadlineError(err)) return null;
      throw this.failure(err, unavailable);
    }
  }

  /** Best effort (a stopped workflow is fine): false when Temporal could not be reached. */
  async terminate(workflowId: string, reason: string): Promise<boolean> {
    try {
      await this.call(
        () => new DomainError('unavailable', 'temporal_unavailable', 'unreachable'),
        (c) => c.workflow.getHandle(workflowId).terminate(reason),
      );
      return true;
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return true;
      logger.warn({ err, workflowId }, 'could not terminate workflow');
      return false;
    }
  }

  /** Reachable, and how many workers poll the task queue (/readyz); the outcome moves the circuit. */
  async readiness(): Promise<{ reachable: boolean; pollers: number; error?: string }> {
    const handle = this.handle;
    if (!handle) return { reachable: false, pollers: 0, error: 'not configured' };
    try {
      const res = await handle.connection.withDeadline(Date.now() + 3000, () =>
        handle.connection.workflowService.describeTaskQueue({ namespace: handle.namespace, taskQueue: { name: handle.taskQueue }, taskQueueType: 1 /* WORKFLOW */ }),
      );
      this.reset();
      return { reachable: true, pollers: res.pollers?.length ?? 0 };
    } catch (err) {
      this.trip((err as Error).message);
      return { reachable: false, pollers: 0, error: (err as Error).message };
    }
  }

  /** Stops the probe (the app is closing). */
  close(): void {
    this.closed = true;
    if (this.probeTimer) clearTimeout(this.probeTimer);
    this.probeTimer = null;
  }

  private startOptions<T extends Workflow>(handle: TemporalHandle, workflowType: string, o: StartOptions<T>): WorkflowStartOptions<T> {
    return {
      taskQueue: taskQueueFor(workflowType, handle.taskQueues),
      workflowId: o.workflowId,
      args: o.args,
      staticSummary: o.summary,
      ...(o.conflictPolicy ? { workflowIdConflictPolicy: o.conflictPolicy } : {}),
      ...(o.reusePolicy ? { workflowIdReusePolicy: o.reusePolicy } : {}),
      ...(o.memo ? { memo: o.memo } : {}),
      ...(o.searchAttributes?.length ? { typedSearchAttributes: o.searchAttributes } : {}),
      // `args` is typed by StartOptions<T>; the SDK's conditional type cannot see that through the spread.
    } as unknown as WorkflowStartOptions<T>;
  }

  /** A call's error as the caller should see it: Temporal's answers pass, trouble is the 503. */
  private failure(err: unknown, unavailable: Unavailable): unknown {
    if (isAnswer(err)) return err;
    const message = (err as Error)?.message ?? String(err);
    if (isUnreachable(err)) this.trip(message);
    return unavailable(message);
  }

  /** The channel's own connection state: a refused or reset connection shows here at once. */
  private channelFailed(handle: TemporalHandle): boolean {
    // `client` is the grpc-js client behind the connection (protected in the SDK's types).
    const grpcClient = (handle.connection as unknown as { client?: { getChannel?: () => { getConnectivityState(tryToConnect: boolean): number } } }).client;
    try {
      return grpcClient?.getChannel?.().getConnectivityState(false) === TRANSIENT_FAILURE;
    } catch {
      return false;
    }
  }

  private trip(reason: string): void {
    this.lastError = reason;
    if (this.open || this.closed) return;
    this.open = true;
    logger.warn({ reason }, 'temporal unreachable: workflow starts answer 503 until it answers again');
    // The first probe at once: a lone failed call on a healthy server closes the circuit again within one round trip.
    this.scheduleProbe(0);
  }

  private reset(): void {
    if (!this.open) return;
    this.open = false;
    if (this.probeTimer) clearTimeout(this.probeTimer);
    this.probeTimer = null;
    logger.info('temporal reachable again');
  }

  private scheduleProbe(delayMs = this.opts.probeIntervalMs ?? 1000): void {
    if (this.closed) return;
    this.probeTimer = setTimeout(() => {
      this.probeTimer = null;
      void this.probe().then((ok) => {
        if (ok) this.reset();
        else if (this.open) this.scheduleProbe();
      });
    }, delayMs);
    this.probeTimer.unref();
  }

  /** One cheap call with a short deadline; a failure opens the circuit. */
  private async probe(): Promise<boolean> {
    const handle = this.handle;
    if (!handle) return false;
    try {
      await within(PROBE_DEADLINE_MS, handle.connection.withDeadline(Date.now() + PROBE_DEADLINE_MS, () => handle.connection.workflowService.getSystemInfo({})));
      return true;
    } catch (err) {
      this.trip(`no answer within ${PROBE_DEADLINE_MS} ms: ${(err as Error).message}`);
      return false;
    }
  }
}
