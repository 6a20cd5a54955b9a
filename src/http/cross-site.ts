import type { NextFunction, Request, Response } from 'express';
import { ApiError } from './errors';
import { printable } from './input';
import { publicOrigin } from './public-url';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Refuses requests that change data when a browser says they come from another site (CSRF:
 * a page elsewhere posting a form, with credentials the browser holds). Browsers send
 * Sec-Fetch-Site and, on such requests, Origin; pages cannot forge either. Allowed: the
 * browser's own "same-origin" or "none" (typed by the user), an Origin equal to this server's
 * public origin or listed in `allowedOrigins` (`*`: any). Clients that send neither header
 * (servers, curl) are not browsers and pass.
 */
export function refuseCrossSite(allowedOrigins: readonly string[], hint: string) {
  const any = allowedOrigins.includes('*');
  return (req: Request, _res: Response, next: NextFunction) => {
    if (SAFE_METHODS.has(req.method)) return next();
    const site = req.get('sec-fetch-site');
    if (site === 'same-origin' || site === 'none') return next();
    const origin = req.get('origin');
    if (origin !== undefined) {
      if (origin === publicOrigin(req) || any || allowedOrigins.includes(origin)) return next();
      return next(crossSite(`from a page at ${printable(origin)}`, hint));
    }
    if (site !== undefined) return next(crossSite(`from another site (Sec-Fetch-Site: ${printable(site)})`, hint));
    next();
  };
}

function crossSite(from: string, hint: string): ApiError {
  return new ApiError(403, 'rest_cross_site_forbidden', `Requests that change data are refused when a browser sends them ${from}. ${hint}`);
}
