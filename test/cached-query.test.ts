import express from 'express';
import request from 'supertest';
import { defineCachedQuery } from '../src/http/cached-query';

/** req.query read many times per request, parsed once per URL (src/http/cached-query.ts). */
describe('cached req.query', () => {
  const app = express();
  app.set('query parser', 'simple');
  defineCachedQuery(app);
  const seen: unknown[] = [];
  const inner = express.Router();
  inner.use((req, _res, next) => {
    seen.push(req.query);
    next();
  });
  inner.get('/:id', (req, res) => {
    // The same object on every read while the URL is the same.
    const first = req.query;
    seen.push(req.query);
    res.json({ query: first, same: req.query === first, url: req.url });
  });
  app.use((req, _res, next) => {
    seen.push(req.query);
    next();
  });
  app.use('/a', inner);
  app.get('/rewrite', (req, res) => {
    const before = req.query;
    req.url = '/rewrite?x=2&y=3';
    res.json({ before, after: req.query });
  });

  beforeEach(() => (seen.length = 0));

  test('the parsed query, the same before, inside and after a mounted router', async () => {
    const res = await request(app).get('/a/7?api_key=k&x=1&x=2&e=%C3%A9').expect(200);
    expect(res.body).toEqual({ query: { api_key: 'k', x: ['1', '2'], e: 'é' }, same: true, url: '/7?api_key=k&x=1&x=2&e=%C3%A9' });
    expect(seen).toHaveLength(3);
    for (const q of seen) expect(q).toEqual({ api_key: 'k', x: ['1', '2'], e: 'é' });
  });

  test('each request its own; no query is an empty object', async () => {
    expect((await request(app).get('/a/1').expect(200)).body.query).toEqual({});
    expect((await request(app).get('/a/1?z=9').expect(200)).body.query).toEqual({ z: '9' });
  });

  test('a changed URL is parsed again', async () => {
    expect((await request(app).get('/rewrite?x=1').expect(200)).body).toEqual({ before: { x: '1' }, after: { x: '2', y: '3' } });
  });
});
