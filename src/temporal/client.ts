import { Client, Connection } from '@temporalio/client';
import { bulkQueueOf, type TaskQueues } from './task-queues';

export interface TemporalHandle {
  connection: Connection;
  client: Client;
  namespace: string;
  /** The interactive queue (TEMPORAL_TASK_QUEUE): /readyz counts its pollers. */
  taskQueue: string;
  /** Both queues; a start goes to its workflow type's (src/temporal/task-queues.ts). */
  taskQueues: TaskQueues;
}

/**
 * The channel reconnects by itself after the server went away; its backoff between attempts is
 * capped at 5 s (gRPC's default grows to 120 s), so a server back after a long outage is seen
 * within seconds.
 */
export const RECONNECT_BACKOFF = { 'grpc.initial_reconnect_backoff_ms': 500, 'grpc.max_reconnect_backoff_ms': 5000 };

/** Connected now: fails when the server cannot be reached (tests, tools). `bulkTaskQueue`: TEMPORAL_BULK_TASK_QUEUE (default `<taskQueue>-bulk`). */
export async function connectTemporal(address: string, namespace: string, taskQueue: string, bulkTaskQueue = bulkQueueOf(taskQueue)): Promise<TemporalHandle> {
  const connection = await Connection.connect({ address, connectTimeout: '10s', channelArgs: RECONNECT_BACKOFF });
  const client = new Client({ connection, namespace });
  return { connection, client, namespace, taskQueue, taskQueues: { interactive: taskQueue, bulk: bulkTaskQueue } };
}

/**
 * Connected on first use (Connection.lazy): the API starts while Temporal is down; its first
 * calls (and /readyz) find out, the gateway's circuit answers 503 meanwhile, and the channel
 * connects once the server is there.
 */
export function lazyTemporal(address: string, namespace: string, taskQueue: string, bulkTaskQueue = bulkQueueOf(taskQueue)): TemporalHandle {
  const connection = Connection.lazy({ address, connectTimeout: '10s', channelArgs: RECONNECT_BACKOFF });
  const client = new Client({ connection, namespace });
  return { connection, client, namespace, taskQueue, taskQueues: { interactive: taskQueue, bulk: bulkTaskQueue } };
}
