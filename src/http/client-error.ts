import { maxHeaderSize, STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';

/**
 * Node answers requests it cannot parse (a URL or headers over 16 KiB, a malformed request
 * line or header) on its own, with an empty body. This answers them in the contract's error
 * shape instead, then closes the connection (what follows on it cannot be trusted).
 */
export function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (err.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent) {
    socket.destroy();
    return;
  }
  let status = 400;
  let code = 'rest_bad_request';
  let message = 'The request could not be parsed as HTTP (a malformed request line or header).';
  if (err.code === 'HPE_HEADER_OVERFLOW') {
    status = 431;
    code = 'rest_request_header_too_large';
    message =
      `The URL and headers together exceed ${maxHeaderSize / 1024} KiB. Send long inputs in a body ` +
      '(e.g. POST /translations/check/batch), and split long filters such as id__in (at most 100 values each) over several requests.';
  } else if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    status = 408;
    code = 'rest_request_timeout';
    message = 'The request was not received in time.';
  }
  const body = JSON.stringify({ code, message, data: { status } });
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n` +
      'Content-Type: application/json; charset=utf-8\r\n' +
      `Content-Length: ${Buffer.byteLength(body)}\r\n` +
      'Cache-Control: no-store\r\n' +
      'Connection: close\r\n\r\n' +
      body,
  );
}
