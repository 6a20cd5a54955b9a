import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import type { Config } from '../config';
import { ApiError, invalidParams } from './errors';

/**
 * What every request's input must satisfy before a handler sees it, whatever the route:
 * bodies are JSON (or, where accepted, form-encoded), never silently dropped; no string that
 * PostgreSQL cannot store as sent (NUL in text and jsonb, unpaired UTF-16 surrogates, which
 * would become U+FFFD without a word); bounded nesting and size, checked iteratively.
 */
export const MAX_DEPTH = 32;
export const MAX_VALUES = 10_000;
export const FORM_MAX_PARAMETERS = 1000;
/** At most this many offending strings are named in one answer. */
const MAX_PROBLEMS = 20;

const LONE_SURROGATE_SOURCE = '[\\uD800-\\uDBFF](?![\\uDC00-\\uDFFF])|(?<![\\uD800-\\uDBFF])[\\uDC00-\\uDFFF]';
const LONE_SURROGATE = new RegExp(LONE_SURROGATE_SOURCE);
const CONTROL = /[\u0000-\u001f\u007f]/;
const UNPRINTABLE = new RegExp(`[\\u0000-\\u001f\\u007f]|${LONE_SURROGATE_SOURCE}`, 'g');

declare module 'express-serve-static-core' {
  interface Request {
    /** A body problem held back until the caller has authenticated (see readBody). */
    bodyError?: unknown;
  }
}

/** Bodies parsed from application/x-www-form-urlencoded (their values are strings: see validation.ts). */
const formBodies = new WeakSet<object>();
export function isFormBody(value: unknown): boolean {
  return typeof value === 'object' && value !== null && formBodies.has(value);
}

/** A name fit for a message and a data.params key: control characters and unpaired surrogates escaped, at most 100 characters. */
export function printable(name: string): string {
  const escaped = name.replace(UNPRINTABLE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  if (escaped.length <= 100) return escaped;
  // Never cut a surrogate pair in half.
  const end = /[\uD800-\uDBFF]/.test(escaped[99]) ? 99 : 100;
  return `${escaped.slice(0, end)}…`;
}

/** No NUL: what the document can say of the rule below (JSON Schema has no word for an unpaired surrogate). */
export const NUL_FREE_PATTERN = '^[^\\u0000]*$';

function stringProblem(s: string): string | null {
  if (s.includes('\u0000')) return 'the NUL character (U+0000)';
  if (LONE_SURROGATE.test(s)) return 'an unpaired UTF-16 surrogate (U+D800 to U+DFFF; send valid Unicode)';
  return null;
}

/**
 * Every string PostgreSQL cannot store in a parsed body (values and keys, at any depth), and
 * nesting deeper than MAX_DEPTH or more than MAX_VALUES values: {dotted.name: message}.
 * Iterative, so no input can overflow the stack.
 */
export function unstorableProblems(root: unknown, rootName = 'body'): Record<string, string> {
  const problems: Record<string, string> = Object.create(null);
  // A value's path is a chain of {key, up} links, turned into a name only for a problem: no
  // array is copied per value (bodies of thousands of values are checked on every write).
  type Link = { key: string; up: Link | null } | null;
  const pathOf = (link: Link): string[] => {
    const path: string[] = [];
    for (let l = link; l; l = l.up) path.push(l.key);
    return path.reverse();
  };
  const nameOf = (link: Link) => pathOf(link).map(printable).join('.') || rootName;
  const topOf = (link: Link) => (link ? printable(pathOf(link)[0]) : rootName);
  // Counted as they are added: full() runs for every value, and counting the keys each time
  // allocated an array per value (a 100-package translation batch: 5% of what it allocated).
  let found = 0;
  const add = (name: string, message: string) => {
    if (!(name in problems)) found++;
    problems[name] = message;
  };
  const full = () => found >= MAX_PROBLEMS;
  // The string's own link is made only for a problem.
  const checkString = (value: string, key: string | null, up: Link) => {
    const p = stringProblem(value);
    if (p) {
      const name = nameOf(key === null ? up : { key, up });
      add(name, `${name} must not contain ${p}.`);
    }
  };
  if (typeof root === 'string') {
    checkString(root, null, null);
    return problems;
  }
  if (root === null || typeof root !== 'object') return problems;
  const stack: { value: object; link: Link; depth: number }[] = [{ value: root, link: null, depth: 0 }];
  let values = 1;
  while (stack.length > 0 && !full()) {
    const { value, link, depth } = stack.pop()!;
    if (depth + 1 > MAX_DEPTH) {
      const top = topOf(link);
      add(top, `${top} is nested more than ${MAX_DEPTH} levels deep.`);
      return problems;
    }
    const keys = Array.isArray(value) ? null : Object.keys(value);
    const length = keys ? keys.length : (value as unknown[]).length;
    values += length;
    if (values > MAX_VALUES) {
      const top = topOf(link);
      add(top, `${top} holds too many values: a body may hold at most ${MAX_VALUES} (objects, arrays and their members).`);
      return problems;
    }
    for (let i = 0; i < length && !full(); i++) {
      const key = keys ? keys[i] : String(i);
      if (keys) {
        const p = stringProblem(key);
        if (p) {
          const name = nameOf({ key, up: link });
          add(name, `${name} is a key holding ${p}.`);
        }
      }
      const child = (value as Record<string, unknown>)[key];
      if (typeof child === 'string') checkString(child, key, link);
      else if (child !== null && typeof child === 'object') stack.push({ value: child, link: { key, up: link }, depth: depth + 1 });
    }
  }
  return problems;
}

/** Query parameter names are plain text (never empty, no control characters); values hold no unstorable string. */
export function queryProblems(query: Record<string, unknown>): Record<string, string> {
  const problems: Record<string, string> = Object.create(null);
  for (const [name, value] of Object.entries(query)) {
    if (Object.keys(problems).length >= MAX_PROBLEMS) break;
    const shown = printable(name);
    if (name === '') problems[''] = 'A query parameter has an empty name (as in "?=x"): remove it.';
    else if (CONTROL.test(name)) problems[shown] = `${shown} is not a valid parameter name: it holds a control character.`;
    else if (LONE_SURROGATE.test(name)) problems[shown] = `${shown} is not a valid parameter name: it holds an unpaired UTF-16 surrogate.`;
    else {
      for (const v of Array.isArray(value) ? value : [value]) {
        const p = typeof v === 'string' ? stringProblem(v) : null;
        if (p) {
          problems[shown] = `${shown} must not contain ${p}.`;
          break;
        }
      }
    }
  }
  return problems;
}

function hasBody(req: Request): boolean {
  if (req.headers['transfer-encoding'] !== undefined) return true;
  const length = req.headers['content-length'];
  return length !== undefined && length !== '0';
}

function unsupportedMediaType(type: string | undefined, form: boolean): ApiError {
  const accepted = form ? 'application/json or application/x-www-form-urlencoded' : 'application/json';
  return new ApiError(
    415,
    'rest_unsupported_media_type',
    type ? `Request bodies must be ${accepted}; this one is ${printable(type.split(';')[0].trim())}.` : `This request has a body but no Content-Type: send it as ${accepted}.`,
    { accepted: accepted.split(' or ') },
  );
}

/** The form parser's own limits, in the contract's words. */
function formError(err: unknown): unknown {
  const type = (err as { type?: string } | undefined)?.type;
  if (type === 'parameters.too.many') {
    return new ApiError(413, 'rest_request_too_large', `A form body may hold at most ${FORM_MAX_PARAMETERS} parameters.`, { limit_parameters: FORM_MAX_PARAMETERS });
  }
  if (type === 'querystring.parse.rangeError') return invalidParams({ body: `body has form keys nested more than ${MAX_DEPTH} levels deep.` });
  return err;
}

/**
 * Reads the body of every request of a namespace: JSON, and form-encoded where `form`. Any
 * other body (multipart included) is not read. Every problem (malformed, too large, another
 * type: 415, unstorable strings, too deep) is held back in req.bodyError, so the caller's
 * credentials are checked first; the route that reads the body throws it (a multipart upload
 * route reads the stream itself and never does).
 */
export function readBody(config: Pick<Config, 'BODY_LIMIT'>, opts: { form: boolean }): RequestHandler {
  const json = express.json({ limit: config.BODY_LIMIT, type: ['application/json', 'application/*+json'] });
  // body-parser 2 takes `depth` (bracket nesting, refused beyond it); its types do not know it yet.
  const formOptions = { extended: true, limit: config.BODY_LIMIT, parameterLimit: FORM_MAX_PARAMETERS, depth: MAX_DEPTH };
  const form = express.urlencoded(formOptions as Parameters<typeof express.urlencoded>[0]);
  return (req: Request, res: Response, next: NextFunction) => {
    const done = (err?: unknown) => {
      if (err) {
        req.bodyError = err;
        req.body = undefined;
      } else if (req.body !== undefined) {
        const problems = unstorableProblems(req.body);
        if (Object.keys(problems).length) req.bodyError = invalidParams(problems);
      }
      next();
    };
    if (!hasBody(req)) return next();
    const parse = (parser: RequestHandler, after: (err?: unknown) => void) => {
      // A large body waits for one of a few slots, held until its answer is sent: parsed bodies
      // (several times their size as objects) are bounded in memory whatever the callers do.
      const length = Number(req.get('content-length'));
      if (Number.isFinite(length) && length <= LARGE_BODY_BYTES) return parser(req, res, after);
      void largeBodySlot(res).then(() => parser(req, res, after));
    };
    if (req.is(['application/json', 'application/*+json'])) return parse(json, done);
    if (opts.form && req.is('application/x-www-form-urlencoded')) {
      return parse(form, (err?: unknown) => {
        if (!err && typeof req.body === 'object' && req.body !== null) formBodies.add(req.body);
        done(formError(err));
      });
    }
    req.bodyError = unsupportedMediaType(req.get('content-type'), opts.form);
    next();
  };
}

/** Bodies above this size (or of unknown size) are parsed LARGE_BODY_SLOTS at a time per process. */
const LARGE_BODY_BYTES = 64 * 1024;
const LARGE_BODY_SLOTS = 8;
let largeBodies = 0;
const waitingForSlot: (() => void)[] = [];

/**
 * One of LARGE_BODY_SLOTS, until `res` closes. Per process, on purpose: it bounds this
 * process's memory (N replicas hold N times as many). A request waiting here has not read its
 * body: it stays in the socket, not in the heap.
 */
function largeBodySlot(res: Response): Promise<void> {
  const release = () => {
    const next = waitingForSlot.shift();
    if (next) next();
    else largeBodies--;
  };
  return new Promise<void>((resolve) => {
    const take = () => {
      // The caller went away while it waited: the slot passes on at once.
      if (res.closed) release();
      else res.once('close', release);
      resolve();
    };
    if (largeBodies < LARGE_BODY_SLOTS) {
      largeBodies++;
      take();
    } else waitingForSlot.push(take);
  });
}

/**
 * Right after a namespace authenticated its caller: answers are not to be cached (they hold
 * the caller's data), and query parameters PostgreSQL could not store are refused, naming them.
 */
export const afterAuthentication: RequestHandler = (req, res, next) => {
  res.setHeader('Cache-Control', 'no-store');
  const problems = queryProblems(req.query as Record<string, unknown>);
  next(Object.keys(problems).length ? invalidParams(problems) : undefined);
};

/** Throws the body problem held back by readBody (wu/v2 does for every route, after authentication). */
export const heldBackBodyError: RequestHandler = (req, _res, next) => next(req.bodyError);
