import fs from 'node:fs';
import { Resolver } from 'node:dns/promises';
import tls from 'node:tls';
import type { Db } from '../src/db/knex';

export interface DomainActivityDeps {
  db: Db;
  /** DNS server the names are resolved through, `ip[:port]`. */
  dnsResolver: string;
  /** Where the TLS handshake goes; the domain name itself when unset. */
  tlsAddress?: string;
  tlsPort: number;
  /** CA bundle trusted instead of the system roots (tests, private CAs). */
  tlsCaFile?: string;
  /** Timeout of one DNS query or TLS handshake. */
  timeoutMs?: number;
}

export interface CheckStepInput {
  domainId: number;
  attempt: number;
  maxTries: number;
}

/**
 * passed: the stage moved on; retry: failed, tries left; failed: failed on the last try
 * (stage failed / ssl-failed); gone: the mapping was deleted or its stage changed by hand.
 */
export type CheckOutcome = 'passed' | 'retry' | 'failed' | 'gone';

export interface CheckStepResult {
  outcome: CheckOutcome;
  error?: string;
}

type Probe = { ok: true } | { ok: false; error: string };

export async function resolveName(name: string, server: string, timeoutMs = 5000): Promise<Probe> {
  const resolver = new Resolver({ timeout: timeoutMs, tries: 1 });
  resolver.setServers([server]);
  const [v4, v6] = await Promise.allSettled([resolver.resolve4(name), resolver.resolve6(name)]);
  if ((v4.status === 'fulfilled' && v4.value.length > 0) || (v6.status === 'fulfilled' && v6.value.length > 0)) return { ok: true };
  const reason = (v4.status === 'rejected' ? v4.reason : v6.status === 'rejected' ? v6.reason : null) as NodeJS.ErrnoException | null;
  return { ok: false, error: `${name} has no A or AAAA record (${reason?.code ?? 'no addresses'} from ${server})` };
}

export function checkCertificate(name: string, opts: { address?: string; port: number; caFile?: string; timeoutMs?: number }): Promise<Probe> {
  let ca: Buffer | undefined;
  try {
    ca = opts.caFile ? fs.readFileSync(opts.caFile) : undefined;
  } catch (err) {
    return Promise.resolve({ ok: false, error: `cannot read DOMAIN_TLS_CA_FILE: ${(err as Error).message}` });
  }
  const target = `${opts.address ?? name}:${opts.port}`;
  return new Promise((resolve) => {
    let settled = false;
    const finish = (p: Probe) => {
      if (settled) return;
      settled = true;
      socket.destroy();
      resolve(p);
    };
    const socket = tls.connect({
      host: opts.address ?? name,
      port: opts.port,
      servername: name,
      ca,
      rejectUnauthorized: true,
      checkServerIdentity: (_host, cert) => tls.checkServerIdentity(name, cert),
      timeout: opts.timeoutMs ?? 10_000,
    });
    socket.once('secureConnect', () => {
      const cert = socket.getPeerCertificate();
      const now = Date.now();
      if (!cert || !cert.valid_to) return finish({ ok: false, error: `${target} sent no certificate for ${name}` });
      if (Date.parse(cert.valid_to) < now || Date.parse(cert.valid_from) > now) {
        return finish({ ok: false, error: `certificate for ${name} is not valid now (valid ${cert.valid_from} to ${cert.valid_to})` });
      }
      finish({ ok: true });
    });
    socket.once('error', (err: NodeJS.ErrnoException) => finish({ ok: false, error: `TLS handshake with ${target} for ${name} failed: ${err.code ? `${err.code}: ` : ''}${err.message}` }));
    socket.once('timeout', () => finish({ ok: false, error: `TLS handshake with ${target} for ${name} timed out` }));
  });
}

/**
 * The two steps of a domain check. Each reads the mapping first and updates it only while it
 * is still in the step's stage, so a deleted mapping or a stage set by hand ends the check.
 */
export function createDomainActivities(deps: DomainActivityDeps) {
  const { db } = deps;

  async function step(
    input: CheckStepInput,
    stage: 'checking-dns' | 'checking-ssl-cert',
    probe: (name: string) => Promise<Probe>,
    onPass: Record<string, unknown>,
    onFail: Record<string, unknown>,
    label: string,
  ): Promise<CheckStepResult> {
    const row = await db('domains').where({ id: input.domainId }).first('domain', 'stage');
    if (row && stage === 'checking-dns' && row.stage === 'checking-ssl-cert') return { outcome: 'passed' }; // started at the certificate
    if (!row || row.stage !== stage) return { outcome: 'gone' };
    const result = await probe(row.domain);
    const guarded = () => db('domains').where({ id: input.domainId, stage, domain: row.domain });
    if (result.ok) {
      const n = await guarded().update({ ...onPass, last_error: null, date_modified: db.fn.now() });
      return { outcome: n ? 'passed' : 'gone' };
    }
    const last = input.attempt >= input.maxTries;
    const error = `${label} try ${input.attempt} of ${input.maxTries}: ${result.error}`;
    const n = await guarded().update({ ...(last ? onFail : {}), last_error: error, date_modified: db.fn.now() });
    if (!n) return { outcome: 'gone' };
    return { outcome: last ? 'failed' : 'retry', error };
  }

  return {
    /** Resolve the name (A/AAAA) through the configured resolver. */
    async checkDomainDns(input: CheckStepInput): Promise<CheckStepResult> {
      return step(
        input,
        'checking-dns',
        (name) => resolveName(name, deps.dnsResolver, deps.timeoutMs),
        { stage: 'checking-ssl-cert', active: false },
        { stage: 'failed', active: false },
        'DNS check',
      );
    },
    /** TLS handshake: a certificate the CA trusts, for this name, valid now. */
    async checkDomainCertificate(input: CheckStepInput): Promise<CheckStepResult> {
      return step(
        input,
        'checking-ssl-cert',
        (name) => checkCertificate(name, { address: deps.tlsAddress, port: deps.tlsPort, caFile: deps.tlsCaFile, timeoutMs: deps.timeoutMs }),
        { stage: 'done', secure: true, active: true },
        { stage: 'ssl-failed', secure: false, active: false },
        'SSL check',
      );
    },
  };
}

export type DomainActivities = ReturnType<typeof createDomainActivities>;
