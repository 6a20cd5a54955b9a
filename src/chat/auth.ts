import type { NextFunction, Request, Response } from 'express';
import type { Db } from '../db/knex';
import { constantTimeEqual, countAuthFailure, presentedCredentials, stripCredentialKeys } from '../http/auth';
import { ApiError } from '../http/errors';
import type { AddressLimiter } from '../http/limits';
import { sha256 } from '../infra/digest';
import type { SettingsStore } from '../settings/store';
import { parseToken, tokenMatches } from './tokens';

/**
 * Who is calling a chat route:
 * - anonymous (no credentials): only the availability and session creation;
 * - customer: the Bearer session token of one session, good for that session only;
 * - agent: the Bearer token of an active agent;
 * - the API key and secret (HTTP Basic or the api_key/api_secret parameters): an admin agent
 *   without an agent row (agent_id null).
 * Credentials that are presented but wrong are refused (401) on every route, public or not,
 * before any parameter is looked at.
 */
export type ChatCaller =
  | { kind: 'anonymous' }
  | { kind: 'customer'; sessionId: number }
  | { kind: 'agent'; agentId: number | null; name: string; admin: boolean };
export type AgentCaller = Extract<ChatCaller, { kind: 'agent' }>;

declare module 'express-serve-static-core' {
  interface Request {
    chatCaller?: ChatCaller;
  }
}

export function unauthorized(): ApiError {
  return new ApiError(401, 'rest_forbidden', 'Sorry, you are not allowed to do that.', {}, { 'WWW-Authenticate': 'Bearer realm="hostflow chat"' });
}

export function forbidden(message = 'Sorry, you are not allowed to do that.'): ApiError {
  return new ApiError(403, 'rest_forbidden', message);
}

/** `sessionMaxAgeSeconds`: a session token never works longer than this after its session was created. */
export function chatAuth(db: Db, settings: SettingsStore, limiter: AddressLimiter, sessionMaxAgeSeconds: number) {
  const fail = async (req: Request): Promise<never> => {
    await countAuthFailure(limiter, req);
    throw unauthorized();
  };

  const identify = async (req: Request): Promise<ChatCaller> => {
    const header = req.headers.authorization;
    if (header && /^bearer\s+/i.test(header)) {
      const token = header.replace(/^bearer\s+/i, '').trim();
      const parsed = parseToken(token);
      if (!parsed) return fail(req);
      if (parsed.kind === 'customer') {
        const session = await db('chat_sessions').where({ id: parsed.id }).first('id', 'token_sha256', 'token_expires_at', 'date_created');
        // The digest comparison runs even for an unknown session (against a dummy digest). The
        // absolute lifetime is checked too, so lowering it applies to tokens already issued.
        const now = Date.now();
        const ok =
          tokenMatches(token, session?.token_sha256 ?? sha256('')) &&
          !!session &&
          new Date(session.token_expires_at).getTime() > now &&
          new Date(session.date_created).getTime() + sessionMaxAgeSeconds * 1000 > now;
        if (!ok) return fail(req);
        return { kind: 'customer', sessionId: Number(session!.id) };
      }
      const agent = await db('chat_agents').where({ id: parsed.id }).first('id', 'name', 'is_admin', 'active', 'token_sha256');
      const ok = tokenMatches(token, agent?.token_sha256 ?? sha256('')) && !!agent && agent.active;
      if (!ok) return fail(req);
      return { kind: 'agent', agentId: Number(agent!.id), name: agent!.name, admin: agent!.is_admin };
    }
    const presented = presentedCredentials(req);
    if (presented) {
      const enabled = await settings.get<boolean>('enable_api');
      if (enabled === false) throw new ApiError(403, 'wu_rest_api_disabled', 'The API is disabled (setting enable_api); the API credentials do not work now.');
      const stored = await settings.credentials();
      const ok =
        stored !== null &&
        [constantTimeEqual(presented.key, stored.key), constantTimeEqual(sha256(presented.secret), stored.secretSha256)].every(Boolean);
      if (!ok) return fail(req);
      stripCredentialKeys(req.body);
      return { kind: 'agent', agentId: null, name: 'Administrator', admin: true };
    }
    return { kind: 'anonymous' };
  };

  return async (req: Request, _res: Response, next: NextFunction) => {
    try {
      req.chatCaller = await identify(req);
      next();
    } catch (err) {
      next(err);
    }
  };
}

export function callerOf(req: Request): ChatCaller {
  return req.chatCaller ?? { kind: 'anonymous' };
}

/** An agent (or the API credentials). */
export function requireAgent(req: Request): AgentCaller {
  const caller = callerOf(req);
  if (caller.kind === 'anonymous') throw unauthorized();
  if (caller.kind !== 'agent') throw forbidden('This route is for support agents.');
  return caller;
}

export function requireAdmin(req: Request): AgentCaller {
  const caller = requireAgent(req);
  if (!caller.admin) throw forbidden('This route is for administrators.');
  return caller;
}

/**
 * Access to one session: its own customer (when `customer` allows) or an agent (when `agent`
 * allows). Checked before the id is validated: a customer token for another session is 403.
 */
export function requireSessionCaller(req: Request, rawSessionId: string, allow: { customer: boolean; agent: boolean }): ChatCaller {
  const caller = callerOf(req);
  if (caller.kind === 'anonymous') throw unauthorized();
  if (caller.kind === 'customer') {
    if (!allow.customer) throw forbidden('This action is for support agents.');
    if (String(caller.sessionId) !== rawSessionId) throw forbidden('This session token belongs to another session.');
    return caller;
  }
  if (!allow.agent) throw forbidden('This action is for the customer of the session.');
  return caller;
}

/** Access to one session for agents only (its customer is 403). */
export function requireSessionAgent(req: Request, rawSessionId: string): AgentCaller {
  return requireSessionCaller(req, rawSessionId, { customer: false, agent: true }) as AgentCaller;
}
