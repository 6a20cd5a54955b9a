import { Client, Connection } from '@temporalio/client';
import { ApiError } from '../http/errors';

export interface TemporalHandle {
  connection: Connection;
  client: Client;
  namespace: string;
  taskQueue: string;
}

export async function connectTemporal(address: string, namespace: string, taskQueue: string): Promise<TemporalHandle> {
  const connection = await Connection.connect({ address, connectTimeout: '10s' });
  const client = new Client({ connection, namespace });
  return { connection, client, namespace, taskQueue };
}

/**
 * 503 wu_rest_temporal_unavailable: the workflow service could not be reached. `what` says
 * what could not be done, `advice` what else the caller should know; `detail` is what the
 * client library said.
 */
export function temporalUnavailable(what: string, detail?: string, advice = ''): ApiError {
  return new ApiError(503, 'wu_rest_temporal_unavailable', `${what} (the workflow service is unreachable). Try again later.${advice ? ` ${advice}` : ''}`, detail ? { detail } : {});
}
