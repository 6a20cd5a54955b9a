import crypto from 'node:crypto';
import type { Config } from '../config';
import type { Db } from '../db/knex';
import { constantTimeEqual } from '../http/auth';
import { sha256 } from '../infra/digest';
import { StoredSecret } from '../settings/store';

/**
 * Chat credentials.
 * - Customer session token `hfc_<session id>_<secret>` and agent token `hfa_<agent id>_<secret>`:
 *   32 random bytes; only their SHA-256 is stored, compared in constant time.
 * - Realtime token `<payload>.<mac>`: HMAC-SHA256 over the payload (session, role, expiry) with
 *   the chat secret; short-lived, checked when a WebSocket connects.
 * - Identity hash: HMAC-SHA256 of a customer id, so a site can vouch for the logged-in
 *   customer it opens a chat for (as Chatwoot's identity validation).
 */
export const SECRET_SETTING = 'chat_token_secret';

export type TokenKind = 'customer' | 'agent';

export function newSecret(): string {
  return crypto.randomBytes(32).toString('base64url');
}

export function makeToken(kind: TokenKind, id: number): { token: string; digest: string } {
  const token = `${kind === 'customer' ? 'hfc' : 'hfa'}_${id}_${newSecret()}`;
  return { token, digest: sha256(token) };
}

/** The id a token claims to belong to (its validity is checked against the stored digest). */
export function parseToken(token: string): { kind: TokenKind; id: number } | null {
  const m = /^(hfc|hfa)_(\d{1,15})_[A-Za-z0-9_-]{43}$/.exec(token);
  if (!m) return null;
  return { kind: m[1] === 'hfc' ? 'customer' : 'agent', id: Number(m[2]) };
}

export function tokenMatches(token: string, storedDigest: string): boolean {
  return constantTimeEqual(sha256(token), storedDigest);
}

export interface RealtimeClaims {
  session_id: number;
  role: 'customer' | 'agent';
  agent_id: number | null;
  /** Expiry, seconds since the epoch. */
  exp: number;
}

/** The chat secret: CHAT_TOKEN_SECRET, or a random one kept in the settings table (shared by every process). */
export class ChatSecret extends StoredSecret {
  constructor(db: Db, config: Pick<Config, 'CHAT_TOKEN_SECRET'>) {
    super(db, SECRET_SETTING, config.CHAT_TOKEN_SECRET);
  }

  private async mac(purpose: string, data: string): Promise<string> {
    return crypto.createHmac('sha256', await this.get()).update(`${purpose}:${data}`).digest('base64url');
  }

  async signRealtime(claims: RealtimeClaims): Promise<string> {
    const payload = Buffer.from(JSON.stringify(claims)).toString('base64url');
    return `${payload}.${await this.mac('realtime', payload)}`;
  }

  async verifyRealtime(token: string, now = Date.now()): Promise<RealtimeClaims | null> {
    const m = /^([A-Za-z0-9_-]{1,1000})\.([A-Za-z0-9_-]{43})$/.exec(token);
    if (!m) return null;
    const expected = Buffer.from(await this.mac('realtime', m[1]));
    const given = Buffer.from(m[2]);
    if (expected.length !== given.length || !crypto.timingSafeEqual(expected, given)) return null;
    try {
      const claims = JSON.parse(Buffer.from(m[1], 'base64url').toString('utf8')) as RealtimeClaims;
      if (typeof claims.session_id !== 'number' || typeof claims.exp !== 'number' || claims.exp * 1000 <= now) return null;
      return claims;
    } catch {
      return null;
    }
  }

  async identityHash(customerId: number): Promise<string> {
    return crypto.createHmac('sha256', await this.get()).update(`identity:${customerId}`).digest('hex');
  }

  async identityMatches(customerId: number, hash: string): Promise<boolean> {
    return constantTimeEqual(await this.identityHash(customerId), hash.toLowerCase());
  }
}
