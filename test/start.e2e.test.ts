/**
 * `npm start` end to end: the all-in-one process starts embedded PostgreSQL and the Temporal
 * dev server, prints the base URL, the UI URL and (first start only) the credentials, serves
 * the API, stops cleanly on Ctrl-C (SIGINT), and a second start reuses the data.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import pg from 'pg';
import request from 'supertest';
import { freePort } from '../src/infra/temporal-server';

const root = path.resolve(__dirname, '..');

interface Started {
  child: ChildProcess;
  output: () => string;
}

function start(env: Record<string, string>): Promise<Started> {
  const childEnv: Record<string, string> = { ...(process.env as Record<string, string>), LOG_LEVEL: 'info', ...env };
  delete childEnv.DATABASE_URL;
  delete childEnv.TEMPORAL_ADDRESS;
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'src', 'main.ts')], {
    cwd: root,
    env: childEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
    // Its own process group, so stop() can signal the whole tree as Ctrl-C in a terminal does.
    detached: true,
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      clearInterval(check);
      child.kill('SIGKILL');
      reject(new Error(`no start banner after 120 s:\n${out}`));
    }, 120_000);
    child.on('exit', (code) => {
      clearInterval(check);
      clearTimeout(timer);
      reject(new Error(`exited early with ${code}:\n${out}`));
    });
    const check = setInterval(() => {
      if (out.includes('Press Ctrl-C to stop.')) {
        clearInterval(check);
        clearTimeout(timer);
        resolve({ child, output: () => out });
      }
    }, 100);
  });
}

function stop(s: Started): Promise<number | null> {
  return new Promise((resolve) => {
    s.child.removeAllListeners('exit');
    s.child.once('exit', (code) => resolve(code));
    process.kill(-s.child.pid!, 'SIGINT');
  });
}

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    sock.once('connect', () => {
      sock.destroy();
      resolve(true);
    });
    sock.once('error', () => resolve(false));
  });
}

describe('npm start (all in one)', () => {
  jest.setTimeout(300_000);
  // Under the project (not a 0700 mkdtemp folder): as root, PostgreSQL runs as the
  // `postgres` user and must be able to reach its data folder.
  fs.mkdirSync(path.join(root, '.tmp'), { recursive: true });
  const dataDir = path.join(root, '.tmp', `e2e-${process.pid}`);
  afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  test('starts everything, serves the API with the printed credentials, stops on Ctrl-C, reuses data', async () => {
    const ports = { PORT: await freePort(), EMBEDDED_PG_PORT: await freePort(), TEMPORAL_DEV_PORT: await freePort(), TEMPORAL_UI_PORT: await freePort() };
    const env = { DATA_DIR: dataDir, ...Object.fromEntries(Object.entries(ports).map(([k, v]) => [k, String(v)])) };

    const first = await start(env);
    const out = first.output();
    expect(out).toContain(`API base URL: http://127.0.0.1:${ports.PORT}/wp-json/wu/v2/`);
    expect(out).toContain(`Temporal UI:  http://127.0.0.1:${ports.TEMPORAL_UI_PORT}`);
    const key = /API key:\s+(\S+)/.exec(out)![1];
    const secret = /API secret:\s+(\S+)/.exec(out)![1];
    const api = request(`http://127.0.0.1:${ports.PORT}`);
    const created = await api.post('/wp-json/wu/v2/customers').auth(key, secret).send({ username: 'e2euser', email: 'e2e@example.com', password: 'secret123' });
    expect(created.status).toBe(200);
    const ready = await api.get('/readyz');
    expect(ready.body.checks.temporal.workers_polling).toBeGreaterThanOrEqual(1);
    expect(await portOpen(ports.TEMPORAL_UI_PORT)).toBe(true);
    // The console (built by the jest setup, as npm start's build does) links workflows to that UI.
    expect(out).toContain(`Console:      http://127.0.0.1:${ports.PORT}/console/`);
    const consolePage = await api.get('/console/');
    expect(consolePage.status).toBe(200);
    expect(consolePage.text).toContain(`<meta name="hostflow-temporal-ui" content="http://127.0.0.1:${ports.TEMPORAL_UI_PORT}/namespaces/default">`);
    const viaQuery = await api.get('/wp-json/wu/v2/customers').query({ api_key: key, api_secret: secret, search: 'e2e' });
    expect(viaQuery.status).toBe(200);
    // JSON log lines carry the request id; the secret appears once (the banner), never in a log line.
    // Lines are written in batches (up to 100 ms late): wait for both requests' lines.
    const requestLines = () =>
      first
        .output()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l))
        .filter((l) => l.msg === 'request' && l.path === '/wp-json/wu/v2/customers');
    for (let i = 0; i < 50 && requestLines().length < 2; i++) await new Promise((r) => setTimeout(r, 100));
    const requestLine = requestLines().find((l) => l.method === 'POST');
    expect(requestLines().map((l) => l.method)).toEqual(['POST', 'GET']);
    expect(requestLine.request_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(requestLine.status).toBe(200);
    expect(first.output().split(secret).length - 1).toBe(1);
    expect(fs.readFileSync(path.join(dataDir, 'temporal.log'), 'utf8')).not.toContain(secret);
    // A role without grants (as a tenant's) cannot even connect to hostflow's or the server's databases.
    const pgPassword = fs.readFileSync(path.join(dataDir, 'postgres', 'pg-password'), 'utf8').trim();
    const pgUrl = (user: string, password: string, database: string) => `postgres://${user}:${encodeURIComponent(password)}@127.0.0.1:${ports.EMBEDDED_PG_PORT}/${database}`;
    const superuser = new pg.Client({ connectionString: pgUrl('postgres', pgPassword, 'postgres') });
    await superuser.connect();
    await superuser.query("CREATE ROLE e2e_probe LOGIN PASSWORD 'probe-password'");
    await superuser.end();
    for (const database of ['hostflow', 'postgres', 'template1']) {
      const probe = new pg.Client({ connectionString: pgUrl('e2e_probe', 'probe-password', database) });
      await expect(probe.connect()).rejects.toThrow(`permission denied for database "${database}"`);
    }

    expect(await stop(first)).toBe(0);
    for (const p of Object.values(ports)) expect(await portOpen(p)).toBe(false);

    const second = await start(env);
    expect(second.output()).not.toContain('API secret');
    const list = await api.get('/wp-json/wu/v2/customers').auth(key, secret);
    expect(list.status).toBe(200);
    expect(list.body.map((c: { username: string }) => c.username)).toEqual(['e2euser']);
    expect(await stop(second)).toBe(0);
  });

  test('a start that fails half way (the API port is taken) exits 1 and leaves nothing running', async () => {
    const ports = { PORT: await freePort(), EMBEDDED_PG_PORT: await freePort(), TEMPORAL_DEV_PORT: await freePort(), TEMPORAL_UI_PORT: await freePort() };
    const env = { DATA_DIR: `${dataDir}-failed`, ...Object.fromEntries(Object.entries(ports).map(([k, v]) => [k, String(v)])) };
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(ports.PORT, '127.0.0.1', resolve));
    try {
      const failed = await start(env).then(
        () => null,
        (err: Error) => err.message,
      );
      expect(failed).toMatch(/exited early with 1/);
      expect(failed).toMatch(/EADDRINUSE/);
      // PostgreSQL and the Temporal dev server it had started are stopped, not orphaned.
      for (const p of [ports.EMBEDDED_PG_PORT, ports.TEMPORAL_DEV_PORT, ports.TEMPORAL_UI_PORT]) expect(await portOpen(p)).toBe(false);
    } finally {
      await new Promise((resolve) => blocker.close(resolve));
      fs.rmSync(`${dataDir}-failed`, { recursive: true, force: true });
    }
  });
});
