import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import type { Express, NextFunction, Request, Response } from 'express';
import { ApiError } from '../http/errors';
import { publicBase } from '../http/public-url';

/** What the widget's build holds in place of the chat's base path (web/widget/src/config.ts). */
export const CHAT_BASE_PLACEHOLDER = '__HOSTFLOW_CHAT_BASE__';

interface Asset {
  body: Buffer;
  gzip: Buffer;
  etag: string;
}

/**
 * The customers' chat widget (web/widget, built by Vite into `dir`): `/chat/widget.js`, the one
 * script a site embeds, and `/chat/demo.html`, a page embedding it. Fixed paths at the root (not
 * under REST_PREFIX), like /docs and /console/, so the tag sites paste never changes.
 *
 * widget.js is loaded by pages of other origins: `Access-Control-Allow-Origin: *` and
 * `Cross-Origin-Resource-Policy: cross-origin` (it carries no secret; what it may call is decided
 * by the chat's own CORS, CHAT_ALLOWED_ORIGINS). Its name has no hash, so it is cached for five
 * minutes and then revalidated by ETag. It is sent gzipped to clients that accept it (compressed
 * once, in memory). The chat's base path is written into it here, so a widget whose tag names no
 * `data-api` talks to the server that served it, whatever REST_PREFIX and CHAT_PRODUCT are.
 */
export function mountWidget(app: Express, options: { dir: string; chatBase: string }): void {
  const cache = new Map<string, Asset>();
  const load = (name: string): Asset => {
    const hit = cache.get(name);
    if (hit) return hit;
    let text: string;
    try {
      text = fs.readFileSync(path.join(options.dir, name), 'utf8');
    } catch {
      throw new ApiError(503, 'chat_widget_not_built', 'The chat widget is not built: run `npm run build` (it builds web/widget into dist/web/widget).');
    }
    const body = Buffer.from(text.split(CHAT_BASE_PLACEHOLDER).join(options.chatBase));
    const asset = { body, gzip: zlib.gzipSync(body, { level: 9 }), etag: `"${crypto.createHash('sha256').update(body).digest('base64url').slice(0, 27)}"` };
    cache.set(name, asset);
    return asset;
  };

  const send = (req: Request, res: Response, asset: Asset, type: string): void => {
    res.setHeader('ETag', asset.etag);
    res.setHeader('Vary', 'Accept-Encoding');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.type(type);
    if (req.get('if-none-match') === asset.etag) {
      res.status(304).end();
      return;
    }
    const gzip = /\bgzip\b/.test(req.get('accept-encoding') ?? '');
    if (gzip) res.setHeader('Content-Encoding', 'gzip');
    res.send(gzip ? asset.gzip : asset.body);
  };

  // Middleware rather than routes: these are files, not API operations (the route index, the
  // OpenAPI document and its contract tests list operations only).
  app.use('/chat', (req: Request, res: Response, next: NextFunction) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') return next();
    if (req.path === '/widget.js') {
      const asset = load('widget.js');
      res.setHeader('Cache-Control', 'public, max-age=300');
      res.setHeader('Access-Control-Allow-Origin', '*');
      res.setHeader('Cross-Origin-Resource-Policy', 'cross-origin');
      return send(req, res, asset, 'application/javascript; charset=utf-8');
    }
    if (req.path === '/demo.html') {
      const asset = load('demo.html');
      const socket = publicBase(req).replace(/^http/, 'ws');
      // The demo runs the widget under a strict policy, as a careful site would: only this
      // origin's script, its API and socket; the widget's styles are constructed stylesheets.
      res.setHeader(
        'Content-Security-Policy',
        ["default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self' blob: data:", `connect-src 'self' ${socket}`, "base-uri 'none'", "form-action 'none'"].join('; '),
      );
      res.setHeader('Cache-Control', 'no-cache');
      res.setHeader('Referrer-Policy', 'strict-origin-when-cross-origin');
      return send(req, res, asset, 'html');
    }
    next();
  });
}
