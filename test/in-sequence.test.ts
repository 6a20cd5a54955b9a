import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { Router, type ErrorRequestHandler, type RequestHandler } from 'express';
import { inSequence } from '../src/http/in-sequence';

/** inSequence (src/http/in-sequence.ts): middleware in one layer behave as the same middleware in layers of their own. */
describe('inSequence', () => {
  const mark = (name: string): RequestHandler => (req, _res, next) => {
    (req as unknown as { seen: string[] }).seen.push(name);
    next();
  };
  // What each request asks the middle middleware to do, by query parameter.
  const middle: RequestHandler = async (req, res, next) => {
    (req as unknown as { seen: string[] }).seen.push('middle');
    const how = req.query.how;
    if (how === 'error') return next(new Error('given to next'));
    if (how === 'throw') throw new Error('thrown');
    if (how === 'reject') return Promise.reject(new Error('rejected'));
    if (how === 'async') {
      await new Promise((r) => setTimeout(r, 5));
      return next();
    }
    if (how === 'answer') return void res.json({ answered: (req as unknown as { seen: string[] }).seen });
    if (how === 'route') return next('route');
    if (how === 'router') return next('router');
    next();
  };

  function build(combined: boolean): express.Express {
    const r = Router();
    if (combined) r.use(inSequence(mark('a'), middle, mark('b')));
    else r.use(mark('a'), middle, mark('b'));
    r.get('/x', (req, res) => res.json({ seen: (req as unknown as { seen: string[] }).seen }));
    const onError: ErrorRequestHandler = (err: Error, req, res, _next) => res.status(500).json({ error: err.message, seen: (req as unknown as { seen: string[] }).seen });
    r.use(onError);
    const app = express();
    app.use((req, _res, next) => {
      (req as unknown as { seen: string[] }).seen = [];
      next();
    });
    app.use('/r', r);
    app.use((req, res) => res.status(404).json({ outside: (req as unknown as { seen: string[] }).seen }));
    return app;
  }

  const servers: http.Server[] = [];
  async function serve(app: express.Express): Promise<string> {
    const server = http.createServer(app);
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }
  afterAll(() => Promise.all(servers.map((s) => new Promise((r) => s.close(r)))));

  test('same answers as separate layers: next(), next(err), a throw, a rejection, async, an answer, next("route"), next("router")', async () => {
    const [plain, combined] = await Promise.all([serve(build(false)), serve(build(true))]);
    for (const how of ['', 'error', 'throw', 'reject', 'async', 'answer', 'route', 'router']) {
      const [a, b] = await Promise.all([plain, combined].map((base) => fetch(`${base}/r/x?how=${how}`)));
      expect({ how, status: b.status, body: await b.json() }).toEqual({ how, status: a.status, body: await a.json() });
    }
  });
});
