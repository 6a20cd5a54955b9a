import type { NextFunction, Request, RequestHandler, Response } from 'express';

/**
 * Several middleware as one layer of a router, run in order as the router would run them: an
 * error (given to `next`, thrown, or a rejected promise) skips the rest and goes to the
 * router's `next`; `next('route')` is no error; `next('router')` leaves the router. Each layer
 * a request passes costs the router a match object, its keys, a closure and the parameter
 * processing (the router's `next` was the API's top allocator in the bench's heap profiles,
 * issue 14), so the middleware every wu/v2 request goes through run as two layers, not seven.
 */
export function inSequence(...handlers: RequestHandler[]): RequestHandler {
  return (req: Request, res: Response, next: NextFunction) => {
    let i = 0;
    const step = (err?: unknown): void => {
      if (err && err !== 'route') {
        next(err);
        return;
      }
      const handler = handlers[i++];
      if (!handler) {
        next();
        return;
      }
      try {
        const ret = handler(req, res, step) as unknown;
        if (ret && typeof (ret as Promise<unknown>).then === 'function') {
          (ret as Promise<unknown>).then(undefined, (error: unknown) => step(error || new Error('Rejected promise')));
        }
      } catch (error) {
        step(error);
      }
    };
    step();
  };
}
