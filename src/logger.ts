import pino from 'pino';

const REDACT = [
  'api_secret',
  'api_key',
  'password',
  'req.headers.authorization',
  '*.api_secret',
  '*.password',
  '*.api_key',
  'req.headers.authorization',
];

/**
 * Lines go to stdout asynchronously and in batches: they are gathered until 4 KiB are waiting
 * (some 20 access-log lines) or 100 ms have passed, then written in one write(2). One write per
 * line (or per few lines, while a write was in flight) cost the API 6-9% of its CPU under load
 * with the access log on (bench/run.ts profiles, issue 14). A line reaches stdout at most 100 ms
 * after it was logged; pino flushes what is left when the process exits (a process killed with
 * SIGKILL loses at most those 100 ms of lines).
 */
const stdout = pino.destination({ dest: 1, sync: false, minLength: 4096, periodicFlush: 100 });
const base = { service: 'hostflow' };

export function createLogger(level: string) {
  return pino({ level, base, redact: { paths: REDACT, censor: '[redacted]' }, timestamp: pino.stdTimeFunctions.isoTime }, stdout);
}

export type Logger = pino.Logger;

export let logger: Logger = createLogger(process.env.LOG_LEVEL || 'info');

/**
 * The access log (a line per request, at info): its fields are fixed (request id, method, path
 * without the query, status, duration), with nothing to redact, so it skips the redaction
 * every other line goes through (which allocated about 5% of a request's garbage).
 */
export const accessLogger: Logger = pino({ level: logger.level, base, timestamp: pino.stdTimeFunctions.isoTime }, stdout);

export function setLogLevel(level: string): void {
  logger.level = level;
  accessLogger.level = level;
}
