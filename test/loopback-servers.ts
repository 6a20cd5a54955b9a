/**
 * Servers of the domain-check tests, on 127.0.0.1 and free ports: a tiny UDP DNS responder
 * and a TLS server with a self-signed certificate made with the openssl CLI.
 */
import { execFileSync } from 'node:child_process';
import dgram from 'node:dgram';
import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';

const TYPE_A = 1;

function readName(msg: Buffer, offset: number): { name: string; end: number } {
  const labels: string[] = [];
  let i = offset;
  while (msg[i] !== 0) {
    const len = msg[i];
    labels.push(msg.subarray(i + 1, i + 1 + len).toString('ascii'));
    i += 1 + len;
  }
  return { name: labels.join('.').toLowerCase(), end: i + 1 };
}

export interface DnsServer {
  address: string;
  /** Names asked, in order (type A or AAAA). */
  queries: string[];
  close(): Promise<void>;
}

/**
 * Answers A `127.0.0.1` for the names in `records` (or the address `elsewhere` gives a name),
 * NOERROR with no answer for their AAAA, SERVFAIL for the names in `servfail`, NXDOMAIN for
 * every other name, and nothing at all for the names in `silent` (the client times out).
 */
export async function startDnsServer(
  records: string[],
  silent: string[] = [],
  more: { servfail?: string[]; elsewhere?: Record<string, string> } = {},
): Promise<DnsServer> {
  const addressOf = new Map<string, string>([...records.map((r): [string, string] => [r.toLowerCase(), '127.0.0.1']), ...Object.entries(more.elsewhere ?? {})]);
  const known = new Set(addressOf.keys());
  const quiet = new Set(silent.map((r) => r.toLowerCase()));
  const failing = new Set((more.servfail ?? []).map((r) => r.toLowerCase()));
  const queries: string[] = [];
  const socket = dgram.createSocket('udp4');
  socket.on('message', (msg, rinfo) => {
    if (msg.length < 12) return;
    const { name, end } = readName(msg, 12);
    const qtype = msg.readUInt16BE(end);
    queries.push(name);
    if (quiet.has(name)) return;
    const question = msg.subarray(12, end + 4);
    const answer = known.has(name) && qtype === TYPE_A;
    const header = Buffer.alloc(12);
    header.writeUInt16BE(msg.readUInt16BE(0), 0); // id
    const rd = msg.readUInt16BE(2) & 0x0100;
    const rcode = failing.has(name) ? 2 : known.has(name) ? 0 : 3;
    header.writeUInt16BE(0x8000 | 0x0400 | rd | 0x0080 | rcode, 2); // QR AA RD RA rcode
    header.writeUInt16BE(1, 4); // qdcount
    header.writeUInt16BE(answer ? 1 : 0, 6); // ancount
    const parts = [header, question];
    if (answer) {
      const rr = Buffer.alloc(16);
      rr.writeUInt16BE(0xc00c, 0); // name: pointer to the question
      rr.writeUInt16BE(TYPE_A, 2);
      rr.writeUInt16BE(1, 4); // IN
      rr.writeUInt32BE(60, 6); // ttl
      rr.writeUInt16BE(4, 10);
      Buffer.from(addressOf.get(name)!.split('.').map(Number)).copy(rr, 12);
      parts.push(rr);
    }
    socket.send(Buffer.concat(parts), rinfo.port, rinfo.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  const { port } = socket.address() as AddressInfo;
  return {
    address: `127.0.0.1:${port}`,
    queries,
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}

export interface TlsServer {
  port: number;
  /** The self-signed certificate (use it as the CA file). */
  certFile: string;
  /** TCP connections accepted so far. */
  connections(): number;
  close(): Promise<void>;
}

/** A TLS server presenting a self-signed certificate for `certName` to every client. */
export async function startTlsServer(certName: string): Promise<TlsServer> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-tls-'));
  const keyFile = path.join(dir, 'key.pem');
  const certFile = path.join(dir, 'cert.pem');
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyFile, '-out', certFile, '-days', '2', '-subj', `/CN=${certName}`, '-addext', `subjectAltName=DNS:${certName}`],
    { stdio: 'ignore' },
  );
  const server = tls.createServer({ key: fs.readFileSync(keyFile), cert: fs.readFileSync(certFile) }, (socket) => socket.end());
  server.on('tlsClientError', () => undefined);
  let connections = 0;
  server.on('connection', () => (connections += 1));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    certFile,
    connections: () => connections,
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
