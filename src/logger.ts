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

export function createLogger(level: string) {
  return pino({
    level,
    base: { service: 'hostflow' },
    redact: { paths: REDACT, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  });
}

export type Logger = pino.Logger;

export let logger: Logger = createLogger(process.env.LOG_LEVEL || 'info');

export function setLogLevel(level: string): void {
  logger.level = level;
}
