import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import { ApiError } from './errors';
import { publicBase } from './public-url';

export interface ConsoleOptions {
  /** The Vite build (dist/web/console: index.html and assets/). */
  dir: string;
  /** The Temporal UI's base URL for links to workflows, or null when there is none to link to. */
  temporalUiUrl: string | null;
  temporalNamespace: string;
  /** The path of the chat's WebSocket (the page may connect to it, and to nothing else elsewhere). */
  realtimePath: string;
}

/** Hashed file names (`index-CDfWNz23.js`) never change content: cached for a year, immutable. */
const ONE_YEAR_MS = 365 * 24 * 3600 * 1000;

/**
 * `/console/`: the admins' and agents' pages (web/console, built by Vite into `dir`), served
 * by the API process: no CDN, nothing fetched at run time. The page talks to the public API
 * only (wu/v2 and the chat), so the Content-Security-Policy lets it run its own scripts and
 * styles and connect to this origin and the chat's socket, nothing inline, nothing foreign.
 */
export function mountConsole(app: Express, options: ConsoleOptions): void {
  const indexFile = path.join(options.dir, 'index.html');
  // Read again when a new build replaces it (its asset names change with it).
  let page: { html: string; mtimeMs: number } | undefined;
  const indexPage = (): string => {
    let html: string;
    let mtimeMs: number;
    try {
      mtimeMs = fs.statSync(indexFile).mtimeMs;
      if (page?.mtimeMs === mtimeMs) return page.html;
      html = fs.readFileSync(indexFile, 'utf8');
    } catch {
      throw new ApiError(503, 'console_not_built', 'The console is not built: run `npm run build` (it builds web/console into dist/web/console).');
    }
    // What the page cannot learn from the API: where the Temporal UI is (links to workflows).
    const meta = options.temporalUiUrl
      ? `<meta name="hostflow-temporal-ui" content="${escapeAttribute(`${options.temporalUiUrl.replace(/\/$/, '')}/namespaces/${encodeURIComponent(options.temporalNamespace)}`)}">`
      : '';
    page = { html: html.replace('</head>', `  ${meta}\n</head>`), mtimeMs };
    return page.html;
  };

  // A middleware, not a route: the page is no API operation (the route index, the OpenAPI
  // document and its contract tests list operations only).
  app.use('/console', (req: Request, res: Response, next: NextFunction) => {
    if ((req.method !== 'GET' && req.method !== 'HEAD') || (req.path !== '/' && req.path !== '/index.html')) return next();
    const [pathname, query] = req.originalUrl.split(/\?(.*)/s, 2);
    // Only '/console/' serves the page, so the page's URL and its relative links agree.
    if (pathname === '/console') return res.redirect(301, `/console/${query === undefined ? '' : `?${query}`}`);
    const body = indexPage();
    const socket = publicBase(req).replace(/^http/, 'ws') + options.realtimePath;
    res.setHeader(
      'Content-Security-Policy',
      [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data: blob:",
        "font-src 'self'",
        `connect-src 'self' ${socket}`,
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
      ].join('; '),
    );
    // Always asked again: a new build changes the asset names it points at.
    res.setHeader('Cache-Control', 'no-cache');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Referrer-Policy', 'no-referrer');
    res.type('html').send(body);
  });
  // Scripts and styles gzipped once (a third of their size), for browsers that take it; the
  // hashed names never change content, so each is compressed once per process.
  const assetsDir = path.join(options.dir, 'assets');
  const gzipped = new Map<string, Buffer>();
  app.use('/console/assets', (req: Request, res: Response, next: NextFunction) => {
    const name = req.path.slice(1);
    if ((req.method !== 'GET' && req.method !== 'HEAD') || !/^[\w-]+\.(js|css)$/.test(name) || !req.acceptsEncodings('gzip')) return next();
    let body = gzipped.get(name);
    if (!body) {
      let raw: Buffer;
      try {
        raw = fs.readFileSync(path.join(assetsDir, name));
      } catch {
        return next();
      }
      body = zlib.gzipSync(raw, { level: 9 });
      gzipped.set(name, body);
    }
    res.setHeader('Content-Type', name.endsWith('.js') ? 'text/javascript; charset=utf-8' : 'text/css; charset=utf-8');
    res.setHeader('Content-Encoding', 'gzip');
    res.setHeader('Vary', 'Accept-Encoding');
    res.setHeader('Cache-Control', 'public, max-age=31536000, immutable');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Content-Length', String(body.length));
    res.end(req.method === 'HEAD' ? undefined : body);
  });
  app.use(
    '/console/assets',
    express.static(path.join(options.dir, 'assets'), {
      index: false,
      redirect: false,
      maxAge: ONE_YEAR_MS,
      immutable: true,
      setHeaders: (res) => {
        res.setHeader('X-Content-Type-Options', 'nosniff');
        res.setHeader('Vary', 'Accept-Encoding');
      },
    }),
  );
}

function escapeAttribute(value: string): string {
  return value.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}
