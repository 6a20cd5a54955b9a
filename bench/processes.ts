/**
 * The servers a benchmark measures, each in a process of its own, apart from the load
 * generator (autocannon, in the bench's process): hostflow's API as `npm run start:api` runs
 * it (compiled `dist`, its node flags), and a bare baseline through bench/bare-child.ts.
 * A server that shares its event loop with the load generator waits for autocannon's own work
 * between requests, and that wait would be measured as its latency.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import WebSocket from 'ws';
import type { Config } from '../src/config';
import { freePort } from '../src/infra/temporal-server';

export const ROOT = path.resolve(__dirname, '..');
const PROFILES = path.join(ROOT, '.tmp', 'profiles');

export interface Child {
  proc: ChildProcess;
  pid: number;
  /** Full GC through the inspector, then process.memoryUsage() of the child. */
  gc(): Promise<NodeJS.MemoryUsage>;
  /**
   * A V8 profile of the child while `run` runs: CPU (.tmp/profiles/<name>.cpuprofile), or with
   * BENCH_PROFILE=alloc the sampled allocations (<name>.heapprofile: what makes the garbage).
   */
  profiled<T>(name: string, run: () => Promise<T>): Promise<T>;
  /** The bytes the last allocation profile sampled (its nodes' self sizes: an estimate of what `run` allocated), or undefined. */
  sampledBytes(): number | undefined;
  stop(): Promise<void>;
}

/** The bytes an allocation profile (HeapProfiler.stopSampling) sampled: the sum of its nodes' self sizes. */
function sampledBytesOf(profile: { head: SamplingNode }): number {
  let total = 0;
  const stack = [profile.head];
  while (stack.length > 0) {
    const node = stack.pop()!;
    total += node.selfSize;
    stack.push(...node.children);
  }
  return total;
}
interface SamplingNode {
  selfSize: number;
  children: SamplingNode[];
}

/** The node flags an npm script passes (`node --flag … dist/src/api.js`), so the bench runs what start:api runs. */
export function nodeFlagsOf(script: string): string[] {
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  const words = pkg.scripts[script].split(/\s+/);
  if (words[0] !== 'node') throw new Error(`npm script ${script} does not start with node: ${pkg.scripts[script]}`);
  return words.slice(1, -1);
}

/**
 * The node flags bench:translations and bench:memory start the API with: start:api's, or
 * BENCH_API_FLAGS (space-separated, e.g. `--max-semi-space-size=4`; empty: none), to measure
 * others without editing package.json. Their results files record the flags.
 */
export function apiNodeFlags(): string[] {
  const given = process.env.BENCH_API_FLAGS;
  return given === undefined ? nodeFlagsOf('start:api') : given.split(' ').filter(Boolean);
}

/** `tsc -p tsconfig.build.json` (and, with `workflows`, the workflow bundle, as `npm run build` makes them), unless BENCH_NO_BUILD is set. */
export function buildDist(log: (m: string) => void, opts: { workflows?: boolean } = {}): void {
  if (process.env.BENCH_NO_BUILD) return;
  log('building dist (tsc -p tsconfig.build.json)');
  execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', 'tsconfig.build.json'], { cwd: ROOT, stdio: 'inherit' });
  if (!opts.workflows) return;
  // A worker runs from the workflow bundle (`npm run build` makes it after tsc): a fresh clone has none.
  log('bundling the workflows (dist/src/bundle-workflows.js)');
  execFileSync(process.execPath, [path.join(ROOT, 'dist/src/bundle-workflows.js')], { cwd: ROOT, stdio: 'inherit' });
}

/** `node <flags> --inspect=127.0.0.1:<port> <script>` with `env`; resolves once `ready` matches its output. */
export async function startNode(script: string, flags: string[], env: Record<string, string>, ready: RegExp, log: (m: string) => void): Promise<Child> {
  const inspectPort = await freePort();
  const proc = spawn(process.execPath, [...flags, `--inspect=127.0.0.1:${inspectPort}`, script], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${script} did not start in 60 s:\n${output.slice(-2000)}`)), 60_000);
    const onData = (d: Buffer) => {
      // Keep reading (and dropping) the output so the child never blocks on a full pipe.
      if (output.length < 100_000) output += d.toString();
      if (ready.test(output)) {
        clearTimeout(timer);
        resolve();
      }
    };
    proc.stdout!.on('data', onData);
    proc.stderr!.on('data', onData);
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${script} exited with ${code}:\n${output.slice(-2000)}`));
    });
  });
  log(`node ${[...flags, path.relative(ROOT, script)].join(' ')} running, pid ${proc.pid}`);
  const targets = (await (await fetch(`http://127.0.0.1:${inspectPort}/json/list`)).json()) as { webSocketDebuggerUrl: string }[];
  const ws = new WebSocket(targets[0].webSocketDebuggerUrl);
  await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
  let id = 0;
  let lastSampled: number | undefined;
  const call = (method: string, params: object = {}) =>
    new Promise<any>((resolve, reject) => {
      const mine = ++id;
      const onMessage = (data: WebSocket.RawData) => {
        const msg = JSON.parse(data.toString());
        if (msg.id !== mine) return;
        ws.off('message', onMessage);
        if (msg.error) reject(new Error(msg.error.message));
        else resolve(msg.result);
      };
      ws.on('message', onMessage);
      ws.send(JSON.stringify({ id: mine, method, params }));
    });
  return {
    proc,
    pid: proc.pid!,
    async gc() {
      await call('HeapProfiler.collectGarbage');
      const r = await call('Runtime.evaluate', { expression: 'JSON.stringify(process.memoryUsage())', returnByValue: true });
      return JSON.parse(r.result.value);
    },
    async profiled(name, run) {
      const alloc = process.env.BENCH_PROFILE === 'alloc';
      if (alloc) await call('HeapProfiler.startSampling', { samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
      else {
        await call('Profiler.enable');
        await call('Profiler.start');
      }
      try {
        return await run();
      } finally {
        const { profile } = alloc ? await call('HeapProfiler.stopSampling') : await call('Profiler.stop');
        lastSampled = alloc ? sampledBytesOf(profile) : undefined;
        fs.mkdirSync(PROFILES, { recursive: true });
        const file = path.join(PROFILES, `${name.replace(/[^\w.-]+/g, '_')}.${alloc ? 'heapprofile' : 'cpuprofile'}`);
        fs.writeFileSync(file, JSON.stringify(profile));
        log(`${alloc ? 'allocation' : 'CPU'} profile of pid ${proc.pid}: ${path.relative(ROOT, file)}`);
      }
    },
    sampledBytes: () => lastSampled,
    async stop() {
      ws.close();
      if (proc.exitCode !== null) return;
      const exited = new Promise((resolve) => proc.once('exit', resolve));
      proc.kill('SIGTERM');
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 10_000))]);
      if (proc.exitCode === null) proc.kill('SIGKILL');
    },
  };
}

/** What start:api and start:worker read: the bench's database, Temporal and credentials, nothing else from this process's config. */
export function serviceEnv(config: Config, extra: Record<string, string> = {}): Record<string, string> {
  return {
    DATABASE_URL: config.DATABASE_URL!,
    TEMPORAL_ADDRESS: config.TEMPORAL_ADDRESS!,
    TEMPORAL_NAMESPACE: config.TEMPORAL_NAMESPACE,
    TEMPORAL_TASK_QUEUE: config.TEMPORAL_TASK_QUEUE,
    WU_API_KEY: config.WU_API_KEY!,
    WU_API_SECRET: config.WU_API_SECRET!,
    HOST: '127.0.0.1',
    PORT: String(config.PORT),
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
    ...extra,
  };
}

/** hostflow's API as `npm run start:api` runs it (build dist first: buildDist), on config.PORT; `flags`: other node flags (apiNodeFlags). */
export function startApiProcess(config: Config, log: (m: string) => void, extra: Record<string, string> = {}, flags = nodeFlagsOf('start:api')): Promise<Child> {
  return startNode(path.join(ROOT, 'dist/src/api.js'), flags, serviceEnv(config, extra), /API listening/, log);
}

/**
 * A bare baseline server in a process of its own: bench/bare-child.ts loads `module` (a path
 * under bench/) and awaits its export `name(env)`, which listens on env.PORT. Resolves with the
 * child and its root URL.
 */
export async function startBareProcess(module: string, name: string, env: Record<string, string>, log: (m: string) => void): Promise<{ child: Child; root: string }> {
  const port = await freePort();
  const child = await startNode(
    path.join(__dirname, 'bare-child.ts'),
    ['--import', 'tsx'],
    { BARE_MODULE: module, BARE_EXPORT: name, PORT: String(port), ...env },
    /bare listening/,
    log,
  );
  return { child, root: `http://127.0.0.1:${port}` };
}
