import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { Router, type Request, type Response } from 'express';
import { checkFirstSegment } from '../src/http/first-segment';

/**
 * checkFirstSegment (src/http/first-segment.ts) skips layers whose first segment differs from
 * the request's: a router with it answers every request exactly as the same router without it.
 */
describe('checkFirstSegment', () => {
  const answer = (name: string) => (req: Request, res: Response) => {
    res.json({ name, params: req.params, baseUrl: req.baseUrl, url: req.url });
  };

  function build(guard: boolean): { app: express.Express; guarded: number } {
    const r = Router();
    r.use((req, _res, next) => {
      req.headers['x-seen'] = 'yes';
      next();
    });
    r.get('/', answer('index'));
    r.get('/customers', answer('customers'));
    r.get('/customers/:id', answer('customer'));
    r.patch('/customers/:id', answer('customer-patch'));
    r.get('/customer/:id', answer('customer-alias'));
    r.use('/tenants', (req, res, next) => (req.query.stop ? res.json({ name: 'tenants-mw', url: req.url, baseUrl: req.baseUrl }) : next()));
    r.get('/tenants/:id/files/*rest', answer('tenant-files'));
    r.get('/:kind/by-param', answer('param-first'));
    r.get('/a.b-c~d_e/x', answer('punctuation'));
    const sub = Router();
    sub.get('/inner', answer('sub-inner'));
    r.use('/sub', sub);
    r.use((_req, res) => res.status(404).json({ name: 'not-found' }));
    const guarded = guard ? checkFirstSegment(r) : 0;
    const app = express();
    app.use('/ns', r);
    return { app, guarded };
  }

  const servers: http.Server[] = [];
  async function serve(app: express.Express): Promise<string> {
    const server = http.createServer(app);
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }
  afterAll(() => Promise.all(servers.map((s) => new Promise((r) => s.close(r)))));

  test('answers every request as the router without it', async () => {
    const plain = await serve(build(false).app);
    const built = build(true);
    expect(built.guarded).toBe(8);
    const guarded = await serve(built.app);
    const requests: [string, string][] = [
      ['GET', '/ns'],
      ['GET', '/ns/'],
      ['GET', '/ns//'],
      ['GET', '/ns/customers'],
      ['GET', '/ns/customers/'],
      ['GET', '/ns/Customers/7'],
      ['GET', '/ns/CUSTOMERS/7/'],
      ['GET', '/ns/customers/7?x=1'],
      ['PATCH', '/ns/customers/7'],
      ['DELETE', '/ns/customers/7'],
      ['GET', '/ns/customersX/7'],
      ['GET', '/ns/%63ustomers/7'],
      ['GET', '/ns//customers/7'],
      ['GET', '/ns/customers%2F7'],
      ['GET', '/ns/customer/3'],
      ['GET', '/ns/tenants?stop=1'],
      ['GET', '/ns/tenants/5/files/a/b?stop=1'],
      ['GET', '/ns/tenants/5/files/a/b'],
      ['GET', '/ns/Tenants/5/files/a'],
      ['GET', '/ns/customers/by-param'],
      ['GET', '/ns/anything/by-param'],
      ['GET', '/ns/a.b-c~d_e/x'],
      ['GET', '/ns/A.B-C~D_E/x'],
      ['GET', '/ns/sub/inner'],
      ['GET', '/ns/SUB/inner'],
      ['GET', '/ns/sub'],
      ['OPTIONS', '/ns/customers/7'],
      ['HEAD', '/ns/customers/7'],
      ['GET', '/ns/nothing'],
    ];
    for (const [method, path] of requests) {
      const [a, b] = await Promise.all([plain, guarded].map((base) => fetch(`${base}${path}`, { method })));
      const [ta, tb] = await Promise.all([a.text(), b.text()]);
      expect({ method, path, status: b.status, allow: b.headers.get('allow'), body: tb }).toEqual({ method, path, status: a.status, allow: a.headers.get('allow'), body: ta });
    }
  });
});
