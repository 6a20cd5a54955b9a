import type { Express, Request } from 'express';

const QUERY_OF = Symbol('query');
type WithQuery = Request & { [QUERY_OF]?: { url: string; value: unknown } };

/**
 * `req.query`, parsed once per URL: Express's getter parses the query string again on every
 * read, and a wu/v2 request reads it four or five times (the credentials, the query check, the
 * view, the list). Routers change `req.url` (a mount path taken off and put back), which parses
 * it again: the query string is the same, so is the answer.
 */
export function defineCachedQuery(app: Express): void {
  let proto: object | null = app.request;
  let parse: PropertyDescriptor | undefined;
  while (proto && !(parse = Object.getOwnPropertyDescriptor(proto, 'query'))) proto = Object.getPrototypeOf(proto) as object | null;
  const read = parse?.get;
  if (!read) throw new Error('express: req.query is no longer a getter');
  Object.defineProperty(app.request, 'query', {
    configurable: true,
    enumerable: true,
    get(this: WithQuery) {
      const kept = this[QUERY_OF];
      if (kept && kept.url === this.url) return kept.value;
      const value = read.call(this) as unknown;
      this[QUERY_OF] = { url: this.url, value };
      return value;
    },
  });
}
