import { Resolver } from 'node:dns/promises';
import fs from 'node:fs';
import tls from 'node:tls';
import type { Db } from '../src/db/knex';
import { TableService } from '../src/db/table-service';
import { domainTable, recordDomainEvents } from '../src/domains/service';
import { canonicalIp, MappingTarget, recordText, requiredRecord, type DnsRecord } from '../src/domains/target';
import { checkedLookup, OutboundPolicy } from '../src/infra/outbound-http';
import { SettingsStore } from '../src/settings/store';

export interface DomainActivityDeps {
  db: Db;
  /** DNS server the names are resolved through, `ip[:port]`. */
  dnsResolver: string;
  /** What mapped domains must point to (DOMAIN_MAPPING_TARGET); unset: the setting network_domain. */
  mappingTarget?: string;
  /**
   * Where the TLS handshake goes (the operator's own front end); unset: the domain name itself,
   * connected to only at an address `outbound` allows (never loopback, private or link-local).
   */
  tlsAddress?: string;
  outbound: OutboundPolicy;
  tlsPort: number;
  /** CA bundle trusted instead of the system roots (tests, private CAs). */
  tlsCaFile?: string;
  /** Timeout of one DNS query or TLS handshake. */
  timeoutMs?: number;
  /** The API's base path (REST prefix and namespace), for the retry route named in messages. */
  apiBase: string;
}

export interface CheckStepInput {
  domainId: number;
  attempt: number;
  maxTries: number;
  /** The workflow's durable sleep before the next try (recorded as next_check_at). */
  intervalSeconds: number;
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

/** Answers that mean the record is not there; any other failure means the resolver could not tell. */
const NO_RECORD = new Set(['ENOTFOUND', 'ENODATA']);
const RESOLVER_TROUBLE: Record<string, string> = {
  ECONNREFUSED: 'refused the connection',
  ETIMEOUT: 'did not answer in time',
  ESERVFAIL: 'answered SERVFAIL (it could not resolve the name itself)',
  EREFUSED: 'refused the query',
};

type Lookup = { kind: 'found'; addresses: string[] } | { kind: 'missing'; why: string } | { kind: 'unanswered'; why: string };

/** A and AAAA of a name: its addresses, "no such record" (NXDOMAIN, NODATA), or "the resolver could not be asked". */
async function lookup(resolver: Resolver, name: string, server: string): Promise<Lookup> {
  const answers = await Promise.allSettled([resolver.resolve4(name), resolver.resolve6(name)]);
  const addresses = answers.flatMap((a) => (a.status === 'fulfilled' ? a.value : [])).map((ip) => canonicalIp(ip) ?? ip);
  if (addresses.length) return { kind: 'found', addresses };
  const codes = answers.map((a) => (a.status === 'rejected' ? String((a.reason as NodeJS.ErrnoException)?.code ?? 'EUNKNOWN') : 'ENODATA'));
  const trouble = codes.find((c) => !NO_RECORD.has(c));
  if (trouble) return { kind: 'unanswered', why: `the DNS resolver ${server} ${RESOLVER_TROUBLE[trouble] ?? `failed (${trouble})`} when asked for ${name}; the records were not checked` };
  if (codes.includes('ENOTFOUND')) return { kind: 'missing', why: `${name} does not exist in DNS (NXDOMAIN from ${server})` };
  return { kind: 'missing', why: `${name} has no A or AAAA record (NODATA from ${server})` };
}

/**
 * The name points where `record` says: its addresses include the A/AAAA value, or share one
 * with the CNAME's target. A failure says whether the record is missing or wrong (and which
 * record to create) or whether the resolver could not be asked at all.
 */
export async function checkDnsRecord(record: DnsRecord, server: string, timeoutMs = 5000): Promise<Probe> {
  const resolver = new Resolver({ timeout: timeoutMs, tries: 1 });
  resolver.setServers([server]);
  const wanted = `the DNS record "${recordText(record)}"`;
  const found = await lookup(resolver, record.name, server);
  if (found.kind === 'unanswered') return { ok: false, error: `${found.why}. It needs ${wanted}` };
  if (found.kind === 'missing') return { ok: false, error: `${found.why}. Create ${wanted}` };
  let expected = [record.value];
  if (record.type === 'CNAME') {
    const target = await lookup(resolver, record.value, server);
    if (target.kind !== 'found') return { ok: false, error: `${record.name} resolves, but the network's host name ${record.value} (DOMAIN_MAPPING_TARGET or the setting network_domain) does not: ${target.why}` };
    expected = target.addresses;
  }
  if (found.addresses.some((a) => expected.includes(a))) return { ok: true };
  return { ok: false, error: `${record.name} points to ${found.addresses.join(', ')}, not to this network (${expected.join(', ')}). Create ${wanted} in place of the current one` };
}

export function checkCertificate(name: string, opts: { address?: string; port: number; caFile?: string; timeoutMs?: number; outbound: OutboundPolicy }): Promise<Probe> {
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
      // A name from a request: its addresses are checked after DNS, as every outbound fetch's.
      ...(opts.address ? {} : { lookup: checkedLookup(opts.outbound, name) as NonNullable<tls.ConnectionOptions['lookup']> }),
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
 * A failure is recorded in last_error with when the next try is (next_check_at) or, after the
 * last try, that the check stopped; both name the retry route.
 */
export function createDomainActivities(deps: DomainActivityDeps) {
  const { db } = deps;
  const target = new MappingTarget(deps.mappingTarget, new SettingsStore(db));
  const domains = new TableService(db, domainTable(target));

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
    // The row moves on only while still in this step's stage; a stage change writes its event in the same transaction.
    const guarded = (cols: Record<string, unknown>) =>
      db.transaction(async (trx) => {
        const [after] = await trx('domains')
          .where({ id: input.domainId, stage, domain: row.domain })
          .update({ ...cols, date_modified: trx.fn.now() })
          .returning('*');
        if (after && after.stage !== stage) await recordDomainEvents(trx, { before: { ...after, stage }, after, record: await domains.recordOf(after) });
        return after ? 1 : 0;
      });
    if (result.ok) {
      const n = await guarded({ ...onPass, last_error: null, next_check_at: null });
      return { outcome: n ? 'passed' : 'gone' };
    }
    const last = input.attempt >= input.maxTries;
    const retry = `POST ${deps.apiBase}/domains/${input.domainId}/retry`;
    const next = last ? null : new Date(Date.now() + input.intervalSeconds * 1000);
    const error = `${label} try ${input.attempt} of ${input.maxTries}: ${result.error}. ${
      next ? `Next try at ${next.toISOString()}; to try at once, ${retry}.` : `The check stopped (stage ${onFail.stage}); to check again, ${retry}.`
    }`;
    const n = await guarded({ ...(last ? onFail : {}), last_error: error, next_check_at: next });
    if (!n) return { outcome: 'gone' };
    return { outcome: last ? 'failed' : 'retry', error };
  }

  return {
    /** The name points to the network (DOMAIN_MAPPING_TARGET or network_domain), through the configured resolver. */
    async checkDomainDns(input: CheckStepInput): Promise<CheckStepResult> {
      const value = await target.value();
      return step(
        input,
        'checking-dns',
        (name) => checkDnsRecord(requiredRecord(name, value), deps.dnsResolver, deps.timeoutMs),
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
        (name) => checkCertificate(name, { address: deps.tlsAddress, port: deps.tlsPort, caFile: deps.tlsCaFile, timeoutMs: deps.timeoutMs, outbound: deps.outbound }),
        { stage: 'done', secure: true, active: true },
        { stage: 'ssl-failed', secure: false, active: false },
        'SSL check',
      );
    },
  };
}

export type DomainActivities = ReturnType<typeof createDomainActivities>;
