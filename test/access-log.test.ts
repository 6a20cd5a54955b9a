import { Writable } from 'node:stream';
import pino from 'pino';
import { accessLogLine } from '../src/logger';

/** The access log's line is built by hand (src/logger.ts); it must be what pino writes for the same fields. */
describe('access log line', () => {
  const pinoLine = (time: number, fields: object): Promise<string> =>
    new Promise((resolve) => {
      const sink = new Writable({
        write(chunk: Buffer, _enc, done) {
          resolve(chunk.toString());
          done();
        },
      });
      // The access logger's options (src/logger.ts), with the clock fixed.
      const log = pino({ level: 'info', base: { service: 'hostflow' }, timestamp: () => `,"time":"${new Date(time).toISOString()}"` }, sink);
      log.info(fields, 'request');
    });

  test.each([
    ['a plain request', { request_id: 'c0ffee00-1111-4222-8333-444455556666', method: 'GET', path: '/wp-json/wu/v2/customers/42', status: 200, duration_ms: 1.234567 }],
    ['quotes, backslashes and control characters', { request_id: 'id-"x"\\y', method: 'PATCH', path: '/wp-json/wu/v2/a"b\\c\u0001d\ne', status: 404, duration_ms: 0 }],
    ['non-ASCII and a long path', { request_id: 'r', method: 'DELETE', path: `/wp-json/wu/v2/${'é☃'.repeat(80)}`, status: 500, duration_ms: 12345.5 }],
  ])('%s: the same bytes as pino', async (_name, fields) => {
    const time = Date.UTC(2026, 10, 27, 12, 0, 0, 123);
    expect(accessLogLine(time, fields)).toBe(await pinoLine(time, fields));
  });
});
