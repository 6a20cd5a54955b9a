/**
 * A bare baseline server in a process of its own (see bench/processes.ts): loads
 * bench/<BARE_MODULE>, awaits its export BARE_EXPORT(process.env) (which listens on PORT), says
 * "bare listening", and closes on SIGTERM.
 */
import type http from 'node:http';
import path from 'node:path';

type Start = (env: NodeJS.ProcessEnv) => Promise<http.Server>;

async function main(): Promise<void> {
  const { BARE_MODULE, BARE_EXPORT } = process.env;
  if (!BARE_MODULE || !BARE_EXPORT) throw new Error('BARE_MODULE and BARE_EXPORT are required');
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const start = (require(path.join(__dirname, BARE_MODULE)) as Record<string, Start>)[BARE_EXPORT];
  if (typeof start !== 'function') throw new Error(`${BARE_MODULE} exports no function ${BARE_EXPORT}`);
  const server = await start(process.env);
  process.stdout.write('bare listening\n');
  process.once('SIGTERM', () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
