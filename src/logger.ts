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

/** What the access log says of a request. */
export interface RequestLine {
  request_id: string;
  method: string;
  /** Without the query string (it may carry credentials). */
  path: string;
  status: number;
  duration_ms: number;
}

/**
 * The access log's line, exactly as `accessLogger.info(fields, 'request')` writes it (test/
 * access-log.test.ts compares them), built as one string: pino's generic path (the walk over
 * the object's properties, the time and level lookups, the child bindings) was 1.5% of a GET
 * one's CPU and 5% of what it allocated (issue 14). `time`: milliseconds since the epoch.
 */
export function accessLogLine(time: number, f: RequestLine): string {
  const duration = Number.isFinite(f.duration_ms) ? f.duration_ms : null;
  return `{"level":30,"time":"${new Date(time).toISOString()}","service":"hostflow","request_id":${JSON.stringify(f.request_id)},"method":${JSON.stringify(f.method)},"path":${JSON.stringify(f.path)},"status":${f.status},"duration_ms":${duration},"msg":"request"}\n`;
}

/** Writes a request's access-log line (when the access log's level lets info through) with the other lines. */
export function logRequest(f: RequestLine): void {
  if (accessLogger.isLevelEnabled('info')) stdout.write(accessLogLine(Date.now(), f));
}

